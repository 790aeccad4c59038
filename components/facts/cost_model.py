"""What a stack costs, read from its offline plan (the resources `pulumi up` would create).

Pure arithmetic over `build/<stack>/resources.json` records and the dated table of the stack's
region in prices.py (the region of the plan's aws provider; a region without a table is refused):

- fixed monthly cost: what is billed while the stack exists, whether or not anything trains (EKS
  control plane, node pools at their minimum size, NAT gateways and their addresses, interface
  endpoints per AZ, KMS keys, secrets, alarms, FSx capacity);
- usage at stated volumes: NAT data, log ingestion, EFS storage (`Usage`, defaults below);
- per node pool, cost per hour at its minimum and at its maximum size, as the pool is billed
  (on-demand, spot at its on-demand ceiling, capacity block), with the on-demand and capacity
  block figures beside it for comparison.

Nothing here is a guess: a resource whose price is not in the table becomes a line marked "not
priced" and stays out of every total.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from components.facts import prices
from components.facts.instance_types import INSTANCE_TYPES
from components.facts.prices import HOURS_PER_MONTH, Price, RegionPrices, region_prices

ResourceRecord = Mapping[str, Any]


@dataclass(frozen=True)
class Usage:
    """Stated monthly volumes of usage-billed items: change them with `make cost ARGS=...`."""

    nat_gb: float = 100.0
    """Through the NAT gateways: S3 and ECR layers use the S3 gateway endpoint, AWS APIs the
    interface endpoints, so this is pip/Hugging Face/W&B traffic."""
    log_gb: float = 50.0
    """Into CloudWatch Logs: container stdout/stderr, control plane and VPC flow logs."""
    efs_gb: float = 500.0
    """Kept on EFS Standard: a few sharded checkpoints of the running jobs."""
    lustre_cross_az_gb: float = 1000.0
    """Read from or written to FSx for Lustre by GPU nodes outside its zone: about a dozen 80 GiB
    checkpoints. Counted only when a GPU pool has nodes outside the file system's zone."""


STATED_USAGE = Usage()


@dataclass(frozen=True)
class LineItem:
    name: str
    monthly_usd: float | None
    """None: no price in the table; listed, never added."""
    detail: str


@dataclass(frozen=True)
class NodePool:
    """A node group as the plan creates it."""

    name: str
    instance_types: tuple[str, ...]
    capacity_type: str
    """ON_DEMAND | SPOT | CAPACITY_BLOCK (the EKS API's values)."""
    min_nodes: int
    max_nodes: int
    root_volume_gib: int
    reserved: bool = False
    """An on-demand pool whose launch template targets a capacity reservation (ODCR): AWS bills
    every reserved instance at the on-demand rate whether a node runs on it or not. The pool's
    size.max is taken as the reservation's instance count (a targeted launch cannot go beyond it)."""

    @property
    def billed_while_idle(self) -> bool:
        return self.capacity_type == "CAPACITY_BLOCK" or self.reserved

    @property
    def gpus_per_node(self) -> int:
        first = self.instance_types[0] if self.instance_types else ""
        return INSTANCE_TYPES[first].gpus if first in INSTANCE_TYPES else 0


@dataclass(frozen=True)
class PoolCost:
    pool: NodePool
    node_hourly_usd: float | None
    """What one node of this pool is billed per hour (instance + root volume); for spot the
    on-demand ceiling. None when the table has no price for its instance types."""
    basis: str
    on_demand_node_hourly_usd: float | None
    capacity_block_node_hourly_usd: float | None
    volume_hourly: float | None = None
    """One node's root volume per hour (None: the region's table has no gp3 price)."""

    @property
    def hourly_at_min_usd(self) -> float | None:
        # Capacity blocks and reservations are paid for every reserved instance, running or not.
        nodes = self.pool.max_nodes if self.pool.billed_while_idle else self.pool.min_nodes
        return None if self.node_hourly_usd is None else nodes * self.node_hourly_usd

    @property
    def hourly_at_max_usd(self) -> float | None:
        return None if self.node_hourly_usd is None else self.pool.max_nodes * self.node_hourly_usd

    @property
    def gpu_hourly_usd(self) -> float | None:
        gpus = self.pool.gpus_per_node
        return None if self.node_hourly_usd is None or not gpus else self.node_hourly_usd / gpus

    @property
    def volume_hourly_usd(self) -> float | None:
        """One node's root volume: all a running node adds to a reserved instance's bill."""
        return self.volume_hourly

    @property
    def reserved_without_node(self) -> int:
        """Reserved instances a reservation pool leaves without a node at its min size: paid, and
        a job that needs them waits for a node to boot and pull its image."""
        return self.pool.max_nodes - self.pool.min_nodes if self.pool.reserved else 0

    @property
    def reserved_without_node_hourly_usd(self) -> float | None:
        if self.node_hourly_usd is None or self.volume_hourly is None:
            return None
        return self.reserved_without_node * (self.node_hourly_usd - self.volume_hourly)


@dataclass(frozen=True)
class StackCost:
    region: str
    """The plan's region, whose price table priced it ("" only for an empty plan)."""
    priced_on: date
    fixed: tuple[LineItem, ...]
    usage: tuple[LineItem, ...]
    pools: tuple[PoolCost, ...]
    gaps: tuple[str, ...] = field(default=())
    """What the region's table cannot price at all (prices.RegionPrices.all_gaps)."""

    @property
    def fixed_monthly_usd(self) -> float:
        return sum(i.monthly_usd for i in self.fixed if i.monthly_usd is not None)

    @property
    def usage_monthly_usd(self) -> float:
        return sum(i.monthly_usd for i in self.usage if i.monthly_usd is not None)

    @property
    def gpu_pools(self) -> tuple[PoolCost, ...]:
        return tuple(p for p in self.pools if p.pool.gpus_per_node)

    @property
    def reserved_pools(self) -> tuple[PoolCost, ...]:
        """Pools on an On-Demand Capacity Reservation: billed for every reserved instance, idle or not."""
        return tuple(p for p in self.pools if p.pool.reserved)

    @property
    def gpu_hourly_at_min_usd(self) -> float:
        return sum(p.hourly_at_min_usd or 0.0 for p in self.gpu_pools)

    @property
    def gpu_hourly_at_max_usd(self) -> float:
        return sum(p.hourly_at_max_usd or 0.0 for p in self.gpu_pools)

    @property
    def unpriced(self) -> tuple[str, ...]:
        items = [i.name for i in (*self.fixed, *self.usage) if i.monthly_usd is None]
        return (*items, *(f"node pool {p.pool.name}" for p in self.pools if p.node_hourly_usd is None))

    def summary_line(self) -> str:
        """One line for the plan summary."""
        line = (f"cost: {money(self.fixed_monthly_usd)}/month fixed + {money(self.usage_monthly_usd)}/month usage at "
                f"stated volumes")
        if self.gpu_pools:
            idle = self.fixed_monthly_usd + self.usage_monthly_usd + self.gpu_hourly_at_min_usd * HOURS_PER_MONTH
            line += (f"; GPU pools ${self.gpu_hourly_at_min_usd:,.2f}/h at min, "
                     f"${self.gpu_hourly_at_max_usd:,.2f}/h at max; an idle month {money(idle)}")
        line += f" ({self.region or 'no region'} list prices of {self.priced_on})"
        if self.unpriced:
            line += f"; not priced: {', '.join(self.unpriced)}"
        return line


def money(usd: float) -> str:
    """A monthly figure: whole dollars from $100 on, cents below."""
    return f"${usd:,.0f}" if usd >= 100 else f"${usd:,.2f}"


# --- reading the plan -----------------------------------------------------------------------------

def _of_type(resources: Iterable[ResourceRecord], type_token: str) -> list[ResourceRecord]:
    return [r for r in resources if r["type"] == type_token]


def node_pools(resources: Sequence[ResourceRecord]) -> list[NodePool]:
    """The plan's node groups, each with the root volume of its launch template."""
    templates = _of_type(resources, "aws:ec2/launchTemplate:LaunchTemplate")
    pools = []
    for group in _of_type(resources, "aws:eks/nodeGroup:NodeGroup"):
        inputs = group["inputs"]
        scaling = inputs["scalingConfig"]
        template = _launch_template_of(inputs, templates)
        pools.append(NodePool(
            name=inputs.get("labels", {}).get("gpu-training/pool") or inputs.get("nodeGroupName") or group["name"],
            instance_types=_instance_types(inputs, template),
            capacity_type=inputs.get("capacityType", "ON_DEMAND"),
            min_nodes=int(scaling["minSize"]),
            max_nodes=int(scaling["maxSize"]),
            root_volume_gib=_root_volume_gib(template),
            reserved=_targets_a_reservation(template) and inputs.get("capacityType", "ON_DEMAND") == "ON_DEMAND",
        ))
    return sorted(pools, key=lambda p: p.name)


# What EKS launches when neither the node group nor its launch template names a type: "If you don't
# specify an instance type in a launch template or for instanceTypes, then t3.medium is used, by
# default" (EKS API CreateNodegroup, instanceTypes; docs.aws.amazon.com/eks/latest/APIReference/
# API_CreateNodegroup.html). The program always names one; a plan without is still read right.
EKS_DEFAULT_INSTANCE_TYPE = "t3.medium"


def _instance_types(group: Mapping[str, Any], template: ResourceRecord | None) -> tuple[str, ...]:
    """The types a node group launches: its own `instanceTypes`, else the one its launch template
    fixes. A capacity-block pool is planned the second way (EKS User Guide, capacity-blocks-mng:
    the instance type goes in the launch template, not in the node group)."""
    if types := group.get("instanceTypes"):
        return tuple(str(t) for t in types)
    if fixed := (template or {}).get("inputs", {}).get("instanceType"):
        return (str(fixed),)
    return (EKS_DEFAULT_INSTANCE_TYPE,)


def _targets_a_reservation(template: ResourceRecord | None) -> bool:
    spec = (template or {}).get("inputs", {}).get("capacityReservationSpecification") or {}
    return bool((spec.get("capacityReservationTarget") or {}).get("capacityReservationId"))


def _launch_template_of(group: Mapping[str, Any], templates: list[ResourceRecord]) -> ResourceRecord | None:
    # Node groups and their launch templates share the physical name <cluster>-<pool>.
    name = group.get("nodeGroupName")
    return next((t for t in templates if name and t["inputs"].get("name") == name), None)


def _root_volume_gib(template: ResourceRecord | None) -> int:
    # EKS managed node groups default to a 20 GiB root volume when no launch template sets one.
    for mapping in (template or {}).get("inputs", {}).get("blockDeviceMappings") or ():
        size = (mapping.get("ebs") or {}).get("volumeSize")
        if size:
            return int(size)
    return 20


def region_of(resources: Sequence[ResourceRecord]) -> str:
    providers = _of_type(resources, "pulumi:providers:aws")
    return str(providers[0]["inputs"].get("region", "")) if providers else ""


# --- pricing --------------------------------------------------------------------------------------

def eks_hourly(version: str, support_type: str, on: date, table: RegionPrices = prices.US_EAST_1) -> tuple[Price | None, str]:
    """The control plane's hourly price on a day, and why (None: the region's table has no price).

    Past the end of standard support a cluster is billed at the extended support price, unless its
    upgrade policy is STANDARD: then EKS upgrades it at the end of standard support instead."""
    end = prices.EKS_STANDARD_SUPPORT_END.get(version)
    if end is None:
        return table.eks_cluster_hour, f"Kubernetes {version}: no support calendar in the table, priced as standard"
    if on <= end:
        return table.eks_cluster_hour, f"Kubernetes {version} in standard support until {end}"
    if support_type == "STANDARD":
        return table.eks_cluster_hour, (f"Kubernetes {version} left standard support on {end}; upgrade policy "
                                        "STANDARD: EKS upgrades the cluster instead of billing extended support")
    return table.eks_extended_cluster_hour, f"Kubernetes {version} in extended support since {end}"


def root_volume_hourly(gib: int, table: RegionPrices = prices.US_EAST_1) -> float | None:
    gp3 = table.ebs_gp3_gb_month
    return None if gp3 is None else gib * gp3.usd / HOURS_PER_MONTH


def pool_cost(pool: NodePool, table: RegionPrices = prices.US_EAST_1) -> PoolCost:
    """Cost of one node per hour: the most expensive of the pool's instance types (the autoscaler
    may launch any of them), plus its root volume."""
    volume = root_volume_hourly(pool.root_volume_gib, table)
    on_demand = _most_expensive({t: table.ec2_on_demand_hourly.get(t) for t in pool.instance_types})
    block = _most_expensive({t: p.usd if (p := table.capacity_block_hourly.get(t)) else None
                             for t in pool.instance_types})
    if pool.capacity_type == "CAPACITY_BLOCK":
        billed, basis = block, "capacity block, prepaid for the block used or not (STALE price)"
    elif pool.reserved:
        billed, basis = on_demand, "on-demand capacity reservation, billed for every reserved instance used or not"
    elif pool.capacity_type == "SPOT":
        billed, basis = on_demand, "spot, upper bound = on-demand price"
    else:
        billed, basis = on_demand, "on-demand"
    if volume is None:
        basis = f"{basis}: no {table.region} price for the gp3 root volume"
    return PoolCost(
        pool=pool,
        node_hourly_usd=None if billed is None or volume is None else billed[1] + volume,
        basis=f"{billed[0]} {basis}" if billed else f"{basis}: no {table.region} price for {', '.join(pool.instance_types)}",
        on_demand_node_hourly_usd=None if on_demand is None or volume is None else on_demand[1] + volume,
        capacity_block_node_hourly_usd=None if block is None or volume is None else block[1] + volume,
        volume_hourly=volume,
    )


def _most_expensive(hourly: Mapping[str, float | None]) -> tuple[str, float] | None:
    """(type, $/h) of the dearest type; None when any type has no price."""
    known = {t: usd for t, usd in hourly.items() if usd is not None}
    if not hourly or len(known) != len(hourly):
        return None
    return max(known.items(), key=lambda item: item[1])


def rate(usd: float) -> str:
    """$0.10, $0.045, $1.00: cents always shown, smaller fractions kept."""
    return f"${usd:.2f}" if round(usd, 2) == usd else f"${usd:g}"


def _monthly(count: float, price: Price, hours: bool = True) -> float:
    return count * price.usd * (HOURS_PER_MONTH if hours else 1)


def _no_price(region: str, what: str) -> str:
    return f"{what}: no {region} price in components/facts/prices.py"


def fixed_items(resources: Sequence[ResourceRecord], pools: Sequence[PoolCost], on: date,
                table: RegionPrices = prices.US_EAST_1) -> list[LineItem]:
    items: list[LineItem] = []
    for cluster in _of_type(resources, "aws:eks/cluster:Cluster"):
        inputs = cluster["inputs"]
        price, why = eks_hourly(str(inputs.get("version", "")), (inputs.get("upgradePolicy") or {}).get("supportType", ""),
                                on, table)
        items.append(LineItem("EKS control plane", None, _no_price(table.region, why)) if price is None else
                     LineItem("EKS control plane", _monthly(1, price), f"{HOURS_PER_MONTH} h x {rate(price.usd)}/h ({why})"))
    for cost in pools:
        pool = cost.pool
        if pool.capacity_type == "CAPACITY_BLOCK":
            items.append(LineItem(f"node pool {pool.name} (capacity block)", None,
                                  "prepaid for the block's duration, used or not: see the pool's hourly figure"))
            continue
        if pool.reserved:
            continue  # billed whether used or not: its nodes at max are the pool's hourly figure at min
        if not pool.min_nodes:
            continue
        monthly = None if cost.node_hourly_usd is None else pool.min_nodes * cost.node_hourly_usd * HOURS_PER_MONTH
        items.append(LineItem(
            f"node pool {pool.name} at min size", monthly,
            f"{pool.min_nodes} x ({cost.basis} + {pool.root_volume_gib} GiB gp3) x {HOURS_PER_MONTH} h"))
    counted = (
        ("NAT gateways", "aws:ec2/natGateway:NatGateway", table.nat_gateway_hour, True),
        ("public IPv4 addresses (NAT)", "aws:ec2/eip:Eip", table.public_ipv4_hour, True),
        ("KMS keys", "aws:kms/key:Key", table.kms_key_month, False),
        ("Secrets Manager secrets", "aws:secretsmanager/secret:Secret", table.secret_month, False),
        ("CloudWatch alarms", "aws:cloudwatch/metricAlarm:MetricAlarm", table.alarm_month, False),
    )
    for name, type_token, price, hourly in counted:
        count = len(_of_type(resources, type_token))
        if not count:
            continue
        if price is None:
            items.append(LineItem(name, None, _no_price(table.region, f"{count} in the plan")))
            continue
        per = f"{HOURS_PER_MONTH} h x {rate(price.usd)}/h" if hourly else f"{rate(price.usd)}/month"
        items.append(LineItem(name, _monthly(count, price, hourly), f"{count} x {per}"))
    endpoint_azs = sum(len(e["inputs"].get("subnetIds") or ())
                       for e in _of_type(resources, "aws:ec2/vpcEndpoint:VpcEndpoint")
                       if e["inputs"].get("vpcEndpointType") == "Interface")
    if endpoint_azs:
        price = table.interface_endpoint_az_hour
        items.append(LineItem("interface VPC endpoints", None, _no_price(table.region, f"{endpoint_azs} endpoint-AZs"))
                     if price is None else
                     LineItem("interface VPC endpoints", _monthly(endpoint_azs, price),
                              f"{endpoint_azs} endpoint-AZs x {HOURS_PER_MONTH} h x {rate(price.usd)}/h "
                              "(gateway endpoints are free)"))
    for lustre in _of_type(resources, "aws:fsx/lustreFileSystem:LustreFileSystem"):
        items.append(_lustre_item(lustre["inputs"], table))
    return items


def _lustre_item(inputs: Mapping[str, Any], table: RegionPrices = prices.US_EAST_1) -> LineItem:
    capacity = int(inputs.get("storageCapacity") or 0)
    throughput = inputs.get("perUnitStorageThroughput")
    price = table.fsx_lustre_p2_125_gb_month
    if inputs.get("deploymentType") == "PERSISTENT_2" and throughput == 125 and price is not None:
        return LineItem("FSx for Lustre", capacity * price.usd, f"{capacity} GiB x {rate(price.usd)}/GB-month (PERSISTENT_2-125)")
    return LineItem("FSx for Lustre", None,
                    _no_price(table.region, f"{capacity} GiB {inputs.get('deploymentType')}-{throughput}"))


def usage_items(resources: Sequence[ResourceRecord], usage: Usage, table: RegionPrices = prices.US_EAST_1) -> list[LineItem]:
    def item(name: str, gb: float, price: Price | None, unit: str = "GB", note: str = "") -> LineItem:
        if price is None:
            return LineItem(name, None, _no_price(table.region, f"{gb:g} {unit.split('-')[0]}"))
        return LineItem(name, gb * price.usd, f"{gb:g} GB x {rate(price.usd)}/{unit}{note}")

    items = []
    if _of_type(resources, "aws:ec2/natGateway:NatGateway"):
        items.append(item("NAT data processing", usage.nat_gb, table.nat_gateway_gb))
    if _of_type(resources, "aws:cloudwatch/logGroup:LogGroup"):
        items.append(item("CloudWatch Logs ingestion", usage.log_gb, table.logs_ingest_gb))
    if _of_type(resources, "aws:efs/fileSystem:FileSystem"):
        ia = table.efs_ia_gb_month
        items.append(item("EFS Standard storage", usage.efs_gb, table.efs_standard_gb_month, "GB-month",
                          " (no fixed charge; files unread for the lifecycle period move to IA at "
                          f"{'a price not in the table' if ia is None else rate(ia.usd)})"))
    lustre_traffic = _lustre_cross_az_item(resources, usage, table)
    if lustre_traffic:
        items.append(lustre_traffic)
    return items


def _lustre_cross_az_item(resources: Sequence[ResourceRecord], usage: Usage,
                          table: RegionPrices = prices.US_EAST_1) -> LineItem | None:
    """What GPU nodes outside the Lustre file system's zone pay to reach it. A file system lives in
    one subnet; the private subnets are one per AZ, so a GPU node group with another subnet has
    nodes in another AZ, and their checkpoints and data cross it (billed both ways)."""
    lustre_subnets = {subnet for fs in _of_type(resources, "aws:fsx/lustreFileSystem:LustreFileSystem")
                      for subnet in _as_list(fs["inputs"].get("subnetIds"))}
    if not lustre_subnets:
        return None
    outside = sorted(group["inputs"].get("nodeGroupName", group["name"])
                     for group in _of_type(resources, "aws:eks/nodeGroup:NodeGroup")
                     if "nvidia.com/gpu.present" in (group["inputs"].get("labels") or {})
                     and set(group["inputs"].get("subnetIds") or ()) - lustre_subnets)
    name = "cross-AZ traffic to FSx for Lustre"
    if not outside:
        return LineItem(name, 0.0, "none: every GPU node group runs in the file system's zone")
    price = table.cross_az_gb
    if price is None:
        return LineItem(name, None, _no_price(table.region, f"{usage.lustre_cross_az_gb:g} GB"))
    return LineItem(name, usage.lustre_cross_az_gb * price.usd,
                    f"{usage.lustre_cross_az_gb:g} GB x {rate(price.usd)}/GB ($0.01 each way): {', '.join(outside)} "
                    "have nodes outside the file system's zone")


def _as_list(value: Any) -> list[Any]:
    """The provider takes FSx's subnetIds as one string or a list."""
    return [value] if isinstance(value, str) else list(value or ())


def plan_cost(resources: Sequence[ResourceRecord], *, on: date = prices.REVIEWED_ON,
              usage: Usage = STATED_USAGE, region: str | None = None) -> StackCost:
    """The cost of a planned stack at the list prices of its region: `region`, else the region of
    the plan's aws provider. UnpricedRegionError when that region has no table (or the plan names
    none); an empty plan costs nothing. `on` decides which EKS support window applies."""
    region = region if region is not None else region_of(resources)
    if not resources and not region:
        return StackCost(region="", priced_on=on, fixed=(), usage=(), pools=())
    table = region_prices(region)
    pools = tuple(pool_cost(p, table) for p in node_pools(resources))
    return StackCost(region=region, priced_on=on, fixed=tuple(fixed_items(resources, pools, on, table)),
                     usage=tuple(usage_items(resources, usage, table)), pools=pools, gaps=table.all_gaps)


def quota_hourly_usd(gpu_quota: Mapping[str, int], pools: Sequence[PoolCost]) -> dict[str, float | None]:
    """What a queue's GPU quota costs per hour when fully used: whole nodes, as they are billed."""
    by_name = {p.pool.name: p for p in pools}
    result: dict[str, float | None] = {}
    for pool_name, gpus in sorted(gpu_quota.items()):
        cost = by_name.get(pool_name)
        if cost is None or cost.node_hourly_usd is None or not cost.pool.gpus_per_node:
            result[pool_name] = None
            continue
        nodes = -(-gpus // cost.pool.gpus_per_node)  # a partly used node is billed whole
        result[pool_name] = nodes * cost.node_hourly_usd
    return result


# --- checkpoints crossing regions ------------------------------------------------------------------

GB_PER_GIB = 2**30 / 10**9
# Where a trainer chooses its own cadence (no checkpointIntervalSeconds), the replication figure
# assumes one save an hour (the third review's planning figure, D5); `make cost` says so.
ASSUMED_CHECKPOINT_INTERVAL_S = 3600


def checkpoint_transfer_gb(checkpoint_gib: float, interval_seconds: float) -> float:
    """GB one job's checkpoints send to EACH other region in a month of running: every save's
    files cross once (S3 replication copies each new object version; a pruned one sends only its
    delete marker), so size x saves. One 80 GiB save an hour: 85.9 GB x 730 = 62,700 GB a month."""
    return checkpoint_gib * GB_PER_GIB * HOURS_PER_MONTH * 3600 / interval_seconds


def checkpoint_replica_gb(checkpoint_gib: float, interval_seconds: float, *, keep: int, version_days: int) -> float:
    """GB of one job's checkpoints an other region's bucket holds at most: the `keep` current
    checkpoints plus every pruned one still kept as an old version (`version_days` of saves)."""
    return checkpoint_gib * GB_PER_GIB * (keep + version_days * 86400 / interval_seconds)

