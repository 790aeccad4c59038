"""The requeue alarm and the eviction line: the filters match the lines Kueue v0.19.2 writes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_dashboards import ALARM, DASHBOARD, FILTER, json_pattern_matches, referenced_metrics

from components.observability.kueue_watch import (
    EVICTED_METRIC,
    PODS_READY_TIMEOUT_LINE,
    REQUEUED_METRIC,
    UPDATE_EVENT_LINE,
    evicted_filter_pattern,
    requeued_filter_pattern,
)
from components.workload.controllers import kueue_configuration

KUEUE_MIRROR = Path("/work/.mirror/kubernetes-sigs+kueue/repo")
KUEUE_TAG = "v0.19.2"


def shipped(fields: dict, *, namespace: str = "kueue-system") -> dict:
    """A Kueue controller line as its JSON encoder writes it (zap production encoder config:
    level, ts, logger, caller, msg, then the logger's key/value pairs) and as Fluent Bit ships it
    (the parsed line under log_processed, the pod's namespace under kubernetes)."""
    line = json.dumps({"level": "Level(-2)", "ts": "2026-12-01T10:00:00.000000001Z", **fields})
    return {"log": line, "stream": "stderr", "log_processed": json.loads(line),
            "kubernetes": {"namespace_name": namespace, "pod_name": "kueue-controller-manager-7d9f8-abcde",
                           "container_name": "manager"}}


WORKLOAD = {"name": "jobset-pretrain-p5-3f2a1", "namespace": "training-prod"}
# workload_controller.go:1256, logged with the reconciler's logger (controller-runtime adds the
# controller and the object it reconciles).
REQUEUE = {"caller": "core/workload_controller.go:1256", "msg": PODS_READY_TIMEOUT_LINE, "controller": "workload",
           "controllerGroup": "kueue.x-k8s.io", "controllerKind": "Workload", "Workload": WORKLOAD,
           "namespace": WORKLOAD["namespace"], "name": WORKLOAD["name"], "reconcileID": "0f3c"}


def update_event(status: str, prev_status: str | None) -> dict:
    """workload_controller.go:1366-1393: workload, queue, status, and prevStatus when it changed."""
    fields = {"logger": "workload-reconciler", "caller": "core/workload_controller.go:1393", "msg": UPDATE_EVENT_LINE,
              "workload": WORKLOAD, "queue": "training", "status": status}
    return fields | ({"prevStatus": prev_status} if prev_status else {}) | {"clusterQueue": "training"}


@pytest.mark.parametrize(("record", "requeued", "evicted"), [
    (shipped(REQUEUE), True, False),
    # an admitted gang that lost its admission: evicted, whatever the cause
    (shipped(update_event("pending", "admitted")), False, True),
    # admission, a quota reservation lost before admission, a finished run, an unchanged status
    (shipped(update_event("admitted", "quotaReserved")), False, False),
    (shipped(update_event("pending", "quotaReserved")), False, False),
    (shipped(update_event("finished", "admitted")), False, False),
    (shipped(update_event("pending", None)), False, False),
    # the same words from another namespace's container (a trainer printing them) count nothing
    (shipped(REQUEUE, namespace="training-prod"), False, False),
    (shipped(update_event("pending", "admitted"), namespace="team-vision"), False, False),
])
def test_the_filters_count_kueues_own_requeue_and_eviction_lines(record, requeued, evicted):
    assert json_pattern_matches(requeued_filter_pattern(), record) == requeued
    assert json_pattern_matches(evicted_filter_pattern(), record) == evicted


def test_the_requeue_line_is_written_while_pods_ready_is_waited_for():
    # Only with waitForPodsReady does Kueue time a gang out and log the line; recoveryTimeout makes a
    # running gang that lost a pod take the same path (admittedNotReadyWorkload).
    ready = kueue_configuration()["waitForPodsReady"]
    assert ready["timeout"] and ready["recoveryTimeout"] and ready["requeuingStrategy"]["backoffLimitCount"] == 5


def git_show(path: str) -> str:
    return subprocess.run(["git", "-C", str(KUEUE_MIRROR), "show", f"{KUEUE_TAG}:{path}"], check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.skipif(not KUEUE_MIRROR.is_dir(), reason="the Kueue source mirror is not on this machine")
def test_the_lines_are_kueue_v0192s_at_the_level_its_chart_logs():
    controller = git_show("pkg/controller/core/workload_controller.go")
    assert f'log.V(2).Info("{PODS_READY_TIMEOUT_LINE}")' in controller
    assert f'log.V(2).Info("{UPDATE_EVENT_LINE}")' in controller
    assert 'log = log.WithValues("prevStatus", prevStatus)' in controller
    assert "logLevel: 2" in git_show("charts/kueue/values.yaml")
    status = git_show("pkg/workload/workload.go")
    assert 'StatusPending       = "pending"' in status and 'StatusAdmitted      = "admitted"' in status


def test_prod_alarms_on_a_requeue_and_shows_both_on_its_dashboard(plan_of):
    plan = plan_of("prod")
    filters = {f["inputs"]["metricTransformation"]["name"]: f["inputs"] for f in plan.of_type(FILTER)}
    assert filters[REQUEUED_METRIC]["pattern"] == requeued_filter_pattern()
    assert filters[EVICTED_METRIC]["pattern"] == evicted_filter_pattern()
    assert {filters[m]["logGroupName"] for m in (REQUEUED_METRIC, EVICTED_METRIC)} == {
        "/aws/containerinsights/gpu-training-prod/application"}
    (alarm,) = [a["inputs"] for a in plan.of_type(ALARM) if a["inputs"].get("metricName") == REQUEUED_METRIC]
    assert (alarm["statistic"], alarm["comparisonOperator"], alarm["threshold"], alarm["evaluationPeriods"]) == (
        "Sum", "GreaterThanOrEqualToThreshold", 1, 1)
    assert alarm["namespace"] == filters[REQUEUED_METRIC]["metricTransformation"]["namespace"]
    assert alarm["alarmActions"] and alarm["treatMissingData"] == "notBreaching"
    assert not [a for a in plan.of_type(ALARM) if a["inputs"].get("metricName") == EVICTED_METRIC]  # preemption is normal
    (dashboard,) = plan.of_type(DASHBOARD)
    read = {metric for w in json.loads(dashboard["inputs"]["dashboardBody"])["widgets"]
            for _, metric, _ in referenced_metrics(w)}
    assert {REQUEUED_METRIC, EVICTED_METRIC} <= read
