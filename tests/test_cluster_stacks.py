"""Cluster, node pools, autoscaler and device plugins of every synthesised platform stack."""

import json

import pytest
from plan_queries import config_of
from stack_configs import PLATFORM_STACKS, PROJECT

from components.config.service_quotas import node_interface_groups
from components.facts.eks_versions import ADDON_VERSIONS
from components.facts.instance_types import INSTANCE_TYPES
from components.workload.team_deploy_access import team_deploy_role_arn
from offline.plan import MOCK_ACCOUNT_ID

pytestmark = pytest.mark.parametrize("stack", PLATFORM_STACKS)
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template"


def one(plan, type_token):
    (resource,) = plan.of_type(type_token)
    return resource["inputs"]


def by_pool(plan, type_token, suffix):
    return {r["name"].removeprefix("node-pools-").removesuffix(suffix): r["inputs"] for r in plan.of_type(type_token)}


def test_control_plane(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    cluster = one(plan, "aws:eks/cluster:Cluster")
    assert cluster["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert sorted(cluster["enabledClusterLogTypes"]) == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    assert cluster["encryptionConfig"]["resources"] == ["secrets"]
    assert cluster["encryptionConfig"]["provider"]["keyArn"].endswith("/cluster-secrets-key")
    assert cluster["version"] == config.cluster.kubernetes_version
    vpc = cluster["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    assert all("-private-" in s for s in vpc["subnetIds"])
    if stack == "prod":
        assert vpc["endpointPublicAccess"] is False and cluster["deletionProtection"] is True
    if vpc["endpointPublicAccess"]:
        assert vpc["publicAccessCidrs"] and "0.0.0.0/0" not in vpc["publicAccessCidrs"]
    key = next(k["inputs"] for k in plan.of_type("aws:kms/key:Key") if k["name"] == "cluster-secrets-key")
    assert key["enableKeyRotation"] is True


def test_access_entries(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    entries = {e["principalArn"] for e in (r["inputs"] for r in plan.of_type("aws:eks/accessEntry:AccessEntry"))
               if e.get("kubernetesGroups") != ["multikueue-manager"]}  # MultiKueue's: tests/test_multikueue.py
    # Each registered team's deploy role, in its namespace only: tests/test_team_deploy_access.py.
    teams = {team_deploy_role_arn("aws", MOCK_ACCOUNT_ID, PROJECT, row.name, config.environment) for row in config.teams}
    assert entries == set(config.cluster.admin_principals) | set(config.cluster.read_only_principals) | teams
    policies = {(a["inputs"]["principalArn"], a["inputs"]["policyArn"].rsplit("/", 1)[-1])
                for a in plan.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}
    assert policies == {(arn, "AmazonEKSClusterAdminPolicy") for arn in config.cluster.admin_principals} | {
        (arn, "AmazonEKSViewPolicy") for arn in config.cluster.read_only_principals} | {
        (arn, "AmazonEKSAdminPolicy") for arn in teams}


def test_managed_addons_are_pinned(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    addons = {a["inputs"]["addonName"]: a["inputs"] for a in plan.of_type("aws:eks/addon:Addon")}
    pinned = dict(ADDON_VERSIONS[config.cluster.kubernetes_version])
    if config.storage.lustre is None:  # the FSx CSI driver comes only with storage.lustre
        pinned.pop("aws-fsx-csi-driver")
    assert {name: a["addonVersion"] for name, a in addons.items()} == pinned
    assert json.loads(addons["vpc-cni"]["configurationValues"])["enableNetworkPolicy"] == "true"
    assert addons["vpc-cni"]["podIdentityAssociations"][0]["serviceAccount"] == "aws-node"


def test_a_node_group_and_launch_template_per_pool(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    groups = by_pool(plan, "aws:eks/nodeGroup:NodeGroup", "-nodegroup")
    templates = by_pool(plan, "aws:ec2/launchTemplate:LaunchTemplate", "-lt")
    assert set(groups) == set(templates) == {p.name for p in config.node_pools}
    for name, template in templates.items():
        assert template["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
        (disk,) = template["blockDeviceMappings"]
        assert disk["ebs"]["encrypted"] == "true" and disk["ebs"]["volumeType"] == "gp3", name
        # GPU pools: off while two DCGM engines can mark a healthy node for repair (docs/upgrading-and-pins.md).
        gpu = next(p.gpu for p in config.node_pools if p.name == name)
        assert groups[name]["nodeRepairConfig"] == {"enabled": not gpu}, name
        assert groups[name]["launchTemplate"]["id"] == f"node-pools-{name}-lt-id"
        # The EKS API types the version a string; an integer fails the provider's input check.
        assert groups[name]["launchTemplate"]["version"] == "1", name


def test_gpu_pools_are_tainted_labelled_and_on_their_fabric(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    groups = by_pool(plan, "aws:eks/nodeGroup:NodeGroup", "-nodegroup")
    templates = by_pool(plan, "aws:ec2/launchTemplate:LaunchTemplate", "-lt")
    assert any(p.gpu for p in config.node_pools)
    for pool in config.node_pools:
        group, template = groups[pool.name], templates[pool.name]
        gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
        assert (gpu_taint in (group.get("taints") or [])) == pool.gpu, pool.name
        assert group["amiType"] == ("AL2023_x86_64_NVIDIA" if pool.gpu else "AL2023_x86_64_STANDARD")
        groups_on_nodes = ([i["securityGroups"] for i in template["networkInterfaces"]] if pool.efa
                           else [template["vpcSecurityGroupIds"]])
        fabric = "efa-fabric" if pool.efa else "socket-fabric" if pool.gpu else None
        expected = ["security-groups-nodes-id"] + ([f"security-groups-{fabric}-id"] if fabric else [])
        assert all(g == expected for g in groups_on_nodes), pool.name
        # The config's rules x groups-per-interface check counts these same groups.
        assert [f"security-groups-{role}-id" for role in node_interface_groups(pool)] == expected, pool.name
        if pool.gpu:
            assert group["labels"]["nvidia.com/gpu.present"] == "true"


def test_spot_pools_are_diversified(stack, plan_of):
    plan = plan_of(stack)
    spot = [g for g in by_pool(plan, "aws:eks/nodeGroup:NodeGroup", "-nodegroup").values() if g["capacityType"] == "SPOT"]
    for group in spot:
        types = group["instanceTypes"]
        assert len(types) >= 2
        assert len({(INSTANCE_TYPES[t].gpus, INSTANCE_TYPES[t].gpu_memory_mib) for t in types}) == 1


def test_efa_pools_have_placement_group_one_az_and_all_interfaces(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    groups = by_pool(plan, "aws:eks/nodeGroup:NodeGroup", "-nodegroup")
    templates = by_pool(plan, "aws:ec2/launchTemplate:LaunchTemplate", "-lt")
    placement_groups = {p["inputs"]["name"]: p["inputs"] for p in plan.of_type("aws:ec2/placementGroup:PlacementGroup")}
    efa_pools = [p for p in config.node_pools if p.efa]
    # Reserved capacity gets no placement group of ours: capacity blocks are already placed
    # together, and a reservation stays in the group it was made in (tests/test_fabric_and_capacity.py).
    own = [p for p in efa_pools if p.capacity not in ("capacityBlock", "reservation")]
    assert len(placement_groups) == len(own)
    for pool in efa_pools:
        template = templates[pool.name]
        if pool in own:
            assert placement_groups[template["placement"]["groupName"]]["strategy"] == "cluster"
        else:
            assert "placement" not in template
        assert len(groups[pool.name]["subnetIds"]) == 1
        primary, *efa_devices = template["networkInterfaces"]
        assert (primary["networkCardIndex"], primary["deviceIndex"], primary["interfaceType"]) == (0, 0, "interface")
        # One EFA device per network card, none of them taking an IP from the subnet.
        assert sorted(i["networkCardIndex"] for i in efa_devices) == list(range(INSTANCE_TYPES[pool.instance_types[0]].efa_interfaces))
        assert all(i["interfaceType"] == "efa-only" for i in efa_devices)


def test_scale_from_zero_tags(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    tags = {}
    for tag in plan.of_type("aws:autoscaling/tag:Tag"):
        tags.setdefault(tag["inputs"]["autoscalingGroupName"], {})[tag["inputs"]["tag"]["key"]] = tag["inputs"]["tag"]["value"]
    for pool in config.node_pools:
        mine = tags[f"eks-gpu-training-{stack}-{pool.name}-00000000-0000-0000-0000-000000000000"]
        assert mine[f"{NODE_TEMPLATE}/label/gpu-training/pool"] == pool.name
        if pool.gpu:
            assert mine[f"{NODE_TEMPLATE}/resources/nvidia.com/gpu"] == str(pool.gpus_per_node)
            assert mine[f"{NODE_TEMPLATE}/taint/nvidia.com/gpu"] == "true:NoSchedule"
        if pool.efa:
            assert mine[f"{NODE_TEMPLATE}/resources/vpc.amazonaws.com/efa"] == str(pool.efa_interfaces)
            # Our EFA pods run libfabric without huge pages (FI_EFA_USE_HUGE_PAGE=0) and ask for none.
            assert f"{NODE_TEMPLATE}/resources/hugepages-2Mi" not in mine


def test_cluster_autoscaler(stack, plan_of):
    plan = plan_of(stack)
    releases = {r["name"]: r for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    autoscaler = releases["cluster-autoscaler-release"]
    assert autoscaler["provider"] == "cluster-k8s"
    values = autoscaler["inputs"]["values"]
    assert autoscaler["inputs"]["version"] and values["autoDiscovery"]["clusterName"] == f"gpu-training-{stack}"
    assert values["extraArgs"]["expander"] == "priority"
    # Reserved capacity (already paid for) first, then spot.
    assert all("spot" in p for p in values["expanderPriorities"]["50"])
    assert all(any(f"-{pool.name}-" in p for pool in config_of(stack).node_pools if pool.capacity in ("reservation", "capacityBlock"))
               for p in values["expanderPriorities"].get("60", []))
    (association,) = [a["inputs"] for a in plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if a["inputs"]["serviceAccount"] == "cluster-autoscaler"]
    assert (association["namespace"], association["serviceAccount"]) == ("kube-system", "cluster-autoscaler")
    policy = json.loads(next(p["inputs"]["policy"] for p in plan.of_type("aws:iam/rolePolicy:RolePolicy")
                             if p["name"] == "cluster-autoscaler-policy"))
    mutating = next(s for s in policy["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"])
    assert mutating["Condition"] == {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/gpu-training-{stack}": "owned"}}


def test_device_plugins_only_on_their_hardware(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    releases = {r["inputs"]["chart"]: r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["nvidia-device-plugin"]["values"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    if any(p.efa for p in config.node_pools):
        assert releases["aws-efa-k8s-device-plugin"]["values"]["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    else:
        assert "aws-efa-k8s-device-plugin" not in releases
