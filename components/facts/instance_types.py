"""Facts about the EC2 instance types node pools may use (from EC2 DescribeInstanceTypes).

The config model validates pools against these facts: unknown types, GPU pools of CPU types,
spot pools mixing GPU counts or GPU memory, EFA on types without EFA. A test checks every row
against the EC2 catalogue that moto ships, so a typo here cannot go unnoticed.
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

    @property
    def has_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def has_efa(self) -> bool:
        return self.efa_interfaces > 0


def _gpu(name: str, vcpus: int, memory_gib: int, gpus: int, model: str, gpu_memory_mib: int,
         efa_interfaces: int = 0, capacity_block: bool = False) -> InstanceType:
    return InstanceType(name, vcpus, memory_gib, gpus, model, gpu_memory_mib, efa_interfaces,
                        capacity_block=capacity_block)


INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in (
    # Training-class GPUs with EFA on every network card; capacity blocks available.
    _gpu("p4d.24xlarge", 96, 1152, 8, "A100", 40960, 4, capacity_block=True),
    _gpu("p4de.24xlarge", 96, 1152, 8, "A100", 81920, 4, capacity_block=True),
    _gpu("p5.48xlarge", 192, 2048, 8, "H100", 81920, 32, capacity_block=True),
    _gpu("p5e.48xlarge", 192, 2048, 8, "H200", 144384, 32, capacity_block=True),
    _gpu("p5en.48xlarge", 192, 2048, 8, "H200", 144384, 16, capacity_block=True),
    _gpu("p6-b200.48xlarge", 192, 2048, 8, "B200", 183359, 8, capacity_block=True),
    # Smaller GPUs for fine-tuning and experiments (spot-friendly).
    _gpu("g5.xlarge", 4, 16, 1, "A10G", 22888),
    _gpu("g5.2xlarge", 8, 32, 1, "A10G", 22888),
    _gpu("g5.12xlarge", 48, 192, 4, "A10G", 22888, 1),
    _gpu("g5.48xlarge", 192, 768, 8, "A10G", 22888, 1),
    _gpu("g6.xlarge", 4, 16, 1, "L4", 22888),
    _gpu("g6.2xlarge", 8, 32, 1, "L4", 22888),
    _gpu("g6.12xlarge", 48, 192, 4, "L4", 22888, 1),
    _gpu("g6.48xlarge", 192, 768, 8, "L4", 22888, 1),
    _gpu("g6e.xlarge", 4, 32, 1, "L40S", 45776),
    _gpu("g6e.2xlarge", 8, 64, 1, "L40S", 45776),
    _gpu("g6e.12xlarge", 48, 384, 4, "L40S", 45776, 1),
    _gpu("g6e.24xlarge", 96, 768, 4, "L40S", 45776, 2),
    _gpu("g6e.48xlarge", 192, 1536, 8, "L40S", 45776, 4),
    # CPU types for the system pool (CoreDNS, controllers, autoscaler).
    InstanceType("m6i.large", 2, 8),
    InstanceType("m6i.xlarge", 4, 16),
    InstanceType("m6i.2xlarge", 8, 32),
    InstanceType("m7i.xlarge", 4, 16),
    InstanceType("m7i.2xlarge", 8, 32),
    InstanceType("c6i.2xlarge", 8, 16),
)}
