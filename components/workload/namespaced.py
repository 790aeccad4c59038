"""The Args fields of the components that put objects in one namespace, declared once. `SystemPodArgs`:
the namespace's pods that are not training (checkpoint cleanup, run viewer, Lustre's checkpoint
directory Job), which run the trainer image on the system pool and mount its `checkpoints` volume."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi


# kw_only: a subclass's fields may follow these whatever their defaults; every caller names them.
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
