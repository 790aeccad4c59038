"""What a training namespace's helper pods are given: one declaration of the fields they share.

The checkpoint cleanup CronJob (checkpoint_cleanup.py), the run viewer (viewer.py) and, on
Lustre, the checkpoint directory Job (checkpoint_directory.py) are the namespace's pods that are
not training: each runs the trainer image's Python on the system pool and mounts the namespace's
`checkpoints` volume. The tenant (tenant.py) passes all three the same namespace, image, pool and
checkpoint directory; each component's Args adds only what is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi


# kw_only: the fields of a subclass come after these in __init__ whatever their defaults, and
# every caller names them (tenant.py).
@dataclass(frozen=True, kw_only=True)
class SystemPodArgs:
    namespace: str
    """The training namespace whose checkpoints volume the pod mounts, and where its objects go."""
    image: str
    """The trainer image (training.cleanupImage, pinned by digest, already pulled): its Python runs the pod."""
    system_pool: str
    """The pool the pod runs on: never a GPU node."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the pod's objects: the namespace and its volumes at least (the tenant says what else)."""
    checkpoints_sub_path: str | None
    """The directory of the checkpoints volume the training pods see (StorageMounts.checkpoints_sub_path);
    None: the whole volume (EFS, whose access point is that directory)."""
