"""Requeued and evicted gangs, read from the Kueue controller's own log lines.

Kueue's Prometheus metrics (`kueue_evicted_workloads_total`, requeue counts) are not in CloudWatch:
the CloudWatch agent of the add-on scrapes no Kueue endpoint. Its controller's log is: the add-on's
Fluent Bit ships every container's stdout/stderr (the kueue-system pods' included) to
/aws/containerinsights/<cluster>/application and parses a JSON line into `log_processed`
(training_metrics.py). Kueue logs JSON: controller-runtime's zap options outside development mode
take the JSON encoder with zap's production encoder config (message key `msg`;
controller-runtime pkg/log/zap/zap.go addDefaults, newJSONEncoder), and Kueue keeps those defaults
(kueue v0.19.2 cmd/kueue/main.go: zap.Options with only the time encoder and caller set). Its chart
runs the manager with `--zap-log-level=2` (kueue v0.19.2 charts/kueue/values.yaml
controllerManager.manager.logLevel: 2; this platform does not change it), so `V(2)` lines are
written and `V(3)` ones are not.

Two lines of kueue v0.19.2, both V(2):

- pkg/controller/core/workload_controller.go:1256 (reconcileNotReadyWorkload), logged once per
  requeue of an admitted workload whose pods were not all Ready within `waitForPodsReady.timeout`
  (a start) or `recoveryTimeout` (a running gang that lost a pod), right before Kueue evicts it,
  bumps `requeueState.count` and releases its quota:
  "Start the eviction of the workload due to exceeding the PodsReady timeout".
  Each one costs the run up to an hour and counts toward `backoffLimitCount` (5, controllers.py):
  after that Kueue deactivates the workload and the run stops for good (triggerDeactivation,
  :1283). The reconciler runs on the elected replica only (leader_aware_reconciler.go), so each
  requeue is one line. It is an alarm.
- pkg/controller/core/workload_controller.go:1393 (the Update event handler), logged on every
  change of a Workload with `status` and, on a change of status, `prevStatus`
  (pkg/workload/workload.go Status: pending, quotaReserved, admitted, finished). `admitted` to
  `pending` is an admitted workload that lost its admission: evicted for any reason (a PodsReady
  timeout, a preemption by a queue reclaiming its lent quota, a node failure, a stopped queue).
  The event handlers run on both Kueue replicas (NeedLeaderElection false, :1632), so each
  eviction is counted once per running replica (2). Preemption of a borrowing gang is the
  queues' design, not an incident: this one is a dashboard line, not an alarm.

What to do when the alarm fires: docs/operations.md "A gang was requeued".
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.workload.multikueue import KUEUE_NAMESPACE

REQUEUED_METRIC = "KueueWorkloadRequeued"
"""Requeues after a PodsReady timeout (start or recovery), one per requeue."""
EVICTED_METRIC = "KueueWorkloadLostAdmission"
"""Admitted workloads that lost their admission (any eviction), once per Kueue replica."""
KUEUE_REPLICAS = 2  # controllers.py: controllerManager.replicas
PODS_READY_TIMEOUT_LINE = "Start the eviction of the workload due to exceeding the PodsReady timeout"
UPDATE_EVENT_LINE = "Workload update event"
REQUEUE_ALARM_PERIOD_SECONDS = 300
FROM_KUEUE = f'$.kubernetes.namespace_name = "{KUEUE_NAMESPACE}"'


def requeued_filter_pattern() -> str:
    return f'{{ {FROM_KUEUE} && $.log_processed.msg = "{PODS_READY_TIMEOUT_LINE}" }}'


def evicted_filter_pattern() -> str:
    return (f'{{ {FROM_KUEUE} && $.log_processed.msg = "{UPDATE_EVENT_LINE}" && '
            '$.log_processed.prevStatus = "admitted" && $.log_processed.status = "pending" }')


def create_kueue_watch(name: str, *, log_group: aws.cloudwatch.LogGroup, name_prefix: str, metrics_namespace: str,
                       topic_arn: pulumi.Input[str], parent: pulumi.Resource) -> aws.cloudwatch.MetricAlarm:
    """The two metric filters on the application log group and the requeue alarm."""
    child = pulumi.ResourceOptions(parent=parent)
    filters = [aws.cloudwatch.LogMetricFilter(
        f"{name}-{suffix}", name=f"{name_prefix}-{suffix}", log_group_name=log_group.name, pattern=pattern,
        metric_transformation=aws.cloudwatch.LogMetricFilterMetricTransformationArgs(
            name=metric, namespace=metrics_namespace, value="1", default_value="0"),
        opts=child) for suffix, metric, pattern in (
            ("kueue-workload-requeued", REQUEUED_METRIC, requeued_filter_pattern()),
            ("kueue-workload-lost-admission", EVICTED_METRIC, evicted_filter_pattern()))]
    return aws.cloudwatch.MetricAlarm(
        f"{name}-kueue-workload-requeued", name=f"{name_prefix}-kueue-workload-requeued",
        alarm_description=(
            "Kueue requeued a gang: its pods were not all Ready within waitForPodsReady.timeout (a start) or "
            "recoveryTimeout (a running gang that lost a pod or node). It waits for quota again, and after 5 "
            "requeues Kueue deactivates it and the run stops. Find it: kubectl get workloads -A -o custom-columns="
            "NAME:.metadata.name,NS:.metadata.namespace,REQUEUES:.status.requeueState.count; "
            "then docs/operations.md 'A gang was requeued'."),
        namespace=metrics_namespace, metric_name=REQUEUED_METRIC, statistic="Sum",
        period=REQUEUE_ALARM_PERIOD_SECONDS, evaluation_periods=1, comparison_operator="GreaterThanOrEqualToThreshold",
        threshold=1, treat_missing_data="notBreaching",  # no line: no requeue
        alarm_actions=[topic_arn], ok_actions=[topic_arn],
        opts=pulumi.ResourceOptions(parent=parent, depends_on=filters))
