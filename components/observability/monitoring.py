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
  - any node in a failed condition;
  - on stacks with EFA pools, EFA devices dropping received packets (`node_efa_rx_dropped`, the
    one EFA error counter Container Insights publishes);
  - a gang Kueue requeued after a PodsReady timeout (start or recovery), read from Kueue's own log
    (observability/kueue_watch.py);
  - a training pod that stays unschedulable for lack of CPU or memory on nodes that have its GPUs
    (a metric filter on the kube-scheduler's log: Container Insights counts only pods bound to a
    node, so an unscheduled pod never shows in its `pod_status_pending`).
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
from components.observability.dashboards import (
    DashboardScope,
    create_dashboard,
    dashboard_name_of,
    dashboard_url,
    environment_panels,
)
from components.observability.kueue_watch import create_kueue_watch
from components.observability.training_metrics import (
    UNSCHEDULABLE_METRIC,
    WatchedJobs,
    create_job_alarms,
    create_metric_filters,
    metrics_namespace_of,
)
from components.workload.multikueue import (
    KUEUE_NAMESPACE,
    RENEWED_METRIC,
    ROTATION,
    TOKEN_ALARM_PERIOD_SECONDS,
    renewed_filter_pattern,
)
from components.workload.training_job import REPLICATED_JOB

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
# EFA metrics need no switch: Container Insights with enhanced observability collects them from
# add-on v1.5.2-eksbuild.1 (agent 1.300037.0) wherever the EFA device plugin runs, unless the agent
# config sets `accelerated_compute_metrics: false` (CloudWatch User Guide,
# Container-Insights-metrics-enhanced-EKS, "AWS Elastic Fabric Adapter (EFA) metrics"). Of its
# EFA metrics only `node_efa_rx_dropped` counts errors ("packets that were received and then
# dropped", Count/Second); the rest are byte rates. Sustained drops mean a congested or faulty
# fabric path: NCCL over EFA retransmits, and every step waits for the slowest rank.
EFA_MIN_ADDON_VERSION = (1, 5, 2)
EFA_DROP_PERIODS = 3  # 15 min: a burst under congestion is not an incident, a quarter-hour is

# The kube-scheduler logs every pod no node can take, with the per-node reasons:
#   "Unable to schedule pod; no fit; waiting" pod="training-prod/pretrain-p5-node-0-0-x7k2q"
#   err="0/4 nodes are available: 2 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector..."
# (kubernetes pkg/scheduler/schedule_one.go handleSchedulingFailure, klog V(2); EKS's scheduler log,
# which the cluster enables (cluster/control_plane.py), carries it: aws-samples/eks-workshop-v2@16e1382
# website/docs/observability/opensearch/control-plane-logs.md). The pod's "-node-0-" names a trainer
# pod of any namespace: <jobset>-<replicated job>-<job index>-<pod index>-<suffix> (the random suffix
# has no 0). A line without "Insufficient nvidia.com/gpu" and with "Insufficient cpu" (or memory)
# means the nodes that rejected it had its GPUs free: the whole-node pod asks more than the node
# has left, which the sizing margin (facts/node_sizing.py) is there to prevent. Every scheduling
# attempt logs again, and an unschedulable pod is retried at least every 5 min
# (podMaxInUnschedulablePodsDuration), so the alarm asks 3 of 4 five-minute periods: 15-20 min.
UNSCHEDULABLE_LINE = "Unable to schedule pod; no fit; waiting"
TRAINING_POD_TERM = f"-{REPLICATED_JOB}-0-"
UNSCHEDULABLE_PERIODS, UNSCHEDULABLE_DATAPOINTS = 4, 3


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
    datapoints: int | None = None
    """Breaching periods out of `periods` that raise the alarm (None: all of them)."""
    namespace: str = METRICS_NAMESPACE
    cluster_dimension: bool = True
    """Container Insights metrics carry ClusterName; a log metric filter's metric has no dimension."""


def unschedulable_filter_patterns() -> dict[str, str]:
    """CloudWatch Logs filter patterns (all quoted terms must match, a -"term" must not) per resource."""
    return {resource: f'"{UNSCHEDULABLE_LINE}" "{TRAINING_POD_TERM}" "Insufficient {resource}" '
                      '-"Insufficient nvidia.com/gpu"' for resource in ("cpu", "memory")}


def metrics_namespace(cluster_name: str) -> str:
    """Where the stack's log metric filters publish (one namespace per cluster)."""
    return metrics_namespace_of(cluster_name)


def alarm_specs(config: ObservabilityConfig, *, cluster_name: str, efa: bool) -> list[AlarmSpec]:
    return [*_container_insights_alarms(config), *(_efa_alarms() if efa else []), AlarmSpec(
        "training-pod-unschedulable", UNSCHEDULABLE_METRIC, "Sum", "GreaterThanOrEqualToThreshold", 1,
        UNSCHEDULABLE_PERIODS, datapoints=UNSCHEDULABLE_DATAPOINTS, namespace=metrics_namespace(cluster_name),
        cluster_dimension=False,
        description="A training pod stayed unschedulable for 15-20 min although nodes of its pool had its GPUs free: "
                    "it asks more CPU or memory than they have left (kubectl describe pod: FailedScheduling "
                    "'Insufficient cpu'). The autoscaler keeps adding nodes it cannot use. Compare kubectl describe "
                    "node (Allocated resources) with the pod's requests: a DaemonSet the sizing table does not know "
                    "(components/facts/node_sizing.py) ate the margin; add its row, or lower the job's cpu/memoryGiB.")]


def _efa_alarms() -> list[AlarmSpec]:
    return [AlarmSpec(
        "efa-rx-dropped", "node_efa_rx_dropped", "Maximum", "GreaterThanThreshold", 0, EFA_DROP_PERIODS,
        f"EFA devices of a node dropped received packets for {EFA_DROP_PERIODS * PERIOD_SECONDS // 60} min "
        "(Container Insights node_efa_rx_dropped): NCCL retransmits and every step waits for it. Find the node "
        "(dimension NodeName), check its EFA devices (fi_info -p efa, the NCCL log's NIC count) and the other "
        "jobs on the fabric; cordon and replace it if it persists.")]


def _container_insights_alarms(config: ObservabilityConfig) -> list[AlarmSpec]:
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
    control_plane_log_group: aws.cloudwatch.LogGroup
    """The EKS control plane's log group: the scheduler's log, read by the unschedulable-pod filter."""
    region: str = ""
    """Where the dashboard's metrics are (its widgets name the Region)."""
    watched: WatchedJobs | None = None
    """The environment's own training jobs: per-job alarms and dashboard widgets."""
    efa: bool = False
    """The stack has EFA pools: alarm on EFA packet drops, EFA widgets."""
    multikueue_workers: tuple[str, ...] = ()
    """A MultiKueue manager's worker stacks: an alarm each when its token was not renewed."""


class Observability(pulumi.ComponentResource):
    topic: aws.sns.Topic
    application_log_group: aws.cloudwatch.LogGroup
    """Container Insights' application logs: every container's stdout (and the metric filters on it)."""
    dashboard: aws.cloudwatch.Dashboard
    dashboard_url: str

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:observability:Observability", name, None, opts)
        self._name, self._args = name, args
        child = pulumi.ResourceOptions(parent=self)
        retention = args.config.log_group_retention_days
        # Fluent Bit and the agent would create missing groups themselves: unencrypted, kept forever.
        # checkov CKV_AWS_338 (a year's retention) is unmet for the application and performance
        # groups, and for every group in dev and staging: retention is chosen per group
        # (docs/upgrading-and-pins.md, "Security checks we deliberately do not meet").
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
        self.application_log_group = log_groups[LOG_GROUPS.index("application")]
        self.topic = self._create_topic()
        alarms = self._create_alarms()
        create_metric_filters(name, log_group=self.application_log_group, name_prefix=args.name_prefix,
                              metrics_namespace=metrics_namespace(args.cluster_name), parent=self)
        alarms += self._create_job_alarms()
        alarms += self._create_token_alarms()
        alarms.append(create_kueue_watch(f"{name}-kueue", log_group=self.application_log_group,
                                         name_prefix=args.name_prefix, metrics_namespace=metrics_namespace(args.cluster_name),
                                         topic_arn=self.topic.arn, parent=self))
        self._create_dashboard(alarms)
        self.register_outputs({"alertTopicArn": self.topic.arn, "dashboardUrl": self.dashboard_url})

    def _create_job_alarms(self) -> list[aws.cloudwatch.MetricAlarm]:
        args = self._args
        if args.watched is None:
            return []
        return create_job_alarms(f"{self._name}-job", args.watched, config=args.config, cluster_name=args.cluster_name,
                                 name_prefix=args.name_prefix, topic_arn=self.topic.arn,
                                 opts=pulumi.ResourceOptions(parent=self))

    def _create_token_alarms(self) -> list[aws.cloudwatch.MetricAlarm]:
        """A worker whose token was not renewed for a token's lifetime is about to be lost to Kueue
        (the rotation CronJob's renewal lines: workload/multikueue.py)."""
        args, child = self._args, pulumi.ResourceOptions(parent=self)
        if not args.multikueue_workers:
            return []
        renewed = aws.cloudwatch.LogMetricFilter(
            f"{self._name}-kubeconfig-renewed", name=f"{args.name_prefix}-multikueue-kubeconfig-renewed",
            log_group_name=self.application_log_group.name, pattern=renewed_filter_pattern(),
            metric_transformation=aws.cloudwatch.LogMetricFilterMetricTransformationArgs(
                name=RENEWED_METRIC, namespace=metrics_namespace(args.cluster_name), value="1",
                dimensions={"Worker": "$.log_processed.worker"}),
            opts=child)
        return [aws.cloudwatch.MetricAlarm(
            f"{self._name}-multikueue-token-{worker}", name=f"{args.name_prefix}-multikueue-token-{worker}",
            alarm_description=(f"MultiKueue: no new token for worker {worker} in 15 minutes: its token expires and "
                               "Kueue loses the worker (15 more minutes, then its jobs are dispatched again). "
                               f"kubectl -n {KUEUE_NAMESPACE} get jobs,pods -l app.kubernetes.io/name={ROTATION}"),
            namespace=metrics_namespace(args.cluster_name), metric_name=RENEWED_METRIC, dimensions={"Worker": worker},
            statistic="Sum", period=TOKEN_ALARM_PERIOD_SECONDS, evaluation_periods=1,
            comparison_operator="LessThanThreshold", threshold=1,
            treat_missing_data="breaching",  # no renewal line at all is the failure itself
            alarm_actions=[self.topic.arn], ok_actions=[self.topic.arn],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[renewed])) for worker in args.multikueue_workers]

    def _create_dashboard(self, alarms: list[aws.cloudwatch.MetricAlarm]) -> None:
        args = self._args
        watched = args.watched
        scope = DashboardScope(region=args.region, cluster_name=args.cluster_name,
                               metrics_namespace=metrics_namespace(args.cluster_name),
                               jobs_namespace=watched.namespace if watched else "", team_only=False,
                               jobs=tuple(watched.jobs) if watched else (), alarm_arns=())
        name = dashboard_name_of(args.name_prefix)
        self.dashboard = create_dashboard(
            f"{self._name}-dashboard", dashboard_name=name, scope=scope, alarm_arns=[a.arn for a in alarms],
            panels=lambda s: environment_panels(s, efa=args.efa, title=f"{args.name_prefix}: GPU training"),
            opts=pulumi.ResourceOptions(parent=self))
        self.dashboard_url = dashboard_url(args.region, name)

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

    def _create_unschedulable_filters(self) -> list[aws.cloudwatch.LogMetricFilter]:
        args = self._args
        return [aws.cloudwatch.LogMetricFilter(
            f"{self._name}-training-pod-unschedulable-{resource}",
            name=f"{args.name_prefix}-training-pod-unschedulable-{resource}",
            log_group_name=args.control_plane_log_group.name,
            pattern=pattern,
            # Both filters count into one metric: a line naming both resources counts twice, which
            # the alarm (>= 1 per period) does not mind.
            metric_transformation=aws.cloudwatch.LogMetricFilterMetricTransformationArgs(
                name=UNSCHEDULABLE_METRIC, namespace=metrics_namespace(args.cluster_name), value="1",
                default_value="0"),
            opts=pulumi.ResourceOptions(parent=self),
        ) for resource, pattern in unschedulable_filter_patterns().items()]

    def _create_alarms(self) -> list[aws.cloudwatch.MetricAlarm]:
        args = self._args
        filters = self._create_unschedulable_filters()
        return [
            aws.cloudwatch.MetricAlarm(
                f"{self._name}-{spec.name}",
                name=f"{args.name_prefix}-{spec.name}",
                alarm_description=spec.description,
                namespace=spec.namespace,
                metric_name=spec.metric,
                dimensions={"ClusterName": args.cluster_name} if spec.cluster_dimension else None,
                statistic=spec.statistic,
                period=PERIOD_SECONDS,
                evaluation_periods=spec.periods,
                datapoints_to_alarm=spec.datapoints,
                comparison_operator=spec.comparison,
                threshold=spec.threshold,
                # GPU pools at zero nodes publish nothing: that is not an incident.
                treat_missing_data="notBreaching",
                alarm_actions=[self.topic.arn],
                ok_actions=[self.topic.arn],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[] if spec.cluster_dimension else filters),
            ) for spec in alarm_specs(args.config, cluster_name=args.cluster_name, efa=args.efa)]
