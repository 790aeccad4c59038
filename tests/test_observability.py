"""Container Insights, log retention and the training alarms, per platform stack."""

import re

import pytest
from plan_queries import config_of
from stack_configs import DELETE, PLATFORM_STACKS, PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.config.stack import StackConfig
from components.facts.eks_versions import ADDON_VERSIONS, SUPPORTED_KUBERNETES_VERSIONS
from components.observability.monitoring import (
    EFA_MIN_ADDON_VERSION,
    UNSCHEDULABLE_METRIC,
    unschedulable_filter_patterns,
)
from components.workload.training_job import REPLICATED_JOB


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_container_insights_with_gpu_metrics_and_retained_logs(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    (addon,) = [a["inputs"] for a in plan.of_type("aws:eks/addon:Addon") if a["inputs"]["addonName"] == "amazon-cloudwatch-observability"]
    assert addon["addonVersion"] == ADDON_VERSIONS[config.cluster.kubernetes_version]["amazon-cloudwatch-observability"]
    assert addon["podIdentityAssociations"][0]["serviceAccount"] == "cloudwatch-agent"
    groups = {g["inputs"]["name"]: g["inputs"]["retentionInDays"] for g in plan.of_type("aws:cloudwatch/logGroup:LogGroup")}
    retention = config.observability.log_group_retention_days
    for kind in ("application", "dataplane", "host", "performance"):
        assert groups[f"/aws/containerinsights/gpu-training-{stack}/{kind}"] == retention[kind]
    assert retention["application"] == config.observability.log_retention_days
    assert retention["host"] == retention["dataplane"] == config.observability.node_log_retention_days


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_the_training_alarms_notify_an_encrypted_topic(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    (topic,) = plan.of_type("aws:sns/topic:Topic")
    assert topic["inputs"]["kmsMasterKeyId"].endswith("/observability-alerts-key")
    all_alarms = [a["inputs"] for a in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")]
    # the per-job alarms (metric math: no metricName) are tests/test_dashboards.py's
    every_alarm = {a["metricName"]: a for a in all_alarms if "metricName" in a}
    for alarm in all_alarms:
        (action,) = alarm["alarmActions"]
        assert action.endswith("topic/observability-alerts") and alarm["okActions"] == [action]
        # Missing data is no incident (GPU pools at zero publish nothing), but for a MultiKueue token:
        # a missing renewal is the failure itself (tests/test_multikueue.py).
        assert alarm["treatMissingData"] == ("breaching" if alarm.get("metricName") == "MultiKueueKubeconfigRenewed"
                                             else "notBreaching")
    alarms = {name: a for name, a in every_alarm.items() if a["namespace"] == "ContainerInsights"}
    idle, memory, failed = alarms["node_gpu_utilization"], alarms["node_gpu_memory_utilization"], alarms["cluster_failed_node_count"]
    assert (idle["statistic"], idle["comparisonOperator"], idle["threshold"]) == (
        "Minimum", "LessThanThreshold", config.observability.gpu_idle_percent)
    assert idle["period"] * idle["evaluationPeriods"] == config.observability.gpu_idle_minutes * 60
    assert (memory["statistic"], memory["threshold"]) == ("Maximum", config.observability.gpu_memory_percent)
    assert failed["threshold"] == 0
    for alarm in alarms.values():
        assert alarm["dimensions"] == {"ClusterName": f"gpu-training-{stack}"}
    endpoints = {s["inputs"]["endpoint"] for s in plan.of_type("aws:sns/topicSubscription:TopicSubscription")}
    assert endpoints == set(config.observability.alert_emails) | set(config.observability.alert_sms)


@pytest.mark.parametrize(
    ("stack", "path", "value", "expected"),
    [
        ("prod", "observability", DELETE, "gpu-training:observability.alertEmails: prod alarms must reach someone"),
        ("dev", "observability.alertEmails", ["not-an-address"], "gpu-training:observability.alertEmails[0]: is not an e-mail"),
        ("dev", "observability.alertSms", ["0123"], "gpu-training:observability.alertSms[0]: is not an E.164"),
        ("dev", "observability.alertEmails", ["a@x.com", "A@x.com"], "gpu-training:observability.alertEmails: lists a recipient twice"),
        ("dev", "observability.gpuIdleMinutes", 7, "gpu-training:observability.gpuIdleMinutes: alarms evaluate 5-minute"),
        ("dev", "observability.gpuIdlePercent", 0, "gpu-training:observability.gpuIdlePercent: must be between 1 and 99"),
        ("dev", "observability.logRetentionDays", 10, "gpu-training:observability.logRetentionDays: is not a CloudWatch"),
    ],
)
def test_invalid_observability_config(stack, path, value, expected):
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config(stack), path, value), project=PROJECT, stack=stack)
    assert any(e.startswith(expected) for e in raised.value.errors), raised.value.errors


def efa_pools(stack):
    config = config_of(stack)
    assert isinstance(config, StackConfig)
    return [p.name for p in config.node_pools if p.efa]


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_efa_packet_drops_alarm_on_stacks_with_efa_pools(stack, plan_of):
    """staging (g6e.12xlarge) and prod (p5) run EFA pools: their node_efa_rx_dropped alarm fires
    on a node dropping packets for 15 min; dev has no EFA pool, hence no such alarm."""
    alarms = [a["inputs"] for a in plan_of(stack).of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
              if a["inputs"].get("metricName") == "node_efa_rx_dropped"]
    if not efa_pools(stack):
        assert stack == "dev" and not alarms
        return
    (alarm,) = alarms
    assert (alarm["namespace"], alarm["dimensions"]) == ("ContainerInsights", {"ClusterName": f"gpu-training-{stack}"})
    assert (alarm["statistic"], alarm["comparisonOperator"], alarm["threshold"]) == ("Maximum", "GreaterThanThreshold", 0)
    assert alarm["period"] * alarm["evaluationPeriods"] == 15 * 60


def version_tuple(build: str) -> tuple[int, ...]:
    return tuple(int(n) for n in build.removeprefix("v").split("-")[0].split("."))


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_pinned_cloudwatch_add_on_collects_efa_metrics(minor):
    """EFA metrics come with add-on v1.5.2-eksbuild.1 and later (CloudWatch User Guide)."""
    assert version_tuple(ADDON_VERSIONS[minor]["amazon-cloudwatch-observability"]) >= EFA_MIN_ADDON_VERSION


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_an_unschedulable_training_pod_alarms(stack, plan_of):
    """Two filters on the control plane's log group (whose scheduler log the cluster enables)
    count into one metric; the alarm fires on 3 of 4 five-minute periods with such a line."""
    plan = plan_of(stack)
    (cluster,) = plan.of_type("aws:eks/cluster:Cluster")
    assert "scheduler" in cluster["inputs"]["enabledClusterLogTypes"]
    filters = [f for f in plan.of_type("aws:cloudwatch/logMetricFilter:LogMetricFilter")
               if f["inputs"]["metricTransformation"]["name"] == UNSCHEDULABLE_METRIC]  # the training ones: test_dashboards.py
    assert {f["inputs"]["logGroupName"] for f in filters} == {f"/aws/eks/gpu-training-{stack}/cluster"}
    assert sorted(f["inputs"]["pattern"] for f in filters) == sorted(unschedulable_filter_patterns().values())
    assert {f["inputs"]["metricTransformation"]["name"] for f in filters} == {UNSCHEDULABLE_METRIC}
    (alarm,) = [a["inputs"] for a in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
                if a["inputs"].get("metricName") == UNSCHEDULABLE_METRIC]
    assert alarm["namespace"] == filters[0]["inputs"]["metricTransformation"]["namespace"]
    assert "dimensions" not in alarm or not alarm["dimensions"]
    assert (alarm["statistic"], alarm["threshold"], alarm["evaluationPeriods"], alarm["datapointsToAlarm"]) == (
        "Sum", 1, 4, 3)


def matches(pattern: str, line: str) -> bool:
    """CloudWatch Logs term matching as the filters use it: every "term" appears, no -"term" does."""
    terms = re.findall(r'(-?)"([^"]*)"', pattern)
    return all((term in line) != bool(exclude) for exclude, term in terms)


TRAINER = f'pod="training-prod/pretrain-p5-{REPLICATED_JOB}-0-1-x7k2q"'
TEAM_TRAINER = f'pod="team-vision/vision-finetune-{REPLICATED_JOB}-0-0-b9zpl"'
SCHEDULER = 'I1201 10:00:00.000000 1 schedule_one.go:1055] "Unable to schedule pod; no fit; waiting" '


@pytest.mark.parametrize(("line", "counted"), [
    # the failure: the pool's nodes have the GPUs free, not the CPU (or memory)
    (SCHEDULER + TRAINER + ' err="0/4 nodes are available: 2 Insufficient cpu, 2 node(s) didn\'t match '
     'Pod\'s node affinity/selector."', True),
    (SCHEDULER + TEAM_TRAINER + ' err="0/3 nodes are available: 1 Insufficient memory, 2 node(s) had untolerated '
     'taint."', True),
    # a full node of the pool (its GPUs taken too): the gang waits for new nodes, which is normal
    (SCHEDULER + TRAINER + ' err="0/4 nodes are available: 2 Insufficient cpu, 2 Insufficient memory, '
     '2 Insufficient nvidia.com/gpu."', False),
    # no node of the pool yet (the autoscaler is adding them)
    (SCHEDULER + TRAINER + ' err="0/2 nodes are available: 2 node(s) didn\'t match Pod\'s node affinity/selector."',
     False),
    # not a trainer pod
    (SCHEDULER + 'pod="kube-system/coredns-5d78c9869d-abcde" err="0/1 nodes are available: 1 Insufficient cpu."', False),
    # the pod got its node
    ('I1201 10:00:05.000000 1 schedule_one.go:300] "Successfully bound pod to node" ' + TRAINER + ' node="ip-10-0-0-1"',
     False),
])
def test_the_filters_count_a_trainer_that_fits_no_node_for_cpu_or_memory(line, counted):
    assert any(matches(p, line) for p in unschedulable_filter_patterns().values()) == counted
