"""Security groups: control plane, nodes, the GPU fabric, EFS, FSx for Lustre and VPC endpoints.

No rule admits 0.0.0.0/0 or ::/0; the only rule that mentions 0.0.0.0/0 is node egress (image
pulls and AWS APIs through NAT). GPU-to-GPU traffic lives on dedicated fabric groups attached to
GPU nodes only, so CPU nodes can never reach training ports:

- EFA fabric: EFA carries SRD, not TCP, so AWS requires all traffic from and to the group itself.
- Socket fabric (GPU pools without EFA): only the rendezvous ports and the NCCL port range that
  the pods pin with net.ipv4.ip_local_port_range, from the group itself.
- The viewer's load balancer: its listener ports (80, and 443 with TLS) from the monitoring CIDRs
  (else the VPC's range) only, and out only to the viewer's port on the nodes, which open that
  port to this group alone (components/config/viewer.py).
- FSx for Lustre (when the stack has one): Lustre LNET on TCP 988 and 1018-1023, from the nodes
  and between the file system's own servers, nothing else.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.common.renames import renamed_from
from components.config import FabricConfig, MonitoringIngress
from components.config.service_quotas import CONTROL_PLANE_TO_NODE_PORTS, DNS_PROTOCOLS
from components.config.viewer import VIEWER_PORT, ViewerConfig, inbound_cidrs
from components.facts.file_systems import LUSTRE_PORTS

# The control plane -> node ports and the DNS protocols live beside the rule count that the config
# checks against the account's quota (components/config/service_quotas.py): one tuple for both.
NFS_PORT = 2049
HTTPS_PORT = 443
DNS_PORT = 53


@dataclass(frozen=True)
class SecurityGroupsArgs:
    vpc_id: pulumi.Input[str]
    """The VPC the groups are in."""
    vpc_cidr: ipaddress.IPv4Network
    """The VPC's range, which may reach the endpoints over HTTPS."""
    name_prefix: str
    """Names the groups."""
    fabric: FabricConfig
    """The rendezvous ports and NCCL port range the socket fabric group opens."""
    monitoring_ingress: MonitoringIngress
    """The CIDRs and ports from which metrics and logs may be collected on the nodes."""
    efa_fabric: bool
    """Some pool has EFA: create the EFA fabric group."""
    socket_fabric: bool
    """Some GPU pool has no EFA: create the socket fabric group."""
    lustre: bool = False
    """The stack has an FSx for Lustre file system."""
    viewer: ViewerConfig = field(default_factory=ViewerConfig)
    """The viewer's load balancer: its listener ports."""
    api_peer_cidrs: tuple[str, ...] = ()
    """Peered VPCs whose pods reach the Kubernetes API (a MultiKueue worker's manager: peering.py)."""


class SecurityGroups(pulumi.ComponentResource):
    control_plane: aws.ec2.SecurityGroup
    nodes: aws.ec2.SecurityGroup
    efa_fabric: aws.ec2.SecurityGroup | None
    socket_fabric: aws.ec2.SecurityGroup | None
    efs: aws.ec2.SecurityGroup
    lustre: aws.ec2.SecurityGroup | None
    vpc_endpoints: aws.ec2.SecurityGroup
    viewer_alb: aws.ec2.SecurityGroup

    def __init__(self, name: str, args: SecurityGroupsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:network:SecurityGroups", name, None,
                         renamed_from("gpu-training:security:SecurityGroups", opts))
        self._name, self._args = name, args

        self.control_plane = self._group("control-plane", "EKS control plane ENIs")
        self.nodes = self._group("nodes", "Every EKS node")
        self.efs = self._group("efs", "EFS mount targets: NFS from nodes only")
        self.vpc_endpoints = self._group("vpc-endpoints", "Interface VPC endpoints: HTTPS from the VPC")
        self.efa_fabric = self._group("efa-fabric", "GPU fabric of EFA pools") if args.efa_fabric else None
        self.socket_fabric = self._group("socket-fabric", "GPU fabric of socket (non-EFA) pools") if args.socket_fabric else None
        self.lustre = self._group("lustre", "FSx for Lustre: LNET from nodes only") if args.lustre else None
        # checkov CKV2_AWS_5 (group attached to nothing), deliberately: the Load Balancer Controller
        # attaches it to the viewer's ALB, which it creates from the Ingress, outside the plan
        # (components/cluster/load_balancer_controller.py; tests/test_checkov_plans.py JUSTIFIED).
        self.viewer_alb = self._group("viewer-alb", "Viewer load balancer: monitoring CIDRs only")

        self._create_cluster_rules()
        self._create_api_peer_rules()
        self._create_fabric_rules()
        self._create_service_rules()
        self._create_lustre_rules()
        self._create_viewer_rules()

        self.register_outputs({
            "controlPlaneSecurityGroupId": self.control_plane.id,
            "nodeSecurityGroupId": self.nodes.id,
            "viewerAlbSecurityGroupId": self.viewer_alb.id,
        })

    def _group(self, role: str, description: str) -> aws.ec2.SecurityGroup:
        return aws.ec2.SecurityGroup(
            f"{self._name}-{role}",
            name=f"{self._args.name_prefix}-{role}",
            description=description,
            vpc_id=self._args.vpc_id,
            tags={"Name": f"{self._args.name_prefix}-{role}"},
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _ingress(self, rule: str, group: aws.ec2.SecurityGroup, *, protocol: str, description: str,
                 ports: tuple[int, int] | None = None, source: aws.ec2.SecurityGroup | None = None,
                 cidr: str | None = None) -> None:
        self._rule(aws.vpc.SecurityGroupIngressRule, rule, group, protocol=protocol, description=description,
                   ports=ports, peer=source, cidr=cidr)

    def _egress(self, rule: str, group: aws.ec2.SecurityGroup, *, protocol: str, description: str,
                ports: tuple[int, int] | None = None, destination: aws.ec2.SecurityGroup | None = None,
                cidr: str | None = None) -> None:
        self._rule(aws.vpc.SecurityGroupEgressRule, rule, group, protocol=protocol, description=description,
                   ports=ports, peer=destination, cidr=cidr)

    def _rule(self, kind: type, rule: str, group: aws.ec2.SecurityGroup, *, protocol: str, description: str,
              ports: tuple[int, int] | None, peer: aws.ec2.SecurityGroup | None, cidr: str | None) -> None:
        """One rule per resource (not inline), so each shows up on its own in a preview diff."""
        kind(
            f"{self._name}-{rule}",
            security_group_id=group.id,
            ip_protocol=protocol,
            from_port=ports[0] if ports else None,
            to_port=ports[1] if ports else None,
            referenced_security_group_id=peer.id if peer else None,
            cidr_ipv4=cidr,
            description=description,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _create_cluster_rules(self) -> None:
        control_plane, nodes = self.control_plane, self.nodes
        self._ingress("control-plane-from-nodes-https", control_plane, protocol="tcp", ports=(HTTPS_PORT, HTTPS_PORT),
                      source=nodes, description="Kubernetes API from nodes")
        for port in CONTROL_PLANE_TO_NODE_PORTS:
            self._ingress(f"nodes-from-control-plane-{port}", nodes, protocol="tcp", ports=(port, port),
                          source=control_plane, description=f"Control plane to kubelet/webhooks on {port}")
            self._egress(f"control-plane-to-nodes-{port}", control_plane, protocol="tcp", ports=(port, port),
                         destination=nodes, description=f"Control plane to kubelet/webhooks on {port}")
        for protocol in DNS_PROTOCOLS:
            self._ingress(f"nodes-from-nodes-dns-{protocol}", nodes, protocol=protocol, ports=(DNS_PORT, DNS_PORT),
                          source=nodes, description="CoreDNS between nodes")
        self._egress("nodes-to-anywhere", nodes, protocol="-1", cidr="0.0.0.0/0",
                     description="Image pulls and AWS APIs through NAT and VPC endpoints")
        monitoring = self._args.monitoring_ingress
        for cidr in monitoring.cidrs:
            for port in monitoring.ports:
                self._ingress(f"nodes-from-monitoring-{cidr.network_address}-{cidr.prefixlen}-{port}", nodes,
                              protocol="tcp", ports=(port, port), cidr=str(cidr),
                              description=f"Metrics/log collection from {cidr}")

    def _create_fabric_rules(self) -> None:
        if self.efa_fabric is not None:
            # EFA (SRD) is not TCP/UDP: AWS requires all protocols from and to the group itself.
            self._ingress("efa-fabric-from-self", self.efa_fabric, protocol="-1", source=self.efa_fabric,
                          description="EFA: all traffic between EFA nodes")
            self._egress("efa-fabric-to-self", self.efa_fabric, protocol="-1", destination=self.efa_fabric,
                         description="EFA: all traffic between EFA nodes")
        if self.socket_fabric is not None:
            fabric = self._args.fabric
            for port in fabric.rendezvous_ports:
                self._ingress(f"socket-fabric-rendezvous-{port}", self.socket_fabric, protocol="tcp", ports=(port, port),
                              source=self.socket_fabric, description="torchrun c10d rendezvous between GPU nodes")
            nccl = fabric.nccl_port_range
            self._ingress("socket-fabric-nccl", self.socket_fabric, protocol="tcp", ports=(nccl.first, nccl.last),
                          source=self.socket_fabric,
                          description="NCCL/gloo ports pinned by the pods net.ipv4.ip_local_port_range")

    def _create_api_peer_rules(self) -> None:
        """EKS User Guide, "Accessing a private only API server": from a connected network, the
        control plane security group must allow 443 from it. Only the manager's VPC CIDR."""
        for cidr in self._args.api_peer_cidrs:
            network = ipaddress.IPv4Network(cidr)
            self._ingress(f"control-plane-from-peer-{network.network_address}-{network.prefixlen}", self.control_plane,
                          protocol="tcp", ports=(HTTPS_PORT, HTTPS_PORT), cidr=cidr,
                          description=f"Kubernetes API from the VPC of the MultiKueue manager {cidr} (peering)")

    def _create_service_rules(self) -> None:
        self._ingress("efs-from-nodes", self.efs, protocol="tcp", ports=(NFS_PORT, NFS_PORT), source=self.nodes,
                      description="NFS from EKS nodes")
        self._ingress("vpc-endpoints-from-vpc", self.vpc_endpoints, protocol="tcp", ports=(HTTPS_PORT, HTTPS_PORT),
                      cidr=str(self._args.vpc_cidr), description="HTTPS to AWS APIs from inside the VPC")

    def _create_lustre_rules(self) -> None:
        """FSx for Lustre User Guide, "File system access control with Amazon VPC": inbound TCP 988
        and 1018-1023 from the file system's own group (its servers talk to each other) and from
        the clients; the clients must be reachable on the same ports from the file system."""
        lustre, nodes = self.lustre, self.nodes
        if lustre is None:
            return
        for first, last in LUSTRE_PORTS:
            ports = (first, last)
            self._ingress(f"lustre-from-nodes-{first}", lustre, protocol="tcp", ports=ports, source=nodes,
                          description="Lustre LNET from EKS nodes")
            self._ingress(f"lustre-from-self-{first}", lustre, protocol="tcp", ports=ports, source=lustre,
                          description="Lustre LNET between the servers of the file system")
            self._egress(f"lustre-to-self-{first}", lustre, protocol="tcp", ports=ports, destination=lustre,
                         description="Lustre LNET between the servers of the file system")
            self._egress(f"lustre-to-nodes-{first}", lustre, protocol="tcp", ports=ports, destination=nodes,
                         description="Lustre LNET to the EKS nodes (clients)")
            self._ingress(f"nodes-from-lustre-{first}", nodes, protocol="tcp", ports=ports, source=lustre,
                          description="Lustre LNET from the FSx for Lustre file system")

    def _create_viewer_rules(self) -> None:
        """The controller attaches this group to the viewer's ALB (`security-groups` annotation, by its
        Name tag) and, told so, changes no rule itself (`manage-backend-security-group-rules: false`):
        every rule that lets the ALB in or out is here, in the plan."""
        alb, nodes = self.viewer_alb, self.nodes
        for cidr in inbound_cidrs(self._args.monitoring_ingress, self._args.vpc_cidr):
            for port in self._args.viewer.listen_ports:
                self._ingress(f"viewer-alb-from-{cidr.network_address}-{cidr.prefixlen}-{port}", alb, protocol="tcp",
                              ports=(port, port), cidr=str(cidr), description=f"Viewer (TensorBoard) from {cidr}")
        self._egress("viewer-alb-to-nodes", alb, protocol="tcp", ports=(VIEWER_PORT, VIEWER_PORT), destination=nodes,
                     description="To the viewer pods (IP targets)")
        self._ingress("nodes-from-viewer-alb", nodes, protocol="tcp", ports=(VIEWER_PORT, VIEWER_PORT), source=alb,
                      description="Viewer (TensorBoard) from its load balancer")
