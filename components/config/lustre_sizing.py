"""Whether the FSx for Lustre file system is large and fast enough for what it serves
(`storage.lustre.storageCapacityGiB` x `throughputPerTiB`).

A persistent SSD file system's throughput is its capacity times its throughput per TiB (FSx for
Lustre User Guide, "Performance"), shared by every reader and writer. It must give:

- reads: every GPU the training namespace can run at once (its queue's gpuQuota, at most the
  pool's GPUs) x `readMBpsPerGpu`, the rate one GPU's data loader reads;
- writes: each job's checkpoint (`checkpointGiB`, written by rank 0 alone or by every rank) within
  its grace period, as training.py checks it per job (file_systems.grace_needed_seconds).

What is configured and falls short of the reads is refused here, naming the smallest capacity at
the configured throughput per TiB and the lowest throughput per TiB at the configured capacity
that meet both (file_systems.lustre_minimum_capacity / lustre_minimum_throughput). A job whose
grace period the write does not fit is refused by training.py, whose message names the same
minimum. `make cost` states the resulting read rate per GPU and each job's checkpoint write time.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.config.node_pools import NodePoolConfig
from components.config.reader import Section
from components.config.storage import ALL_RANKS, LustreConfig, StorageConfig
from components.config.training import JobConfig, TrainingConfig
from components.facts.file_systems import (
    CheckpointDemand,
    LustreDemand,
    lustre_minimum_capacity,
    lustre_minimum_throughput,
    lustre_throughput_mb_s,
)

CAPACITY_KEY = "storage.lustre.storageCapacityGiB"


def gpus_served(training: TrainingConfig, pools: Sequence[NodePoolConfig]) -> int:
    """The GPUs the training namespace's jobs can hold at once: its queue's quota on each pool
    (owned or borrowed), at most the pool's own GPUs. Every job of a platform stack with
    `storage.lustre` mounts the file system (team stacks keep EFS)."""
    by_name = {pool.name: pool for pool in pools}
    return sum(min(quota, pool.max_size * pool.gpus_per_node)
               for name, quota in training.gpu_quota.items() if (pool := by_name.get(name)) is not None)


def checkpoint_demand(job: JobConfig) -> CheckpointDemand | None:
    """How `job` writes its checkpoint, or None when it states no checkpointGiB."""
    if job.checkpoint_gib is None:
        return None
    files = job.total_gpus if job.checkpoint_writers == ALL_RANKS else 1
    return CheckpointDemand(job.name, job.checkpoint_gib, files, job.termination_grace_period_seconds)


def lustre_demand(storage: StorageConfig, training: TrainingConfig, pools: Sequence[NodePoolConfig]) -> LustreDemand:
    """What the stack's file system must give. A measured write rate (storage.checkpointWriteMBps)
    replaces the modelled one in training.py's grace check, so the checkpoints then size nothing."""
    lustre = storage.lustre
    per_gpu = lustre.read_mb_s_per_gpu if lustre is not None else 0
    checkpoints = () if storage.checkpoint_write_mb_s is not None else tuple(
        demand for job in training.jobs if (demand := checkpoint_demand(job)) is not None)
    return LustreDemand(gpus_served(training, pools) * per_gpu, checkpoints)


def minimum_fix(demand: LustreDemand, lustre: LustreConfig) -> str:
    """The configured values that would meet `demand`, keeping one of the two as it is."""
    capacity = lustre_minimum_capacity(demand, lustre.throughput_per_tib)
    throughput = lustre_minimum_throughput(demand, lustre.storage_capacity_gib, lustre.deployment_type)
    options = [f"storageCapacityGiB: {capacity} (at {lustre.throughput_per_tib} MB/s per TiB)"] if capacity else []
    if throughput:
        options.append(f"throughputPerTiB: {throughput} (at {lustre.storage_capacity_gib} GiB)")
    if not options:
        return ("no capacity at this throughput per TiB and no throughput per TiB at this capacity meets it: raise "
                "both, lower readMBpsPerGpu, or write checkpoints from every rank (checkpointWriters: allRanks)")
    return "set " + ", or ".join(options)


def check_lustre_size(root: Section, storage: StorageConfig, training: TrainingConfig,
                      pools: Sequence[NodePoolConfig]) -> None:
    """Refuse a file system whose throughput is below what its GPUs read (errors to `root`'s log)."""
    lustre = storage.lustre
    if lustre is None or not lustre.storage_capacity_gib or not lustre.throughput_per_tib or not lustre.read_mb_s_per_gpu:
        return  # no file system, or a part of it failed already
    demand = lustre_demand(storage, training, pools)
    given = lustre_throughput_mb_s(lustre.storage_capacity_gib, lustre.throughput_per_tib)
    if given >= demand.read_mb_s:
        return
    gpus = gpus_served(training, pools)
    root.error(
        root.key(CAPACITY_KEY), lustre.storage_capacity_gib,
        f"{lustre.storage_capacity_gib} GiB x {lustre.throughput_per_tib} MB/s per TiB gives {given:.0f} MB/s, less "
        f"than the {gpus} GPUs its jobs can run at once (training.gpuQuota) x readMBpsPerGpu {lustre.read_mb_s_per_gpu} "
        f"= {demand.read_mb_s:.0f} MB/s: the GPUs would wait for their data",
        minimum_fix(demand, lustre))
