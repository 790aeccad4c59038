"""Watching training: Container Insights with GPU metrics, logs, and the training alarms.

- The `amazon-cloudwatch-observability` EKS add-on runs the CloudWatch agent (enhanced Container
  Insights, NVIDIA GPU metrics through DCGM) and Fluent Bit, which ships every container's
  stdout/stderr to CloudWatch Logs. Its role (Pod Identity) may only publish metrics and logs.
- Its log groups are created here first, so they have a retention period (per group: see
  ObservabilityConfig.log_group_retention_days) and the environment's CloudWatch Logs key.
- Its dcgm-exporter stays on: the GPU alarms read its metrics. It runs beside the node
  monitoring agent's DCGM host engine (cluster/addons.py; docs/upgrading-and-pins.md).
- Alarms (and the stack budgets, observability/budget.py) -> an encrypted SNS topic -> e-mail / SMS:
  - a GPU node below `gpuIdlePercent` utilisation for `gpuIdleMinutes` (data-loading bottleneck,
    or GPUs paid for while a gang waits);
  - GPU memory above `gpuMemoryPercent` on some node (the next step may OOM);
  - any node in a failed condition.
  Container Insights publishes each node's value under the `ClusterName` dimension too, so
  Minimum / Maximum over it are the least / most loaded node. No GPU node: no data, no alarm.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common import iam
from components.common.eks_addons import managed_addon
from components.common.kms import customer_key
from components.common.partition import provider_partition
from components.config.observability import ObservabilityConfig
from components.identity import policies

ADDON = "amazon-cloudwatch-observability"
AGENT_NAMESPACE = "amazon-cloudwatch"
AGENT_SERVICE_ACCOUNT = "cloudwatch-agent"
LOG_GROUPS = ("application", "dataplane", "host", "performance")
PERIOD_SECONDS = 300
METRICS_NAMESPACE = "ContainerInsights"
# Explicit although it is the chart's default (values.yaml `dcgmExporter.enabled: true`): the
# gpu-idle and gpu-memory-full alarms read node_gpu_utilization and node_gpu_memory_utilization,
# which exist only while it runs. `dcgmExporter` is an add-on schema key (v6.x).
CLOUDWATCH_ADDON_CONFIGURATION = {"dcgmExporter": {"enabled": True}}


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm on a cluster-wide Container Insights metric."""

    name: str
    metric: str
    statistic: str
    comparison: str
    threshold: float
    periods: int
    description: str


def alarm_specs(config: ObservabilityConfig) -> list[AlarmSpec]:
    return [
        AlarmSpec("gpu-idle", "node_gpu_utilization", "Minimum", "LessThanThreshold", config.gpu_idle_percent,
                  config.gpu_idle_minutes * 60 // PERIOD_SECONDS,
                  f"A GPU node stayed below {config.gpu_idle_percent}% utilisation for {config.gpu_idle_minutes} min: "
                  "check data loading (prefetch, shard format) or a gang waiting for the rest of its nodes."),
        AlarmSpec("gpu-memory-full", "node_gpu_memory_utilization", "Maximum", "GreaterThanThreshold",
                  config.gpu_memory_percent, 2,
                  f"GPU memory above {config.gpu_memory_percent}% on a node: the next step may run out of memory "
                  "(lower the batch size, free graphs)."),
        AlarmSpec("node-failed", "cluster_failed_node_count", "Maximum", "GreaterThanThreshold", 0, 2,
                  "A node reports a failed condition; node auto-repair replaces nodes with failed GPUs."),
    ]


def alerts_key_policy(account_id: str, partition: str) -> str:
    """The account root (as for every key) plus CloudWatch alarms and AWS Budgets, which must
    encrypt what they publish to the topic: AWS's managed SNS key does not let them."""
    root = json.loads(iam.key_policy(account_id, partition))["Statement"]
    return iam.policy(*root, *({
        "Sid": sid,
        "Effect": "Allow",
        "Principal": {"Service": service},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
    } for sid, service in (("CloudWatchAlarmsPublish", "cloudwatch.amazonaws.com"),
                           ("BudgetsPublish", "budgets.amazonaws.com"))))


# SNS's own default topic policy: the owning account's principals may use the topic.
_TOPIC_OWNER_ACTIONS = ["SNS:AddPermission", "SNS:DeleteTopic", "SNS:GetTopicAttributes",
                        "SNS:ListSubscriptionsByTopic", "SNS:Publish", "SNS:RemovePermission",
                        "SNS:SetTopicAttributes", "SNS:Subscribe"]


def alerts_topic_policy(topic_arn: str, account_id: str, partition: str) -> str:
    """SNS's default policy plus AWS Budgets, which may publish only with an explicit grant
    (docs.aws.amazon.com/cost-management/latest/userguide/budgets-sns-policy.html), and only for
    budgets of this account: every stack's budget, team stacks' included, alerts here."""
    return iam.policy(
        {"Sid": "AccountOwnerUses", "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": _TOPIC_OWNER_ACTIONS,
         "Resource": topic_arn, "Condition": {"StringEquals": {"AWS:SourceOwner": account_id}}},
        {"Sid": "BudgetsPublish", "Effect": "Allow", "Principal": {"Service": "budgets.amazonaws.com"},
         "Action": "SNS:Publish", "Resource": topic_arn,
         "Condition": {"StringEquals": {"aws:SourceAccount": account_id},
                       "ArnLike": {"aws:SourceArn": f"arn:{partition}:budgets::{account_id}:*"}}},
    )


@dataclass(frozen=True)
class ObservabilityArgs:
    config: ObservabilityConfig
    """Alarm thresholds, alert recipients and log group retention."""
    cluster_name: str
    """Names the Container Insights log groups; the agent's role trusts only this cluster's Pod Identity."""
    cluster: aws.eks.Cluster
    """The cluster the CloudWatch Observability add-on is installed on."""
    kubernetes_version: str
    """Picks the add-on build pinned in eks_versions.ADDON_VERSIONS."""
    name_prefix: str
    """Names the alarms, the alert topic and its key alias."""
    account_id: pulumi.Input[str]
    """The account the alert key, topic and agent role trust."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the add-on: the node groups its agents run on."""
    logs_key_arn: pulumi.Input[str]
    """Encrypts the Container Insights log groups (the environment's CloudWatch Logs key)."""


class Observability(pulumi.ComponentResource):
    topic: aws.sns.Topic

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:observability:Observability", name, None, opts)
        self._name, self._args = name, args
        child = pulumi.ResourceOptions(parent=self)
        retention = args.config.log_group_retention_days
        # Fluent Bit and the agent would create missing groups themselves: unencrypted, kept forever.
        log_groups = [
            aws.cloudwatch.LogGroup(f"{name}-logs-{kind}", name=f"/aws/containerinsights/{args.cluster_name}/{kind}",
                                    retention_in_days=retention[kind], kms_key_id=args.logs_key_arn, opts=child)
            for kind in LOG_GROUPS
        ]
        role = aws.iam.Role(
            f"{name}-agent-role",
            description="CloudWatch agent and Fluent Bit: publish metrics and logs",
            assume_role_policy=pulumi.Output.from_input(args.account_id).apply(
                lambda account: policies.workload_trust_policy(
                    account, cluster_name=args.cluster_name, namespace=AGENT_NAMESPACE,
                    service_account=AGENT_SERVICE_ACCOUNT)),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(f"{name}-agent-policy", role=role.name,
                                     policy_arn=provider_partition(self).apply(
                                         lambda partition: iam.managed_policy_arn(partition, "CloudWatchAgentServerPolicy")),
                                     opts=child)
        managed_addon(
            f"{name}-addon", cluster_name=args.cluster.name, addon_name=ADDON, kubernetes_version=args.kubernetes_version,
            configuration_values=json.dumps(CLOUDWATCH_ADDON_CONFIGURATION),
            pod_identity_associations=[aws.eks.AddonPodIdentityAssociationArgs(
                role_arn=role.arn, service_account=AGENT_SERVICE_ACCOUNT)],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*log_groups, *args.depends_on]),
        )
        self.topic = self._create_topic()
        self._create_alarms()
        self.register_outputs({"alertTopicArn": self.topic.arn})

    def _create_topic(self) -> aws.sns.Topic:
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        key = customer_key(f"{self._name}-alerts-key", alias=f"{args.name_prefix}-alerts",
                           description=f"{args.name_prefix}: alarm notifications", account_id=args.account_id,
                           parent=self, policy=alerts_key_policy)
        topic = aws.sns.Topic(f"{self._name}-alerts", name=f"{args.name_prefix}-training-alerts",
                              kms_master_key_id=key.arn, opts=child)
        aws.sns.TopicPolicy(f"{self._name}-alerts-policy", arn=topic.arn, opts=child,
                            policy=pulumi.Output.all(topic.arn, args.account_id, provider_partition(self)).apply(
                                lambda v: alerts_topic_policy(v[0], v[1], v[2])))
        recipients = [("email", address) for address in args.config.alert_emails]
        recipients += [("sms", number) for number in args.config.alert_sms]
        for protocol, endpoint in recipients:
            # Named by a digest of the address: unique per recipient, and stable when the list is reordered.
            digest = hashlib.sha256(endpoint.lower().encode()).hexdigest()[:12]
            aws.sns.TopicSubscription(f"{self._name}-{protocol}-{digest}", topic=topic.arn, protocol=protocol,
                                      endpoint=endpoint, opts=child)
        return topic

    def _create_alarms(self) -> None:
        args = self._args
        for spec in alarm_specs(args.config):
            aws.cloudwatch.MetricAlarm(
                f"{self._name}-{spec.name}",
                name=f"{args.name_prefix}-{spec.name}",
                alarm_description=spec.description,
                namespace=METRICS_NAMESPACE,
                metric_name=spec.metric,
                dimensions={"ClusterName": args.cluster_name},
                statistic=spec.statistic,
                period=PERIOD_SECONDS,
                evaluation_periods=spec.periods,
                comparison_operator=spec.comparison,
                threshold=spec.threshold,
                # GPU pools at zero nodes publish nothing: that is not an incident.
                treat_missing_data="notBreaching",
                alarm_actions=[self.topic.arn],
                ok_actions=[self.topic.arn],
                opts=pulumi.ResourceOptions(parent=self),
            )
