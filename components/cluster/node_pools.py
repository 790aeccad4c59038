"""GPU and CPU node pools: EKS managed node groups on launch templates, one per configured pool.

Every node: IMDSv2 only with hop limit 1 (pods cannot reach the node's credentials), encrypted
gp3 root volume, the node security group; GPU pools add their fabric group and the GPU taint;
EFA pools get one EFA device per network card (efa-only interfaces, which take no IP) and a
cluster placement group in their one AZ: their own on onDemand or spot; on reserved capacity only
the existing one their reservation was made in (placementGroup), else none. Types with local NVMe
put it in a RAID0 array for images and emptyDirs (node_bootstrap.py). Pools on reserved capacity
name their reservation in the launch template. GPU pools update with the MINIMAL strategy: an
update replaces nodes in place instead of first launching spare GPU nodes.
Node auto-repair replaces failed CPU nodes; it is off on GPU pools while two DCGM engines can mark a
healthy GPU node for repair (below, and docs/upgrading-and-pins.md "DCGM on GPU nodes").
The Cluster Autoscaler owns the desired size; pools scale to zero through node-template tags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.cluster import node_bootstrap
from components.cluster.pool_scheduling import NODE_TEMPLATE, node_group_name, node_labels, node_taints, node_template_tags
from components.common import iam
from components.common.partition import provider_partition
from components.common.renames import renamed_from
from components.config import Capacity, NodePoolConfig
from components.config.node_pools import RESERVED_CAPACITY, TAINT_EFFECTS
from components.config.service_quotas import node_interface_groups
from components.facts.instance_types import INSTANCE_TYPES
from components.facts.pod_network import efa_interfaces

# The AWS managed policies of the node role, by purpose.
NODE_ROLE_POLICIES = {
    "worker": "AmazonEKSWorkerNodePolicy",
    "ecr-pull": "AmazonEC2ContainerRegistryPullOnly",
    # Shell access through SSM Session Manager instead of SSH: no port 22 anywhere.
    "ssm": "AmazonSSMManagedInstanceCore",
}


@dataclass(frozen=True)
class NodePoolsArgs:
    pools: tuple[NodePoolConfig, ...]
    """One EKS managed node group (with its launch template) per pool."""
    cluster_name: str
    """Prefixes the node group and launch template names."""
    cluster: aws.eks.Cluster
    """The cluster the node groups join; they follow its Kubernetes version."""
    boot_addons: Sequence[aws.eks.Addon]
    """Add-ons nodes need to become Ready (VPC CNI, Pod Identity agent): created before the node groups."""
    private_subnet_ids_by_az: Mapping[str, pulumi.Input[str]]
    """Availability zone name -> private subnet id: a pool's zones pick its subnets."""
    zone_names_by_id: Mapping[str, str]
    """The account's AZ name of every AZ ID a pool names (resolved through the provider)."""
    node_security_group_id: pulumi.Input[str]
    """The security group of every node."""
    efa_fabric_security_group_id: pulumi.Input[str] | None
    """The fabric group of EFA pools; None when no pool has EFA."""
    socket_fabric_security_group_id: pulumi.Input[str] | None
    """The fabric group of GPU pools without EFA (NCCL over sockets); None when there is none."""
    launch_tags: Mapping[str, str]
    """Cost tags for the instances, volumes and interfaces a pool launches: the provider's default
    tags do not reach a launch template's tag_specifications (hashicorp/terraform-provider-aws#19387)."""


class NodePools(pulumi.ComponentResource):
    node_groups: dict[str, aws.eks.NodeGroup]

    def __init__(self, name: str, args: NodePoolsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:NodePools", name, None,
                         renamed_from("gpu-training:compute:NodePools", opts))
        self._name, self._args = name, args
        self._node_role = self._create_node_role()
        self.node_groups = {pool.name: self._create_pool(pool) for pool in args.pools}
        self.register_outputs({"nodeGroups": {n: g.node_group_name for n, g in self.node_groups.items()}})

    def _create_node_role(self) -> aws.iam.Role:
        role = aws.iam.Role(
            f"{self._name}-node-role",
            assume_role_policy=iam.service_trust_policy("ec2.amazonaws.com"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        partition = provider_partition(self)
        for purpose, policy in NODE_ROLE_POLICIES.items():
            aws.iam.RolePolicyAttachment(f"{self._name}-node-{purpose}", role=role.name,
                                         policy_arn=partition.apply(lambda p, policy=policy: iam.managed_policy_arn(p, policy)),
                                         opts=pulumi.ResourceOptions(parent=self))
        return role

    def _security_groups(self, pool: NodePoolConfig) -> list[pulumi.Input[str]]:
        """The node group, plus on GPU pools the fabric group of the pool's kind (EFA or sockets):
        node_interface_groups, whose count the config checks against AWS's rules x groups cap."""
        by_role = {"nodes": self._args.node_security_group_id, "efa-fabric": self._args.efa_fabric_security_group_id,
                   "socket-fabric": self._args.socket_fabric_security_group_id}
        groups = [by_role[role] for role in node_interface_groups(pool)]
        if any(group is None for group in groups):
            raise ValueError(f"pool {pool.name}: its fabric security group was not created")
        return [group for group in groups if group is not None]

    def _create_pool(self, pool: NodePoolConfig) -> aws.eks.NodeGroup:
        prefix = f"{self._name}-{pool.name}"
        group_name = node_group_name(self._args.cluster_name, pool)
        launch_template = self._create_launch_template(pool, prefix, group_name)
        node_group = self._create_node_group(pool, prefix, group_name, launch_template)
        self._tag_auto_scaling_group(prefix, pool, node_group)
        return node_group

    def _placement(self, pool: NodePoolConfig, prefix: str, group_name: str) -> aws.ec2.LaunchTemplatePlacementArgs | None:
        """Where the pool's instances launch: the existing group the pool names (a reservation's
        own), a new cluster placement group (created here) for EFA pools on onDemand or spot, or
        none: pools without EFA and pools on reserved capacity."""
        # A reservation made in a cluster placement group (EC2 recommends it for cluster launches,
        # EC2 User Guide "Placement group rules and limitations") is launched into that group, so
        # the pool names it (placementGroup).
        if pool.placement_group:
            return aws.ec2.LaunchTemplatePlacementArgs(group_name=pool.placement_group)
        # Reserved capacity gets no new group. A reservation stays where it was made ("you must create
        # the Capacity Reservation in the placement group", EC2 User Guide, cr-cpg), so a new group
        # never holds it, and a launch into that empty group can fail though the reservation has room:
        # eksctl creates none either ("A reservation should already be created with a placement group",
        # eksctl-io/eksctl pkg/cfn/builder/managed_launch_template.go @99984ad). A capacity block's
        # instances are already placed together in an EC2 UltraCluster (EC2 API CapacityBlock), and
        # AWS ParallelCluster rejects placement groups with capacity blocks (aws/aws-parallelcluster#6311).
        if not pool.efa or pool.capacity in RESERVED_CAPACITY:
            return None
        placement_group = aws.ec2.PlacementGroup(f"{prefix}-placement", name=group_name, strategy="cluster",
                                                 opts=pulumi.ResourceOptions(parent=self))
        return aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group.name)

    def _create_launch_template(self, pool: NodePoolConfig, prefix: str, group_name: str) -> aws.ec2.LaunchTemplate:
        args = self._args
        placement = self._placement(pool, prefix, group_name)
        security_groups = self._security_groups(pool)
        interfaces = efa_interfaces(INSTANCE_TYPES[pool.instance_types[0]]) if pool.efa else ()
        return aws.ec2.LaunchTemplate(
            f"{prefix}-lt",
            name=group_name,
            description=f"Node pool {pool.name} of {args.cluster_name}",
            update_default_version=True,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",          # IMDSv2 only
                http_put_response_hop_limit=1,   # containers cannot reach instance credentials
            ),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=pool.root_volume_gib, volume_type="gp3", encrypted="true", delete_on_termination="true"),
            )],
            # EFA: the primary ENA interface plus one EFA device per network card, all on the
            # fabric group. Security groups then live on the interfaces, not on the template; no
            # subnet either: EKS rejects launch templates that name one (EKS User Guide, EFA).
            network_interfaces=[
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    device_index=interface.device_index,
                    network_card_index=interface.network_card,
                    interface_type=interface.interface_type,
                    security_groups=security_groups,
                    delete_on_termination="true",
                )
                for interface in interfaces
            ] or None,
            vpc_security_group_ids=None if pool.efa else security_groups,
            placement=placement,
            user_data=node_bootstrap.user_data(pool),
            **self._reserved_capacity_options(pool),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={**args.launch_tags, "Name": group_name})
                for kind in ("instance", "volume", "network-interface")
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _create_node_group(self, pool: NodePoolConfig, prefix: str, group_name: str,
                           launch_template: aws.ec2.LaunchTemplate) -> aws.eks.NodeGroup:
        args = self._args
        return aws.eks.NodeGroup(
            f"{prefix}-nodegroup",
            cluster_name=args.cluster.name,
            node_group_name=group_name,
            # Follows the control plane: an upgrade rolls the nodes after it (EKS never does; an
            # unset version would leave nodes on the old minor forever). See docs/upgrading-and-pins.md.
            version=args.cluster.version,
            # GPU pools: the pinned AMI release (config/node_pools.py pin_release_versions), rolled
            # monthly under the pools' PDB gate; unset, a group keeps its creation-time AMI.
            release_version=pool.release_version,
            node_role_arn=self._node_role.arn,
            subnet_ids=[self._subnet_id(zone) for zone in pool.availability_zones],
            ami_type=str(pool.ami_type),
            capacity_type=pool.eks_capacity_type,
            # A capacity block fixes the instance type in the launch template instead.
            instance_types=None if pool.capacity == Capacity.CAPACITY_BLOCK else list(pool.instance_types),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_size, desired_size=pool.desired_size, max_size=pool.max_size),
            # MINIMAL terminates old nodes before launching new ones, "useful ... with hardware
            # accelerators such as GPUs" (EKS API NodegroupUpdateConfig): the default strategy
            # first launches extra nodes, which a full reservation or placement group cannot give.
            update_config=aws.eks.NodeGroupUpdateConfigArgs(
                max_unavailable=1, update_strategy="MINIMAL" if pool.gpu else None),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=launch_template.id, version=launch_template.latest_version.apply(str)),  # the API types it a string
            labels=node_labels(pool),
            taints=[aws.eks.NodeGroupTaintArgs(key=t.key, value=t.value, effect=TAINT_EFFECTS[t.effect])
                    for t in node_taints(pool)],
            # Off on GPU pools until the node monitoring agent can share one DCGM engine: next to
            # the CloudWatch add-on's embedded DCGM it has reported AcceleratedHardwareReady=False
            # on healthy nodes (aws/containers-roadmap#2763, open), one transient DCGM error
            # latches False until the agent restarts (aws/eks-node-monitoring-agent#266, open), and
            # repair replaces the node under a running gang. The fix (PR #205, dcgmAddress) is merged
            # and unreleased: docs/upgrading-and-pins.md "DCGM on GPU nodes".
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(enabled=not pool.gpu),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=args.boot_addons,
                # The Cluster Autoscaler moves the desired size; a later `pulumi up` must not undo it.
                ignore_changes=["scalingConfig.desiredSize"],
            ),
        )

    def _subnet_id(self, zone: str) -> pulumi.Input[str]:
        """The private subnet of a pool's zone, given by name or by AZ ID (resolved and checked
        against the network before anything was created: platform.py)."""
        return self._args.private_subnet_ids_by_az[self._args.zone_names_by_id.get(zone, zone)]

    @staticmethod
    def _reserved_capacity_options(pool: NodePoolConfig) -> dict:
        """Launch template fields of a pool on a capacity block or a targeted On-Demand Capacity
        Reservation (EKS User Guide, capacity-blocks-mng; EC2 launch template
        CapacityReservationSpecification: with a target, the preference is left out)."""
        if pool.capacity not in RESERVED_CAPACITY:
            return {}
        options: dict = {
            "capacity_reservation_specification": aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=pool.capacity_reservation_id)),
        }
        if pool.capacity == Capacity.CAPACITY_BLOCK:
            options["instance_type"] = pool.instance_types[0]
            options["instance_market_options"] = aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
        return options

    def _tag_auto_scaling_group(self, prefix: str, pool: NodePoolConfig, node_group: aws.eks.NodeGroup) -> None:
        """Scale from zero: describe the pool's nodes to the autoscaler on the ASG EKS created."""
        asg_name = node_group.resources.apply(_auto_scaling_group_name)
        for key, value in sorted(node_template_tags(pool).items()):
            # Named after the tag key so adding a label does not rename (replace) the others.
            slug = key.removeprefix(f"{NODE_TEMPLATE}/").replace("/", "-").replace(".", "-")
            aws.autoscaling.Tag(
                f"{prefix}-asg-{slug}",
                autoscaling_group_name=asg_name,
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=pulumi.ResourceOptions(parent=self),
            )


def _auto_scaling_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    """The one Auto Scaling group EKS creates for a managed node group."""
    groups = (resources[0].autoscaling_groups if resources else None) or []
    if not groups or not groups[0].name:
        raise ValueError("EKS reported no Auto Scaling group for the node group")
    return groups[0].name
