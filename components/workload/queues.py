"""Kueue objects: a ResourceFlavor per GPU pool, a ClusterQueue per environment or team (all in
the environment's cohort, so idle quota is lent), and the LocalQueue jobs submit to.

Gangs that can span nodes are admitted only once the Cluster Autoscaler has provisioned all their
nodes: the ClusterQueue runs the ProvisioningRequest admission check on those flavors. Kueue
then reserves quota, creates a ProvisioningRequest for the gang's pods, and admits the workload
(creating its pods) when the autoscaler reports `Provisioned=true`; on failure it releases the
quota and retries with backoff (kueue v0.19.2 docs, concepts/admission_check/provisioning_request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.cluster.pool_scheduling import EFA_RESOURCE, GPU_RESOURCE, POOL_LABEL
from components.common.manifests import custom_resource
from components.config import NodePoolConfig
from components.workload.sizing import flavor_quota

KUEUE_API = "kueue.x-k8s.io/v1beta2"
COVERED_RESOURCES = ["cpu", "memory", GPU_RESOURCE, EFA_RESOURCE]
LOCAL_QUEUE = "training"
GANG_PROVISIONING = "gpu-gang-provisioning"
# The one provisioning class that scales up: CA asks for all of a gang's nodes in one increase.
# On AWS the autoscaler's AtomicIncreaseSize is not implemented, so EC2 may still deliver fewer
# nodes than asked (cluster-autoscaler FAQ; cloudprovider/aws/aws_cloud_provider.go).
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def flavor_name(pool: NodePoolConfig) -> str:
    return f"pool-{pool.name}"


def resource_flavor_manifest(pool: NodePoolConfig) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(pool)},
        # Admitted pods are steered onto this pool's nodes.
        "spec": {"nodeLabels": {POOL_LABEL: pool.name}},
    }


def provisioned_as_gang(pool: NodePoolConfig) -> bool:
    """GPU pools that can hold a multi-node gang get their nodes through ProvisioningRequests."""
    return pool.gpu and pool.max_size > 1


def gang_provisioning_manifests() -> list[dict[str, Any]]:
    """The AdmissionCheck and its ProvisioningRequestConfig (cluster-wide, one per cluster)."""
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": {"name": GANG_PROVISIONING},
            "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                     "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                    "name": GANG_PROVISIONING}},
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": GANG_PROVISIONING},
            "spec": {
                "provisioningClassName": PROVISIONING_CLASS,
                # Only pods that ask for GPUs go through the autoscaler's provisioning.
                "managedResources": [GPU_RESOURCE],
                # Kueue's defaults, spelled out: a failed request frees the quota and is retried
                # after about base x 2^(n-1) s, capped at the max: 60, 120 and 240 s (kueue v0.19.2
                # pkg/workload/admissionchecks.go UpdateAdmissionCheckRequeueState, factor 2; the
                # field docs in apis/kueue/v1beta2/provisioningrequestconfig_types.go). After 3
                # retries the check rejects the workload and Kueue deactivates it.
                "retryStrategy": {"backoffLimitCount": 3, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800},
            },
        },
    ]


def flavor_resources(pool: NodePoolConfig, gpus: int, *, borrowed: bool) -> list[dict[str, Any]]:
    """An owned quota is nominal (lent while idle); a borrowed one (training.gpuQuotaBorrowed) owns
    nothing and may borrow up to the quota from the cohort's idle nominal quota (kueue v0.19.2
    ClusterQueue: "Workloads in a ClusterQueue can consume a quantity of quota equal to
    nominalQuota+borrowingLimit", schemas/crds/kueue.x-k8s.io_clusterqueues.yaml)."""
    quota = flavor_quota(pool, gpus)
    if not borrowed:
        return [{"name": r, "nominalQuota": quota[r]} for r in COVERED_RESOURCES]
    nothing = flavor_quota(pool, 0)
    return [{"name": r, "nominalQuota": nothing[r], "borrowingLimit": quota[r]} for r in COVERED_RESOURCES]


def cluster_queue_manifest(name: str, *, cohort: str, namespace: str, pools: list[NodePoolConfig],
                           gpu_quota: dict[str, int], borrowed_pools: frozenset[str] = frozenset()) -> dict[str, Any]:
    # A capacity block that has ended keeps its flavor (its name is in jobs' history) with no quota.
    flavors = [{"name": flavor_name(pool), "resources": flavor_resources(
                   pool, 0 if pool.released else gpu_quota.get(pool.name, 0), borrowed=pool.name in borrowed_pools)}
               for pool in pools]
    gangs = [flavor_name(p) for p in pools if provisioned_as_gang(p)]
    checks = {"admissionChecksStrategy": {"admissionChecks": [{"name": GANG_PROVISIONING, "onFlavors": gangs}]}} if gangs else {}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            **checks,
            # Queues of one environment share a cohort: a team's idle GPUs can be borrowed.
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": COVERED_RESOURCES, "flavors": flavors}],
            # Lent GPUs come back: a queue below its quota may reclaim them from borrowers.
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        },
    }


def local_queue_manifest(*, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


@dataclass(frozen=True)
class ResourceFlavorsArgs:
    pools: list[NodePoolConfig]
    """One Kueue ResourceFlavor per pool."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the flavors: the Kueue release, which installs their CRD."""


class ResourceFlavors(pulumi.ComponentResource):
    """Cluster-wide: one flavor per GPU pool and the gang provisioning check (made by the platform
    stack, used by every queue)."""

    def __init__(self, name: str, args: ResourceFlavorsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:ResourceFlavors", name, None, opts)
        for pool in args.pools:
            custom_resource(f"{name}-{pool.name}", resource_flavor_manifest(pool),
                            pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        for manifest in gang_provisioning_manifests():
            custom_resource(f"{name}-{manifest['kind'].lower()}", manifest,
                            pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        self.register_outputs({})


@dataclass(frozen=True)
class TrainingQueueArgs:
    name: str
    """The namespace's name, which both queues take."""
    cohort: str
    """The environment's cohort: queues of one cohort lend each other idle quota."""
    namespace: pulumi.Input[str]
    """The same namespace as an Output, so the LocalQueue waits for it to exist."""
    pools: list[NodePoolConfig]
    """The pools the queue admits jobs to (its flavors)."""
    gpu_quota: dict[str, int]
    """Pool name -> GPUs the queue may use of it."""
    borrowed_pools: frozenset[str]
    """Pools whose quota the queue borrows from the cohort rather than owns."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the queues: the Kueue release (team stacks: the namespace)."""
    cluster_queue_made_by_platform: bool = False
    """A team's: the platform stack made its ClusterQueue (workload/team_queues.py); only the LocalQueue here."""


class TrainingQueue(pulumi.ComponentResource):
    """A namespace's ClusterQueue (its GPU quota, in the environment's cohort) and LocalQueue; a
    team's ClusterQueue is the platform's, and only its LocalQueue is made here."""

    def __init__(self, name: str, args: TrainingQueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TrainingQueue", name, None, opts)
        namespace = pulumi.Output.from_input(args.namespace)
        after: Sequence[pulumi.Resource] = args.depends_on
        if not args.cluster_queue_made_by_platform:
            after = [custom_resource(
                f"{name}-cluster-queue",
                cluster_queue_manifest(args.name, cohort=args.cohort, namespace=args.name, pools=args.pools,
                                       gpu_quota=args.gpu_quota, borrowed_pools=args.borrowed_pools),
                pulumi.ResourceOptions(parent=self, depends_on=args.depends_on),
            )]
        local = local_queue_manifest(namespace=args.name, cluster_queue=args.name)
        local["metadata"]["namespace"] = namespace
        custom_resource(f"{name}-local-queue", local, pulumi.ResourceOptions(parent=self, depends_on=after))
        self.register_outputs({})
