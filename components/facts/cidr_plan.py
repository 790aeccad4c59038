"""Subnet planning: carve a VPC CIDR into one private and one public subnet per AZ.

Private subnets hold the nodes and, with the VPC CNI, every pod IP, so they get almost all of
the space: the VPC is split into the smallest power of two of equal slots that fits one slot
per AZ plus one spare; each AZ takes one slot as its private subnet and the last slot is split
again into the public subnets (NAT gateways and load balancers need few addresses).

Example: 10.0.0.0/16 over 3 AZs -> private /18s (16,379 usable IPs each) and public /20s.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

# Each AWS subnet loses 5 addresses; a /22 private subnet still leaves ~1,000 pod IPs per AZ,
# which is the least a GPU node pool with VPC-CNI prefix delegation can live with.
SMALLEST_PRIVATE_PREFIX = 22
# AWS allows VPC CIDR blocks from /16 to /28.
LARGEST_VPC_PREFIX = 16
RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


class CidrPlanError(ValueError):
    """The VPC cannot be planned as asked; the message says why and how to fix it."""


@dataclass(frozen=True)
class AzSubnets:
    availability_zone: str
    private: ipaddress.IPv4Network
    public: ipaddress.IPv4Network


def is_private(network: ipaddress.IPv4Network) -> bool:
    return any(network.subnet_of(block) for block in RFC1918)


def _bits_for(count: int) -> int:
    return max(1, math.ceil(math.log2(count)))


def plan_subnets(vpc_cidr: ipaddress.IPv4Network, availability_zones: tuple[str, ...]) -> tuple[AzSubnets, ...]:
    if not availability_zones:
        raise CidrPlanError("at least one availability zone is needed to plan subnets")
    if vpc_cidr.prefixlen < LARGEST_VPC_PREFIX:
        raise CidrPlanError(f"{vpc_cidr} is larger than AWS allows for a VPC; use a /16 or smaller")
    if not is_private(vpc_cidr):
        raise CidrPlanError(f"{vpc_cidr} is not inside an RFC 1918 private range (10/8, 172.16/12, 192.168/16)")

    zones = len(availability_zones)
    slot_prefix = vpc_cidr.prefixlen + _bits_for(zones + 1)
    if slot_prefix > SMALLEST_PRIVATE_PREFIX:
        raise CidrPlanError(
            f"{vpc_cidr} over {zones} AZs gives private subnets of /{slot_prefix}, smaller than "
            f"/{SMALLEST_PRIVATE_PREFIX}: too few pod IPs for the VPC CNI; use a larger VPC CIDR"
        )
    slots = list(vpc_cidr.subnets(new_prefix=slot_prefix))
    public_blocks = list(slots[-1].subnets(new_prefix=slot_prefix + _bits_for(zones)))
    return tuple(
        AzSubnets(availability_zone=az, private=slots[index], public=public_blocks[index])
        for index, az in enumerate(availability_zones)
    )
