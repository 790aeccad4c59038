#!/usr/bin/env python3
"""What a stack costs: the breakdown of its offline plan at the prices of components/facts/prices.py.

    python scripts/cost.py --stack prod                  # plan offline (nothing written), then cost
    python scripts/cost.py --stack prod --plan-dir build/prod   # cost an existing plan
    python scripts/cost.py --stack dev --nat-gb 500 --log-gb 20 --efs-gb 100   # other volumes
    python scripts/cost.py --stack prod --on 2026-12-03  # which EKS support window applies that day
    python scripts/cost.py --prices                      # the price table with sources and dates
    python scripts/cost.py --project bootstrap --stack bootstrap   # the bootstrap (make cost STACK=bootstrap)

For other tools (the plan diff of a pull request): `stack_cost(plan_dir)` returns the
`StackCost` of a plan directory from its resources.json alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from components.config import ConfigError, StackConfig, TeamStackConfig  # noqa: E402
from components.config.lustre_sizing import gpus_served  # noqa: E402
from components.config.node_pools import CAPACITY_TYPES  # noqa: E402
from components.config.strict_yaml import path_for_message  # noqa: E402
from components.facts import prices  # noqa: E402
from components.facts.cost_model import (  # noqa: E402
    ASSUMED_CHECKPOINT_INTERVAL_S,
    STATED_USAGE,
    NodePool,
    StackCost,
    Usage,
    checkpoint_replica_gb,
    checkpoint_transfer_gb,
    plan_cost,
    pool_cost,
    quota_hourly_usd,
)
from components.facts.file_systems import flush_seconds, grace_needed_seconds  # noqa: E402
from components.facts.prices import HOURS_PER_MONTH  # noqa: E402


def stack_cost(plan_dir: Path, *, on: date = prices.REVIEWED_ON, usage: Usage = STATED_USAGE) -> StackCost:
    """The cost of the stack planned into `plan_dir` (e.g. build/prod), read from its resources.json.

    Totals: `.fixed_monthly_usd`, `.usage_monthly_usd`, `.gpu_hourly_at_min_usd`,
    `.gpu_hourly_at_max_usd`; `.summary_line()` is the plan summary's line. PlanDirError when
    the directory holds no readable plan."""
    return plan_cost(read_resources(plan_dir), on=on, usage=usage)


class PlanDirError(Exception):
    """A --plan-dir without a readable resources.json; the message is one line with the fix."""


def read_resources(plan_dir: Path) -> list[dict[str, Any]]:
    path = plan_dir / "resources.json"
    fix = "Fix: name a directory scripts/plan.py wrote (e.g. build/<stack>), or leave out --plan-dir to plan now"
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PlanDirError(f"{path_for_message(path)}: cannot be read ({error.strerror or type(error).__name__}). "
                           f"{fix}") from None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, absurdly deep
        raise PlanDirError(f"{path_for_message(path)}: is not the JSON scripts/plan.py writes. {fix}") from None
    if not isinstance(records, list) or not all(isinstance(r, dict) and isinstance(r.get("type"), str)
                                                and isinstance(r.get("inputs"), dict) for r in records):
        raise PlanDirError(f"{path_for_message(path)}: is not a plan's list of resources. {fix}")
    return records


def _usd(value: float | None, digits: int = 2) -> str:
    return "not priced" if value is None else f"${value:,.{digits}f}"


def breakdown(stack: str, cost: StackCost, config: StackConfig | TeamStackConfig | None) -> str:
    """`config` None: the bootstrap, which has no budget and no pools."""
    lines = [f"{stack}: what it costs ({cost.region} list prices reviewed {prices.REVIEWED_ON}, "
             f"EKS support judged on {cost.priced_on}; sources: scripts/cost.py --prices)", ""]
    lines.append("Fixed, per month (billed while the stack exists)")
    lines += [f"  {i.name:<34} {_usd(i.monthly_usd):>12}  {i.detail}" for i in cost.fixed]
    lines.append(f"  {'total':<34} {_usd(cost.fixed_monthly_usd):>12}")
    lines += ["", "Usage at stated volumes, per month (--nat-gb, --log-gb, --efs-gb)"]
    lines += [f"  {i.name:<34} {_usd(i.monthly_usd):>12}  {i.detail}" for i in cost.usage]
    lines.append(f"  {'total':<34} {_usd(cost.usage_monthly_usd):>12}")
    if cost.pools:
        lines += ["", "Node pools, per hour (a node = its dearest instance type + root volume)",
                  f"  {'pool':<10} {'nodes':>5}  {'at min':>10} {'at max':>10} {'per GPU':>9} "
                  f"{'on-demand@max':>14} {'cap.block@max':>14}  billed as"]
        for p in cost.pools:
            block = None if p.capacity_block_node_hourly_usd is None else p.capacity_block_node_hourly_usd * p.pool.max_nodes
            on_demand = None if p.on_demand_node_hourly_usd is None else p.on_demand_node_hourly_usd * p.pool.max_nodes
            lines.append(f"  {p.pool.name:<10} {p.pool.min_nodes:>2}-{p.pool.max_nodes:<2}  "
                         f"{_usd(p.hourly_at_min_usd):>10} {_usd(p.hourly_at_max_usd):>10} "
                         f"{'-' if p.gpu_hourly_usd is None else _usd(p.gpu_hourly_usd):>9} "
                         f"{_usd(on_demand):>14} {'-' if block is None else _usd(block) + ' *':>14}  {p.basis}")
        lines.append(f"  {'GPU pools':<10} {'':>5}  {_usd(cost.gpu_hourly_at_min_usd):>10} "
                     f"{_usd(cost.gpu_hourly_at_max_usd):>10}")
        if any(p.capacity_block_node_hourly_usd is not None for p in cost.pools):
            lines.append("  * capacity block price from a 2024 copy of the AWS page: STALE, check before buying")
    lines += _reserved_lines(cost)
    if config is not None:
        lines += storage_lines(config) + _goodput_lines(config)
    base = cost.fixed_monthly_usd + cost.usage_monthly_usd
    if cost.gpu_pools:
        lines.append("")
        if cost.gpu_hourly_at_min_usd:  # capacity reservations and blocks bill their nodes idle
            lines.append(f"A month with every GPU pool idle (reserved capacity is billed anyway): {_usd(base, 0)} + "
                         f"{HOURS_PER_MONTH} h x {_usd(cost.gpu_hourly_at_min_usd)} = "
                         f"{_usd(base + HOURS_PER_MONTH * cost.gpu_hourly_at_min_usd, 0)}")
        lines.append(f"A month with every GPU pool at max size: {_usd(base, 0)} + {HOURS_PER_MONTH} h x "
                     f"{_usd(cost.gpu_hourly_at_max_usd)} = {_usd(base + HOURS_PER_MONTH * cost.gpu_hourly_at_max_usd, 0)}")
    if isinstance(config, TeamStackConfig):
        lines += _quota_lines(config, prices.region_prices(cost.region))
    if config is not None:
        lines += _budget_lines(config, cost, base)
    lines += ["", f"Not in these figures (no {cost.region} price in components/facts/prices.py):"]
    lines += [f"  - {gap}" for gap in (*cost.unpriced, *cost.gaps)]
    return "\n".join(lines)


def _reserved_lines(cost: StackCost) -> list[str]:
    """What each capacity reservation costs idle and in use (the same), and what its pool's size.min
    leaves paid but without a node. EC2 charges a reservation "at the equivalent On-Demand rate
    whether you run instances in reserved capacity or not", and a running instance pays "nothing for
    the reservation" (EC2 User Guide, capacity-reservations-pricing-billing)."""
    if not cost.reserved_pools:
        return []
    lines = ["", "Capacity reservations, per hour: billed for every reserved instance, idle or in use"]
    for p in cost.reserved_pools:
        pool, hourly = p.pool, p.hourly_at_min_usd
        monthly = None if hourly is None else hourly * HOURS_PER_MONTH
        line = (f"  {pool.name:<10} {pool.max_nodes} reserved: {_usd(hourly)}/h idle or in use "
                f"({_usd(monthly, 0)}/month); ")
        if p.reserved_without_node:
            line += (f"size.min {pool.min_nodes} leaves {p.reserved_without_node} without a node: "
                     f"{_usd(p.reserved_without_node_hourly_usd)}/h paid for capacity a job waits for a boot to use")
        else:
            volumes = None if p.volume_hourly_usd is None else pool.min_nodes * p.volume_hourly_usd
            line += (f"size.min {pool.min_nodes} keeps a node on each, idling at "
                     f"{_usd(volumes)}/h more (root volumes); a job starts without a boot")
        lines.append(line)
    return lines


def storage_lines(config: StackConfig | TeamStackConfig) -> list[str]:
    """What the shared file system gives each GPU it serves, and how long each job's checkpoint
    takes to write there (the figures the config's grace and sizing checks use)."""
    team = isinstance(config, TeamStackConfig)
    storage = config.judged_platform.storage if isinstance(config, TeamStackConfig) else config.storage
    lines = []
    lustre = None if team else storage.lustre
    if lustre is not None and isinstance(config, StackConfig):
        gpus = gpus_served(config.training, config.node_pools)
        total = lustre.throughput_mb_s
        per_gpu = f"{total / gpus:,.0f} MB/s per GPU" if gpus else "no GPU quota"
        lines += ["", f"FSx for Lustre: {lustre.storage_capacity_gib} GiB x {lustre.throughput_per_tib} MB/s per TiB = "
                      f"{total:,.0f} MB/s for the {gpus} GPUs of training.gpuQuota: {per_gpu} "
                      f"(readMBpsPerGpu {lustre.read_mb_s_per_gpu})"]
    jobs = [job for job in config.training.jobs if job.checkpoint_gib is not None]
    if not jobs:
        return lines
    lines += ["", "Checkpoint writes (one checkpoint; a stop may first finish a save in flight)"]
    for job in jobs:
        gib = job.checkpoint_gib or 0
        store = storage.checkpoint_store(nodes=job.nodes, ranks=job.total_gpus, writers=job.checkpoint_writers,
                                         checkpoint_gib=gib, lustre=not team)
        lines.append(f"  {job.name:<20} {gib} GiB on {store.name} at {store.write_mb_s:,.0f} MB/s: "
                     f"{flush_seconds(gib, store.write_mb_s):.0f} s; a stop needs "
                     f"{grace_needed_seconds(gib, store.write_mb_s)} s of its {job.termination_grace_period_seconds} s "
                     f"grace ({store.basis})")
    return lines


def _goodput_lines(config: StackConfig | TeamStackConfig) -> list[str]:
    """Each job's checkpoint interval and goodput estimate (offline/job_goodput.py)."""
    from offline.job_goodput import ASSUMPTIONS, goodput_lines  # it imports the Pulumi SDK

    jobs = goodput_lines(config)
    if not jobs:
        return []
    return ["", "Goodput: the fraction of GPU time on new steps, at the pool's fault rates (faults per day by class, "
                "time each loses: restart + half an interval)", *(f"  {line}" for line in jobs), f"  ({ASSUMPTIONS})"]


def _quota_lines(config: TeamStackConfig, table: prices.RegionPrices) -> list[str]:
    """A team's GPU quota, fully used, on its platform's pools (whole nodes are billed), at the
    prices of the team stack's region (its platform's)."""
    pools = [pool_cost(NodePool(p.name, p.instance_types, CAPACITY_TYPES[p.capacity], p.min_size, p.max_size,
                                p.root_volume_gib), table) for p in config.judged_platform.node_pools]
    hourly = quota_hourly_usd(config.training.gpu_quota, pools)
    lines = ["", f"GPU quota at full use, on the {config.environment} platform's shared pools "
                 "(billed to the environment, not to this stack's tags)"]
    lines += [f"  {pool:<10} {config.training.gpu_quota[pool]:>4} GPUs  {_usd(usd):>10}/h  "
              f"{_usd(None if usd is None else usd * HOURS_PER_MONTH, 0):>10}/month" for pool, usd in hourly.items()]
    return lines


def _budget_lines(config: StackConfig | TeamStackConfig, cost: StackCost, base: float) -> list[str]:
    budget = config.budget
    if budget is None:
        return ["", "Budget: none (gpu-training:budget)"]
    def percents(values: tuple[int, ...]) -> str:
        return "/".join(map(str, values)) + "%" if values else "-"

    lines = ["", f"Budget (gpu-training:budget): {_usd(budget.monthly_limit_usd, 0)}/month, alerts at "
                 f"{percents(budget.actual_percent)} actual and {percents(budget.forecast_percent)} forecast"]
    if isinstance(config, TeamStackConfig):
        lines.append(f"  counts what is tagged environment={config.environment} and team={config.team}: this stack's "
                     f"{_usd(base)}/month; the quota's GPU hours count in the {config.environment} budget")
    if base > budget.monthly_limit_usd:
        lines.append(f"  WARNING: below the fixed and usage cost ({_usd(base, 0)}): it will alert every month")
    elif cost.gpu_hourly_at_max_usd:
        hours = (budget.monthly_limit_usd - base) / cost.gpu_hourly_at_max_usd
        lines.append(f"  = fixed + usage + {hours:,.0f} h of every GPU pool at max size")
    return lines


def price_table() -> str:
    """Every region's table, each price with its source and date; "not priced" where a region has none."""
    lines: list[str] = []
    for table in prices.TABLES.values():
        lines += _region_price_lines(table)
    lines += ["EKS end of standard support: " + ", ".join(f"{v} {d}" for v, d in prices.EKS_STANDARD_SUPPORT_END.items())]
    lines += ["", "Not priced in any region:"] + [f"  - {gap}" for gap in prices.GAPS]
    return "\n".join(lines)


def _region_price_lines(table: prices.RegionPrices) -> list[str]:
    lines = [f"Prices ({table.region}, USD; table reviewed {prices.REVIEWED_ON}; components/facts/prices.py)", ""]
    lines += [f"  {name:<38} not priced (no {table.region} source found)" if price is None else
              f"  {name:<38} ${price.usd:<8g} per {price.unit}  [{price.source}; {price.as_of}]"
              for name, price in table.service_prices()]
    lines += ["", f"EC2 on-demand, $/instance-hour [{table.ec2_on_demand_source}; {table.ec2_on_demand_as_of}]"]
    lines += [f"  {t:<20} {usd:>11.6f}" for t, usd in table.ec2_on_demand_hourly.items()]
    lines += ["", f"Spot: billed at most the on-demand price [{prices.SPOT_CEILING_SOURCE}]"]
    lines += [f"Capacity block {t}: ${p.usd}/h [{p.source}; {p.as_of}]" for t, p in table.capacity_block_hourly.items()]
    lines += [f"  - {gap}" for gap in table.gaps]
    return [*lines, ""]


# A stated volume of datasets per worker region: a 2 TB dataset refreshed monthly into it
# (docs/multi-region.md "What it costs"). Checkpoints are priced from the jobs (checkpoint_flows).
DATASET_GB = 2000.0
# The launcher's TRAIN_CHECKPOINT_KEEP default (trainer/README.md): complete checkpoints a job keeps.
CHECKPOINT_KEEP = 3


def load_config(stack: str) -> StackConfig | TeamStackConfig:
    """The stack's config as its plan reads it (a team stack's on its platform plan's contract)."""
    from offline.plan import planned_config  # it imports the Pulumi SDK

    return planned_config(stack)


def environment_costs(environment: str, *, on: date, usage: Usage, dataset_gb: float,
                      checkpoint_interval_s: float = ASSUMED_CHECKPOINT_INTERVAL_S) -> str:
    """Every platform stack of `environment` in this checkout (its regions), each at its own region's
    list prices and in total, with the data moved between its regions, billed by the region it
    leaves at that pair's rate: the stated `dataset_gb` from the manager (the first stack) to each
    worker, and each cluster's checkpoints to every other cluster (checkpoint_lines)."""
    from components.config.sibling_stacks import STACKS_DIR, platform_stacks
    from offline.job_goodput import goodput_lines
    from offline.plan import synthesize

    stacks = [s for s in platform_stacks(STACKS_DIR, (environment,)) if (STACKS_DIR / f"Pulumi.{s}.yaml").is_file()]
    lines = [f"environment {environment}: {len(stacks)} platform stack(s), each at its region's list prices "
             f"reviewed {prices.REVIEWED_ON}"]
    fixed = usage_total = at_min = at_max = 0.0
    regions: dict[str, str] = {}
    unpriced: list[str] = []
    for stack in stacks:
        try:
            cost = plan_cost(synthesize(stack).resources, on=on, usage=usage)
        except prices.UnpricedRegionError as error:
            raise prices.UnpricedRegionError(f"stack {stack}: {error}") from None
        regions[stack] = cost.region
        fixed, usage_total = fixed + cost.fixed_monthly_usd, usage_total + cost.usage_monthly_usd
        at_min, at_max = at_min + cost.gpu_hourly_at_min_usd, at_max + cost.gpu_hourly_at_max_usd
        unpriced += [f"{stack}: {item}" for item in cost.unpriced]
        lines.append(f"  {stack:<14} {cost.region:<10} {_usd(cost.fixed_monthly_usd, 0)}/month fixed + "
                     f"{_usd(cost.usage_monthly_usd, 0)}/month usage; GPU pools {_usd(cost.gpu_hourly_at_min_usd)}/h "
                     f"at min, {_usd(cost.gpu_hourly_at_max_usd)}/h at max")
        lines += [f"    {line}" for line in goodput_lines(load_config(stack))]
    manager = stacks[0] if stacks else ""
    flows = [(f"datasets {manager}", regions[manager], region, dataset_gb) for stack, region in regions.items()
             if stack != manager and region != regions[manager]]
    flows += checkpoint_flows(regions, checkpoint_interval_s, lines)
    transfer = 0.0
    for what, source, destination, gb in flows:
        pair = f"{source} -> {destination}"
        price = prices.region_prices(source).inter_region_transfer.get(destination)
        if price is None:
            lines.append(f"  cross-region transfer: {what}: {gb:,.0f} GB/month {pair}: not priced "
                         f"(no {pair} rate in components/facts/prices.py)")
            unpriced.append(f"transfer {pair}")
            continue
        transfer += gb * price.usd
        lines.append(f"  cross-region transfer: {what}: {gb:,.0f} GB/month {pair} x ${price.usd}/GB = "
                     f"{_usd(gb * price.usd, 0)}/month ({price.source})")
    if len(set(regions.values())) < 2:
        lines.append("  cross-region transfer: none (one region)")
    monthly = fixed + usage_total + transfer
    lines.append(f"  total: {_usd(monthly, 0)}/month + GPU pools {_usd(at_min)}/h at min, {_usd(at_max)}/h at max; "
                 f"an idle month (every GPU pool at min) {_usd(monthly + at_min * HOURS_PER_MONTH, 0)}")
    if unpriced:
        lines.append("  not priced, so in no figure above: " + "; ".join(unpriced))
    return "\n".join(lines)


def checkpoint_flows(regions: dict[str, str], assumed_interval_s: float,
                     lines: list[str]) -> list[tuple[str, str, str, float]]:
    """(what, from region, to region, GB/month) of each job whose checkpoints replicate (a MultiKueue
    stack with Lustre), to every other cluster of the environment, running all month: its
    checkpointGiB x saves (checkpoint_transfer_gb). Notes a job with no checkpointGiB, and the
    replicas each destination keeps, in `lines`."""
    flows = []
    for stack, region in regions.items():
        config = load_config(stack)
        if not isinstance(config, StackConfig) or config.multikueue is None or config.storage.lustre is None:
            continue
        for job in config.training.jobs:
            if job.checkpoint_gib is None:
                lines.append(f"  checkpoints of {stack}/{job.name}: not priced (no checkpointGiB)")
                continue
            interval = job.checkpoint_interval_seconds or assumed_interval_s
            cadence = (f"every {interval:,.0f} s" if job.checkpoint_interval_seconds
                       else f"every {interval:,.0f} s assumed (the trainer's own cadence)")
            kept = checkpoint_replica_gb(job.checkpoint_gib, interval, keep=CHECKPOINT_KEEP,
                                         version_days=config.storage.checkpoint_version_retention_days)
            lines.append(f"  checkpoints of {stack}/{job.name}: {job.checkpoint_gib} GiB {cadence}; each other "
                         f"region keeps up to {kept:,.0f} GB of them ({CHECKPOINT_KEEP} current + "
                         f"{config.storage.checkpoint_version_retention_days} days of old versions; S3 storage not priced)")
            gb = checkpoint_transfer_gb(job.checkpoint_gib, interval)
            flows += [(f"checkpoints {stack}/{job.name}", region, other, gb)
                      for other_stack, other in regions.items() if other_stack != stack and other != region]
    return flows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", help="the stack to cost")
    parser.add_argument("--project", type=Path, default=ROOT,
                        help="directory of the Pulumi project (default: the repository root; bootstrap for the bootstrap)")
    parser.add_argument("--plan-dir", type=Path, help="cost this plan directory instead of planning now")
    parser.add_argument("--on", type=date.fromisoformat, default=prices.REVIEWED_ON, metavar="YYYY-MM-DD",
                        help="the day that decides the EKS support window (default: the table's review date)")
    parser.add_argument("--nat-gb", type=float, default=Usage.nat_gb, help="GB/month through the NAT gateways")
    parser.add_argument("--log-gb", type=float, default=Usage.log_gb, help="GB/month into CloudWatch Logs")
    parser.add_argument("--efs-gb", type=float, default=Usage.efs_gb, help="GB kept on EFS Standard")
    parser.add_argument("--lustre-cross-az-gb", type=float, default=Usage.lustre_cross_az_gb,
                        help="GB/month GPU nodes outside the Lustre file system's zone move to or from it")
    parser.add_argument("--prices", action="store_true", help="print the price table with its sources")
    parser.add_argument("--environment", help="cost every platform stack of an environment (its regions) and the total")
    parser.add_argument("--dataset-gb", type=float, default=DATASET_GB,
                        help="GB/month of datasets the manager's region sends to each other region of the environment")
    parser.add_argument("--checkpoint-interval-s", type=float, default=ASSUMED_CHECKPOINT_INTERVAL_S,
                        help="seconds between checkpoints of a job that sets no checkpointIntervalSeconds")
    args = parser.parse_args(argv)
    if args.prices:
        print(price_table())
        return 0
    usage = Usage(nat_gb=args.nat_gb, log_gb=args.log_gb, efs_gb=args.efs_gb, lustre_cross_az_gb=args.lustre_cross_az_gb)
    if args.environment:
        try:
            print(environment_costs(args.environment, on=args.on, usage=usage, dataset_gb=args.dataset_gb,
                                    checkpoint_interval_s=args.checkpoint_interval_s))
        except (ConfigError, prices.UnpricedRegionError) as error:
            print(f"environment {args.environment}: {error}", file=sys.stderr)
            return 2
        return 0
    if not args.stack:
        parser.error("name a stack with --stack (or --prices)")
    project_dir = args.project.resolve()
    if not (project_dir / "Pulumi.yaml").is_file():
        parser.error(f"--project {path_for_message(args.project)}: no Pulumi.yaml there")
    try:
        # The bootstrap's config is its own (bootstrap/config.py), read when its program runs below.
        config = load_config(args.stack) if project_dir == ROOT else None
        if args.plan_dir:
            cost = stack_cost(args.plan_dir, on=args.on, usage=usage)
        else:
            from offline.plan import synthesize  # the offline plan, in this process; nothing is written
            cost = plan_cost(synthesize(args.stack, project_dir=project_dir).resources, on=args.on, usage=usage)
    except (ConfigError, prices.UnpricedRegionError) as error:
        print(f"stack {args.stack}: {error}", file=sys.stderr)
        return 2
    except PlanDirError as error:
        print(f"cost.py: error: --plan-dir {error}", file=sys.stderr)
        return 2
    print(breakdown(args.stack, cost, config))
    return 0


if __name__ == "__main__":
    from offline.plan import exit_now

    exit_now(main())
