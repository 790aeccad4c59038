"""Node network interfaces and the IP addresses a node takes from its subnet (pure).

Every EFA interface of the legacy layout (`efa`, EFA with ENA) carries a private IP; on a p5 that
is 32 addresses per node before any pod runs, and the VPC CNI by default keeps a whole spare
ENI of addresses warm. Two fixes, both from the EKS User Guide ("Manage EFA devices",
#eks-efa-conserve-ip): `efa-only` interfaces, which carry no IP, on every network card but the
primary interface; and WARM_IP_TARGET / MINIMUM_IP_TARGET on the VPC CNI, so a node holds only
the addresses its pods use plus a few warm ones. The subnet IP budget of the config model and
the launch templates both take the layout from here: they cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.facts.instance_types import InstanceType
from components.facts.node_sizing import kubelet_max_pods

# VPC CNI warm-pool settings (cluster-wide; the vpc-cni add-on's `env`). amazon-vpc-cni-k8s
# docs/eni-and-ip-target.md: "If you plan to run around 10 pods, the advice is to set
# MINIMUM_IP_TARGET slightly higher than that, like 12, and have WARM_IP_TARGET=2." A GPU node
# runs about that many pods (a few DaemonSets with pod IPs, the training pod, Mountpoint pods).
WARM_IP_TARGET = 2
MINIMUM_IP_TARGET = 12
# AWS keeps the first four and the last address of every subnet.
AWS_RESERVED_IPS_PER_SUBNET = 5


@dataclass(frozen=True)
class NetworkInterface:
    network_card: int
    device_index: int
    interface_type: str  # "interface" (ENA), "efa" (EFA with ENA) or "efa-only"

    @property
    def carries_ip(self) -> bool:
        return self.interface_type != "efa-only"


def efa_interfaces(instance: InstanceType) -> tuple[NetworkInterface, ...]:
    """The launch template's interfaces for an EFA node: one EFA device per network card.

    EC2's recommended layout (EC2 User Guide efa-acc-inst-types, "Maximize network bandwidth";
    the EKS User Guide's managed-node-group example for p6-b200 is the same): the primary
    interface (card 0, device 0) is a plain ENA interface, an efa-only interface takes card 0
    device 1, and every other card gets an efa-only interface at device 0. EFA-only interfaces
    exist on every EFA-capable type (EC2 announcement of 2024-10-28) and need VPC CNI >= 1.18.4
    (terraform-aws-eks `enable_efa_only`); the pinned add-ons are 1.20 and later.
    """
    if not instance.has_efa:
        return ()
    return (NetworkInterface(0, 0, "interface"), NetworkInterface(0, 1, "efa-only"),
            *(NetworkInterface(card, 0, "efa-only") for card in range(1, instance.efa_interfaces)))


def node_ip_addresses(instance: InstanceType, *, efa: bool) -> int:
    """Most IPs one node of `instance` can take from its subnet: every pod slot the kubelet
    allows in use plus the warm ones (capped by what the default card's ENIs can hold), the
    primary address of each ENI the CNI attaches for them, and any IP-bearing EFA interface."""
    ips_per_eni = instance.ipv4_per_eni - 1  # an ENI's primary address is not given to pods
    pod_ips = min(max(MINIMUM_IP_TARGET, kubelet_max_pods(instance) + WARM_IP_TARGET), instance.enis * ips_per_eni)
    enis_used = max(1, math.ceil(pod_ips / ips_per_eni))
    extra_interfaces = sum(1 for i in efa_interfaces(instance)[1:] if i.carries_ip) if efa else 0
    return pod_ips + enis_used + extra_interfaces


def usable_ips(prefix_length: int) -> int:
    return 2 ** (32 - prefix_length) - AWS_RESERVED_IPS_PER_SUBNET
