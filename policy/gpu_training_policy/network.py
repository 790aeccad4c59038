"""Security groups: nothing open to the internet, the GPU fabric closed to everything but itself,
CIDR sources private and port-scoped.

A rule can be written three ways in pulumi-aws and the policies read all of them: one resource per
rule (`aws.vpc.SecurityGroupIngressRule`, what the program uses), the older
`aws.ec2.SecurityGroupRule`, and `ingress` blocks inline on the group.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    PolicyConfigSchema,
    PolicyResource,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
)

from gpu_training_policy.resources import Report, as_list, describe, get, is_set, stack_of, truthy
from gpu_training_policy.rules import resource_rule, stack_rule

INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
LEGACY_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
GROUP = "aws:ec2/securityGroup:SecurityGroup"
DEFAULT_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
ALL_PROTOCOLS = ("-1", "all")
# Never opened from a CIDR: nodes are reached through SSM Session Manager (the config model's
# ADMIN_PORTS in components/config/network.py).
ADMIN_PORTS = (22, 3389)
# Private address space: RFC 1918, RFC 6598 (carrier-grade NAT, used by some VPN/peering
# setups) and IPv6 unique local addresses (RFC 4193).
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in
                         ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"))
# The GPU fabric groups: components/network/security_groups.py names them <prefix>-efa-fabric
# and <prefix>-socket-fabric.
FABRIC_SUFFIX = "-fabric"


@dataclass(frozen=True)
class Admission:
    """One way a group admits traffic from CIDRs, whichever resource kind declares it."""

    cidrs: tuple[str, ...]
    protocol: str
    from_port: int | None
    to_port: int | None

    @property
    def all_traffic(self) -> bool:
        return self.protocol in ALL_PROTOCOLS

    def opens(self, port: int) -> bool:
        if self.all_traffic:
            return True
        if self.protocol not in ("tcp", "udp", "6", "17"):
            return False
        low = 0 if self.from_port is None else self.from_port
        high = 65535 if self.to_port is None else self.to_port
        return low <= port <= high


def cidr_admissions(resource_type: str, props: Mapping[str, Any]) -> list[Admission]:
    """The CIDR-sourced ingress a resource declares (empty for other types and egress)."""
    if resource_type == INGRESS_RULE:
        cidrs = tuple(c for c in (get(props, "cidrIpv4"), get(props, "cidrIpv6")) if c)
        if not cidrs:
            return []
        return [Admission(cidrs, str(get(props, "ipProtocol", "")), get(props, "fromPort"), get(props, "toPort"))]
    if resource_type == LEGACY_RULE:
        if get(props, "type") != "ingress":
            return []
        return [_block_admission(props)] if _block_cidrs(props) else []
    if resource_type in (GROUP, DEFAULT_GROUP):
        return [_block_admission(block) for block in as_list(get(props, "ingress")) if _block_cidrs(block)]
    return []


def _block_cidrs(block: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(c) for key in ("cidrBlocks", "ipv6CidrBlocks") for c in as_list(get(block, key)))


def _block_admission(block: Mapping[str, Any]) -> Admission:
    return Admission(_block_cidrs(block), str(get(block, "protocol", "")), get(block, "fromPort"), get(block, "toPort"))


def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return None


def _inside(network: ipaddress.IPv4Network | ipaddress.IPv6Network,
            parents: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    return any(network.version == p.version and network.subnet_of(p) for p in parents)  # pyright: ignore[reportArgumentType]


# --- no-open-ingress --------------------------------------------------------------------------

@resource_rule(Severity.CRITICAL)
def no_open_ingress(args: ResourceValidationArgs, report: Report) -> None:
    """No security group rule admits 0.0.0.0/0 or ::/0."""
    for admission in cidr_admissions(args.resource_type, args.props):
        for cidr in admission.cidrs:
            network = _network(cidr)
            if network is not None and network.prefixlen == 0:
                report(f"{describe(args.name, args.resource_type)} admits {cidr}: every address on the internet. "
                       "Admit a security group or a private CIDR instead.")


# --- cidr-ingress-private-and-scoped ----------------------------------------------------------

# The settings a stack's policy configuration may give cidr-ingress-private-and-scoped.
CIDR_INGRESS_PRIVATE_AND_SCOPED_SETTINGS = PolicyConfigSchema(properties={
    "allowedCidrs": {
        "type": "array",
        "items": {"type": "string"},
        "description": "When set, CIDR sources must lie inside one of these (e.g. your collectors and VPCs).",
    },
})


@resource_rule(Severity.HIGH, config_schema=CIDR_INGRESS_PRIVATE_AND_SCOPED_SETTINGS)
def cidr_ingress_private_and_scoped(args: ResourceValidationArgs, report: Report) -> None:
    """Ingress from CIDRs (the metrics/log collectors, the VPC) comes from private ranges, names its ports, never opens
    SSH/RDP, and stays inside the optional allowedCidrs list."""
    allowed = [n for n in (_network(str(c)) for c in as_list((args.get_config() or {}).get("allowedCidrs"))) if n]
    what = describe(args.name, args.resource_type)
    for admission in cidr_admissions(args.resource_type, args.props):
        # Unparseable CIDRs fail in the provider; 0.0.0.0/0 and ::/0 are no-open-ingress's.
        networks = [n for n in map(_network, admission.cidrs) if n is not None and n.prefixlen > 0]
        if not networks:
            continue
        sources = ", ".join(map(str, networks))
        if admission.all_traffic:
            report(f"{what} admits all traffic from {sources}. Name the protocol and ports "
                   "(metrics/log ports are listed in network.monitoringIngress.ports).")
        else:
            for port in ADMIN_PORTS:
                if admission.opens(port):
                    report(f"{what} opens administration port {port} to {sources}. "
                           "Reach nodes with SSM Session Manager instead.")
        for network in networks:
            if not _inside(network, PRIVATE_NETWORKS):
                report(f"{what} admits the public range {network}. Nodes live in private subnets: list the private "
                       "CIDRs of your collectors (reached over VPN/peering) in network.monitoringIngress.cidrs.")
            elif allowed and not _inside(network, allowed):
                report(f"{what} admits {network}, which is outside this policy's allowedCidrs "
                       f"({', '.join(str(a) for a in allowed)}).")


# --- fabric-admits-only-itself ------------------------------------------------------------------

def is_fabric_group(resource: PolicyResource) -> bool:
    if resource.resource_type != GROUP:
        return False
    physical = get(resource.props, "name")
    names = [resource.name] + ([physical] if isinstance(physical, str) else [])
    return any(n.endswith(FABRIC_SUFFIX) for n in names)


def _dependencies(resource: PolicyResource, key: str) -> set[str]:
    return {d.urn for d in resource.property_dependencies.get(key, [])}


def _foreign_sources(resource: PolicyResource, group_urn: str) -> list[str]:
    """What an ingress rule on `group_urn` admits besides the group itself."""
    props, found = resource.props, []
    if resource.resource_type == INGRESS_RULE:
        found += [f"{key} {get(props, key)}" for key in ("cidrIpv4", "cidrIpv6", "prefixListId") if is_set(props, key)]
        peers = _dependencies(resource, "referencedSecurityGroupId")
        if peers != {group_urn}:
            found += [f"security group {urn.split('::')[-1]}" for urn in sorted(peers - {group_urn})]
            if not peers and not found:
                found.append("a peer that is not the group itself")
    else:  # LEGACY_RULE
        found += [f"{key} {', '.join(map(str, as_list(get(props, key))))}"
                  for key in ("cidrBlocks", "ipv6CidrBlocks", "prefixListIds") if as_list(get(props, key))]
        peers = _dependencies(resource, "sourceSecurityGroupId")
        if not truthy(get(props, "self")) and peers != {group_urn}:
            found.append("a peer that is not the group itself")
    return found


@stack_rule(Severity.HIGH)
def fabric_admits_only_itself(args: StackValidationArgs, report: Report) -> None:
    """The GPU fabric security groups (named *-fabric) admit traffic only from themselves."""
    fabric = {r.urn: r for r in args.resources if is_fabric_group(r)}
    for resource in args.resources:
        what = describe(resource.name, resource.resource_type)
        if resource.urn in fabric:
            for index, block in enumerate(as_list(get(resource.props, "ingress"))):
                extra = [key for key in ("cidrBlocks", "ipv6CidrBlocks", "prefixListIds", "securityGroups")
                         if as_list(get(block, key))]
                if extra or not truthy(get(block, "self")):
                    report(f"{what}: inline ingress[{index}] admits {', '.join(extra) or 'something other than itself'}; "
                           "a GPU fabric group admits only itself.", resource.urn)
            continue
        is_ingress = resource.resource_type == INGRESS_RULE or (
            resource.resource_type == LEGACY_RULE and get(resource.props, "type") == "ingress")
        if not is_ingress:
            continue
        for group_urn in sorted(_dependencies(resource, "securityGroupId") & fabric.keys()):
            foreign = _foreign_sources(resource, group_urn)
            if foreign:
                report(f"{what} admits {'; '.join(foreign)} into the GPU fabric group {fabric[group_urn].name}. "
                       "A fabric group admits only itself (EFA: all traffic from the group; sockets: the rendezvous "
                       "and NCCL ports from the group).", resource.urn)


# --- team-rules-own-groups ----------------------------------------------------------------------

# Everything that changes what a security group admits or which interfaces it covers, and the
# input naming the group.
GROUP_CHANGES = {
    INGRESS_RULE: "securityGroupId",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "securityGroupId",
    LEGACY_RULE: "securityGroupId",
    "aws:ec2/networkInterfaceSecurityGroupAttachment:NetworkInterfaceSecurityGroupAttachment": "securityGroupId",
    "aws:vpc/securityGroupVpcAssociation:SecurityGroupVpcAssociation": "securityGroupId",
}


# A stack policy: whether the group is the stack's own is a property dependency, known in every preview; a
# literal group id (the platform's, read from its outputs) has none.
@stack_rule(Severity.CRITICAL)
def team_rules_own_groups(args: StackValidationArgs, report: Report) -> None:
    """Team stacks add rules (and interface attachments) only to security groups they create, never to the platform's (the EFA
    fabric group, the node group)."""
    resources = list(args.resources)
    own = {r.urn for r in resources if r.resource_type in (GROUP, DEFAULT_GROUP)}
    for resource in resources:
        field = GROUP_CHANGES.get(resource.resource_type)
        if field is None or not stack_of(resource.urn, resource.provider).is_team:
            continue
        groups = {d.urn for d in resource.property_dependencies.get(field, [])}
        if not groups or not groups <= own:
            named = get(resource.props, field)
            report(f"{describe(resource.name, resource.resource_type)} changes security group {named}, which this team "
                   "stack does not own (the platform's groups, the EFA fabric among them, belong to the platform "
                   "stack). Team stacks change only groups they create.", resource.urn)


POLICIES = (no_open_ingress, cidr_ingress_private_and_scoped, fabric_admits_only_itself, team_rules_own_groups)
