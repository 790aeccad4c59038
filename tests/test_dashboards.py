"""Training metric filters, the per-job alarms and the dashboards, against every stack's plan."""

from __future__ import annotations

import io
import json
import math
import re

import pytest
from plan_queries import config_of
from stack_configs import MANIFEST_STACKS, PLATFORM_STACKS, PROJECT, TEAM_STACKS, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.config.observability import TRAINER_STARTUP_MINUTES
from components.config.stack import StackConfig
from components.facts.published_metrics import BY_NAME as PUBLISHED
from components.observability.dashboards import MAX_WIDGETS, dashboard_url
from components.observability.training_metrics import (
    DIMENSIONS,
    MAX_FILTER_DIMENSIONS,
    MAX_FILTERS_PER_LOG_GROUP,
    METRICS,
    TRAINING_METRICS,
    filter_pattern,
    metric_value,
    planned_checkpoint_interval_seconds,
)
from components.workload.training_job import STARTUP_BUDGET_SECONDS
from trainer.launcher import log_line

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
FILTER = "aws:cloudwatch/logMetricFilter:LogMetricFilter"


def platform_config_of(stack) -> StackConfig:
    """The stack's, or a team stack's platform's (its contract carries that stack file's config)."""
    config = config_of(stack)
    platform = config if isinstance(config, StackConfig) else config_of(config.environment)
    assert isinstance(platform, StackConfig)
    return platform


def training_filters(plan):
    return [f["inputs"] for f in plan.of_type(FILTER) if f["inputs"]["metricTransformation"]["name"] in METRICS]


# --------------------------------------------------------------------------- metric filters

@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_training_metric_has_a_filter_on_the_application_log_group(stack, plan_of):
    plan, config = plan_of(stack), platform_config_of(stack)
    filters = training_filters(plan)
    assert sorted(f["metricTransformation"]["name"] for f in filters) == sorted(METRICS)
    for f in filters:
        transformation = f["metricTransformation"]
        assert f["logGroupName"] == f"/aws/containerinsights/{config.cluster_name}/application"
        assert transformation["namespace"] == f"GpuTraining/{config.cluster_name}"
        assert transformation["dimensions"] == {"Job": "$.log_processed.job", "Namespace": "$.kubernetes.namespace_name"}
        assert len(transformation["dimensions"]) <= MAX_FILTER_DIMENSIONS
        assert "defaultValue" not in transformation  # with dimensions: data only where the event was logged
    per_group: dict[str, int] = {}
    for f in plan.of_type(FILTER):
        per_group[f["inputs"]["logGroupName"]] = per_group.get(f["inputs"]["logGroupName"], 0) + 1
    assert max(per_group.values()) <= MAX_FILTERS_PER_LOG_GROUP


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_team_stacks_make_no_filters_of_their_own(stack, plan_of):
    assert not plan_of(stack).of_type(FILTER)  # the environment's filters count every namespace's lines


def _compare(record, path: str, op: str, literal: str) -> bool:
    value = record
    for key in path.removeprefix("$.").split("."):
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    if literal.startswith('"'):
        text = literal.strip('"')
        return isinstance(value, str) and op == "=" and re.fullmatch(re.escape(text).replace(r"\*", ".*"), value) is not None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False  # numeric comparisons match numbers only
    number = float(literal)
    return {">=": value >= number, "<": value < number, ">": value > number, "<=": value <= number,
            "=": value == number}[op]


def json_pattern_matches(pattern: str, record: dict) -> bool:
    """The subset of CloudWatch Logs JSON filter patterns the filters use: comparisons, &&, ||, ()."""
    assert pattern.startswith("{ ") and pattern.endswith(" }")
    comparisons = []

    def hold(match: re.Match) -> str:
        comparisons.append(_compare(record, match[1], match[2], match[3]))
        return f"c[{len(comparisons) - 1}]"

    expression = re.sub(r'(\$\.[\w.]+) (>=|<=|=|<|>) ("[^"]*"|-?[0-9.]+)', hold, pattern[2:-2])
    expression = expression.replace("&&", "and").replace("||", "or")
    assert re.fullmatch(r"[c\[\]0-9 andor()]+", expression), expression
    return eval(expression, {"c": comparisons})  # only the placeholders above remain: the assert


def shipped(namespace: str, *, monkeypatch, event: str, **fields) -> dict:
    """A launcher line as Fluent Bit ships it: the line, parsed into log_processed, and its pod's namespace."""
    monkeypatch.setenv(log_line.JOB_ID_VAR, "pretrain")
    out = io.StringIO()
    log_line.log(event, stream=out, **fields)
    line = out.getvalue().strip()
    return {"log": line, "stream": "stdout", "log_processed": json.loads(line),
            "kubernetes": {"namespace_name": namespace, "pod_name": "pretrain-node-0-0-x7k2q"}}


@pytest.mark.parametrize(("event", "fields", "expected"), [
    ("step", {"step": 120, "loss": 0.61, "steps_per_s": 2.5, "samples_per_s": 5120.4},
     {"TrainingStep": 120, "TrainingLoss": 0.61, "TrainingStepsPerSecond": 2.5, "TrainingSamplesPerSecond": 5120.4}),
    ("step", {"step": 7, "loss": None, "steps_per_s": 1.0},  # no loss reported, no samples known
     {"TrainingStep": 7, "TrainingStepsPerSecond": 1.0}),
    ("step", {"step": 8, "loss": float("nan"), "steps_per_s": 1.0},
     {"TrainingStep": 8, "TrainingLossNotFinite": 1, "TrainingStepsPerSecond": 1.0}),
    ("loss", {"step": 9, "loss": float("-inf")}, {"TrainingStep": 9, "TrainingLossNotFinite": 1}),
    ("loss", {"step": 10, "loss": -0.5}, {"TrainingStep": 10, "TrainingLoss": -0.5}),
    ("checkpoint_saved", {"step": 200, "duration_s": 12.5},
     {"CheckpointSaved": 1, "CheckpointStep": 200, "CheckpointSaveSeconds": 12.5}),
    ("launcher_start", {"job_id": "pretrain", "restart_attempt": 2}, {"GangRestartAttempt": 2}),
    ("launcher_start", {"job_id": "pretrain", "restart_attempt": None}, {}),  # outside a JobSet
    ("fabric_check", {"fabric": "efa", "verdict": "wrong"}, {"FabricWrong": 1}),
    ("fabric_status", {"verdict": "efa"}, {}),
    ("resume_selected", {"path": "", "step": None}, {}),
    # The launcher's own clock, once a minute (launcher/status_publisher.py): watches any job.
    ("run_status", {"step": 40, "loss": 0.5, "steps_per_s": 2.0, "since_step_s": 31, "checkpoint_age_s": 900,
                    "checkpoint_intervals": 1.94, "restarts": 0},
     {"TrainingSecondsSinceStep": 31, "CheckpointAgeSeconds": 900, "CheckpointIntervalsSinceSave": 1.94}),
    ("run_status", {"step": None, "since_step_s": 0, "checkpoint_age_s": 12, "checkpoint_intervals": None},
     {"TrainingSecondsSinceStep": 0, "CheckpointAgeSeconds": 12}),  # steps mode before a rate: no interval
])
def test_the_filters_read_the_launchers_own_lines(event, fields, expected, monkeypatch):
    record = shipped("team-vision", monkeypatch=monkeypatch, event=event, **fields)
    published = {}
    for metric in TRAINING_METRICS:
        if json_pattern_matches(filter_pattern(metric), record):
            value = metric_value(metric)
            published[metric.name] = 1 if value == "1" else record["log_processed"][value.rsplit(".", 1)[1]]
            for dimension, field in DIMENSIONS.items():
                assert _compare(record, field, "=", '"*"'), dimension
    assert published == expected


def test_a_line_without_a_job_is_not_counted(monkeypatch):
    monkeypatch.delenv(log_line.JOB_ID_VAR, raising=False)
    out = io.StringIO()
    log_line.log("step", stream=out, step=1, loss=0.5)
    record = {"log_processed": json.loads(out.getvalue()), "kubernetes": {"namespace_name": "training-dev"}}
    assert not any(json_pattern_matches(filter_pattern(m), record) for m in TRAINING_METRICS)


# --------------------------------------------------------------------------- per-job alarms

def job_alarms(plan):
    return {a["inputs"]["name"]: a["inputs"] for a in plan.of_type(ALARM)
            if "metricQueries" in a["inputs"] and not a["inputs"]["name"].endswith(ANY_JOB)}


ANY_JOB = "-any-job"


def any_job_alarms(plan):
    return {a["inputs"]["name"]: a["inputs"] for a in plan.of_type(ALARM) if a["inputs"]["name"].endswith(ANY_JOB)}


def queries(alarm):
    return {q["id"]: q for q in alarm["metricQueries"]}


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_planned_job_has_its_three_alarms(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    platform = platform_config_of(stack)
    alarms = job_alarms(plan)
    team = not isinstance(config, StackConfig)
    # the alert topic its platform's utilisation alarms notify: a platform stack's own (a second
    # region of an environment has its own topic, in its region), a team stack's environment's
    topic = next(a["inputs"]["alarmActions"][0] for a in plan_of(config.environment if team else stack).of_type(ALARM)
                 if a["inputs"].get("metricName") == "node_gpu_utilization")
    assert len(alarms) == 3 * len(config.training.jobs) > 0
    observability = platform.observability
    pools = {p.name: p for p in platform.node_pools}
    for job in config.training.jobs:
        prefix = f"{config.name_prefix}-{config.training_namespace}-{job.name}"
        loss, no_step, late = alarms[f"{prefix}-loss-not-finite"], alarms[f"{prefix}-no-step"], alarms[f"{prefix}-no-checkpoint"]
        for alarm in (loss, no_step, late):
            assert alarm["alarmActions"] == alarm["okActions"] == [topic]
            assert (alarm["threshold"], alarm["comparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
            assert alarm["datapointsToAlarm"] == alarm["evaluationPeriods"]
            for query in queries(alarm).values():
                if "metric" in query and query["metric"]["namespace"].startswith("GpuTraining/"):
                    assert query["metric"]["dimensions"] == {"Job": job.name, "Namespace": config.training_namespace}
                    assert query["metric"]["metricName"] in METRICS
        assert queries(loss)["bad"]["metric"]["metricName"] == "TrainingLossNotFinite"
        assert no_step["evaluationPeriods"] * 300 == observability.no_step_minutes * 60
        pods = queries(no_step)["pods"]["metric"]
        assert (pods["namespace"], pods["metricName"]) == ("ContainerInsights", "namespace_number_of_running_pods")
        assert pods["dimensions"] == {"ClusterName": platform.cluster_name, "Namespace": config.training_namespace}
        # The namespace's viewer Deployment always runs: only pods beyond its replicas arm the alarm.
        viewers = [d for d in plan.of_type("kubernetes:apps/v1:Deployment")
                   if d["inputs"]["metadata"]["namespace"] == config.training_namespace
                   and "tensorboard" in json.dumps(d["inputs"]["spec"])]
        assert len(viewers) == 1
        expression = queries(no_step)["breach"]["expression"]
        assert f"FILL(pods, 0) > {viewers[0]['inputs']['spec']['replicas']} AND" in expression, expression
        interval = planned_checkpoint_interval_seconds(job, pools[job.pool], platform.storage, team=team)
        window = min(observability.checkpoint_late_factor * interval, 86_400)
        assert late["evaluationPeriods"] == math.ceil(window / 300) and late["evaluationPeriods"] * 300 <= 86_400
        assert f"{observability.checkpoint_late_factor} x its planned {interval} s" in late["alarmDescription"]


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_other_job_of_the_namespace_is_watched_by_a_metrics_insights_alarm(stack, plan_of):
    """Issue 42: a job no deploy knows of (submitted ad hoc) is watched as the stack's own are, by one
    multi-time-series alarm per kind over the namespace (each job a contributor), which leaves the
    stack's own jobs to their per-job alarms."""
    plan, config = plan_of(stack), config_of(stack)
    observability = platform_config_of(stack).observability
    namespace = config.training_namespace
    alarms = any_job_alarms(plan)
    prefix = f"{config.name_prefix}-{namespace}"
    assert set(alarms) == {f"{prefix}-{kind}{ANY_JOB}" for kind in ("loss-not-finite", "no-step", "no-checkpoint")}
    expected = {"loss-not-finite": ("SUM", "TrainingLossNotFinite", 1),
                "no-step": ("MAX", "TrainingSecondsSinceStep", observability.no_step_minutes * 60),
                "no-checkpoint": ("MAX", "CheckpointIntervalsSinceSave", observability.checkpoint_late_factor)}
    per_job = job_alarms(plan)
    for name, alarm in alarms.items():
        function, metric, threshold = expected[name.removeprefix(f"{prefix}-").removesuffix(ANY_JOB)]
        (query,) = alarm["metricQueries"]
        sql = query["expression"]
        assert metric in METRICS and query["returnData"] is True and query["period"] == 300
        assert sql.startswith(f'SELECT {function}("{metric}") FROM SCHEMA("GpuTraining/')
        assert f'WHERE "Namespace" = \'{namespace}\'' in sql
        # A multi-time-series alarm needs both (Create_Metrics_Insights_Alarm.html); one series per job.
        assert sql.endswith(f'GROUP BY "Job" ORDER BY {function}() DESC') and len(sql) <= 2048
        for job in config.training.jobs:
            assert f'"Job" != \'{job.name}\'' in sql
            assert any(n.endswith(f"-{job.name}-no-step") for n in per_job)  # watched by its own alarms instead
        assert (alarm["threshold"], alarm["comparisonOperator"]) == (threshold, "GreaterThanOrEqualToThreshold")
        assert (alarm["evaluationPeriods"], alarm["datapointsToAlarm"], alarm["treatMissingData"]) == (1, 1, "notBreaching")
        assert alarm["alarmActions"] == alarm["okActions"] and alarm["alarmActions"]


def test_a_namespace_query_that_cannot_name_every_stack_job_watches_them_twice_rather_than_none():
    from components.observability.training_metrics import insights_query, namespace_alarms

    (alarm, *_) = namespace_alarms("team-vision", platform_config_of("dev").observability)
    many = [f"job-{i:03d}-with-a-long-descriptive-name" for i in range(60)]
    query = insights_query(alarm, metrics_namespace="GpuTraining/c", namespace="team-vision", excluded_jobs=many)
    assert "!=" not in query and len(query) <= 2048
    assert "!=" in insights_query(alarm, metrics_namespace="GpuTraining/c", namespace="team-vision", excluded_jobs=many[:5])


def test_a_configured_interval_is_the_planned_one_and_young_otherwise():
    config = config_of("dev")
    assert isinstance(config, StackConfig)
    job = config.training.jobs[0]
    pool = next(p for p in config.node_pools if p.name == job.pool)
    young = planned_checkpoint_interval_seconds(job, pool, config.storage, team=False)
    from components.workload.sizing import job_mtbf_seconds
    assert young == math.ceil(math.sqrt(2 * 30 * job_mtbf_seconds(pool, job.nodes)))
    import dataclasses
    fixed = dataclasses.replace(job, checkpoint_interval_seconds=900)
    assert planned_checkpoint_interval_seconds(fixed, pool, config.storage, team=False) == 900
    large = dataclasses.replace(job, checkpoint_gib=2000)  # slower to write than the launcher's first guess
    assert planned_checkpoint_interval_seconds(large, pool, config.storage, team=False) > young


def test_no_step_waits_at_least_the_trainers_startup_budget():
    assert TRAINER_STARTUP_MINUTES * 60 == STARTUP_BUDGET_SECONDS


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("observability.noStepMinutes", 20, "gpu-training:observability.noStepMinutes: must be between 30 and 1440"),
    ("observability.noStepMinutes", 42, "gpu-training:observability.noStepMinutes: alarms evaluate 5-minute"),
    ("observability.checkpointLateFactor", 1, "gpu-training:observability.checkpointLateFactor: must be between 2"),
])
def test_invalid_training_alarm_settings(path, value, expected):
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config("dev"), path, value), project=PROJECT, stack="dev")
    assert any(e.startswith(expected) for e in raised.value.errors), raised.value.errors


# --------------------------------------------------------------------------- dashboards

SEARCH = re.compile(r"""SEARCH\('\{(?P<schema>[^}]*)\} MetricName="(?P<name>[^"]+)"(?P<terms>[^']*)', '(?P<stat>\w+)', (?P<period>\d+)\)""")
WIDGET_PROPERTIES = {"metric": ("metrics", "region", "title"), "text": ("markdown",), "alarm": ("alarms", "title")}


def dashboard_of(plan) -> tuple[str, dict]:
    (dashboard,) = plan.of_type(DASHBOARD)
    return dashboard["inputs"]["dashboardName"], json.loads(dashboard["inputs"]["dashboardBody"])


def referenced_metrics(widget) -> list[tuple[str, str, tuple[str, ...]]]:
    """(namespace, metric, dimension names) of each metric a widget reads, SEARCH included."""
    found = []
    for row in widget["properties"].get("metrics", []):
        if isinstance(row[0], dict):
            for match in SEARCH.finditer(row[0]["expression"]):
                namespace, *dimensions = [part.strip('"') for part in match["schema"].split(",")]
                found.append((namespace, match["name"], tuple(dimensions)))
            continue
        namespace, metric, *rest = row
        pairs = [part for part in rest if not isinstance(part, dict)]
        found.append((namespace, metric, tuple(pairs[0::2])))
    return found


def expression_ids_resolve(widget) -> bool:
    rows = widget["properties"].get("metrics", [])
    ids = {(row[-1] if isinstance(row[-1], dict) else {}).get("id") for row in rows} | {
        row[0].get("id") for row in rows if isinstance(row[0], dict)}
    for row in rows:
        if isinstance(row[0], dict) and "SEARCH" not in row[0]["expression"]:
            names = set(re.findall(r"\b([a-z_]+)\b", row[0]["expression"])) - {"and", "or"}
            if not names <= ids:
                return False
    return True


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_widget_is_valid_and_reads_only_known_metrics(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    platform = platform_config_of(stack)
    own = {(f["metricTransformation"]["namespace"], f["metricTransformation"]["name"]):
           tuple(sorted(f["metricTransformation"].get("dimensions", {})))
           for f in plan_of(stack if isinstance(config, StackConfig) else "prod").of_type(FILTER)
           for f in [f["inputs"]]}
    name, body = dashboard_of(plan)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,255}", name)
    widgets = body["widgets"]
    assert 0 < len(widgets) <= MAX_WIDGETS
    for widget in widgets:
        assert widget["type"] in WIDGET_PROPERTIES
        assert 1 <= widget["width"] <= 24 and 1 <= widget["height"] <= 1000 and widget["x"] + widget["width"] <= 24
        assert all(key in widget["properties"] for key in WIDGET_PROPERTIES[widget["type"]]), widget
        if widget["type"] == "metric":
            assert widget["properties"]["region"] == config.region
            assert expression_ids_resolve(widget), widget
        for namespace, metric, dimensions in referenced_metrics(widget):
            if (namespace, metric) in own:
                assert namespace == f"GpuTraining/{platform.cluster_name}"
                assert tuple(sorted(dimensions)) == own[namespace, metric], (metric, dimensions)
            else:
                published = PUBLISHED[namespace, metric]  # KeyError: a metric nothing publishes
                assert tuple(dimensions) in published.dimension_sets, (metric, dimensions)
    boxes = {(w["x"], w["y"]) for w in widgets}
    assert len(boxes) == len(widgets)  # no two widgets at one place


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_dashboard_shows_gpus_training_and_the_alarms(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    platform = platform_config_of(stack)
    _, body = dashboard_of(plan)
    read = {metric for widget in body["widgets"] for _, metric, _ in referenced_metrics(widget)}
    assert {"TrainingLoss", "TrainingSamplesPerSecond", "TrainingStepsPerSecond", "TrainingStep", "CheckpointSaved",
            "CheckpointSaveSeconds", "GangRestartAttempt", "FabricWrong"} <= read
    titles = [w["properties"].get("title", "") for w in body["widgets"]]
    assert sum(t.startswith("Checkpoint age:") for t in titles) == len(config.training.jobs)
    (alarm_widget,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    # the mocks' ARNs end in the resource's name
    assert sorted(arn.rsplit("/", 1)[1] for arn in alarm_widget["properties"]["alarms"]) == sorted(
        a["name"] for a in plan.of_type(ALARM))
    if isinstance(config, StackConfig):
        assert {"node_gpu_utilization", "node_gpu_memory_utilization", "node_gpu_limit", "cluster_failed_node_count",
                "namespace_number_of_running_pods"} <= read
        assert ("node_efa_rx_bytes" in read) == any(p.efa for p in config.node_pools)
    else:  # a team sees its own namespace only
        for widget in body["widgets"]:
            for row in widget["properties"].get("metrics", []):
                if isinstance(row[0], dict) and "GpuTraining/" in row[0]["expression"]:
                    assert f'Namespace="{config.training_namespace}"' in row[0]["expression"]
        assert "node_gpu_utilization" not in read
    assert plan.outputs["dashboardUrl"] == dashboard_url(config.region, dashboard_of(plan)[0])
    assert f"region={platform.region}" in plan.outputs["dashboardUrl"]


@pytest.mark.parametrize(("region", "host"), [
    ("us-east-1", "https://us-east-1.console.aws.amazon.com/"),
    ("us-gov-west-1", "https://us-gov-west-1.console.amazonaws-us-gov.com/"),
    ("cn-north-1", "https://cn-north-1.console.amazonaws.cn/"),
])
def test_the_dashboard_url_is_the_partitions_console(region, host):
    url = dashboard_url(region, "x-training")
    assert url.startswith(host) and url.endswith(f"region={region}#dashboards/dashboard/x-training")
