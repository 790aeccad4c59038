"""The plan summary's node pools: what a reviewer asks first about a stack's GPUs, read from the plan.

One line per managed node group: its instance types, capacity, node range and GPUs per node, and
the ports its nodes open to each other (the ingress rules of its fabric security group whose
source is the group itself). Read from the plan's resources, as the engine receives them, so the
summary shows what would be created, not what the config meant:

    pool p5-efa     p5.48xlarge              on-demand  2-2 nodes x 8 GPUs   between its nodes: all traffic (efa-fabric)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.facts.instance_types import INSTANCE_TYPES

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
CAPACITY = {"ON_DEMAND": "on-demand", "SPOT": "spot", "CAPACITY_BLOCK": "capacity block"}
SHARED_GROUP = "security-groups-nodes"
"""Every node's group (DNS between nodes and the like): not a fabric, left out of the ports."""


def _group_ids(template: dict[str, Any]) -> list[str]:
    ids = list(template.get("vpcSecurityGroupIds") or [])
    for interface in template.get("networkInterfaces") or []:
        ids += [g for g in interface.get("securityGroups") or [] if g not in ids]
    return ids


def _ports(rule: dict[str, Any]) -> str:
    protocol = str(rule.get("ipProtocol"))
    if protocol == "-1":
        return "all traffic"
    low, high = rule.get("fromPort"), rule.get("toPort")
    return f"{protocol} {low}" if low == high else f"{protocol} {low}-{high}"


def fabric_ports(resources: Sequence[dict[str, Any]], group_ids: Sequence[str]) -> list[str]:
    """What the node groups' own groups (not the shared nodes group) open from themselves."""
    found = []
    for group in group_ids:
        if group.startswith(SHARED_GROUP):
            continue
        rules = sorted((r["inputs"] for r in resources if r["type"] == INGRESS
                        and r["inputs"].get("securityGroupId") == group == r["inputs"].get("referencedSecurityGroupId")),
                       key=lambda rule: rule.get("fromPort") or 0)
        name = group.removeprefix("security-groups-").removesuffix("-id")
        found += [f"{_ports(rule)} ({name})" for rule in rules]
    return found


def pool_lines(resources: Sequence[dict[str, Any]]) -> list[str]:
    templates = {r["name"]: r["inputs"] for r in resources if r["type"] == LAUNCH_TEMPLATE}
    lines = []
    for record in sorted((r for r in resources if r["type"] == NODE_GROUP), key=lambda r: r["name"]):
        group, prefix = record["inputs"], record["name"].removesuffix("-nodegroup")
        template = templates.get(f"{prefix}-lt", {})
        types = list(group.get("instanceTypes") or [template.get("instanceType", "?")])
        gpus = INSTANCE_TYPES[types[0]].gpus if types[0] in INSTANCE_TYPES else 0
        scaling = group.get("scalingConfig") or {}
        ports = fabric_ports(resources, _group_ids(template))
        name = prefix.removeprefix("node-pools-")
        capacity = "reservation" if template.get("capacityReservationSpecification") and \
            group.get("capacityType") == "ON_DEMAND" else CAPACITY.get(group.get("capacityType", ""), "?")
        lines.append(f"pool {name:<12} {'|'.join(types):<26} {capacity:<11} "
                     f"{scaling.get('minSize')}-{scaling.get('maxSize')} nodes"
                     + (f" x {gpus} GPUs   between its nodes: {', '.join(ports) or 'nothing'}" if gpus else ""))
    return lines
