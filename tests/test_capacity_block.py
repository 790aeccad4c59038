"""A capacity block's end: config, the plan's release after it, and the queue hold before it."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
import yaml
from stack_configs import PROJECT, ROOT, raw_config
from test_fabric_and_capacity import BLOCK, BLOCK_END, prod_pools_with

from components.config import ConfigError, StackConfig, load_stack_config
from components.config.strict_yaml import YamlError, load_yaml_text
from components.workload import capacity_block_script as script
from components.workload.capacity_block import EKS_SCALEDOWN_LEAD, HOLD_LEAD, cron_at
from components.workload.controllers import PODS_READY_TIMEOUT_SECONDS
from offline.plan import synthesize

UTC = datetime.UTC
END = datetime.datetime(2099, 1, 15, 11, 30, tzinfo=UTC)


def load(pools, today=datetime.date(2026, 12, 6)) -> StackConfig:
    config = load_stack_config({**raw_config("prod"), f"{PROJECT}:nodePools": pools}, project=PROJECT, stack="prod",
                               today=today)
    assert isinstance(config, StackConfig)
    return config


def errors_of(pools) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load(pools)
    return raised.value.errors


def block_pool(config: StackConfig):
    return next(p for p in config.node_pools if p.name == "p5-efa")


@pytest.mark.parametrize("end", ["2099-01-15T11:30:00Z", "2099-01-15T11:30:00+00:00"])
def test_the_end_is_read_as_ec2_prints_it(end):
    assert block_pool(load(prod_pools_with(**{**BLOCK, "capacityBlockEnd": end}))).capacity_block_end == END


@pytest.mark.parametrize(("changes", "expected"), [
    ({**BLOCK, "capacityBlockEnd": None}, "required key is missing: a capacityBlock pool needs its block's end"),
    ({**BLOCK, "capacityBlockEnd": "2099-01-15T11:30:00"}, "is not a UTC time"),          # no zone: local time?
    ({**BLOCK, "capacityBlockEnd": "2099-01-15T11:30:00+02:00"}, "is not a UTC time"),
    ({**BLOCK, "capacityBlockEnd": "2099-01-15"}, "is not a UTC time"),
    ({**BLOCK, "capacityBlockEnd": "2099-02-30T11:30:00Z"}, "is not a UTC time"),          # no such day
    ({**BLOCK, "capacityBlockEnd": "2099-01-15T11:30:45Z"}, "has seconds"),                # the cron runs at 11:30:00
    ({"capacityBlockEnd": BLOCK_END}, "is only used with capacity: capacityBlock, not reservation"),
])
def test_a_bad_or_missing_end_is_refused_with_its_key_and_fix(changes, expected):
    errors = errors_of(prod_pools_with(**changes))
    index = next(i for i, p in enumerate(prod_pools_with()) if p["name"] == "p5-efa")
    (error,) = [e for e in errors if "capacityBlockEnd" in e]
    assert error.startswith(f"{PROJECT}:nodePools[{index}].capacityBlockEnd: ") and expected in error
    assert "Fix: " in error


def test_an_unquoted_end_is_refused_by_the_stack_file_reader():
    """go-yaml (the Pulumi CLI) reads an unquoted time as a timestamp: the docs quote it."""
    with pytest.raises(YamlError, match=r"date or time.*quote it"):
        load_yaml_text("capacityBlockEnd: 2099-01-15T11:30:00Z\n", source="Pulumi.prod.yaml")
    assert load_yaml_text('capacityBlockEnd: "2099-01-15T11:30:00Z"\n', source="x") == {"capacityBlockEnd": BLOCK_END}


# Judged by the day, against a block within the pinned Kubernetes minor's support.
NEAR_BLOCK = {**BLOCK, "capacityBlockEnd": "2027-01-15T11:30:00Z"}


@pytest.mark.parametrize(("today", "released", "warned"), [
    (datetime.date(2027, 1, 10), False, False),
    (datetime.date(2027, 1, 13), False, True),    # within 2 days: say so
    (datetime.date(2027, 1, 15), False, True),    # the day itself: the cluster holds and resumes
    (datetime.date(2027, 1, 16), True, True),     # the day after: released
])
def test_the_pool_is_released_the_day_after_its_block_ends(today, released, warned):
    pools = prod_pools_with(**{**NEAR_BLOCK, "size": {"min": 2, "desired": 2, "max": 2}})
    config = load(pools, today=today)
    pool = block_pool(config)
    assert pool.released == released
    assert (pool.min_size, pool.desired_size, pool.max_size) == ((0, 0, 2) if released else (2, 2, 2))
    warnings = [w for w in config.warnings if "capacityBlockEnd" in w]
    assert bool(warnings) == warned
    if released:
        assert "ended 2027-01-15 11:30 UTC" in warnings[0] and "remove the pool" in warnings[0]


def test_the_hold_comes_before_eks_scales_the_pool_to_zero_by_more_than_a_gang_start():
    # EKS scales a CAPACITY_BLOCK node group to 0 at end - 40 min (EKS User Guide, capacity-blocks-mng);
    # a gang admitted later than end - 40 min - its PodsReady timeout could never be Ready.
    assert datetime.timedelta(minutes=40) == EKS_SCALEDOWN_LEAD
    assert EKS_SCALEDOWN_LEAD + datetime.timedelta(seconds=PODS_READY_TIMEOUT_SECONDS) == HOLD_LEAD
    assert cron_at(END - HOLD_LEAD) == "50 9 15 1 *" and cron_at(END) == "30 11 15 1 *"


def manifests_named(plan, kind):
    return {m["metadata"]["name"]: m for m in plan.manifests() if m["kind"] == kind}


def test_the_plan_holds_and_resumes_the_blocks_queues_in_the_cluster():
    plan = synthesize("prod", overrides={"nodePools": prod_pools_with(**BLOCK)})
    cronjobs = manifests_named(plan, "CronJob")
    hold, resume = cronjobs["capacity-block-hold-p5-efa"], cronjobs["capacity-block-resume-p5-efa"]
    assert (hold["spec"]["schedule"], resume["spec"]["schedule"]) == ("50 9 15 1 *", "30 11 15 1 *")
    assert hold["spec"]["timeZone"] == resume["spec"]["timeZone"] == "Etc/UTC"
    env = {c["name"]: {e["name"]: e["value"] for e in c["env"]}
           for c in hold["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]}["hold"]
    assert env == {"FLAVOR": "pool-p5-efa", "STOP_POLICY": "Hold", "AT": "2099-01-15T09:50:00+00:00",
                   "WINDOW_S": str(int(HOLD_LEAD.total_seconds()))}
    (role,) = manifests_named(plan, "ClusterRole")["capacity-block-hold"]["rules"]
    assert role == {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "list", "patch"]}
    queue = manifests_named(plan, "ClusterQueue")["training-prod"]
    (flavor,) = [f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "pool-p5-efa"]
    assert next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")["nominalQuota"] > 0


def test_a_stack_without_a_block_plans_no_hold(plan_of):
    assert not [n for n in manifests_named(plan_of("prod"), "CronJob") if n.startswith("capacity-block")]


def test_an_ended_block_is_planned_with_no_nodes_no_quota_and_no_hold():
    plan = synthesize("prod", overrides={"nodePools": prod_pools_with(
        **{**BLOCK, "capacityBlockEnd": "2020-01-15T11:30:00Z", "size": {"min": 2, "desired": 2, "max": 2}})})
    (group,) = [r["inputs"] for r in plan.of_type("aws:eks/nodeGroup:NodeGroup")
                if r["name"] == "node-pools-p5-efa-nodegroup"]
    assert (group["scalingConfig"]["minSize"], group["scalingConfig"]["desiredSize"]) == (0, 0)
    queue = manifests_named(plan, "ClusterQueue")["training-prod"]
    (flavor,) = [f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "pool-p5-efa"]
    assert all(r["nominalQuota"] in (0, "0Gi") for r in flavor["resources"]), flavor
    assert not [n for n in manifests_named(plan, "CronJob") if n.startswith("capacity-block")]


# --------------------------------------------------------------------------- the script, against Kueue's API

def cluster_queue(name, flavors, stop_policy=None, annotations=None):
    spec = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                "flavors": [{"name": f, "resources": []} for f in flavors]}]}
    return {"metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
            "spec": {**spec, **({"stopPolicy": stop_policy} if stop_policy else {})}}


QUEUES = [
    cluster_queue("training-prod", ["pool-p5-efa", "pool-gpu-spot"]),
    cluster_queue("team-vision", ["pool-gpu-spot"]),                                        # not on the block
    cluster_queue("team-nlp", ["pool-p5-efa"], stop_policy="HoldAndDrain"),                # stopped by an operator
    cluster_queue("team-speech", ["pool-p5-efa"], stop_policy="None"),
]


def run(monkeypatch, queues, *, stop_policy, now, at=END - HOLD_LEAD, window=HOLD_LEAD):
    patches = []

    def call(method, path, body=None):
        if method == "GET":
            assert path == script.QUEUES
            return {"items": queues}
        patches.append((path.split("/")[-1].split("?")[0], body))
        return {}

    monkeypatch.setattr(script, "_call", call)
    monkeypatch.setenv("FLAVOR", "pool-p5-efa")
    monkeypatch.setenv("STOP_POLICY", stop_policy)
    monkeypatch.setenv("AT", at.isoformat())
    monkeypatch.setenv("WINDOW_S", str(int(window.total_seconds())))
    assert script.main(now=now) == 0
    return dict(patches)


def test_the_hold_stops_only_the_blocks_queues_that_admit(monkeypatch):
    patches = run(monkeypatch, QUEUES, stop_policy="Hold", now=END - HOLD_LEAD + datetime.timedelta(minutes=1))
    assert patches == {n: {"metadata": {"annotations": {script.HELD_FOR: "pool-p5-efa"}}, "spec": {"stopPolicy": "Hold"}}
                       for n in ("training-prod", "team-speech")}


def test_the_resume_undoes_only_its_own_hold(monkeypatch):
    held = [cluster_queue("training-prod", ["pool-p5-efa"], "Hold", {script.HELD_FOR: "pool-p5-efa"}),
            cluster_queue("team-nlp", ["pool-p5-efa"], "Hold"),                             # an operator's hold
            # held by this block's run, then drained by an operator: theirs to resume
            cluster_queue("team-speech", ["pool-p5-efa"], "HoldAndDrain", {script.HELD_FOR: "pool-p5-efa"})]
    patches = run(monkeypatch, held, stop_policy="None", now=END, at=END, window=datetime.timedelta(days=1))
    assert patches == {"training-prod": {"metadata": {"annotations": {script.HELD_FOR: None}},
                                         "spec": {"stopPolicy": "None"}}}


@pytest.mark.parametrize("now", [END - HOLD_LEAD - datetime.timedelta(minutes=1), END,
                                 END - HOLD_LEAD + datetime.timedelta(days=365)])   # the cron's yearly repeat
def test_outside_its_window_a_run_changes_nothing(monkeypatch, now):
    assert run(monkeypatch, QUEUES, stop_policy="Hold", now=now) == {}


def test_the_patches_are_valid_clusterqueue_fields():
    """stopPolicy's values are the CRD's enum (kueue v0.19.2 ClusterQueue)."""
    crd = yaml.safe_load((ROOT / "schemas" / "crds" / "kueue.x-k8s.io_clusterqueues.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    stop_policy = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["stopPolicy"]
    assert {"Hold", "None"} <= set(stop_policy["enum"])
    assert json.loads(json.dumps(script.queue_patch(QUEUES[0], flavor="pool-p5-efa", stop_policy="Hold")))


def test_the_script_is_the_one_the_configmap_carries():
    from components.workload.capacity_block import SCRIPT
    assert Path(script.__file__).resolve() == SCRIPT.resolve()


def test_the_hold_objects_validate_against_kubernetes_and_the_held_queue_against_kueue():
    import kubernetes_validate
    from crd_schemas import validate_custom_resource

    from components.workload.capacity_block import hold_manifests
    config = load(prod_pools_with(**BLOCK))
    manifests = hold_manifests(config.node_pools, system_pool=config.system_pool.name)
    assert [m["kind"] for m in manifests] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
                                              "CronJob", "CronJob"]
    for manifest in manifests:
        kubernetes_validate.validate(manifest, f"{config.cluster.kubernetes_version}.0", strict=True)
    # A queue as the script leaves it, held, is still one Kueue accepts.
    plan_queue = manifests_named(synthesize("prod", overrides={"nodePools": prod_pools_with(**BLOCK)}),
                                 "ClusterQueue")["training-prod"]
    held = {**plan_queue, "metadata": {**plan_queue["metadata"], "annotations": {script.HELD_FOR: "pool-p5-efa"}},
            "spec": {**plan_queue["spec"], "stopPolicy": "Hold"}}
    assert validate_custom_resource(held) == []
