# Over 600 lines: the training section: the quota and each job field's parser, each with its key, value and fix.
"""The `training` section: the queue's GPU quota per pool and the jobs the stack runs.

    gpu-training:training:
      gpuQuota: {gpu-spot: 4}          # GPUs this namespace's queue owns; idle ones are lent
      jobs:
        - name: example-ddp
          pool: gpu-spot
          nodes: 2
          gpusPerNode: 1

Every job is checked against its pool and the quota before anything is created: a gang that
cannot fit one node, the pool, or the queue's quota would wait forever instead of failing.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from components.config.keys import text_default_of
from components.config.memory_tier import check_memory_tier_fits, parse_memory_checkpoint_seconds
from components.config.node_pools import DNS_LABEL, SHUTDOWN_GRACE_CRITICAL_PODS_S, NodePoolConfig
from components.config.reader import Section
from components.config.secrets import SECRET_NAME, env_var_name
from components.config.stack_file import REPO_ROOT
from components.config.storage import ALL_RANKS, LUSTRE, StorageConfig
from components.config.strict_yaml import YamlError, path_for_message, read_yaml_file
from components.config.vocabularies import Capacity
from components.facts.cuda import DEFAULT_IMAGE_CUDA, cuda_problem, minimum_cuda, parse_cuda
from components.facts.file_systems import (
    FLUSHES_PER_STOP,
    STOP_MARGIN_S,
    CheckpointDemand,
    LustreDemand,
    flush_seconds,
    grace_needed_seconds,
    lustre_minimum_capacity,
)
from components.facts.instance_types import INSTANCE_TYPES
from components.facts.node_sizing import SHM_MAX_SHARE_OF_POD_MEMORY, allocatable, pod_share, shared_memory_gib

IMAGE_BY_DIGEST = re.compile(r"[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+@sha256:[0-9a-f]{64}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Env vars the workload sets itself (components/workload/training_job.py, fabric_env.py; a test
# keeps this in step). A job's `env` may override them; a secret may not: a pod holds each name once.
# PET_: torchrun reads each PET_<FLAG> as its --<flag> (torch/distributed/argparse_util.py `env`):
# the platform sets PET_NNODES, PET_NPROC_PER_NODE and PET_MAX_RESTARTS.
PLATFORM_ENV_PREFIXES = ("TRAIN_", "NCCL_", "TORCH_", "FI_", "PET_")
# Of those, what a job's `env` may not override either: the launcher's contract and torchrun's
# settings (a job tunes NCCL_*, TORCH_* and FI_* itself).
CONTRACT_ENV_PREFIXES = ("TRAIN_", "PET_")
PLATFORM_ENV_NAMES = frozenset({"HOME", "SCRATCH_DIR"})
# The hyperparameters become a ConfigMap, whose data Kubernetes caps at 1 MiB.
MAX_HYPERPARAMETERS_BYTES = 1024 * 1024
# Linux refuses execve with E2BIG when one argument or environment string, its NUL included, is
# longer than MAX_ARG_STRLEN = PAGE_SIZE * 32 (include/uapi/linux/binfmts.h): 131072 bytes on the
# 4 KiB pages of x86_64 and arm64 EKS nodes, so 131071 bytes of UTF-8. An env var is the one string
# "NAME=value". A longer one is accepted by Kubernetes, and the container never starts.
MAX_ARG_STRLEN = 4096 * 32
# EC2 interrupts a spot instance two minutes after its interruption notice, whatever the pods'
# grace (EC2 User Guide, spot-instance-termination-notices: "a warning that is issued two minutes
# before Amazon EC2 stops or terminates your Spot Instance"). On managed node groups EKS cordons
# and drains the node when the notice (or an earlier rebalance recommendation) reaches it (EKS
# User Guide, managed-node-groups, "Managed node group capacity types": Spot), so the pod's
# SIGTERM comes some seconds after the notice: 20 s for the event's delivery, the cordon and the
# eviction (a planning figure). A longer grace is cut off by the instance's termination.
SPOT_NOTICE_S = 120
SPOT_DRAIN_MARGIN_S = 20
SPOT_MAX_GRACE_S = SPOT_NOTICE_S - SPOT_DRAIN_MARGIN_S
DEFAULT_GRACE_S = 120
# Pod host names are <job>-node-<i>-<j>; keep them well inside a 63-character DNS label.
MAX_JOB_NAME = 40
# No arguments: the pod runs the image's own CMD (the reference image's is `-m example_trainer.train`),
# so a team's image with `CMD ["-m", "my_project.train"]` runs its trainer without restating it.
DEFAULT_ARGS: tuple[str, ...] = ()
DEFAULT_HYPERPARAMETERS = text_default_of("training.jobs[].hyperparameters")
# The stack files' directory (Pulumi.yaml stackConfigDir): never a job's hyperparameters.
STACKS_DIR = "stacks"
# Where a job's grace check sends a job whose store writes too slowly, when no minimum is known.
MORE_THROUGHPUT_KEYS = "storage.lustre.throughputPerTiB / storageCapacityGiB"


@dataclass(frozen=True)
class JobConfig:
    name: str
    pool: str
    nodes: int
    gpus_per_node: int
    image: str
    args: tuple[str, ...]
    hyperparameters_file: str
    hyperparameters: str = field(repr=False)
    secrets: tuple[str, ...]
    env: dict[str, str]
    cpu: int | None
    memory_gib: int | None
    shared_memory_gib: int
    max_restarts: int
    max_disruption_restarts: int
    """Restarts for disruptions (spot reclaim, drain, eviction), which do not spend max_restarts;
    the launcher fails the job once the gang's restarts exceed both budgets together."""
    termination_grace_period_seconds: int
    heartbeat_timeout_seconds: int
    checkpoint_interval_seconds: int | None
    checkpoint_gib: int | None
    """Expected size of one checkpoint of the whole job (all ranks); checks the grace period."""
    checkpoint_writers: str
    """storage.CHECKPOINT_WRITERS: rank 0 writes it all (the example trainer), or every rank its own file."""
    ttl_seconds_after_finished: int | None
    """Off by default: Kubernetes would delete the finished JobSet, and the next
    `pulumi up --refresh` would create it again and re-run the training. Set it only for jobs you
    remove from the stack file once they have finished."""
    image_cuda: str = DEFAULT_IMAGE_CUDA
    """The CUDA major.minor of `image` (`imageCuda`), checked against the pool's GPUs and driver."""
    memory_checkpoint_seconds: int | None = None
    """The memory checkpoint tier's interval (config/memory_tier.py); None: off."""

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def hyperparameters_sha256(self) -> str:
        return hashlib.sha256(self.hyperparameters.encode()).hexdigest()


@dataclass(frozen=True)
class TrainingConfig:
    gpu_quota: dict[str, int]
    jobs: tuple[JobConfig, ...]
    trainer_image: str | None = None
    """The stack's `trainerImage`: jobs default to it."""
    borrowed_pools: frozenset[str] = frozenset()
    """Pools (`gpuQuotaBorrowed`) whose gpuQuota the queue borrows from the cohort instead of owning:
    nominalQuota 0, borrowingLimit the quota (components/workload/queues.py)."""

    @property
    def owned_gpu_quota(self) -> dict[str, int]:
        """Pool -> the GPUs the queue owns (Kueue's nominalQuota): what must fit the pool with the
        other queues' owned quota."""
        return {pool: gpus for pool, gpus in self.gpu_quota.items() if pool not in self.borrowed_pools}

    @property
    def cleanup_image(self) -> str:
        """What the checkpoint cleanup CronJob runs: the trainer image, else the first job's."""
        return self.trainer_image or next((job.image for job in self.jobs), "")


@dataclass(frozen=True)
class PoolOvercommit:
    pool: str
    capacity: int
    """The pool's GPUs: size.max x GPUs per node."""
    owners: tuple[tuple[str, int], ...]
    """(queue, owned GPUs) of every queue that owns some of the pool."""

    @property
    def owned(self) -> int:
        return sum(gpus for _, gpus in self.owners)


def overcommitted_pools(pools: Collection[NodePoolConfig],
                        owned_quotas: Collection[tuple[str, Mapping[str, int]]]) -> list[PoolOvercommit]:
    """The GPU pools whose queues (name, pool -> owned GPUs) together own more GPUs than the pool
    has. Kueue admits a workload within its queue's nominalQuota whatever the others own, so
    owned quota beyond the pool admits gangs whose nodes can never come up (their
    ProvisioningRequests fail, and Kueue deactivates them after its retries); borrowed quota is
    used only while the owners leave it idle, and is not counted."""
    result = []
    for pool in pools:
        owners = tuple((queue, quota[pool.name]) for queue, quota in owned_quotas if quota.get(pool.name))
        capacity = pool.max_size * pool.gpus_per_node
        if pool.gpu and sum(gpus for _, gpus in owners) > capacity:
            result.append(PoolOvercommit(pool.name, capacity, owners))
    return result


def image_fix(environment: str, *, team: bool) -> str:
    """Where a stack's digest-pinned trainer image comes from. Only a platform stack has an ECR
    repository (its output trainerRepositoryUrl, where scripts/build-image STACK pushes): a team
    stack has none, so `scripts/build-image <team stack>` cannot find one."""
    if not team:
        return "run scripts/build-image <stack> and set the printed trainerImage"
    return (f"set an image pinned by digest: the {environment} platform's trainerImage (stacks/Pulumi.{environment}.yaml), "
            f"or build one with `scripts/build-image --repository <trainerRepositoryUrl of stack {environment}> "
            "<this stack>`, which prints the trainerImage to set (a team stack has no image repository of its own)")


def parse_training(section: Section, *, pools: tuple[NodePoolConfig, ...], secret_names: tuple[str, ...],
                   trainer_image: str | None, invalid_pools: Collection[str] | None = (),
                   trainer_image_cuda: str | None = DEFAULT_IMAGE_CUDA,
                   storage: StorageConfig | None = None, team: bool = False,
                   environment: str = "dev",
                   platform_quota: tuple[Mapping[str, int], frozenset[str], str] | None = None) -> TrainingConfig:
    """`pools` passed validation; references to `invalid_pools` (reported already) are not judged,
    nor any pool reference when `invalid_pools` is None (the pools could not be read at all).
    `trainer_image` is the stack's default image ("" for none), None when it failed validation;
    `trainer_image_cuda` its CUDA (`trainerImageCuda`), None when that failed.
    `storage` (with `team`: a team stack, whose jobs checkpoint to EFS) lets the grace period of
    a job that states its checkpointGiB be checked against the time its final checkpoint takes;
    None when it failed validation (not judged then). In a prod stack every job must state it.
    `platform_quota` (a team stack judged against its platform): (quota, borrowed pools, where it is
    set) of the team's row of the platform's `teams`, which the platform validated; the team's own
    section sets none (config/teams.py)."""
    by_name = {p.name: p for p in pools}
    unjudged = None if invalid_pools is None else frozenset(invalid_pools)
    quota_section = section.section("gpuQuota")
    quota = _parse_quota(section, quota_section, by_name, unjudged)
    borrowed = _parse_borrowed(section, quota, unjudged)
    quota_key = "training.gpuQuota"
    if platform_quota is not None:
        quota, borrowed, quota_key = dict(platform_quota[0]), platform_quota[1], platform_quota[2]

    jobs = []
    for index, raw in enumerate(section.items("jobs")):
        job_section = Section(section.errors, f"{section.key('jobs')}[{index}]", raw)
        job = _parse_job(job_section, by_name, quota, secret_names, trainer_image, unjudged, quota_ok=quota_section.ok,
                         image_advice=image_fix(environment, team=team), trainer_image_cuda=trainer_image_cuda,
                         quota_key=quota_key)
        if environment == "prod" and not job_section.has("checkpointGiB"):
            # Without it the grace period cannot be checked, and a prod job cut off mid-flush
            # loses everything since its last complete checkpoint.
            job_section.missing("checkpointGiB",
                                "a prod stack checks each job's terminationGracePeriodSeconds against the time "
                                "its final checkpoint takes to write",
                                "set checkpointGiB to the size of one full checkpoint of all ranks together, in GiB "
                              "(fp32 weights and AdamW's two moments: about 12 bytes per parameter)")
        if storage is not None and job_section.ok("nodes", "gpusPerNode", "checkpointGiB", "checkpointWriters",
                                                  "terminationGracePeriodSeconds"):
            pool = next((p for p in pools if p.name == job.pool), None)
            _check_grace_covers_the_flush(job_section, job, storage, team,
                                          spot=pool is not None and pool.capacity == Capacity.SPOT)
        jobs.append(job)
    names = [j.name for j in jobs if j.name]  # a rejected name reads "": no name to repeat
    for name in sorted({n for n in names if names.count(n) > 1}):
        section.error(section.key("jobs"), name, "names two jobs the same", "give every job a unique name")
    section.finish()
    return TrainingConfig(gpu_quota=quota, jobs=tuple(jobs), trainer_image=trainer_image, borrowed_pools=borrowed)


def _parse_quota(section: Section, quota_section: Section, by_name: dict[str, NodePoolConfig],
                 unjudged: frozenset[str] | None) -> dict[str, int]:
    quota: dict[str, int] = {}
    pools = by_name.values()
    for pool_name in list(quota_section.data):
        key = quota_section.key(pool_name)
        gpus = quota_section.integer(pool_name)
        pool = by_name.get(pool_name)
        if unjudged is None or pool_name in unjudged or not quota_section.ok(pool_name):
            continue
        if pool is None or not pool.gpu:
            section.error(key, pool_name, "is not a GPU pool of this stack",
                          gpu_pools_fix([p.name for p in pools if p.gpu], unjudged))
        elif gpus > pool.max_size * pool.gpus_per_node:
            section.error(key, gpus, f"exceeds the pool's capacity of {pool.max_size * pool.gpus_per_node} GPUs "
                          f"({pool.max_size} nodes x {pool.gpus_per_node})", "lower the quota or raise the pool's size.max")
        quota[pool_name] = gpus
    return quota


def gpu_pools_fix(gpu_pools: list[str], refused: Collection[str] | None) -> str:
    """The pools to name instead; a pool refused for its own errors is named as such, never hidden
    behind "(no GPU pools)"."""
    fix = f"use one of {', '.join(gpu_pools)}" if gpu_pools else "add a GPU pool to nodePools"
    if refused:
        fix += f" (nodePools {', '.join(sorted(refused))}: refused above, fix it first)"
    return fix


def _parse_borrowed(section: Section, quota: dict[str, int], unjudged: frozenset[str] | None) -> frozenset[str]:
    """`gpuQuotaBorrowed`: pools of gpuQuota whose quota the queue borrows rather than owns."""
    key = section.key("gpuQuotaBorrowed")
    names = section.string_list("gpuQuotaBorrowed")
    for name in names:
        if name not in quota and unjudged is not None and name not in unjudged:
            section.error(key, name, "is not a pool of training.gpuQuota", "list only pools that gpuQuota gives GPUs")
    if len(set(names)) != len(names):
        section.error(key, names, "lists a pool twice", "list each once")
    return frozenset(names)


def check_borrowed_has_a_lender(section: Section, borrowed: frozenset[str],
                                 lenders: Collection[tuple[str, Mapping[str, int]]]) -> None:
    """A borrowed pool's quota is nominalQuota 0 with a borrowingLimit (queues.py): Kueue admits its
    jobs only on quota other queues of the cohort own and leave unused (kueue v0.19.2,
    site/content/en/docs/concepts/cluster_queue.md: "borrowingLimit is the maximum amount of quota
    that this ClusterQueue is allowed to borrow from the unused nominal quota of other ClusterQueues
    in the same cohort"; the platform makes no Cohort object with quota of its own). With no queue
    owning any of the pool there is nothing to borrow, and its jobs wait forever."""
    for pool in sorted(borrowed):
        if any(quota.get(pool) for _, quota in lenders):
            continue
        owners = [f"{name} owns none of it" for name, _ in lenders]
        others = "; ".join(owners) or "this stack's queue is the only one of the environment's cohort"
        section.error(section.key("gpuQuotaBorrowed"), pool,
                      f"borrows pool {pool}'s GPUs, but no other queue of the cohort owns any to lend ({others}): "
                      "a borrowing queue owns nothing (nominalQuota 0) and runs only on GPUs another queue owns and "
                      "leaves idle, so its jobs would never be admitted",
                      f"own the quota instead: remove {pool} from training.gpuQuotaBorrowed (gpuQuota.{pool} must "
                      f"then fit the pool), or borrow it only once another stack of the environment owns GPUs of {pool}")


def _parse_job(s: Section, pools: dict[str, NodePoolConfig], quota: dict[str, int],
               secret_names: tuple[str, ...], trainer_image: str | None, unjudged: frozenset[str] | None, *,
               quota_ok: Callable[..., bool], image_advice: str, trainer_image_cuda: str | None, quota_key: str) -> JobConfig:
    name = s.string("name", check=lambda v: None if DNS_LABEL.fullmatch(v) and len(v) <= MAX_JOB_NAME else
                    "is not a valid job name",
                    fix=f"use lowercase letters, digits and '-', at most {MAX_JOB_NAME} characters")
    pool_name = s.string("pool")
    nodes = s.integer("nodes")
    gpus = s.integer("gpusPerNode")
    pool = pools.get(pool_name)
    if unjudged is None or pool_name in unjudged or not s.ok("pool"):
        pool = None  # reported already; nothing here can be judged against it
    elif pool is None or not pool.gpu:
        s.error(s.key("pool"), pool_name, "is not a GPU pool of this stack",
                gpu_pools_fix([n for n, p in pools.items() if p.gpu], unjudged))
        pool = None
    elif s.ok("nodes", "gpusPerNode"):
        _check_fit(s, pool, nodes, gpus, quota if quota_ok(pool.name) else None, quota_key)
        _check_gang_in_one_zone(s, pool, nodes)

    image, image_cuda = _parse_image(s, pool, trainer_image, trainer_image_cuda, image_advice)

    hyperparameters_file = s.string("hyperparameters")
    hyperparameters = _read_hyperparameters(s, hyperparameters_file)

    secrets = tuple(s.string_list("secrets"))
    for secret in secrets:
        if secret not in secret_names and not SECRET_NAME.fullmatch(secret):
            s.error(s.key("secrets"), secret, "is not a secret name (lowercase letters, digits and '-', starting with a letter)",
                    "name a secret of the stack's secrets")
        elif secret not in secret_names:
            s.error(s.key("secrets"), secret, "is not declared in the stack's secrets",
                    f"declare it: pulumi config set --path --secret 'secrets.{secret}' <value>")
    if len(set(secrets)) != len(secrets):
        s.error(s.key("secrets"), list(secrets), "lists a secret twice (a pod holds each env var once)", "list each once")
    env = s.string_map("env")
    for env_name, env_value in env.items():
        if not ENV_NAME.fullmatch(env_name) or env_name.startswith(CONTRACT_ENV_PREFIXES):
            s.error(f"{s.key('env')}.{env_name}", env_name,
                    "is not a valid env var name, or overrides the platform's TRAIN_* contract or torchrun's PET_* "
                    "settings (the launcher's)", "use UPPER_CASE names outside TRAIN_* and PET_*")
        else:
            _check_exec_string(s, f"{s.key('env')}.{env_name}", env_value, f"{env_name}=", "the environment string")
    args = tuple(s.string_list("args", list(DEFAULT_ARGS)))
    for index, arg in enumerate(args):
        _check_exec_string(s, f"{s.key('args')}[{index}]", arg, "", "an argument")
    for secret in secrets:
        if env_var_name(secret) in env or platform_sets(env_var_name(secret)):
            s.error(s.key("secrets"), secret, f"arrives as env var {env_var_name(secret)}, which the pod already "
                    "sets (a pod holds each name once)", f"rename the secret, or remove {env_var_name(secret)} from env")

    cpu = s.integer("cpu", None) if s.has("cpu") else None
    memory = s.integer("memoryGiB", None) if s.has("memoryGiB") else None
    shared_memory = _shared_memory(s, pool, gpus, memory)
    grace = _termination_grace(s, pool)
    heartbeat = s.integer("heartbeatTimeoutSeconds")
    interval = s.integer("checkpointIntervalSeconds", None) if s.has("checkpointIntervalSeconds") else None
    job = JobConfig(
        name=name, pool=pool_name, nodes=nodes, gpus_per_node=gpus, image=image,
        args=args,
        hyperparameters_file=hyperparameters_file, hyperparameters=hyperparameters,
        secrets=secrets, env=env, cpu=cpu, memory_gib=memory, shared_memory_gib=shared_memory,
        max_restarts=s.integer("maxRestarts"),
        max_disruption_restarts=s.integer("maxDisruptionRestarts"),
        termination_grace_period_seconds=grace,
        heartbeat_timeout_seconds=heartbeat,
        checkpoint_interval_seconds=interval,
        checkpoint_gib=s.integer("checkpointGiB") if s.has("checkpointGiB") else None,
        checkpoint_writers=s.string("checkpointWriters"),
        ttl_seconds_after_finished=(s.integer("ttlSecondsAfterFinished")
                                    if s.has("ttlSecondsAfterFinished") else None),
        image_cuda=image_cuda,
        memory_checkpoint_seconds=parse_memory_checkpoint_seconds(s, interval),
    )
    if pool is not None and s.ok("gpusPerNode", "cpu", "memoryGiB", "sharedMemoryGiB"):
        _check_pod_fits_node(s, pool, job)
    s.finish()
    return job


def _termination_grace(s: Section, pool: NodePoolConfig | None) -> int:
    """`terminationGracePeriodSeconds`: on a spot pool within what the interruption notice leaves."""
    spot = pool is not None and pool.capacity == Capacity.SPOT
    grace = s.integer("terminationGracePeriodSeconds", SPOT_MAX_GRACE_S if spot else DEFAULT_GRACE_S)
    if pool is not None and not spot and grace > pool.pod_shutdown_grace_seconds and s.ok("terminationGracePeriodSeconds"):
        # A spot node's own limit is the interruption notice, below any shutdown grace (checked next).
        s.error(s.key("terminationGracePeriodSeconds"), grace,
                f"exceeds what a node shutdown (a stop, a host-initiated shutdown, an auto-repair replacement) leaves "
                f"a training pod of pool {pool.name}: its nodes' kubelet gives pods "
                f"{pool.shutdown_grace_period_seconds} - {SHUTDOWN_GRACE_CRITICAL_PODS_S} = {pool.pod_shutdown_grace_seconds} s",
                f"set nodePools[{pool.name}].shutdownGracePeriodSeconds to at least {grace + SHUTDOWN_GRACE_CRITICAL_PODS_S} "
                "in the platform stack, or lower this grace")
    if pool is not None and spot and grace > SPOT_MAX_GRACE_S and s.ok("terminationGracePeriodSeconds"):
        s.error(s.key("terminationGracePeriodSeconds"), grace,
                f"exceeds what a spot node leaves a stopping pod: EC2 terminates it {SPOT_NOTICE_S} s after the "
                f"interruption notice, and the drain takes ~{SPOT_DRAIN_MARGIN_S} s of that, so a pod of pool "
                f"{pool.name} is killed after at most {SPOT_MAX_GRACE_S} s",
                f"set at most {SPOT_MAX_GRACE_S} (the default on spot), make the final checkpoint fit it (checkpointWriters: "
                f"{ALL_RANKS}, a smaller checkpointGiB), or run the job on on-demand or reserved capacity")
    return grace


def _shared_memory(s: Section, pool: NodePoolConfig | None, gpus: int, memory_gib: int | None) -> int:
    """`sharedMemoryGiB`, by default sized from the node's training processes and their loader
    workers (facts/node_sizing.shared_memory_gib), within the pod's memory."""
    workers = s.integer("loaderWorkersPerGpu")
    if pool is None or not s.ok("gpusPerNode", "memoryGiB", "loaderWorkersPerGpu"):
        return s.integer("sharedMemoryGiB", 8)  # nothing to size it by; the error is reported
    processes = min(gpus, pool.gpus_per_node)
    pod_memory = memory_gib or pod_share(pool.instance_types, gpus=processes, gpus_per_node=pool.gpus_per_node,
                                         efa=pool.efa)[1]
    return s.integer("sharedMemoryGiB", shared_memory_gib(gpus=processes, loader_workers_per_gpu=workers,
                                                          pod_memory_gib=pod_memory))


def _check_exec_string(s: Section, key: str, value: str, prefix: str, what: str) -> None:
    """One string of the container's execve (an argument, or NAME=value): no NUL, within MAX_ARG_STRLEN."""
    if "\0" in value:
        s.error(key, value, f"holds a NUL character, which ends a C string: {what} would be cut short there, or the "
                "container refused", "remove it")
        return
    size = len(f"{prefix}{value}".encode("utf-8", "surrogatepass")) + 1
    if size > MAX_ARG_STRLEN:
        s.error(key, value, f"makes {what} {size - 1} bytes long (UTF-8); Linux refuses one longer than "
                f"{MAX_ARG_STRLEN - 1} bytes (MAX_ARG_STRLEN), so the container would never start (execve: E2BIG)",
                "shorten it; pass large data in the hyperparameters file or in S3")


def _check_grace_covers_the_flush(s: Section, job: JobConfig, storage: StorageConfig, team: bool, *,
                                  spot: bool) -> None:
    if job.checkpoint_gib is None:
        return
    store = storage.checkpoint_store(nodes=job.nodes, ranks=job.total_gpus, writers=job.checkpoint_writers,
                                     checkpoint_gib=job.checkpoint_gib, lustre=not team)
    needed = grace_needed_seconds(job.checkpoint_gib, store.write_mb_s)
    if job.termination_grace_period_seconds >= needed:
        return
    flush = flush_seconds(job.checkpoint_gib, store.write_mb_s)
    why = (f"a {job.checkpoint_gib} GiB checkpoint on {store.name} at {store.write_mb_s:.0f} MB/s ({store.basis}) takes "
           f"{flush:.0f} s to write, and a stop may first finish a background save: {needed} s are needed "
           f"({FLUSHES_PER_STOP} x {flush:.0f} s + {STOP_MARGIN_S} s)")
    if spot and needed > SPOT_MAX_GRACE_S:
        s.error(s.key("checkpointGiB"), job.checkpoint_gib,
                f"cannot be saved when a spot node is reclaimed: {why}, but a spot pod is killed after at most "
                f"{SPOT_MAX_GRACE_S} s ({SPOT_NOTICE_S} s notice - {SPOT_DRAIN_MARGIN_S} s for the drain)",
                f"write it per rank (checkpointWriters: {ALL_RANKS}), give the storage more throughput, shrink the "
                "checkpoint, or run the job on on-demand or reserved capacity")
        return
    s.error(s.key("terminationGracePeriodSeconds"), job.termination_grace_period_seconds,
            f"is too short to stop cleanly: {why}",
            f"set terminationGracePeriodSeconds to at least {needed} (at most "
            f"{SPOT_MAX_GRACE_S if spot else 3600}), give the job's storage more throughput "
            f"({_lustre_minimum(job, storage) if store.name == LUSTRE else MORE_THROUGHPUT_KEYS}), or, if every rank "
            f"writes its own file, say so (checkpointWriters: {ALL_RANKS})")


def _lustre_minimum(job: JobConfig, storage: StorageConfig) -> str:
    """The smallest storage.lustre.storageCapacityGiB whose write fits `job`'s grace period."""
    lustre = storage.lustre
    if lustre is None or job.checkpoint_gib is None:
        return MORE_THROUGHPUT_KEYS
    files = job.total_gpus if job.checkpoint_writers == ALL_RANKS else 1
    demand = LustreDemand(0, (CheckpointDemand(job.name, job.checkpoint_gib, files, job.termination_grace_period_seconds),))
    capacity = lustre_minimum_capacity(demand, lustre.throughput_per_tib)
    if capacity is None:
        return (f"at {lustre.throughput_per_tib} MB/s per TiB no capacity writes {files} file(s) fast enough: raise "
                "storage.lustre.throughputPerTiB")
    return (f"storage.lustre.storageCapacityGiB: {capacity} at {lustre.throughput_per_tib} MB/s per TiB, or a higher "
            "throughputPerTiB")


def platform_sets(env_name: str) -> bool:
    """Whether the workload may set this env var itself."""
    return env_name in PLATFORM_ENV_NAMES or env_name.startswith(PLATFORM_ENV_PREFIXES)


def _check_fit(s: Section, pool: NodePoolConfig, nodes: int, gpus: int, quota: dict[str, int] | None,
               quota_key: str = "training.gpuQuota") -> None:
    """`quota` is None when the quota failed validation (not judged then)."""
    if gpus > pool.gpus_per_node:
        s.error(s.key("gpusPerNode"), gpus, f"exceeds the {pool.gpus_per_node} GPUs of one {pool.instance_types[0]} node",
                f"use at most {pool.gpus_per_node} GPUs per node and more nodes")
    if pool.efa and gpus != pool.gpus_per_node:
        s.error(s.key("gpusPerNode"), gpus, "an EFA pool is used by whole nodes (the EFA interfaces are per node)",
                f"set gpusPerNode: {pool.gpus_per_node}")
    if nodes > pool.max_size:
        s.error(s.key("nodes"), nodes, f"exceeds pool {pool.name}'s size.max of {pool.max_size} nodes",
                "use fewer nodes or raise the pool's size.max")
    gang = nodes * gpus
    if quota is not None and gang > quota.get(pool.name, 0):
        s.error(s.key("nodes"), f"{nodes} x {gpus} GPUs",
                f"the gang needs {gang} GPUs but the queue's quota on {pool.name} is {quota.get(pool.name, 0)}: "
                "it would never be admitted", f"raise {quota_key}.{pool.name} to at least {gang} or shrink the job")


def _parse_image(s: Section, pool: NodePoolConfig | None, trainer_image: str | None, trainer_image_cuda: str | None,
                 image_advice: str) -> tuple[str, str]:
    """The job's image and its CUDA; the CUDA checked against `pool` (None: not judged)."""
    image = s.string("image", trainer_image or "")
    if not IMAGE_BY_DIGEST.fullmatch(image) and s.ok("image") and (trainer_image is not None or s.has("image")):
        s.error(s.key("image"), image or None, "must be an image pinned by digest (repo@sha256:<64 hex>)",
                f"{image_advice}; or give the job an `image` of its own")
    image_cuda = s.string("imageCuda", trainer_image_cuda or DEFAULT_IMAGE_CUDA, check=cuda_format_problem,
                          fix=CUDA_FORMAT_FIX)
    if pool is not None and s.ok("imageCuda") and (trainer_image_cuda is not None or s.has("imageCuda")):
        _check_image_cuda(s, pool, image_cuda)
    return image, image_cuda


def cuda_format_problem(value: str) -> str | None:
    return None if parse_cuda(value) else "is not a CUDA version"


CUDA_FORMAT_FIX = "write the image's CUDA as major.minor, e.g. \"12.8\" (quoted: YAML reads 12.10 as 12.1)"


def _check_image_cuda(s: Section, pool: NodePoolConfig, image_cuda: str) -> None:
    """The image's CUDA against every GPU type of the pool and the AMI's driver (components/facts/cuda.py)."""
    cuda = parse_cuda(image_cuda)
    models = tuple(sorted({model for t in pool.instance_types if (model := INSTANCE_TYPES[t].gpu_model)}))
    if cuda is None or not models:
        return
    problem = cuda_problem(cuda, models)
    if problem:
        needed = minimum_cuda(models)
        s.error(s.key("imageCuda"), image_cuda, f"(the CUDA of the job's image, on pool {pool.name}) {problem}",
                f"run the job on an image built for CUDA {needed[0]}.{needed[1]} or later within a major the driver "
                "runs (trainer/Dockerfile: --build-arg BASE_IMAGE=<a pytorch/pytorch cuda tag>@sha256:<digest>), and "
                "state its CUDA in imageCuda (or trainerImageCuda)")


def _check_gang_in_one_zone(s: Section, pool: NodePoolConfig, nodes: int) -> None:
    """A multi-node job's pool must be one AZ. Nothing else keeps a gang in one: the pool's node
    group is one Auto Scaling group over its subnets, which EC2 balances across AZs, and Kueue's
    topology-aware scheduling places a gang only after the autoscaler has provisioned its nodes
    (docs/gpu-fabric-and-capacity.md, "Gangs in one zone")."""
    if nodes > 1 and len(pool.availability_zones) > 1:
        s.error(s.key("nodes"), nodes,
                f"a gang of {nodes} nodes on pool {pool.name}, which spans {len(pool.availability_zones)} AZs "
                f"({', '.join(pool.availability_zones)}), could land in several of them: slower NCCL, cross-AZ "
                "traffic billed in both directions, and a one-AZ file system read across AZs",
                "run multi-node jobs on a pool of one AZ: give the pool one (availabilityZones: [<AZ ID>], the "
                "Lustre file system's for a platform job), or add a pool per AZ and name one in the job's pool")


def _check_pod_fits_node(s: Section, pool: NodePoolConfig, job: JobConfig) -> None:
    memory_limit = job.memory_gib or pod_share(pool.instance_types, gpus=min(job.gpus_per_node, pool.gpus_per_node),
                                               gpus_per_node=pool.gpus_per_node, efa=pool.efa)[1]
    if job.shared_memory_gib > memory_limit * SHM_MAX_SHARE_OF_POD_MEMORY:
        s.error(s.key("sharedMemoryGiB"), job.shared_memory_gib,
                f"must be at most a quarter of the pod's memory ({memory_limit} GiB): /dev/shm is memory the pod's "
                "limit counts, and the trainer's processes need the rest",
                f"lower sharedMemoryGiB to {max(1, int(memory_limit * SHM_MAX_SHARE_OF_POD_MEMORY))} or less, "
                "or raise memoryGiB")
    check_memory_tier_fits(s, seconds=job.memory_checkpoint_seconds, checkpoint_gib=job.checkpoint_gib,
                           shared_memory_gib=job.shared_memory_gib, pod_memory_gib=memory_limit)

    cpu, memory = allocatable(pool.instance_types, efa=pool.efa)
    share = job.gpus_per_node / pool.gpus_per_node
    if job.cpu is not None and job.cpu > cpu * share:
        s.error(s.key("cpu"), job.cpu, f"exceeds this job's share of a {pool.instance_types[0]} node ({cpu * share:g} vCPU)",
                "lower cpu or leave it unset for the default share")
    if job.memory_gib is not None and job.memory_gib > memory * share:
        s.error(s.key("memoryGiB"), job.memory_gib,
                f"exceeds this job's share of a {pool.instance_types[0]} node ({memory * share:g} GiB)",
                "lower memoryGiB or leave it unset for the default share")


def _is_pulumi_file(path: Path) -> bool:
    """A resolved path inside the repository: a stack file's directory, or a Pulumi*.yaml anywhere
    (the project files, the bootstrap's stack file, the policy pack's)."""
    relative = path.relative_to(REPO_ROOT)
    return relative.parts[:1] == (STACKS_DIR,) or fnmatch.fnmatch(path.name.lower(), "pulumi*.y*ml")


def _read_hyperparameters(s: Section, relative_path: str) -> str:
    if not relative_path:
        if s.ok("hyperparameters"):  # otherwise reported by the getter (not text)
            s.error(s.key("hyperparameters"), relative_path, "is empty: the job would get an empty hyperparameters file",
                    f"name the job's file, or remove the key to use {DEFAULT_HYPERPARAMETERS}")
        return ""
    path = REPO_ROOT / relative_path
    try:
        path = path.resolve()
        inside = REPO_ROOT in path.parents and path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte, a loop
        inside = False
    if not inside:
        s.error(s.key("hyperparameters"), relative_path, "is not a file in this repository",
                "give a path relative to the repository root, e.g. trainer/example_trainer/hparams.yaml")
        return ""
    if _is_pulumi_file(path):
        s.error(s.key("hyperparameters"), relative_path,
                f"is a Pulumi project or stack file ({STACKS_DIR}/, Pulumi*.yaml): the stack's configuration, with its "
                "`secure:` ciphertexts, would become the job's ConfigMap",
                f"point it at the job's own hyperparameters file, e.g. {DEFAULT_HYPERPARAMETERS}")
        return ""
    try:
        document, text = read_yaml_file(path, source=path_for_message(relative_path), max_bytes=MAX_HYPERPARAMETERS_BYTES)
    except YamlError as problem:
        # Each of the reader's messages ends in its own fix: one line per problem of the file.
        for message in problem.messages:
            what, _, fix = message.partition(". Fix: ")
            s.error(s.key("hyperparameters"), relative_path, f"is not usable: {what}", fix or "fix the file")
        return ""
    if not isinstance(document, dict):
        s.error(s.key("hyperparameters"), relative_path, "must hold a YAML mapping (name: value lines)", "fix the file")
    return text
