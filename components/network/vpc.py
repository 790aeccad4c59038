"""The VPC: public and private subnets per AZ, NAT, routes and flow logs.

Subnets come from `cidr_plan` (pure, table-tested). Nodes and pods live only in private
subnets; public subnets hold NAT gateways and internet-facing load balancers. VPC endpoints
live in `endpoints.py` because they need the security groups made from this VPC.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common import iam
from components.config import NetworkConfig
from components.network.peering import PeeringRequest, PeerRoute, VpcPeering


def public_subnet_name(name_prefix: str, availability_zone: str) -> str:
    """The Name tag of a zone's public subnet (the load balancer controller finds subnets by it)."""
    return f"{name_prefix}-public-{availability_zone}"

@dataclass(frozen=True)
class NetworkArgs:
    config: NetworkConfig
    """CIDR, zones, NAT gateways and flow log retention."""
    name_prefix: str
    """Names the VPC, its subnets, gateways and flow log group."""
    cluster_name: str
    """Tags the subnets for the cluster's load balancers (kubernetes.io/cluster/<name>)."""
    account_id: pulumi.Input[str]
    """The account the flow log role trusts."""
    logs_key_arn: pulumi.Input[str]
    """Encrypts the flow-log group (the environment's CloudWatch Logs key)."""
    peerings: tuple[PeeringRequest, ...] = ()
    """Peering connections this VPC requests (a MultiKueue manager's, one per worker found)."""
    peer_routes: tuple[PeerRoute, ...] = ()
    """Routes to connections another stack made (a MultiKueue worker's, to its manager)."""


class Network(pulumi.ComponentResource):
    vpc: aws.ec2.Vpc
    public_subnets: list[aws.ec2.Subnet]
    private_subnets: list[aws.ec2.Subnet]
    private_route_tables: list[aws.ec2.RouteTable]
    peerings: list[VpcPeering]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:network:Network", name, None, opts)
        self._name = name
        self._args = args
        child = pulumi.ResourceOptions(parent=self)

        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=str(args.config.vpc_cidr),
            enable_dns_support=True,
            enable_dns_hostnames=True,  # needed for private DNS of interface endpoints and EKS
            tags={"Name": args.name_prefix},
            opts=child,
        )
        # Adopt the default security group and strip every rule (FSBP EC2.2): nothing may
        # silently fall back to it.
        aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=self.vpc.id, ingress=[], egress=[],
                                     tags={"Name": f"{args.name_prefix}-default-unused"}, opts=child)
        self._create_subnets()
        nat_gateways = self._create_nat_gateways()
        self.peerings = [VpcPeering(f"{name}-peering-{request.peer_stack}", vpc_id=self.vpc.id, request=request,
                                    opts=child) for request in args.peerings]
        self._create_routes(nat_gateways, [
            *(PeerRoute(request.peer_cidr, peering.connection_id) for request, peering in zip(
                args.peerings, self.peerings, strict=True)), *args.peer_routes])
        self._create_flow_logs()

        self.register_outputs({
            "vpcId": self.vpc.id,
            "privateSubnetIds": [s.id for s in self.private_subnets],
            "publicSubnetIds": [s.id for s in self.public_subnets],
        })

    def _create_subnets(self) -> None:
        args = self._args
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        self.public_subnets, self.private_subnets = [], []
        for plan in args.config.subnets:
            az = plan.availability_zone
            self.public_subnets.append(self._subnet("public", az, plan.public, {
                "Name": public_subnet_name(args.name_prefix, az), "kubernetes.io/role/elb": "1", **cluster_tag}))
            self.private_subnets.append(self._subnet("private", az, plan.private, {
                "Name": f"{args.name_prefix}-private-{az}", "kubernetes.io/role/internal-elb": "1", **cluster_tag}))

    def _subnet(self, tier: str, az: str, cidr: ipaddress.IPv4Network, tags: dict[str, str]) -> aws.ec2.Subnet:
        """One zone's subnet of a tier. Nothing gets a public IP by default, not even in the public
        tier: only NAT gateways and load balancers live there."""
        return aws.ec2.Subnet(f"{self._name}-{tier}-{az}", vpc_id=self.vpc.id, cidr_block=str(cidr),
                              availability_zone=az, map_public_ip_on_launch=False, tags=tags,
                              opts=pulumi.ResourceOptions(parent=self))

    def _create_nat_gateways(self) -> list[aws.ec2.NatGateway]:
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        internet_gateway = aws.ec2.InternetGateway(f"{self._name}-igw", vpc_id=self.vpc.id,
                                                   tags={"Name": args.name_prefix}, opts=child)
        self._public_route_table = aws.ec2.RouteTable(
            f"{self._name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=internet_gateway.id)],
            tags={"Name": f"{args.name_prefix}-public"},
            opts=child,
        )
        for subnet, plan in zip(self.public_subnets, args.config.subnets, strict=True):
            aws.ec2.RouteTableAssociation(f"{self._name}-public-{plan.availability_zone}",
                                          subnet_id=subnet.id, route_table_id=self._public_route_table.id, opts=child)

        # One NAT per AZ keeps an AZ outage from cutting the others off; dev saves the cost.
        nat_subnets = list(zip(self.public_subnets, args.config.subnets, strict=True))
        if not args.config.nat_per_az:
            nat_subnets = nat_subnets[:1]
        gateways = []
        for subnet, plan in nat_subnets:
            az = plan.availability_zone
            eip = aws.ec2.Eip(f"{self._name}-nat-{az}", domain="vpc", tags={"Name": f"{args.name_prefix}-nat-{az}"}, opts=child)
            gateways.append(aws.ec2.NatGateway(
                f"{self._name}-nat-{az}",
                allocation_id=eip.id,
                subnet_id=subnet.id,
                tags={"Name": f"{args.name_prefix}-{az}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[internet_gateway]),
            ))
        return gateways

    def _create_routes(self, nat_gateways: list[aws.ec2.NatGateway], peer_routes: list[PeerRoute]) -> None:
        """Inline routes: the table holds exactly these (a route added outside the stack is removed
        on its next update), so the peering's routes are here too."""
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        self.private_route_tables = []
        for index, (subnet, plan) in enumerate(zip(self.private_subnets, args.config.subnets, strict=True)):
            az = plan.availability_zone
            nat = nat_gateways[index] if args.config.nat_per_az else nat_gateways[0]
            # checkov CKV2_AWS_44 (a table with a peering route holds a 0.0.0.0/0 route): that route
            # is the NAT gateway's; the peering's names the peer VPC's range alone
            # (tests/test_checkov_plans.py JUSTIFIED).
            table = aws.ec2.RouteTable(
                f"{self._name}-private-rt-{az}",
                vpc_id=self.vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id),
                        *(aws.ec2.RouteTableRouteArgs(cidr_block=route.cidr, vpc_peering_connection_id=route.connection_id)
                          for route in peer_routes)],
                tags={"Name": f"{args.name_prefix}-private-{az}"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(f"{self._name}-private-{az}", subnet_id=subnet.id,
                                          route_table_id=table.id, opts=child)
            self.private_route_tables.append(table)

    def _create_flow_logs(self) -> None:
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        # checkov CKV_AWS_338 (a year's retention): 365 days in prod, less in dev and staging on
        # purpose (network.flowLogRetentionDays; docs/upgrading-and-pins.md).
        log_group = aws.cloudwatch.LogGroup(
            f"{self._name}-flow-logs",
            name=f"/aws/vpc/{args.name_prefix}/flow-logs",
            retention_in_days=args.config.flow_log_retention_days,
            kms_key_id=args.logs_key_arn,
            opts=child,
        )
        role = aws.iam.Role(
            f"{self._name}-flow-logs",
            assume_role_policy=pulumi.Output.from_input(args.account_id).apply(
                lambda account: iam.service_trust_policy("vpc-flow-logs.amazonaws.com", account_id=account)),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{self._name}-flow-logs",
            role=role.id,
            policy=log_group.arn.apply(lambda arn: iam.policy(iam.statement(
                ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"], [arn, f"{arn}:*"]))),
            opts=child,
        )
        aws.ec2.FlowLog(
            f"{self._name}-flow-log",
            vpc_id=self.vpc.id,
            traffic_type="ALL",  # rejected traffic is what shows a blocked NCCL port
            log_destination_type="cloud-watch-logs",
            log_destination=log_group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=60,
            opts=child,
        )
