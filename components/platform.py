# Over 600 lines: the composition root wires every component of a platform stack once, in order; split, the order would be hidden.
"""Composition root of a platform stack (dev, staging, prod): wires the domains in one direction.

    network -> cluster and node pools -> data -> identity -> cluster services -> workload
            -> observability -> outputs

Each stage is a short function that takes the config and the bundles of earlier stages and
returns a small bundle of what later stages need. No stage reaches back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.cluster.addons import ClusterAddons, ClusterAddonsArgs
from components.cluster.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.cluster.control_plane import Cluster, ClusterArgs
from components.cluster.device_plugins import DevicePlugins, DevicePluginsArgs
from components.cluster.load_balancer_controller import LoadBalancerController, LoadBalancerControllerArgs
from components.cluster.node_pools import NodePools, NodePoolsArgs
from components.cluster.provisioning_requests import ProvisioningRequestApi, ProvisioningRequestApiArgs
from components.common.boundary import apply_permissions_boundary
from components.common.kms import LogsKey
from components.common.manifests import custom_resource
from components.common.provider import aws_provider
from components.common.tags import default_tags
from components.config import ConfigError, ConfigProblem, NodePoolConfig, StackConfig
from components.config.lustre_zone import WHY_ONE_ZONE, pools_that_fix_the_zone
from components.config.lustre_zone import ZONE_KEY as LUSTRE_ZONE_KEY
from components.config.multikueue import (
    MANAGER,
    WORKER,
    api_peer_cidrs,
    dispatcher_role_name,
    peering_name,
    stack_name_prefix,
)
from components.config.platform_contract import (
    CONTRACT_OUTPUT,
    CONTRACT_PARAMETER_TIER,
    CONTRACT_RESOURCES,
    CONTRACT_VERSION,
    TEAM_ACCESS_POINTS,
    contract_parameter_name,
    contract_parameter_value,
)
from components.config.vocabularies import Capacity
from components.data.buckets import DataBuckets, DataBucketsArgs
from components.data.file_system import CheckpointFileSystem, CheckpointFileSystemArgs
from components.data.lustre import LustreFileSystem, LustreFileSystemArgs
from components.data.mounts import LustreVolume, VolumeSources
from components.data.registry import TrainerRegistry, TrainerRegistryArgs
from components.data.replication import (
    CHECKPOINTS_PREFIX,
    CrossRegionReplication,
    CrossRegionReplicationArgs,
    Destination,
)
from components.facts.regions import arn_partition
from components.facts.zones import is_zone_id, zone_id_problems, zone_mismatch_problems
from components.identity import policies
from components.identity.workload_roles import WorkloadRoles, WorkloadRolesArgs
from components.network.ci_runner import CiRunnerAccess, CiRunnerAccessArgs
from components.network.endpoints import VpcEndpoints, VpcEndpointsArgs
from components.network.peering import PeeringRequest, PeerRoute, find_peering, find_vpc
from components.network.security_groups import SecurityGroups, SecurityGroupsArgs
from components.network.vpc import Network, NetworkArgs
from components.observability.budget import StackBudget, StackBudgetArgs
from components.observability.monitoring import Observability, ObservabilityArgs
from components.observability.training_metrics import WatchedJobs
from components.secrets.store import TrainingSecrets, TrainingSecretsArgs, secret_name
from components.workload.capacity_block import create_capacity_block_hold
from components.workload.controllers import JobControllers, JobControllersArgs
from components.workload.multikueue import (
    ANY_REGION,
    KUEUE_NAMESPACE,
    ROTATION,
    MultiKueueManager,
    MultiKueueManagerArgs,
    MultiKueueWorker,
    MultiKueueWorkerArgs,
    any_region_local_queue,
)
from components.workload.progress_access import ProgressAdmissionPolicy
from components.workload.queues import LOCAL_QUEUE, ResourceFlavors, ResourceFlavorsArgs
from components.workload.team_deploy_access import team_deploy_access
from components.workload.team_queues import team_cluster_queues
from components.workload.team_tenancy import team_tenancies
from components.workload.team_volumes import (
    TeamVolumesArgs,
    access_point_outputs,
    team_volumes,
)
from components.workload.tenant import (
    PLATFORM_TENANT,
    TenantSecrets,
    TenantStorage,
    TrainingTenant,
    TrainingTenantArgs,
    training_tenant,
)
from components.workload.tenant_admission import TenantAdmission, TenantAdmissionArgs
from components.workload.verify_outputs import fabric_outputs, pool_outputs, training_outputs
from components.workload.viewer import exposure_of

# The EFS access point (root directory) of the environment's training workload.
TRAINING_WORKLOAD = "training"


@dataclass(frozen=True)
class OnAws:
    """Where AWS resources go: the explicit provider, and the account it deploys into."""

    opts: pulumi.ResourceOptions
    account_id: pulumi.Output[str]
    provider: aws.Provider
    logs_key_arn: pulumi.Output[str]
    """The environment's CloudWatch Logs key: every log group it creates is encrypted with it."""


@dataclass(frozen=True)
class NetworkStage:
    network: Network
    security_groups: SecurityGroups
    private_subnets_by_az: dict[str, pulumi.Output[str]]
    ci_runner: CiRunnerAccess


@dataclass(frozen=True)
class ClusterStage:
    cluster: Cluster
    node_groups: Sequence[aws.eks.NodeGroup]
    in_cluster: pulumi.ResourceOptions
    """Options of everything created through the cluster's Kubernetes API."""


@dataclass(frozen=True)
class DataStage:
    buckets: DataBuckets
    checkpoints: CheckpointFileSystem
    registry: TrainerRegistry
    secrets: TrainingSecrets
    lustre: LustreFileSystem | None = None
    """storage.lustre: the training namespace's checkpoints and datasets."""


def build_platform(config: StackConfig, contract_config: dict[str, str]) -> dict[str, pulumi.Input]:
    """`contract_config`: the stack's config as published to team stacks (platform_contract.py)."""
    apply_permissions_boundary(config.iam_permissions_boundary)
    provider = aws_provider(config)
    zone_names_by_id = _resolve_zone_ids(config, provider)  # may still reject the config: before any resource
    on_aws = _on_aws(config, provider)
    network = _network(config, on_aws)
    cluster = _cluster_and_node_pools(config, on_aws, network, zone_names_by_id)
    data = _data(config, on_aws, network, zone_names_by_id)
    roles = _workload_roles(config, on_aws, data)
    provisioning_api = _cluster_services(config, on_aws, cluster)
    observability = _observability(config, on_aws, cluster)
    _budget(config, on_aws, observability)
    controllers = _job_controllers(config, cluster, provisioning_api)
    load_balancer = _load_balancer_controller(config, on_aws, network, cluster)
    tenant = _training_tenant(config, cluster, data, roles, controllers, load_balancer)
    # What no team namespace may make, refused by the API server (workload/tenant_admission.py).
    TenantAdmission("tenant-admission", TenantAdmissionArgs(exposure=exposure_of(config)),
                    cluster.in_cluster)
    _multikueue(config, on_aws, cluster, [controllers.kueue, tenant.namespace])
    # Every registered team's ClusterQueue: the platform owns the cluster's quotas (config/teams.py).
    team_cluster_queues(config.teams, cohort=config.environment, pools=_gpu_pools(config),
                        manager=config.multikueue is not None and config.multikueue.role == MANAGER,
                        depends_on=[controllers.kueue], opts=cluster.in_cluster)
    # Each registered team's namespace, its quota and its deployers' RBAC: what its deploy role
    # may not make (workload/team_tenancy.py).
    team_tenancies(config.teams, environment=config.environment, pools=_gpu_pools(config),
                   depends_on=cluster.node_groups, opts=cluster.in_cluster)
    # Each registered team's checkpoints access point and PersistentVolumes: what its deploy role may
    # not make either (workload/team_volumes.py); its team stack makes the claims.
    team_access_points = team_volumes(config.teams, TeamVolumesArgs(
        file_system_id=data.checkpoints.file_system.id, datasets_bucket=data.buckets.datasets_bucket,
        region=config.region, name_prefix=config.name_prefix, volumes_depend_on=[tenant.volumes]), cluster.in_cluster)
    # Each registered team's deploy role, in its namespace only (workload/team_deploy_access.py).
    team_deploy_access(config.teams, project=config.project, environment=config.environment,
                       cluster_name=cluster.cluster.eks.name, account_id=on_aws.account_id,
                       partition=arn_partition(config.region), opts=on_aws.opts)
    outputs = {**_outputs(config, network, cluster, data, roles, observability),
               TEAM_ACCESS_POINTS: access_point_outputs(team_access_points)}
    contract = {"version": CONTRACT_VERSION, "config": contract_config, "resources": {
        name: outputs[name] for name in (*CONTRACT_RESOURCES, TEAM_ACCESS_POINTS)}}
    _publish_contract(config, on_aws, contract)
    return {**outputs, CONTRACT_OUTPUT: contract}


def _publish_contract(config: StackConfig, on_aws: OnAws, contract: dict[str, Any]) -> aws.ssm.Parameter:
    """The contract as an SSM parameter in the stack's region: what team stacks read, with their
    own deploy role, instead of this stack's state (config/platform_contract.py says why). It
    carries no secret: one that reached it is refused, before the parameter exists."""
    whole = pulumi.Output.from_input(contract)
    secret = pulumi.Output.from_input(whole.is_secret())

    def value(published: Any, is_secret: bool) -> str:
        if is_secret:
            raise ConfigError([ConfigProblem(f"output {CONTRACT_OUTPUT}", "holds a secret, which team stacks would read "
                                             "from its SSM parameter", "publish that value by name only "
                                             "(components/config/platform_contract.py published_config)",
                                             where=f"platform stack '{config.stack}'")])
        return contract_parameter_value(published, stack=config.stack)

    return aws.ssm.Parameter(
        "platform-contract",
        name=contract_parameter_name(config.project, config.stack),
        description=f"The platform contract of {config.stack}, which its team stacks read (docs/team-stacks.md)",
        # Not a SecureString (checkov CKV2_AWS_34, justified in tests/test_checkov_plans.py): it holds
        # no secret, and team deploy roles read it without a KMS grant.
        type="String",
        tier=CONTRACT_PARAMETER_TIER,
        # Not `value`, which the provider always marks secret: the contract holds none, and reviews
        # (the offline plan, `pulumi preview --diff`) should see what teams read.
        insecure_value=pulumi.Output.all(whole, secret).apply(lambda args: value(*args)),
        opts=on_aws.opts,
    )


def _on_aws(config: StackConfig, provider: aws.Provider) -> OnAws:
    account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=provider)).account_id
    opts = pulumi.ResourceOptions(providers=[provider])
    logs_key = LogsKey("logs", name_prefix=config.name_prefix, region=config.region, account_id=account_id, opts=opts)
    return OnAws(opts=opts, account_id=account_id, provider=provider, logs_key_arn=logs_key.key.arn)


def _network(config: StackConfig, on_aws: OnAws) -> NetworkStage:
    """VPC and subnets, the security groups (GPU fabric included), the VPC endpoints."""
    pools = config.node_pools
    peerings, peer_routes = _peerings(config, on_aws.provider)
    network = Network("network", NetworkArgs(
        config=config.network,
        name_prefix=config.name_prefix,
        cluster_name=config.cluster_name,
        account_id=on_aws.account_id,
        logs_key_arn=on_aws.logs_key_arn,
        peerings=peerings,
        peer_routes=peer_routes,
    ), on_aws.opts)
    security_groups = SecurityGroups("security-groups", SecurityGroupsArgs(
        vpc_id=network.vpc.id,
        vpc_cidr=config.network.vpc_cidr,
        name_prefix=config.name_prefix,
        fabric=config.fabric,
        monitoring_ingress=config.network.monitoring_ingress,
        viewer=config.viewer,
        efa_fabric=any(p.efa for p in pools),
        socket_fabric=any(p.gpu and not p.efa for p in pools),
        lustre=config.storage.lustre is not None,
        api_peer_cidrs=api_peer_cidrs(config.multikueue),
    ), on_aws.opts)
    VpcEndpoints("vpc-endpoints", VpcEndpointsArgs(
        region=config.region,
        vpc_id=network.vpc.id,
        private_subnet_ids=[s.id for s in network.private_subnets],
        private_route_table_ids=[t.id for t in network.private_route_tables],
        security_group_id=security_groups.vpc_endpoints.id,
    ), on_aws.opts)
    private_subnets_by_az = {plan.availability_zone: subnet.id
                             for plan, subnet in zip(config.network.subnets, network.private_subnets, strict=True)}
    # CI's preview and deploy jobs reach the private API from a runner in this group (docs/delivery.md).
    ci_runner = CiRunnerAccess("ci-runner", CiRunnerAccessArgs(
        vpc_id=network.vpc.id, name_prefix=config.name_prefix, control_plane=security_groups.control_plane,
    ), on_aws.opts)
    return NetworkStage(network, security_groups, private_subnets_by_az, ci_runner)


def _peerings(config: StackConfig, provider: aws.Provider) -> tuple[tuple[PeeringRequest, ...], tuple[PeerRoute, ...]]:
    """multiKueue's network path (network/peering.py): the manager requests and accepts a peering
    to each worker VPC that exists; a worker routes to the active one its manager made. What the
    lookups do not find yet is left for the next deploy, with a warning."""
    multikueue = config.multikueue
    if multikueue is None:
        return (), ()
    if multikueue.role == MANAGER:
        requests = []
        for worker in multikueue.workers:
            vpc_name = stack_name_prefix(config.project, worker.stack)
            vpc_id = find_vpc(provider, region=worker.region, name=vpc_name, cidr=worker.vpc_cidr) if worker.vpc_cidr else None
            if vpc_id is None:
                pulumi.log.warn(f"multiKueue: no VPC {vpc_name} ({worker.vpc_cidr or 'CIDR unknown'}) in {worker.region} "
                                f"yet: the peering to worker '{worker.stack}' is made on the deploy after that stack's "
                                "first (docs/multi-region.md, Adding a region)")
                continue
            requests.append(PeeringRequest(name=peering_name(config.project, config.stack, worker.stack),
                                           peer_stack=worker.stack, peer_region=worker.region, peer_vpc_id=vpc_id,
                                           peer_cidr=worker.vpc_cidr))
        return tuple(requests), ()
    manager = str(multikueue.manager)
    connection = find_peering(provider, requester_cidr=multikueue.manager_vpc_cidr,
                              accepter_cidr=str(config.network.vpc_cidr)) if multikueue.manager_vpc_cidr else None
    if connection is None:
        pulumi.log.warn(f"multiKueue: no active VPC peering from manager '{manager}' "
                        f"({multikueue.manager_vpc_cidr or 'CIDR unknown'}) yet: its route is added on the deploy after "
                        "the manager's next (docs/multi-region.md, Adding a region)")
        return (), ()
    return (), (PeerRoute(multikueue.manager_vpc_cidr, connection),)


def _cluster_and_node_pools(config: StackConfig, on_aws: OnAws, network: NetworkStage,
                            zone_names_by_id: dict[str, str]) -> ClusterStage:
    """The EKS control plane, then the node pools, then the add-ons that need running nodes."""
    groups = network.security_groups
    cluster = Cluster("cluster", ClusterArgs(
        config=config.cluster,
        cluster_name=config.cluster_name,
        region=config.region,
        environment=config.environment,
        kubernetes_service_cidr=str(config.network.kubernetes_service_cidr),
        private_subnet_ids=[s.id for s in network.network.private_subnets],
        control_plane_security_group_id=groups.control_plane.id,
        account_id=on_aws.account_id,
        logs_key_arn=on_aws.logs_key_arn,
        api_path=network.network.private_route_tables if config.multikueue and config.multikueue.role == WORKER else (),
    ), on_aws.opts)
    node_pools = NodePools("node-pools", NodePoolsArgs(
        pools=config.node_pools,
        cluster_name=config.cluster_name,
        cluster=cluster.eks,
        boot_addons=cluster.boot_addons,
        private_subnet_ids_by_az=network.private_subnets_by_az,
        zone_names_by_id=zone_names_by_id,
        node_security_group_id=groups.nodes.id,
        efa_fabric_security_group_id=groups.efa_fabric.id if groups.efa_fabric else None,
        socket_fabric_security_group_id=groups.socket_fabric.id if groups.socket_fabric else None,
        launch_tags=default_tags(config),
    ), on_aws.opts)
    node_groups = list(node_pools.node_groups.values())
    ClusterAddons("cluster-addons", ClusterAddonsArgs(cluster=cluster, node_groups=node_groups), on_aws.opts)
    in_cluster = pulumi.ResourceOptions(providers=[on_aws.provider, cluster.k8s_provider])
    return ClusterStage(cluster, node_groups, in_cluster)


def _resolve_zone_ids(config: StackConfig, provider: aws.Provider) -> dict[str, str]:
    """This account's AZ name of every AZ ID a pool or the Lustre file system names (IDs mean the
    same zone in every account), looked up before any resource is created, so a zone outside the
    network, or a Lustre file system away from the pools that write to it, is a configuration
    error while nothing exists yet."""
    zones_by_key = {f"{config.project}:nodePools[{index}].availabilityZones": pool.availability_zones
                    for index, pool in enumerate(config.node_pools)}
    lustre = config.storage.lustre
    lustre_key = f"{config.project}:{LUSTRE_ZONE_KEY}"
    if lustre is not None:
        zones_by_key[lustre_key] = (lustre.availability_zone,)
    zone_ids = sorted({zone for zones in zones_by_key.values() for zone in zones if is_zone_id(zone)})
    lookup = pulumi.InvokeOptions(provider=provider)
    names = {zone_id: str(aws.get_availability_zone(zone_id=zone_id, opts=lookup).name) for zone_id in zone_ids}
    problems = [ConfigProblem(key, problem, fix)
                for key, problem, fix in zone_id_problems(zones_by_key, names, config.network.availability_zones)]
    if lustre is not None:
        problems += [ConfigProblem(lustre_key, problem, fix) for problem, fix in zone_mismatch_problems(
            lustre_key, lustre.availability_zone, pools_that_fix_the_zone(config.node_pools, config.training.jobs), names,
            why=WHY_ONE_ZONE)]
    if problems:
        raise ConfigError(problems)
    return names


def _data(config: StackConfig, on_aws: OnAws, network: NetworkStage, zone_names_by_id: dict[str, str]) -> DataStage:
    """Buckets, the checkpoint file system, the trainer registry and the secrets (AWS side)."""
    buckets = DataBuckets("storage-buckets", DataBucketsArgs(
        config=config.storage,
        project=config.project,
        # S3 names are global: prod-usw2's buckets are gpu-training-prod-usw2-*, never prod's.
        environment=config.name_prefix.removeprefix(f"{config.project}-"),
        name_prefix=config.name_prefix,
        account_id=on_aws.account_id,
        region=config.region,
        lustre_exports_checkpoints=config.multikueue is not None and config.storage.lustre is not None,
    ), on_aws.opts)
    checkpoints = CheckpointFileSystem("checkpoints-efs", CheckpointFileSystemArgs(
        name_prefix=config.name_prefix,
        account_id=on_aws.account_id,
        private_subnet_ids=network.private_subnets_by_az,
        security_group_id=network.security_groups.efs.id,
        workloads=(TRAINING_WORKLOAD,),
        backups=config.storage.efs_backups,
    ), on_aws.opts)
    registry = TrainerRegistry("registry", TrainerRegistryArgs(
        config=config.registry, name_prefix=config.name_prefix, account_id=on_aws.account_id), on_aws.opts)
    secrets = TrainingSecrets("secrets", TrainingSecretsArgs(
        config=config.secrets,
        project=config.project,
        environment=config.environment,
        name_prefix=config.name_prefix,
        account_id=on_aws.account_id,
    ), on_aws.opts)
    lustre = None
    if config.storage.lustre is not None and network.security_groups.lustre is not None:
        lustre = LustreFileSystem("lustre", LustreFileSystemArgs(
            config=config.storage.lustre,
            name_prefix=config.name_prefix,
            account_id=on_aws.account_id,
            # Its zone as this account names it (an AZ ID was looked up by _resolve_zone_ids).
            subnet_id=network.private_subnets_by_az[zone_names_by_id.get(config.storage.lustre.availability_zone,
                                                                         config.storage.lustre.availability_zone)],
            security_group_id=network.security_groups.lustre.id,
            datasets_bucket=buckets.datasets_bucket,
            checkpoints_bucket=buckets.artifacts_bucket if config.multikueue is not None else None,
        ), on_aws.opts)
    if config.multikueue is not None:
        _replication(config, on_aws, buckets)
    return DataStage(buckets, checkpoints, registry, secrets, lustre)


def _replication(config: StackConfig, on_aws: OnAws, buckets: DataBuckets) -> None:
    """Datasets from the manager to each worker; checkpoints from each cluster to every other one
    (S3 does not replicate a replica again, so a worker's go to its fellow workers directly:
    data/replication.py)."""
    multikueue = config.multikueue
    assert multikueue is not None
    if multikueue.role == MANAGER:
        destinations = [d for w in multikueue.workers for d in (
            Destination(w.stack, w.region, "datasets", ""), Destination(w.stack, w.region, "artifacts", CHECKPOINTS_PREFIX))]
    else:
        destinations = [Destination(stack, region, "artifacts", CHECKPOINTS_PREFIX) for stack, region in (
            (str(multikueue.manager), multikueue.manager_region), *multikueue.sibling_workers)]
    CrossRegionReplication("replication", CrossRegionReplicationArgs(
        project=config.project, name_prefix=config.name_prefix, partition=arn_partition(config.region),
        region=config.region, account_id=on_aws.account_id,
        sources={"datasets": buckets.datasets_bucket, "artifacts": buckets.artifacts_bucket},
        source_key_arn=buckets.data_key.arn, destinations=destinations, depends_on=[buckets]), on_aws.opts)


def _workload_roles(config: StackConfig, on_aws: OnAws, data: DataStage) -> WorkloadRoles:
    """The Pod Identity roles of the trainer, the secrets sync and the EFS CSI driver."""
    return WorkloadRoles("workload-roles", WorkloadRolesArgs(
        environment=config.environment,
        region=config.region,
        cluster_name=config.cluster_name,
        training_namespace=config.training_namespace,
        account_id=on_aws.account_id,
        datasets_bucket=data.buckets.datasets_bucket,
        datasets_external=config.storage.datasets_bucket is not None,
        artifacts_bucket=data.buckets.artifacts_bucket,
        data_key_arn=data.buckets.data_key.arn,
        secret_arns=[secret.arn for secret in data.secrets.secrets.values()],
        secrets_key_arn=data.secrets.key.arn,
        file_system_arn=data.checkpoints.file_system.arn,
        access_point_arns=[ap.arn for ap in data.checkpoints.access_points.values()],
        # A worker syncs the secrets of its manager's teams (their tenancy here: components/team.py).
        team_readers_prefix=stack_name_prefix(config.project, str(config.multikueue.manager))
        if config.multikueue is not None and config.multikueue.role == WORKER else None,
    ), on_aws.opts)


def _cluster_services(config: StackConfig, on_aws: OnAws, cluster: ClusterStage) -> ProvisioningRequestApi:
    """What the nodes need to scale and to show their hardware: autoscaler, device plugins; and
    the ProvisioningRequest API the autoscaler and Kueue both need before they start."""
    pools = config.node_pools
    provisioning_api = ProvisioningRequestApi("provisioning-requests", ProvisioningRequestApiArgs(
        depends_on=cluster.node_groups), cluster.in_cluster)
    ClusterAutoscaler("cluster-autoscaler", ClusterAutoscalerArgs(
        cluster_name=config.cluster_name,
        cluster=cluster.cluster.eks,
        kubernetes_version=config.cluster.kubernetes_version,
        region=config.region,
        account_id=on_aws.account_id,
        pools=pools,
        system_pool=config.system_pool.name,
        depends_on=[*cluster.node_groups, provisioning_api],
        scale_down=config.scale_down,
    ), cluster.in_cluster)
    DevicePlugins("device-plugins", DevicePluginsArgs(
        nvidia=any(p.gpu for p in pools),
        efa=any(p.efa for p in pools),
        depends_on=cluster.node_groups,
    ), cluster.in_cluster)
    return provisioning_api


def _observability(config: StackConfig, on_aws: OnAws, cluster: ClusterStage) -> Observability:
    return Observability("observability", ObservabilityArgs(
        config=config.observability,
        cluster_name=config.cluster_name,
        cluster=cluster.cluster.eks,
        kubernetes_version=config.cluster.kubernetes_version,
        name_prefix=config.name_prefix,
        account_id=on_aws.account_id,
        depends_on=cluster.node_groups,
        logs_key_arn=on_aws.logs_key_arn,
        control_plane_log_group=cluster.cluster.log_group,
        region=config.region,
        watched=WatchedJobs(jobs=config.training.jobs, namespace=config.training_namespace, pools=config.node_pools,
                            storage=config.storage, team=False),
        efa=any(p.efa for p in config.node_pools),
        multikueue_workers=tuple(w.stack for w in config.multikueue.workers)
        if config.multikueue is not None and config.multikueue.role == MANAGER else (),
    ), on_aws.opts)


def _budget(config: StackConfig, on_aws: OnAws, observability: Observability) -> None:
    """The environment's monthly budget (every cost tagged with the environment), alerting the
    alarms' topic; the environment and cost-center tags activated for cost allocation."""
    if config.budget is not None:
        StackBudget("budget", StackBudgetArgs(
            config=config.budget,
            name_prefix=config.name_prefix,
            tags={"environment": config.environment},
            alert_topic_arn=observability.topic.arn,
            activate_tags=("environment", "cost-center"),
        ), on_aws.opts)


def _job_controllers(config: StackConfig, cluster: ClusterStage, provisioning_api: ProvisioningRequestApi) -> JobControllers:
    """Kueue and JobSet, and a Kueue flavor per GPU pool: what every tenant's queue and jobs need."""
    controllers = JobControllers("job-controllers", JobControllersArgs(
        system_pool=config.system_pool.name, depends_on=[*cluster.node_groups, provisioning_api]), cluster.in_cluster)
    ResourceFlavors("resource-flavors", ResourceFlavorsArgs(
        pools=_gpu_pools(config), depends_on=[controllers.kueue]), cluster.in_cluster)
    # A capacity block's queues hold before its end and admit again after it (workload/capacity_block.py).
    create_capacity_block_hold("capacity-block", config.node_pools, system_pool=config.system_pool.name,
                               opts=pulumi.ResourceOptions.merge(cluster.in_cluster,
                                                                 pulumi.ResourceOptions(depends_on=[controllers.kueue])))
    # Cluster-wide, so the platform's: every tenant's trainer pods may annotate only themselves.
    ProgressAdmissionPolicy("trainer-progress-policy", pulumi.ResourceOptions.merge(
        cluster.in_cluster, pulumi.ResourceOptions(depends_on=cluster.node_groups)))
    return controllers


def _load_balancer_controller(config: StackConfig, on_aws: OnAws, network: NetworkStage,
                              cluster: ClusterStage) -> LoadBalancerController:
    """The AWS Load Balancer Controller: the viewers' Ingresses become the environment's one ALB."""
    return LoadBalancerController("load-balancer-controller", LoadBalancerControllerArgs(
        cluster_name=config.cluster_name, cluster=cluster.cluster.eks, region=config.region,
        account_id=on_aws.account_id, vpc_id=network.network.vpc.id, system_pool=config.system_pool.name,
        depends_on=cluster.node_groups,
    ), cluster.in_cluster)


def _training_tenant(config: StackConfig, cluster: ClusterStage, data: DataStage, roles: WorkloadRoles,
                     controllers: JobControllers, load_balancer: LoadBalancerController) -> TrainingTenant:
    """The environment's training namespace, its queue, volumes, secrets, trainer identity and jobs."""
    return training_tenant(TrainingTenantArgs(
        names=PLATFORM_TENANT,
        stack=config.stack,
        namespace=config.training_namespace,
        environment=config.environment,
        team=None,
        region=config.region,
        cluster_name=cluster.cluster.eks.name,
        kubernetes_version=config.cluster.kubernetes_version,
        gpu_pools=_gpu_pools(config),
        fabric=config.fabric,
        training=config.training,
        cleanup_image=config.training.cleanup_image,
        system_pool=config.system_pool.name,
        checkpoint_cleanup=config.storage.checkpoint_cleanup,
        storage=TenantStorage(
            sources=VolumeSources(file_system_id=data.checkpoints.file_system.id,
                                  checkpoint_access_point_id=data.checkpoints.access_points[TRAINING_WORKLOAD].id,
                                  datasets_bucket=data.buckets.datasets_bucket),
            lustre=LustreVolume(file_system_id=data.lustre.file_system.id, dns_name=data.lustre.file_system.dns_name,
                                mount_name=data.lustre.file_system.mount_name) if data.lustre else None,
            efs_csi_role_arn=roles.efs_csi.arn,
        ),
        secrets=TenantSecrets(
            remote_keys={name: secret_name(config.project, config.environment, name) for name in config.secrets.names},
            role_arn=roles.secrets_sync.arn,
        ),
        trainer_role_arn=roles.trainer.arn,
        namespace_depends_on=cluster.node_groups,
        queue_depends_on=[controllers.kueue],
        viewer=exposure_of(config),
        viewer_depends_on=[load_balancer.release],
    ), cluster.in_cluster)


def _multikueue(config: StackConfig, on_aws: OnAws, cluster: ClusterStage, depends_on: list[pulumi.Resource]) -> None:
    """multiKueue: the manager's objects, credential rotation and dispatcher role, or a worker's
    access entry for that role; either way the namespace's any-region LocalQueue
    (components/workload/multikueue.py)."""
    multikueue = config.multikueue
    if multikueue is None:
        return
    namespace = config.training_namespace
    manager = config.stack if multikueue.role == MANAGER else str(multikueue.manager)
    role_name = dispatcher_role_name(config.project, manager)
    if multikueue.role == MANAGER:
        MultiKueueManager("multikueue", MultiKueueManagerArgs(
            config=multikueue, project=config.project, cohort=config.environment,
            training_namespace=config.training_namespace,
            system_pool=config.system_pool.name, cluster_name=cluster.cluster.eks.name, dispatcher_role_name=role_name,
            trust_policy=on_aws.account_id.apply(lambda account: policies.workload_trust_policy(
                account, cluster_name=config.cluster_name, namespace=KUEUE_NAMESPACE, service_account=ROTATION)),
            partition=arn_partition(config.region),
            dns_suffix=aws.get_partition_output(opts=pulumi.InvokeOutputOptions(provider=on_aws.provider)).dns_suffix,
            account_id=on_aws.account_id, aws_opts=on_aws.opts, depends_on=depends_on), cluster.in_cluster)
        cluster_queue = ANY_REGION
    else:
        MultiKueueWorker("multikueue", MultiKueueWorkerArgs(
            cluster_name=cluster.cluster.eks.name,
            dispatcher_role_arn=on_aws.account_id.apply(
                lambda account: f"arn:{arn_partition(config.region)}:iam::{account}:role/{role_name}"),
            namespace=namespace, aws_opts=on_aws.opts, depends_on=depends_on), cluster.in_cluster)
        cluster_queue = namespace  # the namespace's own ClusterQueue (TrainingQueue)
    custom_resource("multikueue-any-region-queue", any_region_local_queue(namespace, cluster_queue),
                    pulumi.ResourceOptions.merge(cluster.in_cluster, pulumi.ResourceOptions(depends_on=depends_on)))


def probe_pool(config: StackConfig) -> str:
    """The GPU pool verify's MultiKueue probe asks a worker for: the cheapest node to start (spot
    before on-demand, the fewest GPUs). An environment's regions are planned from one template, so a
    worker has a pool of that name (a worker without one: the probe is never admitted, and says so)."""
    pools = _gpu_pools(config)
    if not pools:
        return ""
    return min(pools, key=lambda p: (p.capacity != Capacity.SPOT, p.gpus_per_node, p.name)).name


def _gpu_pools(config: StackConfig) -> list[NodePoolConfig]:
    return [pool for pool in config.node_pools if pool.gpu]


def _outputs(config: StackConfig, network: NetworkStage, cluster: ClusterStage, data: DataStage,
             roles: WorkloadRoles, observability: Observability) -> dict[str, pulumi.Input]:
    return {
        "environment": config.environment,
        "region": config.region,
        "vpcId": network.network.vpc.id,
        "privateSubnetIds": [s.id for s in network.network.private_subnets],
        "ciRunnerSecurityGroupId": network.ci_runner.runner.id,
        "clusterName": cluster.cluster.eks.name,
        "kubeconfig": cluster.cluster.kubeconfig,
        "nodePools": pool_outputs(config.node_pools),
        # What scripts/verify checks the live cluster against.
        "training": training_outputs(namespace=config.training_namespace, local_queue=LOCAL_QUEUE,
                                     jobs=config.training.jobs, has_secrets=bool(config.secrets.names)),
        **fabric_outputs(config.fabric),
        "trainerRepositoryUrl": data.registry.repository_url,
        "datasetsBucket": data.buckets.datasets_bucket,
        "artifactsBucket": data.buckets.artifacts_bucket,
        "checkpointFileSystemId": data.checkpoints.file_system.id,
        **({"lustreFileSystemId": data.lustre.file_system.id} if data.lustre else {}),
        # What team stacks attach to (also in the platform contract, with the config).
        "dataKeyArn": data.buckets.data_key.arn,
        "secretsSyncRoleArn": roles.secrets_sync.arn,
        "alertTopicArn": observability.topic.arn,
        "dashboardUrl": observability.dashboard_url,  # scripts/verify reports it
        # What scripts/verify checks on a MultiKueue manager (verify/multikueue.py).
        **({"multiKueue": {"role": config.multikueue.role, "queue": ANY_REGION,
                           "workers": [w.stack for w in config.multikueue.workers],
                           "probeImage": config.training.cleanup_image,
                           "probePool": probe_pool(config)}} if config.multikueue else {}),
    }
