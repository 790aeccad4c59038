"""Workload identity: IAM roles for the pods that touch data, bound with EKS Pod Identity.

No static keys anywhere (CIS EKS 5.2.1). Three roles per environment, each trusted by EKS Pod
Identity for exactly one service account of one namespace of this environment's cluster:

| role          | service account                        | may                                         |
|---------------|----------------------------------------|---------------------------------------------|
| trainer       | <training namespace>/trainer           | read datasets; write checkpoints/, models/; |
|               |                                        | read its secrets; its keys via S3/SM only   |
| secrets-sync  | external-secrets/external-secrets      | read this environment's secrets             |
| efs-csi       | kube-system/efs-csi-controller-sa      | describe this file system and access points |

On dev and staging every role also carries an explicit Deny on prod data (data_policies).
`WorkloadRoles` is AWS-only and needs no cluster; `TrainerServiceAccount` makes the Kubernetes
side (service account + Pod Identity association) once the cluster exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common.iam import pod_identity_trust_policy
from components.facts.regions import arn_partition
from components.identity import policies

TRAINER_SERVICE_ACCOUNT = "trainer"
SECRETS_SYNC_NAMESPACE = "external-secrets"
SECRETS_SYNC_SERVICE_ACCOUNT = "external-secrets"
EFS_CSI_NAMESPACE = "kube-system"
EFS_CSI_SERVICE_ACCOUNT = "efs-csi-controller-sa"


@dataclass(frozen=True)
class WorkloadRolesArgs:
    environment: str
    """Every role of a non-prod environment also gets the explicit Deny of prod data."""
    region: str
    """The region of the keys and secrets the roles may use (kms:ViaService) and of their ARNs' partition."""
    cluster_name: str
    """The one cluster whose Pod Identity may assume the roles."""
    training_namespace: str
    """The namespace of the trainer's service account."""
    account_id: pulumi.Input[str]
    """The account whose keys, secrets and roles the policies name."""
    datasets_bucket: pulumi.Input[str]
    """The bucket the trainer reads datasets from."""
    datasets_external: bool
    """The datasets bucket is not ours: it may use its own key, which the trainer may decrypt through S3."""
    artifacts_bucket: pulumi.Input[str]
    """The bucket the trainer writes checkpoints and models to."""
    data_key_arn: pulumi.Input[str]
    """The key of the datasets and artifacts buckets."""
    secret_arns: Sequence[pulumi.Input[str]]
    """The training secrets the trainer and External Secrets may read."""
    secrets_key_arn: pulumi.Input[str]
    """The key of the training secrets."""
    file_system_arn: pulumi.Input[str]
    """The checkpoint file system the EFS CSI controller may describe."""
    access_point_arns: Sequence[pulumi.Input[str]]
    """The checkpoint file system's access points the EFS CSI controller may describe."""
    team_readers_prefix: str | None = None
    """The name prefix of the team secret readers External Secrets may assume (`<prefix>-team-*-secrets`):
    None, this cluster's; a MultiKueue worker's is its manager's, whose team stacks make them."""


class WorkloadRoles(pulumi.ComponentResource):
    trainer: aws.iam.Role
    secrets_sync: aws.iam.Role
    efs_csi: aws.iam.Role

    def __init__(self, name: str, args: WorkloadRolesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:identity:WorkloadRoles", name, None, opts)
        self._name, self._args = name, args

        self.trainer = self._role("trainer", args.training_namespace, TRAINER_SERVICE_ACCOUNT,
                                  "Training pods: own datasets, checkpoints, models and secrets")
        self._policy("trainer", self.trainer, pulumi.Output.all(
            account_id=args.account_id, datasets_bucket=args.datasets_bucket, artifacts_bucket=args.artifacts_bucket,
            data_key_arn=args.data_key_arn, secret_arns=pulumi.Output.all(*args.secret_arns),
            secrets_key_arn=args.secrets_key_arn,
        ).apply(lambda v: policies.trainer_policy(region=args.region, datasets_external=args.datasets_external, **v)))

        self.secrets_sync = self._role("secrets-sync", SECRETS_SYNC_NAMESPACE, SECRETS_SYNC_SERVICE_ACCOUNT,
                                       "External Secrets: read this environment's training secrets")
        if args.secret_arns:
            self._policy("secrets-sync", self.secrets_sync, pulumi.Output.all(
                secret_arns=pulumi.Output.all(*args.secret_arns), secrets_key_arn=args.secrets_key_arn,
            ).apply(lambda v: policies.secrets_reader_policy(region=args.region, **v)))

        self._policy("secrets-sync-teams", self.secrets_sync, pulumi.Output.from_input(args.account_id).apply(
            lambda account: policies.assume_team_secret_readers_policy(
                account_id=account, partition=arn_partition(args.region),
                name_prefix=args.team_readers_prefix or args.cluster_name)))

        self.efs_csi = self._role("efs-csi", EFS_CSI_NAMESPACE, EFS_CSI_SERVICE_ACCOUNT,
                                  "EFS CSI controller: describe the checkpoint file system")
        self._policy("efs-csi", self.efs_csi, pulumi.Output.all(
            file_system_arn=args.file_system_arn, access_point_arns=pulumi.Output.all(*args.access_point_arns),
        ).apply(lambda v: policies.efs_csi_policy(**v)))

        self.register_outputs({"trainerRoleArn": self.trainer.arn})

    def _role(self, role: str, namespace: str, service_account: str, description: str) -> aws.iam.Role:
        args = self._args
        trust = pulumi.Output.from_input(args.account_id).apply(lambda account: policies.workload_trust_policy(
            account, cluster_name=args.cluster_name, namespace=namespace, service_account=service_account))
        return workload_role(f"{self._name}-{role}", trust=trust, environment=args.environment, region=args.region,
                             tags={"workload": role}, description=description,
                             opts=pulumi.ResourceOptions(parent=self))

    def _policy(self, role: str, target: aws.iam.Role, document: pulumi.Input[str]) -> None:
        role_policy(f"{self._name}-{role}", target, document, pulumi.ResourceOptions(parent=self))


def workload_role(resource_name: str, *, trust: pulumi.Input[str], environment: str, region: str,
                  tags: dict[str, str], opts: pulumi.ResourceOptions, description: str | None = None,
                  name: str | None = None) -> aws.iam.Role:
    """A role a workload assumes; outside prod it also carries the explicit Deny on prod data."""
    role = aws.iam.Role(resource_name, name=name, description=description, assume_role_policy=trust, tags=tags,
                        opts=opts)
    if environment != "prod":
        aws.iam.RolePolicy(f"{resource_name}-deny-prod-data", role=role.id,
                           policy=policies.deny_prod_data_policy(arn_partition(region)), opts=opts)
    return role


def role_policy(resource_name: str, role: aws.iam.Role, document: pulumi.Input[str], opts: pulumi.ResourceOptions) -> None:
    """The role's own inline policy, `<resource_name>-access`."""
    aws.iam.RolePolicy(f"{resource_name}-access", role=role.id, policy=document, opts=opts)


def pod_identity_role(name: str, *, account_id: pulumi.Input[str], policy: pulumi.Input[str], cluster_name: pulumi.Input[str],
                      namespace: str, service_account: str,
                      opts: pulumi.ResourceOptions) -> tuple[aws.iam.Role, aws.eks.PodIdentityAssociation]:
    """A cluster add-on's role (`<name>-role`, trusted by EKS Pod Identity), its inline policy
    (`<name>-policy`) and its association with `namespace`/`service_account` (`<name>-pod-identity`)."""
    role = aws.iam.Role(f"{name}-role", assume_role_policy=pulumi.Output.from_input(account_id).apply(
        pod_identity_trust_policy), opts=opts)
    aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy, opts=opts)
    association = aws.eks.PodIdentityAssociation(f"{name}-pod-identity", cluster_name=cluster_name, namespace=namespace,
                                                 service_account=service_account, role_arn=role.arn, opts=opts)
    return role, association


@dataclass(frozen=True)
class TrainerServiceAccountArgs:
    cluster_name: pulumi.Input[str]
    """The cluster of the Pod Identity association."""
    namespace: pulumi.Input[str]
    """The namespace of the trainer's service account."""
    role_arn: pulumi.Input[str]
    """The IAM role the service account's pods get."""


class TrainerServiceAccount(pulumi.ComponentResource):
    """The `trainer` service account of the training namespace, bound to the trainer role."""

    service_account: k8s.core.v1.ServiceAccount

    def __init__(self, name: str, args: TrainerServiceAccountArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:identity:TrainerServiceAccount", name, None, opts)
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=TRAINER_SERVICE_ACCOUNT, namespace=args.namespace,
                labels={"app.kubernetes.io/part-of": "gpu-training", "app.kubernetes.io/component": "trainer"}),
            # No token by default (CIS 4.1.6): the trainer container gets one projected token of its
            # own, for its pod's progress annotation (workload/training_job.py API_TOKEN_VOLUME). Pod
            # Identity's own token is a separate projected volume, added by EKS whatever this says.
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=args.cluster_name,
            namespace=args.namespace,
            service_account=TRAINER_SERVICE_ACCOUNT,
            role_arn=args.role_arn,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
