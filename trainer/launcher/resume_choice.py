"""Which checkpoint a run resumes from: the launcher's choice before torchrun starts, and every
in-place restart round's again in its workers (launcher.inplace)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from . import checkpoint

# Set by the platform for one release on stacks whose checkpoints lived in /workspace/checkpoints/<job>
# before each run got a directory of its own (<stack>/<job>): a run with no complete checkpoint of
# its own resumes from the newest there; its first save goes to its own directory.
LEGACY_DIR_VAR = "TRAIN_LEGACY_CHECKPOINT_DIR"


def select_resume(checkpoint_dir: str, env: Mapping[str, str]) -> tuple[checkpoint.CheckpointInfo | None,
                                                                          list[checkpoint.CheckpointInfo]]:
    """(the checkpoint the workers resume from, newer ones skipped as incomplete): the newest complete
    one of this run (another run's are not this run's: checkpoint.py), else of the legacy directory."""
    found = checkpoint.list_checkpoints(checkpoint_dir)
    latest = next((x for x in found if x.complete), None)
    skipped = [x for x in found if not x.complete and not x.foreign and (latest is None or x.step > latest.step)]
    legacy = env.get(LEGACY_DIR_VAR, "").strip()
    if latest is None and legacy and os.path.normpath(legacy) != os.path.normpath(checkpoint_dir):
        latest = checkpoint.latest_complete(legacy)
    return latest, skipped
