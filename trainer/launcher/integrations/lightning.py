"""PyTorch Lightning. Three lines:

    from launcher.integrations.lightning import fit, trainer_kwargs
    trainer = L.Trainer(max_steps=..., **trainer_kwargs())    # the platform's part of the Trainer
    fit(trainer, model, datamodule=dm)                        # was: trainer.fit(model, datamodule=dm)

`fit` takes `Trainer.fit`'s arguments as Lightning does, positional (`fit(trainer, model, train_dl,
val_dl)`) or keyword.

`trainer_kwargs` gives `num_nodes`/`devices` from the contract, a writable `default_root_dir`
(the working directory is read-only in the pod) and `PlatformCallback`, which replaces
Lightning's SIGTERM handler once training starts (it broadcasts from rank 0 inside the handler,
which hangs the gang when another pod got the signal, and ends the worker with exit 0), agrees on
the stop at every step boundary, saves `step-N/model.ckpt` through `trainer.save_checkpoint` on
the launcher's schedule and on a stop, commits it with per-file digests, exits 143 after a stop
and declares "finished" when Lightning ends training. `fit` resumes from the newest verified
checkpoint. Lightning restores the global step, not the position inside an epoch of a plain
DataLoader: after a resume the data order differs from an uninterrupted run.
"""

from __future__ import annotations

import datetime
import inspect
import os
import time
from typing import Any

from lightning.pytorch.callbacks import Callback

from .. import checkpoint, events
from ..worker import current
from ._resume import resume_argument

CHECKPOINT_FILE = "model.ckpt"


class PlatformCallback(Callback):
    def __init__(self) -> None:
        self.worker = current()
        self._stopping = False

    def on_sanity_check_start(self, trainer: Any, pl_module: Any) -> None:
        self.worker.handle_stop_signals()  # Lightning's _SignalConnector registered its own just before

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.worker.handle_stop_signals()  # after Lightning's _SignalConnector registered its own
        self.worker.schedule.last_step = trainer.global_step
        from .. import autoprogress

        autoprogress.REPORTER.align(trainer.global_step)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = trainer.global_step
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is not None and hasattr(loss, "item"):
            self.worker.log_loss(step, float(loss.item()))
        stop, due = self.worker.boundary(step)
        if stop or due:
            started = time.monotonic()
            self._save(trainer, step)
            self.worker.saved(step, time.monotonic() - started)
        if stop:
            self._stopping = True
            self.worker.exit_stopped(step)

    def _save(self, trainer: Any, step: int) -> None:
        w = self.worker
        path = os.path.join(w.checkpoint_dir, checkpoint.step_dir_name(step))
        w.fresh_checkpoint_dir(path, step)
        trainer.save_checkpoint(os.path.join(path, CHECKPOINT_FILE))
        w.commit(path, step, framework="lightning", resume=CHECKPOINT_FILE)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if not self._stopping:
            self.worker.declare_finished(trainer.global_step)


def trainer_kwargs(callbacks: list | None = None) -> dict:
    """The Trainer arguments the platform decides; `callbacks` are the trainer's own."""
    env = os.environ
    return {
        # Lightning does not read torchrun's settings; the workers inherit them from the launcher
        "num_nodes": int(env.get("PET_NNODES") or 1),
        "devices": int(env.get("PET_NPROC_PER_NODE") or 1),
        "default_root_dir": os.path.join(current().checkpoint_dir, "lightning"),
        "callbacks": [*(callbacks or []), PlatformCallback()],
    }


def tensorboard_logger() -> dict:
    """`logger`: Lightning's TensorBoardLogger writing where the viewer looks (launcher.events:
    `lightning/` in the job's event directory); nothing (Lightning's default) when the event files
    are off or the image lacks the tensorboard package. Opt-in, `L.Trainer(**trainer_kwargs(),
    **tensorboard_logger())`: `trainer_kwargs` never sets `logger`, which a trainer may pass itself
    (Lightning's default logger, TensorBoard when installed, writes under `default_root_dir`,
    inside the checkpoints volume, where the viewer finds it too)."""
    directory = events.tensorboard_dir()
    if directory is None:
        return {}
    try:
        from lightning.pytorch.loggers import TensorBoardLogger

        return {"logger": TensorBoardLogger(save_dir=directory, name="lightning")}
    except ModuleNotFoundError:  # neither tensorboard nor tensorboardX is installed
        return {}


def _init_process_group() -> None:
    """The default process group, before `fit`, so the resume choice can be agreed before
    Lightning loads anything (Lightning keeps a process group that exists; the timeout is the
    contract's)."""
    import torch
    import torch.distributed as dist

    w = current()
    if w.world_size == 1 or dist.is_initialized():
        return
    backend = "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(w.local_rank)
        backend = "cpu:gloo,cuda:nccl"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=w.collective_timeout_s))


def fit(trainer: Any, *args: Any, **kwargs: Any) -> Any:
    """`trainer.fit(...)` with Lightning's own arguments, positional or keyword (bound to
    `Trainer.fit`'s signature: a wrong call is Lightning's own TypeError), from the newest verified
    checkpoint (every rank). A `ckpt_path` of the trainer's own follows integrations/_resume.py."""
    bound = inspect.signature(trainer.fit).bind(*args, **kwargs)
    _init_process_group()
    worker = current()
    info = worker.select_resume("lightning")
    bound.arguments["ckpt_path"] = resume_argument(worker, bound.arguments.get("ckpt_path"), info, name="ckpt_path",
                                                   newest=("last",))
    return trainer.fit(*bound.args, **bound.kwargs)
