"""EKS managed add-ons that need running nodes: CoreDNS and the node monitoring agent.

They are created after the node pools: without nodes CoreDNS stays degraded and the add-on
never becomes ACTIVE. The node monitoring agent reports accelerator failures
(`AcceleratedHardwareReady=False`) that node auto-repair acts on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster.control_plane import Cluster


@dataclass(frozen=True)
class ClusterAddonsArgs:
    cluster: Cluster
    node_groups: Sequence[aws.eks.NodeGroup]


class ClusterAddons(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:ClusterAddons", name, None, opts)
        after_nodes = pulumi.ResourceOptions(parent=self, depends_on=args.node_groups)
        args.cluster.addon("coredns", opts=after_nodes)
        args.cluster.addon("eks-node-monitoring-agent", opts=after_nodes)
        self.register_outputs({})
