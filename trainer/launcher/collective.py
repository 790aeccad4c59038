"""The collectives of the checkpoint protocol over a torch.distributed process group.

`checkpoint.BackgroundCommits` needs two: `agree(ok)`, True iff every rank passed True (an
all-reduce MIN), and `all_gather(value)`, every rank's value in rank order (how rank 0 learns
exactly which files the writers wrote). They run on the checkpoint's background thread,
concurrently with the training loop's collectives, so they need a process group of their own:
a group's collectives must be issued in the same order on every rank. That group must have a
CPU backend (gloo).

Imported only by trainers (torch at module level); the launcher itself never needs it.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch
import torch.distributed as dist

from .checkpoint import SOLO, Collective


class ProcessGroupCollective:
    """`agree` and `all_gather` over `process_group` (None: the default group). Outside a
    distributed run (no process group initialised) they are those of a single process. `device`:
    where `agree`'s flag lives, the rank's GPU for a NCCL group (gloo's is the CPU)."""

    def __init__(self, process_group: dist.ProcessGroup | None, device: torch.device | None = None):
        self.process_group = process_group
        self.device = device

    def _alone(self) -> bool:
        return self.process_group is None and not dist.is_initialized()

    def agree(self, ok: bool) -> bool:
        if self._alone():
            return ok
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.process_group)
        return bool(flag.item())

    def all_gather(self, value: Any) -> list[Any]:
        if self._alone():
            return [value]
        gathered: list[Any] = [None] * dist.get_world_size(self.process_group)
        dist.all_gather_object(gathered, value, group=self.process_group)
        return gathered


def checkpoint_collective(world_size: int, timeout_s: float) -> Collective:
    """The collectives for a checkpointer: over a new gloo group of their own (every rank must
    call this, in the same order as its other `new_group` calls), or SOLO in a single process."""
    if world_size == 1:
        return SOLO
    group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=float(timeout_s)))
    if not isinstance(group, dist.ProcessGroup):  # new_group's marker for "not a member": every rank is
        raise RuntimeError("this rank is not a member of the checkpoint process group")
    return ProcessGroupCollective(group)
