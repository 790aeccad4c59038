"""What a pod can have on a node, from instance facts alone (pure, plain values in and out).

The config model checks jobs against these numbers and the workload sizes pods with them, so
both sit below the config model: it takes instance type names, not pool objects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from components.facts.instance_types import INSTANCE_TYPES

# Left on each node for the kubelet, the OS, the per-node daemons (CNI, kube-proxy, Pod Identity
# agent, device plugins, monitoring and CSI agents) and the Mountpoint pod that the S3 CSI driver
# starts beside a pod that mounts the datasets.
NODE_RESERVED_CPU = 2.0
NODE_RESERVED_MEMORY_FRACTION = 0.10
NODE_RESERVED_MEMORY_GIB = 2


def allocatable(instance_types: Sequence[str]) -> tuple[float, float]:
    """(cpu, memory GiB) a pod can have on any node launched from `instance_types`: a pool may
    launch any of its types, so the smallest one decides."""
    types = [INSTANCE_TYPES[name] for name in instance_types]
    memory = min(t.memory_gib for t in types) * (1 - NODE_RESERVED_MEMORY_FRACTION) - NODE_RESERVED_MEMORY_GIB
    return min(t.vcpus for t in types) - NODE_RESERVED_CPU, memory


def pod_share(instance_types: Sequence[str], *, gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(cpu, memory GiB) of a pod using `gpus` of a node's GPUs: the same share of CPU and memory."""
    cpu, memory = allocatable(instance_types)
    share = gpus / gpus_per_node
    return max(1, math.floor(cpu * share)), max(1, math.floor(memory * share))
