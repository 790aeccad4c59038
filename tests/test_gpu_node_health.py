"""GPU node health: the node monitoring agent's DCGM runs on every tainted GPU pool, the CloudWatch
add-on keeps the exporter the GPU alarms read, and node auto-repair stays on."""

from __future__ import annotations

import json

import jsonschema
import pytest
from stack_configs import PLATFORM_STACKS, PROJECT, raw_config

from components.cluster.pool_scheduling import node_taints
from components.config import load_stack_config
from components.facts.instance_types import INSTANCE_TYPES
from offline.plan import synthesize

ADDON = "aws:eks/addon:Addon"
# The node monitoring agent's add-on configuration schema at v1.7.0 as far as we use it
# (aws/eks-node-monitoring-agent charts/configuration.schema.json: DCGMAgent properties, each
# level `additionalProperties: false`; EKS rejects any other key).
NODE_MONITORING_AGENT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "global": {"type": "object"}, "nodeAgent": {"type": "object"}, "extraObjects": {"type": "array"},
        "dcgmAgent": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "affinity": {"type": "object"}, "podAnnotations": {"type": "object"}, "podLabels": {"type": "object"},
                "nodeSelector": {"type": "object"}, "priorityClassName": {"type": "string"},
                "resources": {"type": "object"}, "resizePolicy": {"type": "array"},
                "tolerations": {"type": "array", "items": {"type": "object"}},
            },
        },
    },
}


def tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' rule (core/v1 Toleration.ToleratesTaint)."""
    if toleration.get("effect") and toleration["effect"] != taint["effect"]:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")


@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    ({"operator": "Exists"}, {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, {"key": "team", "value": "a", "effect": "NoSchedule"}, False),
    ({"key": "a", "value": "b", "effect": "NoSchedule"}, {"key": "a", "value": "b", "effect": "NoSchedule"}, True),
    ({"key": "a", "value": "c", "effect": "NoSchedule"}, {"key": "a", "value": "b", "effect": "NoSchedule"}, False),
    ({"operator": "Exists", "effect": "NoExecute"}, {"key": "a", "value": "b", "effect": "NoSchedule"}, False),
])
def test_toleration_rule(toleration, taint, expected):
    assert tolerates(toleration, taint) is expected


def addon_configuration(plan, name: str) -> dict:
    (addon,) = [a["inputs"] for a in plan.of_type(ADDON) if a["inputs"]["addonName"] == name]
    return json.loads(addon["configurationValues"])


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_dcgm_runs_on_every_tainted_gpu_pool(stack, plan_of):
    plan = plan_of(stack)
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    values = addon_configuration(plan, "eks-node-monitoring-agent")
    jsonschema.validate(values, NODE_MONITORING_AGENT_SCHEMA)
    tolerations = values["dcgmAgent"]["tolerations"]
    gpu_pools = [pool for pool in config.node_pools if pool.gpu]
    assert gpu_pools
    groups = {g["inputs"]["nodeGroupName"]: g["inputs"] for g in plan.of_type("aws:eks/nodeGroup:NodeGroup")}
    for pool in gpu_pools:
        taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node_taints(pool)]
        assert taints, f"{pool.name}: GPU pools are tainted, which is why DCGM needs tolerations"
        for taint in taints:
            assert any(tolerates(t, taint) for t in tolerations), f"{pool.name}: dcgm-server would not tolerate {taint}"
    # Auto-repair, which acts on the agent's AcceleratedHardwareReady, is off on GPU pools while the
    # CloudWatch exporter's DCGM runs beside the agent's (docs/upgrading-and-pins.md), on elsewhere.
    assert groups and all(g["nodeRepairConfig"] == {"enabled": "NVIDIA" not in g["amiType"]} for g in groups.values())


def test_a_pool_with_its_own_taint_is_tolerated_too():
    from components.cluster.addons import NODE_MONITORING_AGENT_CONFIGURATION
    custom = {"key": "dedicated", "value": "vision", "effect": "NoSchedule"}
    assert any(tolerates(t, custom) for t in NODE_MONITORING_AGENT_CONFIGURATION["dcgmAgent"]["tolerations"])


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_the_gpu_alarms_keep_their_exporter(stack, plan_of):
    plan = plan_of(stack)
    assert addon_configuration(plan, "amazon-cloudwatch-observability") == {"dcgmExporter": {"enabled": True}}
    metrics = {a["inputs"].get("metricName") for a in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")}
    assert {"node_gpu_utilization", "node_gpu_memory_utilization"} <= metrics


def test_device_plugins_run_on_gpu_pools_with_taints_of_their_own():
    """A plugin that does not tolerate a pool's own taint never starts there: the nodes never
    advertise nvidia.com/gpu or vpc.amazonaws.com/efa and the gang stays Pending."""
    pools = raw_config("staging")[f"{PROJECT}:nodePools"]
    own_taint = {"key": "example.com/dedicated", "value": "training", "effect": "NoSchedule"}
    for pool in pools:
        if INSTANCE_TYPES[pool["instanceTypes"][0]].gpus:
            pool["taints"] = [own_taint]
    plan = synthesize("staging", overrides={"nodePools": pools})
    config = load_stack_config(raw_config("staging") | {f"{PROJECT}:nodePools": pools}, project=PROJECT, stack="staging")
    releases = {r["inputs"]["chart"]: r["inputs"]["values"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    plugins = {"nvidia-device-plugin": [p for p in config.node_pools if p.gpu],
               "aws-efa-k8s-device-plugin": [p for p in config.node_pools if p.efa]}
    assert all(plugins.values()), "staging has GPU pools with and without EFA"
    for chart, served_pools in plugins.items():
        for pool in served_pools:
            taints = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node_taints(pool)]
            assert own_taint in taints
            for taint in taints:
                assert any(tolerates(t, taint) for t in releases[chart]["tolerations"]), f"{chart} on {pool.name}: {taint}"
