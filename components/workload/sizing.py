"""Sizing arithmetic for training jobs and queues (pure, table-tested).

A job asks for N nodes x G GPUs on one pool. From the pool's instance facts this computes what
each pod requests besides GPUs, the Kueue quota a queue needs to admit it, the ResourceQuota
that caps a namespace, and the job's expected time between interruptions (for Young's
checkpoint interval in the trainer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.cluster.pool_scheduling import EFA_RESOURCE, GPU_RESOURCE
from components.config import Capacity, NodePoolConfig
from components.facts import node_sizing

# Assumed mean time between interruptions of one node (planning figures, not measurements):
# spot GPU capacity is reclaimed often; on-demand nodes fail on hardware a few times a year.
NODE_MTBF_HOURS = {Capacity.SPOT: 24, Capacity.ON_DEMAND: 24 * 60, Capacity.CAPACITY_BLOCK: 24 * 60,
                   Capacity.RESERVATION: 24 * 60}


@dataclass(frozen=True)
class PodShape:
    """What one pod of a job requests: CPU and memory from the node sizing facts."""

    gpus: int
    efa: int
    cpu: int
    memory_gib: int


def allocatable(pool: NodePoolConfig) -> tuple[float, float]:
    """(cpu, memory GiB) a pod can have on any node of `pool`."""
    return node_sizing.allocatable(pool.instance_types, efa=pool.efa)


def default_pod_shape(pool: NodePoolConfig, gpus: int) -> PodShape:
    """A pod using `gpus` of a node's GPUs gets the same share of its CPU and memory."""
    cpu, memory = node_sizing.pod_share(pool.instance_types, gpus=gpus, gpus_per_node=pool.gpus_per_node, efa=pool.efa)
    return PodShape(gpus=gpus, efa=pool.efa_interfaces if pool.efa else 0, cpu=cpu, memory_gib=memory)


def job_mtbf_seconds(pool: NodePoolConfig, nodes: int) -> int:
    """Mean time between interruptions of a job spanning `nodes` nodes: node MTBF / nodes."""
    return int(NODE_MTBF_HOURS[pool.capacity] * 3600 / nodes)


def flavor_quota(pool: NodePoolConfig, gpus: int) -> dict[str, int | str]:
    """Kueue nominal quota for `gpus` GPUs of `pool`, with the CPU, memory and EFA interfaces of
    those nodes (Kueue admits nothing that requests a resource it does not cover)."""
    nodes = math.ceil(gpus / pool.gpus_per_node)
    cpu, memory = allocatable(pool)
    return {
        "cpu": math.floor(cpu) * nodes,
        "memory": f"{math.floor(memory) * nodes}Gi",
        GPU_RESOURCE: gpus,
        EFA_RESOURCE: pool.efa_interfaces * nodes if pool.efa else 0,
    }


@dataclass(frozen=True)
class NamespaceQuota:
    gpus: int
    cpu: int
    memory_gib: int
    pods: int


# Room beyond the training pods, e.g. for a debugging pod next to a running job.
SPARE_CPU, SPARE_MEMORY_GIB, SPARE_PODS = 4, 16, 10


def namespace_quota(pools: list[NodePoolConfig]) -> NamespaceQuota:
    """ResourceQuota cap: everything the namespace's pools can ever hold, borrowed quota included.

    Kueue decides who gets what inside this cap; the cap only stops a namespace from ever
    exceeding the capacity its queue can reach.
    """
    cpu = sum(math.floor(allocatable(p)[0]) * p.max_size for p in pools)
    memory = sum(math.floor(allocatable(p)[1]) * p.max_size for p in pools)
    return NamespaceQuota(
        gpus=sum(p.max_size * p.gpus_per_node for p in pools),
        cpu=cpu + SPARE_CPU,
        memory_gib=memory + SPARE_MEMORY_GIB,
        pods=sum(p.max_size for p in pools) + SPARE_PODS,
    )
