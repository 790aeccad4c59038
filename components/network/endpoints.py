"""VPC endpoints so private nodes reach AWS without the NAT: cheaper, and no internet path."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

# Interface endpoints private nodes need, and why.
INTERFACE_ENDPOINTS = {
    "ecr.api": "image pull authentication and manifests",
    "ecr.dkr": "image layers (the layers themselves come through the S3 gateway)",
    "sts": "Pod Identity / IRSA credential exchange",
    "eks-auth": "EKS Pod Identity credentials for pods",
    "logs": "container and flow logs to CloudWatch Logs",
    "secretsmanager": "External Secrets reads training secrets",
    "ec2": "VPC CNI ENI management and node bootstrap",
    "elasticfilesystem": "EFS CSI driver creating access points",
}


@dataclass(frozen=True)
class VpcEndpointsArgs:
    region: str
    """Names the endpoints' services (com.amazonaws.<region>.<service>)."""
    vpc_id: pulumi.Input[str]
    """The VPC the endpoints are in."""
    private_subnet_ids: list[pulumi.Input[str]]
    """Where the interface endpoints' network interfaces go."""
    private_route_table_ids: list[pulumi.Input[str]]
    """The route tables the S3 gateway endpoint is added to."""
    security_group_id: pulumi.Input[str]
    """The security group of the interface endpoints (HTTPS from inside the VPC)."""


class VpcEndpoints(pulumi.ComponentResource):
    def __init__(self, name: str, args: VpcEndpointsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:network:VpcEndpoints", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        # Gateway endpoint: free, and carries ECR image layers, datasets and checkpoints.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=args.vpc_id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=args.private_route_table_ids,
            tags={"Name": "s3"},
            opts=child,
        )
        for service, purpose in INTERFACE_ENDPOINTS.items():
            aws.ec2.VpcEndpoint(
                f"{name}-{service.replace('.', '-')}",
                vpc_id=args.vpc_id,
                service_name=f"com.amazonaws.{args.region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=args.private_subnet_ids,
                security_group_ids=[args.security_group_id],
                tags={"Name": service, "purpose": purpose},
                opts=child,
            )
        self.register_outputs({})
