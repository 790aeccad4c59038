"""VPC peering between a MultiKueue manager and each of its workers (issue #30).

prod's API endpoint is private (CIS 5.4.2), and so is every worker's: the manager's rotation
CronJob and Kueue, in the manager's private subnets, reach a worker's API over an inter-Region
VPC peering connection. EKS's "Accessing a private only API server" (EKS User Guide, Cluster API
server endpoint, https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html) asks of a
connected network only that the control plane's security group "contains rules to allow ingress
traffic on port 443 from your connected network": security_groups.py adds that rule on the worker
for the manager's VPC CIDR alone.

DNS needs nothing across the peering: with public access off, "the cluster's API server endpoint
is resolved by public DNS servers to a private IP address from the VPC" (same page), and AWS's
knowledge center says a peered VPC resolves it that way ("If you activate only private endpoint
access, then Amazon EKS automatically advertises the endpoints' private IP addresses through the
API server's public DNS name", https://repost.aws/knowledge-center/eks-private-cluster-endpoint-vpc).
The EKS private hosted zone itself "is managed by Amazon EKS, and it doesn't appear in your
account's Route 53 resources", so it could not be associated with the manager's VPC anyway; the
peering's own DNS option (allow_remote_vpc_dns_resolution) concerns EC2 public hostnames and is
left off. The rotation script writes the endpoint DescribeCluster returns, a hostname.

Who makes what (cross-stack names are derived, no StackReference):

- the manager requests the peering to each worker's VPC (found by its Name tag and CIDR in the
  worker's Region) and accepts it there itself (pulumi-aws v7's `region` argument: one provider,
  the same account; "the request must be made from the Region of the requester VPC, and the
  request must be accepted from the Region of the accepter VPC", Amazon VPC Peering Guide,
  "Create a VPC peering connection"), so the connection is active when its `pulumi up` ends; the manager's
  private route tables route the worker's CIDR to it;
- the worker finds the active connection by the two CIDRs and routes the manager's CIDR to it
  in its private route tables (the route tables hold their routes inline, vpc.py: a route
  another stack added would be removed by this stack's next update, so each side routes its own).

A lookup that finds nothing (the other side is not deployed yet: "Adding a region") plans that
half without the peering, with a warning; the next deploy in the order manager, worker completes
it. Plural lookups return empty where a singular one would fail the preview.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

ACTIVE = "active"
"""The state of a peering connection that carries traffic (EC2 API Reference, VpcPeeringConnectionStateReason)."""


@dataclass(frozen=True)
class PeeringRequest:
    """A peering this VPC requests (the manager's, to one worker)."""

    name: str
    """The Name tag on both sides (config/multikueue.py peering_name)."""
    peer_stack: str
    peer_region: str
    peer_vpc_id: str
    """The peer's VPC, as the lookup found it."""
    peer_cidr: str
    """Routed to the connection from this VPC's private route tables."""


@dataclass(frozen=True)
class PeerRoute:
    """A route to the other side of a peering connection."""

    cidr: str
    connection_id: pulumi.Input[str]


def vpc_filters(*, name: str, cidr: str) -> list[aws.ec2.GetVpcsFilterArgsDict]:
    """DescribeVpcs filters of a platform stack's VPC: its Name tag (vpc.py names it by the stack's
    name prefix) and its CIDR (the stack file's network.vpcCidr)."""
    return [{"name": "tag:Name", "values": [name]}, {"name": "cidr-block-association.cidr-block", "values": [cidr]}]


def peering_filters(*, requester_cidr: str, accepter_cidr: str) -> list[aws.ec2.GetVpcPeeringConnectionsFilterArgsDict]:
    """DescribeVpcPeeringConnections filters of the manager <-> worker connection as the worker
    sees it: by the two CIDRs, which no two stacks of the checkout share (sibling_stacks.py), and
    active. (Not by tag: the tags the requester sets live in the requester's Region.)"""
    return [{"name": "requester-vpc-info.cidr-block", "values": [requester_cidr]},
            {"name": "accepter-vpc-info.cidr-block", "values": [accepter_cidr]},
            {"name": "status-code", "values": [ACTIVE]}]


def find_vpc(provider: aws.Provider, *, region: str, name: str, cidr: str) -> str | None:
    """The id of the VPC named `name` with `cidr` in `region`, or None if it does not exist (yet)."""
    found = aws.ec2.get_vpcs(filters=vpc_filters(name=name, cidr=cidr), region=region,
                             opts=pulumi.InvokeOptions(provider=provider))
    return sorted(found.ids)[0] if found.ids else None


def find_peering(provider: aws.Provider, *, requester_cidr: str, accepter_cidr: str) -> str | None:
    """The id of the active peering connection between the two ranges in the provider's Region, or None."""
    found = aws.ec2.get_vpc_peering_connections(
        filters=peering_filters(requester_cidr=requester_cidr, accepter_cidr=accepter_cidr),
        opts=pulumi.InvokeOptions(provider=provider))
    return sorted(found.ids)[0] if found.ids else None


class VpcPeering(pulumi.ComponentResource):
    """A peering connection to another Region's VPC of the same account, requested and accepted
    (the accepter in the peer's Region). `connection_id` is the accepter's: routes to it wait
    until the connection is active."""

    connection_id: pulumi.Output[str]

    def __init__(self, name: str, *, vpc_id: pulumi.Input[str], request: PeeringRequest,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:network:VpcPeering", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = {"Name": request.name, "peer-stack": request.peer_stack}
        # Inter-Region: the request leaves auto_accept unset (the provider's docs for peer_region:
        # "auto_accept must be false, and use the aws_vpc_peering_connection_accepter to manage the
        # accepter side"); the accepter accepts it in the peer's Region.
        connection = aws.ec2.VpcPeeringConnection(
            f"{name}-request", vpc_id=vpc_id, peer_vpc_id=request.peer_vpc_id, peer_region=request.peer_region,
            tags=tags, opts=child)
        accepter = aws.ec2.VpcPeeringConnectionAccepter(
            f"{name}-accept", region=request.peer_region, vpc_peering_connection_id=connection.id, auto_accept=True,
            tags=tags, opts=child)
        self.connection_id = accepter.id
        self.register_outputs({"connectionId": self.connection_id})
