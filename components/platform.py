"""Composition root of a platform stack (dev, staging, prod): wires components in one direction.

config -> explicit providers -> network -> security groups -> endpoints -> ... -> outputs.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.config import StackConfig
from components.network import Network, NetworkArgs
from components.security_groups import SecurityGroups, SecurityGroupsArgs
from components.tags import default_tags
from components.vpc_endpoints import VpcEndpoints, VpcEndpointsArgs


def aws_provider(config: StackConfig) -> aws.Provider:
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
        efa_fabric=True,
        socket_fabric=True,
    ), on_aws)
    VpcEndpoints("vpc-endpoints", VpcEndpointsArgs(
        region=config.region,
        vpc_id=network.vpc.id,
        private_subnet_ids=[s.id for s in network.private_subnets],
        private_route_table_ids=[t.id for t in network.private_route_tables],
        security_group_id=security_groups.vpc_endpoints.id,
    ), on_aws)

    return {
        "environment": config.environment,
        "region": config.region,
        "vpcId": network.vpc.id,
        "privateSubnetIds": [s.id for s in network.private_subnets],
        "ncclPortRange": {"first": config.fabric.nccl_port_range.first, "last": config.fabric.nccl_port_range.last},
        "rendezvousPorts": list(config.fabric.rendezvous_ports),
    }
