"""Composition root of a team stack (team-<team>-<env>): team-scoped things only.

It reads of its environment's deployed platform stack only the versioned platform contract
(components/config/platform_contract.py: the platform's config and the resources teams attach
to), from the SSM parameter the platform publishes it in: not through a StackReference, which on
a DIY backend decrypts the platform state's data key (open issue pulumi/pulumi#21436), a right no
team deploy role holds. The team's config is judged again against that contract before
any resource is made; it creates no VPC, cluster, node pool or bucket:

namespace `team-<team>` (same guard rails as the environment's) -> LocalQueue onto the ClusterQueue
`team-<team>` the platform made from its registry of teams -> the team's trainer role (its own artifacts
prefix, its own secrets) -> secrets in Secrets Manager, synced by a store that assumes a reader role
for this team only -> volume claims (the platform made the volumes and the team's EFS access point:
workload/team_volumes.py) -> jobs.

Where the platform is a MultiKueue manager, the team's jobs may be dispatched to the manager's
workers; so the stack also reads each worker's contract (its parameter, in the worker's region) and makes
the team's tenancy there (workload/worker_tenant.py: namespace, queues, identity, volumes,
secrets; no jobs), with that worker's AWS and Kubernetes providers.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common.boundary import apply_permissions_boundary
from components.common.manifests import custom_resource
from components.common.provider import aws_provider
from components.config import ConfigError, ConfigProblem, StackConfig, TeamStackConfig
from components.config.job_context import job_context_data
from components.config.multikueue import WorkerCluster
from components.config.platform_contract import (
    JUDGED_AGAINST_DEPLOYED_PLATFORM,
    PlatformContract,
    contract_parameter_name,
    decoded_contract_parameter,
    missing_contract_parameter,
    platform_of_contract,
    read_contract,
    worker_problems,
    worker_stack_reference,
    workers_of,
)
from components.config.teams import team_queue
from components.identity import policies
from components.identity.workload_roles import TRAINER_SERVICE_ACCOUNT, role_policy, workload_role
from components.observability.budget import StackBudget, StackBudgetArgs
from components.observability.team_watch import TeamWatchArgs, team_watch
from components.observability.training_metrics import WatchedJobs
from components.secrets.store import TrainingSecrets, TrainingSecretsArgs, secret_name
from components.workload.job_context import job_context_config_map
from components.workload.multikueue import (
    any_region_local_queue,
    team_any_region_queue_name,
)
from components.workload.queues import LOCAL_QUEUE
from components.workload.team_members import TeamMembers, TeamMembersArgs
from components.workload.tenant import (
    TEAM_TENANT,
    TenantSecrets,
    TenantStorage,
    TrainingTenant,
    TrainingTenantArgs,
    training_tenant,
)
from components.workload.verify_outputs import fabric_outputs, pool_outputs, training_outputs
from components.workload.viewer import exposure_of
from components.workload.worker_tenant import WorkerTenant, WorkerTenantArgs, worker_cluster_provider_name

GET_PARAMETER = "aws:ssm/getParameter:getParameter"
"""The invoke behind aws.ssm.get_parameter (pulumi-aws): its result's `insecureValue` is the value."""
PARAMETER_NOT_FOUND = ("ParameterNotFound", "couldn't find resource")
"""How the invoke's error says the parameter does not exist: SSM's error code for GetParameter (AWS
Systems Manager API Reference, GetParameter, Errors), or terraform-provider-aws's not-found wording
(internal/tfresource NotFoundError), should the provider replace the code with it. Not checked
against a real account: the offline plan answers with the code."""
TEAM_OUTPUTS = ("environment", "team", "namespace", "trainerRoleArn", "artifactsPrefix", "region", "clusterName",
                "kubeconfig", "nodePools", "ncclPortRange", "rendezvousPorts", "training", "dashboardUrl")
"""The stack's outputs; named up front, because the engine takes a stack's outputs when the
program returns, before the contract (and so the values) arrive."""


@dataclass(frozen=True)
class WorkerPlatform:
    """A MultiKueue worker of the team's platform, as its own contract describes it."""

    worker: WorkerCluster
    """The manager's entry for it (stack, region, gpus)."""
    config: StackConfig
    """The worker platform stack's config, as deployed."""
    resources: dict[str, str]
    """Its resources the team's tenancy attaches to (cluster, file system, buckets, roles)."""
    provider: aws.Provider
    """The AWS provider of the worker's region: its contract was read with it, the team's tenancy there uses it."""


@dataclass(frozen=True)
class TeamOnPlatform:
    """A team stack judged against its platform's contract (and its workers')."""

    config: TeamStackConfig
    """Bound: its `platform` is the contract's."""
    resources: dict[str, str]
    """The platform's resources the team attaches to (platform_contract.CONTRACT_RESOURCES)."""
    job_context: dict[str, str]
    """The data of the namespace's job context ConfigMap (components/config/job_context.py)."""
    workers: tuple[WorkerPlatform, ...] = ()
    """Where the platform is a MultiKueue manager: each of its workers."""


@dataclass(frozen=True)
class TeamEngineConfig:
    """The team stack's own config as the engine passes it, for its job context (published there
    without its secret values, as a platform's contract publishes the platform's)."""

    values: Mapping[str, str]
    secret_keys: Collection[str]


def build_team(config: TeamStackConfig, *, bind: Callable[[StackConfig], StackConfig | TeamStackConfig],
               engine: TeamEngineConfig, today: date | None = None) -> dict[str, pulumi.Input]:
    """`bind(platform)` loads this team stack's config again, judged against that platform."""
    provider = aws_provider(config)
    # Every resource is made once the contract is read and the config passed against it: a
    # contract of the wrong version, or a job on a pool the deployed platform lacks, stops the
    # run before anything exists. The parameter is read in previews too, so the preview shows
    # these resources as `pulumi up` creates them.
    built = published_contract(config.project, config.platform_stack, region=config.region, provider=provider).apply(
        lambda contract: _with_workers(_on_platform(config, contract, bind, engine, today), provider, today))
    return {name: built.apply(lambda outputs, name=name: outputs[name]) for name in TEAM_OUTPUTS}


def published_contract(project: str, reference: str, *, region: str, provider: aws.Provider) -> pulumi.Output[Any]:
    """The contract platform stack `reference` (organization/<project>/<stack>) published in its SSM
    parameter (decoded; the text as it is where it is not a contract, which read_contract refuses),
    read with `provider` (its region's).

    Not its `platformContract` output through a StackReference: reading any output of a DIY-backend
    stack decrypts that stack's data key, which no team deploy role may do (config/platform_contract.py).
    Its `insecure_value`: the contract holds no secret (the platform refuses one:
    platform._publish_contract), and `value` comes back marked secret, which would make every output
    built from it secret. A parameter not there yet is a ConfigError naming the fix, not the invoke's
    traceback. Awaited as a plain invoke, not `aws.ssm.get_parameter_output`: the engine keeps a
    failed Output to raise again when the program ends, so its error would race this one."""
    name = contract_parameter_name(project, reference.rsplit("/", 1)[-1])

    async def value() -> Any:
        try:
            parameter = await pulumi.runtime.invoke_async(GET_PARAMETER, {"name": name},
                                                          pulumi.InvokeOptions(provider=provider))
        except Exception as error:  # the invoke's own error, as the engine words it
            if any(wording in str(error) for wording in PARAMETER_NOT_FOUND):
                raise missing_contract_parameter(name, region=region, reference=reference) from None
            raise
        if not parameter:  # an unknown read: only where the provider itself is unknown
            raise missing_contract_parameter(name, region=region, reference=reference)
        return decoded_contract_parameter(str(parameter.get("insecureValue", "")))

    return pulumi.Output.from_input(value())


def _with_workers(team: TeamOnPlatform, provider: aws.Provider, today: date | None) -> pulumi.Output[dict[str, Any]]:
    """The team's resources once every worker's contract (its parameter, read in its own region with
    the provider the team's tenancy there uses) was read and the team judged against it too: a worker
    deployed from another commit, or one without the team's quota pools, stops the run before anything exists."""
    config = team.config
    workers = workers_of(config.judged_platform)
    providers = [aws_provider(config, region=w.region, resource_name=f"aws-{w.stack}") for w in workers]
    contracts = pulumi.Output.all(*[published_contract(config.project, worker_stack_reference(config.project, w.stack),
                                                       region=w.region, provider=p)
                                    for w, p in zip(workers, providers, strict=True)])
    return contracts.apply(lambda values: _build(
        replace(team, workers=_on_workers(team, workers, values, providers, today)), provider))


def _on_workers(team: TeamOnPlatform, workers: tuple[WorkerCluster, ...], values: list[Any],
                providers: list[aws.Provider], today: date | None) -> tuple[WorkerPlatform, ...]:
    config, found, problems = team.config, [], []
    for worker, value, provider in zip(workers, values, providers, strict=True):
        try:
            contract = read_contract(value, reference=worker_stack_reference(config.project, worker.stack),
                                     project=config.project)
            platform = platform_of_contract(contract, project=config.project, environment=worker.stack, today=today)
        except ConfigError as error:
            problems += error.problems
            continue
        problems += worker_problems(config, worker, platform)
        problems += _access_point_problems(contract, config, where=f"worker stack '{worker.stack}'",
                                           deploy=f"deploy {worker.stack} from this commit first (pulumi up --stack "
                                                  f"{worker.stack}), then this team stack")
        found.append(WorkerPlatform(worker, platform, contract.resources, provider))
    if problems:
        raise ConfigError(problems, judged_against=JUDGED_AGAINST_DEPLOYED_PLATFORM)
    return tuple(found)


def _on_platform(config: TeamStackConfig, value: Any, bind: Callable[[StackConfig], StackConfig | TeamStackConfig],
                 engine: TeamEngineConfig, today: date | None) -> TeamOnPlatform:
    try:
        contract = read_contract(value, reference=config.platform_stack, project=config.project)
        platform = platform_of_contract(contract, project=config.project, environment=config.environment, today=today)
        bound = bind(platform)
    except ConfigError as error:
        raise ConfigError(error.problems, judged_against=JUDGED_AGAINST_DEPLOYED_PLATFORM) from None
    if not isinstance(bound, TeamStackConfig) or bound.platform is None:
        raise ConfigError([ConfigProblem(f"stack '{config.stack}'", "is not a team stack")])
    problems = _access_point_problems(contract, bound, where=f"platform stack {config.platform_stack}",
                                      deploy=f"deploy {bound.environment} from this commit first (pulumi up --stack "
                                             f"{bound.environment}), then this team stack")
    if problems:
        raise ConfigError(problems, judged_against=JUDGED_AGAINST_DEPLOYED_PLATFORM)
    for warning in bound.warnings:
        pulumi.log.warn(warning)
    # The contract's config as published (text), which read_contract accepted: the platform as deployed.
    job_context = job_context_data(stack=bound.stack, platform_config=value["config"], team_engine_config=engine.values,
                                   team_secret_keys=engine.secret_keys, project=bound.project,
                                   stack_jobs=[job.name for job in bound.training.jobs])
    return TeamOnPlatform(bound, contract.resources, job_context)


def _access_point_problems(contract: PlatformContract, config: TeamStackConfig, *, where: str,
                           deploy: str) -> list[ConfigProblem]:
    """The platform makes the team's checkpoints access point and volumes (workload/team_volumes.py),
    which this stack's claims bind to: one deployed before it did would leave them unbound."""
    try:
        contract.access_point_of(config.team, where=where, deploy=deploy)
    except ConfigError as error:
        return list(error.problems)
    return []


def _build(team: TeamOnPlatform, provider: aws.Provider) -> dict[str, Any]:
    config, platform_config, platform = team.config, team.config.judged_platform, team.resources
    apply_permissions_boundary(config.iam_permissions_boundary)
    on_aws = pulumi.ResourceOptions(providers=[provider])
    k8s_provider = k8s.Provider("platform-cluster", kubeconfig=platform["kubeconfig"])
    in_cluster = pulumi.ResourceOptions(providers=[provider, k8s_provider])
    namespace = _registered_namespace(config)

    # --- AWS side: secrets, the team's part of the file system, roles -------------------------
    account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=provider)).account_id
    secrets = TrainingSecrets("team-secrets", TrainingSecretsArgs(
        config=config.secrets, project=config.project, environment=config.environment,
        name_prefix=config.name_prefix, account_id=account_id, team=config.team,
    ), on_aws)
    trainer_role, secrets_reader = _team_roles(team, secrets, account_id, on_aws)

    # --- in the cluster: namespace, queue, identity, volumes, secrets, jobs --------------------
    tenant = _team_tenant(team, trainer_role.arn, secrets_reader.arn, in_cluster)
    # What `gpu-training job submit` judges an ad-hoc job against (docs/run-your-first-job.md).
    job_context_config_map("team-job-context", tenant.namespace.name, team.job_context,
                           pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[tenant.namespace])))
    # The team's people: access to its namespace only (workload/team_members.py says why here).
    if config.members:
        TeamMembers("team-members", TeamMembersArgs(
            namespace=namespace, cluster_name=platform["clusterName"], members=config.members,
            depends_on=[tenant.namespace]), in_cluster)

    # --- one queue over the environment's regions, where the platform is a MultiKueue manager ----
    if team.workers:
        _any_region_queue(team, tenant, in_cluster)
        for worker in team.workers:
            _team_on_worker(team, worker, secrets_reader, trainer_role, account_id, on_aws)

    # --- the team's budget: its own tagged costs, alerting the platform's topic ----------------
    if config.budget is not None:
        StackBudget("team-budget", StackBudgetArgs(
            config=config.budget, name_prefix=config.name_prefix,
            tags={"environment": config.environment, "team": config.team},
            alert_topic_arn=platform["alertTopicArn"], activate_tags=("team",),
        ), on_aws)

    # --- the team's own jobs: their alarms (to the platform's topic) and dashboard ------------
    dashboard_url = team_watch(TeamWatchArgs(
        watched=WatchedJobs(jobs=config.training.jobs, namespace=namespace, pools=platform_config.node_pools,
                            storage=platform_config.storage, team=True),
        config=platform_config.observability, cluster_name=platform_config.cluster_name, region=config.region,
        name_prefix=config.name_prefix, topic_arn=platform["alertTopicArn"], title=f"team {config.team}"), on_aws)

    outputs = {
        "environment": config.environment,
        "team": config.team,
        "namespace": tenant.namespace.name,
        "trainerRoleArn": trainer_role.arn,
        "artifactsPrefix": f"s3://{platform['artifactsBucket']}/teams/{config.team}/",
        # What scripts/verify needs to check this team's jobs on the platform's cluster.
        "region": config.region,
        "clusterName": platform["clusterName"],
        "kubeconfig": platform["kubeconfig"],
        "nodePools": pool_outputs(platform_config.node_pools),
        **fabric_outputs(platform_config.fabric),
        "training": training_outputs(namespace=namespace, local_queue=LOCAL_QUEUE, jobs=config.training.jobs,
                                     has_secrets=bool(config.secrets.names)),
        "dashboardUrl": dashboard_url,
    }
    assert tuple(outputs) == TEAM_OUTPUTS, "TEAM_OUTPUTS names every output, in order"
    return outputs


def _registered_namespace(config: TeamStackConfig) -> str:
    """The team's namespace as its platform's registry of teams names it: the platform made it
    (workload/team_tenancy.py), and the team stack only puts its objects in it."""
    row = team_queue(config.judged_platform.teams, config.team)
    if row is None:  # binding to the contract refuses it first (config/teams.py); kept for a clear error
        raise ConfigError([ConfigProblem(f"{config.project}:teams of {config.platform_stack}",
                                         "does not list this team, whose namespace the platform makes",
                                         "add the team's row to the platform stack's teams and deploy it first",
                                         value=config.team)],
                          judged_against=JUDGED_AGAINST_DEPLOYED_PLATFORM)
    assert row.namespace == config.training_namespace, "one naming of team-<team> (TeamQueueConfig.namespace)"
    return row.namespace


def _team_tenant(team: TeamOnPlatform, trainer_role_arn: pulumi.Input[str], secrets_reader_arn: pulumi.Input[str],
                 in_cluster: pulumi.ResourceOptions) -> TrainingTenant:
    """The team's namespace on the platform's cluster: its queue, identity, volumes, secrets and jobs,
    on the platform's pools, fabric and file system."""
    config, platform_config, platform = team.config, team.config.judged_platform, team.resources
    namespace = config.training_namespace
    return training_tenant(TrainingTenantArgs(
        names=TEAM_TENANT,
        stack=config.stack,
        namespace=namespace,
        environment=config.environment,
        team=config.team,
        region=config.region,
        cluster_name=platform["clusterName"],
        kubernetes_version=platform_config.cluster.kubernetes_version,
        gpu_pools=[pool for pool in platform_config.node_pools if pool.gpu],
        fabric=platform_config.fabric,
        training=config.training,
        cleanup_image=config.training.cleanup_image or platform_config.training.cleanup_image,
        system_pool=platform_config.system_pool.name,
        checkpoint_cleanup=platform_config.storage.checkpoint_cleanup,
        # The claims only: the platform made the volumes, on the team's access point (team_volumes.py).
        storage=TenantStorage(sources=None),
        secrets=TenantSecrets(remote_keys={n: secret_name(config.project, config.environment, n, config.team)
                                           for n in config.secrets.names},
                              assume_role_arn=secrets_reader_arn),
        trainer_role_arn=trainer_role_arn,
        namespace_depends_on=[],
        # The platform's ALB, security group and controller, which the team's Ingress joins.
        viewer=exposure_of(platform_config),
        # The platform made the team's ClusterQueue from its registry of teams (workload/team_queues.py).
        cluster_queue_made_by_platform=True,
    ), in_cluster)


def _team_roles(team: TeamOnPlatform, secrets: TrainingSecrets, account_id: pulumi.Output[str],
                on_aws: pulumi.ResourceOptions) -> tuple[aws.iam.Role, aws.iam.Role]:
    """The team's trainer role (its own artifacts prefix and secrets), and the role the platform's
    External Secrets controller assumes to read this team's secrets only."""
    config, platform_config, platform = team.config, team.config.judged_platform, team.resources
    secret_arns = [s.arn for s in secrets.secrets.values()]
    trainer_role = _team_role(
        "team-trainer", config, on_aws, name=policies.team_trainer_role_name(config.name_prefix),
        # The manager's cluster, and each worker's where a dispatched job runs.
        trust=account_id.apply(lambda account: policies.workload_trust_policy(
            account, cluster_name=[platform_config.cluster_name, *(w.resources["clusterName"] for w in team.workers)],
            namespace=config.training_namespace, service_account=TRAINER_SERVICE_ACCOUNT)),
        policy=pulumi.Output.all(
            account_id=account_id,
            datasets_bucket=platform["datasetsBucket"],
            artifacts_bucket=platform["artifactsBucket"],
            data_key_arn=platform["dataKeyArn"],
            secret_arns=pulumi.Output.all(*secret_arns),
            secrets_key_arn=secrets.key.arn,
        ).apply(lambda v: policies.trainer_policy(
            region=config.region, datasets_external=platform_config.storage.datasets_bucket is not None,
            artifacts_prefix=f"teams/{config.team}/", **v)),
    )
    secrets_reader = _team_role(
        "team-secrets-reader", config, on_aws,
        name=policies.team_secrets_reader_role_name(platform_config.name_prefix, config.team),
        # The platform's External Secrets role, and each MultiKueue worker's (which may assume its
        # manager's team readers: WorkloadRolesArgs.team_readers_prefix).
        trust=policies.assumed_by_role_trust_policy(
            platform["secretsSyncRoleArn"] if not team.workers
            else [platform["secretsSyncRoleArn"], *(w.resources["secretsSyncRoleArn"] for w in team.workers)]),
        policy=pulumi.Output.all(secret_arns=pulumi.Output.all(*secret_arns), secrets_key_arn=secrets.key.arn).apply(
            lambda v: policies.secrets_reader_policy(region=config.region, **v)) if secret_arns else None,
    )
    return trainer_role, secrets_reader


def _team_role(resource_name: str, config: TeamStackConfig, opts: pulumi.ResourceOptions, *,
               trust: pulumi.Input[str], policy: pulumi.Input[str] | None, name: str | None = None) -> aws.iam.Role:
    role = workload_role(resource_name, name=name, trust=trust, environment=config.environment, region=config.region,
                         tags={"workload": resource_name}, opts=opts)
    if policy is not None:
        role_policy(resource_name, role, policy, opts)
    return role


def _any_region_queue(team: TeamOnPlatform, tenant: TrainingTenant, in_cluster: pulumi.ResourceOptions) -> None:
    """On the manager: the team's LocalQueue `any-region` onto its own MultiKueue ClusterQueue, which
    the platform made from its registry of teams (workload/team_queues.py)."""
    namespace = team.config.training_namespace
    after_namespace = pulumi.ResourceOptions.merge(in_cluster, pulumi.ResourceOptions(depends_on=[tenant.namespace]))
    custom_resource("team-any-region-queue", any_region_local_queue(namespace, team_any_region_queue_name(namespace)),
                    after_namespace)


def _team_on_worker(team: TeamOnPlatform, worker: WorkerPlatform, secrets_reader: aws.iam.Role,
                    trainer_role: aws.iam.Role, account_id: pulumi.Output[str],
                    on_aws: pulumi.ResourceOptions) -> WorkerTenant:
    """The team's tenancy on one worker: the trainer role's access to the worker's buckets, and the
    namespace's objects (its store assumes the team's one secrets reader, which trusts the worker's
    External Secrets role), all through the worker's own providers (IAM is global: the stack's)."""
    config, platform, stack = team.config, worker.config, worker.worker.stack
    resources = worker.resources
    worker_aws = worker.provider
    worker_cluster = k8s.Provider(worker_cluster_provider_name(stack), kubeconfig=resources["kubeconfig"])
    # The trainer's pods there read the worker's datasets replica and write the team's prefix of its
    # artifacts bucket, with the worker's data key; its secrets come synced, not read by the pods.
    aws.iam.RolePolicy(f"team-trainer-{stack}-access", role=trainer_role.id,
                       policy=account_id.apply(lambda account: policies.trainer_policy(
                           region=platform.region, account_id=account,
                           datasets_bucket=resources["datasetsBucket"],
                           datasets_external=platform.storage.datasets_bucket is not None,
                           artifacts_bucket=resources["artifactsBucket"], data_key_arn=resources["dataKeyArn"],
                           secret_arns=[], secrets_key_arn="", artifacts_prefix=f"teams/{config.team}/")),
                       opts=on_aws)
    return WorkerTenant(f"{stack}-team", WorkerTenantArgs(
        namespace=config.training_namespace, environment=config.environment, team=config.team,
        region=platform.region, cluster_name=resources["clusterName"],
        kubernetes_version=platform.cluster.kubernetes_version,
        gpu_pools=[pool for pool in platform.node_pools if pool.gpu], training=config.training,
        secrets_region=config.region,
        remote_keys={n: secret_name(config.project, config.environment, n, config.team) for n in config.secrets.names},
        secrets_reader_arn=secrets_reader.arn, trainer_role_arn=trainer_role.arn,
    ), pulumi.ResourceOptions(providers=[worker_aws, worker_cluster]))
