"""Device plugins: without them a node never advertises `nvidia.com/gpu` or `vpc.amazonaws.com/efa`
(the seed's "GPU not detected"). Each runs only on nodes that have the hardware: the EFA plugin
crashes on nodes without EFA, and neither should occupy CPU nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.cluster.pool_scheduling import EFA_PRESENT_LABEL, GPU_PRESENT_LABEL, GPU_TAINT
from components.common.helm import helm_release

NVIDIA_CHART_VERSION = "0.18.0"
NVIDIA_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
# v0.5.30 (image v0.5.20): its DaemonSet's required node affinity lists every EFA type the config
# accepts, p6-b200 included (0.5.7 lacked p6; aws/eks-charts@5239609 stable/aws-efa-k8s-device-plugin).
EFA_CHART_VERSION = "0.5.30"
EFA_CHART_REPO = "https://aws.github.io/eks-charts"
NAMESPACE = "kube-system"


def only_on_nodes_labelled(label: str) -> dict:
    """The values both charts accept to pin their DaemonSet to labelled (GPU-tainted) nodes."""
    return {
        "nodeSelector": {label: "true"},
        "tolerations": [{"key": GPU_TAINT.key, "operator": "Exists", "effect": GPU_TAINT.effect}],
    }


# The NVIDIA chart's default affinity also admits nodes found by Node Feature Discovery; ours
# are labelled by their pool, so that label alone decides. (The EFA chart has no such values.)
NVIDIA_ONLY_VALUES = {
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}]},
    ]}}},
    "priorityClassName": "system-node-critical",
    "gfd": {"enabled": False},
}


@dataclass(frozen=True)
class DevicePluginsArgs:
    nvidia: bool
    efa: bool
    depends_on: Sequence[pulumi.Resource]


class DevicePlugins(pulumi.ComponentResource):
    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:DevicePlugins", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        if args.nvidia:
            helm_release(f"{name}-nvidia", chart="nvidia-device-plugin", version=NVIDIA_CHART_VERSION,
                         repo=NVIDIA_CHART_REPO, namespace=NAMESPACE,
                         values={**only_on_nodes_labelled(GPU_PRESENT_LABEL), **NVIDIA_ONLY_VALUES}, opts=child)
        if args.efa:
            helm_release(f"{name}-efa", chart="aws-efa-k8s-device-plugin", version=EFA_CHART_VERSION,
                         repo=EFA_CHART_REPO, namespace=NAMESPACE,
                         values=only_on_nodes_labelled(EFA_PRESENT_LABEL), opts=child)
        self.register_outputs({})
