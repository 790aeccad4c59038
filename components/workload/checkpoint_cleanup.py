"""A nightly CronJob that removes finished jobs' checkpoint directories from the shared file system.

What goes and what stays is decided by checkpoint_cleanup_script.py (mounted from a ConfigMap,
run by the trainer image's Python): a directory /workspace/checkpoints/<stack>/<job> goes when no
unfinished JobSet of that name exists in the namespace and nothing in it changed for
`storage.checkpointCleanup.afterDays`. Why JobSets and not file ages alone: a gang queued by
Kueue, or stopped by a spot reclaim, writes nothing for as long as it waits, and must still find
its checkpoints when it starts; only the JobSet knows it is not finished.

- Identity: its own service account, bound to a Role that may only get and list JobSets in this
  namespace; no AWS role (the file system comes through the namespace's `checkpoints` volume).
  The API token is projected into the one container that needs it, valid for 10 minutes.
- Hardening as the training pods: UID/GID 1000 (the access point's owner), non-root, read-only
  root file system, no privilege escalation, every capability dropped, RuntimeDefault seccomp.
- Runs on the system pool (never wakes a GPU node), one at a time, and logs every decision
  before it removes anything; `dryRun: true` (the default) stops there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.cluster.pool_scheduling import POOL_LABEL
from components.common.manifests import app_metadata, built_in_object, job_spec
from components.config.cleanup import CheckpointCleanupConfig
from components.data import training_data
from components.workload.namespaced import SystemPodArgs
from components.workload.training_job import SKIP_REASONS as TRAINING_SKIP_REASONS

NAME = "checkpoint-cleanup"
SCRIPT = Path(__file__).with_name("checkpoint_cleanup_script.py")
SCRIPT_DIR = "/opt/checkpoint-cleanup"
TOKEN_DIR = "/var/run/secrets/checkpoint-cleanup"
# Nightly at 03:17 UTC: off the full hour, when many other schedules fire.
SCHEDULE = "17 3 * * *"
TOKEN_SECONDS = 600  # the shortest a projected service account token may live
RUN_DEADLINE_SECONDS = 3600
# The training pods' accepted deviation, for the same reason (checkov's skip syntax).
SKIP_REASONS = {"CKV_K8S_40": TRAINING_SKIP_REASONS["CKV_K8S_40"]}


def role_rules() -> list[k8s.rbac.v1.PolicyRuleArgsDict]:
    """Read-only, JobSets only: what the script needs to tell a finished job from a waiting one."""
    return [{"api_groups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list"]}]


def cleanup_container(image: str, cleanup: CheckpointCleanupConfig, checkpoints_sub_path: str | None, *,
                      stack: str) -> dict[str, Any]:
    resources = {"cpu": "250m", "memory": "256Mi"}
    env = {
        # This stack's runs only: what other stacks of the environment write and replicate here is
        # theirs to judge (on a MultiKueue worker, the manager's dispatched runs included).
        "CHECKPOINT_ROOT": training_data.stack_checkpoint_root(stack),
        "MAX_AGE_DAYS": str(cleanup.after_days),
        "DRY_RUN": "true" if cleanup.dry_run else "false",
        "TOKEN_DIR": TOKEN_DIR,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return {
        "name": NAME,
        "image": image,
        "imagePullPolicy": "Always",
        "command": ["python", f"{SCRIPT_DIR}/{SCRIPT.name}"],
        "env": [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                *({"name": k, "value": v} for k, v in env.items())],
        "resources": {"requests": resources, "limits": dict(resources)},
        "volumeMounts": [
            training_data.checkpoints_mount(checkpoints_sub_path),
            {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
            {"name": "api-token", "mountPath": TOKEN_DIR, "readOnly": True},
        ],
        "securityContext": training_data.container_security_context(),
    }


def cronjob_manifest(*, namespace: str, stack: str, image: str, system_pool: str, cleanup: CheckpointCleanupConfig,
                     checkpoints_sub_path: str | None = None) -> dict[str, Any]:
    pod_spec = {
        "serviceAccountName": NAME,
        # The token reaches only this container, through the projected volume below.
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "nodeSelector": {POOL_LABEL: system_pool},
        "securityContext": training_data.pod_security_context(),
        "containers": [cleanup_container(image, cleanup, checkpoints_sub_path, stack=stack)],
        "volumes": [
            training_data.checkpoints_claim(),
            {"name": "script", "configMap": {"name": NAME}},
            {"name": "api-token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ]}},
        ],
    }
    metadata = app_metadata(NAME, namespace, SKIP_REASONS)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {
            "schedule": SCHEDULE,
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": RUN_DEADLINE_SECONDS,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": job_spec(labels=metadata["labels"], pod_spec=pod_spec, backoff_limit=0,
                                             deadline_seconds=RUN_DEADLINE_SECONDS)},
        },
    }


@dataclass(frozen=True, kw_only=True)
class CheckpointCleanupArgs(SystemPodArgs):
    stack: str
    """The stack whose runs' directories (/workspace/checkpoints/<stack>/<job>) are judged."""
    cleanup: CheckpointCleanupConfig
    """After how many days a finished job's directory goes, and whether it is only reported (dry run)."""


class CheckpointCleanup(pulumi.ComponentResource):
    def __init__(self, name: str, args: CheckpointCleanupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:CheckpointCleanup", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        metadata = k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=args.namespace,
                                              labels={"app.kubernetes.io/name": NAME})
        account = k8s.core.v1.ServiceAccount(f"{name}-account", metadata=metadata,
                                             automount_service_account_token=False, opts=child)
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=metadata, rules=role_rules(), opts=child)
        k8s.rbac.v1.RoleBinding(
            f"{name}-binding", metadata=metadata,
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=NAME),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=NAME, namespace=args.namespace)],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account, role]))
        script = k8s.core.v1.ConfigMap(f"{name}-script", metadata=metadata, data={SCRIPT.name: SCRIPT.read_text()},
                                       opts=child)
        manifest = cronjob_manifest(namespace=args.namespace, stack=args.stack, image=args.image,
                                    system_pool=args.system_pool,
                                    cleanup=args.cleanup, checkpoints_sub_path=args.checkpoints_sub_path)
        built_in_object(f"{name}-cronjob", manifest, pulumi.ResourceOptions(parent=self, depends_on=[account, role, script]))
        self.register_outputs({})
