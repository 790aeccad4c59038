"""Availability Zone IDs (pure).

AZ *names* (us-east-1a) are shuffled per AWS account; AZ *IDs* (use1-az4) name the same
physical zone in every account (EC2 User Guide, "AZ IDs"). Capacity reservations and capacity
blocks live in one physical zone, so GPU pools name theirs by ID; the program resolves each ID to
the account's name through the provider (aws.get_availability_zone) at deploy time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from components.facts.regions import REGIONS_AS_OF, availability_zone_ids

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


def zone_id_problem(zone: str, region: str) -> tuple[str, str] | None:
    """(problem, fix) when `zone` is an AZ ID that `region` does not have; None otherwise (names
    included: whether a name is one of the network's zones is the caller's question)."""
    match = AZ_ID.fullmatch(zone)
    prefix = zone_id_prefix(region) if region else None
    known_ids = availability_zone_ids(region)
    if match and prefix and match["prefix"] != prefix:
        return f"is an AZ ID of another region than {region}", f"use an ID like {prefix}-az4"
    if match and known_ids and zone not in known_ids:
        return (f"is not an AZ ID of {region} (components/facts/regions.py, as of {REGIONS_AS_OF})",
                f"use one of {', '.join(known_ids)}")
    return None


def zone_name(zone: str, names_by_id: Mapping[str, str]) -> str | None:
    """This account's name of a zone given by name or by AZ ID; None for an ID not looked up."""
    return names_by_id.get(zone) if is_zone_id(zone) else zone


def same_zone(first: str, second: str, names_by_id: Mapping[str, str]) -> bool | None:
    """Whether two zones, each a name or an AZ ID, are the same zone of this account; None when
    that needs an AZ ID the caller has not looked up (a name and an ID before deploy time)."""
    if is_zone_id(first) == is_zone_id(second):
        return first == second
    first_name, second_name = zone_name(first, names_by_id), zone_name(second, names_by_id)
    return None if first_name is None or second_name is None else first_name == second_name


def zone_mismatch_problems(key: str, zone: str, pools: Mapping[str, str], names_by_id: Mapping[str, str],
                           *, why: str) -> list[tuple[str, str]]:
    """(problem, fix) of `key` for each pool (name -> its one zone) that is surely not in `zone`,
    the value of `key`; `why` says why the two must share a zone. Pairs that need an AZ ID not looked up yet
    are left for the deploy-time call, which passes the account's names."""
    problems = []
    for pool, pool_zone in pools.items():
        if same_zone(zone, pool_zone, names_by_id) is False:
            in_account = [f"{z} is {names_by_id[z]} in this account" for z in (zone, pool_zone) if z in names_by_id]
            detail = f" ({'; '.join(in_account)})" if in_account else ""
            problems.append((f"{zone} is not the zone of pool {pool}, {pool_zone}{detail}; {why}",
                             f"set {key.rsplit('.', 1)[-1]}: {pool_zone}, or leave it out (it defaults to that zone)"))
    return problems


def zone_id_problems(zones_by_key: Mapping[str, Sequence[str]], names_by_id: Mapping[str, str],
                     network_zones: Sequence[str]) -> list[tuple[str, str, str]]:
    """(key, problem, fix) for each AZ ID of a pool that is, in this account, a zone where the network has no
    subnet (`zones_by_key`: each pool's zones under the config key that names them;
    `names_by_id`: the account's name of each ID, from the provider)."""
    problems = []
    for key, zones in zones_by_key.items():
        for zone in zones:
            name = names_by_id.get(zone)
            if name is not None and name not in network_zones:
                problems.append((
                    key, f"AZ ID {zone} is {name} in this account, where the network has no subnet "
                    f"(network.availabilityZones: {', '.join(sorted(network_zones))})",
                    f"add {name} to network.availabilityZones, or use an AZ ID of one of those zones."))
    return problems
