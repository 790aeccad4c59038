"""A trainer's own resume argument (HF's `resume_from_checkpoint`, Lightning's `ckpt_path`) next to
the launcher's verified choice: it is never dropped without a word.

- nothing, False, or "the newest" (HF's `True`, Lightning's `"last"`): the launcher's choice, the
  newest verified checkpoint of this job (HF maps False to None itself, Trainer.train in
  transformers/trainer.py);
- a path inside TRAIN_CHECKPOINT_DIR: the job's own checkpoints, as run_clm.py's
  `get_last_checkpoint(output_dir)` finds them. The launcher's choice wins, with a
  `resume_argument_replaced` line when it is another directory: the one named may be unfinished
  or damaged (get_last_checkpoint checks neither), or older than the job's progress;
- anything else (another run's checkpoint, Lightning's "best"/"hpc"/"registry"): refused, exit 2
  with the reason. The launcher resumes a job only from checkpoints it committed and verified.
"""

from __future__ import annotations

import enum
import os

from ..checkpoint import CheckpointInfo
from ..framework_checkpoint import resume_path
from ..worker import Worker


class Asked(enum.Enum):
    LAUNCHERS = "launchers"
    """Nothing of the trainer's own to weigh: the launcher's choice."""
    JOBS_OWN = "jobs_own"
    """A checkpoint in the job's own directory: the launcher's verified choice wins, said aloud."""
    REFUSED = "refused"


def classify(asked: object, checkpoint_dir: str, newest: tuple[object, ...]) -> Asked:
    if asked is None or asked is False or any(asked is word or (isinstance(word, str) and asked == word) for word in newest):
        return Asked.LAUNCHERS
    if isinstance(asked, (str, os.PathLike)):
        path = os.path.abspath(str(asked))
        root = os.path.abspath(checkpoint_dir)
        if os.path.commonpath([path, root]) == root and path != root:
            return Asked.JOBS_OWN
    return Asked.REFUSED


def resume_argument(worker: Worker, asked: object, info: CheckpointInfo | None, *, name: str,
                    newest: tuple[object, ...]) -> str | None:
    """What the framework resumes from, given the trainer's own `asked` (argument `name`) and the
    launcher's verified choice `info` (None: a fresh start)."""
    chosen = resume_path(info) if info else None
    kind = classify(asked, worker.checkpoint_dir, newest)
    if kind is Asked.REFUSED:
        worker.config_error(
            f"{name}={asked!r}: the launcher resumes a job only from the checkpoints it verified in "
            f"TRAIN_CHECKPOINT_DIR ({worker.checkpoint_dir}), and chooses the newest itself: leave {name} unset. "
            "To start from another run's weights, load them into the model before training")
    if kind is Asked.JOBS_OWN and os.path.abspath(str(asked)) != os.path.abspath(chosen or ""):
        worker.event("resume_argument_replaced", argument=name, asked=str(asked), used=chosen,
                     reason="the newest checkpoint of this job the launcher verified" if chosen
                     else "no checkpoint of this job is verified and complete: a fresh start")
    return chosen
