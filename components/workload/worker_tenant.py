"""A team's tenancy on a MultiKueue worker cluster: what a job dispatched there needs to run.

MultiKueue creates a dispatched job's Workload and JobSet on the worker in the same namespace and
on the LocalQueue of the same name as on the manager, which must exist there (kueue v0.19.2
docs/tasks/manage/setup_multikueue.md). So a team stack whose platform is a manager makes, on each worker:

    network policies in the namespace (which, with its quota, the worker's platform stack makes from
    its registry of teams: team_tenancy.py) -> LocalQueue `any-region` (onto the team's ClusterQueue
    there, which the worker's platform stack makes from its registry of teams)
    -> RoleBinding of the dispatcher's group -> trainer service account
    -> volume claims (of the volumes the worker's platform stack makes: team_volumes.py) -> secrets sync
    -> the jobs' hyperparameters ConfigMaps (what a job's pods mount besides the volumes)

and no jobs: jobs are submitted on the manager and dispatched. The launcher sees the same
namespace, service account, claims and secret names in every region.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.common.manifests import built_in_object, custom_resource
from components.config import NodePoolConfig
from components.config.training import TrainingConfig
from components.data.mounts import StorageMounts, StorageMountsArgs
from components.identity.workload_roles import TrainerServiceAccount, TrainerServiceAccountArgs
from components.secrets.sync import SecretsSync, SecretsSyncArgs
from components.workload.multikueue import any_region_local_queue, dispatcher_role_binding
from components.workload.namespace import TrainingNamespace, TrainingNamespaceArgs
from components.workload.progress_access import TrainerProgressRole, TrainerProgressRoleArgs
from components.workload.sizing import namespace_quota
from components.workload.training_job import hyperparameters_config_map


def worker_cluster_provider_name(worker_stack: str) -> str:
    """The Kubernetes provider of a worker's cluster in a team stack (the offline plan names the
    objects made through it after the worker)."""
    return f"{worker_stack}-cluster"


@dataclass(frozen=True)
class WorkerTenantArgs:
    namespace: str
    """The team's namespace, the same name as on the manager."""
    environment: str
    """The environment: the namespace's label (the manager's queue selects it) and the queue's cohort."""
    team: str
    """The team, labelled on the namespace."""
    region: str
    """The worker's region: its datasets bucket's, given to Mountpoint."""
    cluster_name: pulumi.Input[str]
    """The worker's EKS cluster: the trainer's Pod Identity association is made there."""
    kubernetes_version: str
    """The worker's Kubernetes version."""
    gpu_pools: Sequence[NodePoolConfig]
    """The worker's GPU pools: the queue's flavors (made by the worker's platform stack)."""
    training: TrainingConfig
    """The team's gpuQuota (the cap in this region) and its jobs (their hyperparameters; the jobs stay on the manager)."""
    secrets_region: str
    """Where the team's secrets are (the manager's region): the worker's External Secrets reads them there."""
    remote_keys: dict[str, str]
    """Secret name in the namespace -> its name in Secrets Manager."""
    secrets_reader_arn: pulumi.Input[str]
    """The team's reader role that the worker's External Secrets role assumes."""
    trainer_role_arn: pulumi.Input[str]
    """The team's trainer role (it trusts the worker's cluster too)."""


class WorkerTenant(pulumi.ComponentResource):
    """The team's namespace on one worker cluster (opts: the worker's AWS and Kubernetes providers)."""

    namespace: TrainingNamespace

    def __init__(self, name: str, args: WorkerTenantArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:WorkerTenant", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        quota_pools = [pool for pool in args.gpu_pools if pool.name in args.training.gpu_quota]
        self.namespace = TrainingNamespace(f"{name}-namespace", TrainingNamespaceArgs(
            name=args.namespace, environment=args.environment, team=args.team, quota=namespace_quota(quota_pools),
            depends_on=[], made_by_platform=True), child)
        inside = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        namespace_name = self.namespace.name  # the worker's platform makes the namespace (team_tenancy.py)
        self._create_queues(name, args, inside)
        built_in_object(f"{name}-dispatcher-binding", dispatcher_role_binding(args.namespace), inside)
        TrainerServiceAccount(f"{name}-trainer-identity", TrainerServiceAccountArgs(
            cluster_name=args.cluster_name, namespace=namespace_name, role_arn=args.trainer_role_arn), inside)
        # A dispatched job's pods run here: they keep their progress on themselves here too.
        TrainerProgressRole(f"{name}-trainer-progress", TrainerProgressRoleArgs(
            namespace=args.namespace, depends_on=[self.namespace]), inside)
        StorageMounts(f"{name}-storage-mounts", StorageMountsArgs(
            cluster_name=args.cluster_name, namespace=namespace_name, region=args.region,
            kubernetes_version=args.kubernetes_version,
            # The claims only: the worker's platform made the volumes, on the team's access point to the
            # worker's file system and on its datasets replica (team_volumes.py).
            sources=None), inside)
        SecretsSync(f"{name}-secrets-sync", SecretsSyncArgs(
            cluster_name=args.cluster_name, region=args.secrets_region, namespace=namespace_name,
            remote_keys=args.remote_keys, assume_role_arn=args.secrets_reader_arn, depends_on=[self.namespace]), inside)
        # MultiKueue copies the job, not what it mounts: the jobs' hyperparameters are here too.
        for job in args.training.jobs:
            built_in_object(f"{name}-job-{job.name}-hyperparameters", hyperparameters_config_map(job, args.namespace), inside)
        self.register_outputs({})

    @staticmethod
    def _create_queues(name: str, args: WorkerTenantArgs, opts: pulumi.ResourceOptions) -> None:
        # Onto the team's ClusterQueue in that region, which the worker's platform stack made from its
        # own registry of teams (workload/team_queues.py).
        custom_resource(f"{name}-any-region-queue", any_region_local_queue(args.namespace, args.namespace), opts)
