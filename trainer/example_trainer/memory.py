"""The example trainer's memory checkpoint tier (launcher.memory_tier): every node's local rank 0
keeps the whole replicated state in the pod's memory at the short interval; after an in-place
restart the gang resumes from it when every node verified the same copy, newer than the durable one."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from launcher import checkpoint, memory_tier, progress
from launcher.checkpoint import CheckpointInfo


def tier() -> memory_tier.MemoryTier | None:
    """The tier's settings from the environment (MemoryTierError, a ValueError, when unusable)."""
    return memory_tier.from_env(os.environ)


def agreed_copy(settings: memory_tier.MemoryTier | None, checkpoint_dir: str, local_rank: int,
                device: torch.device) -> CheckpointInfo | None:
    """Every rank: the memory copy the gang resumes from, or None (then the shared one). A node's
    local rank 0 checks its copy's digest; the step counts only when every rank found the same."""
    if settings is None:
        return None
    durable = checkpoint.latest_complete(checkpoint_dir)

    def skipped(path: str, error: Exception) -> None:  # from any rank: only that node knows
        progress.log("checkpoint_skipped", path=path, reason=str(error), tier="memory")

    mine = memory_tier.newest_verified(settings.root, durable.step if durable else -1, verify=local_rank == 0,
                                       on_skip=skipped)
    step = mine.step if mine is not None else -1
    bounds = torch.tensor([step, -step], dtype=torch.int64, device=device)
    dist.all_reduce(bounds, op=dist.ReduceOp.MAX)
    highest, lowest = int(bounds[0].item()), -int(bounds[1].item())
    return mine if mine is not None and highest == lowest == mine.step else None


def forget_newer(settings: memory_tier.MemoryTier | None, local_rank: int, step: int) -> None:
    """The node's writer: memory copies past the step the run resumed from belong to a line it left."""
    if settings is not None and local_rank == 0:
        memory_tier.forget_newer(settings, step)
