"""CloudWatch dashboards as code: one per environment, one per team stack for its own jobs.

The body is CloudWatch's dashboard body JSON (docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/
CloudWatch-Dashboard-Body-Structure.html): `widgets`, each with `type`, `x`, `y`, `width` (1-24 grid
columns), `height` and `properties`; a metric widget needs `metrics` and `region`, a text widget
`markdown`, an alarm widget `alarms`; at most 500 widgets. Widgets name only metrics the plan's
metric filters create (training_metrics.py, monitoring.py) or the add-ons publish
(components/facts/published_metrics.py): tests/test_dashboards.py walks every planned widget.

Per node and per job series come from SEARCH expressions (docs.aws.amazon.com/AmazonCloudWatch/latest/
monitoring/search-expression-syntax.html: `SEARCH('{Namespace,Dim1,Dim2} MetricName="m" Dim1="v"', 'Stat',
period)`), so a node or a team job that appears later shows without a new plan. Not shown, for want of a
published metric (see published_metrics.py): GPUs per pool (Container Insights has no pool or node-group
dimension; the node series carry the instance type only per GPU device), Kueue's pending and admitted
workloads per queue, and node repairs as such (their cause, a failed node, is shown).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.config.training import JobConfig
from components.facts.published_metrics import CONTAINER_INSIGHTS
from components.facts.regions import arn_partition
from components.observability.kueue_watch import EVICTED_METRIC, KUEUE_REPLICAS, REQUEUED_METRIC
from components.observability.training_metrics import JOB_DIMENSION, NAMESPACE_DIMENSION, UNSCHEDULABLE_METRIC

MAX_WIDGETS = 500  # CloudWatch-Dashboard-Body-Structure: "a maximum of 500 widgets"
GRID_COLUMNS = 24
PERIOD = 300
WIDE, HALF, HEIGHT = 24, 12, 6
# The dashboard opens on the last 12 hours: a day shift's runs, at 5-minute points.
START = "-PT12H"
# The console's host per partition (the AWS console, the GovCloud console, the China console).
_CONSOLE = {"aws": "console.aws.amazon.com", "aws-us-gov": "console.amazonaws-us-gov.com",
            "aws-cn": "console.amazonaws.cn"}


def dashboard_url(region: str, name: str) -> str:
    host = _CONSOLE.get(arn_partition(region), "console.aws.amazon.com")
    return f"https://{region}.{host}/cloudwatch/home?region={region}#dashboards/dashboard/{name}"


def search(namespace: str, dimensions: Sequence[str], metric: str, stat: str, *,
           where: dict[str, str] | None = None) -> str:
    """A SEARCH expression for `metric` of the exact dimension set `dimensions`, filtered by `where`."""
    terms = "".join(f' {key}="{value}"' for key, value in (where or {}).items())
    schema = ",".join(f'"{part}"' if "/" in part else part for part in (namespace, *dimensions))
    return f"SEARCH('{{{schema}}} MetricName=\"{metric}\"{terms}', '{stat}', {PERIOD})"


@dataclass(frozen=True)
class Panel:
    """One widget before layout: a title, its width, and its type's properties."""

    title: str
    kind: str
    properties: dict[str, Any]
    width: int = HALF
    height: int = HEIGHT


def metric_panel(title: str, region: str, metrics: list[list[Any]], *, stat: str = "Average", width: int = HALF,
                 y_label: str = "") -> Panel:
    properties: dict[str, Any] = {"title": title, "region": region, "metrics": metrics, "view": "timeSeries",
                                  "stacked": False, "stat": stat, "period": PERIOD}
    if y_label:
        properties["yAxis"] = {"left": {"label": y_label, "showUnits": False}}
    return Panel(title, "metric", properties, width)


def expression(expr: str, label: str, query_id: str) -> list[Any]:
    """A metric math or SEARCH query; without a label each series keeps its own (job, node)."""
    return [{"expression": expr, "id": query_id, **({"label": label} if label else {})}]


def hidden(namespace: str, metric: str, dims: dict[str, str], stat: str, query_id: str) -> list[Any]:
    """A metric read by an expression only."""
    pairs = [part for key, value in dims.items() for part in (key, value)]
    return [namespace, metric, *pairs, {"stat": stat, "id": query_id, "visible": False}]


def text_panel(title: str, markdown: str) -> Panel:
    return Panel(title, "text", {"markdown": markdown}, WIDE, 3)


def layout(panels: Sequence[Panel]) -> list[dict[str, Any]]:
    """Rows left to right: a panel that does not fit the row's remaining columns starts the next row."""
    widgets, x, y, row_height = [], 0, 0, 0
    for panel in panels:
        if x + panel.width > GRID_COLUMNS:
            x, y, row_height = 0, y + row_height, 0
        widgets.append({"type": panel.kind, "x": x, "y": y, "width": panel.width, "height": panel.height,
                        "properties": panel.properties})
        x, row_height = x + panel.width, max(row_height, panel.height)
    return widgets


def body(panels: Sequence[Panel]) -> str:
    return json.dumps({"start": START, "periodOverride": "inherit", "widgets": layout(panels)}, separators=(",", ":"))


# --------------------------------------------------------------------------- the panels

@dataclass(frozen=True)
class DashboardScope:
    region: str
    cluster_name: str
    metrics_namespace: str
    """The plan's log metric filters' namespace (training_metrics.metrics_namespace_of)."""
    jobs_namespace: str
    """Where the stack's own jobs run (a team stack's namespace, or the environment's)."""
    team_only: bool
    """A team stack's dashboard: only its namespace's jobs; else every job of the environment."""
    jobs: Sequence[JobConfig]
    """The stack's own planned jobs (their checkpoint age is per job)."""
    alarm_arns: Sequence[str]


def _job_search(scope: DashboardScope, metric: str, stat: str) -> str:
    where = {NAMESPACE_DIMENSION: scope.jobs_namespace} if scope.team_only else None
    return search(scope.metrics_namespace, (JOB_DIMENSION, NAMESPACE_DIMENSION), metric, stat, where=where)


def training_panels(scope: DashboardScope) -> list[Panel]:
    """Loss, throughput, step time, checkpoints, restarts and the fabric verdict per job."""
    region, s = scope.region, scope
    return [
        metric_panel("Training loss per job", region, [expression(_job_search(s, "TrainingLoss", "Average"), "", "loss")],
                     width=WIDE),
        metric_panel("Samples per second per job", region,
                     [expression(_job_search(s, "TrainingSamplesPerSecond", "Average"), "", "samples")]),
        metric_panel("Step time per job (s)", region, [
            [{"expression": _job_search(s, "TrainingStepsPerSecond", "Average"), "id": "steps", "visible": False}],
            expression("1 / steps", "", "step_time")]),
        *[_checkpoint_age_panel(scope, job) for job in scope.jobs],
        # Every job, planned or submitted ad hoc, from its launcher's run_status line (once a minute).
        metric_panel("Checkpoint age per job, any job (min)", region, [
            [{"expression": _job_search(s, "CheckpointAgeSeconds", "Maximum"), "id": "age_s", "visible": False}],
            expression("age_s / 60", "", "age_min")], stat="Maximum", y_label="minutes"),
        metric_panel("Time since the last step per job (min)", region, [
            [{"expression": _job_search(s, "TrainingSecondsSinceStep", "Maximum"), "id": "idle_s", "visible": False}],
            expression("idle_s / 60", "", "idle_min")], stat="Maximum", y_label="minutes"),
        metric_panel("Checkpoint save time per job (s)", region,
                     [expression(_job_search(s, "CheckpointSaveSeconds", "Maximum"), "", "save")], stat="Maximum"),
        metric_panel("Gang restarts per job", region,
                     [expression(_job_search(s, "GangRestartAttempt", "Maximum"), "", "restarts")], stat="Maximum"),
        metric_panel("Fabric checks that found no EFA", region,
                     [expression(_job_search(s, "FabricWrong", "Sum"), "", "fabric")], stat="Sum"),
    ]


def _checkpoint_age_panel(scope: DashboardScope, job: JobConfig) -> Panel:
    """Minutes since the job's last checkpoint, at each period it stepped: EPOCH gives a point's
    time, FILL(..., REPEAT) carries the last save's forward (metric math functions,
    docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html)."""
    dims = {JOB_DIMENSION: job.name, NAMESPACE_DIMENSION: scope.jobs_namespace}
    return metric_panel(f"Checkpoint age: {job.name} (min)", scope.region, [
        hidden(scope.metrics_namespace, "TrainingStep", dims, "SampleCount", "steps"),
        hidden(scope.metrics_namespace, "CheckpointSaved", dims, "Sum", "saves"),
        expression("(EPOCH(steps) - FILL(EPOCH(saves), REPEAT)) / 60", "minutes since the last checkpoint", "age"),
    ], y_label="minutes")


def gpu_panels(scope: DashboardScope, *, efa: bool) -> list[Panel]:
    """GPU utilisation and memory per node, capacity in use, failed nodes, EFA counters."""
    region, cluster = scope.region, {"ClusterName": scope.cluster_name}
    node = ("ClusterName", "InstanceId", "NodeName")

    def per_node(metric: str, stat: str = "Average") -> list[Any]:
        return expression(search(CONTAINER_INSIGHTS, node, metric, stat, where=cluster), "", metric)

    panels = [
        metric_panel("GPU utilisation per node (%)", region, [per_node("node_gpu_utilization")], y_label="%"),
        metric_panel("GPU memory per node (%)", region, [per_node("node_gpu_memory_utilization")], y_label="%"),
        metric_panel("GPUs in the cluster and in use (paid capacity)", region, [
            [CONTAINER_INSIGHTS, "node_gpu_limit", "ClusterName", scope.cluster_name, {"stat": "Sum", "label": "GPUs"}],
            [CONTAINER_INSIGHTS, "node_gpu_usage_total", "ClusterName", scope.cluster_name,
             {"stat": "Sum", "label": "GPUs used by pods"}],
            [CONTAINER_INSIGHTS, "cluster_node_count", "ClusterName", scope.cluster_name,
             {"stat": "Maximum", "label": "nodes", "yAxis": "right"}]]),
        metric_panel("Nodes in a failed condition (auto-repair replaces them)", region, [
            [CONTAINER_INSIGHTS, "cluster_failed_node_count", "ClusterName", scope.cluster_name, {"stat": "Maximum"}]],
            stat="Maximum"),
    ]
    if efa:
        panels += [
            metric_panel("EFA bytes per node (B/s)", region, [per_node("node_efa_rx_bytes"), per_node("node_efa_tx_bytes"),
                                                              per_node("node_efa_rdma_read_bytes"),
                                                              per_node("node_efa_rdma_write_bytes")]),
            metric_panel("EFA received packets dropped per node (/s)", region,
                         [per_node("node_efa_rx_dropped", "Maximum")], stat="Maximum"),
        ]
    return panels


def alarm_panel(scope: DashboardScope) -> list[Panel]:
    if not scope.alarm_arns:
        return []
    return [Panel("Alarms", "alarm", {"title": "Alarms (red: in alarm)", "alarms": list(scope.alarm_arns)}, WIDE, 4)]


ENVIRONMENT_HELP = (
    "## {title}\n"
    "Healthy run: **GPU utilisation** above ~80% on every node of a job, the **loss** falling, a **checkpoint age** "
    "that drops back to 0 on schedule. Per node and per job series appear as soon as their metrics exist. "
    "Not on this dashboard (no CloudWatch metric): Kueue's pending and admitted workloads per queue "
    "(`kubectl get clusterqueues`), GPUs per pool. docs/operations.md explains each widget.")


def environment_panels(scope: DashboardScope, *, efa: bool, title: str) -> list[Panel]:
    region = scope.region
    return [
        text_panel("About", ENVIRONMENT_HELP.format(title=title)),
        *alarm_panel(scope),
        *gpu_panels(scope, efa=efa),
        metric_panel("Running pods per namespace", region, [expression(search(
            CONTAINER_INSIGHTS, ("ClusterName", "Namespace"), "namespace_number_of_running_pods", "Maximum",
            where={"ClusterName": scope.cluster_name}), "", "pods")], stat="Maximum"),
        metric_panel("Training pods unschedulable for CPU or memory", region, [
            [scope.metrics_namespace, UNSCHEDULABLE_METRIC, {"stat": "Sum"}]], stat="Sum"),
        metric_panel("Gangs requeued and workloads evicted (Kueue)", region, [
            [scope.metrics_namespace, REQUEUED_METRIC, {"stat": "Sum", "label": "requeued: pods not Ready in time"}],
            [scope.metrics_namespace, EVICTED_METRIC,
             {"stat": "Sum", "label": f"lost admission, any cause (counted by each of {KUEUE_REPLICAS} replicas)"}]],
            stat="Sum"),
        *training_panels(scope),
    ]


TEAM_HELP = (
    "## {title}\n"
    "The jobs of namespace `{namespace}` only. Healthy: the **loss** falling, **samples per second** steady, a "
    "**checkpoint age** that drops back to 0 on schedule, no gang restarts. The environment's dashboard shows the "
    "nodes and GPUs. docs/operations.md explains each widget.")


def team_panels(scope: DashboardScope, *, title: str) -> list[Panel]:
    in_namespace = {"ClusterName": scope.cluster_name, "Namespace": scope.jobs_namespace}
    pairs = [part for key, value in in_namespace.items() for part in (key, value)]
    return [
        text_panel("About", TEAM_HELP.format(title=title, namespace=scope.jobs_namespace)),
        *alarm_panel(scope),
        metric_panel("Running pods and GPU memory in the namespace", scope.region, [
            [CONTAINER_INSIGHTS, "namespace_number_of_running_pods", *pairs, {"stat": "Maximum", "label": "pods"}],
            [CONTAINER_INSIGHTS, "pod_gpu_memory_utilization", *pairs,
             {"stat": "Maximum", "label": "GPU memory (%)", "yAxis": "right"}]], width=WIDE),
        *training_panels(scope),
    ]


def create_dashboard(resource_name: str, *, dashboard_name: str, scope: DashboardScope, panels: Any,
                     alarm_arns: Sequence[pulumi.Output[str]], opts: pulumi.ResourceOptions) -> aws.cloudwatch.Dashboard:
    """`panels(scope)` once the alarms' ARNs are known."""
    return aws.cloudwatch.Dashboard(
        resource_name, dashboard_name=dashboard_name,
        dashboard_body=pulumi.Output.all(*alarm_arns).apply(
            lambda arns: body(panels(dataclasses.replace(scope, alarm_arns=tuple(arns))))),
        opts=opts)


def dashboard_name_of(name_prefix: str) -> str:
    """Dashboard names: letters, digits, - and _ (PutDashboard DashboardName)."""
    return f"{name_prefix}-training"
