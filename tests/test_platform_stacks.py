"""Properties of every synthesised platform stack (dev, staging, prod)."""

import ipaddress
import json

import pytest
from stack_configs import PLATFORM_STACKS, raw_config

from components.config import StackConfig, load_stack_config
from components.config.stack import stack_kind
from components.network.endpoints import INTERFACE_ENDPOINTS

pytestmark = pytest.mark.parametrize("stack", PLATFORM_STACKS)

INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
OPEN_TO_ALL = {"0.0.0.0/0", "::/0"}


def config_of(stack) -> StackConfig:
    config = load_stack_config(raw_config(stack), project="gpu-training", stack=stack)
    assert isinstance(config, StackConfig), stack  # these are the platform stacks
    return config


def sg_id(name):
    """The mock id of security group `security-groups-<role>`."""
    return f"security-groups-{name}-id"


def test_every_aws_resource_uses_the_explicit_provider(stack, plan_of):
    plan = plan_of(stack)
    providers = plan.of_type("pulumi:providers:aws")
    assert [p["name"] for p in providers] == ["aws"]
    aws_resources = [r for r in plan.resources if r["type"].startswith("aws:")]
    assert aws_resources
    assert {r["provider"] for r in aws_resources} == {"aws"}


def test_provider_default_tags(stack, plan_of):
    tags = json.loads(plan_of(stack).of_type("pulumi:providers:aws")[0]["inputs"]["defaultTags"])["tags"]
    # prod-usw2 is prod's: budgets and cost allocation add its costs to the environment's.
    assert tags["environment"] == stack_kind(stack)[1] and tags["stack"] == stack
    assert tags["managed-by"] == "pulumi" and tags["cost-center"]


def test_no_ingress_from_the_internet(stack, plan_of):
    plan = plan_of(stack)
    for rule in plan.of_type(INGRESS):
        assert rule["inputs"].get("cidrIpv4") not in OPEN_TO_ALL, rule["name"]
        assert "cidrIpv6" not in rule["inputs"], rule["name"]
        cidr = rule["inputs"].get("cidrIpv4")
        assert cidr or rule["inputs"].get("referencedSecurityGroupId"), f"{rule['name']} has no source"
        if cidr:
            assert ipaddress.IPv4Network(cidr).is_private, rule["name"]
    for group in plan.of_type("aws:ec2/securityGroup:SecurityGroup"):
        assert not group["inputs"].get("ingress"), "rules live in their own resources, none inline"
    default_sg = plan.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert len(default_sg) == 1 and default_sg[0]["inputs"]["ingress"] == [] and default_sg[0]["inputs"]["egress"] == []


def test_only_node_egress_and_the_ci_runners_https_reach_outside(stack, plan_of):
    open_egress = {r["inputs"]["securityGroupId"]: r["inputs"] for r in plan_of(stack).of_type(EGRESS)
                   if r["inputs"].get("cidrIpv4") in OPEN_TO_ALL}
    assert set(open_egress) == {sg_id("nodes"), CI_RUNNER_GROUP}
    runner = open_egress[CI_RUNNER_GROUP]
    assert (runner["ipProtocol"], runner["fromPort"], runner["toPort"]) == ("tcp", 443, 443)


CI_RUNNER_GROUP = "ci-runner-group-id"


def test_the_ci_runner_reaches_the_private_api_and_nothing_else_of_the_vpc(stack, plan_of):
    """CI's preview and up jobs run on a runner in this group, inside the VPC (docs/delivery.md)."""
    plan = plan_of(stack)
    (group,) = [g for g in plan.of_type("aws:ec2/securityGroup:SecurityGroup") if g["name"] == "ci-runner-group"]
    assert group["inputs"]["name"] == f"gpu-training-{stack}-ci-runner"
    admitted = [r["inputs"] for r in plan.of_type(INGRESS) if r["inputs"].get("referencedSecurityGroupId") == CI_RUNNER_GROUP]
    assert [(r["securityGroupId"], r["ipProtocol"], r["fromPort"], r["toPort"]) for r in admitted] == \
        [(sg_id("control-plane"), "tcp", 443, 443)]
    assert [r for r in plan.of_type(EGRESS) if r["inputs"]["securityGroupId"] == CI_RUNNER_GROUP] != []
    assert plan.outputs["ciRunnerSecurityGroupId"] == CI_RUNNER_GROUP


def test_fabric_rules_reference_the_fabric_group_itself(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    groups = {g["name"] for g in plan.of_type("aws:ec2/securityGroup:SecurityGroup")}
    # A fabric group exists exactly when a pool needs it.
    wanted = {"efa-fabric": any(p.efa for p in config.node_pools),
              "socket-fabric": any(p.gpu and not p.efa for p in config.node_pools)}
    for fabric, needed in wanted.items():
        assert (f"security-groups-{fabric}" in groups) == needed, fabric
        rules = [r for r in plan.of_type(INGRESS) + plan.of_type(EGRESS)
                 if r["inputs"]["securityGroupId"] == sg_id(fabric)]
        assert bool(rules) == needed, fabric
        assert all(r["inputs"]["referencedSecurityGroupId"] == sg_id(fabric) for r in rules), fabric
    efa = [r["inputs"] for r in plan.of_type(INGRESS) + plan.of_type(EGRESS)
           if r["inputs"]["securityGroupId"] == sg_id("efa-fabric")]
    if wanted["efa-fabric"]:
        assert sorted(r["ipProtocol"] for r in efa) == ["-1", "-1"], "EFA needs all traffic in and out, from and to itself"
    socket = {(r["inputs"]["fromPort"], r["inputs"]["toPort"]) for r in plan.of_type(INGRESS)
              if r["inputs"]["securityGroupId"] == sg_id("socket-fabric")}
    nccl = config.fabric.nccl_port_range
    expected = {(p, p) for p in config.fabric.rendezvous_ports} | {(nccl.first, nccl.last)}
    assert socket == (expected if wanted["socket-fabric"] else set()), "exactly the rendezvous ports and the NCCL range"


def test_the_control_plane_reaches_every_port_the_controllers_serve_it(stack, plan_of):
    """A controller's webhook or aggregated API (Kueue's visibility API on 8082) that the node
    security group keeps the API server from reaching fails admission or discovery cluster-wide."""
    plan = plan_of(stack)
    served = {port["port"] for policy in plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
              if policy["inputs"]["metadata"]["name"] == "allow-webhook-ingress"
              for rule in policy["inputs"]["spec"]["ingress"] for port in rule["ports"]}
    reachable = {r["inputs"]["fromPort"] for r in plan.of_type(INGRESS)
                 if r["inputs"]["securityGroupId"] == sg_id("nodes")
                 and r["inputs"].get("referencedSecurityGroupId") == sg_id("control-plane")}
    assert {8082, 9443, 10250} <= served, "the controllers' API ports, as the charts serve them"
    assert served <= reachable, f"the node security group blocks the control plane on {sorted(served - reachable)}"


def test_efs_accepts_nfs_from_nodes_only(stack, plan_of):
    rules = [r["inputs"] for r in plan_of(stack).of_type(INGRESS) if r["inputs"]["securityGroupId"] == sg_id("efs")]
    assert rules == [{"description": "NFS from EKS nodes", "fromPort": 2049, "toPort": 2049, "ipProtocol": "tcp",
                      "referencedSecurityGroupId": sg_id("nodes"), "securityGroupId": sg_id("efs")}]


def test_subnets_per_az(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    subnets = plan.of_type("aws:ec2/subnet:Subnet")
    zones = config.network.availability_zones
    assert len(zones) == {"dev": 2, "staging": 3, "prod": 3, "prod-usw2": 3, "prod-use2": 3}[stack]
    for kind, role_tag in (("private", "kubernetes.io/role/internal-elb"), ("public", "kubernetes.io/role/elb")):
        mine = [s["inputs"] for s in subnets if f"-{kind}-" in s["name"]]
        assert sorted(s["availabilityZone"] for s in mine) == sorted(zones)
        assert all(s["tags"][role_tag] == "1" and s["tags"][f"kubernetes.io/cluster/{config.cluster_name}"] == "shared"
                   for s in mine)
        assert not any(s["mapPublicIpOnLaunch"] for s in mine)


def test_nat_layout(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    expected = len(config.network.availability_zones) if config.network.nat_per_az else 1
    assert len(plan.of_type("aws:ec2/natGateway:NatGateway")) == expected
    private_tables = [t for t in plan.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in t["name"]]
    assert len(private_tables) == len(config.network.availability_zones)
    for table in private_tables:
        # The default route; a MultiKueue stack's peering routes besides (tests/test_multikueue.py).
        (route,) = [r for r in table["inputs"]["routes"] if r["cidrBlock"] == "0.0.0.0/0"]
        assert all("vpcPeeringConnectionId" in r for r in table["inputs"]["routes"] if r is not route)
        zone = table["name"].removeprefix("network-private-rt-")
        expected_nat = f"network-nat-{zone if config.network.nat_per_az else config.network.availability_zones[0]}-id"
        assert route == {"cidrBlock": "0.0.0.0/0", "natGatewayId": expected_nat}


def test_flow_logs_on(stack, plan_of):
    plan = plan_of(stack)
    (flow_log,) = plan.of_type("aws:ec2/flowLog:FlowLog")
    assert flow_log["inputs"]["trafficType"] == "ALL"
    assert flow_log["inputs"]["vpcId"] == "network-vpc-id"
    group = next(g for g in plan.of_type("aws:cloudwatch/logGroup:LogGroup") if g["name"] == "network-flow-logs")
    assert flow_log["inputs"]["logDestination"].endswith("/network-flow-logs")
    assert group["inputs"]["retentionInDays"] == config_of(stack).network.flow_log_retention_days


def test_endpoints_present(stack, plan_of):
    endpoints = {e["inputs"]["serviceName"]: e["inputs"] for e in plan_of(stack).of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    region = config_of(stack).region
    assert endpoints[f"com.amazonaws.{region}.s3"]["vpcEndpointType"] == "Gateway"
    for service in ("ecr.api", "ecr.dkr", "sts", "logs", "secretsmanager", "ec2"):
        assert service in INTERFACE_ENDPOINTS
    for service in INTERFACE_ENDPOINTS:
        endpoint = endpoints[f"com.amazonaws.{region}.{service}"]
        assert endpoint["privateDnsEnabled"] is True
        assert endpoint["securityGroupIds"] == [sg_id("vpc-endpoints")]
        assert all("-private-" in s for s in endpoint["subnetIds"])
