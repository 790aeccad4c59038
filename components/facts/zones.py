"""Availability Zone IDs (pure).

AZ *names* (us-east-1a) are shuffled per AWS account; AZ *IDs* (use1-az4) name the same
physical zone in every account (EC2 User Guide, "AZ IDs"). Capacity reservations and capacity
blocks live in one physical zone, so GPU pools name theirs by ID; the program resolves each ID to
the account's name through the provider (aws.get_availability_zone) at deploy time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

AZ_ID = re.compile(r"(?P<prefix>[a-z]{2,}[0-9]+)-az(?P<number>[0-9]+)")
# How the words of a region name shorten in its AZ IDs: us-east-1 -> use1, ap-northeast-1 ->
# apne1, us-gov-west-1 -> usgw1, eu-central-2 -> euc2 (EC2 DescribeAvailabilityZones ZoneId).
_REGION_WORDS = {"east": "e", "west": "w", "north": "n", "south": "s", "central": "c", "northeast": "ne",
                 "northwest": "nw", "southeast": "se", "southwest": "sw", "gov": "g"}


def is_zone_id(zone: str) -> bool:
    return AZ_ID.fullmatch(zone) is not None


def zone_id_prefix(region: str) -> str | None:
    """`use1` for us-east-1; None for a region whose words this table does not know."""
    geo, *words, number = region.split("-")
    short = [_REGION_WORDS.get(word) for word in words]
    if not words or any(s is None for s in short) or not number.isdigit():
        return None
    return f"{geo}{''.join(s or '' for s in short)}{number}"


def zone_id_problems(zones_by_key: Mapping[str, Sequence[str]], names_by_id: Mapping[str, str],
                     network_zones: Sequence[str]) -> list[str]:
    """One message per AZ ID of a pool that is, in this account, a zone where the network has no
    subnet (`zones_by_key`: each pool's zones under the config key that names them;
    `names_by_id`: the account's name of each ID, from the provider)."""
    problems = []
    for key, zones in zones_by_key.items():
        for zone in zones:
            name = names_by_id.get(zone)
            if name is not None and name not in network_zones:
                problems.append(
                    f"{key}: AZ ID {zone} is {name} in this account, where the network has no subnet "
                    f"(network.availabilityZones: {', '.join(sorted(network_zones))}). Fix: add {name} to "
                    "network.availabilityZones, or give the pool an AZ ID of one of those zones.")
    return problems
