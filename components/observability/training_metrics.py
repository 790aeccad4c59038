"""Training metrics from the launcher's JSON log lines, and the per-job training alarms.

How a line becomes a metric:
- The trainer's rank 0 and every pod's launcher write one JSON object per line on stdout
  (trainer/launcher/progress.py): `{"ts": .., "event": "step", "job": "<TRAIN_JOB_ID>", "step": 120,
  "loss": 0.61, "steps_per_s": 2.1, "samples_per_s": 5120.4}`; `loss` lines from the integrations,
  `checkpoint_saved` (step, duration_s), `launcher_start` (restart_attempt), `fabric_check` and
  `fabric_status` (verdict). A NaN or infinite loss is written as the string "nan", "inf" or "-inf".
- The CloudWatch Observability add-on's Fluent Bit ships every container's stdout to
  /aws/containerinsights/<cluster>/application, parsing a JSON line into `log_processed` and
  adding `kubernetes.namespace_name` (its kubernetes filter: `Merge_Log On`, `Merge_Log_Key
  log_processed`, `Labels Off`; aws-observability/helm-charts
  charts/amazon-cloudwatch-observability/values.yaml, containerLogs.fluentBit.config
  application-log.conf).
- One metric filter per metric on that log group, per environment (the platform stack): team
  jobs log to the same group, and a team stack's alarms and dashboard read the same metrics.

Dimensions: `Namespace` (the team: team-<team>, or the environment's own training namespace) and
`Job` (the job's name, unique in its namespace). A filter may publish at most three dimensions,
taken from fields of the JSON event, and every distinct value pair is a separate custom metric,
billed as one; CloudWatch Logs disables a filter that makes 1,000 distinct pairs within an hour
(docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_MetricTransformation.html). Both
dimensions are bounded by the stack files: a pod or node name (a new value every restart) would
not be. A filter with dimensions sets no default value, so a metric has data only when its event
was logged: missing data means "not logged", and the alarms say how they treat it.

Filter pattern syntax (docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html):
`{ $.a.b = "text" }` matches a string (`*` is a wildcard), `{ $.a.b >= 0 }` a number only, `&&` and
`||` combine them in parentheses. A metric's value may name a numeric field of the matched event.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.config import NodePoolConfig
from components.config.observability import ObservabilityConfig
from components.config.storage import StorageConfig
from components.config.training import JobConfig
from components.facts.file_systems import flush_seconds
from components.workload.sizing import job_mtbf_seconds
from components.workload.viewer import VIEWER_REPLICAS

LOG_FIELDS = "$.log_processed"
"""Where Fluent Bit puts the parsed JSON line (Merge_Log_Key)."""
NAMESPACE_FIELD = "$.kubernetes.namespace_name"
JOB_DIMENSION, NAMESPACE_DIMENSION = "Job", "Namespace"
DIMENSIONS = {NAMESPACE_DIMENSION: NAMESPACE_FIELD, JOB_DIMENSION: f"{LOG_FIELDS}.job"}
MAX_FILTER_DIMENSIONS = 3  # API_MetricTransformation: "as many as three dimensions"
MAX_FILTERS_PER_LOG_GROUP = 100  # PutMetricFilter: "The maximum number of metric filters ... is 100"
NOT_FINITE = ("nan", "inf", "-inf")  # str() of Python's non-finite floats (launcher/log_line.py _clean)
STEP_EVENTS = ("step", "loss")  # Progress.step and the integrations' Worker.log_loss
FABRIC_EVENTS = ("fabric_check", "fabric_status")
RUN_STATUS_EVENT = "run_status"  # launcher/status_publisher.py
UNSCHEDULABLE_METRIC = "TrainingPodUnschedulableCpuMemory"
"""The kube-scheduler log's filter (monitoring.py): no dimension."""


@dataclass(frozen=True)
class TrainingMetric:
    """One metric a filter makes of the launcher's lines."""

    name: str
    events: tuple[str, ...]
    value: str | None
    """The numeric field published as the value; None: 1 per matching line."""
    unit: str
    description: str
    match: str = ""
    """A further condition on the line (the pattern's own syntax)."""


TRAINING_METRICS = (
    TrainingMetric("TrainingStep", STEP_EVENTS, "step", "None", "the step of each step/loss line (SampleCount: lines logged)"),
    TrainingMetric("TrainingLoss", STEP_EVENTS, "loss", "None", "the loss (finite values only)"),
    TrainingMetric("TrainingLossNotFinite", STEP_EVENTS, None, "Count", "a NaN or infinite loss",
                   match="(" + " || ".join(f'{LOG_FIELDS}.loss = "{text}"' for text in NOT_FINITE) + ")"),
    TrainingMetric("TrainingSamplesPerSecond", ("step",), "samples_per_s", "Count/Second", "samples per second, all ranks"),
    TrainingMetric("TrainingStepsPerSecond", ("step",), "steps_per_s", "Count/Second",
                   "optimizer steps per second (step time: its inverse)"),
    TrainingMetric("CheckpointSaved", ("checkpoint_saved",), None, "Count", "a committed checkpoint"),
    TrainingMetric("CheckpointStep", ("checkpoint_saved",), "step", "None", "the step a checkpoint holds"),
    TrainingMetric("CheckpointSaveSeconds", ("checkpoint_saved",), "duration_s", "Seconds",
                   "seconds the loop stood still for a save"),
    TrainingMetric("GangRestartAttempt", ("launcher_start",), "restart_attempt", "Count",
                   "the JobSet's restart count, as each pod's launcher starts"),
    TrainingMetric("FabricWrong", FABRIC_EVENTS, None, "Count", "NCCL chose another network than EFA",
                   match=f'{LOG_FIELDS}.verdict = "wrong"'),
    # From the launcher's own clock, once a minute on the pod of global rank 0 (launcher/run_status.py):
    # they keep coming while a loop hangs, and need no planned interval, so they watch any job.
    TrainingMetric("TrainingSecondsSinceStep", (RUN_STATUS_EVENT,), "since_step_s", "Seconds",
                   "seconds since rank 0's last step line, as its launcher counts"),
    TrainingMetric("CheckpointAgeSeconds", (RUN_STATUS_EVENT,), "checkpoint_age_s", "Seconds",
                   "seconds since the newest committed checkpoint (or the pod's start)"),
    TrainingMetric("CheckpointIntervalsSinceSave", (RUN_STATUS_EVENT,), "checkpoint_intervals", "None",
                   "that age in the intervals the job's checkpoint schedule aims at"),
)
METRICS = {metric.name: metric for metric in TRAINING_METRICS}


def filter_pattern(metric: TrainingMetric) -> str:
    """The CloudWatch Logs filter pattern for `metric`: its events, a job name, a numeric value."""
    events = " || ".join(f'{LOG_FIELDS}.event = "{event}"' for event in metric.events)
    clauses = [f"({events})" if len(metric.events) > 1 else events, f'{DIMENSIONS[JOB_DIMENSION]} = "*"']
    if metric.value is not None:
        field = f"{LOG_FIELDS}.{metric.value}"
        clauses.append(f"({field} >= 0 || {field} < 0)")  # numbers only: not null, not "nan"
    if metric.match:
        clauses.append(metric.match)
    return "{ " + " && ".join(clauses) + " }"


def metric_value(metric: TrainingMetric) -> str:
    return "1" if metric.value is None else f"{LOG_FIELDS}.{metric.value}"


# --------------------------------------------------------------------------- per-job alarms

EVALUATION_PERIOD_SECONDS = 300
# PutMetricAlarm: "An alarm's total current evaluation period can be no longer than one day, so
# this number multiplied by Period cannot be more than 86,400 seconds."
MAX_ALARM_WINDOW_SECONDS = 86_400
# The launcher's first guess of a checkpoint's cost before it has measured one
# (trainer/launcher/schedule.py CheckpointSchedule initial_cost_s).
LAUNCHER_INITIAL_COST_S = 30.0


def planned_checkpoint_interval_seconds(job: JobConfig, pool: NodePoolConfig, storage: StorageConfig, *,
                                        team: bool) -> int:
    """The interval the job checkpoints at: its checkpointIntervalSeconds, else the launcher's Young
    interval sqrt(2 C M) (trainer/launcher/schedule.py) with the MTBF the workload passes it
    (TRAIN_MTBF_S) and C the write time of checkpointGiB on its store, or the launcher's first guess."""
    if job.checkpoint_interval_seconds:
        return job.checkpoint_interval_seconds
    cost = LAUNCHER_INITIAL_COST_S
    if job.checkpoint_gib is not None:
        store = storage.checkpoint_store(nodes=job.nodes, ranks=job.total_gpus, writers=job.checkpoint_writers,
                                         checkpoint_gib=job.checkpoint_gib, lustre=not team)
        cost = max(cost, flush_seconds(job.checkpoint_gib, store.write_mb_s))
    return math.ceil(math.sqrt(2 * cost * job_mtbf_seconds(pool, job.nodes)))


@dataclass(frozen=True)
class JobAlarm:
    """One alarm on one job's metrics: `expression` over `inputs` (metric id -> (namespace, name,
    dimensions, statistic)), breaching at >= 1 in every one of `periods` periods."""

    name: str
    description: str
    expression: str
    inputs: dict[str, tuple[str, str, dict[str, str], str]]
    periods: int


def job_alarms(job: JobConfig, *, namespace: str, interval_s: int, config: ObservabilityConfig,
               metrics_namespace: str, cluster_name: str) -> list[JobAlarm]:
    dims = {NAMESPACE_DIMENSION: namespace, JOB_DIMENSION: job.name}

    def ours(name: str, stat: str) -> tuple[str, str, dict[str, str], str]:
        return metrics_namespace, name, dims, stat

    pods = ("ContainerInsights", "namespace_number_of_running_pods", {"ClusterName": cluster_name, "Namespace": namespace},
            "Maximum")
    late_window = min(config.checkpoint_late_factor * interval_s, MAX_ALARM_WINDOW_SECONDS)
    late_periods = max(1, math.ceil(late_window / EVALUATION_PERIOD_SECONDS))
    late_periods = min(late_periods, MAX_ALARM_WINDOW_SECONDS // EVALUATION_PERIOD_SECONDS)
    return [
        JobAlarm("loss-not-finite", f"Job {namespace}/{job.name} logged a NaN or infinite loss: the run diverged "
                 "(learning rate, bad batch, overflow in mixed precision). Its checkpoints after that step hold "
                 "the diverged weights: resume from an earlier one.",
                 "FILL(bad, 0)", {"bad": ours("TrainingLossNotFinite", "Sum")}, 1),
        # "While pods run": the namespace runs pods besides its always-on viewer (Container
        # Insights); without them (queued, finished, scaled to zero) no step is expected. A finished job in a namespace
        # whose other jobs run alarms too: remove it from the stack file once it has finished.
        JobAlarm("no-step", f"Job {namespace}/{job.name} logged no training step for {config.no_step_minutes} min while "
                 "its namespace runs pods: a hung collective, a dead data pipeline, or pods that restart before "
                 "their first step (kubectl -n <ns> get pods; the launcher's lines in the application log group).",
                 f"IF(FILL(pods, 0) > {VIEWER_REPLICAS} AND FILL(steps, 0) == 0, 1, 0)",
                 {"pods": pods, "steps": ours("TrainingStep", "SampleCount")},
                 config.no_step_minutes * 60 // EVALUATION_PERIOD_SECONDS),
        JobAlarm("no-checkpoint", f"Job {namespace}/{job.name} has stepped without committing a checkpoint for "
                 f"{late_window // 60} min ({config.checkpoint_late_factor} x its planned {interval_s} s interval): "
                 "saves fail, hang or are never due. A restart now loses all of that work; read its "
                 "checkpoint_saved lines and the file system's throughput.",
                 "IF(FILL(steps, 0) > 0 AND FILL(saves, 0) == 0, 1, 0)",
                 {"steps": ours("TrainingStep", "SampleCount"), "saves": ours("CheckpointSaved", "Sum")},
                 late_periods),
    ]


def alarm_name(name_prefix: str, namespace: str, job: str, alarm: str) -> str:
    return f"{name_prefix}-{namespace}-{job}-{alarm}"


# --------------------------------------------------------------------------- alarms on any job of a namespace

# Jobs no stack file names (submitted ad hoc with the job command) get no alarm of their own: one
# Metrics Insights alarm per namespace and kind watches every job, each job a contributor with its
# own state, and a job that appears later joins "when its corresponding metric becomes available"
# (docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Create_Metrics_Insights_Alarm.html: a
# multi-time-series query needs GROUP BY and ORDER BY). Limits (.../monitoring/alarm-limits.html):
# 200 such alarms per account and Region by default (three per training namespace here); only the
# last 3 hours of data are evaluated; at most 100 contributors in ALARM; PARTIAL_DATA past 500
# series or 10,000 matched metrics (one series per job here). Cost: CloudWatch bills a Metrics
# Insights alarm by the metrics its query analyses (aws.amazon.com/cloudwatch/pricing, Alarms), so
# about one alarm metric per running job and kind. The stack's own jobs are left out (WHERE
# Job != ...): their per-job alarms above watch them with their planned interval and pod count.
QUERY_MAX_CHARS = 2048  # AWS::CloudWatch::Alarm MetricDataQuery Expression: "Maximum: 2048"


@dataclass(frozen=True)
class NamespaceAlarm:
    """A Metrics Insights alarm over every job of a namespace: `function(metric)` per job >= threshold."""

    name: str
    description: str
    function: str
    metric: str
    threshold: float


def namespace_alarms(namespace: str, config: ObservabilityConfig) -> list[NamespaceAlarm]:
    where = (f"in namespace {namespace} (any job the stack file does not name, e.g. one submitted with "
             "`gpu-training job submit`; the alarm's contributors name the job)")
    return [
        NamespaceAlarm("loss-not-finite", f"A job {where} logged a NaN or infinite loss: the run diverged. Its "
                       "checkpoints after that step hold the diverged weights: resume from an earlier one.",
                       "SUM", "TrainingLossNotFinite", 1),
        NamespaceAlarm("no-step", f"A job {where} stepped, then logged no training step for {config.no_step_minutes} "
                       "min by its launcher's clock: a hung collective or a dead data pipeline "
                       "(kubectl -n <ns> get pods; the job's gpu-training/progress annotation).",
                       "MAX", "TrainingSecondsSinceStep", config.no_step_minutes * 60),
        NamespaceAlarm("no-checkpoint", f"A job {where} has committed no checkpoint for {config.checkpoint_late_factor} "
                       "x the interval its schedule aims at: saves fail, hang or are never due; a restart now "
                       "loses all of that work.",
                       "MAX", "CheckpointIntervalsSinceSave", config.checkpoint_late_factor),
    ]


def insights_query(alarm: NamespaceAlarm, *, metrics_namespace: str, namespace: str,
                   excluded_jobs: Sequence[str] = ()) -> str:
    """The alarm's query: one series per Job of `namespace`, the stack's own jobs left out (unless
    naming them all would pass the expression's length limit: then they are watched twice)."""
    where = [f"\"{NAMESPACE_DIMENSION}\" = '{namespace}'",
             *(f"\"{JOB_DIMENSION}\" != '{job}'" for job in sorted(excluded_jobs))]
    query = (f"SELECT {alarm.function}(\"{alarm.metric}\") "
             f"FROM SCHEMA(\"{metrics_namespace}\", \"{JOB_DIMENSION}\", \"{NAMESPACE_DIMENSION}\") "
             f"WHERE {' AND '.join(where)} GROUP BY \"{JOB_DIMENSION}\" ORDER BY {alarm.function}() DESC")
    if len(query) > QUERY_MAX_CHARS and excluded_jobs:
        return insights_query(alarm, metrics_namespace=metrics_namespace, namespace=namespace)
    return query


def create_namespace_alarms(name: str, watched: WatchedJobs, *, config: ObservabilityConfig, cluster_name: str,
                            name_prefix: str, topic_arn: pulumi.Input[str],
                            opts: pulumi.ResourceOptions) -> list[aws.cloudwatch.MetricAlarm]:
    """Every job of the watched namespace that the stack does not plan: NaN/inf loss, no step, no checkpoint."""
    created = []
    for alarm in namespace_alarms(watched.namespace, config):
        query = insights_query(alarm, metrics_namespace=metrics_namespace_of(cluster_name), namespace=watched.namespace,
                               excluded_jobs=[job.name for job in watched.jobs])
        created.append(aws.cloudwatch.MetricAlarm(
            f"{name}-any-job-{alarm.name}", name=f"{name_prefix}-{watched.namespace}-{alarm.name}-any-job",
            alarm_description=alarm.description,
            metric_queries=[aws.cloudwatch.MetricAlarmMetricQueryArgs(
                id="jobs", expression=query, period=EVALUATION_PERIOD_SECONDS, label=alarm.name, return_data=True)],
            evaluation_periods=1, datapoints_to_alarm=1, comparison_operator="GreaterThanOrEqualToThreshold",
            threshold=alarm.threshold,
            # A job that logs nothing (queued, finished, gone) is no contributor in breach.
            treat_missing_data="notBreaching", alarm_actions=[topic_arn], ok_actions=[topic_arn], opts=opts))
    return created


def pools_by_name(pools: Sequence[NodePoolConfig]) -> dict[str, NodePoolConfig]:
    return {pool.name: pool for pool in pools}


# --------------------------------------------------------------------------- resources

def create_metric_filters(name: str, *, log_group: aws.cloudwatch.LogGroup, name_prefix: str, metrics_namespace: str,
                          parent: pulumi.Resource) -> list[aws.cloudwatch.LogMetricFilter]:
    """The environment's training metric filters on the application log group."""
    return [aws.cloudwatch.LogMetricFilter(
        f"{name}-metric-{metric.name}",
        name=f"{name_prefix}-training-{metric.name}",
        log_group_name=log_group.name,
        pattern=filter_pattern(metric),
        metric_transformation=aws.cloudwatch.LogMetricFilterMetricTransformationArgs(
            name=metric.name, namespace=metrics_namespace, value=metric_value(metric), unit=metric.unit,
            dimensions=DIMENSIONS),
        opts=pulumi.ResourceOptions(parent=parent),
    ) for metric in TRAINING_METRICS]


@dataclass(frozen=True)
class WatchedJobs:
    """A stack's own training jobs, which its alarms and dashboard watch."""

    jobs: Sequence[JobConfig]
    namespace: str
    """The jobs' namespace (the Namespace dimension)."""
    pools: Sequence[NodePoolConfig]
    storage: StorageConfig
    team: bool
    """A team stack's jobs checkpoint to EFS (the storage's Lustre is the platform namespace's)."""


def create_job_alarms(name: str, watched: WatchedJobs, *, config: ObservabilityConfig, cluster_name: str,
                      name_prefix: str, topic_arn: pulumi.Input[str],
                      opts: pulumi.ResourceOptions) -> list[aws.cloudwatch.MetricAlarm]:
    """Per job: NaN/inf loss, no step while its namespace runs pods, no checkpoint for k intervals;
    and the same three over every other job of the namespace (create_namespace_alarms); to the
    environment's alert topic (the utilisation alarms' too)."""
    pools = pools_by_name(watched.pools)
    created = []
    for job in watched.jobs:
        interval = planned_checkpoint_interval_seconds(job, pools[job.pool], watched.storage, team=watched.team)
        for alarm in job_alarms(job, namespace=watched.namespace, interval_s=interval, config=config,
                                metrics_namespace=metrics_namespace_of(cluster_name), cluster_name=cluster_name):
            created.append(_alarm(f"{name}-{job.name}-{alarm.name}",
                                  alarm_name(name_prefix, watched.namespace, job.name, alarm.name), alarm,
                                  topic_arn, opts))
    return created + create_namespace_alarms(name, watched, config=config, cluster_name=cluster_name,
                                             name_prefix=name_prefix, topic_arn=topic_arn, opts=opts)


def metrics_namespace_of(cluster_name: str) -> str:
    """Where the stack's log metric filters publish (one namespace per cluster)."""
    return f"GpuTraining/{cluster_name}"


def _alarm(resource_name: str, alarm_name_: str, alarm: JobAlarm, topic_arn: pulumi.Input[str],
           opts: pulumi.ResourceOptions) -> aws.cloudwatch.MetricAlarm:
    queries = [aws.cloudwatch.MetricAlarmMetricQueryArgs(
        id=query_id, return_data=False,
        metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(
            namespace=namespace, metric_name=metric, dimensions=dims, stat=stat, period=EVALUATION_PERIOD_SECONDS))
        for query_id, (namespace, metric, dims, stat) in alarm.inputs.items()]
    queries.append(aws.cloudwatch.MetricAlarmMetricQueryArgs(
        id="breach", expression=alarm.expression, label=alarm.name, return_data=True))
    return aws.cloudwatch.MetricAlarm(
        resource_name, name=alarm_name_, alarm_description=alarm.description, metric_queries=queries,
        evaluation_periods=alarm.periods, datapoints_to_alarm=alarm.periods,
        comparison_operator="GreaterThanOrEqualToThreshold", threshold=1,
        # The expression FILLs its inputs: a period without a job's lines is 0, not missing.
        treat_missing_data="notBreaching", alarm_actions=[topic_arn], ok_actions=[topic_arn], opts=opts)
