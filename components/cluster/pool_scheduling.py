"""How node pools present themselves to the scheduler and to the Cluster Autoscaler (pure).

Pods find a pool by its labels and taints; the autoscaler can only scale a pool up from zero
nodes if the pool's Auto Scaling group carries `k8s.io/cluster-autoscaler/node-template/*`
tags describing those labels, taints and extended resources. EKS managed node groups do not
copy them there (kubernetes/autoscaler#5278), so they are computed here from the same config.
"""

from __future__ import annotations

from components.config import Capacity, NodePoolConfig, Taint, TaintEffect
from components.facts.instance_types import INSTANCE_TYPES

POOL_LABEL = "gpu-training/pool"
CAPACITY_LABEL = "gpu-training/capacity"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
EFA_PRESENT_LABEL = "vpc.amazonaws.com/efa.present"
# The Cluster Autoscaler's AWS provider knows a GPU node by this label: until the device plugin
# advertises the GPUs it then treats the new node as not ready yet, instead of as a node without
# GPUs that calls for yet another scale-up.
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_TAINT = Taint(key=GPU_RESOURCE, value="true", effect=TaintEffect.NO_SCHEDULE)
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"
# Priority expander: higher wins when several pools could host a pending pod. Reserved capacity
# (a capacity block, an On-Demand Capacity Reservation) is paid for whether used or not: first.
CAPACITY_PRIORITY = {Capacity.RESERVATION: 60, Capacity.CAPACITY_BLOCK: 60, Capacity.SPOT: 50, Capacity.ON_DEMAND: 10}
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def node_group_name(cluster_name: str, pool: NodePoolConfig) -> str:
    return f"{cluster_name}-{pool.name}"


def node_labels(pool: NodePoolConfig) -> dict[str, str]:
    labels = {POOL_LABEL: pool.name, CAPACITY_LABEL: str(pool.capacity)}
    if pool.gpu:
        labels[GPU_PRESENT_LABEL] = "true"
        models = {INSTANCE_TYPES[t].gpu_model or "" for t in pool.instance_types}
        labels[ACCELERATOR_LABEL] = f"nvidia-{models.pop().lower()}" if len(models) == 1 else "nvidia"
    if pool.efa:
        labels[EFA_PRESENT_LABEL] = "true"
    return {**pool.labels, **labels}


def node_taints(pool: NodePoolConfig) -> tuple[Taint, ...]:
    """GPU pools always carry the GPU taint, so only pods that ask for GPUs land there."""
    return ((GPU_TAINT,) if pool.gpu else ()) + tuple(t for t in pool.taints if t.key != GPU_TAINT.key)


def extended_resources(pool: NodePoolConfig) -> dict[str, str]:
    """Resources a node of the pool offers beyond CPU and memory (Kubernetes quantities)."""
    resources = {}
    if pool.gpu:
        resources[GPU_RESOURCE] = str(pool.gpus_per_node)
    if pool.efa:
        resources[EFA_RESOURCE] = str(pool.efa_interfaces)
    return resources


def node_template_tags(pool: NodePoolConfig) -> dict[str, str]:
    """ASG tags that let the Cluster Autoscaler build a template node for a pool at zero."""
    tags = {f"{NODE_TEMPLATE}/label/{key}": value for key, value in node_labels(pool).items()}
    tags[f"{NODE_TEMPLATE}/label/eks.amazonaws.com/capacityType"] = pool.eks_capacity_type
    for taint in node_taints(pool):
        tags[f"{NODE_TEMPLATE}/taint/{taint.key}"] = f"{taint.value}:{taint.effect}"
    for resource, quantity in extended_resources(pool).items():
        tags[f"{NODE_TEMPLATE}/resources/{resource}"] = quantity
    return tags


def expander_priorities(cluster_name: str, pools: tuple[NodePoolConfig, ...]) -> dict[int, list[str]]:
    """Priority-expander config: reserved capacity, then spot, then on-demand.

    EKS names a managed node group's Auto Scaling group `eks-<node group name>-<uuid>`; the
    UUID is matched exactly so pool `gpu` cannot also match pool `gpu-spot`.
    """
    priorities: dict[int, list[str]] = {}
    for pool in pools:
        pattern = f"^eks-{node_group_name(cluster_name, pool)}-{UUID}$"  # names are [a-z0-9-] only
        priorities.setdefault(CAPACITY_PRIORITY[pool.capacity], []).append(pattern)
    return dict(sorted(priorities.items(), reverse=True))
