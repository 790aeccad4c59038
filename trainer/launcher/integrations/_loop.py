"""The step loop shared by the integrations that own the loop (plain torchrun scripts, Accelerate):
resume, then at every step boundary the agreed stop and the checkpoint schedule."""

from __future__ import annotations

import time
from collections.abc import Iterator

from .. import autoprogress
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

    def _save_in_memory(self, step: int) -> float:
        """A memory copy (launcher.memory_tier) of `step`, where the integration keeps one; the
        seconds the loop stood still."""
        return 0.0

    def _settle(self) -> None:
        """Wait for any save still in flight."""

    def steps(self, total: int) -> Iterator[int]:
        """The steps still to run, `start_step` to `total - 1`. After each, on every rank: a stop
        signal on any pod saves and ends the worker with 143; a due checkpoint is saved. After
        the last, training is declared finished."""
        step = self.start_step
        while step < total:
            optimizer_steps = autoprogress.REPORTER.optimizer_steps
            yield step
            step += 1
            if step == self.start_step + 1:
                self._say_if_coarse(autoprogress.REPORTER.optimizer_steps - optimizer_steps)
            stop, due = self.worker.boundary(step)
            if stop or due:
                started = time.monotonic()
                self._save(step, wait=stop)
                self.worker.saved(step, time.monotonic() - started)
            elif self.worker.memory_due:
                self.worker.saved_in_memory(step, self._save_in_memory(step))
            if stop:
                self.worker.exit_stopped(step)
        self._settle()
        self.worker.declare_finished(step)

    def _say_if_coarse(self, optimizer_steps: int) -> None:
        """A loop step of many optimizer steps (`steps(epochs)` around an epoch loop) is a step to
        the launcher: a stop waits for its end and checkpoints come once per loop step. Said once."""
        if optimizer_steps > 1:
            self.worker.event("coarse_loop_steps", optimizer_steps_per_loop_step=optimizer_steps,
                              note="a stop and a checkpoint wait for the end of each loop step (an epoch?): "
                                   "loop over batches for a stop within seconds")
