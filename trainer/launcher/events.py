"""TensorBoard event files next to the checkpoints, for the namespace's viewer.

Where: TRAIN_TENSORBOARD_DIR when the workload sets it, else `tensorboard/` inside
TRAIN_CHECKPOINT_DIR (`/workspace/checkpoints/<stack>/<job>/tensorboard` in the cluster), so the
per-namespace TensorBoard, which mounts the checkpoints volume read-only at its root, shows every
job as a run of its own. `off` writes none. A variable the workload did not set changes nothing
else: the checkpoint selection and pruning only look at `step-N`/`checkpoint-N` names.

What: global rank 0 writes `train/loss`, `train/samples_per_s` and `train/steps_per_s` when it
logs a `step` or `loss` line (launcher.progress, launcher.worker), so the curve a researcher sees
is the one in the logs. The writer comes from torch.utils.tensorboard, which needs the
`tensorboard` package (trainer/requirements.txt pins it into the image); an image without it
logs one `tensorboard_unavailable` line and trains on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .log_line import log

TENSORBOARD_VAR = "TRAIN_TENSORBOARD_DIR"
TENSORBOARD_SUBDIR = "tensorboard"
OFF = "off"
DEFAULT_CHECKPOINT_DIR = "/workspace/checkpoints"


def tensorboard_dir(env: Mapping[str, str] | None = None) -> str | None:
    """Where this job's event files go, or None when the workload turned them off."""
    env = os.environ if env is None else env
    explicit = env.get(TENSORBOARD_VAR, "").strip()
    if explicit.lower() == OFF:
        return None
    if explicit:
        return explicit
    return os.path.join(env.get("TRAIN_CHECKPOINT_DIR", "").strip() or DEFAULT_CHECKPOINT_DIR, TENSORBOARD_SUBDIR)


class ScalarWriter:
    """Writes scalars on global rank 0, opening the event file at the first one."""

    def __init__(self, rank: int, directory: str | None = None, *, env: Mapping[str, str] | None = None):
        self.directory = directory if directory is not None else tensorboard_dir(env)
        self._enabled = rank == 0 and self.directory is not None
        self._writer: Any = None

    def scalars(self, step: int, values: Mapping[str, float | None]) -> None:
        if not self._enabled:
            return
        writer = self._writer or self._open()
        if writer is None:
            return
        for tag, value in values.items():
            if value is not None:
                writer.add_scalar(tag, float(value), global_step=step)
        # A viewer reads the file while the job runs: every logged step is on disk at once.
        writer.flush()

    def _open(self) -> Any:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:  # an image without the tensorboard package
            self._enabled = False
            log("tensorboard_unavailable", reason=str(error), directory=self.directory)
            return None
        self._writer = SummaryWriter(log_dir=self.directory)
        return self._writer

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


_SHARED: ScalarWriter | None = None


def shared_writer(rank: int) -> ScalarWriter:
    """The process's one writer: the step lines (launcher.progress) and an integration's loss lines
    (launcher.worker) land in the same event file."""
    global _SHARED
    if _SHARED is None:
        _SHARED = ScalarWriter(rank)
    return _SHARED
