"""The closed vocabularies of the config model: each value a stack file may spell, as a StrEnum.

A member equals its spelling (`Capacity.SPOT == "spot"`) and formats as it, so messages and
lookups read the same. Where a value leaves the model into a resource, a manifest or an output it
is passed as `str(...)`: YAML's safe dumper refuses subclasses of str.
"""

from __future__ import annotations

from enum import StrEnum


class Capacity(StrEnum):
    """How a node pool buys its instances (`nodePools[].capacity`)."""

    ON_DEMAND = "onDemand"
    SPOT = "spot"
    CAPACITY_BLOCK = "capacityBlock"
    """EC2 Capacity Blocks for ML: GPU instances reserved for a fixed term, in one zone."""
    RESERVATION = "reservation"
    """A targeted On-Demand Capacity Reservation, in one zone."""


class TaintEffect(StrEnum):
    """A Kubernetes taint's effect, in Kubernetes' spelling (`nodePools[].taints[].effect`)."""

    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"


class NatLayout(StrEnum):
    """Where the network's NAT gateways are (`network.natGateways`)."""

    SINGLE = "single"
    """One NAT gateway, in the first zone: cheaper, and every zone loses egress with that zone."""
    PER_AZ = "perAz"


class AmiType(StrEnum):
    """The EKS-optimized AMI of a managed node group (EKS API Nodegroup amiType)."""

    AL2023_X86_64_NVIDIA = "AL2023_x86_64_NVIDIA"
    AL2023_X86_64_STANDARD = "AL2023_x86_64_STANDARD"
