"""The cost model: every line item of the prod and dev plans against figures computed by hand.

The expected figures below are written out from the price tables (components/facts/prices.py,
us-east-1, us-west-2 and us-east-2, reviewed 2026-11-30): a price update makes these fail on purpose, so the
review shows every dollar amount it moves. Rules that no stack file exercises (extended support,
capacity blocks, FSx, prices the table lacks) are tested on small synthetic plans, priced in
us-east-1 by name (a plan without an aws provider has no region, and is refused).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from datetime import date

import pytest
import yaml
from stack_configs import PLATFORM_STACKS, ROOT, raw_config

from components.facts import cost_model, prices
from components.facts.cost_model import NodePool, StackCost, Usage, eks_hourly, plan_cost, pool_cost, quota_hourly_usd
from components.facts.instance_types import INSTANCE_TYPES
from components.facts.prices import UnpricedRegionError
from offline.cost import environment_costs, main, stack_cost
from offline.plan import main as plan_main
from offline.plan import synthesize, write_plan

H = 730  # hours in a month
USE1 = "us-east-1"
GP3 = 0.08 / 730  # $ per GiB-hour of a root volume
P5_NODE = 55.04 + 500 * GP3  # p5.48xlarge + 500 GiB
G5_48_NODE = 16.288 + 200 * GP3  # g5.48xlarge (dearer than g6.48xlarge at 13.3504) + 200 GiB
G5_2_NODE = 1.212 + 200 * GP3  # g5.2xlarge (dearer than g6.2xlarge at 0.9776) + 200 GiB

EXPECTED_FIXED = {
    "prod": {
        "EKS control plane": 730 * 0.10,                             # 73.00
        "node pool system at min size": 3 * (0.4032 + 50 * GP3) * H,  # 3 x m7i.2xlarge + 50 GiB: 895.008
        "NAT gateways": 3 * 730 * 0.045,                             # one per AZ: 98.55
        "public IPv4 addresses (NAT)": 3 * 730 * 0.005,              # 10.95
        "KMS keys": 8 * 1.00,                                        # EFS, cluster, alerts, registry, secrets, buckets, logs, Lustre
        "Secrets Manager secrets": 2 * 0.40,                         # wandb-api-key, hf-token
        # gpu-idle, gpu-memory-full, node-failed, efa-rx-dropped, training-pod-unschedulable,
        # kueue-workload-requeued, the planned job pretrain-p5's three: no-step, no-checkpoint,
        # loss-not-finite, and one MultiKueue token alarm per worker (prod-usw2, prod-use2), and the
        # namespace's three Metrics Insights alarms over jobs no deploy knows of (each priced as one
        # alarm metric: a floor)
        "CloudWatch alarms": (6 + 3 + 2 + 3) * 0.10,
        "interface VPC endpoints": 8 * 3 * 730 * 0.01,               # 8 services x 3 AZs: 175.20
        "FSx for Lustre": 26400 * 0.145,                             # storage.lustre: 26400 GiB at 125 MB/s/TiB: 3828.00
    },
    "dev": {
        "EKS control plane": 730 * 0.10,
        "node pool system at min size": 1 * (0.2016 + 50 * GP3) * H,  # 1 x m7i.xlarge: 151.168
        "NAT gateways": 1 * 730 * 0.045,                             # natGateways: single
        "public IPv4 addresses (NAT)": 1 * 730 * 0.005,
        "KMS keys": 7 * 1.00,
        "Secrets Manager secrets": 2 * 0.40,
        # no EFA pool: no efa-rx-dropped (kueue-workload-requeued instead); the planned job
        # example-ddp's three; the ad-hoc jobs' three
        "CloudWatch alarms": (5 + 3 + 3) * 0.10,
        "interface VPC endpoints": 8 * 2 * 730 * 0.01,               # 2 AZs: 116.80
    },
}
# The stated volumes: 100 GB through NAT, 50 GB of logs, 500 GB on EFS Standard.
EXPECTED_USAGE = {"NAT data processing": 100 * 0.045, "CloudWatch Logs ingestion": 50 * 0.50,
                  "EFS Standard storage": 500 * 0.30}
RESERVED_POOLS = {"prod": ("p5-efa",)}
# (pool, nodes at min, nodes at max, $ per node-hour)
EXPECTED_POOLS = {
    "prod": [("gpu-spot", 0, 4, G5_48_NODE), ("p5-efa", 2, 2, P5_NODE), ("system", 3, 6, 0.4032 + 50 * GP3)],
    "dev": [("gpu-spot", 0, 4, G5_2_NODE), ("system", 1, 3, 0.2016 + 50 * GP3)],
}


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_every_line_item_matches_the_hand_computed_figure(stack, plan_of):
    cost = plan_cost(plan_of(stack).resources)
    assert {i.name: i.monthly_usd for i in cost.fixed} == pytest.approx(EXPECTED_FIXED[stack], abs=1e-9)
    # prod's GPU node groups all run in the Lustre file system's zone: no cross-AZ traffic to it.
    lustre = {"cross-AZ traffic to FSx for Lustre": 0.0} if stack == "prod" else {}
    assert {i.name: i.monthly_usd for i in cost.usage} == pytest.approx({**EXPECTED_USAGE, **lustre}, abs=1e-9)
    assert cost.fixed_monthly_usd == pytest.approx(sum(EXPECTED_FIXED[stack].values()), abs=1e-9)
    assert [(p.pool.name, p.pool.min_nodes, p.pool.max_nodes) for p in cost.pools] == \
        [(name, low, high) for name, low, high, _ in EXPECTED_POOLS[stack]]
    assert [p.node_hourly_usd for p in cost.pools] == pytest.approx([node for *_, node in EXPECTED_POOLS[stack]], abs=1e-9)
    gpu = [(name, low, high, node) for name, low, high, node in EXPECTED_POOLS[stack] if name != "system"]
    # prod's p5-efa runs on a capacity reservation: all its instances are billed, idle or not.
    billed_idle = {name: high if name in RESERVED_POOLS.get(stack, ()) else low for name, low, high, _ in gpu}
    assert cost.gpu_hourly_at_min_usd == pytest.approx(sum(billed_idle[name] * node for name, *_, node in gpu), abs=1e-9)
    assert cost.gpu_hourly_at_max_usd == pytest.approx(sum(high * node for _, _, high, node in gpu), abs=1e-9)
    assert not cost.unpriced and cost.region == "us-east-1"


def test_the_prod_totals_read_as_computed(plan_of):
    cost = plan_cost(plan_of("prod").resources)
    assert round(cost.fixed_monthly_usd, 2) == 5090.91  # 26400 GiB of Lustre, 14 alarms at $0.10
    assert round(cost.gpu_hourly_at_max_usd, 2) == 175.43  # 2 x p5.48xlarge + 4 x g5.48xlarge
    assert round(cost.gpu_hourly_at_min_usd, 2) == 110.19  # the reserved 2 x p5.48xlarge, idle or not
    assert [round(p.gpu_hourly_usd or 0, 4) for p in cost.gpu_pools] == [2.0387, 6.8868]


def test_a_pools_max_size_changes_its_hourly_figure_by_exactly_its_nodes(plan_of):
    pools = copy.deepcopy(raw_config("dev")["gpu-training:nodePools"])
    spot = next(p for p in pools if p["name"] == "gpu-spot")
    spot["size"]["max"] += 3
    before = plan_cost(plan_of("dev").resources)
    after = plan_cost(synthesize("dev", overrides={"nodePools": pools}).resources)
    assert after.gpu_hourly_at_max_usd - before.gpu_hourly_at_max_usd == pytest.approx(3 * G5_2_NODE, abs=1e-9)
    assert after.gpu_hourly_at_min_usd == before.gpu_hourly_at_min_usd
    assert after.fixed_monthly_usd == before.fixed_monthly_usd


@pytest.mark.parametrize(("version", "support_type", "on", "hourly", "why"), [
    ("1.34", "STANDARD", date(2026, 11, 30), 0.10, "standard support until 2026-12-02"),
    ("1.34", "EXTENDED", date(2026, 12, 2), 0.10, "standard support until 2026-12-02"),   # the last day is standard
    ("1.34", "EXTENDED", date(2026, 12, 3), 0.60, "extended support since 2026-12-02"),
    ("1.33", "EXTENDED", date(2026, 11, 30), 0.60, "extended support since 2026-07-29"),
    ("1.33", "STANDARD", date(2026, 11, 30), 0.10, "EKS upgrades the cluster"),            # auto-upgrade, no surcharge
    ("1.99", "EXTENDED", date(2026, 11, 30), 0.10, "no support calendar"),
])
def test_the_control_plane_price_follows_the_support_window(version, support_type, on, hourly, why):
    price, reason = eks_hourly(version, support_type, on)
    assert price is not None and price.usd == hourly and why in reason


def cluster(version: str, support_type: str) -> dict:
    return {"type": "aws:eks/cluster:Cluster", "name": "c", "parent": None,
            "inputs": {"version": version, "upgradePolicy": {"supportType": support_type}}}


def node_group(name: str, types: list[str], capacity: str, low: int, high: int) -> dict:
    return {"type": "aws:eks/nodeGroup:NodeGroup", "name": f"{name}-ng", "parent": None,
            "inputs": {"nodeGroupName": f"x-{name}", "instanceTypes": types, "capacityType": capacity,
                       "labels": {"gpu-training/pool": name}, "scalingConfig": {"minSize": low, "maxSize": high}}}


def launch_template(name: str, gib: int) -> dict:
    return {"type": "aws:ec2/launchTemplate:LaunchTemplate", "name": f"{name}-lt", "parent": None,
            "inputs": {"name": f"x-{name}", "blockDeviceMappings": [{"ebs": {"volumeSize": gib}}]}}


def test_extended_support_is_priced_in_the_fixed_cost():
    cost = plan_cost([cluster("1.34", "EXTENDED")], on=date(2027, 1, 15), region=USE1)
    (item,) = cost.fixed
    assert item.monthly_usd == pytest.approx(730 * 0.60) and "extended support since 2026-12-02" in item.detail


def test_capacity_block_spot_and_unpriced_pools():
    # As the program plans a capacity block: the type in the launch template, none on the node group.
    block_group, block_template = node_group("block", [], "CAPACITY_BLOCK", 0, 2), launch_template("block", 100)
    del block_group["inputs"]["instanceTypes"]
    block_template["inputs"]["instanceType"] = "p5.48xlarge"
    plan = [
        block_group, block_template,
        node_group("spot", ["g6.12xlarge", "g5.12xlarge"], "SPOT", 1, 3),  # no launch template: EKS's 20 GiB
        node_group("h200", ["p5e.48xlarge"], "ON_DEMAND", 0, 2),
    ]
    cost = plan_cost(plan, region=USE1)
    pools = {p.pool.name: p for p in cost.pools}
    block = pools["block"]
    assert block.node_hourly_usd == pytest.approx(39.33 + 100 * GP3)
    assert block.hourly_at_min_usd == block.hourly_at_max_usd == pytest.approx(2 * (39.33 + 100 * GP3))  # prepaid
    assert block.on_demand_node_hourly_usd == pytest.approx(55.04 + 100 * GP3)
    spot = pools["spot"]
    assert spot.node_hourly_usd == pytest.approx(5.672 + 20 * GP3) and "upper bound" in spot.basis
    assert spot.hourly_at_min_usd == pytest.approx(5.672 + 20 * GP3)
    assert pools["h200"].node_hourly_usd is None and pools["h200"].hourly_at_max_usd is None
    assert cost.gpu_hourly_at_max_usd == pytest.approx(2 * (39.33 + 100 * GP3) + 3 * (5.672 + 20 * GP3))
    fixed = {i.name: i.monthly_usd for i in cost.fixed}
    assert fixed == pytest.approx({"node pool block (capacity block)": None,
                                   "node pool spot at min size": (5.672 + 20 * GP3) * H})
    assert cost.unpriced == ("node pool block (capacity block)", "node pool h200")
    assert "not priced: node pool block (capacity block), node pool h200" in cost.summary_line()


def test_a_capacity_block_pool_as_planned_is_priced_from_its_launch_template(tmp_path, capfd):
    """The documented capacityBlock pool (docs/gpu-fabric-and-capacity.md), planned for real: its
    node group has no instanceTypes (the launch template fixes the type), which made `make plan`
    and `make cost` end in an IndexError. It must cost what the block costs, not just not crash."""
    prod = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    assert prod.count("capacity: reservation") == 1  # the p5-efa pool, with its capacityReservationId
    stack_file = tmp_path / "Pulumi.prod.yaml"
    assert prod.count("size: {max: 2}") == 1  # its size: min and desired default to a reservation's count
    # A capacity block launches only inside its dates: its pool names min and desired.
    stack_file.write_text(prod.replace("capacity: reservation", "capacity: capacityBlock\n      capacityBlockEnd: \"2099-01-15T11:30:00Z\"")
                          .replace("size: {max: 2}", "size: {min: 0, desired: 0, max: 2}"))
    out_dir = tmp_path / "prod"

    assert plan_main(["--stack", "prod", "--stack-file", str(stack_file), "--out", str(out_dir)]) == 0
    resources = json.loads((out_dir / "resources.json").read_text())
    (group,) = [r["inputs"] for r in resources if r["name"] == "node-pools-p5-efa-nodegroup"]
    assert group["capacityType"] == "CAPACITY_BLOCK" and "instanceTypes" not in group  # as EKS requires for a block

    cost = stack_cost(out_dir)
    block = next(p for p in cost.pools if p.pool.name == "p5-efa")
    node = 39.33 + 500 * GP3  # p5.48xlarge capacity block + 500 GiB
    assert block.pool.instance_types == ("p5.48xlarge",) and block.pool.gpus_per_node == 8
    assert block.node_hourly_usd == pytest.approx(node) and "capacity block" in block.basis
    assert block.hourly_at_min_usd == block.hourly_at_max_usd == pytest.approx(2 * node)  # prepaid, used or not
    assert block.on_demand_node_hourly_usd == pytest.approx(P5_NODE)
    assert block.gpu_hourly_usd == pytest.approx(node / 8)
    assert cost.gpu_hourly_at_min_usd == pytest.approx(2 * node)  # gpu-spot scales to zero
    assert cost.gpu_hourly_at_max_usd == pytest.approx(2 * node + 4 * G5_48_NODE)
    assert cost.unpriced == ("node pool p5-efa (capacity block)",)  # its prepaid fixed line, as for any block
    summary = capfd.readouterr().out
    assert (f"GPU pools ${2 * node:,.2f}/h at min, ${2 * node + 4 * G5_48_NODE:,.2f}/h at max") in summary

    assert main(["--stack", "prod", "--plan-dir", str(out_dir)]) == 0
    (row,) = [line.split() for line in capfd.readouterr().out.splitlines() if line.startswith("  p5-efa ")]
    assert row[:7] == ["p5-efa", "0-2", f"${2 * node:,.2f}", f"${2 * node:,.2f}", f"${node / 8:,.2f}",
                       f"${2 * P5_NODE:,.2f}", f"${2 * node:,.2f}"], row  # at min, at max, per GPU, on-demand, block


def test_a_node_group_naming_no_type_is_read_as_the_eks_default():
    group = node_group("bare", [], "ON_DEMAND", 1, 1)
    del group["inputs"]["instanceTypes"]
    (pool,) = plan_cost([group, launch_template("bare", 20)], region=USE1).pools
    assert pool.pool.instance_types == ("t3.medium",) and pool.pool.gpus_per_node == 0
    assert pool.node_hourly_usd is None and "no us-east-1 price for t3.medium" in pool.basis


def test_a_capacity_reservation_bills_every_reserved_instance_idle_or_not():
    reserved_template = launch_template("odcr", 100)
    reserved_template["inputs"]["capacityReservationSpecification"] = {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    plan = [node_group("odcr", ["p5.48xlarge"], "ON_DEMAND", 0, 3), reserved_template,
            node_group("plain", ["p5.48xlarge"], "ON_DEMAND", 0, 3), launch_template("plain", 100)]
    pools = {p.pool.name: p for p in plan_cost(plan, region=USE1).pools}
    node = 55.04 + 100 * GP3
    assert pools["odcr"].pool.reserved and "reservation" in pools["odcr"].basis
    assert pools["odcr"].hourly_at_min_usd == pools["odcr"].hourly_at_max_usd == pytest.approx(3 * node)
    assert not pools["plain"].pool.reserved and pools["plain"].hourly_at_min_usd == 0


@pytest.mark.parametrize(("throughput", "monthly"), [(125, 2400 * 0.145), (250, None)])
def test_fsx_for_lustre_is_priced_only_where_the_table_has_a_price(throughput, monthly):
    lustre = {"type": "aws:fsx/lustreFileSystem:LustreFileSystem", "name": "fsx", "parent": None,
              "inputs": {"deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": throughput, "storageCapacity": 2400}}
    (item,) = plan_cost([lustre], region=USE1).fixed
    assert item.monthly_usd == (pytest.approx(monthly) if monthly else None)


def test_stated_volumes_scale_the_usage_items(plan_of):
    cost = plan_cost(plan_of("dev").resources, usage=Usage(nat_gb=1000, log_gb=0, efs_gb=10))
    assert {i.name: i.monthly_usd for i in cost.usage} == pytest.approx(
        {"NAT data processing": 45.0, "CloudWatch Logs ingestion": 0.0, "EFS Standard storage": 3.0})


@pytest.mark.parametrize(("extra_subnets", "gb", "monthly"), [
    ((), 1000, 0.0),  # the planned prod: every GPU node group in the file system's subnet
    (("network-private-us-east-1b-id",), 1000, 20.0),  # gpu-spot with a second AZ: 1000 GB x $0.02
    (("network-private-us-east-1b-id",), 50, 1.0),
])
def test_gpu_nodes_outside_the_lustre_zone_pay_the_cross_az_rate(plan_of, extra_subnets, gb, monthly):
    resources = copy.deepcopy(plan_of("prod").resources)
    [spot] = [r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"].endswith("gpu-spot-nodegroup")]
    spot["inputs"]["subnetIds"] += list(extra_subnets)
    [item] = [i for i in plan_cost(resources, usage=Usage(lustre_cross_az_gb=gb)).usage if "Lustre" in i.name]
    assert item.monthly_usd == pytest.approx(monthly)
    assert ("gpu-training-prod-gpu-spot have nodes outside" in item.detail) is bool(extra_subnets), item.detail


def test_a_teams_quota_is_priced_in_whole_nodes():
    pools = [pool_cost(NodePool("gpu-spot", ("g6.48xlarge", "g5.48xlarge"), "SPOT", 0, 4, 200)),
             pool_cost(NodePool("small", ("g6.xlarge",), "SPOT", 0, 4, 200))]
    assert quota_hourly_usd({"gpu-spot": 16, "small": 3, "gone": 8}, pools) == pytest.approx(
        {"gpu-spot": 2 * G5_48_NODE, "small": 3 * (0.8048 + 200 * GP3), "gone": None})
    assert quota_hourly_usd({"gpu-spot": 9}, pools) == pytest.approx({"gpu-spot": 2 * G5_48_NODE})  # 9 GPUs: 2 nodes


@pytest.mark.parametrize("region", sorted(prices.TABLES))
def test_every_instance_type_the_platform_knows_has_a_price_or_a_stated_gap(region):
    table = prices.TABLES[region]
    unpriced = set(INSTANCE_TYPES) - set(table.ec2_on_demand_hourly)
    assert "p5e.48xlarge" in unpriced, region  # capacity blocks only, in every region
    for instance_type in unpriced:
        assert any(instance_type in gap for gap in table.all_gaps), (region, instance_type)
    assert set(table.ec2_on_demand_hourly) <= set(INSTANCE_TYPES)


def test_every_price_names_its_source_and_date():
    for table in prices.TABLES.values():
        for name, price in table.service_prices() + tuple(table.capacity_block_hourly.items()):
            if price is not None:
                assert price.usd > 0 and price.source and price.as_of[:4].isdigit(), (table.region, name)
        assert table.ec2_on_demand_source and table.ec2_on_demand_as_of, table.region


def test_a_region_without_a_table_is_refused_not_priced_from_another():
    provider = {"type": "pulumi:providers:aws", "name": "aws", "parent": None, "inputs": {"region": "eu-west-1"}}
    with pytest.raises(UnpricedRegionError, match=r"region eu-west-1 has no price table .*us-east-1, us-west-2, us-east-2"):
        plan_cost([provider, cluster("1.36", "STANDARD")])
    with pytest.raises(UnpricedRegionError, match="no aws provider"):
        plan_cost([cluster("1.36", "STANDARD")])  # no provider: no region to price it in
    assert plan_cost([]).fixed_monthly_usd == 0  # an empty plan (a stack a change adds) costs nothing


def test_make_cost_refuses_a_stack_in_a_region_without_a_table(tmp_path, plan_of, capfd):
    resources = copy.deepcopy(plan_of("prod").resources)
    for record in resources:
        if record["type"] == "pulumi:providers:aws":
            record["inputs"]["region"] = "eu-west-1"
    (tmp_path / "resources.json").write_text(json.dumps(resources))
    assert main(["--stack", "prod", "--plan-dir", str(tmp_path)]) == 2
    err = capfd.readouterr().err
    assert err.startswith("stack prod: region eu-west-1 has no price table") and "Fix: add a RegionPrices" in err


# prod-usw2 at the us-west-2 table: every figure written out from that table's own sources.
GP3_USW2 = 0.08 / 730  # USW2-EBS:VolumeUsage.gp3, 2026-10-04
EXPECTED_FIXED_USW2 = {
    "EKS control plane": 730 * 0.10,                                # USW2 AmazonEKS, standard support
    "node pool system at min size": 3 * (0.4032 + 50 * GP3_USW2) * H,  # m7i.2xlarge us-west-2 (SkyPilot catalog)
    "NAT gateways": 3 * 730 * 0.045,                                # USW2-NatGateway-Hours
    "public IPv4 addresses (NAT)": 3 * 730 * 0.005,
    "KMS keys": None,                                               # no us-west-2 source: not priced
    "Secrets Manager secrets": 2 * 0.40,
    "CloudWatch alarms": None,                                      # no us-west-2 source: not priced
    "interface VPC endpoints": 8 * 3 * 730 * 0.01,                  # USW2-VpcEndpoint-Hours, 3 AZs
    "FSx for Lustre": None,                                         # no us-west-2 source: not priced
}
# Both further regions price usage alike: NAT processing and log ingestion at the same rates, no EFS source.
EXPECTED_USAGE_USW2_USE2 = {"NAT data processing": 100 * 0.045, "CloudWatch Logs ingestion": 50 * 0.50,
                            "EFS Standard storage": None, "cross-AZ traffic to FSx for Lustre": 0.0}


def priced_line_by_line(plan_of, stack: str, region: str, expected_fixed: dict[str, float | None]) -> StackCost:
    """The stack's cost, checked against its region's table: the region, every fixed and usage line, the total."""
    cost = plan_cost(plan_of(stack).resources)
    assert cost.region == region
    assert {i.name: i.monthly_usd for i in cost.fixed} == pytest.approx(expected_fixed, abs=1e-9)
    assert {i.name: i.monthly_usd for i in cost.usage} == pytest.approx(EXPECTED_USAGE_USW2_USE2, abs=1e-9)
    assert cost.fixed_monthly_usd == pytest.approx(sum(v for v in expected_fixed.values() if v), abs=1e-9)
    return cost


def test_a_us_west_2_stack_is_priced_from_the_us_west_2_table(plan_of):
    cost = priced_line_by_line(plan_of, "prod-usw2", "us-west-2", EXPECTED_FIXED_USW2)
    p5, spot = 55.04 + 500 * GP3_USW2, 16.288 + 200 * GP3_USW2  # p5.48xlarge, g5.48xlarge in us-west-2
    assert cost.gpu_hourly_at_min_usd == pytest.approx(2 * p5) and cost.gpu_hourly_at_max_usd == pytest.approx(2 * p5 + 4 * spot)
    assert cost.unpriced == ("KMS keys", "CloudWatch alarms", "FSx for Lustre", "EFS Standard storage")
    assert any("us-west-2: no source found" in gap for gap in cost.gaps)
    assert "(us-west-2 list prices of 2026-11-30); not priced: KMS keys" in cost.summary_line()



# prod-use2 at the us-east-2 table, the same way; p5-efa has no reservation there (GPU pools $0/h at min).
GP3_USE2 = 0.08 / 730  # USE2-EBS:VolumeUsage.gp3, Price List answer of 2023-03-01
EXPECTED_FIXED_USE2 = {
    "EKS control plane": 730 * 0.10,                                # learner's us-east-2 notes, standard support
    "node pool system at min size": 3 * (0.4032 + 50 * GP3_USE2) * H,  # m7i.2xlarge us-east-2 (SkyPilot catalog)
    "NAT gateways": 3 * 730 * 0.045,                                # Price List API us-east-2, 2026-08-11
    "public IPv4 addresses (NAT)": 3 * 730 * 0.005,
    "KMS keys": 8 * 1.00,
    "Secrets Manager secrets": None,                                # no us-east-2 source: not priced
    "CloudWatch alarms": None,                                      # no us-east-2 source: not priced
    "interface VPC endpoints": None,                                # no us-east-2 source: not priced
    "FSx for Lustre": None,                                         # no us-east-2 source: not priced
}


def test_a_us_east_2_stack_is_priced_from_the_us_east_2_table(plan_of):
    cost = priced_line_by_line(plan_of, "prod-use2", "us-east-2", EXPECTED_FIXED_USE2)
    p5, spot = 55.04 + 500 * GP3_USE2, 16.288 + 200 * GP3_USE2  # p5.48xlarge, g5.48xlarge in us-east-2
    assert cost.gpu_hourly_at_min_usd == 0 and cost.gpu_hourly_at_max_usd == pytest.approx(2 * p5 + 4 * spot)
    assert any("us-east-2: p4de.24xlarge" in gap for gap in cost.gaps)

def test_each_stack_reads_only_its_own_regions_table(plan_of, monkeypatch):
    """A figure changed in the us-west-2 table moves prod-usw2 and nothing else."""
    before_east, before_west = plan_cost(plan_of("prod").resources), plan_cost(plan_of("prod-usw2").resources)
    dear_nat = dataclasses.replace(prices.US_WEST_2, nat_gateway_hour=prices.Price(1.0, "NAT gateway-hour", "test", "2026"))
    monkeypatch.setitem(prices.TABLES, "us-west-2", dear_nat)
    after_east, after_west = plan_cost(plan_of("prod").resources), plan_cost(plan_of("prod-usw2").resources)
    assert after_east == before_east
    assert after_west.fixed_monthly_usd - before_west.fixed_monthly_usd == pytest.approx(3 * 730 * (1.0 - 0.045))


def test_the_environment_is_priced_per_region_and_in_total(plan_of, monkeypatch):
    import offline.plan
    monkeypatch.setattr(offline.plan, "synthesize", lambda stack, *_a, **_k: plan_of(stack))
    out = environment_costs("prod", on=prices.REVIEWED_ON, usage=Usage(), dataset_gb=2000)
    costs = {stack: plan_cost(plan_of(stack).resources) for stack in ("prod", "prod-usw2", "prod-use2")}
    for stack, region in (("prod", "us-east-1"), ("prod-usw2", "us-west-2"), ("prod-use2", "us-east-2")):
        assert f"  {stack:<14} {region:<10} ${costs[stack].fixed_monthly_usd:,.0f}/month fixed" in out
    # Billed by the region it leaves, at the pair's rate: the same 2,000 GB of datasets to each worker region.
    assert "datasets prod: 2,000 GB/month us-east-1 -> us-west-2 x $0.02/GB = $40/month" in out
    assert "datasets prod: 2,000 GB/month us-east-1 -> us-east-2 x $0.01/GB = $20/month" in out
    # Checkpoints from each cluster to every other: pretrain-p5's 80 GiB once an hour (assumed), 730 h.
    gb = 80 * 2**30 / 10**9 * 730
    assert f"checkpoints prod/pretrain-p5: {gb:,.0f} GB/month us-east-1 -> us-west-2 x $0.02/GB = ${gb * 0.02:,.0f}/month" in out
    assert f"checkpoints prod-usw2/pretrain-p5: {gb:,.0f} GB/month us-west-2 -> us-east-1 x $0.02/GB" in out
    assert "checkpoints prod-usw2/pretrain-p5: 62,707 GB/month us-west-2 -> us-east-2: not priced" in out
    flows = re.findall(r"cross-region transfer: .* = \$([\d,]+)/month", out)
    total = sum(c.fixed_monthly_usd + c.usage_monthly_usd for c in costs.values()) + sum(float(f.replace(",", "")) for f in flows)
    assert len(flows) == 7 and abs(float(re.search(r"  total: \$([\d,]+)/month", out)[1].replace(",", "")) - total) < 4
    assert "not priced, so in no figure above: prod-use2: Secrets Manager secrets" in out
    doc = (ROOT / "docs" / "multi-region.md").read_text()
    assert f"```\n{out}\n```" in doc, "docs/multi-region.md 'What it costs' no longer shows what --environment prod prints"


@pytest.mark.parametrize(("gib", "interval", "expected_gb"), [
    (80, 3600, 62_707),      # review 3 (D5): one 80 GiB save an hour, ~58 TiB a month per destination
    (80, 7200, 31_354),      # half the saves, half the bytes
    (16, 1800, 25_083),
])
def test_each_save_crosses_to_each_region_once(gib, interval, expected_gb):
    assert cost_model.checkpoint_transfer_gb(gib, interval) == pytest.approx(expected_gb, abs=1)


def test_a_destination_keeps_the_current_checkpoints_and_days_of_old_versions():
    # 3 current + 3 days x 24 saves = 75 checkpoints of 80 GiB
    assert cost_model.checkpoint_replica_gb(80, 3600, keep=3, version_days=3) == pytest.approx(75 * 80 * 2**30 / 1e9)


def test_a_region_pair_without_a_rate_is_not_priced_rather_than_borrowed(plan_of, monkeypatch):
    import offline.plan
    monkeypatch.setattr(offline.plan, "synthesize", lambda stack, *_a, **_k: plan_of(stack))
    no_ohio_rate = dataclasses.replace(prices.US_EAST_1, inter_region_transfer={
        "us-west-2": prices.US_EAST_1.inter_region_transfer["us-west-2"]})
    monkeypatch.setitem(prices.TABLES, "us-east-1", no_ohio_rate)
    out = environment_costs("prod", on=prices.REVIEWED_ON, usage=Usage(), dataset_gb=3000)
    assert "datasets prod: 3,000 GB/month us-east-1 -> us-east-2: not priced (no us-east-1 -> us-east-2 rate" in out
    assert "datasets prod: 3,000 GB/month us-east-1 -> us-west-2 x $0.02/GB = $60/month" in out
    assert "transfer us-east-1 -> us-east-2" in out.split("not priced, so in no figure above:")[1]

# --- the commands -----------------------------------------------------------------------------

def test_make_cost_prints_every_line_item(tmp_path, plan_of, capfd):
    printed = {}
    for stack in ("prod", "dev"):
        write_plan(plan_of(stack), tmp_path / stack)
        assert main(["--stack", stack, "--plan-dir", str(tmp_path / stack)]) == 0
        printed[stack] = out = capfd.readouterr().out
        for name, usd in (EXPECTED_FIXED[stack] | EXPECTED_USAGE).items():
            assert f"  {name} " in out and f"${usd:,.2f}" in out, (stack, name)
        assert "Not in these figures" in out
    assert "A month with every GPU pool idle (reserved capacity is billed anyway): $5,270 + 730 h x $110.19 = $85,709" \
        in printed["prod"]
    assert "A month with every GPU pool at max size: $5,270 + 730 h x $175.43 = $133,334" in printed["prod"]
    assert "idle" not in printed["dev"]
    assert "Budget (gpu-training:budget): $120,000/month, alerts at 50/80/100% actual and 100% forecast" in printed["prod"]
    assert "= fixed + usage + 654 h of every GPU pool at max size" in printed["prod"]
    assert "Budget (gpu-training:budget): $3,000/month" in printed["dev"]


def test_make_cost_states_what_a_reservation_costs_idle_and_in_use(tmp_path, plan_of, capfd):
    """prod's p5-efa keeps a node on each reserved instance (min = max): idle or in use the same
    $/h, the nodes adding only their root volumes. An explicit lower min is priced as paid capacity
    without a node."""
    write_plan(plan_of("prod"), tmp_path / "prod")
    assert main(["--stack", "prod", "--plan-dir", str(tmp_path / "prod")]) == 0
    out = capfd.readouterr().out
    reserved = 2 * P5_NODE
    assert (f"  p5-efa     2 reserved: ${reserved:,.2f}/h idle or in use (${reserved * H:,.0f}/month); size.min 2 "
            f"keeps a node on each, idling at ${2 * 500 * GP3:,.2f}/h more (root volumes); a job starts without a boot") in out
    assert out.count(" reserved: $") == 1  # gpu-spot and system are not reservations

    pools = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"]["gpu-training:nodePools"]
    next(p for p in pools if p["name"] == "p5-efa")["size"] = {"min": 0, "max": 2}
    write_plan(synthesize("prod", overrides={"nodePools": pools}), tmp_path / "min0")
    assert main(["--stack", "prod", "--plan-dir", str(tmp_path / "min0")]) == 0
    out = capfd.readouterr().out
    assert (f"  p5-efa     2 reserved: ${reserved:,.2f}/h idle or in use (${reserved * H:,.0f}/month); size.min 0 "
            f"leaves 2 without a node: ${2 * 55.04:,.2f}/h paid for capacity a job waits for a boot to use") in out
    cost = stack_cost(tmp_path / "min0")
    assert cost.gpu_hourly_at_min_usd == pytest.approx(reserved)  # the bill is the same, min 0 or 2


def test_only_reservations_get_the_reservation_lines(tmp_path, plan_of, capfd):
    for stack in ("staging", "dev"):
        write_plan(plan_of(stack), tmp_path / stack)
        assert main(["--stack", stack, "--plan-dir", str(tmp_path / stack)]) == 0
        assert "Capacity reservations" not in capfd.readouterr().out, stack


def test_make_cost_prices_a_teams_quota(capfd, plan_of, tmp_path):
    write_plan(plan_of("team-vision-prod"), tmp_path)
    assert main(["--stack", "team-vision-prod", "--plan-dir", str(tmp_path)]) == 0
    out = capfd.readouterr().out
    assert f"gpu-spot     16 GPUs      ${2 * G5_48_NODE:,.2f}/h" in out  # 2 nodes of 8 GPUs
    assert "counts what is tagged environment=prod and team=vision" in out


def test_the_price_table_lists_sources(capfd):
    assert main(["--prices"]) == 0
    out = capfd.readouterr().out
    assert "karpenter-provider-aws" in out and "p5.48xlarge" in out and "Not priced" in out


def test_stack_cost_reads_a_plan_directory(tmp_path, plan_of):
    write_plan(plan_of("prod"), tmp_path)
    cost = stack_cost(tmp_path)
    assert cost.fixed_monthly_usd == pytest.approx(sum(EXPECTED_FIXED["prod"].values()))
    assert json.loads((tmp_path / "resources.json").read_text())  # the same file `make plan` writes


def test_the_plan_summary_prints_the_totals_in_one_line(tmp_path, capfd):
    assert plan_main(["--stack", "dev", "--stack", "prod", "--build-dir", str(tmp_path)]) == 0
    lines = [line.strip() for line in capfd.readouterr().out.splitlines() if line.strip().startswith("cost:")]
    assert lines == [
        "cost: $386/month fixed + $180/month usage at stated volumes; GPU pools $0.00/h at min, "
        "$4.94/h at max; an idle month $566 (us-east-1 list prices of 2026-11-30)",
        "cost: $5,091/month fixed + $180/month usage at stated volumes; GPU pools $110.19/h at min, "
        "$175.43/h at max; an idle month $85,709 (us-east-1 list prices of 2026-11-30)",
    ]


# What the us-west-2 and us-east-2 tables have no source for (their gaps); every other stack is fully priced.
UNPRICED = {"prod-usw2": ("KMS keys", "CloudWatch alarms", "FSx for Lustre", "EFS Standard storage"),
            "prod-use2": ("Secrets Manager secrets", "CloudWatch alarms", "interface VPC endpoints", "FSx for Lustre",
                          "EFS Standard storage")}


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_platform_stack_is_priced_but_for_its_regions_stated_gaps(stack, plan_of):
    assert plan_cost(plan_of(stack).resources).unpriced == UNPRICED.get(stack, ())


def test_the_plan_summary_states_an_unpriced_region_instead_of_failing_the_plan():
    from offline.plan import cost_line
    provider = {"type": "pulumi:providers:aws", "name": "aws", "parent": None, "inputs": {"region": "eu-west-1"}}
    assert cost_line([provider]).startswith("cost: not priced: region eu-west-1 has no price table")
