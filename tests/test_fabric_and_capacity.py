"""What a real p5 job needs (EFA, its capacity, its zone), read off the synthesised plans."""

from __future__ import annotations

import base64
import json
from unittest.mock import ANY

import pytest
import yaml
from plan_queries import config_of, inputs_by_name, waits_for
from stack_configs import PROJECT, ROOT, raw_config

from components.cluster.autoscaler import MAX_NODE_PROVISION_MINUTES
from components.cluster.device_plugins import EFA_CHART_INSTANCE_TYPES
from components.cluster.provisioning_requests import CRD_FILE
from components.config import ConfigError, ConfigProblem, StackConfig, TeamStackConfig, load_stack_config
from components.config.multikueue import MANAGER, WORKER
from components.config.node_pools import RESERVED_CAPACITY
from components.facts.instance_types import INSTANCE_TYPES
from components.facts.pod_network import MINIMUM_IP_TARGET, WARM_IP_TARGET
from components.facts.zones import zone_id_problems
from components.workload import training_job
from offline.plan import MOCK_ZONE_NAMES, planned_config, synthesize

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def platform_config_of(stack) -> StackConfig:
    config = config_of(stack)
    assert isinstance(config, StackConfig), stack
    return config


def manifests(plan, kind):
    """The stack's objects of `kind` on its own cluster (a team stack also makes some on the
    MultiKueue workers: tests/test_worker_tenancy.py)."""
    return [m for m in plan.manifests_on(None) if m["kind"] == kind]


def nodeadm_documents(user_data: str) -> list[dict]:
    """The NodeConfig documents of MIME multipart user data, as nodeadm reads them."""
    mime = base64.b64decode(user_data).decode()
    header, _, body = mime.partition("\n\n")
    boundary = header.split('boundary="', 1)[1].split('"', 1)[0]
    parts = [p for p in body.split(f"--{boundary}") if p.strip() and p.strip() != "--"]
    documents = []
    for part in parts:
        part_header, _, content = part.strip("\n").partition("\n\n")
        assert part_header == "Content-Type: application/node.eks.aws"
        documents.extend(d for d in yaml.safe_load_all(content) if d)
    return documents


def test_prod_p5_runs_on_a_reservation_in_an_az_id(plan_of):
    plan, pool = plan_of("prod"), next(p for p in config_of("prod").node_pools if p.name == "p5-efa")
    assert pool.capacity == "reservation" and pool.availability_zones == ("use1-az4",)
    template = inputs_by_name(plan, LAUNCH_TEMPLATE)["node-pools-p5-efa-lt"]
    group = inputs_by_name(plan, NODE_GROUP)["node-pools-p5-efa-nodegroup"]
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": pool.capacity_reservation_id}}
    assert group["capacityType"] == "ON_DEMAND" and group["instanceTypes"] == ["p5.48xlarge"]
    # The AZ ID was resolved through the provider (this offline account: use1-az4 = us-east-1a).
    assert group["subnetIds"] == [f"network-private-{MOCK_ZONE_NAMES['use1-az4']}-id"]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_efa_launch_templates_have_efa_only_devices_and_raid0(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    templates = inputs_by_name(plan, LAUNCH_TEMPLATE)
    for pool in config.node_pools:
        template = templates[f"node-pools-{pool.name}-lt"]
        instance = INSTANCE_TYPES[pool.instance_types[0]]
        if pool.efa:
            interfaces = template["networkInterfaces"]
            assert [i["interfaceType"] for i in interfaces] == ["interface"] + ["efa-only"] * instance.efa_interfaces
        spec = {}
        if pool.gpu:  # the kubelet's graceful shutdown, above every job's grace on the pool
            spec["kubelet"] = {"config": {"shutdownGracePeriod": f"{pool.shutdown_grace_period_seconds}s",
                                          "shutdownGracePeriodCriticalPods": "30s"}}
            graces = [j.termination_grace_period_seconds for j in config.training.jobs if j.pool == pool.name]
            assert all(grace <= pool.shutdown_grace_period_seconds - 30 for grace in graces), (pool.name, graces)
        if instance.has_instance_store:
            spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
        if spec:
            assert nodeadm_documents(template["userData"]) == [{
                "apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}]
        else:
            assert "userData" not in template, pool.name
    if stack == "prod":
        assert {p.name: p.shutdown_grace_period_seconds for p in config.node_pools if p.gpu} == {"p5-efa": 300, "gpu-spot": 150}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_gpu_pools_update_with_the_minimal_strategy(stack, plan_of):
    groups = inputs_by_name(plan_of(stack), NODE_GROUP)
    for pool in config_of(stack).node_pools:
        update = groups[f"node-pools-{pool.name}-nodegroup"]["updateConfig"]
        assert update.get("updateStrategy") == ("MINIMAL" if pool.gpu else None), pool.name
        assert update["maxUnavailable"] == 1


def test_prod_jobset_carries_the_efa_environment_and_bounds(plan_of):
    config = config_of("prod")
    (jobset,) = manifests(plan_of("prod"), "JobSet")
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert {k: env[k] for k in ("TRAIN_FABRIC", "NCCL_NET", "NCCL_NET_PLUGIN", "FI_PROVIDER", "FI_EFA_USE_HUGE_PAGE",
                                "FI_EFA_USE_DEVICE_RDMA")} == {
        "TRAIN_FABRIC": "efa", "NCCL_NET": "Libfabric", "NCCL_NET_PLUGIN": "ofi", "FI_PROVIDER": "efa",
        "FI_EFA_USE_HUGE_PAGE": "0", "FI_EFA_USE_DEVICE_RDMA": "1"}
    (job,) = config.training.jobs
    assert env["TRAIN_MAX_GANG_RESTARTS"] == str(job.max_restarts + job.max_disruption_restarts)
    assert env["PET_MAX_RESTARTS"] == "2"  # torchrun's own: restarts in the running pods before the recreate (launcher.inplace)
    assert "TRAIN_INPLACE_RESTARTS" not in env  # its name before; the launcher refuses it
    assert env["TRAIN_RESTART_ATTEMPT"] == {"fieldRef": {"fieldPath": "metadata.annotations['jobset.sigs.k8s.io/restart-attempt']"}}
    assert "cpu" not in container["resources"]["limits"] and container["resources"]["requests"]["cpu"] == "186"  # 190.67 - the 3.84 vCPU margin
    # Local NVMe scratch: 80 % of the node's 30,400 GB (28,312 GiB) instance store, one pod per node.
    scratch = next(v for v in pod["volumes"] if v["name"] == "scratch")
    assert scratch == {"name": "scratch", "emptyDir": {"sizeLimit": "22649Gi"}} and env["SCRATCH_DIR"] == "/scratch"


@pytest.mark.parametrize(("stack", "devices", "rdma"), [
    ("prod", "32", "1"),       # p5.48xlarge: 32 EFA devices (EC2), GPUDirect RDMA (aws-ofi-nccl gdr_required)
    ("staging", "1", "0"),     # g6e.12xlarge: 1 EFA device, no GPUDirect RDMA
])
def test_the_self_checks_expected_fabric_reaches_every_efa_pod(plan_of, stack, devices, rdma):
    """The launcher holds each node to these: they come from the pool's instance facts and equal
    the EFA devices the pod requests (a pod that sees fewer fails with both counts)."""
    config = config_of(stack)
    pools = {p.name: p for p in config.node_pools}
    jobsets = manifests(plan_of(stack), "JobSet")
    efa_jobs = [j for j in jobsets if pools[next(t.pool for t in config.training.jobs if t.name == j["metadata"]["name"])].efa]
    assert efa_jobs
    for jobset in efa_jobs:
        (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert (env["TRAIN_EFA_DEVICES"], env["TRAIN_EFA_GPUDIRECT_RDMA"]) == (devices, rdma)
        assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == devices


def test_socket_jobs_keep_the_socket_transport(plan_of):
    (jobset,) = manifests(plan_of("dev"), "JobSet")
    (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["TRAIN_FABRIC"], env["NCCL_NET"]) == ("socket", "Socket") and "FI_PROVIDER" not in env
    assert "TRAIN_EFA_DEVICES" not in env and "TRAIN_EFA_GPUDIRECT_RDMA" not in env


@pytest.mark.parametrize("stack", ["dev", "staging", "prod", "prod-usw2", "team-vision-prod"])
def test_gang_flavors_are_admitted_through_provisioning_requests(stack, plan_of):
    plan = plan_of(stack)
    config = planned_config(stack)
    platform = config.judged_platform if isinstance(config, TeamStackConfig) else config
    pools = platform.node_pools
    # The stack's namespace's queues: a team's are its platform's (made from its registry of teams),
    # and a platform's plan holds its registered teams' beside its own.
    namespace = config.training_namespace
    queues = {q["metadata"]["name"]: q for q in manifests(plan_of(platform.stack), "ClusterQueue")
              if q["metadata"]["name"] in (namespace, f"{namespace}.any-region", "any-region")
              and (q["metadata"]["name"] != "any-region" or not isinstance(config, TeamStackConfig))}
    # A MultiKueue manager's any-region queue only dispatches: its one check is MultiKueue's and it
    # admits nothing onto the manager's pools; the worker's own queue provisions the gang there.
    manager = isinstance(config, StackConfig) and config.multikueue is not None and config.multikueue.role == MANAGER
    # (a team's own on a manager: `<namespace>.any-region`)
    dispatching = [queues.pop(name) for name in list(queues) if name == "any-region" or name.endswith(".any-region")]
    on_manager = manager or (isinstance(config, TeamStackConfig) and platform.multikueue is not None
                             and platform.multikueue.role == MANAGER)
    assert bool(dispatching) is on_manager
    for queue in dispatching:
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
        assert [f["name"] for g in queue["spec"]["resourceGroups"] for f in g["flavors"]] == ["multikueue"]
    (queue,) = queues.values()
    gang_flavors = sorted(f"pool-{p.name}" for p in pools if p.gpu and p.max_size > 1)
    assert gang_flavors
    assert queue["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "gpu-gang-provisioning", "onFlavors": ANY}]}
    assert sorted(queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"]) == gang_flavors
    # A gang MultiKueue dispatches lands in the worker's LocalQueue any-region: the same checked queue.
    local = {q["metadata"]["name"]: q["spec"]["clusterQueue"] for q in manifests(plan, "LocalQueue")}
    if isinstance(config, StackConfig) and config.multikueue is not None and config.multikueue.role == WORKER:
        assert local["any-region"] == queue["metadata"]["name"]


def test_the_provisioning_check_and_its_api_are_installed(plan_of):
    plan = plan_of("prod")
    # prod is a MultiKueue manager: beside the provisioning check stands MultiKueue's (tests/test_multikueue.py)
    (check,) = [c for c in manifests(plan, "AdmissionCheck") if c["spec"]["controllerName"] != "kueue.x-k8s.io/multikueue"]
    (config,) = manifests(plan, "ProvisioningRequestConfig")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    assert config["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert config["spec"]["managedResources"] == ["nvidia.com/gpu"]
    # The CRD goes in exactly as upstream ships it.
    (crd,) = [m for m in manifests(plan, "CustomResourceDefinition")
              if m["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"]
    assert crd == json.loads(json.dumps(yaml.safe_load(CRD_FILE.read_text())))
    autoscaler = inputs_by_name(plan, "kubernetes:helm.sh/v3:Release")["cluster-autoscaler-release"]
    assert autoscaler["version"] == "9.59.0"
    assert autoscaler["values"]["extraArgs"]["enable-provisioning-requests"] == "true"


def test_vpc_cni_keeps_few_warm_ips(plan_of):
    addons = {a["inputs"]["addonName"]: a["inputs"] for a in plan_of("prod").of_type("aws:eks/addon:Addon")}
    env = json.loads(addons["vpc-cni"]["configurationValues"])["env"]
    assert env == {"WARM_IP_TARGET": str(WARM_IP_TARGET), "MINIMUM_IP_TARGET": str(MINIMUM_IP_TARGET),
                   "CLUSTER_NAME": "gpu-training-prod"}  # the CNI's interfaces carry the cluster's tag (boundary)


def test_the_efa_device_plugin_chart_covers_every_efa_type():
    """The chart's DaemonSet runs only on the instance types its values list: a type missing there
    would never advertise vpc.amazonaws.com/efa and its pods would stay Pending."""
    assert {name for name, t in INSTANCE_TYPES.items() if t.has_efa} <= EFA_CHART_INSTANCE_TYPES


def prod_pools_with(pool: str = "p5-efa", **changes) -> list[dict]:
    """prod's nodePools as written in its stack file, with one pool changed (None: the key removed)."""
    pools = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"]["gpu-training:nodePools"]
    changed = next(p for p in pools if p["name"] == pool)
    changed.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del changed[key]
    return pools


# A capacity block launches only inside its dates: its pool names all three sizes (no reserved-count default),
# and its end.
BLOCK_END = "2099-01-15T11:30:00Z"
BLOCK = {"capacity": "capacityBlock", "capacityBlockEnd": BLOCK_END, "size": {"min": 0, "desired": 0, "max": 2}}


def test_a_capacity_block_pool_gets_no_placement_group():
    plan = synthesize("prod", overrides={"nodePools": prod_pools_with(**BLOCK)})
    template = inputs_by_name(plan, LAUNCH_TEMPLATE)["node-pools-p5-efa-lt"]
    assert "placement" not in template
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"} and template["instanceType"] == "p5.48xlarge"
    group = inputs_by_name(plan, NODE_GROUP)["node-pools-p5-efa-nodegroup"]
    assert group["capacityType"] == "CAPACITY_BLOCK" and "instanceTypes" not in group
    assert not plan.of_type("aws:ec2/placementGroup:PlacementGroup")


def test_a_reservation_made_in_a_placement_group_launches_into_that_group():
    plan = synthesize("prod", overrides={"nodePools": prod_pools_with(placementGroup="p5-reservation-cpg")})
    template = inputs_by_name(plan, LAUNCH_TEMPLATE)["node-pools-p5-efa-lt"]
    assert template["placement"] == {"groupName": "p5-reservation-cpg"}
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": "cr-0123456789abcdef0"}
    assert not plan.of_type("aws:ec2/placementGroup:PlacementGroup"), "the existing group is used, none is made"


NEW_GROUP_ON_RESERVED = "cannot ask for a new placement group on reserved capacity"


@pytest.mark.parametrize(("changes", "says"), [
    ({"placementGroup": "cpg one"}, "is not a placement group name"),
    ({"placementGroup": "cpg", **BLOCK}, "is only used by EFA pools"),
    ({"placementGroup": "cpg", "efa": False}, "is only used by EFA pools"),
    # A new group on reserved capacity is refused, with the reason and where to find the right group.
    ({"placementGroup": True}, NEW_GROUP_ON_RESERVED),
    ({"placementGroup": True, **BLOCK}, NEW_GROUP_ON_RESERVED),
    ({"placementGroup": True, "capacity": "onDemand", "capacityReservationId": None}, "must be a string"),
])
def test_a_placement_group_is_named_only_where_one_is_used(changes, says):
    with pytest.raises(ConfigError) as raised:
        synthesize("prod", overrides={"nodePools": prod_pools_with(**changes)})
    messages = [m for m in raised.value.errors if m.startswith(f"{PROJECT}:nodePools[1].placementGroup: ")]
    assert len(messages) == 1 and says in messages[0] and "Fix:" in messages[0], raised.value.errors


def test_a_new_placement_group_on_a_reservation_is_refused_with_its_source():
    with pytest.raises(ConfigError) as raised:
        synthesize("prod", overrides={"nodePools": prod_pools_with(placementGroup=True)})
    (message,) = [m for m in raised.value.errors if NEW_GROUP_ON_RESERVED in m]
    assert "EC2 User Guide, cr-cpg" in message and "eksctl" in message
    assert "describe-capacity-reservations --query 'CapacityReservations[].PlacementGroupArn'" in message


@pytest.mark.parametrize(("stack", "own_groups"), [
    ("prod", set()),                            # p5-efa: a reservation, named no group of its own
    ("staging", {"gpu-training-staging-gpu-efa"}),  # an onDemand EFA pool: its own cluster group
    ("dev", set()),                             # no EFA pool
])
def test_only_efa_pools_on_ondemand_or_spot_get_a_new_placement_group(stack, own_groups, plan_of):
    plan, config = plan_of(stack), platform_config_of(stack)
    made = {group["inputs"]["name"]: group["inputs"] for group in plan.of_type(PLACEMENT_GROUP)}
    assert set(made) == own_groups and all(group["strategy"] == "cluster" for group in made.values())
    templates = inputs_by_name(plan, LAUNCH_TEMPLATE)
    for pool in config.node_pools:
        placement = templates[f"node-pools-{pool.name}-lt"].get("placement")
        if pool.capacity in RESERVED_CAPACITY or not pool.efa:
            assert placement is None, pool.name
        else:
            assert placement == {"groupName": f"gpu-training-{stack}-{pool.name}"}, pool.name
    reserved = [p for p in config.node_pools if p.capacity in RESERVED_CAPACITY]
    assert [p.name for p in reserved] == (["p5-efa"] if stack == "prod" else [])
    for pool in reserved:  # the reservation is still targeted, only the group is gone
        assert templates[f"node-pools-{pool.name}-lt"]["capacityReservationSpecification"] == {
            "capacityReservationTarget": {"capacityReservationId": pool.capacity_reservation_id}}


@pytest.mark.parametrize("stack", ["prod", "staging", "dev"])
def test_reservation_pools_keep_every_reserved_node_up(stack, plan_of):
    """min = desired = max (the reserved count) unless the stack file sets them; other pools as written."""
    plan = plan_of(stack)
    groups = inputs_by_name(plan, NODE_GROUP)
    for raw in raw_config(stack)[f"{PROJECT}:nodePools"]:
        scaling, size = groups[f"node-pools-{raw['name']}-nodegroup"]["scalingConfig"], raw["size"]
        reserved = raw["capacity"] == "reservation"
        expected_min = size.get("min", size["max"] if reserved else None)
        expected_desired = size.get("desired", size["max"] if reserved else None)
        assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (
            expected_min, expected_desired, size["max"]), raw["name"]
    if stack == "prod":
        p5 = groups["node-pools-p5-efa-nodegroup"]["scalingConfig"]
        assert p5 == {"minSize": 2, "desiredSize": 2, "maxSize": 2}


@pytest.mark.parametrize(("size", "expected"), [
    ({"max": 2}, (2, 2, 2)),                            # the reserved count
    ({"min": 0, "max": 2}, (0, 2, 2)),                  # an explicit min wins; desired starts at the count
    ({"min": 1, "desired": 1, "max": 2}, (1, 1, 2)),
    ({"min": 0, "desired": 0, "max": 2}, (0, 0, 2)),
])
def test_a_reservation_pools_sizes_default_to_its_count(size, expected):
    raw = {**raw_config("prod"), f"{PROJECT}:nodePools": prod_pools_with(size=size)}
    config = load_stack_config(raw, project=PROJECT, stack="prod")
    assert isinstance(config, StackConfig)
    pool = next(p for p in config.node_pools if p.name == "p5-efa")
    assert (pool.min_size, pool.desired_size, pool.max_size) == expected


@pytest.mark.parametrize(("pool", "changes"), [
    ("p5-efa", {"capacity": "capacityBlock", "capacityBlockEnd": BLOCK_END}),  # launches only inside the block's dates
    ("p5-efa", {"capacity": "onDemand", "capacityReservationId": None}),
    ("gpu-spot", {}),
])
def test_other_pools_still_name_min_and_desired(pool, changes):
    pools = prod_pools_with(pool, **changes, size={"max": 2})
    index = next(i for i, p in enumerate(pools) if p["name"] == pool)
    with pytest.raises(ConfigError) as raised:
        load_stack_config({**raw_config("prod"), f"{PROJECT}:nodePools": pools}, project=PROJECT, stack="prod")
    missing = [e.split(": ")[0] for e in raised.value.errors if "required key is missing" in e]
    assert missing == [f"{PROJECT}:nodePools[{index}].size.min", f"{PROJECT}:nodePools[{index}].size.desired"], \
        raised.value.errors


def test_a_capacity_block_without_min_is_told_why_it_differs_from_a_reservation():
    """The docs show `capacity: reservation  # or capacityBlock` with `size: {max: 2}`: switched as
    the comment invites, the error says why the block needs the sizes the reservation did not."""
    pools = prod_pools_with("p5-efa", capacity="capacityBlock", capacityBlockEnd=BLOCK_END, size={"max": 2, "desired": 0})
    with pytest.raises(ConfigError) as raised:
        load_stack_config({**raw_config("prod"), f"{PROJECT}:nodePools": pools}, project=PROJECT, stack="prod")
    index = next(i for i, p in enumerate(pools) if p["name"] == "p5-efa")
    (error,) = [e for e in raised.value.errors if ".size." in e]
    assert error.startswith(f"{PROJECT}:nodePools[{index}].size.min: required key is missing: a capacityBlock pool "
                            "states all three sizes"), raised.value.errors


def test_the_autoscaler_waits_longer_for_a_node_than_a_gpu_node_takes_to_start(plan_of):
    """CA's default is 15 min (FAQ.md); the stack's estimate for a p5's boot, join and image pull is
    prod's scaleDown.unneededMinutes (docs/cost.md). Kueue's gang timeout counts the same wait."""
    assert MAX_NODE_PROVISION_MINUTES > 15
    for stack in ("prod", "staging", "dev"):
        plan, config = plan_of(stack), platform_config_of(stack)
        (autoscaler,) = [r["inputs"]["values"] for r in plan.of_type(HELM_RELEASE) if r["name"] == "cluster-autoscaler-release"]
        assert autoscaler["extraArgs"]["max-node-provision-time"] == f"{MAX_NODE_PROVISION_MINUTES}m"
        assert 2 * config.scale_down.unneeded_minutes <= MAX_NODE_PROVISION_MINUTES, stack
        (kueue,) = [r["inputs"]["values"] for r in plan.of_type(HELM_RELEASE) if r["name"] == "job-controllers-kueue"]
        kueue_config = yaml.safe_load(kueue["managerConfig"]["controllerManagerConfigYaml"])
        timeout_minutes = int(kueue_config["waitForPodsReady"]["timeout"].removesuffix("m"))
        assert timeout_minutes == MAX_NODE_PROVISION_MINUTES + training_job.STARTUP_BUDGET_SECONDS // 60


def test_an_az_id_outside_the_network_fails_with_the_fix():
    # The Lustre file system follows the p5 pool when its zone is left out (and must when it is given).
    storage = raw_config("prod")[f"{PROJECT}:storage"]
    del storage["lustre"]["availabilityZone"]
    with pytest.raises(ConfigError) as raised:  # use1-az2 is us-east-1d in the offline account
        synthesize("prod", overrides={"nodePools": prod_pools_with(availabilityZones=["use1-az2"]), "storage": storage})
    pool, lustre = raised.value.errors
    for message, key in ((pool, "nodePools[1].availabilityZones"), (lustre, "storage.lustre.availabilityZone")):
        assert message.startswith(f"{PROJECT}:{key}: AZ ID use1-az2 is us-east-1d in this account"), message
        assert "Fix: add us-east-1d to network.availabilityZones" in message


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_kueue_and_the_autoscaler_start_after_the_provisioning_request_api(stack, plan_of):
    """Kueue sets up its provisioning admission check only if the CRD exists when it starts."""
    plan = plan_of(stack)
    crd = ("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", "provisioning-requests-crd")
    for release in ("job-controllers-kueue", "cluster-autoscaler-release"):
        assert crd in waits_for(plan, ("kubernetes:helm.sh/v3:Release", release)), release


@pytest.mark.parametrize(("zones_by_pool", "names_by_id", "expected"), [
    ({"p5": ["use1-az4"]}, {"use1-az4": "us-east-1a"}, []),                       # in the network
    ({"p5": ["us-east-1a"]}, {}, []),                                            # a name: checked by the config model
    ({"p5": ["use1-az2"]}, {"use1-az2": "us-east-1d"}, ["AZ ID use1-az2 is us-east-1d"]),
    ({"a": ["use1-az2"], "b": ["use1-az5"]}, {"use1-az2": "us-east-1d", "use1-az5": "us-east-1e"},
     ["a: AZ ID use1-az2", "b: AZ ID use1-az5"]),                                 # every problem, not the first
])
def test_zone_ids_outside_the_network_are_reported_before_anything_is_created(zones_by_pool, names_by_id, expected):
    problems = zone_id_problems(zones_by_pool, names_by_id, ("us-east-1a", "us-east-1b", "us-east-1c"))
    assert len(problems) == len(expected)
    for (key, problem, fix), fragment in zip(problems, expected, strict=True):
        assert fragment in str(ConfigProblem(key, problem, fix)) and fix.startswith("add ")


def test_the_failure_policy_reads_the_launchers_and_the_trainers_exit_codes():
    """143 and 2 are written in three places: the JobSet's rules, the launcher, the trainer."""
    from example_trainer import train
    from launcher import main as launcher

    assert training_job.STOPPED_EXIT_CODE == launcher.EXIT_STOPPED == train.EXIT_STOPPED
    assert training_job.CONTRACT_ERROR_EXIT_CODE == train.EXIT_CONFIG
    assert launcher.error("a test of the exit code") == training_job.CONTRACT_ERROR_EXIT_CODE


def backoff_delays(strategy: dict, *, cap_seconds: int) -> list[int]:
    """Kueue v0.19.2's wait before the n-th retry: base * 2^(n-1), at most the cap (plus jitter)."""
    base, cap = strategy["backoffBaseSeconds"], strategy.get("backoffMaxSeconds", cap_seconds)
    return [min(base * 2 ** (n - 1), cap) for n in range(1, strategy["backoffLimitCount"] + 1)]


def test_backoff_delays_double_from_the_base_up_to_the_cap():
    assert backoff_delays({"backoffBaseSeconds": 60, "backoffLimitCount": 3}, cap_seconds=1800) == [60, 120, 240]
    assert backoff_delays({"backoffBaseSeconds": 600, "backoffMaxSeconds": 1800, "backoffLimitCount": 3},
                          cap_seconds=3600) == [600, 1200, 1800]


@pytest.mark.parametrize("stack", ["prod", "staging", "dev"])
def test_the_docs_retry_waits_are_the_planned_kueue_backoff(stack, plan_of):
    """#27 item 9 (the backoff doc): the waits docs/gpu-fabric-and-capacity.md states are the ones
    the planned ProvisioningRequestConfig and Kueue's requeuing strategy give, 60 x 2^(n-1) s."""
    plan = plan_of(stack)
    (config,) = manifests(plan, "ProvisioningRequestConfig")
    (kueue,) = [r["inputs"]["values"] for r in plan.of_type(HELM_RELEASE) if r["name"] == "job-controllers-kueue"]
    requeuing = yaml.safe_load(kueue["managerConfig"]["controllerManagerConfigYaml"])["waitForPodsReady"]["requeuingStrategy"]
    retry = backoff_delays(config["spec"]["retryStrategy"], cap_seconds=1800)
    requeue = backoff_delays(requeuing, cap_seconds=3600)  # Kueue's own cap for requeuing
    doc = " ".join((ROOT / "docs" / "gpu-fabric-and-capacity.md").read_text().split())
    assert doc.count("`60 x 2^(n-1)` s") == 2
    assert f"{', '.join(map(str, retry[:-1]))} and {retry[-1]} s, {len(retry)} times" in doc, retry
    assert f"({', '.join(map(str, requeue))} s;" in doc and f"After {len(requeue)} the workload is deactivated" in doc


# (platform stack, the stack whose JobSets run on its pools)
JOB_PLANS = [("dev", "dev"), ("staging", "staging"), ("prod", "prod"), ("prod", "team-vision-prod")]


@pytest.mark.parametrize(("platform", "jobs"), JOB_PLANS, ids=[j for _, j in JOB_PLANS])
def test_every_planned_jobs_image_cuda_runs_on_its_pools_gpus(platform, jobs, plan_of):
    """#27 item 7 on the synthesised plans: each JobSet's image CUDA (the config's) has code for
    every GPU model of its pool's node groups and runs on the AMI's driver branch."""
    from components.cluster.pool_scheduling import POOL_LABEL
    from components.facts.cuda import cuda_problem, parse_cuda
    groups = [g["inputs"] for g in plan_of(platform).of_type(NODE_GROUP)]
    types_of = {g["labels"][POOL_LABEL]: g["instanceTypes"] for g in groups if g.get("instanceTypes")}
    cuda_of = {job.name: job.image_cuda for job in config_of(jobs).training.jobs}
    jobsets = manifests(plan_of(jobs), "JobSet")
    assert jobsets
    for jobset in jobsets:
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        gpu_models = [INSTANCE_TYPES[t].gpu_model for t in types_of[pod["nodeSelector"][POOL_LABEL]]]
        models = tuple(model for model in gpu_models if model)
        assert len(models) == len(gpu_models), gpu_models  # a trainer's pool has GPUs on every type
        cuda = parse_cuda(cuda_of[jobset["metadata"]["name"]])
        assert cuda and cuda_problem(cuda, models) is None, (jobset["metadata"]["name"], cuda, models)


@pytest.mark.parametrize(("stack", "cuda", "says"), [
    ("prod", "11.7", "is below CUDA 11.8, the first release with code for the pool's"),  # H100, L4
    ("dev", "14.0", "needs a newer NVIDIA driver than the EKS NVIDIA AMI's 580 branch"),
])
def test_a_plan_with_an_image_cuda_its_gpus_cannot_run_stops_before_any_resource(stack, cuda, says):
    with pytest.raises(ConfigError) as raised:
        synthesize(stack, overrides={"trainerImageCuda": cuda})
    refused = [e for e in raised.value.errors if ".imageCuda: " in e]
    assert refused and all(says in e for e in refused), raised.value.errors
