"""The dashboard and the training metrics: where to look, and whether the job's loss reaches CloudWatch.

The platform's log metric filters turn the launcher's JSON lines into metrics in
`GpuTraining/<cluster>` with the dimensions Namespace and Job
(components/observability/training_metrics.py; this module repeats the names without importing the
Pulumi program, and tests/test_verify_scenarios.py holds them equal). A job that logs its loss but
has no TrainingLoss datapoints has a broken path: an older launcher image (its lines name no
`job`), Fluent Bit not shipping the pod's logs, or the filter missing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from verify.report import CheckResult, Diagnosis, failed, passed, warned

if TYPE_CHECKING:
    from verify.checks import Context, JobState

LOSS_METRIC = "TrainingLoss"
JOB_DIMENSION, NAMESPACE_DIMENSION = "Job", "Namespace"
PERIOD_SECONDS = 300
# The trainer logs a loss every TRAIN_LOG_EVERY_STEPS steps (default 10) and Fluent Bit flushes
# every 5 s: half an hour without a point is not a slow job, it is a gap.
LOSS_WINDOW_MINUTES = 30


def metrics_namespace(cluster_name: str) -> str:
    return f"GpuTraining/{cluster_name}"


def check_dashboard(ctx: Context) -> CheckResult:
    """Reports the stack's dashboard (its `dashboardUrl` output)."""
    url = ctx.outputs.dashboard_url
    if url is None:
        return warned("cluster.dashboard", f"stack {ctx.stack} exports no dashboardUrl: run `pulumi up` with this "
                      "version of the program (it creates the dashboard)")
    return passed("cluster.dashboard", f"dashboard: {url}", url=url)


def check_loss_metric(ctx: Context, state: JobState) -> CheckResult:
    job, ns, cluster = state.promise.name, ctx.outputs.namespace, ctx.outputs.cluster_name
    check = f"job.{job}.loss-metric"
    end = datetime.fromtimestamp(ctx.now, UTC)
    start = end - timedelta(minutes=LOSS_WINDOW_MINUTES)
    namespace = metrics_namespace(cluster)
    try:
        answer = ctx.cloudwatch().get_metric_data(StartTime=start, EndTime=end, MetricDataQueries=[{
            "Id": "loss", "ReturnData": True, "MetricStat": {"Period": PERIOD_SECONDS, "Stat": "Average", "Metric": {
                "Namespace": namespace, "MetricName": LOSS_METRIC,
                "Dimensions": [{"Name": NAMESPACE_DIMENSION, "Value": ns}, {"Name": JOB_DIMENSION, "Value": job}]}}}])
    except Exception as e:  # botocore: no credentials, access denied, endpoint unreachable
        return failed(check, "cannot read the training metrics from CloudWatch", Diagnosis(
            f"no AWS access from here ({type(e).__name__}: {' '.join(str(e).split())[:160]})",
            "aws sts get-caller-identity"))
    values = [v for result in answer.get("MetricDataResults", []) for v in result.get("Values", [])]
    if not values:
        return failed(check, f"no {LOSS_METRIC} datapoints in the last {LOSS_WINDOW_MINUTES} min", Diagnosis(
            "the loss lines do not reach CloudWatch: the trainer logs no loss yet, the image's launcher is older than "
            "the `job` field its lines need, or Fluent Bit does not ship the pod's logs",
            f"aws logs tail /aws/containerinsights/{cluster}/application --region {ctx.outputs.region} --since 30m "
            f"--filter-pattern '{{ $.log_processed.job = \"{job}\" }}'"))
    return passed(check, f"{len(values)} {LOSS_METRIC} datapoints in the last {LOSS_WINDOW_MINUTES} min, "
                  f"latest {values[0]:.4g}", datapoints=len(values), latest_loss=values[0])
