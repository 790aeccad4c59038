"""Composition root of a platform stack (dev, staging, prod): wires components in one direction.

config -> explicit providers -> network -> security groups -> endpoints -> cluster -> node pools
-> cluster add-ons -> ... -> outputs.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.buckets import DataBuckets, DataBucketsArgs
from components.cluster import Cluster, ClusterArgs
from components.cluster_addons import ClusterAddons, ClusterAddonsArgs
from components.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.config import StackConfig, TeamStackConfig
from components.device_plugins import DevicePlugins, DevicePluginsArgs
from components.file_system import CheckpointFileSystem, CheckpointFileSystemArgs
from components.job_controllers import JobControllers, JobControllersArgs
from components.job_sizing import namespace_quota
from components.network import Network, NetworkArgs
from components.node_pools import NodePools, NodePoolsArgs
from components.observability import Observability, ObservabilityArgs
from components.queues import LOCAL_QUEUE, ResourceFlavors, ResourceFlavorsArgs, TrainingQueue, TrainingQueueArgs
from components.registry import TrainerRegistry, TrainerRegistryArgs
from components.secrets_store import TrainingSecrets, TrainingSecretsArgs, secret_name
from components.secrets_sync import SecretsSync, SecretsSyncArgs
from components.security_groups import SecurityGroups, SecurityGroupsArgs
from components.storage_mounts import StorageMounts, StorageMountsArgs
from components.tags import default_tags
from components.training_job import TrainingJob, TrainingJobArgs
from components.training_namespace import TrainingNamespace, TrainingNamespaceArgs
from components.vpc_endpoints import VpcEndpoints, VpcEndpointsArgs
from components.workload_identity import TrainerServiceAccount, TrainerServiceAccountArgs, WorkloadRoles, WorkloadRolesArgs

# The EFS access point (root directory) of the environment's training workload.
TRAINING_WORKLOAD = "training"


def aws_provider(config: StackConfig | TeamStackConfig) -> aws.Provider:
    """The only AWS provider: default providers are disabled in every stack file."""
    return aws.Provider(
        "aws",
        region=config.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=default_tags(config)),
    )


def build_platform(config: StackConfig) -> dict[str, pulumi.Input]:
    provider = aws_provider(config)
    on_aws = pulumi.ResourceOptions(providers=[provider])
    account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=provider)).account_id
    pools = config.node_pools

    # --- network and fabric security ---------------------------------------------------------
    network = Network("network", NetworkArgs(
        config=config.network,
        name_prefix=config.name_prefix,
        cluster_name=config.cluster_name,
        account_id=account_id,
    ), on_aws)
    security_groups = SecurityGroups("security-groups", SecurityGroupsArgs(
        vpc_id=network.vpc.id,
        vpc_cidr=config.network.vpc_cidr,
        name_prefix=config.name_prefix,
        fabric=config.fabric,
        monitoring_ingress=config.network.monitoring_ingress,
        efa_fabric=any(p.efa for p in pools),
        socket_fabric=any(p.gpu and not p.efa for p in pools),
    ), on_aws)
    private_subnets_by_az = {plan.availability_zone: subnet.id
                             for plan, subnet in zip(config.network.subnets, network.private_subnets, strict=True)}
    VpcEndpoints("vpc-endpoints", VpcEndpointsArgs(
        region=config.region,
        vpc_id=network.vpc.id,
        private_subnet_ids=[s.id for s in network.private_subnets],
        private_route_table_ids=[t.id for t in network.private_route_tables],
        security_group_id=security_groups.vpc_endpoints.id,
    ), on_aws)

    # --- storage, registry, secrets, workload roles (AWS side; no cluster needed) -------------
    training_namespace = config.training_namespace
    buckets = DataBuckets("storage-buckets", DataBucketsArgs(
        config=config.storage,
        project=config.project,
        environment=config.environment,
        name_prefix=config.name_prefix,
        account_id=account_id,
    ), on_aws)
    checkpoints = CheckpointFileSystem("checkpoints-efs", CheckpointFileSystemArgs(
        name_prefix=config.name_prefix,
        account_id=account_id,
        private_subnet_ids=private_subnets_by_az,
        security_group_id=security_groups.efs.id,
        workloads=(TRAINING_WORKLOAD,),
        backups=config.storage.efs_backups,
    ), on_aws)
    registry = TrainerRegistry("registry", TrainerRegistryArgs(
        config=config.registry, name_prefix=config.name_prefix, account_id=account_id), on_aws)
    secrets = TrainingSecrets("secrets", TrainingSecretsArgs(
        config=config.secrets,
        project=config.project,
        environment=config.environment,
        name_prefix=config.name_prefix,
        account_id=account_id,
    ), on_aws)
    roles = WorkloadRoles("workload-roles", WorkloadRolesArgs(
        environment=config.environment,
        region=config.region,
        cluster_name=config.cluster_name,
        training_namespace=training_namespace,
        account_id=account_id,
        datasets_bucket=buckets.datasets_bucket,
        datasets_external=config.storage.datasets_bucket is not None,
        artifacts_bucket=buckets.artifacts_bucket,
        data_key_arn=buckets.data_key.arn,
        secret_arns=[secret.arn for secret in secrets.secrets.values()],
        secrets_key_arn=secrets.key.arn,
        file_system_arn=checkpoints.file_system.arn,
        access_point_arns=[ap.arn for ap in checkpoints.access_points.values()],
    ), on_aws)

    # --- cluster and node pools --------------------------------------------------------------
    cluster = Cluster("cluster", ClusterArgs(
        config=config.cluster,
        cluster_name=config.cluster_name,
        region=config.region,
        environment=config.environment,
        kubernetes_service_cidr=str(config.network.kubernetes_service_cidr),
        private_subnet_ids=[s.id for s in network.private_subnets],
        control_plane_security_group_id=security_groups.control_plane.id,
        account_id=account_id,
    ), on_aws)
    in_cluster = pulumi.ResourceOptions(providers=[provider, cluster.k8s_provider])
    node_pools = NodePools("node-pools", NodePoolsArgs(
        pools=pools,
        cluster_name=config.cluster_name,
        cluster=cluster.eks,
        boot_addons=cluster.boot_addons,
        private_subnet_ids_by_az=private_subnets_by_az,
        node_security_group_id=security_groups.nodes.id,
        efa_fabric_security_group_id=security_groups.efa_fabric.id if security_groups.efa_fabric else None,
        socket_fabric_security_group_id=security_groups.socket_fabric.id if security_groups.socket_fabric else None,
    ), on_aws)
    node_groups = list(node_pools.node_groups.values())
    ClusterAddons("cluster-addons", ClusterAddonsArgs(cluster=cluster, node_groups=node_groups), on_aws)
    ClusterAutoscaler("cluster-autoscaler", ClusterAutoscalerArgs(
        cluster_name=config.cluster_name,
        cluster=cluster.eks,
        kubernetes_version=config.cluster.kubernetes_version,
        region=config.region,
        account_id=account_id,
        pools=pools,
        system_pool=config.system_pool.name,
        depends_on=node_groups,
    ), in_cluster)
    DevicePlugins("device-plugins", DevicePluginsArgs(
        nvidia=any(p.gpu for p in pools),
        efa=any(p.efa for p in pools),
        depends_on=node_groups,
    ), in_cluster)

    observability = Observability("observability", ObservabilityArgs(
        config=config.observability,
        cluster_name=config.cluster_name,
        cluster=cluster.eks,
        kubernetes_version=config.cluster.kubernetes_version,
        name_prefix=config.name_prefix,
        account_id=account_id,
        depends_on=node_groups,
    ), on_aws)

    # --- training namespace, storage mounts, secrets sync, trainer identity (in the cluster) ---
    training_ns = TrainingNamespace("training-namespace", TrainingNamespaceArgs(
        name=training_namespace,
        environment=config.environment,
        team=None,
        quota=namespace_quota([p for p in pools if p.name in config.training.gpu_quota]),
        depends_on=node_groups,
    ), in_cluster)
    namespace_name = training_ns.namespace.metadata.name  # an output: children wait for the namespace
    StorageMounts("storage-mounts", StorageMountsArgs(
        cluster_name=cluster.eks.name,
        namespace=namespace_name,
        region=config.region,
        kubernetes_version=config.cluster.kubernetes_version,
        efs_csi_role_arn=roles.efs_csi.arn,
        file_system_id=checkpoints.file_system.id,
        checkpoint_access_point_id=checkpoints.access_points[TRAINING_WORKLOAD].id,
        datasets_bucket=buckets.datasets_bucket,
        addons_depend_on=node_groups,
    ), in_cluster)
    secrets_sync = SecretsSync("secrets-sync", SecretsSyncArgs(
        cluster_name=cluster.eks.name,
        region=config.region,
        namespace=namespace_name,
        role_arn=roles.secrets_sync.arn,
        remote_keys={name: secret_name(config.project, config.environment, name) for name in config.secrets.names},
        depends_on=node_groups,
    ), in_cluster)
    trainer_identity = TrainerServiceAccount("trainer-identity", TrainerServiceAccountArgs(
        cluster_name=cluster.eks.name, namespace=namespace_name, role_arn=roles.trainer.arn), in_cluster)

    # --- queues and training jobs --------------------------------------------------------------
    controllers = JobControllers("job-controllers", JobControllersArgs(
        system_pool=config.system_pool.name, depends_on=node_groups), in_cluster)
    ResourceFlavors("resource-flavors", ResourceFlavorsArgs(
        pools=[p for p in pools if p.gpu], depends_on=[controllers.kueue]), in_cluster)
    queue = TrainingQueue("training-queue", TrainingQueueArgs(
        name=training_namespace,
        cohort=config.environment,
        namespace=namespace_name,
        pools=[p for p in pools if p.gpu],
        gpu_quota=config.training.gpu_quota,
        depends_on=[controllers.kueue],
    ), in_cluster)
    pools_by_name = {p.name: p for p in pools}
    for job in config.training.jobs:
        TrainingJob(f"job-{job.name}", TrainingJobArgs(
            job=job,
            pool=pools_by_name[job.pool],
            fabric=config.fabric,
            namespace=training_namespace,
            local_queue=LOCAL_QUEUE,
            depends_on=[queue, secrets_sync, trainer_identity, training_ns],
        ), in_cluster)

    return {
        "environment": config.environment,
        "region": config.region,
        "vpcId": network.vpc.id,
        "privateSubnetIds": [s.id for s in network.private_subnets],
        "clusterName": cluster.eks.name,
        "kubeconfig": cluster.k8s_provider.kubeconfig,
        "nodePools": {p.name: {"gpusPerNode": p.gpus_per_node, "maxNodes": p.max_size, "capacity": p.capacity}
                      for p in pools},
        "ncclPortRange": {"first": config.fabric.nccl_port_range.first, "last": config.fabric.nccl_port_range.last},
        "rendezvousPorts": list(config.fabric.rendezvous_ports),
        "trainerRepositoryUrl": registry.repository_url,
        "datasetsBucket": buckets.datasets_bucket,
        "artifactsBucket": buckets.artifacts_bucket,
        "checkpointFileSystemId": checkpoints.file_system.id,
        # What team stacks read through their StackReference.
        "dataKeyArn": buckets.data_key.arn,
        "secretsSyncRoleArn": roles.secrets_sync.arn,
        "alertTopicArn": observability.topic.arn,
    }
