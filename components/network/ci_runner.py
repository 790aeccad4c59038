"""Where the environment's CI runner sits: a security group that may reach the EKS API.

`pulumi preview` and `pulumi up` talk to the cluster (Kubernetes objects, Helm releases), and the
API endpoint is private (staging, prod) or allow-listed (dev): they run on a self-hosted runner
inside the VPC (docs/delivery.md, "CI runners"). The runner joins this group, in the stack's
private subnets (outputs `ciRunnerSecurityGroupId`, `privateSubnetIds`); the control plane admits
HTTPS from it and nothing else of the runner's. It reaches GitHub, the package registries and
AWS APIs over HTTPS, through NAT and the VPC endpoints.

The runner machines themselves are not this program's: they are ephemeral (one job each), in
runner groups apart for pull request previews and deploys, and launched with the tags
`environment=<env>` and `project=<project>`, which `scripts/verify` checks on every instance in
this group (verify/ci_runners.py). The group carries the stack's default tags like every resource.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.network.security_groups import HTTPS_PORT


@dataclass(frozen=True)
class CiRunnerAccessArgs:
    vpc_id: pulumi.Input[str]
    """The VPC of the CI runners' security group."""
    name_prefix: str
    """Names the runners' security group."""
    control_plane: aws.ec2.SecurityGroup
    """The control plane's security group, which lets the runners reach the API (HTTPS)."""


class CiRunnerAccess(pulumi.ComponentResource):
    runner: aws.ec2.SecurityGroup

    def __init__(self, name: str, args: CiRunnerAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:network:CiRunnerAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group_name = f"{args.name_prefix}-ci-runner"
        # checkov CKV2_AWS_5 (a group attached to nothing): the runner instances it is for are
        # launched outside the stacks (docs/delivery.md), so no planned resource names it.
        self.runner = aws.ec2.SecurityGroup(
            f"{name}-group", name=group_name, vpc_id=args.vpc_id, tags={"Name": group_name},
            description="Self-hosted CI runner: pulumi preview/up against the EKS API", opts=child)
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-to-anywhere-https", security_group_id=self.runner.id, ip_protocol="tcp",
            from_port=HTTPS_PORT, to_port=HTTPS_PORT, cidr_ipv4="0.0.0.0/0",
            description="GitHub, package registries, the EKS API and AWS APIs over HTTPS", opts=child)
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-control-plane-from-runner", security_group_id=args.control_plane.id, ip_protocol="tcp",
            from_port=HTTPS_PORT, to_port=HTTPS_PORT, referenced_security_group_id=self.runner.id,
            description="Kubernetes API from the CI runner", opts=child)
        self.register_outputs({"securityGroupId": self.runner.id})
