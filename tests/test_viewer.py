"""The run viewer in every stack's plan: the AWS Load Balancer Controller (release, Pod Identity role
and its documented policy), the namespace's TensorBoard (Deployment, Service, Ingress,
NetworkPolicy) and the ALB's security group, open to the configured CIDRs only."""

from __future__ import annotations

import ipaddress
import json
import re

import pytest
from stack_configs import MANIFEST_STACKS, PLATFORM_STACKS, PROJECT, TEAM_STACKS, raw_config

from components.cluster import load_balancer_controller as lbc
from components.config import ConfigError, StackConfig, TeamStackConfig, load_stack_config
from components.config.multikueue import api_peer_cidrs
from components.config.service_quotas import security_group_rules
from components.config.viewer import VIEWER_PORT, ViewerConfig
from components.facts.regions import arn_partition
from components.workload import viewer
from components.workload.sizing import SPARE_CPU, SPARE_MEMORY_GIB
from offline.plan import Plan, planned_config

TEAM_STACK = TEAM_STACKS[0]
ALB = "alb.ingress.kubernetes.io"


def platform_of(config: StackConfig | TeamStackConfig) -> StackConfig:
    platform = config.judged_platform if isinstance(config, TeamStackConfig) else config
    assert isinstance(platform, StackConfig)
    return platform


def expected_cidrs(platform: StackConfig) -> set[str]:
    monitoring = platform.network.monitoring_ingress.cidrs
    return {str(c) for c in monitoring} or {str(platform.network.vpc_cidr)}


def one(plan: Plan, type_token: str, name: str) -> dict:
    found = [r for r in plan.of_type(type_token) if r["name"] == name]
    assert len(found) == 1, f"{type_token} {name}: {len(found)} in the plan"
    return found[0]["inputs"]


def viewer_prefix(stack: str) -> str:
    return "team-namespace-viewer" if stack in TEAM_STACKS else "training-namespace-viewer"


# --- the controller ----------------------------------------------------------------------------

def test_the_stored_policy_is_the_pinned_versions():
    stored = json.loads(lbc.POLICY_FILE.read_text())
    assert stored["tag"] == lbc.APP_VERSION == f"v{lbc.CHART_VERSION}"
    assert re.fullmatch(r"[0-9a-f]{40}", stored["commit"])
    assert stored["source"] == ("https://github.com/kubernetes-sigs/aws-load-balancer-controller/blob/"
                                f"{lbc.APP_VERSION}/docs/install/iam_policy.json")
    actions = lbc.policy_actions(lbc.documented_policy())
    # What the controller does for the viewer: make and tag the ALB, its listeners, rules and targets.
    for needed in ("elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateListener",
                   "elasticloadbalancing:CreateRule", "elasticloadbalancing:RegisterTargets",
                   "elasticloadbalancing:AddTags", "ec2:DescribeSubnets", "acm:DescribeCertificate"):
        assert needed in actions


@pytest.mark.parametrize(("partition", "other"), [("aws", "arn:aws-us-gov:"), ("aws-us-gov", "arn:aws:")])
def test_the_policy_is_written_in_the_stacks_partition(partition, other):
    text = json.dumps(lbc.documented_policy(partition))
    assert f'"arn:{partition}:' in text and other not in text


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_the_controller_is_released_with_its_role(stack, plan_of):
    plan, config = plan_of(stack), planned_config(stack)
    assert isinstance(config, StackConfig)
    release = one(plan, "kubernetes:helm.sh/v3:Release", "load-balancer-controller-release")
    assert (release["chart"], release["version"], release["repositoryOpts"]["repo"], release["namespace"]) == (
        "aws-load-balancer-controller", "3.5.0", "https://aws.github.io/eks-charts", "kube-system")
    values = release["values"]
    assert values["clusterName"] == config.cluster_name and values["region"] == config.region
    assert values["nodeSelector"] == {"gpu-training/pool": config.system_pool.name}
    assert values["serviceAccount"] == {"create": True, "name": lbc.SERVICE_ACCOUNT}
    assert values["resources"]["requests"] and values["enableServiceMutatorWebhook"] is False
    association = one(plan, "aws:eks/podIdentityAssociation:PodIdentityAssociation",
                      "load-balancer-controller-pod-identity")
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", lbc.SERVICE_ACCOUNT)
    trust = json.loads(one(plan, "aws:iam/role:Role", "load-balancer-controller-role")["assumeRolePolicy"])
    assert {s["Principal"]["Service"] for s in trust["Statement"]} == {"pods.eks.amazonaws.com"}
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "load-balancer-controller-policy")["policy"])
    assert policy == lbc.documented_policy(arn_partition(config.region))


def test_a_team_stack_installs_no_controller(plan_of):
    assert not [r for r in plan_of(TEAM_STACK).resources if r["name"].startswith("load-balancer-controller")]


# --- the viewer --------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_viewer_reads_the_checkpoints_read_only_as_a_restricted_pod(stack, plan_of):
    plan, config = plan_of(stack), planned_config(stack)
    namespace = config.training_namespace
    deployment = one(plan, "kubernetes:apps/v1:Deployment", f"{viewer_prefix(stack)}-deployment")
    assert deployment["metadata"]["namespace"] == namespace
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert pod["nodeSelector"] == {"gpu-training/pool": platform_of(config).system_pool.name}
    (container,) = pod["containers"]
    hardening = container["securityContext"]
    assert hardening["readOnlyRootFilesystem"] is True and hardening["allowPrivilegeEscalation"] is False
    assert hardening["capabilities"] == {"drop": ["ALL"]} and hardening["privileged"] is False
    image = config.training.cleanup_image or platform_of(config).training.cleanup_image
    assert container["image"] == image and "@sha256:" in image
    assert container["args"][container["args"].index("--path_prefix") + 1] == f"/{namespace}"
    checkpoints = next(v for v in pod["volumes"] if v["name"] == "checkpoints")
    assert checkpoints["persistentVolumeClaim"] == {"claimName": "checkpoints", "readOnly": True}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "checkpoints")
    assert mount["readOnly"] is True and mount["mountPath"] == "/workspace/checkpoints"
    # Every other mount is the scratch emptyDir: nothing else is writable.
    assert {v["name"] for v in pod["volumes"] if "emptyDir" in v} == {m["name"] for m in container["volumeMounts"]} - {"checkpoints"}


def quantity_gib(text: str) -> float:
    return float(text.removesuffix("Gi")) if text.endswith("Gi") else float(text.removesuffix("Mi")) / 1024


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_viewer_fits_the_quotas_spare_room(stack, plan_of):
    resources = one(plan_of(stack), "kubernetes:apps/v1:Deployment", f"{viewer_prefix(stack)}-deployment")[
        "spec"]["template"]["spec"]["containers"][0]["resources"]
    requests, limits = resources["requests"], resources["limits"]
    cpu = lambda q: float(q[:-1]) / 1000 if q.endswith("m") else float(q)  # noqa: E731
    assert cpu(requests["cpu"]) <= cpu(limits["cpu"]) <= SPARE_CPU / 2
    assert quantity_gib(requests["memory"]) <= quantity_gib(limits["memory"]) <= SPARE_MEMORY_GIB / 4


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_ingress_is_an_internal_alb_path_limited_to_the_cidrs(stack, plan_of):
    plan, config = plan_of(stack), planned_config(stack)
    platform, namespace = platform_of(config), config.training_namespace
    service = one(plan, "kubernetes:core/v1:Service", f"{viewer_prefix(stack)}-service")
    assert service["spec"]["type"] == "ClusterIP"
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [VIEWER_PORT]
    ingress = one(plan, "kubernetes:networking.k8s.io/v1:Ingress", f"{viewer_prefix(stack)}-ingress")
    annotations = ingress["metadata"]["annotations"]
    assert annotations[f"{ALB}/scheme"] == "internal"
    assert annotations[f"{ALB}/target-type"] == "ip"
    assert annotations[f"{ALB}/group.name"] == f"{platform.name_prefix}-viewer"
    assert annotations[f"{ALB}/security-groups"] == f"{platform.name_prefix}-viewer-alb"
    assert annotations[f"{ALB}/manage-backend-security-group-rules"] == "false"
    assert set(annotations[f"{ALB}/inbound-cidrs"].split(",")) == expected_cidrs(platform)
    assert json.loads(annotations[f"{ALB}/listen-ports"]) == [{"HTTP": 80}]
    assert f"{ALB}/certificate-arn" not in annotations  # no stack configures one yet
    assert ingress["spec"]["ingressClassName"] == "alb"
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == (f"/{namespace}", "Prefix")
    assert path["backend"]["service"] == {"name": "tensorboard", "port": {"number": VIEWER_PORT}}


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_viewer_admits_only_its_port_from_the_albs_subnets(stack, plan_of):
    plan, config = plan_of(stack), planned_config(stack)
    platform = platform_of(config)
    policy = one(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy", f"{viewer_prefix(stack)}-netpol")
    assert policy["metadata"]["namespace"] == config.training_namespace
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": VIEWER_PORT}]
    # The ALB's subnets are the public ones, whatever its scheme: no pod has an address there (the
    # VPC CNI takes pods' addresses from the private subnets), so no other tenant's pod is admitted.
    admitted = {ipaddress.ip_network(p["ipBlock"]["cidr"]) for p in rule["from"]}
    assert admitted == {s.public for s in platform.network.subnets}
    assert not any(a.overlaps(s.private) for a in admitted for s in platform.network.subnets)
    ingress = one(plan, "kubernetes:networking.k8s.io/v1:Ingress", f"{viewer_prefix(stack)}-ingress")
    assert ingress["metadata"]["annotations"]["alb.ingress.kubernetes.io/subnets"].split(",") == [
        f"{platform.name_prefix}-public-{s.availability_zone}" for s in platform.network.subnets]


def test_another_tenants_pods_cannot_reach_a_viewer(plan_of):
    """Team and platform viewers share the ALB (one path each) but no pod may call across: every
    egress a tenant namespace allows is its own namespace, DNS, HTTPS or the Pod Identity agent."""
    for stack in ("prod", TEAM_STACK):
        config = planned_config(stack)
        policies = [r["inputs"] for r in plan_of(stack).of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
                    if r["inputs"]["metadata"]["namespace"] == config.training_namespace]
        for policy in policies:
            for rule in policy["spec"].get("egress", []):
                ports = {p["port"] for p in rule.get("ports", [])}
                same_namespace = rule.get("to") == [{"podSelector": {}}]
                assert same_namespace or (ports and VIEWER_PORT not in ports), (stack, policy["metadata"]["name"], rule)
    paths = {stack: one(plan_of(stack), "kubernetes:networking.k8s.io/v1:Ingress", f"{viewer_prefix(stack)}-ingress")
             ["spec"]["rules"][0]["http"]["paths"][0]["path"] for stack in ("prod", TEAM_STACK)}
    assert len(set(paths.values())) == 2, paths


# --- the security groups -----------------------------------------------------------------------

@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_security_groups_open_only_the_viewer_and_monitoring_ports_from_the_cidrs(stack, plan_of):
    plan, config = plan_of(stack), planned_config(stack)
    assert isinstance(config, StackConfig)
    cidrs, monitoring = expected_cidrs(config), config.network.monitoring_ingress
    ingress = plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    from_cidrs = [r["inputs"] for r in ingress if r["inputs"].get("cidrIpv4")]
    alb_rules = [r for r in from_cidrs if r["securityGroupId"] == "security-groups-viewer-alb-id"]
    assert {(r["cidrIpv4"], r["fromPort"], r["toPort"]) for r in alb_rules} == {(c, 80, 80) for c in cidrs}
    assert len(alb_rules) == len(cidrs)
    node_rules = [r for r in from_cidrs if r["securityGroupId"] == "security-groups-nodes-id"]
    assert {(r["cidrIpv4"], r["fromPort"]) for r in node_rules} == {(str(c), p) for c in monitoring.cidrs
                                                                      for p in monitoring.ports}
    # Any other rule from a CIDR is the endpoints' HTTPS from the VPC itself, and on a MultiKueue
    # worker the API's HTTPS from its manager's VPC (tests/test_multikueue.py).
    others = [r for r in from_cidrs if r not in alb_rules and r not in node_rules]
    assert {(r["securityGroupId"], r["cidrIpv4"], r["fromPort"]) for r in others} == {
        ("security-groups-vpc-endpoints-id", str(config.network.vpc_cidr), 443),
        *(("security-groups-control-plane-id", cidr, 443) for cidr in api_peer_cidrs(config.multikueue))}
    to_viewer = [r["inputs"] for r in ingress if r["inputs"].get("fromPort") == VIEWER_PORT]
    assert [(r["securityGroupId"], r.get("referencedSecurityGroupId")) for r in to_viewer] == [
        ("security-groups-nodes-id", "security-groups-viewer-alb-id")]
    egress = [r["inputs"] for r in plan.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
              if r["inputs"]["securityGroupId"] == "security-groups-viewer-alb-id"]
    assert [(r["referencedSecurityGroupId"], r["fromPort"], r["toPort"]) for r in egress] == [
        ("security-groups-nodes-id", VIEWER_PORT, VIEWER_PORT)]


# --- TLS and internet-facing (pure: no stack configures them yet) ------------------------------

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"


def exposure(**changes) -> viewer.ViewerExposure:
    base = {"group": "p-viewer", "security_group": "p-viewer-alb", "internet_facing": False, "certificate_arn": None,
            "listen_ports": (80,), "inbound_cidrs": ("10.100.0.0/24",), "alb_subnet_cidrs": ("10.0.0.0/18",)}
    return viewer.ViewerExposure(**{**base, **changes})


@pytest.mark.parametrize(("changes", "expected"), [
    ({}, {"scheme": "internal", "listen-ports": '[{"HTTP": 80}]'}),
    ({"certificate_arn": CERTIFICATE, "listen_ports": (80, 443)},
     {"certificate-arn": CERTIFICATE, "ssl-redirect": "443", "listen-ports": '[{"HTTP": 80}, {"HTTPS": 443}]'}),
    ({"internet_facing": True, "certificate_arn": CERTIFICATE, "listen_ports": (80, 443)},
     {"scheme": "internet-facing", "ssl-redirect": "443"}),
])
def test_ingress_annotations(changes, expected):
    annotations = viewer.ingress_annotations(exposure(**changes), "team-a")
    for key, value in expected.items():
        assert annotations[f"{ALB}/{key}"] == value
    assert annotations[f"{ALB}/healthcheck-path"] == "/team-a/"
    if not changes:
        assert f"{ALB}/certificate-arn" not in annotations and f"{ALB}/ssl-redirect" not in annotations


def test_a_certificate_opens_443_too_in_the_rule_count():
    config = planned_config("prod")
    assert isinstance(config, StackConfig)
    plain = security_group_rules(config.network, config.fabric, config.node_pools, lustre=True, viewer=ViewerConfig())
    tls = security_group_rules(config.network, config.fabric, config.node_pools, lustre=True,
                               viewer=ViewerConfig(certificate_arn=CERTIFICATE))
    cidrs = len(config.network.monitoring_ingress.cidrs)
    assert (plain["viewer-alb"].inbound, tls["viewer-alb"].inbound) == (cidrs, 2 * cidrs)


def problems(viewer_section: dict, stack: str = "dev") -> list[str]:
    raw = {**raw_config(stack), f"{PROJECT}:viewer": viewer_section}
    try:
        load_stack_config(raw, project=PROJECT, stack=stack)
    except ConfigError as error:
        return error.errors
    return []


@pytest.mark.parametrize(("section", "expected"), [
    ({}, None),
    ({"certificateArn": CERTIFICATE}, None),
    ({"internetFacing": True, "certificateArn": CERTIFICATE}, None),
    ({"internetFacing": True}, "gpu-training:viewer.internetFacing: an internet-facing viewer without TLS"),
    ({"certificateArn": "arn:aws:iam::123456789012:server-certificate/x"},
     "gpu-training:viewer.certificateArn: is not an ACM certificate ARN"),
    ({"certificateArn": CERTIFICATE.replace("us-east-1", "eu-west-1")},
     "gpu-training:viewer.certificateArn: is not in the stack's region us-east-1"),
    ({"internetfacing": True}, "gpu-training:viewer.internetfacing: unknown key"),
])
def test_viewer_config(section, expected):
    found = problems(section)
    if expected is None:
        assert not [p for p in found if "viewer" in p], found
    else:
        assert any(expected in p for p in found), found


def test_without_monitoring_cidrs_the_alb_is_open_to_the_vpc_only():
    config = planned_config("dev")
    assert isinstance(config, StackConfig) and not config.network.monitoring_ingress.cidrs
    assert viewer.exposure_of(config).inbound_cidrs == (str(config.network.vpc_cidr),)
    assert ipaddress.ip_network(str(config.network.vpc_cidr)).is_private
