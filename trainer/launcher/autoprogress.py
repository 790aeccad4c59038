"""Liveness for any PyTorch trainer: heartbeat, step and rate from optimizer steps, no user code.

`launcher.worker_hooks` registers `on_optimizer_step` as PyTorch's global optimizer-step post
hook (`torch.optim.optimizer.register_optimizer_step_post_hook`, which fires after the `step()`
of every optimizer of the process). Each step of the process's first optimizer to step is one
training step: it refreshes TRAIN_HEARTBEAT_FILE (local rank 0, at most every 0.5 s) and every
TRAIN_LOG_EVERY_STEPS steps rank 0 writes a `step` line. Steps of other optimizers (a GAN's
second one) refresh the heartbeat only.

The step number counts optimizer steps since the process started; an integration that resumed
at step N calls `align(N)`, and may `note(samples_per_step=...)` for the step lines (the loss is
known only after the step hook fired: integrations log it in `loss` lines of their own).
TRAIN_SAMPLES_PER_STEP, when the workload sets it, gives samples/s without any code. A trainer
that reports its steps itself through `launcher.progress.Progress` keeps its own step lines: from
its first `Progress.step` on, this reporter only keeps the heartbeat.
"""

from __future__ import annotations

import os
from typing import Any

from . import progress


def _positive_int(name: str) -> int | None:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return None
    return value if value > 0 else None


class StepReporter:
    def __init__(self) -> None:
        self.step = 0
        """The training step the last optimizer step finished (optimizer steps since start + offset)."""
        self.stepped = False
        """Whether any optimizer of this process has stepped yet."""
        self.optimizer_steps = 0
        """Steps of the first optimizer to step, never aligned (integrations compare their own steps)."""
        self._primary: int | None = None
        self._samples_per_step = _positive_int("TRAIN_SAMPLES_PER_STEP") or 0
        self._progress = progress.Progress(log_every=_positive_int("TRAIN_LOG_EVERY_STEPS") or 10, explicit=False)

    def on_optimizer_step(self, optimizer: Any, _args: Any = None, _kwargs: Any = None) -> None:
        self.stepped = True
        if self._primary is None:
            self._primary = id(optimizer)
        if id(optimizer) != self._primary:
            self._progress.beat(self.step)
            return
        self.step += 1
        self.optimizer_steps += 1
        if progress.explicit_steps():
            self._progress.heartbeat.beat(self.step)
            return
        self._progress.step(self.step, samples=self._samples_per_step)

    def align(self, step: int) -> None:
        """The step the trainer is at now (after a resume); refreshes the heartbeat."""
        self.step = step
        self._progress.beat(step)

    def note(self, *, samples_per_step: int) -> None:
        self._samples_per_step = int(samples_per_step)


REPORTER = StepReporter()
