"""Pod shapes, queue quotas and job MTBF from pool facts (pure)."""

import pytest

from components.config import NodePoolConfig
from components.workload.sizing import (
    NamespaceQuota,
    PodShape,
    default_pod_shape,
    flavor_quota,
    job_mtbf_seconds,
    namespace_quota,
)


def pool(types, capacity="onDemand", efa=False, max_size=4):
    return NodePoolConfig(name="p", instance_types=types, capacity=capacity, gpu=True, efa=efa, min_size=0,
                          desired_size=0, max_size=max_size, availability_zones=("us-east-1a",), root_volume_gib=100)


@pytest.mark.parametrize(
    ("types", "efa", "gpus", "expected"),
    [
        # g6.12xlarge: 48 vCPU - 190m kube-reserved - 770m DaemonSets - 2000m margin = 45.04 vCPU;
        # 192 GiB - 5 % - 100 MiB eviction - 2829 MiB kube-reserved - 535 MiB DaemonSets - 3933 MiB
        # margin (2 %) = 175.2 GiB
        (("g6.12xlarge",), False, 4, PodShape(gpus=4, efa=0, cpu=45, memory_gib=175)),
        (("g6.12xlarge",), False, 1, PodShape(gpus=1, efa=0, cpu=11, memory_gib=43)),
        # g6.2xlarge: 8 vCPU - 90m - 770m - 2000m (the margin's floor) = 5.14; 32 GiB -> 27.9 GiB
        (("g6.2xlarge",), False, 1, PodShape(gpus=1, efa=0, cpu=5, memory_gib=27)),
        # a spot pool may launch either type: the smaller (g6e.12xlarge: 48 vCPU, 384 GiB) decides
        (("g6e.24xlarge", "g6e.12xlarge"), False, 4, PodShape(gpus=4, efa=0, cpu=45, memory_gib=353)),
        # p5.48xlarge: 192 vCPU - 550m - 780m (with the EFA plugin) - 3840m margin = 186.83;
        # 2048 GiB - 5 % - 100 MiB - 1355 MiB - 555 MiB - 5120 MiB of huge pages - 41944 MiB margin
        # = 1897.7 GiB; 32 EFA interfaces
        (("p5.48xlarge",), True, 8, PodShape(gpus=8, efa=32, cpu=186, memory_gib=1897)),
    ],
)
def test_default_pod_shape(types, efa, gpus, expected):
    assert default_pod_shape(pool(types, efa=efa), gpus) == expected


@pytest.mark.parametrize(
    ("types", "efa", "gpus", "expected"),
    [
        (("g6.12xlarge",), False, 8, {"cpu": 90, "memory": "350Gi", "nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 0}),
        (("g6.12xlarge",), False, 5, {"cpu": 90, "memory": "350Gi", "nvidia.com/gpu": 5, "vpc.amazonaws.com/efa": 0}),
        (("p5.48xlarge",), True, 16, {"cpu": 372, "memory": "3794Gi", "nvidia.com/gpu": 16, "vpc.amazonaws.com/efa": 64}),
        (("g6.2xlarge",), False, 0, {"cpu": 0, "memory": "0Gi", "nvidia.com/gpu": 0, "vpc.amazonaws.com/efa": 0}),
    ],
)
def test_flavor_quota_covers_the_nodes_the_gpus_need(types, efa, gpus, expected):
    assert flavor_quota(pool(types, efa=efa), gpus) == expected


@pytest.mark.parametrize(
    ("capacity", "nodes", "seconds"),
    [("spot", 1, 86400), ("spot", 4, 21600), ("onDemand", 1, 5184000), ("onDemand", 16, 324000)],
)
def test_job_mtbf_shrinks_with_the_gang(capacity, nodes, seconds):
    assert job_mtbf_seconds(pool(("g6.12xlarge",), capacity=capacity), nodes) == seconds


def test_namespace_quota_is_the_capacity_of_its_pools_plus_spare():
    pools = [pool(("g6.12xlarge",), max_size=4), pool(("p5.48xlarge",), efa=True, max_size=2)]
    assert namespace_quota(pools) == NamespaceQuota(gpus=32, cpu=45 * 4 + 186 * 2 + 4, memory_gib=175 * 4 + 1897 * 2 + 16, pods=16)
