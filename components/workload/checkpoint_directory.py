"""The checkpoint directory on FSx for Lustre, made once before any job, owned by the trainer.

On EFS nothing is needed: the tenant's access point creates its root directory on first mount,
owned by the trainer's UID/GID with mode 0750, and enforces that user for every file operation
(data/file_system.py `creation_info`, `posix_user`).

FSx for Lustre has no such thing, and no Kubernetes means gives it an owner: the FSx CSI driver
declares `fsGroupPolicy: ReadWriteOnceWithFSType` (aws-fsx-csi-driver v1.9.0
charts/aws-fsx-csi-driver/values.yaml; the change to `File` was held, kubernetes-sigs/
aws-fsx-csi-driver#348), so the kubelet applies no fsGroup to these ReadWriteMany volumes, and a
missing `subPath` is made by the kubelet with the root's mode (kubelet subpath_linux.go
doSafeMakeDir). The trainer could write there only while the root of a fresh file system is
world-writable with the sticky bit. Instead this Job, one per training namespace with Lustre,
creates `checkpoints` (or takes over the one the kubelet made) as the trainer's UID/GID, mode 0750,
before the JobSets and the cleanup CronJob exist: they depend on it, and Pulumi's Job await waits
for its Complete condition (pulumi-kubernetes batch/v1 Job, "This resource waits until its status
is ready"), failing the update if it fails.

Least privilege that works: a new directory in the root-owned file system root, and a chown to
another user, need root and CAP_CHOWN. The Job's one container runs as UID 0 with every other
capability dropped (no DAC_OVERRIDE: as the root directory's owner, root may create in it; the
mode is set while root still owns the new directory, so no FOWNER), no privilege escalation, a
read-only root file system, RuntimeDefault seccomp, no service account token, on the system pool.
The training namespaces enforce Pod Security `baseline` (workload/namespace.py), which admits a
root user and CHOWN (a baseline capability); their `restricted` warn/audit labels report it, the
accepted exception. Lustre's root squash, which would map UID 0 to another user, is off: the file
system sets no `rootSquashConfiguration` (FSx API LustreRootSquashConfiguration: "A value of 0
(zero) for UID and GID indicates root, and therefore disables root squash").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.cluster.pool_scheduling import POOL_LABEL
from components.common.manifests import app_metadata, built_in_object, job_spec
from components.data import training_data
from components.workload.namespaced import SystemPodArgs

NAME = "checkpoint-directory"
ROOT_MOUNT = "/lustre"
MODE = 0o750  # as the EFS access point's directory: the trainer's, closed to others
BACKOFF_LIMIT = 4
DEADLINE_SECONDS = 600  # within Pulumi's default 10-minute await of a Job
# checkov's skip syntax, as the training pods' (training_job.SKIP_REASONS).
SKIP_REASONS = {
    "CKV_K8S_23": "root is needed once to create and chown the checkpoint directory on the root-owned Lustre root",
    "CKV_K8S_25": "CHOWN alone is added (every other capability dropped): the directory goes to the trainer's UID/GID",
    "CKV_K8S_40": "UID 0 for the one chown; the directory's owner is the training pods' UID 1000",
}

# Run by the trainer image's Python (as the cleanup CronJob is). Idempotent: a directory the
# trainer owns already is left as it is; one root owns (made by the kubelet for an earlier pod)
# gets the mode and the owner. Anything else is an error that fails the Job, and the update.
SCRIPT = """
import os, stat, sys
path, uid, gid, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4], 8)
if not os.path.isdir(path):
    os.mkdir(path, mode)  # the umask (022 at most) leaves 0750 as it is
st = os.lstat(path)
if not stat.S_ISDIR(st.st_mode):
    sys.exit(f"{path} is not a directory")
if (st.st_uid, st.st_gid) != (uid, gid):
    if st.st_uid != 0:
        sys.exit(f"{path} is owned by {st.st_uid}:{st.st_gid}, neither root nor the trainer {uid}:{gid}")
    os.chmod(path, mode)
    os.chown(path, uid, gid)
st = os.lstat(path)
print(f"{path}: owner {st.st_uid}:{st.st_gid}, mode {stat.S_IMODE(st.st_mode):o}", flush=True)
"""


def init_container(image: str, sub_path: str) -> dict[str, Any]:
    resources = {"cpu": "100m", "memory": "64Mi"}
    return {
        "name": NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", SCRIPT, f"{ROOT_MOUNT}/{sub_path}", str(training_data.RUN_AS_USER),
                    str(training_data.RUN_AS_GROUP), f"{MODE:o}"],
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": resources, "limits": dict(resources)},
        # The file system's root, where the directory goes: this Job alone mounts it whole.
        "volumeMounts": [{"name": training_data.CHECKPOINTS.name, "mountPath": ROOT_MOUNT}],
        "securityContext": {
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        },
    }


def job_manifest(*, namespace: str, image: str, system_pool: str, sub_path: str) -> dict[str, Any]:
    metadata = app_metadata(NAME, namespace, SKIP_REASONS)
    pod_spec = {
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "nodeSelector": {POOL_LABEL: system_pool},
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [init_container(image, sub_path)],
        "volumes": [training_data.checkpoints_claim()],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": job_spec(labels=metadata["labels"], pod_spec=pod_spec, backoff_limit=BACKOFF_LIMIT,
                         deadline_seconds=DEADLINE_SECONDS),
    }


@dataclass(frozen=True, kw_only=True)
class CheckpointDirectoryArgs(SystemPodArgs):
    checkpoints_sub_path: str
    """The directory this Job makes, which the training pods mount: required here (Lustre only)."""


class CheckpointDirectory(pulumi.ComponentResource):
    def __init__(self, name: str, args: CheckpointDirectoryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:CheckpointDirectory", name, None, opts)
        manifest = job_manifest(namespace=args.namespace, image=args.image, system_pool=args.system_pool,
                                sub_path=args.checkpoints_sub_path)
        built_in_object(f"{name}-job", manifest, pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)))
        self.register_outputs({})
