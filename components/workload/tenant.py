"""A training tenant: one namespace where jobs run, with everything its pods need.

Both roots make one: the platform stack for the environment's own `training` namespace, a team
stack for `team-<team>`. What differs between them is passed in (where the trainer role, the
secrets and the checkpoint directory come from); what a tenant is, is written once here:

    namespace (guard rails, quota) -> ClusterQueue (a team's: the platform's) + LocalQueue -> trainer service account
    -> volumes -> checkpoint directory (Lustre) -> checkpoint cleanup -> run viewer (TensorBoard)
    -> secrets sync -> trainer progress role -> one JobSet per job

The pieces stay top-level resources under the names they have always had (`TenantNames`):
wrapping them in a component now would give every one a new URN, which Pulumi deploys as a
replacement of each namespace, queue and job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.config import FabricConfig, NodePoolConfig
from components.config.cleanup import CheckpointCleanupConfig
from components.config.stack import TeamStackConfig
from components.config.training import JobConfig, TrainingConfig
from components.data.mounts import LustreVolume, StorageMounts, StorageMountsArgs, VolumeSources
from components.identity.workload_roles import TrainerServiceAccount, TrainerServiceAccountArgs
from components.secrets.sync import SecretsSync, SecretsSyncArgs
from components.workload.checkpoint_cleanup import CheckpointCleanup, CheckpointCleanupArgs
from components.workload.checkpoint_directory import CheckpointDirectory, CheckpointDirectoryArgs
from components.workload.namespace import TrainingNamespace, TrainingNamespaceArgs
from components.workload.progress_access import TrainerProgressRole, TrainerProgressRoleArgs
from components.workload.queues import LOCAL_QUEUE, TrainingQueue, TrainingQueueArgs
from components.workload.sizing import namespace_quota
from components.workload.training_job import JobPlacement, TrainingJob, TrainingJobArgs
from components.workload.viewer import RunViewer, RunViewerArgs, ViewerExposure


@dataclass(frozen=True)
class TenantNames:
    """The Pulumi resource names of a tenant's pieces: part of their URNs, so never renamed."""

    namespace: str
    queue: str
    identity: str
    volumes: str
    cleanup: str
    secrets_sync: str


PLATFORM_TENANT = TenantNames(namespace="training-namespace", queue="training-queue", identity="trainer-identity",
                              volumes="storage-mounts", cleanup="checkpoint-cleanup", secrets_sync="secrets-sync")
TEAM_TENANT = TenantNames(namespace="team-namespace", queue="team-queue", identity="team-trainer-identity",
                          volumes="team-storage-mounts", cleanup="team-checkpoint-cleanup",
                          secrets_sync="team-secrets-sync")


@dataclass(frozen=True)
class TenantStorage:
    """Where the tenant's checkpoints and datasets live."""

    sources: VolumeSources | None
    """The environment's EFS file system, the tenant's own access point (its root directory is the
    tenant's checkpoint directory) and datasets bucket (read-only). None (a team's): the platform
    made the namespace's volumes from its registry of teams (team_volumes.py); the tenant makes the claims."""
    lustre: LustreVolume | None = None
    """storage.lustre of a platform stack: checkpoints and datasets on FSx for Lustre instead."""
    efs_csi_role_arn: pulumi.Input[str] | None = None
    """Set by the platform stack only: it installs the EFS CSI add-on, which team stacks share."""


@dataclass(frozen=True)
class TenantSecrets:
    """How the tenant's secrets reach its namespace: one of the two roles is set."""

    remote_keys: dict[str, str]
    """Secret name in the namespace -> its name in Secrets Manager."""
    role_arn: pulumi.Input[str] | None = None
    """The External Secrets controller's own Pod Identity role (the platform's namespace)."""
    assume_role_arn: pulumi.Input[str] | None = None
    """A reader role of this team only, which the controller's role assumes (team stacks)."""


@dataclass(frozen=True)
class TrainingTenantArgs:
    names: TenantNames
    """Resource names of the pieces (PLATFORM_TENANT or TEAM_TENANT)."""
    stack: str
    """The stack that makes the tenant: its runs' checkpoints go under /workspace/checkpoints/<stack>."""
    namespace: str
    """The Kubernetes namespace, also the name of its ClusterQueue."""
    environment: str
    """dev, staging or prod: the queue's cohort and the namespace's label."""
    team: str | None
    """The team of a team stack; None for the environment's own namespace."""
    region: str
    """The AWS region of the cluster."""
    cluster_name: pulumi.Input[str]
    """The EKS cluster the namespace is created in."""
    kubernetes_version: str
    """The cluster's Kubernetes version (add-on builds depend on it)."""
    gpu_pools: Sequence[NodePoolConfig]
    """The platform's GPU node pools: quotas and jobs refer to them by name."""
    fabric: FabricConfig
    """The platform's inter-node fabric settings, passed to every job."""
    training: TrainingConfig
    """The tenant's GPU quota and jobs."""
    cleanup_image: str
    """Image of the checkpoint cleanup CronJob (the trainer image, pinned by digest)."""
    system_pool: str
    """The node pool that runs the cleanup CronJob."""
    checkpoint_cleanup: CheckpointCleanupConfig
    """How old checkpoints are pruned."""
    storage: TenantStorage
    """Checkpoint and dataset storage."""
    secrets: TenantSecrets
    """The tenant's secrets and the role that syncs them."""
    trainer_role_arn: pulumi.Input[str]
    """The IAM role the trainer service account is bound to (EKS Pod Identity)."""
    namespace_depends_on: Sequence[pulumi.Resource]
    """What must exist before the namespace and the secrets sync (a platform stack's node groups)."""
    viewer: ViewerExposure | None = None
    """How the environment's load balancer reaches the namespace's TensorBoard (None: no viewer)."""
    queue_depends_on: Sequence[pulumi.Resource] | None = None
    """What the ClusterQueue waits for (Kueue's controller); None: the namespace."""
    viewer_depends_on: Sequence[pulumi.Resource] = ()
    """What the viewer's Ingress waits for besides the namespace (a platform stack's controller)."""
    cluster_queue_made_by_platform: bool = False
    """A team's: its ClusterQueue, Namespace, ResourceQuota and LimitRange are the platform's (its `teams`
    registry: team_queues.py, team_tenancy.py); the tenant makes the LocalQueue and what is inside the namespace."""


@dataclass(frozen=True)
class TrainingTenant:
    namespace: TrainingNamespace
    queue: TrainingQueue
    volumes: StorageMounts
    secrets_sync: SecretsSync
    trainer_identity: TrainerServiceAccount
    jobs: tuple[TrainingJob, ...]


def training_tenant(args: TrainingTenantArgs, opts: pulumi.ResourceOptions) -> TrainingTenant:
    """Creates the tenant's resources in the cluster that `opts`' Kubernetes provider reaches."""
    names = args.names
    quota_pools = [pool for pool in args.gpu_pools if pool.name in args.training.gpu_quota]
    training_ns = TrainingNamespace(names.namespace, TrainingNamespaceArgs(
        name=args.namespace, environment=args.environment, team=args.team, quota=namespace_quota(quota_pools),
        depends_on=args.namespace_depends_on, made_by_platform=args.cluster_queue_made_by_platform,
    ), opts)
    namespace_name = training_ns.name  # an output: children wait for the namespace where the tenant makes it
    volumes = _volumes(args, namespace_name, opts)
    # What mounts the checkpoints waits for its directory (made here on Lustre; by the EFS access point).
    directory = [] if volumes.checkpoints_sub_path is None else [CheckpointDirectory(
        f"{args.names.volumes}-checkpoint-directory", CheckpointDirectoryArgs(
            namespace=args.namespace, image=args.cleanup_image, system_pool=args.system_pool,
            checkpoints_sub_path=volumes.checkpoints_sub_path, depends_on=[training_ns, volumes]), opts)]
    CheckpointCleanup(names.cleanup, CheckpointCleanupArgs(
        namespace=args.namespace, stack=args.stack, image=args.cleanup_image, system_pool=args.system_pool,
        cleanup=args.checkpoint_cleanup, depends_on=[training_ns, volumes, *directory],
        checkpoints_sub_path=volumes.checkpoints_sub_path,
    ), opts)
    if args.viewer is not None:
        RunViewer(f"{names.namespace}-viewer", RunViewerArgs(
            namespace=args.namespace, image=args.cleanup_image, system_pool=args.system_pool, exposure=args.viewer,
            depends_on=[training_ns, volumes, *directory, *args.viewer_depends_on],
            checkpoints_sub_path=volumes.checkpoints_sub_path), opts)
    secrets_sync = SecretsSync(names.secrets_sync, SecretsSyncArgs(
        cluster_name=args.cluster_name, region=args.region, namespace=namespace_name,
        remote_keys=args.secrets.remote_keys, role_arn=args.secrets.role_arn,
        assume_role_arn=args.secrets.assume_role_arn,
        depends_on=args.namespace_depends_on if args.secrets.role_arn is not None else [training_ns],
    ), opts)
    identity = TrainerServiceAccount(names.identity, TrainerServiceAccountArgs(
        cluster_name=args.cluster_name, namespace=namespace_name, role_arn=args.trainer_role_arn), opts)
    progress_role = TrainerProgressRole(f"{names.identity}-progress", TrainerProgressRoleArgs(
        namespace=args.namespace, depends_on=[training_ns, identity]), opts)
    queue = TrainingQueue(names.queue, TrainingQueueArgs(
        name=args.namespace, cohort=args.environment, namespace=namespace_name, pools=list(args.gpu_pools),
        gpu_quota=args.training.gpu_quota, borrowed_pools=args.training.borrowed_pools,
        depends_on=args.queue_depends_on if args.queue_depends_on is not None else [training_ns],
        cluster_queue_made_by_platform=args.cluster_queue_made_by_platform,
    ), opts)
    pools_by_name = {pool.name: pool for pool in args.gpu_pools}
    jobs = tuple(TrainingJob(f"job-{job.name}", TrainingJobArgs(
        job=job, stack=args.stack, pool=pools_by_name[job.pool], fabric=args.fabric, namespace=args.namespace,
        local_queue=LOCAL_QUEUE,
        # Its pods mount the volumes' claims and read the synced secret.
        depends_on=[queue, volumes, secrets_sync, identity, progress_role, training_ns, *directory],
        checkpoints_sub_path=volumes.checkpoints_sub_path,
    ), opts) for job in args.training.jobs)
    return TrainingTenant(training_ns, queue, volumes, secrets_sync, identity, jobs)


def _volumes(args: TrainingTenantArgs, namespace_name: pulumi.Input[str], opts: pulumi.ResourceOptions) -> StorageMounts:
    storage = args.storage
    return StorageMounts(args.names.volumes, StorageMountsArgs(
        cluster_name=args.cluster_name,
        namespace=namespace_name,
        region=args.region,
        kubernetes_version=args.kubernetes_version,
        efs_csi_role_arn=storage.efs_csi_role_arn,
        sources=storage.sources,
        # The add-ons a platform stack installs wait for nodes to run on.
        addons_depend_on=args.namespace_depends_on,
        lustre=storage.lustre,
    ), opts)


def team_job_placement(config: TeamStackConfig, job: JobConfig) -> JobPlacement:
    """Where a job of team stack `config` runs, as `training_tenant` places the stack's own jobs
    (TEAM_TENANT, components/team.py): the team's namespace and LocalQueue, the stack as the owner
    of its checkpoints, and the whole checkpoints volume (a team's is its own EFS access point, which
    its platform makes, so StorageMounts gives no sub path). The job command places an ad-hoc job with
    it; tests/test_job_command.py checks it renders a stack's job exactly as the plan does."""
    platform = config.judged_platform
    pool = next(pool for pool in platform.node_pools if pool.name == job.pool)
    return JobPlacement(stack=config.stack, namespace=config.training_namespace, local_queue=LOCAL_QUEUE, pool=pool,
                        fabric=platform.fabric, checkpoints_sub_path=None)
