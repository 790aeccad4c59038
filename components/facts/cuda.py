"""Which CUDA an image may bring to each GPU, and to the driver the EKS NVIDIA AMI ships.

Two limits, each checked at config time (components/config/training.py) for every job against
every instance type of its pool:

- From below, the GPU: an image whose CUDA predates the GPU's architecture has no native code for
  it (PyTorch's CUDA 12.6 wheels stop at sm_90: a B200 gets "sm_100 is not compatible with the
  current PyTorch installation").
- From above, the driver: an image of a CUDA major newer than the host driver supports fails at
  the first CUDA call ("CUDA driver version is insufficient for CUDA runtime version").

An image pinned by digest cannot be inspected offline, so the config states its CUDA
(`trainerImageCuda`, `training.jobs[].imageCuda`); its default is the project's own image
(trainer/Dockerfile's BASE_IMAGE, kept equal to DEFAULT_IMAGE_CUDA by tests/test_instance_types.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CUDA_VERSION = re.compile(r"(\d+)\.(\d+)")

# The CUDA of trainer/Dockerfile's default BASE_IMAGE (pytorch/pytorch:2.13.0-cuda12.6-...).
DEFAULT_IMAGE_CUDA = "12.6"


@dataclass(frozen=True)
class GpuArchitecture:
    model: str
    compute_capability: str
    """NVIDIA's "CUDA GPUs" table, developer.nvidia.com/cuda-gpus (sm_<major><minor>)."""
    minimum_cuda: tuple[int, int]
    """The first CUDA toolkit that generates code for it (CUDA Toolkit release notes,
    docs.nvidia.com/cuda/cuda-toolkit-release-notes, "New Features" of that release)."""


# Keyed by instance_types.InstanceType.gpu_model; a test checks every GPU model there has a row.
GPU_ARCHITECTURES: dict[str, GpuArchitecture] = {a.model: a for a in (
    # p4d/p4de. Ampere GA100: CUDA 11.0 release notes ("support for the NVIDIA Ampere architecture").
    GpuArchitecture("A100", "8.0", (11, 0)),
    # g5. Ampere GA102: sm_86 first in CUDA 11.1 (release notes: "support for GA10x cards").
    GpuArchitecture("A10G", "8.6", (11, 1)),
    # g6 (L4), g6e (L40S). Ada sm_89 and Hopper sm_90: CUDA 11.8 release notes ("support for the
    # NVIDIA Hopper and Ada Lovelace GPU families").
    GpuArchitecture("L4", "8.9", (11, 8)),
    GpuArchitecture("L40S", "8.9", (11, 8)),
    # p5 (H100), p5e/p5en (H200).
    GpuArchitecture("H100", "9.0", (11, 8)),
    GpuArchitecture("H200", "9.0", (11, 8)),
    # p6-b200. Blackwell sm_100: CUDA 12.8 release notes ("support for ... Blackwell ...
    # SM_100"); NVIDIA's Blackwell Compatibility Guide (docs.nvidia.com/cuda/blackwell-
    # compatibility-guide): native Blackwell code needs CUDA 12.8 or later.
    GpuArchitecture("B200", "10.0", (12, 8)),
)}

# NVIDIA's minor version compatibility table (docs.nvidia.com/deploy/cuda-compatibility/
# minor-version-compatibility.html, Table 1): an image of a CUDA major runs on any driver of at
# least this major, newer drivers by backward compatibility: 13.x >= 580, 12.x >= 525, 11.x >= 450.
MINIMUM_DRIVER_BY_CUDA_MAJOR: dict[int, int] = {11: 450, 12: 525, 13: 580}

# The NVIDIA driver branch of the EKS AL2023 NVIDIA AMI (AL2023_x86_64_NVIDIA) for every minor
# offered (1.34-1.36): awslabs/amazon-eks-ami@81fec2e templates/al2023/variables-default.json
# `"nvidia_driver_major_version": "580"`, default since 3cb8b058 ("default to 580 driver for
# 1.34+", 2025-10-21); only variables-1.28.json keeps 570. The AMI release notes
# (github.com/awslabs/amazon-eks-ami/releases) list the full 580.x version per release.
AMI_NVIDIA_DRIVER_MAJOR = 580


def parse_cuda(text: str) -> tuple[int, int] | None:
    """"12.6" -> (12, 6); None for anything else."""
    match = CUDA_VERSION.fullmatch(text)
    return (int(match[1]), int(match[2])) if match else None


def cuda_text(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def minimum_cuda(gpu_models: tuple[str, ...]) -> tuple[int, int]:
    """The CUDA every one of these GPUs needs (a spot pool may mix models)."""
    return max(GPU_ARCHITECTURES[model].minimum_cuda for model in gpu_models)


def cuda_problem(cuda: tuple[int, int], gpu_models: tuple[str, ...], *,
                 driver_major: int = AMI_NVIDIA_DRIVER_MAJOR) -> str | None:
    """Why an image of this CUDA cannot run on these GPUs under the AMI's driver; None if it can."""
    needed = minimum_cuda(gpu_models)
    if cuda < needed:
        newest = max(gpu_models, key=lambda model: GPU_ARCHITECTURES[model].minimum_cuda)
        architecture = GPU_ARCHITECTURES[newest]
        return (f"is below CUDA {cuda_text(needed)}, the first release with code for the pool's {newest} "
                f"(compute capability {architecture.compute_capability}): the image's kernels would not run on it")
    minimum_driver = MINIMUM_DRIVER_BY_CUDA_MAJOR.get(cuda[0])
    if minimum_driver is None or minimum_driver > driver_major:
        newest_major = max(major for major, driver in MINIMUM_DRIVER_BY_CUDA_MAJOR.items() if driver <= driver_major)
        return (f"needs a newer NVIDIA driver than the EKS NVIDIA AMI's {driver_major} branch, which runs "
                f"CUDA {newest_major}.x at most (NVIDIA's minor version compatibility table)")
    return None
