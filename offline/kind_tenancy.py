"""The part of a team stack's planned tenancy a kind cluster can run, for the end-to-end job of
.github/workflows/pull-request.yml (`job-e2e`): a kind cluster with the pinned JobSet and Kueue
charts, this tenancy, and a 2-pod CPU job submitted with `scripts/gpu-training job submit`.

    python -m offline.kind_tenancy build/team-vision-prod build/prod > tenancy.yaml

reads the plans' manifests (`make plan`) and prints, in apply order, the objects that make sense
without AWS, as planned (a ClusterQueue loses only its admission checks, below), plus the stand-ins
kind needs; on stderr, what it left out and why. tests/test_kind_tenancy.py validates the result
against the Kubernetes schemas and the vendored CRDs (schemas/crds/), here, without a cluster.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from components.config.job_context import JOB_CONTEXT_CONFIG_MAP

TEAM_MEMBER = "team-member"
"""The ServiceAccount the job is submitted as: a team member with namespace-scoped rights only."""
# kind's default StorageClass: rancher local-path, ReadWriteOnce on the node that first mounts it
# (kind docs, "Configuration"; kind's manifests/default-storage): the gang shares the one node.
KIND_STORAGE_CLASS = "standard"
KEPT = ("Namespace", "LimitRange", "ResourceQuota", "NetworkPolicy", "ServiceAccount", "ResourceFlavor",
        "ClusterQueue", "LocalQueue", "ConfigMap", "Role", "RoleBinding")
"""Kinds kept, in apply order (the namespace first; a queue after its flavors)."""
LEFT_OUT = {
    "PersistentVolume": "EFS CSI and Mountpoint for S3 volumes: AWS file systems (stand-in claims on kind's local-path)",
    "PersistentVolumeClaim": "claims of those volumes (stand-ins of the same names instead)",
    "ExternalSecret": "synced from AWS Secrets Manager (the end-to-end job uses no secret)",
    "SecretStore": "AWS Secrets Manager through a role the pods cannot assume on kind",
    "CronJob": "the checkpoint cleanup: not needed for one short job",
    "Deployment": "TensorBoard behind the platform's ALB",
    "Service": "TensorBoard's",
    "Ingress": "the AWS Load Balancer Controller's ALB",
    "JobSet": "the stack's own GPU job (8 GPUs x 2 nodes); the end-to-end job is submitted by the command",
}
ANY_REGION = "any-region"
CLEANUP = "checkpoint-cleanup"


def planned_manifests(plan_dir: Path) -> list[dict[str, Any]]:
    """The objects a plan made on its own cluster (`<cluster>--` files are other clusters')."""
    return [yaml.safe_load(path.read_text()) for path in sorted((plan_dir / "manifests").glob("*.yaml"))
            if "--" not in path.name]


def kind_tenancy(team_plan: Path, platform_plan: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """(the objects to apply, in order; one line per object left out, with why)."""
    kept: list[dict[str, Any]] = []
    left_out: list[str] = []
    for manifest in planned_manifests(team_plan):
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        why = _why_left_out(manifest)
        if why:
            left_out.append(f"{kind}/{name}: {why}")
        else:
            kept.append(_on_kind(manifest))
    # The team's ClusterQueue is the platform's (components/workload/team_queues.py): the one its
    # kept LocalQueues point at.
    targets = {m["spec"]["clusterQueue"] for m in kept if m["kind"] == "LocalQueue"}
    kept += [_on_kind(m) for m in planned_manifests(platform_plan)
             if m["kind"] == "ClusterQueue" and m["metadata"]["name"] in targets]
    queues = [m for m in kept if m["kind"] == "ClusterQueue"]
    flavors = {flavor["name"] for queue in queues for group in queue["spec"]["resourceGroups"] for flavor in group["flavors"]}
    kept += [m for m in planned_manifests(platform_plan) if m["kind"] == "ResourceFlavor" and m["metadata"]["name"] in flavors]
    # The team's namespace, its ResourceQuota and LimitRange are the platform's too, from its
    # registry of teams (components/workload/team_tenancy.py).
    namespace = next(m["metadata"]["namespace"] for m in kept if m["kind"] == "LocalQueue")
    kept += [m for m in planned_manifests(platform_plan) if m["kind"] in ("Namespace", "ResourceQuota", "LimitRange")
             and (m["metadata"].get("namespace") or m["metadata"]["name"]) == namespace]
    kept += [*_stand_in_claims(namespace), *_team_member(namespace)]
    order = {kind: index for index, kind in enumerate(KEPT)}
    return sorted(kept, key=lambda m: order.get(m["kind"], len(KEPT))), left_out


def _why_left_out(manifest: dict[str, Any]) -> str | None:
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    if kind in LEFT_OUT:
        return LEFT_OUT[kind]
    if kind not in KEPT:
        return "not a tenancy object kind runs (unknown to offline/kind_tenancy.py)"
    if kind in ("Role", "RoleBinding") and name != TEAM_MEMBER:
        return "not the team members' (the checkpoint cleanup's, the trainer's progress)"
    if name == CLEANUP:
        return "the checkpoint cleanup's: not needed for one short job"
    if ANY_REGION in name:
        return "MultiKueue's queue over the environment's regions: dispatches to AWS worker clusters"
    if kind == "ConfigMap" and name != JOB_CONTEXT_CONFIG_MAP:
        return "the stack's own job's hyperparameters"
    return None


def _on_kind(manifest: dict[str, Any]) -> dict[str, Any]:
    """The object as planned; a ClusterQueue without its admission checks: the ProvisioningRequest
    check waits for the Cluster Autoscaler to bring up nodes, and kind has neither."""
    if manifest["kind"] != "ClusterQueue":
        return manifest
    queue = copy.deepcopy(manifest)
    queue["spec"].pop("admissionChecksStrategy", None)
    queue["spec"].pop("admissionChecks", None)
    return queue


def _stand_in_claims(namespace: str) -> list[dict[str, Any]]:
    """The claims the job's pods mount, by the planned names, on kind's local-path class."""
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": KIND_STORAGE_CLASS,
                      "resources": {"requests": {"storage": "1Gi"}}}}
            for name in ("checkpoints", "datasets")]


def _team_member(namespace: str) -> list[dict[str, Any]]:
    """A ServiceAccount bound to the planned `team-member` Role: on EKS a member's IAM role reaches
    that Role through its access entry's group (workload/team_members.py); kind has no access entries."""
    meta = {"name": TEAM_MEMBER, "namespace": namespace}
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": f"{TEAM_MEMBER}-on-kind", "namespace": namespace},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TEAM_MEMBER},
             "subjects": [{"kind": "ServiceAccount", "name": TEAM_MEMBER, "namespace": namespace}]}]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m offline.kind_tenancy build/<team stack> build/<its platform stack>", file=sys.stderr)
        return 2
    kept, left_out = kind_tenancy(Path(argv[0]), Path(argv[1]))
    print("\n".join(f"left out {line}" for line in left_out), file=sys.stderr)
    print(yaml.safe_dump_all(kept, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
