"""A memory checkpoint tier: checkpoints in the pod's memory at a short interval, on top of the
durable ones on the shared file system.

Where: TRAIN_MEMORY_CHECKPOINT_DIR, an emptyDir of medium Memory (tmpfs) that the platform mounts
when a job sets `memoryCheckpointSeconds` (components/workload/training_job.py), every
TRAIN_MEMORY_CHECKPOINT_INTERVAL_S. An emptyDir lives as long as its pod (Kubernetes docs,
"Volumes: emptyDir"), so its copies survive an in-place restart round (launcher.inplace: the
workers restart, the pod stays) and vanish with a recreated pod, when the shared copy is used.

What: each node's local rank 0 writes the whole state of the loop (replicated DDP state: every node
holds all of it) as a checkpoint of one writer in the launcher's format and protocol
(checkpoint.AsyncCheckpointer: only the copy to host memory stops the loop; the file is written,
hashed, renamed and its COMPLETE marker, naming TRAIN_RUN_ID, written on a thread of its own). Two
copies stay at rest (`KEEP`): the newest and the one before it, which goes before the next is written.

When: rank 0's clock decides, agreed with the stop and durable flags at the step boundary
(worker.Worker.boundary), so every node saves the same steps. A durable save that is due wins; a
memory save is due once the memory interval passed since the last save of either tier. Memory
saves never move the durable schedule, so a step saved only in memory is saved durably within one
durable interval of the last durable save, which came before it. After an in-place restart that
resumed from memory, the durable schedule goes on from the newest durable checkpoint's commit time
(`anchor`), not from the restart: the memory copy the run resumed from is never the only copy for
longer than one durable interval either.

Resume (`choose`): the newest step that every rank's node holds a memory copy of (gathered), newer
than the newest complete durable one, once the nodes' local ranks 0 verified it against its digest
(agreed): each node's copies are its own, and a rank that loaded another step than its peers would
train a different model. A node that failed while writing a copy holds only the one before it,
which the nodes that finished theirs still hold too (`KEEP`): the gang resumes from that one. A copy
that fails its digest is rejected (its marker renamed, as on the shared file system) and the next
common step is tried; with none left the run resumes from the shared copy, verified as today. When
the run resumes from the shared copy, memory copies newer than it (a line the run leaves) are
removed (`forget_newer`).

Only the plain integration and the launcher's own format use it (integrations.plain): the other
frameworks write their own files, and a sharded state (FSDP, DCP) is not whole on one node.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import checkpoint
from .checkpoint import CheckpointCorruptError, CheckpointDigestError, CheckpointInfo
from .schedule import CheckpointSchedule

DIR_VAR = "TRAIN_MEMORY_CHECKPOINT_DIR"
INTERVAL_VAR = "TRAIN_MEMORY_CHECKPOINT_INTERVAL_S"
KEEP = 2
"""Copies at rest: the newest and the one before it. A node that fails while writing the next copy
loses that one only; the one before is on every node, so the gang still resumes from memory."""
COPIES_WRITTEN = KEEP
"""The most the tier holds: the older copy goes before the next is written (checkpoint.AsyncCheckpointer
`keep_while_writing`), so the one being written takes its place. What the platform sizes its
emptyDir for (components/config/memory_tier.py MEMORY_TIER_COPIES)."""


class MemoryTierError(ValueError):
    """A memory tier setting is unusable (a ValueError before the first step: a config error, exit 2)."""


@dataclass(frozen=True)
class MemoryTier:
    root: str
    interval_s: float


def from_env(environ: Mapping[str, str]) -> MemoryTier | None:
    """The tier's settings, or None when both variables are unset; MemoryTierError naming the variable."""
    root, raw = environ.get(DIR_VAR, "").strip(), environ.get(INTERVAL_VAR, "").strip()
    if not root and not raw:
        return None
    if not root or not raw:
        missing = DIR_VAR if not root else INTERVAL_VAR
        raise MemoryTierError(f"{missing} is unset while {INTERVAL_VAR if not root else DIR_VAR} is set: "
                              "set both (the platform sets them from memoryCheckpointSeconds) or neither")
    try:
        interval = float(raw)
    except ValueError:
        interval = math.nan
    if not math.isfinite(interval) or interval <= 0:
        raise MemoryTierError(f"{INTERVAL_VAR} must be a positive number of seconds, got {raw!r}")
    return MemoryTier(root, interval)


class TierSchedule:
    """Rank 0's memory decision beside the durable schedule, which it never moves."""

    def __init__(self, durable: CheckpointSchedule, interval_s: float):
        self.durable = durable
        self.interval_s = interval_s
        self.last_step = durable.last_step
        self.last_time = durable.clock()

    def due(self, step: int) -> bool:
        if step <= max(self.last_step, self.durable.last_step) or self.durable.due(step):
            return False
        return self.durable.clock() - max(self.last_time, self.durable.last_time) >= self.interval_s

    def record(self, step: int) -> None:
        self.last_step = step
        self.last_time = self.durable.clock()


def anchor(durable: CheckpointSchedule, newest_durable: CheckpointInfo | None,
           now_unix: Callable[[], float] = time.time) -> None:
    """After resuming from a memory copy: the next durable save is due one durable interval after the
    newest durable checkpoint, at once when there is none: in step mode counted from its step, in time
    mode from when it was committed (its marker's created_unix). The restarted workers' schedule
    starts at the resumed step, which only the memory copy holds."""
    durable.last_step = newest_durable.step if newest_durable is not None else 0
    created = newest_durable.marker.get("created_unix") if newest_durable is not None else None
    interval = durable.interval_s
    age = max(0.0, now_unix() - float(created)) if isinstance(created, (int, float)) else interval
    durable.last_time = durable.clock() - min(age, interval)


def _verify(info: CheckpointInfo) -> None:
    for name, meta in sorted(info.marker.get("files", {}).items()):
        checkpoint.verify_file(os.path.join(info.path, name), meta)


def _verified(info: CheckpointInfo, on_skip: Callable[[str, Exception], None] | None) -> bool:
    """Whether the copy's files match their digests; one that does not is rejected. A read error
    (a file gone since the listing, EIO) only skips it: raised, it would leave the peers waiting in
    the next collective until the process group's timeout."""
    try:
        _verify(info)
    except (CheckpointCorruptError, OSError) as e:
        if isinstance(e, CheckpointDigestError):
            checkpoint.reject(info.path)
        if on_skip is not None:
            on_skip(info.path, e)
        return False
    return True


def newest_common(held: list[list[int]]) -> list[int]:
    """The steps every rank holds a copy of, newest first."""
    return sorted(set.intersection(*map(set, held)), reverse=True) if held else []


def choose(tier: MemoryTier, checkpoint_dir: str, collective: checkpoint.Collective, *, local_rank: int,
           on_skip: Callable[[str, Exception], None] | None = None) -> CheckpointInfo | None:
    """The memory copy every rank resumes from (every rank calls it, same answer), or None: then the
    shared one, chosen as without the tier. Only the node's local rank 0 hashes its copies; its
    peers only look, and agree on what it found."""
    durable = checkpoint.latest_complete(checkpoint_dir)
    newer_than = durable.step if durable is not None else -1
    mine = [info for info in checkpoint.list_checkpoints(tier.root) if info.complete and info.step > newer_than]
    for step in newest_common(collective.all_gather([info.step for info in mine])):
        info = next(info for info in mine if info.step == step)
        if collective.agree(local_rank != 0 or _verified(info, on_skip)):
            return info
    return None


def forget_newer(tier: MemoryTier, step: int) -> None:
    """Remove this run's memory copies of steps above `step`: the run resumed from an older one."""
    for info in checkpoint.list_checkpoints(tier.root):
        if info.step > step and not info.foreign:
            checkpoint._remove_checkpoint(info.path)


class MemoryCopies:
    """The node's memory copies; every call is a no-op on a rank that does not write them."""

    def __init__(self, tier: MemoryTier, *, writes: bool):
        self.tier = tier
        self._checkpointer = checkpoint.AsyncCheckpointer(tier.root, keep=KEEP, keep_while_writing=KEEP - 1) \
            if writes else None

    def prepare(self, state: Any) -> None:
        if self._checkpointer is not None:
            self._checkpointer.prepare(state)

    def save(self, step: int, state: Any) -> float:
        """Snapshot `state` for a memory copy of `step`; the seconds the loop was stopped."""
        if self._checkpointer is None:
            return 0.0
        self._checkpointer.poll()  # raises if the previous memory save failed
        return self._checkpointer.save(step, state, meta={"tier": "memory"})

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
