"""The `storage` section: S3 buckets, lifecycle, EFS backups, FSx for Lustre, and which data a
stack may read.

Each environment gets its own datasets and artifacts buckets (named from project, environment
and account id) and its own EFS file system. `datasetsBucket` optionally points a stack at an
existing datasets bucket instead; a non-prod stack may never point at production data (the environment-isolation
rule: "a test environment must never point at the production data source"). The same rule is enforced
again in IAM (components/identity/policies.py), so a hand-edited role cannot bypass it either.

`lustre` (optional) gives the environment's training namespace an FSx for Lustre file system for
its checkpoints and datasets (the datasets bucket linked at /_datasets); team stacks keep EFS,
whose access points give each team a directory of its own (Lustre has no such thing).

    lustre:
      storageCapacityGiB: 4800     # 1200, 2400, then steps of 2400
      throughputPerTiB: 500        # MB/s per TiB: 125, 250, 500 or 1000
      readMBpsPerGpu: 50           # what each GPU the file system serves must be able to read
      availabilityZone: use1-az4   # one subnet; an AZ ID (or a network zone name); default: the
                                   # zone of the GPU pools whose jobs use it (config/lustre_zone.py)
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from components.config.cleanup import CheckpointCleanupConfig, parse_checkpoint_cleanup
from components.config.keys import BY_PATH
from components.config.reader import Section
from components.facts.file_systems import (
    LUSTRE_DEPLOYMENT_TYPES,
    LUSTRE_REJECTED_DEPLOYMENT_TYPES,
    efs_write_mb_s,
    lustre_capacity_problem,
    lustre_osts,
    lustre_stripes,
    lustre_throughput_mb_s,
    lustre_write_mb_s,
)
from components.facts.zones import is_zone_id, zone_id_prefix, zone_id_problem

# Words that mark a bucket as production data, as dash- or dot-separated parts of its name
# (`gpu-training-prod-datasets-123456789012`, `acme-production.raw`). Whole parts only, so
# `prodigy-data` is not mistaken for production.
PROD_NAME_WORDS = ("prod", "production")
BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# Reserved by S3 (User Guide, "General purpose bucket naming rules"): CreateBucket refuses them.
RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# S3 server access logs say who read or changed which data: audit evidence, a year in prod.
PROD_MIN_ACCESS_LOG_RETENTION_DAYS = 365
# Who writes a job's checkpoint (`checkpointWriters`): rank 0 alone (AsyncCheckpointer without
# `writes`; the default, as nothing is known of a job's own trainer), or every rank its own file (the
# example trainer, which splits its replicated state: trainer/launcher/replicated.py; DCP).
CHECKPOINT_WRITERS = BY_PATH["training.jobs[].checkpointWriters"].allowed
RANK0, ALL_RANKS = CHECKPOINT_WRITERS
LUSTRE = "FSx for Lustre"  # CheckpointStore.name of a job on the file system


@dataclass(frozen=True)
class LustreConfig:
    deployment_type: str
    storage_capacity_gib: int
    throughput_per_tib: int
    """MB/s per TiB of storage."""
    availability_zone: str
    """An AZ ID (the same physical zone in every account) or one of the network's zone names;
    "" until config/lustre_zone.py places a file system whose stack left it out."""
    read_mb_s_per_gpu: int = 0
    """The read throughput (MB/s) each GPU it serves must get; config/lustre_sizing.py holds the
    capacity x throughput per TiB to it."""

    @property
    def throughput_mb_s(self) -> float:
        return lustre_throughput_mb_s(self.storage_capacity_gib, self.throughput_per_tib)


@dataclass(frozen=True)
class CheckpointStore:
    """Where a job's checkpoints go and how fast they can be written there."""

    name: str
    write_mb_s: float
    basis: str
    """Where the figure comes from, for messages."""


@dataclass(frozen=True)
class StorageConfig:
    # Objects under checkpoints/ in the artifacts bucket expire after this many days.
    checkpoint_retention_days: int
    # Overwritten or deleted object versions (both buckets) are removed after this many days.
    noncurrent_version_retention_days: int
    # AWS Backup's daily EFS backups (the file system's automatic backup policy).
    efs_backups: bool
    # An existing bucket to read datasets from instead of creating one; None creates one.
    datasets_bucket: str | None
    # Finished jobs' checkpoint directories on the shared file system: when they are removed.
    checkpoint_cleanup: CheckpointCleanupConfig = field(default_factory=CheckpointCleanupConfig)
    # Old versions under checkpoints/ (pruned and superseded checkpoints) go after this many days.
    checkpoint_version_retention_days: int = 3
    # S3 server access logs of our buckets expire from the access-log bucket after this many days.
    access_log_retention_days: int = PROD_MIN_ACCESS_LOG_RETENTION_DAYS
    # FSx for Lustre for the training namespace's checkpoints and datasets; None: EFS and S3.
    lustre: LustreConfig | None = None
    # Checkpoint write throughput measured on this stack (MB/s, e.g. the write_mb_per_s of the
    # trainer's checkpoint_saved events); None: the documented figure of the file system.
    checkpoint_write_mb_s: float | None = None

    def checkpoint_store(self, *, nodes: int, ranks: int, writers: str, checkpoint_gib: float,
                         lustre: bool = True) -> CheckpointStore:
        """The store a job checkpoints to (`lustre=False`: a team stack's EFS) and how fast its
        `writers` (CHECKPOINT_WRITERS: rank 0 alone, or each of its `ranks` on `nodes` nodes)
        write a checkpoint of `checkpoint_gib` there."""
        on_lustre = lustre and self.lustre is not None
        name = LUSTRE if on_lustre else "EFS"
        if self.checkpoint_write_mb_s is not None:
            return CheckpointStore(name, self.checkpoint_write_mb_s, "storage.checkpointWriteMBps, as measured")
        all_ranks = writers == ALL_RANKS
        if on_lustre and self.lustre is not None:
            capacity, per_tib = self.lustre.storage_capacity_gib, self.lustre.throughput_per_tib
            files = ranks if all_ranks else 1
            file_gib = checkpoint_gib / files
            stripes = lustre_stripes(capacity, files=files, file_gib=file_gib)
            return CheckpointStore(
                name, lustre_write_mb_s(capacity, per_tib, files=files, file_gib=file_gib),
                f"{'every rank writing its own file' if all_ranks else 'rank 0 writing one file'}: {files} x "
                f"{file_gib:.3g} GiB striped over {stripes} of {lustre_osts(capacity)} OSTs, each 1/{lustre_osts(capacity)} "
                f"of {capacity} GiB x {per_tib} MB/s per TiB")
        if all_ranks:
            return CheckpointStore(name, efs_write_mb_s(nodes),
                                   f"EFS Elastic, every rank writing: 1 GiBps per file system, 500 MiBps per node, "
                                   f"{nodes} node(s)")
        return CheckpointStore(name, efs_write_mb_s(1), "EFS Elastic, rank 0 writing: 500 MiBps per client")


def names_prod_data(bucket: str) -> bool:
    """True when a bucket name marks production data (a whole `prod`/`production` part)."""
    return any(part in PROD_NAME_WORDS for part in re.split(r"[-.]", bucket.lower()))


def bucket_name_problem(name: str) -> str | None:
    """Why `name` is not a valid S3 general purpose bucket name, or None."""
    if not BUCKET_NAME.fullmatch(name):
        return "is not a valid S3 bucket name (3-63 lowercase letters, digits, dots, hyphens; starting and ending alphanumeric)"
    if ".." in name or ".-" in name or "-." in name:
        return "is not a valid S3 bucket name (no adjacent dots, no dot next to a hyphen)"
    if name.startswith(RESERVED_BUCKET_PREFIXES) or name.endswith(RESERVED_BUCKET_SUFFIXES):
        return ("is not a valid S3 bucket name: S3 reserves the prefixes " + ", ".join(RESERVED_BUCKET_PREFIXES)
                + " and the suffixes " + ", ".join(RESERVED_BUCKET_SUFFIXES) + " (access point aliases, directory buckets, ...)")
    try:
        ipaddress.IPv4Address(name)
        return "is not a valid S3 bucket name (it looks like an IP address)"
    except ValueError:
        return None


def bucket_name(project: str, environment: str, purpose: str, account_id: str) -> str:
    """Physical bucket name. S3 names are global: project + environment + account id make it ours and
    unique per platform stack (`environment` is the stack's name qualifier: prod, or prod-usw2 for
    prod's second region), so two stacks can never share (or take over) a bucket."""
    name = f"{project}-{environment}-{purpose}-{account_id}"
    problem = bucket_name_problem(name)
    if problem:
        raise ValueError(f"bucket name {name!r} {problem}")
    return name


def parse_storage(section: Section, *, environment: str, availability_zones: tuple[str, ...] = (),
                  region: str = "") -> StorageConfig:
    checkpoints = section.integer("checkpointRetentionDays")
    noncurrent = section.integer("noncurrentVersionRetentionDays")
    # The launcher prunes on every save, and each region keeps the replicas' old versions too: at
    # one 80 GiB save an hour, 90 days of pruned versions is ~169 TiB per bucket (review 3, D5).
    checkpoint_versions = section.integer("checkpointVersionRetentionDays",
                                          fix="a day or two covers a mistaken prune; older checkpoints are kept as "
                                              "current objects for checkpointRetentionDays")
    backups = section.boolean("efsBackups", environment == "prod")
    if environment == "prod" and not backups:
        section.error(section.key("efsBackups"), backups, "prod checkpoints must be backed up (FSBP EFS.2)",
                      "set efsBackups: true")

    datasets_bucket = None
    if section.has("datasetsBucket"):
        key = section.key("datasetsBucket")
        datasets_bucket = section.string("datasetsBucket", check=bucket_name_problem,
                                         fix="give the name of an existing bucket, e.g. acme-ml-datasets") or None
        if datasets_bucket and environment != "prod" and names_prod_data(datasets_bucket):
            section.error(key, datasets_bucket, f"a {environment} stack must never read production data",
                          f"point it at a {environment} copy of the data, or remove it to use this stack's own bucket")
    cleanup = parse_checkpoint_cleanup(section.section("checkpointCleanup"))
    access_logs = section.integer("accessLogRetentionDays", PROD_MIN_ACCESS_LOG_RETENTION_DAYS if environment == "prod" else 90)
    if environment == "prod" and access_logs < PROD_MIN_ACCESS_LOG_RETENTION_DAYS:
        section.error(section.key("accessLogRetentionDays"), access_logs,
                      f"S3 access logs are audit evidence: prod keeps them at least {PROD_MIN_ACCESS_LOG_RETENTION_DAYS} days",
                      f"set accessLogRetentionDays: {PROD_MIN_ACCESS_LOG_RETENTION_DAYS} or more")
    lustre = _parse_lustre(section.section("lustre"), availability_zones, region) if section.has("lustre") else None
    section.ignore("lustre")
    measured = None
    if section.has("checkpointWriteMBps"):
        measured = float(section.integer("checkpointWriteMBps",
                                         fix="give the MB/s your checkpoints reach here, e.g. 800"))
    section.finish()
    return StorageConfig(
        checkpoint_retention_days=checkpoints,
        noncurrent_version_retention_days=noncurrent,
        checkpoint_version_retention_days=checkpoint_versions,
        efs_backups=backups,
        datasets_bucket=datasets_bucket,
        checkpoint_cleanup=cleanup,
        access_log_retention_days=access_logs,
        lustre=lustre,
        checkpoint_write_mb_s=measured,
    )


def _parse_lustre(section: Section, availability_zones: tuple[str, ...], region: str) -> LustreConfig:
    deployment = section.string("deploymentType", parser_judges_choices=True)
    if deployment in LUSTRE_REJECTED_DEPLOYMENT_TYPES:
        section.error(section.key("deploymentType"), deployment, LUSTRE_REJECTED_DEPLOYMENT_TYPES[deployment],
                      "use PERSISTENT_2")
    elif deployment and deployment not in LUSTRE_DEPLOYMENT_TYPES:
        section.error(section.key("deploymentType"), deployment, "is not an FSx for Lustre deployment type",
                      "use PERSISTENT_2")
    capacity = section.integer("storageCapacityGiB")
    problem = lustre_capacity_problem(capacity) if capacity else None
    if problem:
        section.error(section.key("storageCapacityGiB"), capacity, problem, "choose one of those sizes")
    allowed = LUSTRE_DEPLOYMENT_TYPES.get(deployment, LUSTRE_DEPLOYMENT_TYPES["PERSISTENT_2"])
    throughput = section.integer("throughputPerTiB")
    if throughput and throughput not in allowed:
        choices = ", ".join(map(str, allowed))
        section.error(section.key("throughputPerTiB"), throughput,
                      f"is not a throughput {deployment or 'PERSISTENT_2'} offers (MB/s per TiB: {choices})",
                      f"use one of {choices}")
    read_per_gpu = section.integer("readMBpsPerGpu",
                                   fix="give the MB/s one GPU's data loader reads, e.g. 50 (samples/s x bytes per sample)")
    # Left out (""): placed in the zone of the GPU pools that use it, once they are known.
    zone = section.string("availabilityZone", "")
    id_problem = zone_id_problem(zone, region) if zone else None
    if id_problem:
        section.error(section.key("availabilityZone"), zone, *id_problem)
    elif zone and not is_zone_id(zone) and availability_zones and zone not in availability_zones:
        section.error(section.key("availabilityZone"), zone, "is neither an AZ ID nor one of the network's availability zones",
                      f"use the AZ ID of the GPU pool that uses it (e.g. {zone_id_prefix(region) or 'use1'}-az4), "
                      f"or one of {', '.join(availability_zones)}")
    section.finish()
    return LustreConfig(deployment_type=deployment, storage_capacity_gib=capacity,
                        throughput_per_tib=throughput, availability_zone=zone, read_mb_s_per_gpu=read_per_gpu)
