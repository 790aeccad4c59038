"""The EKS control plane, who may use it, the add-ons nodes need to boot, and the Kubernetes provider.

- API authentication mode with explicit access entries (no aws-auth ConfigMap, no implicit
  creator admin), all five control-plane log types, secrets envelope-encrypted with a customer
  KMS key, private endpoint always on, public endpoint off in prod (enforced by the config model).
- Self-managed add-ons are not bootstrapped: vpc-cni (network policy enforcement on),
  kube-proxy and the Pod Identity agent are EKS managed add-ons with pinned builds, created
  before any node. CoreDNS and the node monitoring agent need nodes: see addons.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.common import iam
from components.common.access_entries import access_entry, access_policy_arn
from components.common.eks_addons import managed_addon
from components.common.kms import customer_key
from components.config import ClusterConfig
from components.facts.pod_network import MINIMUM_IP_TARGET, WARM_IP_TARGET
from components.facts.regions import arn_partition

CONTROL_PLANE_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# View excludes Secrets, unlike AmazonEKSAdminViewPolicy.
READ_ONLY_POLICY = "AmazonEKSViewPolicy"


@dataclass(frozen=True)
class ClusterArgs:
    config: ClusterConfig
    """Version, upgrade policy, endpoint access, admin and read-only principals, log retention."""
    cluster_name: str
    """The EKS cluster's name, also in its log group and its node groups' tags."""
    region: str
    """For the kubeconfig's `aws eks get-token` and the partition of the AWS managed policy ARNs."""
    environment: str
    """dev, staging or prod: prod's cluster gets deletion protection."""
    kubernetes_service_cidr: str
    """The range Kubernetes Services get their IPs from; must not overlap the VPC."""
    private_subnet_ids: list[pulumi.Input[str]]
    """Where the control plane's network interfaces go."""
    control_plane_security_group_id: pulumi.Input[str]
    """The extra security group on the control plane's interfaces."""
    account_id: pulumi.Input[str]
    """The account the Kubernetes secrets key and the VPC CNI role trust."""
    logs_key_arn: pulumi.Input[str]
    """Encrypts the control plane's log group (the environment's CloudWatch Logs key)."""
    api_path: Sequence[pulumi.Resource] = ()
    """What the deploy's path to the API goes through, made or changed in the same update: every
    Kubernetes object waits for it (a MultiKueue worker's route tables, whose route back to the
    manager's VPC carries the deploy runner's calls)."""


def kubeconfig(cluster_name: str, endpoint: str, certificate_authority: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token`: no long-lived credential in state."""
    user = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
        "interactiveMode": "Never",
    }}
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name,
                      "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority}}],
        "users": [{"name": cluster_name, "user": user}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
    })


class Cluster(pulumi.ComponentResource):
    eks: aws.eks.Cluster
    k8s_provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    """What `kubectl` and team stacks use: authenticates with `aws eks get-token`, holds no secret."""
    boot_addons: list[aws.eks.Addon]
    """Add-ons a node needs to join (CNI, kube-proxy, Pod Identity agent): node groups wait for them."""

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:Cluster", name, None, opts)
        self._name, self._args = name, args

        # Same resource name as before it had a policy and an alias: EKS cannot change the key
        # of an existing cluster, so this key must never be replaced.
        secrets_key = customer_key(f"{name}-secrets-key", alias=f"{args.cluster_name}-eks-secrets",
                                   description=f"EKS secrets envelope encryption for {args.cluster_name}",
                                   account_id=args.account_id, parent=self)
        role = self._create_cluster_role(secrets_key)
        # Created first so EKS writes into a group that has a retention period and our key (EKS
        # would create it unencrypted, retained forever). It holds the audit log: prod keeps it
        # >= 365 days (the config model enforces it).
        # checkov CKV_AWS_338 holds in prod only (cluster.logRetentionDays: 30 / 90 / 365).
        self.log_group = log_group = aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=f"/aws/eks/{args.cluster_name}/cluster",
            retention_in_days=args.config.log_retention_days,
            kms_key_id=args.logs_key_arn,
            opts=pulumi.ResourceOptions(parent=self),
        )
        config = args.config
        # checkov CKV_AWS_339 (a supported version) fails on versions newer than its own list
        # (1.29-1.35 in the pinned checkov 3.3.30): the supported minors are
        # components/facts/eks_versions.py's. CKV_AWS_39/38 (public endpoint): dev only, from
        # publicAccessCidrs, never 0.0.0.0/0 (docs/upgrading-and-pins.md).
        self.eks = aws.eks.Cluster(
            f"{name}-eks",
            name=args.cluster_name,
            version=config.kubernetes_version,
            role_arn=role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=args.private_subnet_ids,
                security_group_ids=[args.control_plane_security_group_id],
                endpoint_private_access=True,
                endpoint_public_access=config.endpoint_public_access,
                # Never left to EKS's default of 0.0.0.0/0.
                public_access_cidrs=list(config.public_access_cidrs) if config.endpoint_public_access else None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                bootstrap_cluster_creator_admin_permissions=False,
            ),
            enabled_cluster_log_types=CONTROL_PLANE_LOG_TYPES,
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=secrets_key.arn),
                resources=["secrets"],
            ),
            kubernetes_network_config=aws.eks.ClusterKubernetesNetworkConfigArgs(
                service_ipv4_cidr=args.kubernetes_service_cidr,
            ),
            bootstrap_self_managed_addons=False,
            # Chosen per stack, with the reason in the stack file (STANDARD: EKS upgrades the
            # control plane itself at the end of standard support; EXTENDED: it stays, at 6x the
            # hourly price). The config model rejects minors past the date either way in prod.
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=config.upgrade_policy),
            deletion_protection=args.environment == "prod",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group]),
        )
        self._create_access_entries()
        self.boot_addons = self._create_boot_addons()
        self.kubeconfig = pulumi.Output.all(self.eks.name, self.eks.endpoint, self.eks.certificate_authority.data).apply(
            lambda values: kubeconfig(values[0], values[1], values[2], args.region))
        self.k8s_provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(
            parent=self, depends_on=list(args.api_path)))
        self.register_outputs({"clusterName": self.eks.name, "endpoint": self.eks.endpoint})

    def _create_cluster_role(self, secrets_key: aws.kms.Key) -> aws.iam.Role:
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{self._name}-cluster-role",
            assume_role_policy=iam.service_trust_policy("eks.amazonaws.com", actions=("sts:AssumeRole", "sts:TagSession")),
            opts=child,
        )
        cluster_policy = iam.managed_policy_arn(arn_partition(self._args.region), "AmazonEKSClusterPolicy")
        aws.iam.RolePolicyAttachment(f"{self._name}-cluster-policy", role=role.name, policy_arn=cluster_policy, opts=child)
        aws.iam.RolePolicy(
            f"{self._name}-cluster-secrets-key",
            role=role.id,
            policy=secrets_key.arn.apply(lambda arn: iam.policy(iam.statement(
                ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"], [arn]))),
            opts=child,
        )
        return role

    def _create_access_entries(self) -> None:
        config = self._args.config
        partition = arn_partition(self._args.region)
        grants = [(arn, access_policy_arn(partition, ADMIN_POLICY), "admin") for arn in config.admin_principals]
        grants += [(arn, access_policy_arn(partition, READ_ONLY_POLICY), "view") for arn in config.read_only_principals]
        for arn, policy_arn, level in grants:
            principal = arn.split(":", 5)[-1].replace("/", "-")
            access_entry(f"{self._name}-access-{principal}", level, cluster_name=self.eks.name, principal_arn=arn,
                         policy_arn=policy_arn, opts=pulumi.ResourceOptions(parent=self))

    def addon(self, addon_name: str, *, opts: pulumi.ResourceOptions | None = None, **extra) -> aws.eks.Addon:
        return managed_addon(f"{self._name}-addon-{addon_name}", cluster_name=self.eks.name, addon_name=addon_name,
                             kubernetes_version=self._args.config.kubernetes_version,
                             opts=pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=self), opts), **extra)

    def _create_boot_addons(self) -> list[aws.eks.Addon]:
        cni_role = aws.iam.Role(
            f"{self._name}-vpc-cni-role",
            assume_role_policy=pulumi.Output.from_input(self._args.account_id).apply(iam.pod_identity_trust_policy),
            opts=pulumi.ResourceOptions(parent=self),
        )
        aws.iam.RolePolicyAttachment(f"{self._name}-vpc-cni-policy", role=cni_role.name,
                                     policy_arn=iam.managed_policy_arn(arn_partition(self._args.region), "AmazonEKS_CNI_Policy"),
                                     opts=pulumi.ResourceOptions(parent=self))
        pod_identity_agent = self.addon("eks-pod-identity-agent")
        return [
            pod_identity_agent,
            self.addon(
                "vpc-cni",
                # NetworkPolicy enforcement (CIS 4.3): without it policies are accepted and ignored.
                # Warm IPs instead of a warm ENI: a node holds the addresses its pods use plus a few
                # (EKS User Guide, EFA "Conserving IP address allocation"; the subnet IP budget of
                # the config model counts with the same numbers). CLUSTER_NAME makes the CNI tag every
                # interface it creates cluster.k8s.amazonaws.com/name=<cluster> as it creates it
                # (aws/amazon-vpc-cni-k8s pkg/awsutils/awsutils.go createENI, buildENITags): the
                # permissions boundary lets a role change only interfaces with that tag or the
                # project's (bootstrap/policies/boundary.py, DenyOtherInterfacesAndGroups).
                configuration_values=json.dumps({"enableNetworkPolicy": "true", "env": {
                    "WARM_IP_TARGET": str(WARM_IP_TARGET), "MINIMUM_IP_TARGET": str(MINIMUM_IP_TARGET),
                    "CLUSTER_NAME": self._args.cluster_name}}),
                # The CNI's AWS permissions stay off the node role (least privilege for pods).
                pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
                    role_arn=cni_role.arn, service_account="aws-node")],
                opts=pulumi.ResourceOptions(depends_on=[pod_identity_agent]),
            ),
            self.addon("kube-proxy"),
        ]
