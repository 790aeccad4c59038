"""Progress on the job itself (issue 42, item 2): the figures rank 0's launcher keeps (launcher.run_status),
and how it publishes them (launcher.status_publisher): only from the pod that routes rank 0's lines,
at most once an interval, never in training's way, backing off when the API fails. The Kubernetes
side is a fake API server on 127.0.0.1 that the official client talks to: no cluster."""

from __future__ import annotations

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from kubernetes import client
from launcher import main
from launcher.run_status import RunStatus, Schedule
from launcher.status_publisher import ANNOTATION, StatusPublisher, kubernetes_patch


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def status(clock: Clock, **kwargs) -> RunStatus:
    kwargs.setdefault("schedule", Schedule(mtbf_s=3600.0))
    return RunStatus(restarts=kwargs.pop("restarts", 2), clock=clock, **kwargs)


def test_the_figures_follow_rank_0s_lines():
    clock = Clock()
    run = status(clock, resumed=(40, 900.0))
    assert not run.seen_rank0  # launcher lines are not rank 0's
    run.observe({"event": "launcher_start", "restart_attempt": 9})
    run.observe({"event": "resume_selected", "step": 40})
    assert not run.seen_rank0
    clock.now = 1_010.0
    run.observe({"event": "step", "step": 50, "loss": 0.61, "steps_per_s": 2.0, "total_steps": 250})
    clock.now = 1_030.0
    figures = run.snapshot()
    assert run.seen_rank0
    assert figures | {"updated": None} == {
        "v": 1, "step": 50, "total_steps": 250, "steps_per_s": 2.0, "eta_s": 100, "loss": 0.61,
        "checkpoint_step": 40, "checkpoint_time": "1970-01-01T00:15:00Z", "checkpoint_age_s": 130,
        # Young's interval for the first guess of a save's cost: sqrt(2 * 30 * 3600) = 464.76 s
        "checkpoint_intervals": round(130 / (2 * 30 * 3600) ** 0.5, 2),
        "since_step_s": 20, "restarts": 2, "updated": None}
    assert figures["updated"] == "1970-01-01T00:17:10Z"


def test_a_save_resets_the_checkpoint_age_and_its_cost_sets_the_expected_interval():
    clock = Clock()
    run = status(clock)
    run.observe({"event": "checkpoint_saved", "step": 80, "duration_s": 120.0, "ts": 995.0})
    clock.now = 1_995.0
    figures = run.snapshot()
    assert (figures["checkpoint_step"], figures["checkpoint_age_s"]) == (80, 1000)
    assert figures["checkpoint_intervals"] == round(1000 / (2 * 120 * 3600) ** 0.5, 2)
    # Without a step since this start, the time since a step counts from the start.
    assert figures["since_step_s"] == 995 and figures["eta_s"] is None and figures["step"] is None


@pytest.mark.parametrize(("schedule", "rate", "expected"), [
    (Schedule(3600.0, interval_override_s=600.0), 1.0, 600.0),   # TRAIN_CHECKPOINT_INTERVAL_S
    (Schedule(3600.0, every_steps=500), 2.0, 250.0),             # TRAIN_CHECKPOINT_EVERY_STEPS at the step rate
    (Schedule(3600.0, every_steps=500), None, None),             # steps mode before any rate: unknown
])
def test_the_expected_interval_is_the_workers_schedule(schedule, rate, expected):
    run = status(Clock(), schedule=schedule)
    if rate:
        run.observe({"event": "step", "step": 1, "steps_per_s": rate})
    assert run.expected_interval_s() == expected


def test_a_diverged_loss_is_shown_as_written_and_odd_fields_are_ignored():
    run = status(Clock())
    run.observe({"event": "loss", "step": 7, "loss": "nan"})
    run.observe({"event": "step", "step": True, "steps_per_s": "fast", "total_steps": -3})
    figures = run.snapshot()
    assert (figures["loss"], figures["step"], figures["steps_per_s"], figures["total_steps"]) == ("nan", 7, None, None)


def test_run_status_reads_the_total_steps_and_the_resumed_checkpoint(tmp_path, monkeypatch):
    from launcher import checkpoint, contract

    monkeypatch.setenv("TRAIN_CHECKPOINT_DIR", str(tmp_path))
    step = tmp_path / "step-000000040"
    step.mkdir()
    info = checkpoint.CheckpointInfo(step=40, path=str(step), complete=True)
    c = contract.Contract(nnodes=1, nproc_per_node=1, rdzv_host="h", rdzv_port=1, job_id="j", checkpoint_dir=str(tmp_path),
                          data_dir="/d", hparams_file="", checkpoint_interval_s=None, checkpoint_every_steps=None,
                          mtbf_s=7200.0, checkpoint_keep=3, heartbeat_file="/tmp/hb", collective_timeout_s=60,
                          log_every_steps=10)
    run = main.run_status(c, {"TRAIN_TOTAL_STEPS": "1000"}, 3, info)
    assert (run.total_steps, run.restarts, run.checkpoint_step) == (1000, 3, 40)
    assert run.checkpoint_time == pytest.approx(step.stat().st_mtime)
    assert main.run_status(c, {"TRAIN_TOTAL_STEPS": "lots"}, 0, None).total_steps is None


# --- publishing ---------------------------------------------------------------------------------

class Recorder:
    """The pod's patch function, faked: records, or fails as told."""

    def __init__(self, failures: list[Exception] | None = None, block: threading.Event | None = None):
        self.patches: list[dict] = []
        self.failures = failures or []
        self.block = block

    def __call__(self, annotations: dict[str, str]) -> None:
        if self.block is not None:
            self.block.wait(10)
        if self.failures:
            raise self.failures.pop(0)
        self.patches.append(annotations)


def publisher(run: RunStatus, patch, clock: Clock, lines: list, **kwargs) -> StatusPublisher:
    return StatusPublisher(run, None if patch is None else (lambda: patch), clock=clock,
                           write_log=lambda event, **fields: lines.append((event, fields)), **kwargs)


def test_nothing_is_published_by_a_pod_that_routes_no_rank_0_line():
    clock, lines, patch = Clock(), [], Recorder()
    pub = publisher(status(clock), patch, clock, lines)
    assert pub.publish_once() is False and patch.patches == [] and lines == []


def test_the_annotation_holds_the_figures_and_the_log_line_the_same():
    clock, lines, patch = Clock(), [], Recorder()
    run = status(clock)
    run.observe({"event": "step", "step": 5, "loss": 1.5, "steps_per_s": 4.0})
    assert publisher(run, patch, clock, lines).publish_once() is True
    (annotations,) = patch.patches
    assert list(annotations) == [ANNOTATION]
    published = json.loads(annotations[ANNOTATION])
    assert published == run.snapshot()
    assert lines == [("run_status", {k: v for k, v in published.items() if k not in ("v", "updated")})]


def test_an_api_failure_is_logged_once_backs_off_and_its_recovery_is_logged():
    clock, lines = Clock(), []
    patch = Recorder(failures=[client.ApiException(status=403, reason="Forbidden"),
                               client.ApiException(status=403, reason="Forbidden")])
    run = status(clock)
    run.observe({"event": "step", "step": 1})
    pub = publisher(run, patch, clock, lines, interval_s=60.0)
    assert pub.publish_once() is False
    assert [e for e, _ in lines] == ["run_status", "run_status_not_published"]
    assert lines[1][1]["retry_in_s"] == 60 and "Forbidden" in lines[1][1]["error"]
    clock.now += 30
    assert pub.publish_once() is False and len(patch.failures) == 1  # backing off: the API is not asked
    clock.now += 31
    assert pub.publish_once() is False and [e for e, _ in lines].count("run_status_not_published") == 1
    clock.now += 119  # the second failure doubled the wait
    assert pub.publish_once() is False and patch.patches == []
    clock.now += 2
    assert pub.publish_once() is True
    assert lines[-1] == ("run_status_published", {"after": "ApiException"})
    # The log line (the alarms' metrics) kept coming all along.
    assert [e for e, _ in lines].count("run_status") == 5


def test_an_image_without_the_client_stops_trying_and_says_why_once():
    clock, lines = Clock(), []
    run = status(clock)
    run.observe({"event": "step", "step": 1})

    def no_client():
        raise ImportError("No module named 'kubernetes'")

    pub = StatusPublisher(run, no_client, clock=clock, write_log=lambda event, **f: lines.append((event, f)))
    assert pub.publish_once() is False
    clock.now += 10_000
    assert pub.publish_once() is False
    assert [f for e, f in lines if e == "run_status_not_published"] == [
        {"error": "ImportError: No module named 'kubernetes'", "retry_in_s": None}]


def test_a_hung_api_never_holds_up_the_routed_lines():
    """The router thread (the workers' stdout) only updates figures; the API call is the publisher's."""
    gate = threading.Event()
    patch = Recorder(block=gate)
    run = RunStatus(restarts=0, schedule=Schedule(3600.0))
    run.observe({"event": "step", "step": 1})
    pub = StatusPublisher(run, lambda: patch, interval_s=0.01, write_log=lambda *a, **k: None)
    pub.start()
    try:
        time.sleep(0.1)  # the publisher is now stuck in the API call
        lines = b"".join(json.dumps({"event": "step", "step": n}).encode() + b"\n" for n in range(2, 2002))
        out = io.BytesIO()
        started = time.monotonic()
        main.route_output(io.BytesIO(lines), out, io.BytesIO(), observe=run.observe)  # pyright: ignore[reportArgumentType]
        assert time.monotonic() - started < 2.0
        assert out.getvalue() == lines and run.step == 2001
    finally:
        gate.set()
        pub.stop(wait_s=1.0)


def test_a_failing_observer_never_stops_the_routing():
    def broken(_record):
        raise RuntimeError("bug")

    out = io.BytesIO()
    main.route_output(io.BytesIO(b'{"event": "step", "step": 1}\nplain\n{"event": "x"}\n'), out, io.BytesIO(),  # pyright: ignore[reportArgumentType]
                      observe=broken)
    assert out.getvalue() == b'{"event": "step", "step": 1}\n{"event": "x"}\n'


def test_the_publisher_thread_publishes_every_interval_and_once_more_at_the_end():
    patch = Recorder()
    run = RunStatus(restarts=0, schedule=Schedule(3600.0))
    run.observe({"event": "step", "step": 1})
    pub = StatusPublisher(run, lambda: patch, interval_s=0.2, write_log=lambda *a, **k: None)
    pub.start()
    time.sleep(0.5)
    pub.stop(wait_s=2.0)
    assert 2 <= len(patch.patches) <= 4  # ~2 rounds in 0.5 s, then the last one


# --- the official client against a fake API server ---------------------------------------------

class FakeApiServer(BaseHTTPRequestHandler):
    requests: ClassVar[list[tuple[str, str, str, dict]]] = []

    def do_PATCH(self):  # http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeApiServer.requests.append((self.path, self.headers["Content-Type"], self.headers["Authorization"], body))
        reply = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def test_the_patch_is_a_merge_patch_of_the_pods_own_annotation():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApiServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_port}",
                                             # as load_incluster_config sets it
                                             api_key={"BearerToken": "bearer token-of-the-pod"})
        patch = kubernetes_patch("train-node-0-0-abcde", "team-vision", configuration)
        patch({ANNOTATION: '{"step":5}'})
    finally:
        server.shutdown()
    (request,) = FakeApiServer.requests
    assert request == ("/api/v1/namespaces/team-vision/pods/train-node-0-0-abcde", "application/merge-patch+json",
                       "bearer token-of-the-pod", {"metadata": {"annotations": {ANNOTATION: '{"step":5}'}}})
