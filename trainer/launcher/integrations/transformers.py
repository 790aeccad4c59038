"""Hugging Face `transformers.Trainer`. Two lines:

    from launcher.integrations.transformers import train
    train(trainer)            # was: trainer.train()

`train` checks the TrainingArguments' types (YAML reads `3e-4` as text: exit 2, no restart
spent), points `output_dir` at TRAIN_CHECKPOINT_DIR and leaves the keep count to the launcher
(HF's `save_total_limit` rotation would delete intact checkpoints and keep damaged newer ones),
resumes from the newest verified `checkpoint-N`, and adds `PlatformCallback`: the stop agreed
across ranks at a step boundary (saved, committed, exit 143 on every pod), the launcher's
checkpoint schedule on top of HF's own `save_steps`, every HF save committed with per-file
digests, and "finished" declared when HF ends training. Trainers that call `trainer.train`
themselves can add `PlatformCallback()` and pass `resume_from_checkpoint=resume_from_checkpoint()`.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import time
from typing import Any

# From its own module, not the package: transformers/__init__.py lists every model for type
# checkers, and binding it was about a third of `basedpyright`'s CPU in `make lint` (106 s of CPU
# before, 76 s after, on 2 loaded cores, 2026-12-07). Python imports the same class either way.
from transformers.trainer_callback import TrainerCallback

from .. import events
from ..framework_checkpoint import resume_path
from ..worker import current
from ._resume import resume_argument


class PlatformCallback(TrainerCallback):
    def __init__(self) -> None:
        self.worker = current()
        self._stopping = False
        self._save_started = 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.worker.handle_stop_signals()
        self.worker.schedule.last_step = state.global_step
        per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * self.worker.world_size
        from .. import autoprogress

        autoprogress.REPORTER.note(samples_per_step=per_step)
        autoprogress.REPORTER.align(state.global_step)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        stop, due = self.worker.boundary(state.global_step)
        if stop or due:
            control.should_save = True
            self._save_started = time.monotonic()
        if stop:
            self._stopping = True
            control.should_training_stop = True

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        started = self._save_started or time.monotonic()
        self.worker.commit(os.path.join(args.output_dir, f"checkpoint-{step}"), step, framework="transformers")
        self.worker.saved(step, time.monotonic() - started)
        self._save_started = 0.0
        if self._stopping:
            self.worker.exit_stopped(step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if logs and isinstance(logs.get("loss"), (int, float)):
            self.worker.log_loss(state.global_step, logs["loss"])

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._stopping:
            # Stopped without a save: with save_strategy="best", an evaluation at the stop step
            # that found no better metric overrides the save. Every rank gets here alike; the
            # resume is from the last committed checkpoint, and no pod ends as finished.
            self.worker.exit_stopped(state.global_step)
        self.worker.declare_finished(state.global_step)


def argument_problems(args: Any) -> list[str]:
    """TrainingArguments fields whose value is not of the field's type (as YAML gives `3e-4`)."""
    problems = []
    for field in dataclasses.fields(args):
        value = getattr(args, field.name, None)
        numeric = {float: "a number", int: "a whole number"}.get(field.type)  # pyright: ignore[reportArgumentType]
        if numeric and isinstance(value, str):
            hint = " (YAML reads 3e-4 as text: write 3.0e-4, or convert the value)" if field.type is float else ""
            problems.append(f"TrainingArguments.{field.name} must be {numeric}, got {value!r}{hint}")
    return problems


def resume_from_checkpoint() -> str | None:
    """The verified `checkpoint-N` directory to resume from (call on every rank), or None."""
    info = current().select_resume("transformers")
    return resume_path(info) if info else None


def point_tensorboard(callbacks: list[Any]) -> None:
    """HF's own TensorBoard logging (`report_to=["tensorboard"]`) writes where the viewer looks
    (launcher.events: `transformers/` in the job's event directory) unless the trainer chose a
    place itself (TENSORBOARD_LOGGING_DIR, read by TensorBoardCallback's constructor)."""
    directory = events.tensorboard_dir()
    for callback in callbacks:
        if directory and type(callback).__name__ == "TensorBoardCallback" and getattr(callback, "logging_dir", 0) is None:
            callback.logging_dir = os.path.join(directory, "transformers")


def train(trainer: Any, *positional: Any, **kwargs: Any) -> Any:
    """`trainer.train(...)` under the platform's contract (see the module docstring), with
    `Trainer.train`'s own arguments, positional or keyword. A `resume_from_checkpoint` of the
    trainer's own, given here or as `--resume_from_checkpoint` (TrainingArguments documents it as
    read by scripts, not by the Trainer), follows integrations/_resume.py."""
    bound = inspect.signature(trainer.train).bind(*positional, **kwargs)
    worker = current()
    args = trainer.args
    problems = argument_problems(args)
    if problems:
        worker.config_error(*problems)
    if os.path.normpath(args.output_dir or "") != os.path.normpath(worker.checkpoint_dir):
        args.output_dir = worker.checkpoint_dir  # where the launcher selects, verifies and prunes
    args.save_total_limit = None  # pruning is the launcher's (TRAIN_CHECKPOINT_KEEP)
    if not any(isinstance(cb, PlatformCallback) for cb in trainer.callback_handler.callbacks):
        trainer.add_callback(PlatformCallback())
    point_tensorboard(trainer.callback_handler.callbacks)
    asked = bound.arguments.get("resume_from_checkpoint")
    if asked is None:
        asked = getattr(args, "resume_from_checkpoint", None)
    info = worker.select_resume("transformers")
    bound.arguments["resume_from_checkpoint"] = resume_argument(worker, asked, info, name="resume_from_checkpoint",
                                                                newest=(True,))
    return trainer.train(*bound.args, **bound.kwargs)
