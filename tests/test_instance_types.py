"""Our instance facts must agree with EC2's own catalogue (as shipped in moto)."""

import gzip
import json
from pathlib import Path

import moto
import pytest

from components.facts.instance_types import INSTANCE_TYPES

CATALOGUE = json.loads(gzip.decompress((Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz").read_bytes()))


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_facts_match_ec2(name):
    ours, ec2 = INSTANCE_TYPES[name], CATALOGUE[name]
    gpus = (ec2.get("GpuInfo") or {}).get("Gpus") or [{}]
    network = ec2["NetworkInfo"]
    assert ours.vcpus == ec2["VCpuInfo"]["DefaultVCpus"]
    assert ours.memory_gib == ec2["MemoryInfo"]["SizeInMiB"] // 1024
    assert ours.gpus == (gpus[0].get("Count") or 0)
    assert ours.gpu_memory_mib == ((gpus[0].get("MemoryInfo") or {}).get("SizeInMiB") or 0)
    assert ours.efa_interfaces == ((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
    assert ours.spot == ("spot" in ec2["SupportedUsageClasses"])
    assert ours.capacity_block == ("capacity-block" in ec2["SupportedUsageClasses"])


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_network_and_storage_facts_match_ec2(name):
    """ENIs on the default network card, IPv4 per ENI (they size max pods and the subnet budget)
    and the instance store (it decides RAID0 and scratch)."""
    ours, ec2 = INSTANCE_TYPES[name], CATALOGUE[name]
    network = ec2["NetworkInfo"]
    cards = {card["NetworkCardIndex"]: card for card in network["NetworkCards"]}
    assert ours.enis == cards[network.get("DefaultNetworkCardIndex", 0)]["MaximumNetworkInterfaces"]
    assert ours.ipv4_per_eni == network["Ipv4AddressesPerInterface"]
    assert ours.instance_store_gb == ((ec2.get("InstanceStorageInfo") or {}).get("TotalSizeInGB") or 0)
    # One EFA device per network card: the launch template layout relies on it.
    assert not ours.has_efa or ours.efa_interfaces == network["MaximumNetworkCards"]


def test_gpudirect_rdma_only_where_the_plugin_requires_it():
    """aws-ofi-nccl's platform table (src/platform-aws.cpp, gdr_required): p4d/p4de, p5/p5e,
    p5en/p6-b200 need GPUDirect RDMA; g5.48xlarge is listed without; g6/g6e are not listed."""
    assert {n for n, t in INSTANCE_TYPES.items() if t.efa_gpudirect_rdma} == {
        "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"}
