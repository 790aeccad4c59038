"""Progress reporting for trainers: structured JSON logs and the heartbeat.

The heartbeat is the liveness signal of the pod: the trainer calls
`Progress.step(...)` once per optimizer step, and (on local rank 0, at most
every `heartbeat_min_interval_s`) that rewrites TRAIN_HEARTBEAT_FILE with
{"step": N, "unix": T}. Nothing else refreshes it: not the launcher, not a
thread. A training loop that stalls (hung collective, dead data pipeline,
deadlock) stops calling `step`, the file's mtime stops advancing and
`heartbeat-check <max_age>` in the liveness probe fails.

Log lines are one JSON object per line on stdout, written by global rank 0 (who also writes
the same figures as TensorBoard scalars next to the checkpoints: launcher.events):

    {"ts": 1712.3, "event": "step", "step": 120, "loss": 0.61, "samples_per_s": 5120.4, ...}

`log(event, **fields)` writes any other event (checkpoint_saved,
checkpoint_resumed, ...) from the calling process.
"""

from __future__ import annotations

import json
import math
import os
import time

from . import events
from .log_line import log


class Heartbeat:
    """Rewrites the heartbeat file atomically (temp file + rename)."""

    def __init__(self, path: str | None, min_interval_s: float = 0.5):
        self.path = path
        self.min_interval_s = min_interval_s
        self._last = -math.inf
        if path:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)

    def beat(self, step: int | None = None, force: bool = False) -> bool:
        if not self.path:
            return False
        now = time.monotonic()
        if not force and now - self._last < self.min_interval_s:
            return False
        self._last = now
        tmp = f"{self.path}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(json.dumps({"step": step, "unix": round(time.time(), 3)}) + "\n")
        os.replace(tmp, self.path)
        return True


_EXPLICIT_STEPS = False


def explicit_steps() -> bool:
    """Whether this process reports its steps through `Progress.step` (launcher.autoprogress then
    leaves the step lines to it)."""
    return _EXPLICIT_STEPS


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


class Progress:
    """Per-step hook for a training loop.

    rank/local_rank default to torchrun's RANK/LOCAL_RANK; heartbeat_file to
    TRAIN_HEARTBEAT_FILE. Only local rank 0 touches the heartbeat (every rank
    of a DDP job blocks in the same collectives, so one writer per pod is
    enough) and only global rank 0 logs.
    """

    def __init__(
        self,
        heartbeat_file: str | None = None,
        *,
        rank: int | None = None,
        local_rank: int | None = None,
        log_every: int = 1,
        heartbeat_min_interval_s: float = 0.5,
        stream=None,
        explicit: bool = True,
    ):
        self._explicit = explicit  # False only for launcher.autoprogress's own reporter
        self.rank = _env_int("RANK", 0) if rank is None else rank
        self.local_rank = _env_int("LOCAL_RANK", 0) if local_rank is None else local_rank
        if heartbeat_file is None:
            heartbeat_file = os.environ.get("TRAIN_HEARTBEAT_FILE") or None
        self.heartbeat = Heartbeat(
            heartbeat_file if self.local_rank == 0 else None, heartbeat_min_interval_s
        )
        self.log_every = max(1, int(log_every))
        self.stream = stream
        self._window_samples = 0
        self._window_steps = 0
        self._window_start = time.monotonic()

    def beat(self, step: int | None = None) -> None:
        """Refresh the heartbeat outside the step loop (after resume, a save)."""
        self.heartbeat.beat(step, force=True)

    def step(self, step: int, *, loss: float | None = None, samples: int = 0, **extra) -> None:
        """Report one finished optimizer step (`samples` = samples in it, all ranks)."""
        self.heartbeat.beat(step)
        if self._explicit:
            global _EXPLICIT_STEPS
            _EXPLICIT_STEPS = True
        self._window_samples += samples
        self._window_steps += 1
        if self.rank != 0 or step % self.log_every != 0:
            return
        now = time.monotonic()
        elapsed = max(now - self._window_start, 1e-9)
        rates = {"steps_per_s": round(self._window_steps / elapsed, 3)}
        if self._window_samples:  # unknown without the trainer's or the workload's word
            rates["samples_per_s"] = round(self._window_samples / elapsed, 1)
        self._window_samples = self._window_steps = 0
        self._window_start = now
        events.shared_writer(self.rank).scalars(step, {
            "train/loss": None if loss is None else float(loss),
            "train/samples_per_s": rates.get("samples_per_s"),
            "train/steps_per_s": rates["steps_per_s"],
        })
        log(
            "step",
            stream=self.stream,
            step=step,
            loss=None if loss is None else round(float(loss), 6),
            **rates,
            **extra,
        )

    def event(self, event: str, **fields) -> None:
        """Log an event from global rank 0 only."""
        if self.rank == 0:
            log(event, stream=self.stream, **fields)
