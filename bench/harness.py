"""The one way every benchmark of `make bench` measures a goal: a project side against its floor,
in pairs, and a verdict from the paired ratio.

- Pairs are interleaved and their order rotates: pair 0 runs (project, floor), pair 1 (floor,
  project), ..., so what ran just before (a cold read, a 1 GiB write, a busy neighbour) falls on
  both sides alike.
- Warm-up pairs run first, in the same rotated order, and are discarded; their count is printed.
- No head start: a `before` hook runs before every run of either side (drop the page cache,
  touch the buffers), so both start from the same process and cache state.
- Each side's figure is a time (`Sample.wall`, and `Sample.cpu` for whole processes: the child's
  user + system CPU, which a busy machine inflates far less than wall time). A goal's ratio is
  project / floor of times (lower is better, "<=") or floor / project (the project's speed over
  the floor's, ">="), printed three ways: ratio of the medians, ratio of the minimums, and the
  median (with range) of the per-pair ratios. The verdict, `met` or `not met`, is read off the
  paired median by the goal's own measure (wall or CPU): a pair ran at the same moment, so
  the load it met cancels out of its ratio better than out of two medians taken apart.
- The load average is recorded before and after, and the whole report is written as JSON
  (`Report.save`), each bench under its own section of one file.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Measure = Literal["wall", "cpu"]
Op = Literal["<=", ">="]


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float | None = None
    """User + system CPU seconds (of a child process); None for an in-process figure."""


# ---------------------------------------------------------------- statistics (pure)


def ratio(top: float, bottom: float) -> float:
    return top / bottom if bottom > 0 else float("inf")


def paired_ratios(top: Sequence[float], bottom: Sequence[float]) -> list[float]:
    """top[i] / bottom[i] for each pair."""
    if len(top) != len(bottom):
        raise ValueError(f"{len(top)} against {len(bottom)} values: not pairs")
    return [ratio(t, b) for t, b in zip(top, bottom, strict=True)]


def ratio_of_medians(top: Sequence[float], bottom: Sequence[float]) -> float:
    return ratio(statistics.median(top), statistics.median(bottom))


def ratio_of_minimums(top: Sequence[float], bottom: Sequence[float]) -> float:
    return ratio(min(top), min(bottom))


def meets(value: float, op: Op, threshold: float) -> bool:
    return value <= threshold if op == "<=" else value >= threshold


def rotation(pair: int, sides: int = 2) -> list[int]:
    """The order in which the sides (0 = project, 1 = floor, ...) run in pair number `pair`:
    rotated by one each pair, so every side runs first equally often."""
    shift = pair % sides
    return [*range(shift, sides), *range(shift)]


@dataclass(frozen=True)
class Goal:
    op: Op
    threshold: float
    by: Measure = "wall"

    @property
    def text(self) -> str:
        return f"{self.op} {self.threshold:g} by paired {self.by} ratio"


@dataclass
class Result:
    name: str
    project: str
    floor: str
    goal: Goal | None
    """None: a figure printed to explain the others, with no verdict."""
    project_samples: list[Sample]
    floor_samples: list[Sample]
    warmup: int
    note: str = ""
    orient: Op = "<="
    """How a result without a goal reads: "<=" project / floor of times, ">=" floor / project
    (a speed ratio). A goal's own op decides for a result with one."""

    def times(self, side: Literal["project", "floor"], by: Measure) -> list[float]:
        samples = self.project_samples if side == "project" else self.floor_samples
        values = [s.wall if by == "wall" else s.cpu for s in samples]
        return [v for v in values if v is not None]

    def ratios(self, by: Measure) -> dict[str, float] | None:
        """The three ratios, oriented as the goal reads them (">=": floor / project)."""
        project, floor = self.times("project", by), self.times("floor", by)
        if not project or not floor or len(project) != len(floor):
            return None
        op = self.goal.op if self.goal else self.orient
        top, bottom = (floor, project) if op == ">=" else (project, floor)
        paired = paired_ratios(top, bottom)
        return {"medians": ratio_of_medians(top, bottom), "minimums": ratio_of_minimums(top, bottom),
                "paired_median": statistics.median(paired), "paired_min": min(paired), "paired_max": max(paired)}

    @property
    def verdict(self) -> str | None:
        if self.goal is None:
            return None
        ratios = self.ratios(self.goal.by)
        if ratios is None:
            return "not measured"
        return "met" if meets(ratios["paired_median"], self.goal.op, self.goal.threshold) else "not met"

    def as_json(self) -> dict:
        return {
            "name": self.name, "project": self.project, "floor": self.floor,
            "goal": asdict(self.goal) if self.goal else None, "verdict": self.verdict,
            "orient": self.goal.op if self.goal else self.orient,
            "pairs": len(self.project_samples), "warmup": self.warmup, "note": self.note,
            "ratios": {by: self.ratios(by) for by in ("wall", "cpu") if self.ratios(by)},
            "seconds": {side: {by: {"median": statistics.median(v), "min": min(v)}
                               for by in ("wall", "cpu") if (v := self.times(side, by))}
                        for side in ("project", "floor")},
        }


def format_result(result: Result) -> list[str]:
    """The lines a result prints: both sides' times, then each measure's ratios and the verdict."""
    lines = []
    for side, label in (("project", result.project), ("floor", result.floor)):
        parts = [f"{by} median {statistics.median(v):8.4f} s  min {min(v):8.4f} s"
                 for by in ("wall", "cpu") if (v := result.times(side, by))]  # type: ignore[arg-type]
        lines.append(f"    {label:<52} " + "   ".join(parts))
    for by in ("wall", "cpu"):
        ratios = result.ratios(by)
        if ratios is None:
            continue
        judged = result.goal is not None and result.goal.by == by
        lines.append(f"    {by:<4} {ratios['medians']:6.2f}x of medians  {ratios['minimums']:6.2f}x of minimums  "
                     f"paired {ratios['paired_median']:6.2f}x ({ratios['paired_min']:.2f}-{ratios['paired_max']:.2f})"
                     + ("   <- judged" if judged else ""))
    goal = f"goal {result.goal.text}: {result.verdict}" if result.goal else "shown, no goal"
    head = f"  {result.name}  [{len(result.project_samples)} pairs, {result.warmup} warm-up discarded; {goal}]"
    return [head, *lines, *([f"    note: {result.note}"] if result.note else [])]


# ---------------------------------------------------------------------- running


def timed(fn: Callable[[], object]) -> Sample:
    """Wall time of an in-process call."""
    started = time.perf_counter()
    fn()
    return Sample(time.perf_counter() - started)


def timed_process(command: Sequence[str], *, cwd: str | Path | None = None, env: dict | None = None) -> Sample:
    """Wall time and the child's own CPU time (user + system, its children included once they
    are waited for) of one process run to its end; CalledProcessError if it fails."""
    started = time.perf_counter()
    process = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    _, err = process.communicate()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, list(command), stderr=err)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu)


Side = Callable[[], Sample]


def run_pairs(name: str, project: tuple[str, Side], floor: tuple[str, Side], *, pairs: int, warmup: int = 1,
              goal: Goal | None = None, before: Callable[[], object] | None = None, note: str = "",
              orient: Op = "<=") -> Result:
    """`warmup` + `pairs` pairs of (project, floor), order rotated each pair, `before()` ahead of
    every single run; the warm-up pairs are discarded."""
    sides = (project[1], floor[1])
    kept: tuple[list[Sample], list[Sample]] = ([], [])
    for index in range(warmup + pairs):
        got: dict[int, Sample] = {}
        for side in rotation(index):
            if before is not None:
                before()
            got[side] = sides[side]()
        if index >= warmup:
            kept[0].append(got[0])
            kept[1].append(got[1])
    return Result(name, project[0], floor[0], goal, kept[0], kept[1], warmup, note, orient)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass
class Report:
    """One bench's results, printed as text and saved as a section of a JSON file."""

    section: str
    results: list[Result] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    load_before: list[float] = field(default_factory=load_average)

    def add(self, result: Result) -> Result:
        self.results.append(result)
        for line in format_result(result):
            print(line, flush=True)
        return result

    def as_json(self) -> dict:
        return {
            "measured": datetime.date.today().isoformat(),
            "machine": {"cpus": os.cpu_count(), "system": platform.system(), "machine": platform.machine(),
                        "python": platform.python_version()},
            "load_average": {"before": self.load_before, "after": load_average()},
            "results": [r.as_json() for r in self.results],
            **self.extra,
        }

    def save(self, path: Path) -> dict:
        """Write this section into `path` (other sections kept); returns the section."""
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            whole = json.loads(path.read_text())
        except (OSError, ValueError):
            whole = {}
        section = whole[self.section] = self.as_json()
        path.write_text(json.dumps(whole, indent=1, sort_keys=True) + "\n")
        verdicts = [r for r in self.results if r.goal]
        print(f"{self.section}: {sum(r.verdict == 'met' for r in verdicts)} of {len(verdicts)} goals met "
              f"(load average {section['load_average']['before'][0]} before, "
              f"{section['load_average']['after'][0]} after, on {os.cpu_count()} CPUs); JSON: {path}")
        return section
