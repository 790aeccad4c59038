"""The example trainer's memory checkpoint tier (launcher.memory_tier): every node's local rank 0
keeps the whole replicated state in the pod's memory at the short interval; after an in-place
restart the gang resumes from the newest copy every node holds and verified, newer than the durable one."""

from __future__ import annotations

import os

import torch
from launcher import memory_tier, progress
from launcher.checkpoint import CheckpointInfo
from launcher.collective import ProcessGroupCollective


def tier() -> memory_tier.MemoryTier | None:
    """The tier's settings from the environment (MemoryTierError, a ValueError, when unusable)."""
    return memory_tier.from_env(os.environ)


def agreed_copy(settings: memory_tier.MemoryTier | None, checkpoint_dir: str, local_rank: int,
                device: torch.device) -> CheckpointInfo | None:
    """Every rank: the memory copy the gang resumes from, or None (then the shared one): the newest
    step every node holds, its digest checked by the node's local rank 0 (memory_tier.choose)."""
    if settings is None:
        return None

    def skipped(path: str, error: Exception) -> None:  # from any rank: only that node knows
        progress.log("checkpoint_skipped", path=path, reason=str(error), tier="memory")

    return memory_tier.choose(settings, checkpoint_dir, ProcessGroupCollective(None, device), local_rank=local_rank,
                              on_skip=skipped)


def forget_newer(settings: memory_tier.MemoryTier | None, local_rank: int, step: int) -> None:
    """The node's writer: memory copies past the step the run resumed from belong to a line it left."""
    if settings is not None and local_rank == 0:
        memory_tier.forget_newer(settings, step)
