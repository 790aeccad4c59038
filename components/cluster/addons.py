"""EKS managed add-ons that need running nodes: CoreDNS and the node monitoring agent.

They are created after the node pools: without nodes CoreDNS stays degraded and the add-on
never becomes ACTIVE. The node monitoring agent reports accelerator failures
(`AcceleratedHardwareReady=False`) that node auto-repair acts on.

DCGM on GPU nodes: the agent reads GPU health from the host engine its own `dcgm-server`
DaemonSet runs (nv-hostengine, host port 5555). That DaemonSet tolerates no taint by default
(chart values `dcgmAgent.tolerations: []`), so on our tainted GPU pools it never started, the
agent reported a DCGM error, and auto-repair could replace healthy GPU nodes
(aws/containers-roadmap#2567, #2555). The CloudWatch add-on's dcgm-exporter runs beside it with
its own embedded engine: why the two do not collide, and the one-node check that proves it, are
in docs/upgrading-and-pins.md ("DCGM on GPU nodes").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster.control_plane import Cluster

# Add-on configuration (schema key `dcgmAgent.tolerations` since v1.6.0,
# charts/configuration.schema.json). Every taint, as the chart already does for the agent itself
# (`nodeAgent.tolerations: [{operator: Exists}]`): pools may carry their own taints beside
# nvidia.com/gpu, and the DaemonSet's node affinity (GPU instance types) keeps it off other nodes.
NODE_MONITORING_AGENT_CONFIGURATION = {"dcgmAgent": {"tolerations": [{"operator": "Exists"}]}}


@dataclass(frozen=True)
class ClusterAddonsArgs:
    cluster: Cluster
    """The cluster the add-ons are installed on."""
    node_groups: Sequence[aws.eks.NodeGroup]
    """CoreDNS and the node monitoring agent wait for these: they need nodes to run on."""


class ClusterAddons(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:ClusterAddons", name, None, opts)
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=args.node_groups)
        args.cluster.addon("coredns", opts=after_nodes)
        args.cluster.addon("eks-node-monitoring-agent", opts=after_nodes,
                           configuration_values=json.dumps(NODE_MONITORING_AGENT_CONFIGURATION))
        self.register_outputs({})
