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
