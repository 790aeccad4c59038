"""Facts of the shared file systems: what FSx for Lustre accepts, how fast each system writes, and
how long a checkpoint flush takes, so a job's grace period can be checked before anything exists.

Sources (read 2026):
- FSx for Lustre CreateFileSystem API, StorageCapacity: "For SCRATCH_2, PERSISTENT_2, and
  PERSISTENT_1 deployment types using SSD storage type, the valid values are 1200 GiB, 2400 GiB,
  and increments of 2400 GiB."; PerUnitStorageThroughput for PERSISTENT_2 SSD: 125, 250, 500,
  1000 MB/s/TiB (pulumi-aws 7.51.1 `aws.fsx.LustreFileSystem` docs say the same).
- FSx for Lustre performance (docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html): a
  persistent SSD file system's throughput is its storage capacity in TiB times the throughput
  per unit of storage it was provisioned with.
- Amazon EFS performance (docs.aws.amazon.com/efs/latest/ug/performance.html), Regional file
  system, General Purpose, Elastic throughput: per-file-system write 1-5 GiBps depending on the
  Region; per client 1,500 MiBps with the newest client, 500 MiBps otherwise. The lower figures
  are used: a grace period must hold in every Region.
- FSx for Lustre User Guide, performance.md (awsdocs/amazon-fsx-lustre-user-guide@c55836f, the
  last published source, 2023): "Each OST is approximately 1 to 2 TiB in size, depending on the
  file system's deployment type"; file systems created after 2020-12-18 have "a progressive file
  layout in which files under 1GiB in size are stored in one stripe, and larger files are
  assigned a stripe count of five".
- EC2 User Guide, "Amazon EC2 instance network bandwidth": one flow (5-tuple) between instances
  outside one cluster placement group is limited to 5 Gbps; the file servers are never in a GPU
  pool's placement group.

Who writes matters (a job's `checkpointWriters`): a trainer that writes its whole checkpoint from
rank 0 (trainer/launcher/checkpoint.py AsyncCheckpointer, `writes` left out) has one client and
one file carry all of it, which on Lustre reaches 5 OSTs however large the file system; with
every rank writing its own file (sharded state, or the example trainer's share of its replicated
state: trainer/launcher/replicated.py), the clients and files add up until the file system's own limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# ------------------------------------------------------------------------ FSx for Lustre

LUSTRE_DEPLOYMENT_TYPES: dict[str, tuple[int, ...]] = {
    # deployment type -> the throughput per TiB (MB/s) it can be provisioned with
    "PERSISTENT_2": (125, 250, 500, 1000),
}
LUSTRE_REJECTED_DEPLOYMENT_TYPES: dict[str, str] = {
    "SCRATCH_1": "scratch file systems keep no second copy of the data and cannot use a customer KMS key",
    "SCRATCH_2": "scratch file systems keep no second copy of the data and cannot use a customer KMS key",
    "PERSISTENT_1": "PERSISTENT_1 is the previous generation: lower throughput per TiB, no metadata scaling",
}
LUSTRE_FIRST_CAPACITIES_GIB = (1200, 2400)
LUSTRE_CAPACITY_STEP_GIB = 2400
LUSTRE_VERSION = "2.15"  # newest Lustre version FSx offers; the FSx CSI driver's AL2023 client speaks it
# Lustre LNET: TCP 988, and 1018-1023 (FSx for Lustre User Guide, "File system access control with
# Amazon VPC"; creation fails with "... do not permit Lustre LNET network traffic on port 988").
LUSTRE_PORTS = ((988, 988), (1018, 1023))


def lustre_capacity_problem(capacity_gib: int) -> str | None:
    """Why `capacity_gib` is not a valid PERSISTENT_2 SSD capacity, or None."""
    step = LUSTRE_CAPACITY_STEP_GIB
    if capacity_gib in LUSTRE_FIRST_CAPACITIES_GIB or (capacity_gib > step and capacity_gib % step == 0):
        return None
    if capacity_gib < LUSTRE_FIRST_CAPACITIES_GIB[0]:
        nearest = str(LUSTRE_FIRST_CAPACITIES_GIB[0])
    elif capacity_gib < step:
        nearest = " or ".join(map(str, LUSTRE_FIRST_CAPACITIES_GIB))
    else:
        below = capacity_gib // step * step
        nearest = f"{below} or {below + step}"
    return f"is not a capacity FSx for Lustre offers: 1200, 2400, then steps of 2400 GiB (nearest: {nearest})"


def lustre_throughput_mb_s(capacity_gib: int, throughput_per_tib: int) -> float:
    """Aggregate throughput (MB/s) of a persistent SSD file system."""
    return capacity_gib / 1024 * throughput_per_tib


# The lower of "approximately 1 to 2 TiB" per OST: the most OSTs, so the smallest share of the
# file system's throughput behind each one (the conservative reading for a grace period).
LUSTRE_OST_GIB = 1200
# The default layout: one stripe below 1 GiB, five above (the first GiB of a large file is one
# stripe too; counted as five, which a checkpoint of many GiB barely notices).
LUSTRE_LARGE_FILE_GIB = 1
LUSTRE_LARGE_FILE_STRIPES = 5
LUSTRE_FLOW_MB_S = 5e9 / 8 / 1e6  # one TCP flow outside a placement group: 5 Gbps = 625 MB/s


def lustre_osts(capacity_gib: int) -> int:
    """How many OSTs (storage targets) the file system has, at LUSTRE_OST_GIB each."""
    return max(1, capacity_gib // LUSTRE_OST_GIB)


def lustre_stripes(capacity_gib: int, *, files: int, file_gib: float) -> int:
    """How many OSTs `files` files of `file_gib` each are striped over under the default layout."""
    per_file = LUSTRE_LARGE_FILE_STRIPES if file_gib >= LUSTRE_LARGE_FILE_GIB else 1
    return min(lustre_osts(capacity_gib), files * per_file)


def lustre_write_mb_s(capacity_gib: int, throughput_per_tib: int, *, files: int, file_gib: float) -> float:
    """Write throughput (MB/s) of `files` files of `file_gib` each, written at once: each OST a
    file is striped over gives its share of the file system's throughput, and each stripe travels
    one TCP flow (assumed: one flow per OST, whose file server is outside the placement group)."""
    stripes = lustre_stripes(capacity_gib, files=files, file_gib=file_gib)
    share = lustre_throughput_mb_s(capacity_gib, throughput_per_tib) * stripes / lustre_osts(capacity_gib)
    return min(share, stripes * LUSTRE_FLOW_MB_S)


# ------------------------------------------------------------------------------------ EFS

MIB = 1024 * 1024
EFS_WRITE_MB_S = 1 * 1024 * MIB / 1e6  # 1 GiBps per file system: the lowest Region's figure
EFS_CLIENT_MB_S = 500 * MIB / 1e6  # 500 MiBps per client (node)


def efs_write_mb_s(clients: int) -> float:
    """Write throughput (MB/s) `clients` nodes can drive together on an Elastic EFS file system."""
    return min(EFS_WRITE_MB_S, clients * EFS_CLIENT_MB_S)


# ------------------------------------------------------------------------ checkpoint flush

# On SIGTERM a background save may still be writing; the final one waits for it, then writes
# itself: two checkpoints' worth of bytes. The margin covers the step in flight, the copy to
# host memory, the marker and the process exit, and the launcher's own 5 s: it ends the workers
# at the grace minus those (trainer/launcher/contract.py STOP_MARGIN_S; a test holds the order).
FLUSHES_PER_STOP = 2
STOP_MARGIN_S = 30


def flush_seconds(checkpoint_gib: float, write_mb_s: float) -> float:
    """Seconds to write one checkpoint of `checkpoint_gib` at `write_mb_s`."""
    return checkpoint_gib * 1024 * MIB / 1e6 / write_mb_s


def grace_needed_seconds(checkpoint_gib: float, write_mb_s: float) -> int:
    """terminationGracePeriodSeconds that lets a job stop cleanly with its final checkpoint."""
    return math.ceil(FLUSHES_PER_STOP * flush_seconds(checkpoint_gib, write_mb_s) + STOP_MARGIN_S)


# ------------------------------------------------------------------------ sizing FSx for Lustre

@dataclass(frozen=True)
class CheckpointDemand:
    """One job's checkpoint as the file system must take it within the job's grace period."""

    job: str
    checkpoint_gib: float
    files: int
    """How many files it is written as at once: 1 (rank 0 writes it all) or one per rank."""
    grace_s: int
    """terminationGracePeriodSeconds: the stop budget its final flush must fit (grace_needed_seconds)."""

    def write_mb_s(self, capacity_gib: int, throughput_per_tib: int) -> float:
        return lustre_write_mb_s(capacity_gib, throughput_per_tib, files=self.files,
                                 file_gib=self.checkpoint_gib / self.files)

    def fits(self, capacity_gib: int, throughput_per_tib: int) -> bool:
        return grace_needed_seconds(self.checkpoint_gib, self.write_mb_s(capacity_gib, throughput_per_tib)) <= self.grace_s


@dataclass(frozen=True)
class LustreDemand:
    """What a file system must give: `read_mb_s` in total (the GPUs it serves x a per-GPU read
    target) and each job's checkpoint within its grace period."""

    read_mb_s: float
    checkpoints: tuple[CheckpointDemand, ...] = ()

    def met_by(self, capacity_gib: int, throughput_per_tib: int) -> bool:
        return (lustre_throughput_mb_s(capacity_gib, throughput_per_tib) >= self.read_mb_s
                and all(c.fits(capacity_gib, throughput_per_tib) for c in self.checkpoints))


def lustre_capacities(up_to_gib: int):
    """The capacities FSx for Lustre offers (1200, 2400, then steps of 2400), up to the first at or
    above `up_to_gib`."""
    first, second = LUSTRE_FIRST_CAPACITIES_GIB
    capacity = first
    while True:
        yield capacity
        if capacity >= up_to_gib:
            return
        capacity = second if capacity < second else capacity + LUSTRE_CAPACITY_STEP_GIB


def lustre_minimum_capacity(demand: LustreDemand, throughput_per_tib: int) -> int | None:
    """The smallest capacity that meets `demand` at `throughput_per_tib`, or None when none does.
    Reads grow with capacity without end; a checkpoint's write grows only until its files' stripes
    cover every OST (lustre_stripes), and is the same on any larger file system: the search ends
    at the first capacity past both."""
    read_gib = math.ceil(demand.read_mb_s / throughput_per_tib * 1024)
    most_stripes = max((c.files * LUSTRE_LARGE_FILE_STRIPES for c in demand.checkpoints), default=1)
    for capacity in lustre_capacities(max(read_gib, most_stripes * LUSTRE_OST_GIB)):
        if demand.met_by(capacity, throughput_per_tib):
            return capacity
    return None


def lustre_minimum_throughput(demand: LustreDemand, capacity_gib: int, deployment_type: str = "PERSISTENT_2") -> int | None:
    """The lowest throughput per TiB of `deployment_type` that meets `demand` at `capacity_gib`, or None."""
    return next((t for t in LUSTRE_DEPLOYMENT_TYPES.get(deployment_type, ()) if demand.met_by(capacity_gib, t)), None)
