"""The launcher's and trainer's JSON log lines (trainer/README.md, trainer/launcher/progress.py),
read by event name: unknown events and unknown fields are ignored, so trainers may log more.

Pure: parsing, the loss trend test, and the checkpoint cadence.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

LAUNCHER_START = "launcher_start"
TRAINER_START = "trainer_start"
STEP = "step"
CHECKPOINT_SAVED = "checkpoint_saved"
# Events after which no further checkpoint is due.
END_EVENTS = frozenset({"training_complete", "stopped", "launcher_exit"})
# The launcher's contract errors go to stderr as one plain line (trainer/README.md).
LAUNCHER_ERROR_PREFIX = "launcher: error:"

# Mann-Kendall: at least this many logged steps before a trend means anything, one-sided 5 %.
MIN_TREND_POINTS = 10
FALLING_Z = -1.645
# The test is O(n^2); an even subsample keeps the trend and bounds the work.
MAX_TREND_POINTS = 400
# A checkpoint is late when the gap exceeds this many periods (checkpoints must land "on the expected period").
LATE_PERIODS = 2
# No logged step for this many of the usual gaps between logged steps is a hang.
STALL_INTERVALS = 3


@dataclass(frozen=True)
class Event:
    name: str
    ts: float | None
    fields: dict[str, Any]
    pod: str


def parse_events(text: str, pod: str = "") -> list[Event]:
    """Every JSON object line with an "event" key; anything else (torchrun, NCCL) is skipped."""
    events = []
    for line in text.splitlines():
        start = line.find("{")
        if start < 0 or '"event"' not in line:
            continue
        try:
            record = json.loads(line[start:])
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("event"), str):
            continue
        ts = record.get("ts")
        events.append(Event(record["event"], float(ts) if isinstance(ts, int | float) else None, record, pod))
    return events


def launcher_errors(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith(LAUNCHER_ERROR_PREFIX)]


# What a `launcher: error:` line is about, by the words the launcher writes (trainer/launcher:
# gang.py's unreachable rendezvous and restart budget, fabric.py's failure_message, main.py's
# torchrun start); any other is a contract error: a TRAIN_* variable missing or invalid.
LAUNCHER_ERROR_KINDS = (("rendezvous", "the rendezvous host "), ("fabric", "fabric check failed"),
                        ("start", "cannot start torchrun"), ("budget", "the gang has restarted "))


def launcher_error_kind(line: str) -> str:
    """rendezvous, fabric, start, budget or config."""
    message = line.removeprefix(LAUNCHER_ERROR_PREFIX).strip()
    return next((kind for kind, words in LAUNCHER_ERROR_KINDS if message.startswith(words)), "config")


def stall_after_seconds(step_times: list[float], floor: float) -> float:
    """How long without a logged step is a hang: `floor`, or more when the trainer logs its steps
    further apart (every `log_every` steps): STALL_INTERVALS of its median gap."""
    gaps = sorted(b - a for a, b in itertools.pairwise(sorted(step_times)) if b > a)
    return max(floor, STALL_INTERVALS * gaps[len(gaps) // 2]) if gaps else floor


def current_run(events: list[Event]) -> list[Event]:
    """Events from the latest trainer_start on (a resumed run restarts the story), in time order."""
    ordered = sorted(events, key=lambda e: e.ts if e.ts is not None else -math.inf)
    starts = [i for i, e in enumerate(ordered) if e.name == TRAINER_START]
    return ordered[starts[-1]:] if starts else ordered


def losses(events: list[Event]) -> list[float]:
    values = []
    for e in events:
        loss = e.fields.get("loss")
        if e.name == STEP and isinstance(loss, int | float) and math.isfinite(loss):
            values.append(float(loss))
    return values


@dataclass(frozen=True)
class Trend:
    points: int
    z: float
    """Mann-Kendall statistic; negative = falling."""
    first: float
    last: float

    @property
    def falling(self) -> bool:
        return self.points >= MIN_TREND_POINTS and self.z <= FALLING_Z


def loss_trend(values: list[float]) -> Trend:
    """Mann-Kendall trend test: every later point against every earlier one, so one noisy pair
    (or a spike) cannot decide it, and no linear shape is assumed."""
    if len(values) > MAX_TREND_POINTS:
        stride = len(values) / MAX_TREND_POINTS
        values = [values[int(i * stride)] for i in range(MAX_TREND_POINTS)]
    n = len(values)
    if n < 2:
        return Trend(n, 0.0, values[0] if values else math.nan, values[-1] if values else math.nan)
    s = sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n - 1) for j in range(i + 1, n))
    ties = sum(t * (t - 1) * (2 * t + 5) for t in Counter(values).values() if t > 1)
    variance = (n * (n - 1) * (2 * n + 5) - ties) / 18
    z = 0.0 if s == 0 or variance <= 0 else (s - math.copysign(1, s)) / math.sqrt(variance)
    return Trend(n, z, statistics.median(values[: max(1, n // 10)]), statistics.median(values[-max(1, n // 10):]))


@dataclass(frozen=True)
class Cadence:
    """How checkpoints kept to their period in the current run."""

    unit: str
    """"s" (a time interval) or "steps" (TRAIN_CHECKPOINT_EVERY_STEPS)."""
    period: float
    worst_gap: float
    """The longest stretch without a completed checkpoint, the open one up to now included."""
    saves: int

    @property
    def late(self) -> bool:
        return self.worst_gap > LATE_PERIODS * self.period


def checkpoint_cadence(run: list[Event], now: float) -> Cadence | None:
    """None when the trainer logged no period (trainer_start.checkpoint_interval_s or
    checkpoint_every_steps) to hold it to."""
    start = next((e for e in run if e.name == TRAINER_START), None)
    if start is None:
        return None
    every_steps = start.fields.get("checkpoint_every_steps")
    saves = [e for e in run if e.name == CHECKPOINT_SAVED]
    end = next((e for e in run if e.name in END_EVENTS), None)
    if isinstance(every_steps, int) and every_steps > 0:
        steps = [int(e.fields["step"]) for e in run if e.name == STEP and isinstance(e.fields.get("step"), int)]
        marks = [int(start.fields.get("start_step") or 0)] + [int(e.fields.get("step") or 0) for e in saves]
        latest = max(steps, default=marks[-1])
        gaps = [b - a for a, b in itertools.pairwise(marks)] + [latest - marks[-1]]
        return Cadence("steps", float(every_steps), float(max(gaps)), len(saves))
    interval = start.fields.get("checkpoint_interval_s")
    if not isinstance(interval, int | float) or interval <= 0 or start.ts is None:
        return None
    # Each save logs the interval it schedules next; the gap after it is held to that one.
    periods = [float(interval)] + [float(e.fields.get("next_interval_s") or interval) for e in saves]
    marks = [start.ts] + [e.ts or start.ts for e in saves]
    until = end.ts if end is not None and end.ts is not None else now
    ends = [*marks[1:], until]
    ratios = [(b - a) / p for a, b, p in zip(marks, ends, periods, strict=True)]
    worst = max(range(len(ratios)), key=lambda i: ratios[i])
    # Reported in the period of the worst gap, so `late` compares like with like.
    return Cadence("s", periods[worst], ends[worst] - marks[worst], len(saves))
