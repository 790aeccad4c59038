"""What a training pod needs to reach its data: the contract between storage and the workload.

Pure data (no resources), so the workload component and the tests share one definition:

- service account `trainer` (bound to the trainer role by EKS Pod Identity);
- PVC `checkpoints` (EFS access point, read-write) at /workspace/checkpoints;
- PVC `datasets` (the datasets bucket through Mountpoint for S3, read-only) at /workspace/data;
- the Kubernetes Secret `training-secrets`, one key per configured secret, as env vars.

The pod must run as 1000:1000 (the image's user; the EFS access point and the Mountpoint
options assume it) and set `fsGroup: 1000`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from components.config.secrets import env_var_name
from components.identity.workload_roles import TRAINER_SERVICE_ACCOUNT

SERVICE_ACCOUNT = TRAINER_SERVICE_ACCOUNT
SECRET_NAME = "training-secrets"
RUN_AS_USER = 1000
RUN_AS_GROUP = 1000


@dataclass(frozen=True)
class TrainingVolume:
    name: str
    claim_name: str
    mount_path: str
    read_only: bool


CHECKPOINTS = TrainingVolume("checkpoints", "checkpoints", "/workspace/checkpoints", read_only=False)
DATASETS = TrainingVolume("datasets", "datasets", "/workspace/data", read_only=True)
VOLUMES = (CHECKPOINTS, DATASETS)


def stack_checkpoint_root(stack: str) -> str:
    """The directory of the checkpoints volume that holds every run of `stack`: /workspace/checkpoints/<stack>.

    One namespace per run: a MultiKueue environment replicates `checkpoints/` between its regions
    (data/replication.py) and each region's Lustre imports what arrives, new, changed and deleted.
    Two stacks that planned a job of the same name (prod and prod-usw2 both had `pretrain-p5`) would
    write, supersede and prune one another's `step-N` directories. Under the stack that owns the run
    they never meet, and a dispatched job keeps its manager's directory wherever it runs (the path
    is in the JobSet's spec). The stack's checkpoint cleanup judges this directory only."""
    return f"{CHECKPOINTS.mount_path}/{stack}"


def run_checkpoint_dir(stack: str, job: str) -> str:
    """A run's TRAIN_CHECKPOINT_DIR: /workspace/checkpoints/<stack>/<job>."""
    return f"{stack_checkpoint_root(stack)}/{job}"


def run_id(stack: str, job: str) -> str:
    """A run's TRAIN_RUN_ID: the launcher writes it into every checkpoint marker and never selects,
    supersedes or prunes a checkpoint whose marker names another run (trainer/launcher/checkpoint.py)."""
    return f"{stack}/{job}"


def pod_security_context(*, fs_group: bool = True) -> dict[str, Any]:
    """`spec.securityContext` of a pod that runs as the image's user (the training pods, the system
    pods that read or clean their checkpoints); `fs_group`: its volumes are made its group's."""
    return {"runAsNonRoot": True, "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_GROUP,
            **({"fsGroup": RUN_AS_GROUP} if fs_group else {}), "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context() -> dict[str, Any]:
    """A container's `securityContext` in such a pod."""
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]}}


def checkpoints_claim(*, read_only: bool = False) -> dict[str, Any]:
    """The `spec.volumes` entry of the checkpoints claim in a system pod (the cleanup's, the viewer's)."""
    return {"name": CHECKPOINTS.name,
            "persistentVolumeClaim": {"claimName": CHECKPOINTS.claim_name, **({"readOnly": True} if read_only else {})}}


def checkpoints_mount(checkpoints_sub_path: str | None, *, read_only: bool = False) -> dict[str, Any]:
    """Its `volumeMounts` entry: the directory the training pods see (`checkpoints_sub_path`, as in
    `volume_mounts`), and nothing above it."""
    return {"name": CHECKPOINTS.name, "mountPath": CHECKPOINTS.mount_path, **({"readOnly": True} if read_only else {}),
            **({"subPath": checkpoints_sub_path} if checkpoints_sub_path else {})}


def pod_volumes() -> list[dict[str, Any]]:
    """`spec.volumes` entries of a training pod."""
    return [{"name": v.name, "persistentVolumeClaim": {"claimName": v.claim_name, "readOnly": v.read_only}}
            for v in VOLUMES]


def volume_mounts(checkpoints_sub_path: str | None = None) -> list[dict[str, Any]]:
    """`volumeMounts` of the trainer container; `checkpoints_sub_path`: the directory of the
    checkpoints volume that the container sees (data/mounts.py StorageMounts.checkpoints_sub_path)."""
    # The kubelet creates a missing subPath directory with the mode of the volume's root.
    return [{"name": v.name, "mountPath": v.mount_path, "readOnly": v.read_only,
             **({"subPath": checkpoints_sub_path} if v is CHECKPOINTS and checkpoints_sub_path else {})}
            for v in VOLUMES]


def secret_env(secret_names: Iterable[str]) -> list[dict[str, Any]]:
    """`env` entries: each secret as an env var read from `training-secrets` (wandb-api-key ->
    WANDB_API_KEY). Env vars are where trainers read such tokens (W&B reads WANDB_API_KEY); CIS 4.4.1 prefers files: an accepted,
    documented exception (checkov CKV_K8S_35 skip on the workload)."""
    return [{"name": env_var_name(name), "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": name}}}
            for name in sorted(secret_names)]
