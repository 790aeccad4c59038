"""The step loop shared by the integrations that own the loop (plain torchrun scripts, Accelerate):
resume, then at every step boundary the agreed stop and the checkpoint schedule."""

from __future__ import annotations

import time
from collections.abc import Iterator

from ..worker import Worker, current


class StepLoop:
    """Subclasses say how to save and restore; `steps(total)` does the rest."""

    def __init__(self) -> None:
        self.worker: Worker = current()
        self.worker.handle_stop_signals()
        self.start_step = 0

    def _restore(self) -> int:
        """Load the newest verified checkpoint; the step it holds (0 for a fresh start)."""
        raise NotImplementedError

    def _save(self, step: int, *, wait: bool) -> None:
        raise NotImplementedError

    def _settle(self) -> None:
        """Wait for any save still in flight."""

    def steps(self, total: int) -> Iterator[int]:
        """The steps still to run, `start_step` to `total - 1`. After each, on every rank: a stop
        signal on any pod saves and ends the worker with 143; a due checkpoint is saved. After
        the last, training is declared finished."""
        step = self.start_step
        while step < total:
            yield step
            step += 1
            stop, due = self.worker.boundary(step)
            if stop or due:
                started = time.monotonic()
                self._save(step, wait=stop)
                self.worker.saved(step, time.monotonic() - started)
            if stop:
                self.worker.exit_stopped(step)
        self._settle()
        self.worker.declare_finished(step)
