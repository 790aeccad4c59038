"""Every policy both ways: it passes on every stack's offline plan, and it fails on a minimal
violating resource, naming that resource. A policy without a case of either kind fails the
table test at the bottom."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import BOOTSTRAP_STACKS, ROOT, STACKS, plan_records
from gpu_training_policy import POLICIES
from gpu_training_policy.offline import evaluate
from records import plan, policy_document, resource

POLICY_BY_NAME = {p.name: p for p in POLICIES}
ADVISORY = {"on-demand-gpu-idle", "stack-has-budget"}

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
LEGACY_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
GROUP = "aws:ec2/securityGroup:SecurityGroup"
BUCKET = "aws:s3/bucket:Bucket"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
LOGGING = "aws:s3/bucketLogging:BucketLogging"
CLUSTER = "aws:eks/cluster:Cluster"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
BUDGET = "aws:budgets/budget:Budget"
INSTANCE = "aws:ec2/instance:Instance"
PV = "kubernetes:core/v1:PersistentVolume"
STORE = "kubernetes:external-secrets.io/v1:SecretStore"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
TEAM = "team-vision-prod"
GITHUB = "token.actions.githubusercontent.com"
GOOD_INSTANCE = {"metadataOptions": {"httpTokens": "required"}, "associatePublicIpAddress": False, "monitoring": True,
                 "rootBlockDevice": {"encrypted": True}}

ALL_FLAGS = {"blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True, "restrictPublicBuckets": True}
TLS_DENY = {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Resource": ["arn:aws:s3:::data-bucket", "arn:aws:s3:::data-bucket/*"]}
KMS_RULE = {"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": "arn:aws:kms:us-east-1:1:key/k"}}
SECURE_METADATA = {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
ROOT_VOLUME = [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true", "volumeSize": 50}}]
CLUSTER_OK = {"enabledClusterLogTypes": ["api", "audit", "authenticator", "controllerManager", "scheduler"],
              "encryptionConfig": {"provider": {"keyArn": "arn:aws:kms:us-east-1:1:key/k"}, "resources": ["secrets"]},
              "vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": False}}
GPU_POOL = {"amiType": "AL2023_x86_64_NVIDIA", "capacityType": "ON_DEMAND", "instanceTypes": ["g6.48xlarge"],
            "launchTemplate": {"id": "lt", "version": "1"}, "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0},
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]}


def bucket(name: str = "data", *, sse: dict | None = None, versioning: str | None = "Enabled",
           flags: dict | None = None, tls: bool = True, extra: tuple = ()) -> list[dict[str, Any]]:
    """A bucket and its settings, each pointing at it through its `bucket` input."""
    the_bucket = resource(BUCKET, name, {"bucket": f"{name}-bucket"})
    on_it = {"bucket": [the_bucket]}
    records = [the_bucket]
    if sse is not None:
        records.append(resource(SSE, name, {"bucket": f"{name}-id", "rules": [sse]}, depends=on_it))
    if versioning:
        records.append(resource(VERSIONING, name, {"bucket": f"{name}-id", "versioningConfiguration": {"status": versioning}},
                                depends=on_it))
    records.append(resource(ACCESS_BLOCK, name, {"bucket": f"{name}-id", **(ALL_FLAGS if flags is None else flags)},
                            depends=on_it))
    if tls:
        records.append(resource(BUCKET_POLICY, name, {"bucket": f"{name}-id", "policy": policy_document(TLS_DENY)},
                                depends=on_it))
    return records + [r | {"propertyDependencies": {"bucket": [the_bucket["urn"]]}} for r in extra]


def good_bucket(name: str = "data", **kwargs: Any) -> list[dict[str, Any]]:
    return bucket(name, sse=KMS_RULE, **kwargs)


def fabric_group(name: str = "security-groups-efa-fabric", **inputs: Any) -> dict[str, Any]:
    return resource(GROUP, name, {"name": f"gpu-training-dev-{name.split('groups-')[-1]}", **inputs})


def fabric_rule(group: dict[str, Any], peer: dict[str, Any] | None, **inputs: Any) -> dict[str, Any]:
    depends = {"securityGroupId": [group]} | ({"referencedSecurityGroupId": [peer]} if peer else {})
    return resource(INGRESS, f"{group['name']}-rule", {"securityGroupId": f"{group['name']}-id", "ipProtocol": "-1", **inputs},
                    depends=depends)


def team_policy(*statements: dict[str, Any], stack: str = "team-vision-prod") -> list[dict[str, Any]]:
    return plan(resource(ROLE_POLICY, "team-trainer-access", {"role": "r", "policy": policy_document(*statements)}, stack=stack),
                stack=stack)


def allow(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


def role(trust: dict[str, Any], stack: str = "dev", **inputs: Any) -> list[dict[str, Any]]:
    return plan(resource(ROLE, "r", {"assumeRolePolicy": policy_document(trust), **inputs}, stack=stack), stack=stack)


def github_trust(sub: Any, operator: str = "StringEquals", aud: Any = "sts.amazonaws.com") -> dict[str, Any]:
    condition: dict[str, Any] = {"StringEquals": {f"{GITHUB}:aud": aud}} if aud else {}
    condition.setdefault(operator, {})[f"{GITHUB}:sub"] = sub
    return {"Effect": "Allow", "Principal": {"Federated": f"arn:aws:iam::1:oidc-provider/{GITHUB}"},
            "Action": "sts:AssumeRoleWithWebIdentity", "Condition": condition}


def team_volume(handle: str, *, root: str = "/workloads/team-vision", own: bool = True) -> list[dict[str, Any]]:
    """A team's EFS volume on an access point, created by the stack (`own`) or named by id only."""
    ap = resource(ACCESS_POINT, "ap", {"fileSystemId": "fs-1", "rootDirectory": {"path": root}}, stack=TEAM)
    pv = resource(PV, "pv", {"metadata": {"name": "pv"}, "spec": {"claimRef": {"namespace": "team-vision"}, "csi": {
        "driver": "efs.csi.aws.com", "volumeHandle": handle}}}, stack=TEAM, provider="k8s",
        depends={"spec": [ap]} if own else None)
    return plan(ap, pv, stack=TEAM)


def team_store(role_arn: str, *, own_name: str | None = None) -> list[dict[str, Any]]:
    reader = resource(ROLE, "reader", {"name": own_name or "x", "assumeRolePolicy": policy_document()}, stack=TEAM)
    store = resource(STORE, "store", {"metadata": {"name": "s", "namespace": "team-vision"}, "spec": {"provider": {
        "aws": {"service": "SecretsManager", "region": "us-east-1", "role": role_arn}}}}, stack=TEAM, provider="k8s",
        depends={"spec": [reader]} if own_name else None)
    return plan(reader, store, stack=TEAM)


def team_queue(*, stack: str = "prod", resources: list[dict[str, Any]] | None = None,
               preemption: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """Team vision's ClusterQueue as the platform makes it, with `spec` changed."""
    return resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "team-vision-cluster-queue", {
        "metadata": {"name": "team-vision"},
        "spec": {"cohortName": "prod", "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-vision"}},
                 "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "pool-gpu-spot",
                     "resources": resources or [{"name": "nvidia.com/gpu", "nominalQuota": 16, "borrowingLimit": 0}]}]}],
                 "preemption": preemption or {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                 **spec}}, stack=stack, provider="k8s")


@dataclass(frozen=True)
class Case:
    policy: str
    id: str
    records: Callable[[], list[dict[str, Any]]]
    says: str = ""
    """A fragment the message must contain (failing cases)."""
    culprit: tuple[str, str] | None = None
    """(type, name) of the resource the violation must name; default: the last record."""
    config: dict[str, Any] = field(default_factory=dict)


FAILING = [
    # --- network
    Case("no-open-ingress", "ipv4 rule", lambda: plan(resource(INGRESS, "https-from-anywhere", {
        "securityGroupId": "sg", "cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp", "fromPort": 443, "toPort": 443})), "0.0.0.0/0"),
    Case("no-open-ingress", "ipv6 rule", lambda: plan(resource(INGRESS, "ssh-v6", {
        "securityGroupId": "sg", "cidrIpv6": "::/0", "ipProtocol": "tcp", "fromPort": 22, "toPort": 22})), "::/0"),
    Case("no-open-ingress", "legacy rule", lambda: plan(resource(LEGACY_RULE, "legacy", {
        "type": "ingress", "securityGroupId": "sg", "cidrBlocks": ["0.0.0.0/0"], "protocol": "-1", "fromPort": 0, "toPort": 0})),
        "0.0.0.0/0"),
    Case("no-open-ingress", "inline block", lambda: plan(resource(GROUP, "inline", {
        "ingress": [{"cidrBlocks": ["0.0.0.0/0"], "protocol": "tcp", "fromPort": 80, "toPort": 80}]})), "0.0.0.0/0"),
    Case("cidr-ingress-private-and-scoped", "public collector", lambda: plan(resource(INGRESS, "metrics-public", {
        "securityGroupId": "sg", "cidrIpv4": "203.0.113.0/24", "ipProtocol": "tcp", "fromPort": 9400, "toPort": 9400})),
        "public range 203.0.113.0/24"),
    Case("cidr-ingress-private-and-scoped", "ssh from a private range", lambda: plan(resource(INGRESS, "ssh", {
        "securityGroupId": "sg", "cidrIpv4": "10.100.0.0/24", "ipProtocol": "tcp", "fromPort": 22, "toPort": 22})),
        "administration port 22"),
    Case("cidr-ingress-private-and-scoped", "all traffic from a CIDR", lambda: plan(resource(INGRESS, "everything", {
        "securityGroupId": "sg", "cidrIpv4": "10.100.0.0/24", "ipProtocol": "-1"})), "all traffic"),
    Case("cidr-ingress-private-and-scoped", "outside allowedCidrs", lambda: plan(resource(INGRESS, "metrics", {
        "securityGroupId": "sg", "cidrIpv4": "10.200.0.0/24", "ipProtocol": "tcp", "fromPort": 9400, "toPort": 9400})),
        "outside this policy's allowedCidrs", config={"allowedCidrs": ["10.100.0.0/16"]}),
    Case("fabric-admits-only-itself", "another group as source", lambda: (lambda group, nodes: plan(
        group, nodes, fabric_rule(group, nodes)))(fabric_group(), resource(GROUP, "security-groups-nodes")),
        "security group security-groups-nodes"),
    Case("fabric-admits-only-itself", "a CIDR", lambda: (lambda group: plan(group, fabric_rule(
        group, None, cidrIpv4="10.0.0.0/16")))(fabric_group()), "cidrIpv4 10.0.0.0/16"),
    Case("fabric-admits-only-itself", "inline ingress", lambda: plan(fabric_group(
        "socket-fabric", ingress=[{"protocol": "tcp", "fromPort": 1, "toPort": 2, "cidrBlocks": ["10.0.0.0/8"]}])),
        "inline ingress[0]"),
    # --- buckets
    Case("bucket-sse-kms", "no encryption", lambda: plan(*bucket()), "has no SSE-KMS default encryption", (BUCKET, "data")),
    Case("bucket-sse-kms", "SSE-S3 on a data bucket", lambda: plan(*bucket(sse={
        "applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}})), "SSE-S3 is accepted only", (BUCKET, "data")),
    Case("bucket-sse-kms", "AWS managed key", lambda: plan(*bucket(sse={
        "applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}})), "AWS managed key", (BUCKET, "data")),
    Case("bucket-sse-kms", "only S3's default read back on the bucket", lambda: [
        r for r in plan(*bucket()) if r["type"] != BUCKET] + [resource(BUCKET, "data", {
            "bucket": "data-bucket", "serverSideEncryptionConfiguration": {"rule": {"applyServerSideEncryptionByDefault": {
                "sseAlgorithm": "AES256"}}}})], "has no SSE-KMS default encryption"),
    Case("bucket-versioning", "no versioning", lambda: plan(*good_bucket(versioning=None)), "has no versioning", (BUCKET, "data")),
    Case("bucket-versioning", "suspended", lambda: plan(*good_bucket(versioning="Suspended")), "Suspended", (BUCKET, "data")),
    Case("bucket-public-access-blocked", "one flag off", lambda: plan(*good_bucket(flags=ALL_FLAGS | {"restrictPublicBuckets": False})),
         "restrictPublicBuckets", (BUCKET, "data")),
    Case("bucket-public-access-blocked", "public ACL", lambda: plan(*good_bucket(extra=(
        resource(BUCKET_ACL, "data", {"bucket": "data-id", "acl": "public-read"}),))), "public-read", (BUCKET, "data")),
    Case("bucket-tls-only", "no TLS deny", lambda: plan(*good_bucket(tls=False)), "without TLS", (BUCKET, "data")),
    # --- cluster and nodes
    Case("eks-secrets-encryption", "no envelope encryption", lambda: plan(resource(CLUSTER, "eks", {
        k: v for k, v in CLUSTER_OK.items() if k != "encryptionConfig"})), "does not encrypt Kubernetes secrets"),
    Case("eks-control-plane-logs", "audit log off", lambda: plan(resource(CLUSTER, "eks", CLUSTER_OK | {
        "enabledClusterLogTypes": ["api", "authenticator"]})), "audit, controllerManager, scheduler"),
    Case("eks-endpoint-access", "public endpoint in prod", lambda: plan(resource(CLUSTER, "eks", CLUSTER_OK | {
        "vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}}, stack="prod"), stack="prod"),
        "public API endpoint in prod"),
    Case("eks-endpoint-access", "public by default, no allow-list", lambda: plan(resource(CLUSTER, "eks", CLUSTER_OK | {
        "vpcConfig": {"endpointPrivateAccess": True}})), "without an allow-list"),
    Case("eks-endpoint-access", "allow-list of everyone", lambda: plan(resource(CLUSTER, "eks", CLUSTER_OK | {
        "vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["0.0.0.0/0"]}})), "without an allow-list"),
    Case("imdsv2-hop-limit-1", "IMDSv1 allowed", lambda: plan(resource(LAUNCH_TEMPLATE, "lt", {
        "metadataOptions": SECURE_METADATA | {"httpTokens": "optional"}, "blockDeviceMappings": ROOT_VOLUME})),
        "does not require IMDSv2"),
    Case("imdsv2-hop-limit-1", "hop limit 2", lambda: plan(resource(LAUNCH_TEMPLATE, "lt", {
        "metadataOptions": SECURE_METADATA | {"httpPutResponseHopLimit": 2}, "blockDeviceMappings": ROOT_VOLUME})),
        "hop limit 2"),
    Case("imdsv2-hop-limit-1", "node group without template", lambda: plan(resource(NODE_GROUP, "ng", {
        k: v for k, v in GPU_POOL.items() if k != "launchTemplate"})), "no launch template of its own"),
    Case("encrypted-node-volumes", "unencrypted root", lambda: plan(resource(LAUNCH_TEMPLATE, "lt", {
        "metadataOptions": SECURE_METADATA, "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "false"}}]})),
        "/dev/xvda unencrypted"),
    Case("encrypted-node-volumes", "root left to the AMI", lambda: plan(resource(LAUNCH_TEMPLATE, "lt", {
        "metadataOptions": SECURE_METADATA})), "declares no root volume"),
    Case("gpu-node-group-taint", "GPU pool without taint", lambda: plan(resource(NODE_GROUP, "gpu", GPU_POOL | {"taints": []})),
         "without the nvidia.com/gpu"),
    Case("spot-instance-diversity", "one spot type", lambda: plan(resource(NODE_GROUP, "gpu-spot", GPU_POOL | {
        "capacityType": "SPOT", "instanceTypes": ["g6.48xlarge"]})), "1 instance type(s)"),
    # --- secrets
    Case("no-plaintext-secrets", "access key in a ConfigMap", lambda: plan(resource("kubernetes:core/v1:ConfigMap", "cm", {
        "data": {"config.ini": "aws_access_key_id = AKIAQWERTYUIOPASDFGH"}}, provider="k8s")), "an AWS access key id"),
    Case("no-plaintext-secrets", "literal token env", lambda: plan(resource("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "job", {
        "spec": {"replicatedJobs": [{"template": {"spec": {"template": {"spec": {"containers": [{"name": "trainer", "env": [
            {"name": "HF_TOKEN", "value": "not-a-real-token"}]}]}}}}}]}}, provider="k8s")), "sets HF_TOKEN to a literal"),
    Case("no-plaintext-secrets", "Kubernetes Secret with data", lambda: plan(resource("kubernetes:core/v1:Secret", "s", {
        "stringData": {"password": "x"}}, provider="k8s")), "carries secret data"),
    Case("no-plaintext-secrets", "private key in Helm values", lambda: plan(resource("kubernetes:helm.sh/v3:Release", "r", {
        "values": {"tls": {"key": "-----BEGIN RSA PRIVATE KEY-----\nMIIB..."}}}, provider="k8s")), "a private key"),
    Case("no-plaintext-secrets", "credential key in a ConfigMap", lambda: plan(resource("kubernetes:core/v1:ConfigMap", "cm", {
        "data": {"WANDB_API_KEY": "0123"}}, provider="k8s")), "holds WANDB_API_KEY in a ConfigMap"),
    # --- governance
    Case("cost-tags", "provider without cost-center", lambda: plan(resource("aws:sns/topic:Topic", "alerts"), tags={
        "project": "gpu-training", "environment": "dev", "stack": "dev"}), "cost-center"),
    Case("cost-tags", "an environment's stack without environment tag", lambda: plan(resource("aws:sns/topic:Topic", "alerts",
        stack="staging"), stack="staging", tags={"project": "gpu-training", "stack": "staging", "cost-center": "ml"}),
        "environment"),
    Case("cost-tags", "team stack without team tag", lambda: plan(resource("aws:sns/topic:Topic", "alerts", stack="team-vision-dev"),
         stack="team-vision-dev", tags={"project": "gpu-training", "environment": "dev", "stack": "team-vision-dev",
                                        "cost-center": "vision"}), "team"),
    Case("cost-tags", "instances launched untagged", lambda: plan(resource(LAUNCH_TEMPLATE, "lt", {
        "tagSpecifications": [{"resourceType": "instance", "tags": {"Name": "lt"}}]})), "launches instances without"),
    Case("explicit-provider", "default provider", lambda: plan(resource("aws:sns/topic:Topic", "alerts", provider=None)),
         "uses the default aws provider"),
    Case("team-stack-scope", "team bucket", lambda: plan(resource(BUCKET, "team-bucket", stack="team-vision-prod"),
         stack="team-vision-prod"), "creates a bucket"),
    Case("team-stack-scope", "role bound into another namespace", lambda: plan(resource(
        "aws:eks/podIdentityAssociation:PodIdentityAssociation", "pia", {"namespace": "team-nlp", "serviceAccount": "trainer"},
        stack="team-vision-prod"), stack="team-vision-prod"), "team vision owns only team-vision"),
    Case("team-stack-scope", "the platform's alarm name", lambda: plan(resource(
        "aws:cloudwatch/metricAlarm:MetricAlarm", "alarm", {"name": "gpu-training-prod-gpu-idle"}, stack="team-vision-prod"),
        stack="team-vision-prod"), "CloudWatch overwrites"),
    Case("team-stack-scope", "another team's dashboard name", lambda: plan(resource(
        "aws:cloudwatch/dashboard:Dashboard", "d", {"dashboardName": "gpu-training-prod-vision-x-training"},
        stack="team-vision-prod"), stack="team-vision-prod"), "is named gpu-training-prod-vision-x-training"),
    Case("team-iam-scope", "writes another team's prefix", lambda: team_policy(allow(
        ["s3:PutObject"], ["arn:aws:s3:::gpu-training-prod-artifacts-1/teams/nlp/*"])), "outside team vision's tenancy"),
    Case("team-iam-scope", "service wildcard", lambda: team_policy(allow(["s3:*"], ["arn:aws:s3:::b/teams/vision/*"])),
         "grants every action of s3"),
    Case("team-iam-scope", "identity administration", lambda: team_policy(allow(["iam:PassRole"], ["arn:aws:iam::1:role/x"])),
         "administers identity"),
    Case("team-iam-scope", "every resource", lambda: team_policy(allow(["kms:Decrypt"], ["*"])), "every resource"),
    Case("team-iam-scope", "another team's secret", lambda: team_policy(allow(["secretsmanager:GetSecretValue"], [
        "arn:aws:secretsmanager:us-east-1:1:secret:gpu-training/prod/teams/nlp/token-AbCdEf"])),
        "secret:gpu-training/prod/teams/nlp/token-AbCdEf, outside team vision's tenancy"),
    Case("team-iam-scope", "role trusting the account", lambda: plan(resource(ROLE, "team-role", {"assumeRolePolicy": policy_document(
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::1:root"}, "Action": "sts:AssumeRole"})}, stack="team-vision-prod"),
        stack="team-vision-prod"), "any principal of the account"),
    Case("team-iam-scope", "role named in the platform's namespace", lambda: plan(resource(ROLE, "team-role", {
        "name": "gpu-training-prod-secrets-sync", "assumeRolePolicy": policy_document()}, stack="team-vision-prod"),
        stack="team-vision-prod"), "are gpu-training-prod-team-vision-<one word>"),
    Case("team-iam-scope", "managed policy", lambda: plan(resource("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "admin", {
        "role": "r", "policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"}, stack="team-vision-prod"),
        stack="team-vision-prod"), "AdministratorAccess"),
    Case("team-iam-scope", "role with a wildcard inline policy", lambda: plan(resource(ROLE, "team-role", {
        "assumeRolePolicy": policy_document(), "inlinePolicies": [{"name": "all", "policy": policy_document(
            allow(["s3:*"], ["arn:aws:s3:::gpu-training-prod-artifacts-1/*"]))}]}, stack="team-vision-prod"),
        stack="team-vision-prod"), "grants every action of s3"),
    Case("team-iam-scope", "role with managed policy ARNs", lambda: plan(resource(ROLE, "team-role", {
        "assumeRolePolicy": policy_document(), "managedPolicyArns": ["arn:aws:iam::aws:policy/AdministratorAccess"]},
        stack="team-vision-prod"), stack="team-vision-prod"), "AdministratorAccess"),
    Case("team-iam-scope", "policy attachment", lambda: plan(resource("aws:iam/policyAttachment:PolicyAttachment", "admin", {
        "roles": ["r"], "policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"}, stack="team-vision-prod"),
        stack="team-vision-prod"), "AdministratorAccess"),
    Case("team-iam-scope", "exclusive attachments", lambda: plan(resource(
        "aws:iam/rolePolicyAttachmentsExclusive:RolePolicyAttachmentsExclusive", "admin", {
            "roleName": "r", "policyArns": ["arn:aws:iam::aws:policy/AmazonS3FullAccess"]}, stack="team-vision-prod"),
        stack="team-vision-prod"), "AmazonS3FullAccess"),
    Case("team-stack-scope", "EKS access entry in system:masters", lambda: plan(resource(
        "aws:eks/accessEntry:AccessEntry", "admin", {
            "clusterName": "c", "principalArn": "arn:aws:iam::1:role/x", "kubernetesGroups": ["system:masters"]},
        stack="team-vision-prod"), stack="team-vision-prod"), "in the Kubernetes group system:masters"),
    Case("team-stack-scope", "cluster-admin association", lambda: plan(resource(
        "aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "admin", {
            "clusterName": "c", "principalArn": "arn:aws:iam::1:role/x", "accessScope": {"type": "cluster"},
            "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"}, stack="team-vision-prod"),
        stack="team-vision-prod"), "has the access scope cluster"),
    Case("team-stack-scope", "a policy on a shared bucket", lambda: plan(resource(BUCKET_POLICY, "artifacts", {
        "bucket": "gpu-training-prod-artifacts-1", "policy": policy_document()}, stack="team-vision-prod"),
        stack="team-vision-prod"), "creates S3 settings"),
    Case("team-stack-scope", "a lifecycle on a shared bucket", lambda: plan(resource(
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "expire-all", {
            "bucket": "gpu-training-prod-artifacts-1", "rules": [{"id": "x", "status": "Enabled", "expiration": {"days": 1}}]},
        stack="team-vision-prod"), stack="team-vision-prod"), "creates S3 settings"),
    Case("team-stack-scope", "a file system policy", lambda: plan(resource("aws:efs/fileSystemPolicy:FileSystemPolicy", "fsp", {
        "fileSystemId": "fs-1", "policy": policy_document()}, stack="team-vision-prod"), stack="team-vision-prod"),
        "creates a file system policy"),
    Case("team-stack-scope", "an object outside the team's prefix", lambda: plan(resource(
        "aws:s3/bucketObjectv2:BucketObjectv2", "obj", {"bucket": "gpu-training-prod-artifacts-1", "key": "teams/nlp/x"},
        stack="team-vision-prod"), stack="team-vision-prod"), "outside teams/vision/"),
    Case("team-stack-scope", "an object copied outside the team's prefix", lambda: plan(resource(
        "aws:s3/objectCopy:ObjectCopy", "copy", {"bucket": "gpu-training-prod-artifacts-1", "key": "teams/nlp/model.pt",
                                                 "source": "gpu-training-prod-artifacts-1/teams/vision/model.pt"},
        stack="team-vision-prod"), stack="team-vision-prod"), "outside teams/vision/"),
    Case("team-stack-scope", "an access point on a shared bucket", lambda: plan(resource("aws:s3/accessPoint:AccessPoint", "ap", {
        "bucket": "gpu-training-prod-artifacts-1", "policy": policy_document()}, stack="team-vision-prod"),
        stack="team-vision-prod"), "creates S3 settings"),
    Case("team-stack-scope", "an account-wide S3 setting", lambda: plan(resource(
        "aws:s3/accountPublicAccessBlock:AccountPublicAccessBlock", "open", {"blockPublicPolicy": False},
        stack="team-vision-prod"), stack="team-vision-prod"), "creates S3 settings"),
    Case("team-stack-scope", "a ClusterRoleBinding that names a namespace", lambda: plan(resource(
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "admin", {
            "metadata": {"name": "team-vision-admin", "namespace": "team-vision"},
            "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}}, stack="team-vision-prod", provider="k8s"),
        stack="team-vision-prod"), "is a cluster-scoped ClusterRoleBinding"),
    Case("team-stack-scope", "a cluster secret store", lambda: plan(resource(
        "kubernetes:external-secrets.io/v1:ClusterSecretStore", "all-secrets", {"metadata": {"name": "all"}},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"), "is a cluster-scoped ClusterSecretStore"),
    Case("team-stack-scope", "a patch that re-binds another team's volume", lambda: plan(resource(
        "kubernetes:core/v1:PersistentVolumePatch", "steal", {"metadata": {"name": "checkpoints-team-nlp"}, "spec": {
            "claimRef": {"name": "checkpoints", "namespace": "team-vision"}}}, stack="team-vision-prod", provider="k8s"),
        stack="team-vision-prod"), "patches a persistent volume"),
    Case("team-stack-scope", "a service CIDR that names a namespace", lambda: plan(resource(
        "kubernetes:networking.k8s.io/v1:ServiceCIDR", "cidr", {"metadata": {"name": "x", "namespace": "team-vision"}},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"), "is a cluster-scoped ServiceCIDR"),
    Case("team-stack-scope", "a patch that makes the team namespace privileged", lambda: plan(resource(
        "kubernetes:core/v1:NamespacePatch", "ns-patch", {"metadata": {
            "name": "team-vision", "namespace": "team-vision", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"), "enforces the pod security level privileged"),
    Case("team-stack-scope", "a privileged team namespace", lambda: plan(resource("kubernetes:core/v1:Namespace", "ns", {
        "metadata": {"name": "team-vision", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"), "enforces the pod security level privileged"),
    Case("team-stack-scope", "a Helm release", lambda: plan(resource("kubernetes:helm.sh/v3:Release", "tools", {
        "chart": "x", "namespace": "team-vision"}, stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"),
        "creates a Helm release"),
    Case("team-stack-scope", "ClusterRoleBinding", lambda: plan(resource(
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", "admin", {
            "metadata": {"name": "team-vision-admin"}, "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "trainer", "namespace": "team-vision"}]},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"), "is a cluster-scoped ClusterRoleBinding"),
    Case("team-stack-scope", "RoleBinding in another team's namespace", lambda: plan(resource(
        "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "peek", {
            "metadata": {"name": "peek", "namespace": "team-nlp"}, "roleRef": {"kind": "ClusterRole", "name": "edit"}},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"), "lives in namespace team-nlp"),
    Case("team-stack-scope", "another team's namespace", lambda: plan(resource("kubernetes:core/v1:Namespace", "ns", {
        "metadata": {"name": "team-nlp"}}, stack="team-vision-prod", provider="k8s"), stack="team-vision-prod"),
        "Namespace named team-nlp"),
    Case("team-stack-scope", "a volume bound into another namespace", lambda: plan(resource(
        "kubernetes:core/v1:PersistentVolume", "pv", {"metadata": {"name": "pv"}, "spec": {
            "claimRef": {"name": "checkpoints", "namespace": "team-nlp"}}}, stack="team-vision-prod", provider="k8s"),
        stack="team-vision-prod"), "bound to namespace team-nlp"),
    Case("no-prod-data-outside-prod", "allow on a prod bucket", lambda: plan(resource(ROLE_POLICY, "reader", {
        "role": "r", "policy": policy_document(allow(["s3:GetObject"], ["arn:aws:s3:::gpu-training-prod-datasets-1/*"]))})),
        "bucket gpu-training-prod-datasets-1"),
    Case("no-prod-data-outside-prod", "volume on a prod bucket", lambda: plan(resource(
        "kubernetes:core/v1:PersistentVolume", "datasets", {"spec": {"csi": {"driver": "s3.csi.aws.com", "volumeAttributes": {
            "bucketName": "gpu-training-prod-datasets-1"}}}}, provider="k8s")), "bucket gpu-training-prod-datasets-1"),
    Case("no-prod-data-outside-prod", "a prod key alias", lambda: plan(resource("aws:s3/bucketServerSideEncryptionConfiguration:"
        "BucketServerSideEncryptionConfiguration", "sse", {"rules": [{"applyServerSideEncryptionByDefault": {
            "sseAlgorithm": "aws:kms", "kmsMasterKeyId": "arn:aws:kms:us-east-1:1:alias/gpu-training-prod-data"}}]})),
        "key alias/gpu-training-prod-data"),
    Case("no-prod-stack-reference", "a dev team stack reads prod", lambda: plan(resource(
        "pulumi:pulumi:StackReference", "platform", {"name": "organization/gpu-training/prod"}, stack="team-vision-dev",
        provider=None), stack="team-vision-dev"), "reads the prod stack organization/gpu-training/prod"),
    Case("no-prod-stack-reference", "a dev regional stack reads prod's regional sibling", lambda: plan(resource(
        "pulumi:pulumi:StackReference", "peer", {"name": "organization/gpu-training/prod-usw2"}, stack="dev-usw2",
        provider=None), stack="dev-usw2"), "reads the prod stack organization/gpu-training/prod-usw2"),
    Case("no-prod-data-outside-prod", "a dev regional stack's volume on a prod bucket (no tags: by name)", lambda: plan(
        resource("kubernetes:core/v1:PersistentVolume", "datasets", {"spec": {"csi": {"driver": "s3.csi.aws.com",
            "volumeAttributes": {"bucketName": "gpu-training-prod-datasets-1"}}}}, provider="k8s", stack="dev-usw2"),
        stack="dev-usw2"), "bucket gpu-training-prod-datasets-1"),
    # --- allow-lists, IAM matching, trust, team references (issue #28 item 5)
    Case("allowed-resource-types", "aws-native in a team stack", lambda: plan(resource(
        "aws-native:s3:Bucket", "b", stack=TEAM), stack=TEAM), "the package aws-native"),
    Case("allowed-resource-types", "a dynamic provider", lambda: plan(resource(
        "pulumi-python:dynamic:Resource", "d", {"__provider": "x"}, provider=None)), "the package pulumi-python"),
    Case("allowed-resource-types", "a platform type in a team stack", lambda: plan(resource(
        "aws:ec2/securityGroup:SecurityGroup", "sg", stack=TEAM), stack=TEAM), "allowed only in platform stacks"),
    Case("iam-statements-scoped", "NotAction with Allow", lambda: plan(resource(ROLE_POLICY, "p", {"role": "r", "policy": policy_document(
        {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})})), "NotAction with Allow"),
    Case("iam-statements-scoped", "arn:*: partition wildcard on secrets", lambda: plan(resource(ROLE_POLICY, "p", {"role": "r",
        "policy": policy_document(allow(["secretsmanager:GetSecretValue"], ["arn:*:secretsmanager:*:*:secret:*"]))})),
        "another project's"),
    Case("iam-statements-scoped", "a whole service on every resource", lambda: plan(resource(ROLE_POLICY, "p", {"role": "r",
        "policy": policy_document(allow(["ec2:*"], ["*"]))})), "grants whole services (ec2:*)"),
    Case("iam-statements-scoped", "another team's secret reader role", lambda: team_policy(allow(
        ["sts:AssumeRole"], ["arn:aws:iam::1:role/gpu-training-prod-team-*"])), "another team's"),
    Case("iam-statements-scoped", "NotResource in the bootstrap", lambda: plan(resource(ROLE_POLICY, "p", {"role": "r",
        "policy": policy_document({"Effect": "Allow", "Action": "s3:GetObject", "NotResource": "arn:aws:s3:::x/*"})},
        stack="bootstrap"), stack="bootstrap"), "NotResource with Allow"),
    Case("role-trust-scoped", "every principal", lambda: role({"Effect": "Allow", "Principal": "*", "Action": "sts:AssumeRole"}),
         "trusts every principal"),
    Case("role-trust-scoped", "a bare account id", lambda: role({"Effect": "Allow", "Principal": {"AWS": "123456789012"},
         "Action": "sts:AssumeRole"}), "the whole account 123456789012"),
    Case("role-trust-scoped", "a role of another account", lambda: role({"Effect": "Allow", "Principal": {
        "AWS": "arn:aws:iam::999988887777:role/x"}, "Action": "sts:AssumeRole"},
        permissionsBoundary="arn:aws:iam::111122223333:policy/b"), "of another account (this stack's: 111122223333)"),
    Case("role-trust-scoped", "GitHub OIDC with sub *", lambda: role(github_trust("*", "StringLike")), "has a wildcard"),
    Case("role-trust-scoped", "GitHub OIDC without aud", lambda: role(github_trust("repo:o/r:ref:refs/heads/main", aud=None)),
         "without StringEquals"),
    Case("team-rules-own-groups", "a rule into the platform's fabric group", lambda: plan(resource(INGRESS, "in", {
        "securityGroupId": "sg-0fabric", "referencedSecurityGroupId": "sg-0fabric", "ipProtocol": "-1"}, stack=TEAM),
        stack=TEAM), "which this team stack does not own"),
    Case("ec2-instance-hardened", "public IP and IMDSv1", lambda: plan(resource(INSTANCE, "vm", GOOD_INSTANCE | {
        "associatePublicIpAddress": True, "metadataOptions": {"httpTokens": "optional"}})), "does not require IMDSv2"),
    Case("ec2-instance-hardened", "a launch template interface with a public IP", lambda: plan(resource(LAUNCH_TEMPLATE, "lt", {
        "networkInterfaces": [{"associatePublicIpAddress": "true"}]})), "gives network interface 0 a public IP"),
    Case("efs-encrypted", "unencrypted file system", lambda: plan(resource("aws:efs/fileSystem:FileSystem", "fs", {
        "encrypted": False})), "not encrypted with a customer managed key"),
    Case("kms-key-rotation", "rotation off", lambda: plan(resource("aws:kms/key:Key", "k", {"enableKeyRotation": False})),
         "does not rotate"),
    Case("bucket-access-logging", "a data bucket without logging", lambda: plan(*good_bucket()), "no server access logging",
         (BUCKET, "data")),
    Case("team-references-own", "another team's access point by id", lambda: team_volume("fs-1::fsap-0123abcd", own=False),
         "which this team stack did not create"),
    Case("team-references-own", "the whole file system", lambda: team_volume("fs-1"), "without an access point"),
    Case("team-references-own", "an access point in another team's directory", lambda: team_volume(
        "fs-1::ap-id", root="/workloads/team-nlp"), "outside the team's /workloads/team-vision", (ACCESS_POINT, "ap")),
    Case("team-references-own", "a store assuming another team's role", lambda: team_store(
        "arn:aws:iam::123456789012:role/gpu-training-prod-team-nlp-secrets"), "gpu-training-prod-team-vision-<one word>"),
    # --- cost (advisory)
    Case("on-demand-gpu-idle", "idle on-demand GPUs in dev", lambda: plan(resource(NODE_GROUP, "gpu", GPU_POOL | {
        "scalingConfig": {"minSize": 2, "maxSize": 4, "desiredSize": 2}})), "keeps 2 on-demand GPU node(s)"),
    Case("stack-has-budget", "no budget", lambda: plan(resource("aws:sns/topic:Topic", "alerts")), "stack dev has no AWS Budget",
         culprit=("", "")),
    # The teams' ClusterQueues are the platform's (components/workload/team_queues.py): a row that
    # would take other teams' GPUs is refused in the platform's plan too.
    Case("team-cluster-queues", "a team queue that borrows without a limit", lambda: plan(team_queue(
        resources=[{"name": "nvidia.com/gpu", "nominalQuota": 1000}]), stack="prod"), "borrows without a limit"),
    Case("team-cluster-queues", "a team queue that borrows by preempting", lambda: plan(team_queue(
        preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"},
                    "withinClusterQueue": "LowerPriority"}), stack="prod"), "not as the platform's queues do"),
    Case("team-cluster-queues", "a team queue with a fair-sharing weight", lambda: plan(team_queue(
        fairSharing={"weight": "100"}), stack="prod"), "fair-sharing weight"),
    Case("team-stack-scope", "a ClusterQueue from a team stack", lambda: plan(team_queue(stack=TEAM), stack=TEAM),
         "the platform stack makes the team's"),
]

# Cases a policy must let through, beyond the real plans.
PASSING = [
    Case("team-cluster-queues", "prod's team queues, made from its registry of teams", lambda: plan_records("prod")),
    Case("team-cluster-queues", "a bounded team queue", lambda: plan(team_queue(), stack="prod")),
    Case("cidr-ingress-private-and-scoped", "prod inside its allowedCidrs",
         lambda: plan_records("prod"), config={"allowedCidrs": ["10.0.0.0/8"]}),
    Case("bucket-sse-kms", "SSE-S3 on the server access log bucket", lambda: plan(
        *good_bucket("data"), *bucket("access-logs", sse={"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}),
        resource(LOGGING, "data", {"bucket": "data-id", "targetBucket": "access-logs-id", "targetPrefix": "data/"},
                 depends={"bucket": [resource(BUCKET, "data")], "targetBucket": [resource(BUCKET, "access-logs")]}))),
    Case("fabric-admits-only-itself", "outputs: unset attributes as null, rules read back inline", lambda: (
        lambda group: plan(group, fabric_rule(group, group, cidrIpv4=None, cidrIpv6=None, prefixListId=None)))(fabric_group(
            ingress=[{"self": True, "protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": [], "ipv6CidrBlocks": [],
                      "prefixListIds": [], "securityGroups": []}]))),
    Case("bucket-sse-kms", "SSE-KMS inline on the bucket", lambda: [r for r in plan(*bucket(versioning=None)) if r["name"] != "data"
        or r["type"] != BUCKET] + [resource(BUCKET, "data", {"bucket": "data-bucket", "serverSideEncryptionConfiguration": {
            "rule": {"applyServerSideEncryptionByDefault": KMS_RULE["applyServerSideEncryptionByDefault"]}}})]),
    Case("bucket-sse-kms", "S3's default read back beside the KMS resource", lambda: [
        r for r in plan(*good_bucket()) if r["type"] != BUCKET] + [resource(BUCKET, "data", {
            "bucket": "data-bucket", "serverSideEncryptionConfiguration": {"rule": {"applyServerSideEncryptionByDefault": {
                "sseAlgorithm": "AES256"}}}, "versioning": {"enabled": False}})]),
    Case("bucket-versioning", "S3's default read back beside the versioning resource", lambda: [
        r for r in plan(*good_bucket()) if r["type"] != BUCKET] + [resource(BUCKET, "data", {
            "bucket": "data-bucket", "versioning": {"enabled": False, "mfaDelete": False}})]),
    Case("eks-endpoint-access", "public dev endpoint with an allow-list", lambda: plan(resource(CLUSTER, "eks", CLUSTER_OK | {
        "vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}}))),
    Case("team-stack-scope", "a Helm v4 chart, whose objects are checked one by one", lambda: plan(resource(
        "kubernetes:helm.sh/v4:Chart", "tools", {"chart": "x", "namespace": "team-vision"}, stack="team-vision-prod",
        provider="k8s", custom=False), stack="team-vision-prod")),
    Case("team-stack-scope", "a patch annotating the team's own namespace", lambda: plan(resource(
        "kubernetes:core/v1:NamespacePatch", "ns-patch", {"metadata": {"name": "team-vision", "annotations": {"a": "b"}}},
        stack="team-vision-prod", provider="k8s"), stack="team-vision-prod")),
    Case("team-stack-scope", "an object under the team's prefix", lambda: plan(resource(
        "aws:s3/bucketObjectv2:BucketObjectv2", "obj", {"bucket": "gpu-training-prod-artifacts-1", "key": "teams/vision/x"},
        stack="team-vision-prod"), stack="team-vision-prod")),
    Case("team-iam-scope", "role with an inline policy on the team's prefix and no managed policies", lambda: plan(resource(
        ROLE, "team-role", {"assumeRolePolicy": policy_document(), "managedPolicyArns": [], "inlinePolicies": [{
            "name": "own", "policy": policy_document(allow(["s3:PutObject"], [
                "arn:aws:s3:::gpu-training-prod-artifacts-1/teams/vision/*"]))}]},
        stack="team-vision-prod"), stack="team-vision-prod")),
    Case("no-prod-stack-reference", "a dev team stack reads dev", lambda: plan(resource(
        "pulumi:pulumi:StackReference", "platform", {"name": "organization/gpu-training/dev"}, stack="team-vision-dev",
        provider=None), stack="team-vision-dev")),
    Case("explicit-provider", "a StackReference on the built-in provider", lambda: plan(resource(
        "pulumi:pulumi:StackReference", "platform", {"name": "organization/gpu-training/dev"}, stack="team-vision-dev",
        provider=None), stack="team-vision-dev")),
    Case("no-plaintext-secrets", "a token as a Secrets Manager value", lambda: plan(resource(
        "aws:secretsmanager/secretVersion:SecretVersion", "hf-token", {"secretId": "s", "secretString": "hf_" + "a" * 34}))),
    Case("on-demand-gpu-idle", "warm on-demand GPUs in prod", lambda: plan(resource(NODE_GROUP, "gpu", GPU_POOL | {
        "scalingConfig": {"minSize": 2, "maxSize": 4, "desiredSize": 2}}, stack="prod"), stack="prod")),
    Case("no-plaintext-secrets", "env vars that locate a credential", lambda: plan(resource("kubernetes:batch/v1:Job", "job", {
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [
            {"name": "TOKEN_DIR", "value": "/var/run/secrets/x"}, {"name": "AWS_WEB_IDENTITY_TOKEN_FILE", "value": "/t"},
            {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]}}}}, provider="k8s"))),
    Case("allowed-resource-types", "a StackReference in a team stack (not in the plans: a read)", lambda: plan(resource(
        "pulumi:pulumi:StackReference", "platform", {"name": "organization/gpu-training/prod"}, stack=TEAM, provider=None),
        stack=TEAM)),
    Case("iam-statements-scoped", "Describe actions on * and this project's own ARNs", lambda: plan(resource(ROLE_POLICY, "p", {
        "role": "r", "policy": {"Statement": [allow(["ec2:DescribeInstances"], ["*"]), allow(
            ["secretsmanager:GetSecretValue"], ["arn:aws:secretsmanager:us-east-1:1:secret:gpu-training/dev/*"])]}}))),
    Case("iam-statements-scoped", "a Deny with NotAction", lambda: plan(resource(ROLE_POLICY, "p", {"role": "r", "policy":
        policy_document({"Effect": "Deny", "NotAction": "s3:GetObject", "Resource": "*"})}))),
    Case("role-trust-scoped", "GitHub OIDC pull requests of one repository", lambda: role(github_trust(
        ["repo:o/r:pull_request:ref:refs/pull/*/merge", "repo:o/r:ref:refs/heads/main:ref:refs/heads/main"], "StringLike"))),
    Case("role-trust-scoped", "a role of the same account", lambda: role({"Effect": "Allow", "Principal": {
        "AWS": "arn:aws:iam::111122223333:role/x"}, "Action": "sts:AssumeRole"},
        permissionsBoundary="arn:aws:iam::111122223333:policy/b")),
    Case("role-trust-scoped", "a role of a configured account", lambda: role({"Effect": "Allow", "Principal": {
        "AWS": "arn:aws:iam::999988887777:role/x"}, "Action": "sts:AssumeRole"},
        permissionsBoundary="arn:aws:iam::111122223333:policy/b"), config={"accountIds": ["999988887777"]}),
    Case("team-rules-own-groups", "a platform stack's rule on its own group", lambda: (lambda group: plan(group, fabric_rule(
        group, group)))(fabric_group())),
    Case("ec2-instance-hardened", "a hardened instance", lambda: plan(resource(INSTANCE, "vm", GOOD_INSTANCE))),
    Case("kms-key-rotation", "an asymmetric signing key", lambda: plan(resource("aws:kms/key:Key", "k", {
        "customerMasterKeySpec": "RSA_2048", "keyUsage": "SIGN_VERIFY"}))),
    Case("team-references-own", "the team's own access point", lambda: team_volume("fs-1::ap-id")),
    Case("team-references-own", "a store assuming the team's own reader role", lambda: team_store(
        "arn:aws:mock:us-east-1:1:role/reader", own_name="gpu-training-prod-team-vision-secrets")),
    Case("bucket-access-logging", "a logged bucket and its log target", lambda: plan(
        *good_bucket("data"), *good_bucket("access-logs"),
        resource(LOGGING, "data", {"bucket": "data-id", "targetBucket": "access-logs-id", "targetPrefix": "data/"},
                 depends={"bucket": [resource(BUCKET, "data")], "targetBucket": [resource(BUCKET, "access-logs")]}))),
    Case("stack-has-budget", "a minimal stack with a budget", lambda: plan(resource("aws:sns/topic:Topic", "alerts"), resource(
        BUDGET, "budget", {"budgetType": "COST", "limitAmount": "100", "limitUnit": "USD", "timeUnit": "MONTHLY"}))),
]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
def test_every_policy_passes_on_every_plan(policy, stack):
    violations = evaluate(plan_records(stack), [policy])
    assert violations == [], "\n".join(map(str, violations))


@pytest.mark.parametrize("stack", BOOTSTRAP_STACKS)
@pytest.mark.parametrize("policy", [p for p in POLICIES if p.name not in ADVISORY], ids=lambda p: p.name)
def test_every_mandatory_policy_passes_on_the_bootstrap(policy, stack):
    """The bootstrap serves every environment: no `environment` tag, and (advisory) no budget."""
    violations = evaluate(plan_records(stack), [policy])
    assert violations == [], "\n".join(map(str, violations))


@pytest.mark.parametrize("case", PASSING, ids=lambda c: f"{c.policy}: {c.id}")
def test_policy_lets_through(case: Case):
    violations = evaluate(case.records(), [POLICY_BY_NAME[case.policy]], {case.policy: case.config})
    assert violations == [], "\n".join(map(str, violations))


@pytest.mark.parametrize("case", FAILING, ids=lambda c: f"{c.policy}: {c.id}")
def test_policy_reports_the_violating_resource(case: Case):
    records = case.records()
    culprit = records[-1] if case.culprit is None else next(
        (r for r in records if (r["type"], r["name"]) == case.culprit), None)
    violations = evaluate(records, [POLICY_BY_NAME[case.policy]], {case.policy: case.config})

    assert violations, f"{case.policy} let {case.id} through"
    assert {v.policy for v in violations} == {case.policy}
    assert {v.level for v in violations} == {"advisory" if case.policy in ADVISORY else "mandatory"}
    assert {v.urn for v in violations} == {culprit["urn"] if culprit else None}
    assert any(case.says in v.message for v in violations), "\n".join(map(str, violations))
    if culprit:
        assert all(culprit["name"] in v.message for v in violations), "the message names the resource"


def test_every_policy_has_a_passing_and_a_failing_case():
    names = {p.name for p in POLICIES}
    assert names == {c.policy for c in FAILING}, "a policy without a failing case"
    # Passing cases: every plan, for every policy (test_every_policy_passes_on_every_plan), plus PASSING.
    assert len(names) == len(POLICIES), "policy names are unique"


def test_the_levels_are_as_documented():
    levels = {p.name: str(p.enforcement_level.value) for p in POLICIES if p.enforcement_level}
    assert {n for n, level in levels.items() if level == "advisory"} == ADVISORY
    assert len(levels) == len(POLICIES), "every policy states its level"



def test_the_documentation_lists_every_policy_with_its_level():
    table = (ROOT / "docs" / "policy.md").read_text()
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \| (mandatory|advisory) \|", table, re.M))
    assert documented == {(p.name, str(p.enforcement_level.value)) for p in POLICIES if p.enforcement_level}
