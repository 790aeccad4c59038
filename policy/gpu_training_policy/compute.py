"""EKS control plane, launch templates and node groups."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    ResourceValidationArgs,
    Severity,
)

from gpu_training_policy.resources import Report, as_list, describe, get, is_set, stack_of, truthy
from gpu_training_policy.rules import resource_rule

CLUSTER = "aws:eks/cluster:Cluster"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
# CIS Amazon EKS Benchmark 2.1.1 / AWS FSBP EKS.8: every control-plane log type.
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
OPEN_CIDRS = ("0.0.0.0/0", "::/0")
# The taint the program puts on every GPU pool (components/cluster/pool_scheduling.py), which
# the NVIDIA device plugin and GPU pods tolerate and everything else does not.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_EFFECTS = ("NO_SCHEDULE", "NO_EXECUTE")
# EKS AMI types with NVIDIA drivers (EKS API AMITypes: AL2023_*_NVIDIA, AL2_x86_64_GPU,
# BOTTLEROCKET_*_NVIDIA).
GPU_AMI = re.compile(r"NVIDIA|_GPU$")
# NVIDIA GPU instance families (p3..p6, g4dn, g5, g5g, g6, g6e, ...); g4ad carries AMD GPUs.
GPU_INSTANCE = re.compile(r"^(p[3-9]|g[4-9])[a-z0-9-]*\.")
NON_NVIDIA_INSTANCE = re.compile(r"^g4ad\.")


# --- EKS --------------------------------------------------------------------------------------

@resource_rule(Severity.HIGH, resource_type=CLUSTER)
def eks_secrets_encryption(args: ResourceValidationArgs, report: Report) -> None:
    """EKS clusters encrypt Kubernetes secrets with a KMS key (envelope encryption)."""
    config = get(args.props, "encryptionConfig")
    if "secrets" not in [str(r) for r in as_list(get(config, "resources"))] or not is_set(get(config, "provider"), "keyArn"):
        report(f"{describe(args.name, args.resource_type)} does not encrypt Kubernetes secrets with a KMS key. Set "
               "encryption_config with resources [secrets] and the cluster's key (CIS EKS 5.3.1, AWS FSBP EKS.3).")


@resource_rule(Severity.MEDIUM, resource_type=CLUSTER)
def eks_control_plane_logs(args: ResourceValidationArgs, report: Report) -> None:
    """EKS clusters send all five control-plane log types to CloudWatch."""
    enabled = {str(t) for t in as_list(get(args.props, "enabledClusterLogTypes"))}
    missing = [t for t in CONTROL_PLANE_LOG_TYPES if t not in enabled]
    if missing:
        report(f"{describe(args.name, args.resource_type)} does not log {', '.join(missing)}. Enable every "
               "control-plane log type (CIS EKS 2.1.1, AWS FSBP EKS.8).")


@resource_rule(Severity.CRITICAL, resource_type=CLUSTER)
def eks_endpoint_access(args: ResourceValidationArgs, report: Report) -> None:
    """The EKS API endpoint is private in prod and never public without an allow-list."""
    vpc = get(args.props, "vpcConfig")
    # EKS makes the endpoint public when endpointPublicAccess is not given, open to 0.0.0.0/0
    # when publicAccessCidrs is not given (EKS API VpcConfigRequest).
    public = truthy(get(vpc, "endpointPublicAccess", True))
    if not public:
        return
    what = describe(args.name, args.resource_type)
    if stack_of(args.urn, args.provider).is_prod:
        report(f"{what} has a public API endpoint in prod. Set cluster.endpointPublicAccess: false and reach it "
               "through the VPC (AWS FSBP EKS.1).")
    cidrs = [str(c) for c in as_list(get(vpc, "publicAccessCidrs"))]
    if not cidrs or any(c in OPEN_CIDRS for c in cidrs):
        report(f"{what} has a public API endpoint without an allow-list ({', '.join(cidrs) or 'none, so 0.0.0.0/0'}). "
               "List the CIDRs that may reach it in cluster.publicAccessCidrs.")


# --- launch templates -------------------------------------------------------------------------

@resource_rule(Severity.HIGH)
def imdsv2_hop_limit_1(args: ResourceValidationArgs, report: Report) -> None:
    """Node launch templates require IMDSv2 with hop limit 1; node groups use their own template."""
    what = describe(args.name, args.resource_type)
    if args.resource_type == NODE_GROUP and not is_set(args.props, "launchTemplate"):
        report(f"{what} has no launch template of its own, so its instance metadata settings are EKS's, not ours. "
               "Give it a launch template with IMDSv2 required and hop limit 1.")
    if args.resource_type != LAUNCH_TEMPLATE:
        return
    metadata = get(args.props, "metadataOptions")
    if get(metadata, "httpTokens") != "required":
        report(f"{what} does not require IMDSv2 (metadata_options.http_tokens must be \"required\"; AWS FSBP EC2.170).")
    hop_limit = get(metadata, "httpPutResponseHopLimit")
    if hop_limit != 1:
        report(f"{what} has metadata hop limit {hop_limit if hop_limit is not None else 'unset (the AMI decides)'}; "
               "set 1 so containers cannot reach the node's credentials.")


@resource_rule(Severity.HIGH, resource_type=LAUNCH_TEMPLATE)
def encrypted_node_volumes(args: ResourceValidationArgs, report: Report) -> None:
    """Launch templates declare every EBS volume encrypted."""
    what = describe(args.name, args.resource_type)
    ebs_volumes = [(get(m, "deviceName"), get(m, "ebs")) for m in as_list(get(args.props, "blockDeviceMappings"))
                   if not is_set(m, "virtualName")]  # instance-store volumes are not EBS
    if not ebs_volumes:
        report(f"{what} declares no root volume, so the AMI decides whether it is encrypted. Declare it with "
               "ebs.encrypted true.")
    for device, ebs in ebs_volumes:
        if not truthy(get(ebs, "encrypted")):
            report(f"{what} leaves EBS volume {device} unencrypted; set ebs.encrypted true.")


# --- node groups ------------------------------------------------------------------------------

def is_gpu_node_group(props: Mapping[str, Any]) -> bool:
    if GPU_AMI.search(str(get(props, "amiType", ""))):
        return True
    types = [str(t) for t in as_list(get(props, "instanceTypes"))]
    return any(GPU_INSTANCE.match(t) and not NON_NVIDIA_INSTANCE.match(t) for t in types)


def capacity_type(props: Mapping[str, Any]) -> str:
    return str(get(props, "capacityType", "ON_DEMAND"))  # the EKS API's default


@resource_rule(Severity.MEDIUM, resource_type=NODE_GROUP)
def gpu_node_group_taint(args: ResourceValidationArgs, report: Report) -> None:
    """GPU node groups carry the nvidia.com/gpu NoSchedule taint."""
    if not is_gpu_node_group(args.props):
        return
    tainted = any(get(t, "key") == GPU_TAINT_KEY and get(t, "effect") in GPU_TAINT_EFFECTS
                  for t in as_list(get(args.props, "taints")))
    if not tainted:
        report(f"{describe(args.name, args.resource_type)} is a GPU pool without the {GPU_TAINT_KEY} NoSchedule taint: "
               "any pod could land on (and keep awake) a GPU node.")


@resource_rule(Severity.MEDIUM, resource_type=NODE_GROUP)
def spot_instance_diversity(args: ResourceValidationArgs, report: Report) -> None:
    """Spot node groups name at least two instance types."""
    if capacity_type(args.props) != "SPOT":
        return
    types = [str(t) for t in as_list(get(args.props, "instanceTypes"))]
    if len(types) < 2:
        report(f"{describe(args.name, args.resource_type)} is a spot pool with {len(types)} instance type(s) "
               f"({', '.join(types) or 'from the launch template'}). Name at least two with the same GPU count and "
               "memory, so one reclaimed spot pool does not stop training.")


# --- EC2 instances (AWSGuard's EC2 rules, and IMDSv2 / no public IP on any instance) -----------

# Instances started outside node groups, and what each calls its settings. pulumi-aws names them
# alike on Instance and SpotInstanceRequest; a LaunchConfiguration (EC2 Auto Scaling, deprecated)
# has the same metadata and public IP inputs.
INSTANCE_TYPES = ("aws:ec2/instance:Instance", "aws:ec2/spotInstanceRequest:SpotInstanceRequest",
                  "aws:ec2/launchConfiguration:LaunchConfiguration")


def instance_problems(resource_type: str, props: Any) -> list[str]:
    """Why an instance (or a launch template's interfaces) breaks the EC2 rules; empty when none."""
    problems = []
    if resource_type == LAUNCH_TEMPLATE:
        for index, interface in enumerate(as_list(get(props, "networkInterfaces"))):
            if truthy(get(interface, "associatePublicIpAddress")):
                problems.append(f"gives network interface {index} a public IP (associate_public_ip_address)")
        return problems
    if resource_type not in INSTANCE_TYPES:
        return problems
    # EC2 defaults HttpTokens to "optional" (IMDSv1) unless the AMI says otherwise
    # (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceMetadataOptionsRequest.html);
    # only an explicit "required" is IMDSv2.
    if get(get(props, "metadataOptions"), "httpTokens") != "required":
        problems.append("does not require IMDSv2 (metadata_options.http_tokens \"required\"; AWS FSBP EC2.8)")
    if truthy(get(props, "associatePublicIpAddress")):
        problems.append("has a public IP (associate_public_ip_address; AWSGuard ec2-instance-no-public-ip, FSBP EC2.9)")
    if resource_type != "aws:ec2/launchConfiguration:LaunchConfiguration" and not truthy(get(props, "monitoring")):
        problems.append("has no detailed monitoring (AWSGuard ec2-instance-detailed-monitoring-enabled)")
    root = get(props, "rootBlockDevice")
    if not truthy(get(root, "encrypted")):
        problems.append("does not encrypt its root volume (root_block_device.encrypted; AWSGuard encrypted-volumes)")
    for volume in as_list(get(props, "ebsBlockDevices")):
        if not truthy(get(volume, "encrypted")):
            problems.append(f"leaves EBS volume {get(volume, 'deviceName')} unencrypted (AWSGuard encrypted-volumes)")
    return problems


@resource_rule(Severity.HIGH)
def ec2_instance_hardened(args: ResourceValidationArgs, report: Report) -> None:
    """EC2 instances (and spot requests, launch configurations) require IMDSv2, get no public IP, have detailed monitoring and
    encrypted volumes; launch templates give no interface a public IP."""
    for problem in instance_problems(args.resource_type, args.props):
        report(f"{describe(args.name, args.resource_type)} {problem}.")


POLICIES = (ec2_instance_hardened, eks_secrets_encryption, eks_control_plane_logs, eks_endpoint_access, imdsv2_hop_limit_1,
            encrypted_node_volumes, gpu_node_group_taint, spot_instance_diversity)
