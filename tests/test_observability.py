"""Container Insights, log retention and the training alarms, per platform stack."""

import pytest
from stack_configs import DELETE, PLATFORM_STACKS, PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.facts.eks_versions import ADDON_VERSIONS


def config_of(stack):
    return load_stack_config(raw_config(stack), project=PROJECT, stack=stack)


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
    alarms = {a["inputs"]["metricName"]: a["inputs"] for a in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")}
    idle, memory, failed = alarms["node_gpu_utilization"], alarms["node_gpu_memory_utilization"], alarms["cluster_failed_node_count"]
    assert (idle["statistic"], idle["comparisonOperator"], idle["threshold"]) == (
        "Minimum", "LessThanThreshold", config.observability.gpu_idle_percent)
    assert idle["period"] * idle["evaluationPeriods"] == config.observability.gpu_idle_minutes * 60
    assert (memory["statistic"], memory["threshold"]) == ("Maximum", config.observability.gpu_memory_percent)
    assert failed["threshold"] == 0
    for alarm in alarms.values():
        assert alarm["namespace"] == "ContainerInsights"
        assert alarm["dimensions"] == {"ClusterName": f"gpu-training-{stack}"}
        (action,) = alarm["alarmActions"]
        assert action.endswith("topic/observability-alerts") and alarm["okActions"] == [action]
        assert alarm["treatMissingData"] == "notBreaching"
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
