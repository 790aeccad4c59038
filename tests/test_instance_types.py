"""Our instance facts must agree with EC2's own catalogue (as shipped in moto)."""

import gzip
import json
import re
from pathlib import Path

import moto
import pytest

from components.config.stack_file import REPO_ROOT
from components.facts.cuda import DEFAULT_IMAGE_CUDA, GPU_ARCHITECTURES, cuda_problem
from components.facts.eks_versions import SUPPORTED_KUBERNETES_VERSIONS
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


def test_every_gpu_model_has_its_architecture_and_minimum_cuda():
    models = {t.gpu_model for t in INSTANCE_TYPES.values() if t.has_gpu}
    assert models <= set(GPU_ARCHITECTURES), models - set(GPU_ARCHITECTURES)


def test_the_default_image_cuda_is_the_dockerfile_base():
    """trainerImageCuda defaults to DEFAULT_IMAGE_CUDA: it must say what trainer/Dockerfile builds on."""
    dockerfile = (REPO_ROOT / "trainer" / "Dockerfile").read_text()
    [base] = re.findall(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, flags=re.MULTILINE)
    [tag_cuda] = re.findall(r":[^:@]*-cuda(\d+\.\d+)-", base)
    assert tag_cuda == DEFAULT_IMAGE_CUDA, base


def test_the_ami_driver_branch_covers_every_offered_minor():
    """AMI_NVIDIA_DRIVER_MAJOR is the AL2023 NVIDIA AMI's default branch, which amazon-eks-ami
    builds for every minor but 1.28 (variables-1.28.json pins 570)."""
    assert all(tuple(map(int, minor.split("."))) >= (1, 29) for minor in SUPPORTED_KUBERNETES_VERSIONS)


@pytest.mark.parametrize(("cuda", "models", "driver", "expected"), [
    ((12, 6), ("B200",), 580, "is below CUDA 12.8"),
    ((12, 8), ("B200",), 580, None),
    ((12, 6), ("H100", "H200", "A100", "L40S", "L4", "A10G"), 580, None),
    ((11, 8), ("L4", "A10G"), 580, None),
    ((11, 0), ("A10G",), 580, "is below CUDA 11.1"),
    ((11, 7), ("H100",), 580, "is below CUDA 11.8"),
    ((13, 0), ("H100",), 570, "runs CUDA 12.x at most"),  # the 1.28 AMI's branch
    ((13, 4), ("B200",), 580, None),
    ((14, 0), ("B200",), 580, "runs CUDA 13.x at most"),
])
def test_cuda_problem(cuda, models, driver, expected):
    problem = cuda_problem(cuda, models, driver_major=driver)
    assert (problem is None) if expected is None else (problem is not None and expected in problem), problem
