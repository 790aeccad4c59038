"""The fabric environment of training pods: one function, keyed on instance facts (table)."""

import pytest

from components.facts.instance_types import INSTANCE_TYPES
from components.workload.fabric_env import fabric_env

EFA_COMMON = {"TRAIN_FABRIC": "efa", "NCCL_NET": "Libfabric", "NCCL_NET_PLUGIN": "ofi", "FI_PROVIDER": "efa",
              "FI_EFA_USE_HUGE_PAGE": "0", "NCCL_SOCKET_IFNAME": "^lo,docker"}
SOCKET = {"TRAIN_FABRIC": "socket", "NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "^lo,docker"}


def _efa(devices: int, rdma: bool) -> dict[str, str]:
    """The self-check's expectations: the type's EFA count (EC2) and GPUDirect RDMA (aws-ofi-nccl)."""
    return {**EFA_COMMON, "TRAIN_EFA_DEVICES": str(devices), "TRAIN_EFA_GPUDIRECT_RDMA": "1" if rdma else "0",
            **({"FI_EFA_USE_DEVICE_RDMA": "1"} if rdma else {})}


@pytest.mark.parametrize(("name", "efa", "expected"), [
    ("p5.48xlarge", True, _efa(32, rdma=True)),
    ("p5en.48xlarge", True, _efa(16, rdma=True)),
    ("p4d.24xlarge", True, _efa(4, rdma=True)),
    ("p6-b200.48xlarge", True, _efa(8, rdma=True)),
    ("g6e.12xlarge", True, _efa(1, rdma=False)),    # EFA without GPUDirect RDMA
    ("g6e.48xlarge", True, _efa(4, rdma=False)),
    ("g5.48xlarge", True, _efa(1, rdma=False)),
    ("p5.48xlarge", False, SOCKET),                 # an EFA-capable type in a socket pool
    ("g6.2xlarge", False, SOCKET),
])
def test_fabric_env(name, efa, expected):
    assert fabric_env(INSTANCE_TYPES[name], efa=efa) == expected


@pytest.mark.parametrize("name", sorted(n for n, t in INSTANCE_TYPES.items() if t.has_gpu))
def test_what_the_plugin_tunes_is_left_to_it(name):
    """aws-ofi-nccl sets these per platform when unset; setting them here would override it."""
    for efa in (False, INSTANCE_TYPES[name].has_efa):
        env = fabric_env(INSTANCE_TYPES[name], efa=efa)
        assert not {"NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_TUNER_PLUGIN", "NCCL_PROTO", "FI_EFA_FORK_SAFE"} & set(env)
