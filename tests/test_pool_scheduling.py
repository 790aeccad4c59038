"""Labels, taints and autoscaler node-template tags computed from a pool (pure)."""

import re

import pytest

from components.cluster.pool_scheduling import expander_priorities, node_labels, node_taints, node_template_tags
from components.config import NodePoolConfig, Taint

NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


def pool(name="gpu", types=("g6.12xlarge",), capacity="onDemand", gpu=True, efa=False, **extra):
    return NodePoolConfig(name=name, instance_types=types, capacity=capacity, gpu=gpu, efa=efa, min_size=0,
                          desired_size=0, max_size=2, availability_zones=("us-east-1a",), root_volume_gib=100, **extra)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (pool(gpu=False, types=("m7i.xlarge",), name="system"), {
            f"{NODE_TEMPLATE}/label/gpu-training/pool": "system",
            f"{NODE_TEMPLATE}/label/gpu-training/capacity": "onDemand",
            f"{NODE_TEMPLATE}/label/eks.amazonaws.com/capacityType": "ON_DEMAND",
        }),
        (pool(types=("g6.12xlarge", "g5.12xlarge"), capacity="spot", name="gpu-spot"), {
            f"{NODE_TEMPLATE}/label/gpu-training/pool": "gpu-spot",
            f"{NODE_TEMPLATE}/label/gpu-training/capacity": "spot",
            f"{NODE_TEMPLATE}/label/eks.amazonaws.com/capacityType": "SPOT",
            f"{NODE_TEMPLATE}/label/nvidia.com/gpu.present": "true",
            f"{NODE_TEMPLATE}/label/k8s.amazonaws.com/accelerator": "nvidia",  # L4 and A10G
            f"{NODE_TEMPLATE}/taint/nvidia.com/gpu": "true:NoSchedule",
            f"{NODE_TEMPLATE}/resources/nvidia.com/gpu": "4",
        }),
        (pool(types=("p5.48xlarge",), efa=True, name="p5", labels={"team": "vision"},
              taints=(Taint("dedicated", "vision", "NoExecute"),)), {
            f"{NODE_TEMPLATE}/label/gpu-training/pool": "p5",
            f"{NODE_TEMPLATE}/label/gpu-training/capacity": "onDemand",
            f"{NODE_TEMPLATE}/label/eks.amazonaws.com/capacityType": "ON_DEMAND",
            f"{NODE_TEMPLATE}/label/nvidia.com/gpu.present": "true",
            f"{NODE_TEMPLATE}/label/vpc.amazonaws.com/efa.present": "true",
            f"{NODE_TEMPLATE}/label/k8s.amazonaws.com/accelerator": "nvidia-h100",
            f"{NODE_TEMPLATE}/label/team": "vision",
            f"{NODE_TEMPLATE}/taint/nvidia.com/gpu": "true:NoSchedule",
            f"{NODE_TEMPLATE}/taint/dedicated": "vision:NoExecute",
            f"{NODE_TEMPLATE}/resources/nvidia.com/gpu": "8",
            f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa": "32",
        }),
    ],
    ids=["cpu", "gpu-spot", "efa-with-user-label-and-taint"],
)
def test_node_template_tags(config, expected):
    assert node_template_tags(config) == expected


def test_gpu_pools_always_carry_the_gpu_taint_once():
    user_gpu_taint = Taint("nvidia.com/gpu", "true", "NoSchedule")
    assert node_taints(pool(taints=(user_gpu_taint,))) == (user_gpu_taint,)
    assert node_taints(pool(gpu=False, types=("m7i.xlarge",))) == ()


def test_platform_labels_win_over_user_labels():
    assert node_labels(pool(labels={"gpu-training/pool": "spoofed"}))["gpu-training/pool"] == "gpu"


def test_expander_prefers_spot_and_matches_only_its_own_pool():
    pools = (pool(name="gpu", capacity="onDemand"), pool(name="gpu-spot", capacity="spot", types=("g6.12xlarge", "g5.12xlarge")))
    priorities = expander_priorities("c", pools)
    assert list(priorities) == [50, 10]
    uuid = "9ac6f3a2-1d2e-4b4f-8e11-0123456789ab"
    spot_asg, on_demand_asg = f"eks-c-gpu-spot-{uuid}", f"eks-c-gpu-{uuid}"
    assert [p for p in priorities[50] if re.match(p, spot_asg)] and not [p for p in priorities[50] if re.match(p, on_demand_asg)]
    assert [p for p in priorities[10] if re.match(p, on_demand_asg)] and not [p for p in priorities[10] if re.match(p, spot_asg)]
