"""Which zone the FSx for Lustre file system lives in (`storage.lustre.availabilityZone`).

A Lustre file system lives in one subnet, so in one zone, and every checkpoint its jobs write
crosses zones unless their nodes are in that zone too (slower, and billed per GB each way). The
nodes of an EFA pool, or of one on a capacity reservation or block, are in exactly one zone, named
by AZ ID; zone *names* are shuffled per account (EC2 User Guide, "AZ IDs"), so only an AZ ID, or
a name resolved in the account, says whether the two are the same zone.

- Left out, the file system goes where the GPU pools of the stack's jobs are: the zone of the
  first of those pools that runs in exactly one zone (EFA and reserved pools first); if none
  does, the network's first zone.
- Given or not, it must be the zone of every EFA or reserved pool whose jobs use the file system
  (so jobs on such pools of two zones cannot share it).
  Compared here when both are AZ IDs (or both names); a name against an AZ ID is compared by the
  program once the account has resolved the ID, still before any resource exists
  (platform.py `_resolve_zone_ids`).

Every job of a platform stack with `storage.lustre` uses it (team stacks keep EFS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from components.config.node_pools import RESERVED_CAPACITY, NodePoolConfig
from components.config.reader import ConfigProblem, Section
from components.config.storage import StorageConfig
from components.config.training import JobConfig
from components.facts.zones import zone_mismatch_problems

ZONE_KEY = "storage.lustre.availabilityZone"
WHY_ONE_ZONE = ("its jobs checkpoint to this file system, and an EFA or reserved pool cannot move: every "
                "checkpoint would cross zones (slower, and billed per GB each way)")


def pools_that_fix_the_zone(pools: Sequence[NodePoolConfig], jobs: Sequence[JobConfig]) -> dict[str, str]:
    """Pool name -> its one zone, for every EFA or reserved pool that runs a job of the stack."""
    used = {job.pool for job in jobs}
    return {p.name: p.availability_zones[0] for p in pools
            if p.name in used and (p.efa or p.capacity in RESERVED_CAPACITY) and len(p.availability_zones) == 1}


def default_zone(pools: Sequence[NodePoolConfig], jobs: Sequence[JobConfig], network_zones: Sequence[str]) -> str:
    """The zone of the first single-zone GPU pool the jobs run on, EFA and reserved pools first;
    else the network's first zone ("" if it has none that passed)."""
    fixed = pools_that_fix_the_zone(pools, jobs)
    if fixed:
        return next(iter(fixed.values()))
    used = {job.pool for job in jobs}
    single = [p.availability_zones[0] for p in pools if p.name in used and p.gpu and len(p.availability_zones) == 1]
    return single[0] if single else (network_zones[0] if network_zones else "")


def place_lustre(root: Section, storage: StorageConfig, *, pools: Sequence[NodePoolConfig],
                 jobs: Sequence[JobConfig], network_zones: Sequence[str]) -> StorageConfig:
    """`storage` with the Lustre file system's zone chosen (if left out) and checked against the
    pools that fix it; errors go to `root`'s log under storage.lustre.availabilityZone."""
    lustre = storage.lustre
    key = root.key(ZONE_KEY)
    if lustre is None or root.errors.reported(key):
        return storage  # no file system, or its zone failed already
    zone = lustre.availability_zone or default_zone(pools, jobs, network_zones)
    fixed = pools_that_fix_the_zone(pools, jobs)
    if len(set(fixed.values())) > 1:  # no zone can serve them all
        listed = ", ".join(f"{pool} in {pool_zone}" for pool, pool_zone in fixed.items())
        root.errors.append(ConfigProblem(key, f"the jobs' EFA or reserved pools run in different zones ({listed}), and "
                                         "one file system lives in one zone: the jobs of all but one would checkpoint "
                                         "across zones", "run the jobs of this stack on EFA or reserved pools of one zone"))
    else:
        root.errors.extend(ConfigProblem(key, problem, fix)
                           for problem, fix in zone_mismatch_problems(key, zone, fixed, {}, why=WHY_ONE_ZONE))
    return replace(storage, lustre=replace(lustre, availability_zone=zone))
