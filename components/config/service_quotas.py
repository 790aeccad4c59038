"""AWS and Kubernetes quotas the configuration drives, checked before any resource exists.

    gpu-training:serviceQuotas:        # only after AWS granted the increase (Service Quotas console)
      securityGroupRules: 100

A stack that needs more than AWS's default declares the quota its account was granted; the
default is AWS's. What the config can push past a quota:

- inbound and outbound rules per security group (Amazon VPC quotas: 60 each, adjustable; the
  quota times security groups per network interface may not exceed 1,000): the node group's
  inbound rules grow with monitoringIngress.cidrs x monitoringIngress.ports, the socket fabric's
  with fabric.rendezvousPorts, the viewer's load balancer group with its CIDRs (components/config/viewer.py)
  x listener ports. `security_group_rules` counts them as components/network creates
  them (tests/test_config_limits.py holds the count to every stack's offline plan);
- managed node groups per cluster (Amazon EKS service quotas: 30, adjustable): one per pool;
- nodes per managed node group (Amazon EKS service quotas: 450, adjustable): a pool's size.max;
- flavors per resource group of a Kueue ClusterQueue (64, the CRD's maxItems in
  schemas/crds/kueue.x-k8s.io_clusterqueues.yaml, kueue v0.19.2; not adjustable): every queue
  lists one flavor per GPU pool (components/workload/queues.py).

- rules per group x security groups per network interface (Amazon VPC quotas: at most 1,000):
  a GPU node's interfaces carry two of our groups (`node_interface_groups`), so a declared rule
  quota above 1,000 / 2 = 500 leaves the account a quota of one group per interface, and AWS
  refuses to launch the GPU nodes.

Not checked here: control plane security groups per cluster (4; we give 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.config.fabric import FabricConfig
from components.config.keys import integer_default_of, maximum_of
from components.config.network import NetworkConfig
from components.config.node_pools import NodePoolConfig
from components.config.reader import ConfigProblem, Section
from components.config.viewer import ViewerConfig, inbound_cidrs
from components.facts.file_systems import LUSTRE_PORTS

# AWS's defaults and limits of the quotas (their sources beside the rows in keys.py).
SECURITY_GROUP_RULES = "serviceQuotas.securityGroupRules"
DEFAULT_SECURITY_GROUP_RULES = integer_default_of(SECURITY_GROUP_RULES)
MAX_SECURITY_GROUP_RULES = maximum_of(SECURITY_GROUP_RULES)
# Same page: "This quota multiplied by the quota for security groups per network interface cannot
# exceed 1,000. For example, if you increase this quota to 100, we decrease the quota for your
# number of security groups per network interface to 10."
MAX_RULES_TIMES_GROUPS_PER_INTERFACE = 1000
DEFAULT_NODE_GROUPS_PER_CLUSTER = integer_default_of("serviceQuotas.managedNodeGroupsPerCluster")
DEFAULT_NODES_PER_NODE_GROUP = integer_default_of("serviceQuotas.nodesPerManagedNodeGroup")
# kueue v0.19.2 ClusterQueue CRD (schemas/crds/kueue.x-k8s.io_clusterqueues.yaml,
# spec.resourceGroups[].flavors maxItems: 64): the API server refuses a longer list.
MAX_KUEUE_FLAVORS_PER_RESOURCE_GROUP = 64

# Control plane -> node ports (the set terraform-aws-eks calls "recommended"): kubelet for
# logs/exec, and the ports admission webhooks listen on (Kueue, JobSet and the CloudWatch
# operator use 9443, External Secrets 10250, metrics-server 4443). Plus Kueue's visibility API
# (8082, the kueue-visibility-server Service's targetPort in the chart): the API server dials the
# pod behind its APIService; unreachable, discovery fails cluster-wide and namespaces hang in
# Terminating. tests/test_platform_stacks.py checks every port the controllers serve is here.
# Here, not in components/network/security_groups.py (which opens them), so the rule count reads
# the same tuple.
CONTROL_PLANE_TO_NODE_PORTS = (443, 4443, 6443, 8082, 8443, 9443, 10250)
DNS_PROTOCOLS = ("tcp", "udp")
QUOTA_INCREASE = ("request the increase in the Service Quotas console first; once AWS granted it, declare it as "
                  "serviceQuotas.{key}: <granted quota>")


@dataclass(frozen=True)
class ServiceQuotas:
    """The account's quotas as the stack declares them (AWS's defaults unless raised)."""

    security_group_rules: int = DEFAULT_SECURITY_GROUP_RULES
    node_groups_per_cluster: int = DEFAULT_NODE_GROUPS_PER_CLUSTER
    nodes_per_node_group: int = DEFAULT_NODES_PER_NODE_GROUP


@dataclass(frozen=True)
class RuleCount:
    inbound: int
    outbound: int
    drivers: tuple[str, ...] = ()
    """The config keys (after `gpu-training:`) the count grows with."""


def parse_service_quotas(section: Section) -> ServiceQuotas:
    quotas = ServiceQuotas(
        security_group_rules=section.integer("securityGroupRules",
                                             fix="declare the quota AWS granted the account: at least AWS's default "
                                             f"{DEFAULT_SECURITY_GROUP_RULES}, at most {MAX_SECURITY_GROUP_RULES}"),
        node_groups_per_cluster=section.integer("managedNodeGroupsPerCluster",
                                                fix="declare the quota AWS granted: at least AWS's default "
                                                f"{DEFAULT_NODE_GROUPS_PER_CLUSTER}"),
        nodes_per_node_group=section.integer("nodesPerManagedNodeGroup",
                                             fix="declare the quota AWS granted: at least AWS's default "
                                             f"{DEFAULT_NODES_PER_NODE_GROUP}"),
    )
    section.finish()
    return quotas


def security_group_rules(network: NetworkConfig, fabric: FabricConfig, pools: tuple[NodePoolConfig, ...], *,
                         lustre: bool, viewer: ViewerConfig | None = None,
                         api_peer_cidrs: tuple[str, ...] = ()) -> dict[str, RuleCount]:
    """Group role -> the rules components/network gives it (security_groups.py and ci_runner.py):
    one rule per port range and source (`api_peer_cidrs`: the peered ranges the API admits,
    multikueue.api_peer_cidrs). Groups the stack does not create are left out. The groups
    are created without inline rules, so AWS's default allow-all egress rule is removed (the
    provider does): it counts for none. EKS's own cluster security group is EKS's, not counted."""
    monitoring = network.monitoring_ingress
    viewer = viewer or ViewerConfig()
    lustre_rules = len(LUSTRE_PORTS) if lustre else 0
    ci_runner_rules = 1  # the CI runner's HTTPS to the API (ci_runner.py)
    counts = {
        "control-plane": RuleCount(inbound=1 + ci_runner_rules + len(api_peer_cidrs),
                                   outbound=len(CONTROL_PLANE_TO_NODE_PORTS)),
        "nodes": RuleCount(
            inbound=len(CONTROL_PLANE_TO_NODE_PORTS) + len(DNS_PROTOCOLS) + len(monitoring.cidrs) * len(monitoring.ports)
            + lustre_rules + 1, outbound=1,  # + the viewer's port from its load balancer
            drivers=("network.monitoringIngress.cidrs", "network.monitoringIngress.ports")),
        # The viewer's load balancer: each listener port from each allowed CIDR; out to the viewer pods.
        "viewer-alb": RuleCount(
            inbound=len(inbound_cidrs(network.monitoring_ingress, network.vpc_cidr)) * len(viewer.listen_ports),
            outbound=1, drivers=("network.monitoringIngress.cidrs",)),
        "efs": RuleCount(inbound=1, outbound=0),
        "vpc-endpoints": RuleCount(inbound=1, outbound=0),
        "ci-runner": RuleCount(inbound=0, outbound=1),
    }
    if any(pool.efa for pool in pools):
        counts["efa-fabric"] = RuleCount(inbound=1, outbound=1)
    if any(pool.gpu and not pool.efa for pool in pools):
        counts["socket-fabric"] = RuleCount(inbound=len(fabric.rendezvous_ports) + 1, outbound=0,
                                            drivers=("fabric.rendezvousPorts",))
    if lustre:
        # From and to the nodes and the file system's own servers, per LNET port range.
        counts["lustre"] = RuleCount(inbound=2 * lustre_rules, outbound=2 * lustre_rules)
    return counts


def check_security_group_rules(root: Section, counts: dict[str, RuleCount], quota: int) -> None:
    """One problem per group and direction over `quota`, on the keys its count grows with."""
    for role, count in sorted(counts.items()):
        for direction, rules in (("inbound", count.inbound), ("outbound", count.outbound)):
            if rules <= quota:
                continue
            driven = " x ".join(count.drivers) or "the stack's layout"
            fewer = ("list fewer CIDRs or ports (one wider CIDR can cover several collectors)"
                     if "network.monitoringIngress.cidrs" in count.drivers else f"list fewer {driven}")
            root.errors.append(ConfigProblem(
                root.key(count.drivers[0] if count.drivers else "network"),
                f"gives the security group {role} {rules} {direction} rules ({driven}), over the {quota} per group "
                "the account's Amazon VPC quota allows (AWS refuses every rule past it)",
                f"{fewer}, or {QUOTA_INCREASE.format(key='securityGroupRules')}"))


def check_node_pool_quotas(root: Section, raw_pools: list[Any], pools: tuple[NodePoolConfig, ...],
                           quotas: ServiceQuotas) -> None:
    """Pools per cluster (every pool listed, each is a node group), GPU pools per Kueue ClusterQueue
    and nodes per pool (of the pools that passed)."""
    key = root.key("nodePools")
    if len(raw_pools) > quotas.node_groups_per_cluster:
        root.error(key, len(raw_pools), f"makes {len(raw_pools)} managed node groups, over the "
                   f"{quotas.node_groups_per_cluster} per cluster of the account's Amazon EKS quota",
                   f"merge pools (a pool may list several instance types), or "
                   f"{QUOTA_INCREASE.format(key='managedNodeGroupsPerCluster')}")
    gpu_pools = [pool for pool in pools if pool.gpu]
    if len(gpu_pools) > MAX_KUEUE_FLAVORS_PER_RESOURCE_GROUP:
        root.error(key, len(gpu_pools), f"has {len(gpu_pools)} GPU pools: every Kueue ClusterQueue lists one flavor per "
                   f"GPU pool, and Kueue's CRD takes at most {MAX_KUEUE_FLAVORS_PER_RESOURCE_GROUP}",
                   "merge GPU pools (a pool may list several instance types)")
    index_of = {raw.get("name"): index for index, raw in enumerate(raw_pools)
                if isinstance(raw, Mapping) and isinstance(raw.get("name"), str)}
    for pool in pools:
        if pool.max_size > quotas.nodes_per_node_group:
            root.error(f"{key}[{index_of.get(pool.name, '?')}].size.max", pool.max_size, f"is over the "
                       f"{quotas.nodes_per_node_group} nodes per managed node group of the account's Amazon EKS quota",
                       f"split the pool in two, or {QUOTA_INCREASE.format(key='nodesPerManagedNodeGroup')}")


def node_interface_groups(pool: NodePoolConfig) -> tuple[str, ...]:
    """The security groups (by role, as `security_group_rules` names them) on every network interface
    of a pool's nodes: the node group, plus on GPU pools the fabric group of the pool's kind.
    components/cluster/node_pools.py puts exactly these on the pool's launch template."""
    if not pool.gpu:
        return ("nodes",)
    return ("nodes", "efa-fabric" if pool.efa else "socket-fabric")


def check_rules_times_groups_per_interface(root: Section, pools: tuple[NodePoolConfig, ...], quota: int) -> None:
    """The declared rule quota times the most groups the plan puts on one node interface, against
    AWS's 1,000: past it, AWS has lowered the account's groups per interface below what a node
    carries, and the node group's instances fail to launch."""
    most = max(pools, key=lambda pool: len(node_interface_groups(pool)), default=None)
    if most is None or quota * len(groups := node_interface_groups(most)) <= MAX_RULES_TIMES_GROUPS_PER_INTERFACE:
        return
    allowed = MAX_RULES_TIMES_GROUPS_PER_INTERFACE // len(groups)
    root.error(f"{root.key('serviceQuotas')}.securityGroupRules", quota,
               f"times the {len(groups)} security groups on each network interface of pool {most.name}'s nodes "
               f"({', '.join(groups)}) is {quota * len(groups)}, over the {MAX_RULES_TIMES_GROUPS_PER_INTERFACE} "
               "AWS allows (Amazon VPC quotas): with this rule quota AWS lowers the account's security groups per "
               f"network interface to {MAX_RULES_TIMES_GROUPS_PER_INTERFACE // quota}, and the pool's nodes fail to "
               "launch", f"declare at most {allowed} (request no more than {allowed} rules per group, so that "
               f"{len(groups)} groups per interface stay allowed)")
