"""What the components that put objects in one training namespace are given: the fields they
share, declared once; each component's Args adds only what is its own.

- `NamespacedArgs`: the namespace, and what must exist before the objects in it. Every such
  component of the tenant (tenant.py, worker_tenant.py) and of a team stack takes these two.
- `SystemPodArgs`: the namespace's pods that are not training. The checkpoint cleanup CronJob
  (checkpoint_cleanup.py), the run viewer (viewer.py) and, on Lustre, the checkpoint directory Job
  (checkpoint_directory.py) each run the trainer image's Python on the system pool and mount the
  namespace's `checkpoints` volume; the tenant gives all three the same image, pool and directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi


# kw_only: the fields of a subclass come after these in __init__ whatever their defaults, and
# every caller names them.
@dataclass(frozen=True, kw_only=True)
class NamespacedArgs:
    namespace: str
    """The namespace the component's objects go to (a training namespace, or a team's `team-<team>`)."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before those objects: the namespace at least (the caller says what else and why)."""


@dataclass(frozen=True, kw_only=True)
class SystemPodArgs(NamespacedArgs):
    image: str
    """The trainer image (training.cleanupImage, pinned by digest, already pulled): its Python runs the pod."""
    system_pool: str
    """The pool the pod runs on: never a GPU node."""
    checkpoints_sub_path: str | None
    """The directory of the checkpoints volume the training pods see (StorageMounts.checkpoints_sub_path);
    None: the whole volume (EFS, whose access point is that directory)."""
