"""The `nodePools` list: EKS managed node groups, validated against EC2 instance facts.

A pool needs five lines in a stack file:

    - name: gpu-spot
      instanceTypes: [g6.12xlarge, g5.12xlarge]
      capacity: spot
      gpu: true
      size: {min: 0, desired: 0, max: 4}

GPU pools name their zones by AZ ID (use1-az4: the same physical zone in every account); EFA
pools and pools on reserved capacity (an On-Demand Capacity Reservation or a capacity block)
live in exactly one, the reservation's.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from components.config.reader import Section
from components.config.vocabularies import AmiType, Capacity, TaintEffect
from components.facts.cidr_plan import AzSubnets
from components.facts.instance_types import INSTANCE_TYPES, InstanceType
from components.facts.pod_network import node_ip_addresses, usable_ips
from components.facts.zones import AZ_ID, is_zone_id, zone_id_prefix, zone_id_problem

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Kubernetes qualified names (label and taint keys): an optional DNS-subdomain prefix and '/'.
LABEL_KEY = re.compile(rf"({DNS_LABEL.pattern}(\.{DNS_LABEL.pattern})*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
# EKS CreateNodegroup: label keys and values 1-63 characters, taint keys 1-63 and values 0-63
# (prefix included, stricter than Kubernetes), at most 50 taints.
MAX_EKS_LABEL_CHARS = 63
MAX_TAINTS = 50
# A targeted On-Demand Capacity Reservation runs as ordinary on-demand capacity: the launch
# template names the reservation (EKS User Guide, capacity-blocks-mng / ml-node-groups).
CAPACITY_TYPES = {Capacity.ON_DEMAND: "ON_DEMAND", Capacity.SPOT: "SPOT", Capacity.CAPACITY_BLOCK: "CAPACITY_BLOCK",
                  Capacity.RESERVATION: "ON_DEMAND"}
RESERVED_CAPACITY = (Capacity.CAPACITY_BLOCK, Capacity.RESERVATION)
# EC2 capacity reservation ids (capacity blocks use the same form): cr- and 17 hex digits.
CAPACITY_RESERVATION_ID = re.compile(r"cr-[0-9a-f]{17}")
# EC2 placement group names: up to 255 ASCII characters (EC2 API CreatePlacementGroup, GroupName);
# held here to the characters a shell and a tag take without quoting.
PLACEMENT_GROUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
# The EKS API's spelling of each effect (CreateNodegroup Taint.effect).
TAINT_EFFECTS = {TaintEffect.NO_SCHEDULE: "NO_SCHEDULE", TaintEffect.NO_EXECUTE: "NO_EXECUTE",
                 TaintEffect.PREFER_NO_SCHEDULE: "PREFER_NO_SCHEDULE"}
# Node group names are <cluster>-<pool> and EKS caps them at 63 characters.
MAX_POOL_NAME = 30
RESERVED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
PLATFORM_LABEL_PREFIX = "gpu-training"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: TaintEffect


@dataclass(frozen=True)
class NodePoolConfig:
    name: str
    instance_types: tuple[str, ...]
    capacity: Capacity
    gpu: bool
    efa: bool
    min_size: int
    desired_size: int
    max_size: int
    availability_zones: tuple[str, ...]
    """AZ names of the network, or AZ IDs (resolved to the account's names at deploy time)."""
    root_volume_gib: int
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity_reservation_id: str | None = None
    placement_group: str | None = None
    """An existing cluster placement group to launch into (the one a reservation was created in);
    None: an EFA pool on onDemand or spot gets one of its own, one on reserved capacity none."""
    shutdown_grace_period_seconds: int = 0
    """GPU pools: the kubelet's graceful node shutdown, of which the last
    SHUTDOWN_GRACE_CRITICAL_PODS_S go to critical pods; 0 on CPU pools (nodeadm's own)."""
    capacity_block_end: datetime | None = None
    """A capacityBlock pool: the block's end (UTC), from `aws ec2 describe-capacity-reservations` EndDate."""
    released: bool = False
    """A capacity block that ended before the day of the plan: no nodes, no quota (release_ended_blocks)."""
    release_version: str | None = None
    """GPU pools: the EKS-optimized AMI release their node group boots (`releaseVersion`, else the
    minor's pin in facts/eks_versions.py: pin_release_versions); None: the group's creation-time AMI."""

    @property
    def pod_shutdown_grace_seconds(self) -> int:
        """What a node shutdown leaves a training pod: shutdownGracePeriod minus the critical pods' share."""
        return self.shutdown_grace_period_seconds - SHUTDOWN_GRACE_CRITICAL_PODS_S

    @property
    def instance_facts(self) -> InstanceType:
        """Facts of the first type; validation guarantees all types agree on GPU count/memory."""
        return INSTANCE_TYPES[self.instance_types[0]]

    @property
    def gpus_per_node(self) -> int:
        return self.instance_facts.gpus

    @property
    def efa_interfaces(self) -> int:
        return min(INSTANCE_TYPES[t].efa_interfaces for t in self.instance_types) if self.efa else 0

    @property
    def eks_capacity_type(self) -> str:
        return CAPACITY_TYPES[self.capacity]

    @property
    def ami_type(self) -> AmiType:
        return AmiType.AL2023_X86_64_NVIDIA if self.gpu else AmiType.AL2023_X86_64_STANDARD

    @property
    def hosts_system_pods(self) -> bool:
        """A CPU pool that never scales to zero and repels no pod: CoreDNS, the controllers and the
        autoscaler tolerate none of a pool's own taints (PreferNoSchedule only steers them)."""
        return not self.gpu and self.min_size >= 1 and all(t.effect == TaintEffect.PREFER_NO_SCHEDULE for t in self.taints)


# The kubelet's graceful node shutdown on GPU pools: the part of it nodeadm keeps for critical pods
# (awslabs/amazon-eks-ami @81fec2e nodeadm/internal/kubelet/config.go:245-253; the default and bounds
# of shutdownGracePeriodSeconds, and why, are in its row in keys.py).
SHUTDOWN_GRACE_CRITICAL_PODS_S = 30


def failed_pool_names(raw_pools: list[Any], pools: tuple[NodePoolConfig, ...]) -> frozenset[str] | None:
    """The names whose references are not judged again: pools that failed, and names given twice
    (both reported already). None when a failed pool has no usable name: then no reference can be
    judged, as a job naming `gpu-spot` may mean the pool whose name was mistyped as ""."""
    names = [raw.get("name") if isinstance(raw, Mapping) else None for raw in raw_pools]
    passed = {pool.name for pool in pools}
    # A name that is not a string (a map, a list) failed its own check and cannot be looked up in a set.
    failed = [name for name in names if not isinstance(name, str) or name not in passed]
    if any(not isinstance(name, str) or _pool_name_problem(name) for name in failed):
        return None
    return frozenset(str(name) for name in failed) | {str(name) for name in names if names.count(name) > 1}


def parse_node_pools(section: Section, raw_pools: list, *, network_zones: tuple[str, ...] | None,
                     region: str = "") -> tuple[NodePoolConfig, ...]:
    """`section` is the stack root; `raw_pools` the value of its `nodePools` key. Only the pools that
    passed are returned; `network_zones` is None when the network's zones failed (not judged then)."""
    key = section.key("nodePools")
    pools = []
    for index, raw in enumerate(raw_pools):
        pool_section = Section(section.errors, f"{key}[{index}]", raw)
        pool = _parse_pool(pool_section, network_zones, region)
        if pool is not None:
            pools.append(pool)
    names = [p["name"] for p in raw_pools if isinstance(p, Mapping) and isinstance(p.get("name"), str)]
    for name in sorted({n for n in names if names.count(n) > 1}):
        section.error(key, name, "names two pools the same", "give every pool a unique name")
    if len(pools) == len(raw_pools) and pools and not any(p.hosts_system_pods for p in pools):
        section.error(key, names, "needs a CPU pool with min >= 1 and no NoSchedule or NoExecute taint: CoreDNS, "
                      "controllers and the autoscaler cannot run on tainted pools or on GPU pools that scale to zero",
                      "add e.g. {name: system, instanceTypes: [m7i.xlarge], capacity: onDemand, gpu: false, "
                      "size: {min: 2, desired: 2, max: 4}}")
    if not raw_pools:
        section.error(key, raw_pools, "needs at least one node pool", "add a system pool and a GPU pool")
    return tuple(pools)


def _parse_pool(s: Section, network_zones: tuple[str, ...] | None, region: str) -> NodePoolConfig | None:
    """The pool, or None when it (or anything inside it) failed."""
    name = s.string("name", check=_pool_name_problem,
                    fix=f"use lowercase letters, digits and '-', at most {MAX_POOL_NAME} characters")
    capacity = s.choice("capacity", Capacity)
    gpu = s.boolean("gpu")
    efa = s.boolean("efa")
    types = _parse_types(s, capacity=capacity, gpu=gpu, efa=efa)

    minimum, desired, maximum = _parse_size(s, capacity)

    zones = _parse_zones(s, network_zones, region, gpu=gpu, one_zone=efa or capacity in RESERVED_CAPACITY)
    reservation = s.optional_string(
        "capacityReservationId",
        check=lambda v: None if CAPACITY_RESERVATION_ID.fullmatch(v) else "is not a capacity reservation id",
        fix="copy the id from `aws ec2 describe-capacity-reservations` (cr- and 17 hex digits)")
    if capacity in RESERVED_CAPACITY:
        kind = "capacity block" if capacity == Capacity.CAPACITY_BLOCK else "capacity reservation"
        if not reservation and s.ok("capacityReservationId"):
            s.error(s.key("capacityReservationId"), reservation, f"a pool on a {kind} needs its reservation id",
                    f"set capacityReservationId: cr-... (the id of the {kind})")
        if len(types) != 1 and s.ok("instanceTypes"):
            s.error(s.key("instanceTypes"), list(types), f"a {kind} reserves exactly one instance type",
                    f"list the one type of the {kind}")
    elif reservation:
        s.error(s.key("capacityReservationId"), reservation,
                f"is only used with capacity: capacityBlock or reservation, not {capacity or ''}",
                "remove it, or set capacity: reservation (an On-Demand Capacity Reservation) or capacityBlock")

    block_end = _parse_capacity_block_end(s, capacity)
    placement_group = _parse_placement_group(s, capacity, efa=efa)
    root_volume = s.integer("rootVolumeGiB", 200 if gpu else 50)
    labels = _parse_labels(s)
    taints = _parse_taints(s)
    shutdown_grace = _parse_shutdown_grace(s, gpu=gpu)
    release_version = _parse_release_version(s, gpu=gpu)
    s.finish()
    if s.failed or capacity is None:
        return None
    return NodePoolConfig(
        name=name, instance_types=types, capacity=capacity, gpu=gpu, efa=efa,
        min_size=minimum, desired_size=desired, max_size=maximum, availability_zones=zones,
        root_volume_gib=root_volume, labels=labels, taints=taints, capacity_reservation_id=reservation,
        placement_group=placement_group, shutdown_grace_period_seconds=shutdown_grace, capacity_block_end=block_end,
        release_version=release_version,
    )


# An EKS-optimized AMI release version: <Kubernetes patch version>-<build date>, as the
# amazon-eks-ami release notes and the SSM parameter .../recommended/release_version print it.
RELEASE_VERSION = re.compile(r"(?P<minor>\d+\.\d+)\.\d+-(?P<date>\d{8})")
# Roll the pin monthly: a plan warns once it is older than this.
RELEASE_MAX_AGE_DAYS = 35


def _release_date(text: str) -> date | None:
    match = RELEASE_VERSION.fullmatch(text)
    if match is None:
        return None
    try:
        return datetime.strptime(match["date"], "%Y%m%d").date()
    except ValueError:
        return None


def _parse_release_version(s: Section, *, gpu: bool) -> str | None:
    """`releaseVersion`: a GPU pool's AMI release (CPU pools follow the node group's own)."""
    release = s.optional_string(
        "releaseVersion", check=lambda v: None if _release_date(v) else "is not an AMI release version",
        fix="copy it from `aws ssm get-parameter --name /aws/service/eks/optimized-ami/<minor>/amazon-linux-2023/"
            "x86_64/nvidia/recommended/release_version`, e.g. 1.36.3-20260903 (<Kubernetes version>-<yyyymmdd>)")
    if release and not gpu and s.ok("gpu"):
        s.error(s.key("releaseVersion"), release, "is only read on GPU pools", "remove it")
        return None
    return release if gpu else None


def pin_release_versions(section: Section, pools: tuple[NodePoolConfig, ...], *, kubernetes_version: str,
                         pinned: str | None, today: date) -> tuple[tuple[NodePoolConfig, ...], list[str]]:
    """Every GPU pool with its AMI release: its own, else `pinned` (the minor's, facts/eks_versions.py).
    A release of another minor is an error (EKS refuses it); one unset or older than
    RELEASE_MAX_AGE_DAYS is a warning."""
    judged, warnings = [], []
    for index, pool in enumerate(pools):
        if not pool.gpu:
            judged.append(pool)
            continue
        release = pool.release_version or pinned
        match = RELEASE_VERSION.fullmatch(release) if release else None
        if match and match["minor"] != kubernetes_version:
            section.error(f"{section.key('nodePools')}[{index}].releaseVersion", release,
                          f"is a release of Kubernetes {match['minor']}, the cluster runs {kubernetes_version}",
                          f"use a {kubernetes_version} release (the SSM parameter .../optimized-ami/"
                          f"{kubernetes_version}/amazon-linux-2023/x86_64/nvidia/recommended/release_version)")
        key = f"nodePools '{pool.name}' releaseVersion"
        released_on = _release_date(release) if release else None
        if release is None:
            warnings.append(f"{key}: unset and no verified pin for Kubernetes {kubernetes_version}: the pool's nodes "
                            "boot the AMI its node group was created with, for months; set it")
        elif released_on and (today - released_on).days > RELEASE_MAX_AGE_DAYS:
            warnings.append(f"{key}: {release} is {(today - released_on).days} days old: roll it (docs/upgrading-"
                            "and-pins.md, 'GPU node AMI releases'; the deploy rolls the pool under its PDB gate)")
        judged.append(dataclasses.replace(pool, release_version=release))
    return tuple(judged), warnings


# A capacity block's end as EC2 states it: an ISO 8601 time in UTC (`describe-capacity-reservations`
# EndDate, e.g. 2027-01-15T11:30:00+00:00; a Z suffix is taken too). A time without its zone is refused:
# a block's end read as local time is hours off.
BLOCK_END_FORMS = "2027-01-15T11:30:00Z or 2027-01-15T11:30:00+00:00"
# How soon before a block's end the plan starts to warn.
BLOCK_END_WARNING_DAYS = 2


def _parse_capacity_block_end(s: Section, capacity: Capacity | None) -> datetime | None:
    """`capacityBlockEnd`: required on a capacityBlock pool (its queues hold before it, its pool is
    released after it: workload/capacity_block.py), refused on every other pool."""
    raw = s.optional_string("capacityBlockEnd", check=_block_end_problem,
                            fix=f"copy the block's EndDate from `aws ec2 describe-capacity-reservations`, e.g. {BLOCK_END_FORMS}")
    if capacity == Capacity.CAPACITY_BLOCK:
        if not raw and s.ok("capacityBlockEnd"):
            s.missing("capacityBlockEnd", "a capacityBlock pool needs its block's end: EC2 terminates its instances "
                      "from 30 minutes before it, and its queues must stop admitting gangs before that",
                      f"set capacityBlockEnd: the block's EndDate in UTC, e.g. {BLOCK_END_FORMS}")
    elif raw:
        s.error(s.key("capacityBlockEnd"), raw, f"is only used with capacity: capacityBlock, not {capacity or ''}",
                "remove it (an On-Demand Capacity Reservation's end is not modelled)")
        return None
    return _block_end(raw) if raw and s.ok("capacityBlockEnd") else None


def _block_end(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.astimezone(UTC) if when.tzinfo is not None and when.utcoffset() == timedelta(0) else None


def _block_end_problem(text: str) -> str | None:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(Z|\+00:00)", text) or _block_end(text) is None:
        return f"is not a UTC time of the form {BLOCK_END_FORMS}"
    if not text.endswith(("00Z", "00+00:00")):
        # The hold and resume CronJobs run on the minute (cron has no seconds): at 11:30:00 an end of
        # 11:30:45 is still ahead, and the run would find itself outside its window and do nothing.
        return "has seconds: capacity blocks end on the minute, and the hold and resume run on the minute"
    return None


def release_ended_blocks(pools: tuple[NodePoolConfig, ...], *, today: date) -> tuple[tuple[NodePoolConfig, ...], list[str]]:
    """The pools with every capacity block that ended before `today` released (min = desired = 0,
    no queue quota), and a warning per block that ended or ends within BLOCK_END_WARNING_DAYS.
    Judged by the day, as the support calendar is (cluster.py): a plan is the same all day."""
    judged, warnings = [], []
    for pool in pools:
        end = pool.capacity_block_end
        if end is None:
            judged.append(pool)
            continue
        key = f"nodePools '{pool.name}' capacityBlockEnd"
        if end.date() < today:
            judged.append(dataclasses.replace(pool, min_size=0, desired_size=0, released=True))
            warnings.append(f"{key}: the capacity block ended {end:%Y-%m-%d %H:%M} UTC: the pool is planned with no "
                            "nodes and its queues with no quota on it; remove the pool, or set the next block's "
                            "capacityReservationId and capacityBlockEnd")
            continue
        judged.append(pool)
        if end.date() - today <= timedelta(days=BLOCK_END_WARNING_DAYS):
            warnings.append(f"{key}: the capacity block ends {end:%Y-%m-%d %H:%M} UTC; its queues hold before it "
                            "(docs/gpu-fabric-and-capacity.md, 'When a capacity block ends'), and a pulumi up on the "
                            "day after releases the pool")
    return tuple(judged), warnings


def _parse_shutdown_grace(s: Section, *, gpu: bool) -> int:
    """`shutdownGracePeriodSeconds`: a GPU pool's kubelet graceful shutdown (0 on CPU pools)."""
    if not gpu:
        if s.has("shutdownGracePeriodSeconds") and s.ok("gpu"):
            s.error(s.key("shutdownGracePeriodSeconds"), s.data.get("shutdownGracePeriodSeconds"),
                    "is set on a CPU pool, whose nodes keep nodeadm's graceful shutdown: it is for the GPU pools' training pods",
                    "remove it")
        return 0
    return s.integer("shutdownGracePeriodSeconds")


def _parse_size(s: Section, capacity: Capacity | None) -> tuple[int, int, int]:
    """(min, desired, max). A reservation pool's size.max is the reservation's instance count (a
    targeted launch goes no further). Reservations "are charged at the equivalent On-Demand rate
    whether you run instances in reserved capacity or not", and a running instance pays "nothing for
    the reservation" (EC2 User Guide, capacity-reservations-pricing-billing). So its min and desired
    default to size.max: the paid nodes stay up (only their root volumes cost extra) and a job does
    not wait for a p5 to boot and pull its image. An explicit size.min wins (`make cost` states what
    the reserved instances it leaves without a node cost). Capacity blocks keep explicit sizes:
    their instances launch only inside the block's dates. Other pools name all three sizes."""
    size = s.section("size")
    maximum = size.integer("max")
    if capacity == Capacity.RESERVATION:
        minimum = size.integer("min", maximum)
        desired = size.integer("desired", maximum)
    elif capacity == Capacity.CAPACITY_BLOCK and size.ok() and not (size.has("min") and size.has("desired")):
        # The reservation pool's defaults do not carry over: say so, not only "required key is missing".
        for name in ("min", "desired"):
            if not size.has(name):
                size.missing(name, "a capacityBlock pool states all three sizes (unlike a reservation pool, whose "
                             "min and desired default to max: a block's instances launch only inside its dates)",
                             "add it, e.g. size: {min: 0, desired: 0, max: 2}, and raise min and desired for the "
                             "block's dates")
        minimum = size.integer("min", 0)  # a placeholder: the missing key is reported above
        desired = size.integer("desired", 0)
    else:
        minimum = size.integer("min")
        desired = size.integer("desired")
    size.finish()
    if size.ok("min", "desired", "max") and not minimum <= desired <= maximum:
        s.error(size.path, {"min": minimum, "desired": desired, "max": maximum}, "needs min <= desired <= max",
                "order the sizes, e.g. {min: 0, desired: 0, max: 4}")
    return minimum, desired, maximum


def _parse_placement_group(s: Section, capacity: Capacity | None, *, efa: bool) -> str | None:
    """The existing cluster placement group the pool launches into; None: a new one of its own for
    an EFA pool on onDemand or spot, none on reserved capacity.

    A reservation's placement is fixed when it is made: "To reserve capacity in a placement group,
    you must create the Capacity Reservation in the placement group" (EC2 User Guide, cr-cpg,
    Limitations). A group made by the stack never holds it, and launching reserved instances into
    that new, empty group can fail for want of room there. eksctl therefore creates no placement
    group for a node group with a capacity reservation ("A reservation should already be created
    with a placement group", eksctl-io/eksctl pkg/cfn/builder/managed_launch_template.go @99984ad),
    and the AWS p5 ODCR example has none (aws-samples/awsome-distributed-training
    1.architectures/4.amazon-eks/eks-p5-odcr-vpc.yaml). Capacity blocks are placed by EC2."""
    key = s.key("placementGroup")
    if isinstance(s.data.get("placementGroup"), bool) and capacity in RESERVED_CAPACITY:
        s.unusable(key, s.data["placementGroup"],
                   "cannot ask for a new placement group on reserved capacity: a reservation stays in the group it "
                   "was made in (none, or an existing one), and launching it into a new, empty cluster group can "
                   "fail although the reservation has room (EC2 User Guide, cr-cpg; eksctl creates none)",
                   "remove it (no placement group), or name the group the reservation was created in: "
                   "`aws ec2 describe-capacity-reservations --query 'CapacityReservations[].PlacementGroupArn'`")
        s.ignore("placementGroup")
        return None
    placement_group = s.optional_string(
        "placementGroup",
        check=lambda v: None if PLACEMENT_GROUP_NAME.fullmatch(v) else "is not a placement group name",
        fix="copy the GroupName from `aws ec2 describe-placement-groups` (letters, digits, . _ -)")
    if placement_group and s.ok("placementGroup", "efa", "capacity") and (not efa or capacity == Capacity.CAPACITY_BLOCK):
        s.error(key, placement_group,
                "is only used by EFA pools on onDemand, spot or reservation capacity (a capacity block is "
                "placed by EC2, and a pool without EFA needs no placement group)",
                "remove it, or set efa: true")
    return placement_group or None


def _parse_zones(s: Section, network_zones: tuple[str, ...] | None, region: str, *, gpu: bool,
                 one_zone: bool) -> tuple[str, ...]:
    """A pool's zones: AZ IDs (GPU pools; required for EFA and reserved pools, exactly one), or
    names of the network's zones (CPU pools); left out, a pool spreads over the network's zones.
    `network_zones` is None when the network's zones failed: names are not judged then."""
    key = s.key("availabilityZones")
    given = s.has("availabilityZones")
    zones = tuple(s.string_list("availabilityZones", list(network_zones or ())))
    if given and not zones and s.ok("availabilityZones"):
        s.error(key, [], "needs at least one zone (EKS needs a subnet to place nodes in)",
                "list zones, or remove the key to use all of the network's")
    prefix = zone_id_prefix(region) if region else None
    lookup = (f"aws ec2 describe-availability-zones --region {region or '<region>'} "
              "--query 'AvailabilityZones[].[ZoneName,ZoneId]'")
    for index, zone in enumerate(zones):
        match = AZ_ID.fullmatch(zone)
        id_problem = zone_id_problem(zone, region)
        if id_problem:
            s.error(f"{key}[{index}]", zone, *id_problem)
        elif not match and network_zones is not None and zone not in network_zones:
            s.error(f"{key}[{index}]", zone, "is neither an AZ ID nor one of the network's availability zones",
                    f"use an AZ ID like {prefix or 'use1'}-az4 (see `{lookup}`)")
        elif not match and gpu and given:
            # Names are shuffled per account: us-east-1a is a different building in each one,
            # and a reservation or capacity block lives in one of them.
            s.error(f"{key}[{index}]", zone, "is an AZ name; GPU pools name their zones by AZ ID, which means "
                    "the same physical zone in every account", f"use the zone's ID (`{lookup}`), e.g. {prefix or 'use1'}-az4")
    if len(set(zones)) != len(zones):
        s.error(key, list(zones), "lists a zone twice", "list each zone once")
    if one_zone and (not given or len(zones) != 1) and s.ok("availabilityZones"):
        s.error(key, list(zones) if given else None,
                "an EFA pool, or one on a capacity reservation or block, runs in exactly one AZ "
                "(its placement group, its reservation)",
                "list exactly one AZ ID, the reservation's: `aws ec2 describe-capacity-reservations "
                "--query 'CapacityReservations[].AvailabilityZoneId'`")
    return zones


def check_subnet_ip_budget(section: Section, pools: tuple[NodePoolConfig, ...], subnets: tuple[AzSubnets, ...]) -> None:
    """Every private subnet must hold every pool that can land in it at its maximum size, each node
    taking the most IPs it can (pod_network.node_ip_addresses: efa-only interfaces, warm IPs).

    Pools zoned by AZ ID may resolve to any of the network's zones, so they count everywhere."""
    for subnet in subnets:
        here = [p for p in pools if subnet.availability_zone in p.availability_zones
                or any(is_zone_id(z) for z in p.availability_zones)]
        needs = {p.name: p.max_size * max(node_ip_addresses(INSTANCE_TYPES[t], efa=p.efa) for t in p.instance_types)
                 for p in here if all(t in INSTANCE_TYPES for t in p.instance_types)}
        have = usable_ips(subnet.private.prefixlen)
        if sum(needs.values()) > have:
            detail = ", ".join(f"{name} {ips}" for name, ips in needs.items())
            section.error(section.key("nodePools"), detail,
                          f"can take {sum(needs.values())} IPs in {subnet.availability_zone}, whose private subnet "
                          f"{subnet.private} has {have}: new nodes would get no address",
                          "use a larger network.vpcCidr (or fewer zones), or lower size.max of the largest pools")


def _pool_name_problem(name: str) -> str | None:
    if not DNS_LABEL.fullmatch(name) or len(name) > MAX_POOL_NAME:
        return "is not a valid pool name"
    return None


def _unknown_type(name: object) -> tuple[str, str]:
    """(rule, fix) for an instance type not in INSTANCE_TYPES: a stray space or a near miss named."""
    if isinstance(name, str) and name.strip() in INSTANCE_TYPES:
        return "has spaces around the instance type", f"write {name.strip()!r} without them"
    close = difflib.get_close_matches(name, list(INSTANCE_TYPES), n=1, cutoff=0.8) if isinstance(name, str) else []
    known = f"one of {', '.join(sorted(INSTANCE_TYPES))}, or add its facts to components/facts/instance_types.py"
    return ("is not an instance type this platform knows",
            f"did you mean {close[0]!r}? Else use {known}" if close else f"use {known}")


def _parse_types(s: Section, *, capacity: Capacity | None, gpu: bool, efa: bool) -> tuple[str, ...]:
    key = s.key("instanceTypes")
    raw = s.items("instanceTypes")
    if not raw:
        if s.ok("instanceTypes"):
            s.error(key, raw, "needs at least one instance type", "list e.g. [g6.12xlarge]")
        return ()
    known = []
    for index, name in enumerate(raw):
        facts = INSTANCE_TYPES.get(name) if isinstance(name, str) else None
        if facts is None:
            s.error(f"{key}[{index}]", name, *_unknown_type(name))
            continue
        known.append(facts)
        if gpu and not facts.has_gpu:
            s.error(f"{key}[{index}]", name, "has no GPU but the pool says gpu: true", "use a GPU type or set gpu: false")
        if not gpu and facts.has_gpu and s.ok("gpu"):
            s.error(f"{key}[{index}]", name, "has GPUs but the pool says gpu: false (it would get no GPU taint)",
                    "set gpu: true or use a CPU type")
        if efa and not facts.has_efa:
            s.error(f"{key}[{index}]", name, "does not support EFA",
                    "use an EFA-capable type (p4d, p5, g6e.12xlarge+) or set efa: false")
        if capacity == Capacity.SPOT and not facts.spot:
            s.error(f"{key}[{index}]", name, "is not offered as spot", "use capacity: onDemand or capacityBlock")
        if capacity == Capacity.CAPACITY_BLOCK and not facts.capacity_block:
            s.error(f"{key}[{index}]", name, "is not offered as a capacity block",
                    "use capacity: reservation (an On-Demand Capacity Reservation) or onDemand")
    names = [t.name for t in known]
    if len(set(names)) != len(names):
        s.error(key, raw, "lists a type twice", "list each type once")
    if capacity == Capacity.SPOT and len(raw) < 2:
        s.error(key, raw, "a spot pool needs at least 2 instance types: one type is one spot pool, and "
                "its interruptions would stop all training at once", "add a type with the same GPU count and memory")
    if len({(t.gpus, t.gpu_memory_mib) for t in known}) > 1:
        shapes = ", ".join(f"{t.name}={t.gpus}x{t.gpu_memory_mib // 1024}GiB" for t in known)
        s.error(key, raw, f"mixes GPU count or GPU memory ({shapes}); a job sized for one would not fit the other",
                "use types with the same GPUs per node and GPU memory")
    elif efa and len({t.efa_interfaces for t in known}) > 1:
        # The launch template lays out one EFA interface per network card of one type: a type with
        # fewer cards cannot launch from it, one with more would run on part of its fabric.
        cards = ", ".join(f"{t.name}={t.efa_interfaces}" for t in known)
        s.error(key, raw, f"mixes EFA interface counts ({cards}); the pool's launch template names each network "
                "card, and a type with other cards cannot launch from it or loses bandwidth",
                "use one EFA instance type per pool (or types with the same number of EFA interfaces)")
    return tuple(names)


def _label_problem(key: str, value: str, *, empty_value: bool) -> str | None:
    if len(key) > MAX_EKS_LABEL_CHARS or len(value) > MAX_EKS_LABEL_CHARS:
        return (f"is not a valid Kubernetes label or taint for EKS: key and value may have at most "
                f"{MAX_EKS_LABEL_CHARS} characters each (the key's prefix included)")
    if not LABEL_KEY.fullmatch(key):
        return ("is not a valid Kubernetes label or taint key: [prefix/]name of letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit")
    if not LABEL_VALUE.fullmatch(value):
        return ("is not a valid Kubernetes label or taint value: letters, digits, '-', '_' and '.', starting and "
                "ending with a letter or digit")
    if not value and not empty_value:
        return "is not a valid EKS node label: its value is empty (EKS needs 1 to 63 characters)"
    prefix = key.rpartition("/")[0]
    if prefix.endswith(RESERVED_LABEL_DOMAINS):
        return "uses a prefix reserved for Kubernetes (and the kubelet refuses to set it)"
    if prefix == PLATFORM_LABEL_PREFIX:
        return "uses the platform's own prefix (its labels are set from the pool's config)"
    return None


def _parse_labels(s: Section) -> dict[str, str]:
    labels = {}
    for label, value in s.string_map("labels").items():
        problem = _label_problem(label, value, empty_value=False)
        if problem:
            s.error(f"{s.key('labels')}.{label}", value, problem,
                    "use keys like team or example.com/tier and values of letters, digits, '-', '_' or '.'")
        else:
            labels[label] = value
    return labels


def _parse_taints(s: Section) -> tuple[Taint, ...]:
    taints = []
    raw_taints = s.items("taints")
    if len(raw_taints) > MAX_TAINTS:
        s.error(s.key("taints"), raw_taints, f"EKS allows at most {MAX_TAINTS} taints per node group", "remove some")
    for index, raw in enumerate(raw_taints):
        t = Section(s.errors, f"{s.key('taints')}[{index}]", raw)
        key, value, effect = t.string("key"), t.string("value", empty_ok=True), t.choice("effect", TaintEffect)
        problem = _label_problem(key, value, empty_value=True) if t.ok("key", "value") else None
        if problem:
            t.error(t.path, f"{key}={value}", problem, "use a key like example.com/dedicated and a simple value")
        t.finish()
        if effect is not None:  # a taint without one fails its pool, which is left out
            taints.append(Taint(key, value, effect))
    # Only the taints read whole: a rejected one's placeholder key "" is no pair.
    pairs = [(t.key, t.effect) for t in taints if t.key]
    for key, effect in sorted({p for p in pairs if pairs.count(p) > 1}):
        s.error(s.key("taints"), f"{key}:{effect}", "repeats a key and effect (Kubernetes allows each pair once)",
                "keep one taint per key and effect")
    return tuple(taints)
