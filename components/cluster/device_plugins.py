"""Device plugins: without them a node never advertises `nvidia.com/gpu` or `vpc.amazonaws.com/efa`
(the "GPU not detected" go-live check, verify/checks.py). Each runs only on nodes that have the hardware: the EFA plugin
crashes on nodes without EFA, and neither should occupy CPU nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.cluster.pool_scheduling import EFA_PRESENT_LABEL, GPU_PRESENT_LABEL
from components.common.helm import helm_release

# NVIDIA/k8s-device-plugin tag v0.20.0 (460230b, 2026-08-19), the newest release (mirror of
# 2026-08-19; v0.19.3 and v0.18.2 are the older lines); its gh-pages index.yaml (bf58428) lists
# chart 0.20.0, default image nvcr.io/nvidia/k8s-device-plugin:v0.20.0 (_helpers.tpl: v +
# appVersion). From 0.18.0 the values we set are unchanged (values.yaml diff: new optional
# enableHostNetwork and cdi.featureFlags only); the NFD subchart 0.19.0 stays off with gfd.
NVIDIA_CHART_VERSION = "0.20.0"
NVIDIA_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
# v0.5.30 (image v0.5.20): its DaemonSet's required node affinity lists every EFA type the config
# accepts, p6-b200 included (0.5.7 lacked p6; aws/eks-charts@5239609 stable/aws-efa-k8s-device-plugin).
EFA_CHART_VERSION = "0.5.30"
# The GPU types among the chart's supportedInstanceLabels.values (its DaemonSet's required node
# affinity), copied from that values.yaml; tests check every EFA type we accept is here.
EFA_CHART_INSTANCE_TYPES = frozenset({
    "g4dn.8xlarge", "g4dn.12xlarge", "g4dn.16xlarge", "g4dn.metal",
    "g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge", "g5.48xlarge",
    "g6.8xlarge", "g6.12xlarge", "g6.16xlarge", "g6.24xlarge", "g6.48xlarge",
    "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
    "g7.8xlarge", "g7.12xlarge", "g7.24xlarge", "g7.48xlarge", "g7e.8xlarge", "g7e.12xlarge", "g7e.24xlarge", "g7e.48xlarge",
    "p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.4xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
    "p6-b200.48xlarge", "p6-b300.48xlarge", "p6e-gb200.36xlarge", "p6e-gb300.36xlarge",
})
EFA_CHART_REPO = "https://aws.github.io/eks-charts"
NAMESPACE = "kube-system"


def only_on_nodes_labelled(label: str) -> dict:
    """The values both charts accept to pin their DaemonSet to labelled GPU nodes, whatever their
    taints: besides nvidia.com/gpu a pool may carry its own (nodePools[].taints), and a plugin
    kept off a node leaves its GPUs or EFA devices unadvertised, the training pods Pending. The
    label keeps the DaemonSet off every other node (as the node monitoring agent's DCGM: addons.py)."""
    return {"nodeSelector": {label: "true"}, "tolerations": [{"operator": "Exists"}]}


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
    """Some pool has GPUs: install the NVIDIA device plugin."""
    efa: bool
    """Some pool has EFA interfaces: install the EFA device plugin."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the plugins: e.g. the node groups they run on."""


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
