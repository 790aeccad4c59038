"""Composition root of a team stack (team-<team>-<env>): team-scoped things only.

It reads its environment's platform stack through a StackReference (cluster, buckets, file
system, keys, the External Secrets role) and creates no VPC, cluster, node pool or bucket:

namespace `team-<team>` (same guard rails as the environment's) -> ClusterQueue `team-<team>` in
the environment's cohort -> the team's trainer role (its own artifacts prefix, its own EFS
access point, its own secrets) -> secrets in Secrets Manager, synced by a store that assumes a
reader role for this team only -> volumes -> jobs.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common.boundary import apply_permissions_boundary
from components.common.provider import aws_provider
from components.config import TeamStackConfig
from components.data.file_system import access_point
from components.identity import policies
from components.identity.workload_roles import TRAINER_SERVICE_ACCOUNT, role_policy, workload_role
from components.observability.budget import StackBudget, StackBudgetArgs
from components.secrets.store import TrainingSecrets, TrainingSecretsArgs, secret_name
from components.workload.queues import LOCAL_QUEUE
from components.workload.tenant import TEAM_TENANT, TenantSecrets, TenantStorage, TrainingTenantArgs, training_tenant
from components.workload.verify_outputs import fabric_outputs, pool_outputs, training_outputs


def build_team(config: TeamStackConfig) -> dict[str, pulumi.Input]:
    apply_permissions_boundary(config.iam_permissions_boundary)
    platform_config = config.platform
    provider = aws_provider(config)
    on_aws = pulumi.ResourceOptions(providers=[provider])
    account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=provider)).account_id
    platform = pulumi.StackReference("platform", stack_name=config.platform_stack)
    cluster_name = platform.require_output("clusterName")
    k8s_provider = k8s.Provider("platform-cluster", kubeconfig=platform.require_output("kubeconfig"))
    in_cluster = pulumi.ResourceOptions(providers=[provider, k8s_provider])
    namespace = config.training_namespace
    gpu_pools = [p for p in platform_config.node_pools if p.gpu]

    # --- AWS side: secrets, the team's part of the file system, roles -------------------------
    secrets = TrainingSecrets("team-secrets", TrainingSecretsArgs(
        config=config.secrets, project=config.project, environment=config.environment,
        name_prefix=config.name_prefix, account_id=account_id, team=config.team,
    ), on_aws)
    checkpoint_access_point = access_point(
        "team-checkpoints-ap", file_system_id=platform.require_output("checkpointFileSystemId"),
        workload=namespace, name_prefix=config.name_prefix, opts=on_aws)
    secret_arns = [s.arn for s in secrets.secrets.values()]
    trainer_role = _team_role(
        "team-trainer", config, on_aws,
        trust=account_id.apply(lambda account: policies.workload_trust_policy(
            account, cluster_name=platform_config.cluster_name, namespace=namespace,
            service_account=TRAINER_SERVICE_ACCOUNT)),
        policy=pulumi.Output.all(
            account_id=account_id,
            datasets_bucket=platform.require_output("datasetsBucket"),
            artifacts_bucket=platform.require_output("artifactsBucket"),
            data_key_arn=platform.require_output("dataKeyArn"),
            secret_arns=pulumi.Output.all(*secret_arns),
            secrets_key_arn=secrets.key.arn,
        ).apply(lambda v: policies.trainer_policy(
            region=config.region, datasets_external=platform_config.storage.datasets_bucket is not None,
            artifacts_prefix=f"teams/{config.team}/", **v)),
    )
    secrets_reader = _team_role(
        "team-secrets-reader", config, on_aws,
        name=policies.team_secrets_reader_role_name(platform_config.name_prefix, config.team),
        trust=platform.require_output("secretsSyncRoleArn").apply(policies.assumed_by_role_trust_policy),
        policy=pulumi.Output.all(secret_arns=pulumi.Output.all(*secret_arns), secrets_key_arn=secrets.key.arn).apply(
            lambda v: policies.secrets_reader_policy(region=config.region, **v)) if secret_arns else None,
    )

    # --- in the cluster: namespace, queue, identity, volumes, secrets, jobs --------------------
    tenant = training_tenant(TrainingTenantArgs(
        names=TEAM_TENANT,
        namespace=namespace,
        environment=config.environment,
        team=config.team,
        region=config.region,
        cluster_name=cluster_name,
        kubernetes_version=platform_config.cluster.kubernetes_version,
        gpu_pools=gpu_pools,
        fabric=platform_config.fabric,
        training=config.training,
        cleanup_image=config.training.cleanup_image or platform_config.training.cleanup_image,
        system_pool=platform_config.system_pool.name,
        checkpoint_cleanup=platform_config.storage.checkpoint_cleanup,
        storage=TenantStorage(file_system_id=platform.require_output("checkpointFileSystemId"),
                              checkpoint_access_point_id=checkpoint_access_point.id,
                              datasets_bucket=platform.require_output("datasetsBucket")),
        secrets=TenantSecrets(remote_keys={n: secret_name(config.project, config.environment, n, config.team)
                                           for n in config.secrets.names},
                              assume_role_arn=secrets_reader.arn),
        trainer_role_arn=trainer_role.arn,
        namespace_depends_on=[],
    ), in_cluster)

    # --- the team's budget: its own tagged costs, alerting the platform's topic ----------------
    if config.budget is not None:
        StackBudget("team-budget", StackBudgetArgs(
            config=config.budget, name_prefix=config.name_prefix,
            tags={"environment": config.environment, "team": config.team},
            alert_topic_arn=platform.require_output("alertTopicArn"), activate_tags=("team",),
        ), on_aws)

    return {
        "environment": config.environment,
        "team": config.team,
        "namespace": tenant.namespace.namespace.metadata.name,
        "trainerRoleArn": trainer_role.arn,
        "artifactsPrefix": platform.require_output("artifactsBucket").apply(lambda b: f"s3://{b}/teams/{config.team}/"),
        # What scripts/verify needs to check this team's jobs on the platform's cluster.
        "region": config.region,
        "clusterName": cluster_name,
        "kubeconfig": platform.require_output("kubeconfig"),
        "nodePools": pool_outputs(platform_config.node_pools),
        **fabric_outputs(platform_config.fabric),
        "training": training_outputs(namespace=namespace, local_queue=LOCAL_QUEUE, jobs=config.training.jobs,
                                     has_secrets=bool(config.secrets.names)),
    }


def _team_role(resource_name: str, config: TeamStackConfig, opts: pulumi.ResourceOptions, *,
               trust: pulumi.Input[str], policy: pulumi.Input[str] | None, name: str | None = None) -> aws.iam.Role:
    role = workload_role(resource_name, name=name, trust=trust, environment=config.environment,
                         tags={"workload": resource_name}, opts=opts)
    if policy is not None:
        role_policy(resource_name, role, policy, opts)
    return role
