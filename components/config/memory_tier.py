"""A job's memory checkpoint tier (`memoryCheckpointSeconds`, trainer/launcher/memory_tier.py): its
interval, and its size against the pod's memory limit.

The tier lives in an emptyDir of medium Memory (tmpfs). Its files are memory the pod's limit counts:
"The maximum usage on memory medium EmptyDir would be the minimum value between the SizeLimit
specified here and the sum of memory limits of all containers in a pod" (Kubernetes API,
EmptyDirVolumeSource.sizeLimit; docs/concepts/storage/volumes#emptydir: "files you write count
against your container's memory limit"). Each node holds the whole state of the job (the launcher's
tier serves replicated DDP state, which every node holds), so one copy is `checkpointGiB`.
"""

from __future__ import annotations

import math

from components.config.keys import minimum_of
from components.config.reader import Section

MEMORY_TIER_COPIES = 2
"""Copies the tier's emptyDir holds at most: two at rest, and while the next is written the newer of
them and that one (the older goes first; trainer/launcher/memory_tier.py COPIES_WRITTEN;
tests/test_memory_tier_config.py keeps them equal)."""
MEMORY_TIER_HOST_BUFFERS = 1
"""The writer's staging buffer in the trainer's own memory (checkpoint.AsyncCheckpointer: the copy of
the state that the background thread writes from)."""
MEMORY_TIER_SHARE_OF_POD_MEMORY = 0.5
"""The platform's rule, not an upstream limit: the tier and /dev/shm together take at most half of the
pod's memory limit; the trainer's processes (the model and optimizer on the host, the durable
checkpointer's own staging buffer of one checkpoint, data loader workers) need the rest."""
MIN_SECONDS = minimum_of("training.jobs[].memoryCheckpointSeconds")
MOUNT_PATH = "/checkpoints-memory"
VOLUME = "checkpoint-memory"


def tier_gib(checkpoint_gib: int) -> int:
    """The emptyDir's sizeLimit: every copy the tier holds at once."""
    return MEMORY_TIER_COPIES * checkpoint_gib


def parse_memory_checkpoint_seconds(s: Section, durable: int | None) -> int | None:
    """`memoryCheckpointSeconds` (off when unset), shorter than `durable` (checkpointIntervalSeconds, which
    it needs); errors naming what it needs."""
    if not s.has("memoryCheckpointSeconds"):
        return None
    seconds = s.integer("memoryCheckpointSeconds", None)
    if not s.ok("memoryCheckpointSeconds"):
        return seconds
    if not s.has("checkpointGiB"):
        s.error(s.key("memoryCheckpointSeconds"), seconds,
                "needs the size of one checkpoint to size the tier's memory against the pod's limit",
                "set checkpointGiB to the size of one full checkpoint of the job, or unset memoryCheckpointSeconds")
    if durable is None:
        s.error(s.key("memoryCheckpointSeconds"), seconds,
                "needs a durable interval to be shorter than: without checkpointIntervalSeconds the trainer "
                "chooses it (Young's interval), which may come sooner than the memory copies",
                "set checkpointIntervalSeconds, longer than memoryCheckpointSeconds, or unset memoryCheckpointSeconds")
    elif seconds is not None and seconds >= durable:
        s.error(s.key("memoryCheckpointSeconds"), seconds,
                f"is not shorter than the durable interval (checkpointIntervalSeconds: {durable}): no memory "
                "copy would come sooner than a durable one",
                f"set it below {durable}, e.g. {max(MIN_SECONDS, durable // 10)}, or unset it")
    return seconds


def check_memory_tier_fits(s: Section, *, seconds: int | None, checkpoint_gib: int | None, shared_memory_gib: int,
                           pod_memory_gib: int) -> None:
    """The tier's copies and buffer, with /dev/shm, within MEMORY_TIER_SHARE_OF_POD_MEMORY of the pod's limit."""
    if seconds is None or checkpoint_gib is None or not s.ok("checkpointGiB", "memoryCheckpointSeconds"):
        return
    tier = tier_gib(checkpoint_gib)
    needed = tier + MEMORY_TIER_HOST_BUFFERS * checkpoint_gib + shared_memory_gib
    allowed = pod_memory_gib * MEMORY_TIER_SHARE_OF_POD_MEMORY
    if needed <= allowed:
        return
    room = math.floor((allowed - shared_memory_gib) / (MEMORY_TIER_COPIES + MEMORY_TIER_HOST_BUFFERS))
    fixes = [f"raise memoryGiB to at least {math.ceil(needed / MEMORY_TIER_SHARE_OF_POD_MEMORY)}"]
    if room >= 1:
        fixes.append(f"a checkpoint of at most {room} GiB fits")
    fixes.append("or unset memoryCheckpointSeconds (checkpoints go to the shared file system only)")
    s.error(s.key("memoryCheckpointSeconds"), seconds,
            f"cannot fit the memory tier in the pod: {MEMORY_TIER_COPIES} copies of checkpointGiB {checkpoint_gib} in "
            f"memory ({tier} GiB) + its {checkpoint_gib} GiB host buffer + sharedMemoryGiB {shared_memory_gib} = "
            f"{needed} GiB, more than half of the pod's memory limit ({pod_memory_gib} GiB: {allowed:g} GiB); "
            "tmpfs files count against that limit, and the trainer needs the rest",
            "; ".join(fixes))
