"""The batch controllers: JobSet (gang of Jobs, whole-gang restart) and Kueue (all-or-nothing
admission against per-queue GPU quota). Pinned to the releases whose CRDs the tests validate
against (JobSet v0.12.0, Kueue v0.19.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import yaml

from components.cluster.autoscaler import MAX_NODE_PROVISION_MINUTES
from components.cluster.pool_scheduling import POOL_LABEL
from components.common.helm import helm_release
from components.common.namespaces import controller_network_policies, namespace
from components.workload.training_job import STARTUP_BUDGET_SECONDS

# kubernetes-sigs/jobset tag v0.12.0 (f22e565a, 2026-05-08): hack/helm-chart-package.sh strips the "v" and
# pushes the chart here, image registry.k8s.io/jobset/jobset:v0.12.0; chart README: --version 0.12.0.
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_VERSION = "0.12.0"
# kubernetes-sigs/kueue tag v0.19.2 (8eab6877, 2026-08-20): chart README --version="0.19.2", image
# registry.k8s.io/kueue/kueue:v0.19.2; its go.mod requires sigs.k8s.io/jobset v0.12.0, the JobSet above.
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
KUEUE_VERSION = "0.19.2"
# What the API server calls in the controllers' namespaces: admission webhooks (9443), Kueue's
# visibility API (8082), metrics (8443).
CONTROLLER_PORTS = (9443, 8082, 8443)
# Scaling a GPU pool up from zero and pulling a multi-GB training image: as long as the autoscaler
# waits for a new node before it gives up on it.
NODE_PROVISIONING_SECONDS = MAX_NODE_PROVISION_MINUTES * 60
# A gang that cannot get all its pods Ready in this time is evicted and requeued, releasing its
# quota, instead of holding GPUs while waiting forever for the rest. A training pod is Ready only
# once its startup probe sees the first heartbeat, so the timeout covers node provisioning plus
# the whole startup budget; a shorter one would evict every slow but healthy start.
PODS_READY_TIMEOUT_SECONDS = NODE_PROVISIONING_SECONDS + STARTUP_BUDGET_SECONDS
# A running gang that lost a pod (a node gone, or the JobSet restarting every pod) waits this long
# to be Ready again, then is requeued (and counts toward backoffLimitCount). Stated, not left to
# Kueue's default (`timeout`: kueue v0.19.2 apis/config/v1beta2/configuration_types.go
# WaitForPodsReady.RecoveryTimeout), and no shorter than a healthy restart may take: a new node
# (the node group's own replacement: the Cluster Autoscaler skips pods that consume a
# ProvisioningRequest, cluster-autoscaler-1.36.1 processors/provreq/pods_filter.go) plus the pods'
# whole startup budget (rendezvous and restore). Shorter, a restart that is slow but healthy would
# be evicted and requeued.
RECOVERY_TIMEOUT_SECONDS = PODS_READY_TIMEOUT_SECONDS
# MultiKueue (on a manager): nominate the first worker of MultiKueueConfig's clusters (the stack
# file's multiKueue.workers: the worker with reserved capacity first) alone, and add the next one
# only after 5 minutes without admission (incrementaldispatcher.go:50 incrementalDispatcherRoundTimeout;
# a round adds to the nominated workers, it does not replace them). The default AllAtOnce dispatcher creates the workload on
# every worker at once, and each reserves quota and provisions nodes before one is kept. The
# config order is honoured with MultiKueueIncrementalDispatcherRespectConfigOrder, and stepSize
# with MultiKueueIncrementalDispatcherConfig, both beta and on by default in v0.19
# (pkg/features/kube_features.go); stepSize defaults to 3, which would nominate both of prod's
# workers in one round.
MULTIKUEUE_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
MULTIKUEUE_STEP_SIZE = 1


def kueue_configuration() -> dict:
    """Kueue's controller configuration (replaces the chart's default file).

    v1beta2, the chart's own version since 0.15 (values.yaml managerConfig); v1beta1 is still
    converted by 0.19 but is on its way out. Kueue decodes it strictly: an unknown field stops
    the manager, so v1beta1's `waitForPodsReady.enable` is gone (the block's presence enables it).
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # Only jobs that name a queue are managed; everything else is left alone.
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": f"{PODS_READY_TIMEOUT_SECONDS // 60}m",
            # Blocking would hold every other job of the queue while one gang waits for nodes to
            # scale up (up to the timeout); with the autoscaler, gangs get their own nodes.
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": 5, "backoffBaseSeconds": 60},
            "recoveryTimeout": f"{RECOVERY_TIMEOUT_SECONDS // 60}m",
        },
        # Read only where MultiKueue dispatches (a manager); a worker's or a lone cluster's Kueue ignores it.
        "multiKueue": {"dispatcherName": MULTIKUEUE_DISPATCHER,
                       "incrementalDispatcherConfig": {"stepSize": MULTIKUEUE_STEP_SIZE}},
        "integrations": {"frameworks": ["jobset.x-k8s.io/jobset", "batch/job"]},
    }


@dataclass(frozen=True)
class JobControllersArgs:
    system_pool: str
    """The pool the controllers run on."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the releases: e.g. the node groups, and the ProvisioningRequest CRD."""


class JobControllers(pulumi.ComponentResource):
    kueue: pulumi.Resource

    def __init__(self, name: str, args: JobControllersArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:JobControllers", name, None, opts)
        on_system_nodes = {POOL_LABEL: args.system_pool}
        jobset_ns = namespace(f"{name}-jobset-namespace", "jobset-system", enforce="restricted",
                              opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        controller_network_policies(f"{name}-jobset", "jobset-system", ingress_ports=CONTROLLER_PORTS,
                                    opts=pulumi.ResourceOptions(parent=self, depends_on=[jobset_ns]))
        jobset = helm_release(
            f"{name}-jobset", chart=JOBSET_CHART, version=JOBSET_VERSION, namespace="jobset-system",
            values={"controller": {"nodeSelector": on_system_nodes}},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[jobset_ns]),
        )
        kueue_ns = namespace(f"{name}-kueue-namespace", "kueue-system", enforce="restricted",
                             opts=pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        controller_network_policies(f"{name}-kueue", "kueue-system", ingress_ports=CONTROLLER_PORTS,
                                    opts=pulumi.ResourceOptions(parent=self, depends_on=[kueue_ns]))
        # Kueue enables its JobSet integration only if JobSet's CRDs exist when it starts, and its
        # ProvisioningRequest admission check only if that CRD does (args.depends_on carries it).
        self.kueue = helm_release(
            f"{name}-kueue", chart=KUEUE_CHART, version=KUEUE_VERSION, namespace="kueue-system",
            values={
                "controllerManager": {"nodeSelector": on_system_nodes, "replicas": 2,
                                      "podDisruptionBudget": {"enabled": True, "minAvailable": 1}},
                "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(kueue_configuration(), sort_keys=False)},
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[kueue_ns, jobset]),
        )
        self.register_outputs({})
