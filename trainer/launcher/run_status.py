"""The run's figures as the launcher of global rank 0 sees them: step, rate, ETA, loss, the newest
committed checkpoint, restarts. Pure bookkeeping (no I/O): launcher.status_publisher puts them
where tools read them (an annotation on the pod, a `run_status` log line).

Where the figures come from: the JSON lines the launcher routes from its workers
(launcher.supervisor.route_output). Only global rank 0 writes `step`, `loss` and
`checkpoint_saved` lines (launcher.progress, launcher.worker), so the pod that sees one is the pod
of rank 0, wherever torchrun's rendezvous put it; the other pods' launchers see none and publish
nothing. The clock is the launcher's own, so `since_step_s` keeps growing while the loop hangs.

The ETA needs the run's total steps: a `total_steps` field of a step line
(`progress.step(step, loss=..., total_steps=N)`) or TRAIN_TOTAL_STEPS; without either there is none.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .schedule import checkpoint_interval

STEP_EVENTS = ("step", "loss")  # Progress.step and the integrations' Worker.log_loss
CHECKPOINT_EVENTS = ("checkpoint_saved",)  # Worker.saved: a committed checkpoint
# The launcher's first guess of a save's cost before one is measured (schedule.CheckpointSchedule).
INITIAL_COST_S = 30.0
ANNOTATION_VERSION = 1


def _number(value: Any) -> float | None:
    """A finite number from a log field (the lines write NaN/inf as strings: log_line._clean)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _utc(epoch: float | None) -> str | None:
    return None if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


@dataclass(frozen=True)
class Schedule:
    """What the launcher knows of the checkpoint schedule (the contract's TRAIN_* values)."""

    mtbf_s: float
    interval_override_s: float | None = None
    every_steps: int | None = None


class RunStatus:
    """Figures of one run, updated from the routed lines (thread-safe: the router thread writes,
    the publisher thread reads)."""

    def __init__(self, *, restarts: int | None, schedule: Schedule, total_steps: int | None = None,
                 resumed: tuple[int, float] | None = None, clock: Callable[[], float] = time.time):
        self._lock = threading.Lock()
        self._clock = clock
        self.started = clock()
        self.restarts = restarts
        self.schedule = schedule
        self.total_steps = total_steps
        self.step: int | None = None
        self.step_time: float | None = None
        self.steps_per_s: float | None = None
        self.loss: float | str | None = None
        self.checkpoint_step, self.checkpoint_time = resumed if resumed else (None, None)
        self.save_cost_s: float | None = None
        self.seen_rank0 = False
        """Whether a line only global rank 0 writes came through this launcher."""

    def observe(self, record: Mapping[str, Any]) -> None:
        event = record.get("event")
        if event not in STEP_EVENTS and event not in CHECKPOINT_EVENTS:
            return
        with self._lock:
            self.seen_rank0 = True
            if event in CHECKPOINT_EVENTS:
                self._saved(record)
                return
            step = record.get("step")
            if isinstance(step, int) and not isinstance(step, bool):
                self.step, self.step_time = step, self._clock()
            rate = _number(record.get("steps_per_s"))
            if rate is not None:
                self.steps_per_s = rate
            if "loss" in record and record["loss"] is not None:
                loss = record["loss"]
                # A non-finite loss stays visible as the line wrote it ("nan"): it is the news.
                self.loss = loss if isinstance(loss, str) else _number(loss)
            total = record.get("total_steps")
            if isinstance(total, int) and not isinstance(total, bool) and total > 0:
                self.total_steps = total

    def _saved(self, record: Mapping[str, Any]) -> None:
        step = record.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            self.checkpoint_step = step
        self.checkpoint_time = _number(record.get("ts")) or self._clock()
        cost = _number(record.get("duration_s"))
        if cost is not None and cost > 0:
            self.save_cost_s = cost

    def expected_interval_s(self) -> float | None:
        """The seconds between checkpoints the worker's schedule aims at (schedule.CheckpointSchedule):
        steps mode through the step rate, else the override or Young's interval of the last save's cost."""
        s = self.schedule
        if s.every_steps is not None:
            return s.every_steps / self.steps_per_s if self.steps_per_s else None
        try:
            return checkpoint_interval(self.save_cost_s or INITIAL_COST_S, s.mtbf_s, s.interval_override_s)
        except ValueError:
            return None

    def snapshot(self) -> dict[str, Any]:
        """The figures now, as published (seconds, UTC times; None where unknown)."""
        with self._lock:
            now = self._clock()
            eta = None
            if self.total_steps and self.step is not None and self.steps_per_s:
                eta = max(0, round((self.total_steps - self.step) / self.steps_per_s))
            since_save = now - (self.checkpoint_time if self.checkpoint_time is not None else self.started)
            interval = self.expected_interval_s()
            return {
                "v": ANNOTATION_VERSION,
                "step": self.step,
                "total_steps": self.total_steps,
                "steps_per_s": self.steps_per_s,
                "eta_s": eta,
                "loss": self.loss,
                "checkpoint_step": self.checkpoint_step,
                "checkpoint_time": _utc(self.checkpoint_time),
                "checkpoint_age_s": round(since_save),
                # Seconds since the last save (or this start) in intervals the schedule aims at: the
                # checkpoint-age alarm of any job, whatever its interval (observability/training_metrics.py).
                "checkpoint_intervals": None if not interval else round(since_save / interval, 2),
                "since_step_s": round(now - (self.step_time if self.step_time is not None else self.started)),
                "restarts": self.restarts,
                "updated": _utc(now),
            }
