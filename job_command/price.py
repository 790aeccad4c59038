"""What a job costs: its nodes x the cost model's price of one node of its pool (components/facts/
cost_model.py `pool_cost`, the table of prices.py for the platform's region), the figure
`make cost` uses for the team's quota. A node is billed whole even where the job uses part of it;
a spot pool is priced at its on-demand ceiling (what `make cost` says of spot too)."""

from __future__ import annotations

from dataclasses import dataclass

from components.config.node_pools import CAPACITY_TYPES, NodePoolConfig
from components.config.training import JobConfig
from components.facts.cost_model import NodePool, pool_cost, rate
from components.facts.prices import UnpricedRegionError, region_prices


@dataclass(frozen=True)
class JobPrice:
    hourly_usd: float | None
    """The job's nodes per hour; None where the region's table has no price for the pool's types."""
    basis: str
    """How the node is billed (pool_cost's words: on-demand, spot ceiling, capacity block, ...)."""
    total_usd: float | None = None
    """`hourly_usd` over the stated run: steps / (steps per second); None when not stated."""
    hours: float | None = None


def node_hourly(pool: NodePoolConfig, region: str) -> tuple[float | None, str]:
    """(one node of `pool` per hour, how it is billed); None where the region's table has no price."""
    try:
        table = region_prices(region)
    except UnpricedRegionError:
        return None, f"no price table for {region} in components/facts/prices.py"
    cost = pool_cost(NodePool(pool.name, pool.instance_types, CAPACITY_TYPES[pool.capacity], pool.min_size,
                              pool.max_size, pool.root_volume_gib), table)
    return cost.node_hourly_usd, cost.basis


def job_price(job: JobConfig, pool: NodePoolConfig, region: str, *, steps: int | None = None,
              steps_per_second: float | None = None) -> JobPrice:
    node, basis = node_hourly(pool, region)
    hourly = None if node is None else job.nodes * node
    if hourly is None or not steps or not steps_per_second:
        return JobPrice(hourly, basis)
    hours = steps / steps_per_second / 3600
    return JobPrice(hourly, basis, hourly * hours, hours)


def price_lines(job: JobConfig, price: JobPrice, pool_gpus: int) -> list[str]:
    if price.hourly_usd is None:
        return [f"price: not priced ({price.basis})"]
    lines = [f"price: {rate(round(price.hourly_usd, 2))}/h for {job.nodes} node(s) ({price.basis})"]
    if job.gpus_per_node < pool_gpus:
        lines.append(f"       whole nodes: the job uses {job.gpus_per_node} of each node's {pool_gpus} GPUs; other jobs "
                     "may share the rest")
    if price.total_usd is not None and price.hours is not None:
        lines.append(f"       about {rate(round(price.total_usd, 2))} in total: {price.hours:.1f} h at the stated rate")
    else:
        lines.append("       total: state the run's length with --steps N --steps-per-second R (steps default to "
                     "the hyperparameters' `steps`)")
    return lines
