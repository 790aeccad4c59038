"""Facts about the EC2 instance types node pools may use (from EC2 DescribeInstanceTypes).

The config model validates pools against these facts: unknown types, GPU pools of CPU types,
spot pools mixing GPU counts or GPU memory, EFA on types without EFA. Node sizing, the subnet IP
budget and the EFA interface layout are computed from them. A test checks every row against the
EC2 catalogue that moto ships, so a typo here cannot go unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_gib: int
    gpus: int = 0
    gpu_model: str | None = None
    gpu_memory_mib: int = 0  # per GPU
    efa_interfaces: int = 0  # 0: no EFA; otherwise the maximum, one per network card
    spot: bool = True
    capacity_block: bool = False
    # Network interfaces on the default network card and IPv4 addresses per interface: what the
    # VPC CNI can hand to pods (EC2 NetworkInfo; amazon-eks-ami nodeadm instance-info.jsonl).
    enis: int = 0
    ipv4_per_eni: int = 0
    instance_store_gb: int = 0  # local NVMe, all disks together (EC2 InstanceStorageInfo)
    # GPUDirect RDMA over EFA: the aws-ofi-nccl platform table marks these types `gdr_required`
    # (aws/aws-ofi-nccl@2daf7d30:src/platform-aws.cpp); g5.48xlarge is listed without it and the
    # g6/g6e types are not listed at all, so they are not claimed here.
    efa_gpudirect_rdma: bool = False

    @property
    def has_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def has_efa(self) -> bool:
        return self.efa_interfaces > 0

    @property
    def has_instance_store(self) -> bool:
        return self.instance_store_gb > 0


def _p(name: str, gpus: int, model: str, gpu_memory_mib: int, *, vcpus: int, memory_gib: int, efa: int,
       enis: int, store_gb: int) -> InstanceType:
    """Training-class GPUs: EFA on every network card, capacity blocks, GPUDirect RDMA."""
    return InstanceType(name, vcpus, memory_gib, gpus, model, gpu_memory_mib, efa, capacity_block=True,
                        enis=enis, ipv4_per_eni=50, instance_store_gb=store_gb, efa_gpudirect_rdma=True)


def _g(name: str, vcpus: int, memory_gib: int, gpus: int, model: str, gpu_memory_mib: int, *, efa: int = 0,
       enis: int, ips: int, store_gb: int) -> InstanceType:
    return InstanceType(name, vcpus, memory_gib, gpus, model, gpu_memory_mib, efa,
                        enis=enis, ipv4_per_eni=ips, instance_store_gb=store_gb)


def _cpu(name: str, vcpus: int, memory_gib: int, *, enis: int, ips: int) -> InstanceType:
    return InstanceType(name, vcpus, memory_gib, enis=enis, ipv4_per_eni=ips)


INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in (
    _p("p4d.24xlarge", 8, "A100", 40960, vcpus=96, memory_gib=1152, efa=4, enis=15, store_gb=8000),
    _p("p4de.24xlarge", 8, "A100", 81920, vcpus=96, memory_gib=1152, efa=4, enis=15, store_gb=8000),
    _p("p5.48xlarge", 8, "H100", 81920, vcpus=192, memory_gib=2048, efa=32, enis=2, store_gb=30400),
    _p("p5e.48xlarge", 8, "H200", 144384, vcpus=192, memory_gib=2048, efa=32, enis=2, store_gb=30400),
    _p("p5en.48xlarge", 8, "H200", 144384, vcpus=192, memory_gib=2048, efa=16, enis=4, store_gb=30400),
    _p("p6-b200.48xlarge", 8, "B200", 183359, vcpus=192, memory_gib=2048, efa=8, enis=4, store_gb=30400),
    # Smaller GPUs for fine-tuning and experiments (spot-friendly).
    _g("g5.xlarge", 4, 16, 1, "A10G", 22888, enis=4, ips=15, store_gb=250),
    _g("g5.2xlarge", 8, 32, 1, "A10G", 22888, enis=4, ips=15, store_gb=450),
    _g("g5.12xlarge", 48, 192, 4, "A10G", 22888, efa=1, enis=15, ips=50, store_gb=3800),
    _g("g5.48xlarge", 192, 768, 8, "A10G", 22888, efa=1, enis=7, ips=50, store_gb=7600),
    _g("g6.xlarge", 4, 16, 1, "L4", 22888, enis=4, ips=15, store_gb=250),
    _g("g6.2xlarge", 8, 32, 1, "L4", 22888, enis=4, ips=15, store_gb=450),
    _g("g6.12xlarge", 48, 192, 4, "L4", 22888, efa=1, enis=8, ips=30, store_gb=3760),
    _g("g6.48xlarge", 192, 768, 8, "L4", 22888, efa=1, enis=15, ips=50, store_gb=7520),
    _g("g6e.xlarge", 4, 32, 1, "L40S", 45776, enis=4, ips=15, store_gb=250),
    _g("g6e.2xlarge", 8, 64, 1, "L40S", 45776, enis=4, ips=15, store_gb=450),
    _g("g6e.12xlarge", 48, 384, 4, "L40S", 45776, efa=1, enis=10, ips=30, store_gb=3800),
    _g("g6e.24xlarge", 96, 768, 4, "L40S", 45776, efa=2, enis=10, ips=50, store_gb=3800),
    _g("g6e.48xlarge", 192, 1536, 8, "L40S", 45776, efa=4, enis=10, ips=50, store_gb=7600),
    # CPU types for the system pool (CoreDNS, controllers, autoscaler).
    _cpu("m6i.large", 2, 8, enis=3, ips=10),
    _cpu("m6i.xlarge", 4, 16, enis=4, ips=15),
    _cpu("m6i.2xlarge", 8, 32, enis=4, ips=15),
    _cpu("m7i.xlarge", 4, 16, enis=4, ips=15),
    _cpu("m7i.2xlarge", 8, 32, enis=4, ips=15),
    _cpu("c6i.2xlarge", 8, 16, enis=4, ips=15),
)}
