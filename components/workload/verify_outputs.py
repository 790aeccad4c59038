"""What `scripts/verify` reads from a stack's outputs (pure): the promises it checks a live
cluster against. Platform and team stacks export the same shape, so one verifier serves both.

    nodePools: {<pool>: {gpusPerNode, maxNodes, capacity, instanceTypes, efaPerNode, taints}}
    training:  {namespace, localQueue, secret (null when the stack declares none),
                jobs: {<job>: {pool, nodes, gpusPerNode}}}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from components.cluster.pool_scheduling import node_taints
from components.config import FabricConfig, NodePoolConfig
from components.config.training import JobConfig
from components.data import training_data


def pool_outputs(pools: Iterable[NodePoolConfig]) -> dict[str, dict[str, Any]]:
    return {p.name: {
        "gpusPerNode": p.gpus_per_node,
        "maxNodes": p.max_size,
        "capacity": str(p.capacity),
        "instanceTypes": list(p.instance_types),
        # What the EFA device plugin must advertise on every node of the pool (0: not an EFA pool).
        "efaPerNode": p.efa_interfaces,
        # A verification job on the pool must tolerate exactly what the training jobs tolerate.
        "taints": [{"key": t.key, "value": t.value, "effect": str(t.effect)} for t in node_taints(p)],
    } for p in pools}


def fabric_outputs(fabric: FabricConfig) -> dict[str, Any]:
    """The ports the fabric security groups open (a verification job on a socket pool uses them)."""
    return {"ncclPortRange": {"first": fabric.nccl_port_range.first, "last": fabric.nccl_port_range.last},
            "rendezvousPorts": list(fabric.rendezvous_ports)}


def training_outputs(*, namespace: str, local_queue: str, jobs: Iterable[JobConfig],
                     has_secrets: bool) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "localQueue": local_queue,
        "secret": training_data.SECRET_NAME if has_secrets else None,
        "jobs": {j.name: {"pool": j.pool, "nodes": j.nodes, "gpusPerNode": j.gpus_per_node} for j in jobs},
    }
