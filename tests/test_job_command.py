"""`gpu-training job`: an ad-hoc job is judged, rendered, policed and priced as a stack job is,
nothing reaches the cluster before every check passed, and `status` reads Kueue/JobSet objects and
launcher lines (tests/fixtures/job_command/): written in the shape kueue v0.19.2 and jobset v0.12.0
give them (condition types, reasons and messages taken from their source: kueue
pkg/workload/admissionchecks.go, pkg/scheduler/flavorassigner, pkg/controller/core/workload_controller.go;
jobset pkg/constants), validated against their CRDs in schemas/crds/; not recorded from a live
cluster, which this machine has none of."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from crd_schemas import validate_custom_resource
from job_command_runs import command_runner

from components.config import TeamStackConfig
from components.config.node_pools import CAPACITY_TYPES
from components.facts.cost_model import NodePool, pool_cost
from components.facts.prices import region_prices
from components.workload.tenant import team_job_placement
from components.workload.training_job import job_objects
from job_command.cli import build_parser, main
from job_command.completion import bash_completion
from job_command.policy import POLICY_PYTHON, PolicyVerdict, pack_verdict, plan_with_job
from job_command.price import job_price
from job_command.seams import Seams
from job_command.status import JobState, job_status, parse_time, render_json, render_text
from offline.plan import manifest_yaml, planned_config

STACK = "team-vision-prod"
FIXTURES = Path(__file__).parent / "fixtures" / "job_command"
JOBSET_TYPE = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
# The stack file's job (stacks/Pulumi.team-vision-prod.yaml), as a job file under another name.
ADHOC = {"name": "vision-adhoc", "pool": "gpu-spot", "nodes": 2, "gpusPerNode": 8, "checkpointGiB": 4,
         "secrets": ["wandb-api-key"]}


class NoCluster:
    """A cluster the test fails on at the first touch: nothing may reach it."""

    def __getattr__(self, name: str) -> Any:
        pytest.fail(f"the cluster was called ({name}) although the job was refused")


def _no_connect(_: argparse.Namespace) -> Any:
    pytest.fail("the command connected to a cluster although the job was refused")


def _passing_pack(stack: str, job: dict[str, Any]) -> PolicyVerdict:
    return PolicyVerdict(False, f"plan of {stack} with the job: 0 mandatory, 0 advisory")


@pytest.fixture
def run(capfd):
    """main(argv, seams) -> (exit status, stdout, stderr)."""
    return command_runner(capfd)


def _job_file(tmp_path: Path, job: dict[str, Any]) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    return path


# --- one rendering ------------------------------------------------------------------------------

def test_a_stack_job_renders_as_the_plan_writes_it(plan_of):
    config = planned_config(STACK)
    assert isinstance(config, TeamStackConfig)
    job = config.training.jobs[0]
    rendered = job_objects(job, team_job_placement(config, job))
    planned = {(m["kind"], m["metadata"]["name"]): manifest_yaml(m) for m in plan_of(STACK).manifests_on(None)}
    assert planned[("JobSet", job.name)] == manifest_yaml(rendered.jobset)
    assert planned[("ConfigMap", f"{job.name}-hyperparameters")] == manifest_yaml(rendered.hyperparameters)
    assert rendered.disruption_budget is None  # a spot pool gets none, as the plan has none


def test_dry_run_prints_the_jobset_the_stack_would_plan_byte_for_byte(tmp_path, run):
    code, out, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", STACK, "--dry-run"],
                          Seams(connect=_no_connect, policy=_passing_pack))
    assert code == 0, err
    documents = out.split("---\n")
    printed_jobset = next(doc for doc in documents if doc.startswith("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet"))
    # The team stack planned with this job as one more training.jobs entry: what CI would plan.
    record = next(r for r in plan_with_job(STACK, ADHOC) if r["type"] == JOBSET_TYPE
                  and r["inputs"]["metadata"]["name"] == "vision-adhoc")
    assert printed_jobset == manifest_yaml(record["inputs"])
    assert "$" in err and "/h for 2 node(s)" in err


# --- bad input: exit 2, key + value + fix, nothing created -----------------------------------------

BAD_JOBS = [
    ("unknown key", {**ADHOC, "colour": "blue"}, "colour: unknown key", "Fix: remove it"),
    ("wrong type", {**ADHOC, "nodes": "two"}, "nodes: must be a whole number (got 'two')", "Fix:"),
    ("pool not in the platform", {**ADHOC, "pool": "gpu-nope"}, "pool: is not a GPU pool of this stack (got 'gpu-nope')",
     "Fix: use one of"),
    ("over the team quota", {**ADHOC, "nodes": 3}, "nodes: ", "raise the platform's teams[name=vision].gpuQuota.gpu-spot to at least 24"),
    ("spot grace too long", {**ADHOC, "terminationGracePeriodSeconds": 300}, "terminationGracePeriodSeconds: exceeds",
     "Fix: set at most 100"),
    ("missing secret", {**ADHOC, "secrets": ["hf-token"]}, "secrets: is not declared in the stack's secrets (got 'hf-token')",
     "Fix: declare it"),
    ("name of a stack job", {**ADHOC, "name": "vision-finetune"}, "name: is the name of a job of stack team-vision-prod",
     "Fix: give the ad-hoc job another name"),
]


@pytest.mark.parametrize(("family", "job", "says", "fix"), BAD_JOBS, ids=[case[0] for case in BAD_JOBS])
def test_bad_job_exits_2_naming_key_value_and_fix_before_anything_else(tmp_path, family, job, says, fix, run):
    def no_policy(stack: str, job: dict[str, Any]) -> PolicyVerdict:
        pytest.fail("the policy pack ran on a job that failed validation")

    path = _job_file(tmp_path, job)
    # Judged against this checkout: no cluster at all (tests/test_job_context.py: the same, live).
    code, out, err = run(["job", "submit", str(path), "--stack", STACK, "--job-context", "offline"],
                          Seams(connect=_no_connect, policy=no_policy))
    assert code == 2
    assert out == ""
    assert f"{path}: {says}" in err, err
    assert fix in err
    assert "Traceback" not in err


def test_a_job_the_pack_refuses_is_refused_before_any_api_call(tmp_path, run):
    def refusing_pack(stack: str, job: dict[str, Any]) -> PolicyVerdict:
        return PolicyVerdict(True, "plan: 1 mandatory, 0 advisory\n  mandatory some-policy  urn:...vision-adhoc\n  why")

    code, out, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", STACK, "--job-context", "offline"],
                          Seams(connect=lambda _: NoCluster(), policy=refusing_pack))
    assert code == 2 and out == ""
    assert "the policy pack refuses job vision-adhoc" in err and "some-policy" in err


@pytest.mark.skipif(not POLICY_PYTHON.is_file(), reason="the policy pack's venv is missing (make policy-venv)")
def test_the_real_pack_judges_the_job_in_its_stack():
    verdict = pack_verdict(STACK, ADHOC)
    assert not verdict.refused, verdict.report
    assert verdict.report.startswith(f"plan of {STACK} with the job: 0 mandatory")


def test_a_platform_stack_is_refused(tmp_path, run):
    code, _, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", "prod", "--dry-run"],
                        Seams(connect=_no_connect, policy=_passing_pack))
    assert code == 2 and "--stack: prod is not a team stack" in err


# --- price ----------------------------------------------------------------------------------------

def test_price_is_nodes_times_the_cost_models_node_price_and_total_over_the_stated_run():
    config = planned_config(STACK)
    assert isinstance(config, TeamStackConfig)
    job = config.training.jobs[0]
    pool = team_job_placement(config, job).pool
    node = pool_cost(NodePool(pool.name, pool.instance_types, CAPACITY_TYPES[pool.capacity], pool.min_size,
                              pool.max_size, pool.root_volume_gib), region_prices(config.region)).node_hourly_usd
    assert node is not None
    price = job_price(job, pool, config.region, steps=7200, steps_per_second=0.5)
    assert price.hourly_usd == pytest.approx(job.nodes * node)
    assert price.hours == pytest.approx(4.0)
    assert price.total_usd == pytest.approx(4.0 * job.nodes * node)
    assert job_price(job, pool, config.region).total_usd is None


# --- status from recorded objects and launcher lines -------------------------------------------------

def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


STATUS_CASES = [
    # (fixture, now, state, phrases the report must show)
    ("waiting-quota", "2026-12-06T10:01:00Z", JobState.WAITING,
     ["quota: WaitingForQuota: couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu "
      "in flavor gpu-spot, 16 more needed"]),
    ("waiting-provisioning", "2026-12-06T10:02:00Z", JobState.WAITING,
     ["admission check gpu-gang-provisioning (the cluster autoscaler brings up all the gang's nodes at once"]),
    ("running", "2026-12-06T10:30:00Z", JobState.RUNNING,
     ["step 1600/2000  1.25 steps/s  ETA 5m  loss 0.5821", "checkpoint: step 1000, committed 14m ago", "restarts: 1"]),
    ("stopped", "2026-12-06T12:01:00Z", JobState.STOPPED,
     ["why: Deactivated: The workload is deactivated", "submit the same job file again"]),
    ("finished", "2026-12-06T11:20:00Z", JobState.FINISHED,
     ["why: AllJobsCompleted: jobset completed successfully", "last step 2000/2000", "checkpoint: step 2000"]),
    ("failed", "2026-12-06T10:45:00Z", JobState.FAILED,
     ["ReachedMaxRestarts: jobset failed due to reaching max number of restarts", "restarts: 3", "Error (exit 1)"]),
]


@pytest.mark.parametrize(("name", "now", "state", "phrases"), STATUS_CASES, ids=[case[0] for case in STATUS_CASES])
def test_status_renders_recorded_objects(name, now, state, phrases):
    recorded = _fixture(name)
    status = job_status("vision-adhoc", jobset=recorded["jobset"], workload=recorded["workload"], pods=recorded["pods"],
                        logs=recorded["logs"], now=parse_time(now) or 0.0, node_hourly_usd=10.0)
    text = render_text(status)
    assert status.state is state
    for phrase in phrases:
        assert phrase in text, text
    assert json.loads(render_json(status))["state"] == str(state)


def test_running_status_figures():
    recorded = _fixture("running")
    now = parse_time("2026-12-06T10:30:00Z") or 0.0
    status = job_status("vision-adhoc", jobset=recorded["jobset"], workload=recorded["workload"], pods=recorded["pods"],
                        logs=recorded["logs"], now=now, node_hourly_usd=10.0)
    p = status.progress
    assert (p.step, p.total_steps, p.steps_per_s, p.loss, p.checkpoint_step) == (1600, 2000, 1.25, 0.5821, 1000)
    assert p.eta_s == pytest.approx(400 / 1.25)
    assert p.checkpoint_age_s == pytest.approx(now - parse_time("2026-12-06T10:15:45Z"))  # type: ignore[operator]
    # Two pods since 10:05: 2 x 25 min of nodes at $10 per node-hour.
    assert status.node_hours == pytest.approx(2 * 25 / 60)
    assert status.cost_to_date_usd == pytest.approx(10.0 * 2 * 25 / 60)


@pytest.mark.parametrize("name", [case[0] for case in STATUS_CASES])
def test_recorded_objects_are_valid_kueue_and_jobset_objects(name):
    recorded = _fixture(name)
    assert validate_custom_resource(recorded["workload"]) == []
    assert validate_custom_resource(recorded["jobset"]) == []


def test_the_crd_check_of_the_fixtures_can_fail():
    workload = _fixture("waiting-provisioning")["workload"]
    workload["status"]["admissionChecks"][0]["state"] = 5
    assert validate_custom_resource(workload) != []


def test_the_launchers_own_step_line_carries_what_status_reads(monkeypatch):
    from launcher.progress import Progress  # the trainer image's package (pyproject pythonpath)

    stream = io.StringIO()
    monkeypatch.setenv("TRAIN_JOB_ID", "vision-adhoc")
    monkeypatch.setenv("TRAIN_TENSORBOARD_DIR", "off")  # the step line only: no event file (launcher.events)
    monkeypatch.setattr("launcher.events._SHARED", None)
    Progress(heartbeat_file="", rank=0, local_rank=0, stream=stream).step(7, loss=0.5, samples=32)
    record = json.loads(stream.getvalue().splitlines()[-1])
    assert {"ts", "event", "step", "loss", "steps_per_s"} <= set(record) and record["event"] == "step"


# --- cluster commands against a recording fake ----------------------------------------------------

class FakeCluster:
    def __init__(self, recorded: dict[str, Any] | None, context: dict[str, Any] | None = None):
        self.recorded, self.context, self.calls = recorded, context, []

    def job_context(self, namespace: str) -> dict[str, Any] | None:
        """The data of the job context ConfigMap (tests/test_job_context.py)."""
        self.calls.append(("job_context", namespace, "gpu-training-job-context"))
        return self.context

    def jobset(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("jobset", namespace, name))
        return self.recorded["jobset"] if self.recorded else None

    def workload_of(self, namespace: str, jobset: dict[str, Any]) -> dict[str, Any] | None:
        return self.recorded["workload"] if self.recorded else None

    def pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.recorded["pods"] if self.recorded else []

    def log(self, namespace: str, pod: str) -> str:
        return (self.recorded or {}).get("logs", {}).get(pod, "")

    def stop(self, namespace: str, workload: dict[str, Any]) -> None:
        self.calls.append(("stop", namespace, workload["metadata"]["name"]))

    def delete(self, namespace: str, name: str) -> None:
        self.calls.append(("delete", namespace, name))

    def submit(self, objects) -> dict[str, Any]:
        self.calls.append(("submit", objects.jobset["metadata"]["namespace"], objects.jobset["metadata"]["name"]))
        self.submitted = objects
        return objects.jobset


def test_stop_deactivates_the_workload(run):
    cluster = FakeCluster(_fixture("running"))
    code, _, err = run(["job", "stop", "vision-adhoc", "--stack", STACK], Seams(connect=lambda _: cluster, policy=_passing_pack))
    assert code == 0
    assert ("stop", "team-vision", "jobset-vision-adhoc-8c6e1") in cluster.calls
    assert "/workspace/checkpoints/team-vision-prod/vision-adhoc" in err


@pytest.mark.parametrize(("recorded", "code", "calls"), [
    ("running", 2, []),
    ("stopped", 0, [("delete", "team-vision", "vision-adhoc"), ("submit", "team-vision", "vision-adhoc")]),
    (None, 0, [("submit", "team-vision", "vision-adhoc")]),
])
def test_submit_takes_a_name_only_from_a_job_that_no_longer_runs(tmp_path, recorded, code, calls, run, plan_of):
    context = next(m for m in plan_of(STACK).manifests_on(None) if m["metadata"]["name"] == "gpu-training-job-context")
    cluster = FakeCluster(_fixture(recorded) if recorded else None, context["data"])
    got, _, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", STACK],
                       Seams(connect=lambda _: cluster, policy=_passing_pack))
    assert got == code, err
    assert [call for call in cluster.calls if call[0] not in ("jobset", "job_context")] == calls


def test_a_submitted_jobset_says_it_is_ad_hoc_and_keeps_the_planned_spec(tmp_path, run, plan_of):
    context = next(m for m in plan_of(STACK).manifests_on(None) if m["metadata"]["name"] == "gpu-training-job-context")
    cluster = FakeCluster(None, context["data"])
    job_file = str(_job_file(tmp_path, ADHOC))
    assert run(["job", "submit", job_file, "--stack", STACK], Seams(connect=lambda _: cluster, policy=_passing_pack))[0] == 0
    _, printed, _ = run(["job", "submit", job_file, "--stack", STACK, "--dry-run"],
                        Seams(connect=_no_connect, policy=_passing_pack))
    planned = next(d for d in yaml.safe_load_all(printed) if d and d.get("kind") == "JobSet")
    sent = cluster.submitted.jobset
    assert sent["metadata"]["labels"] == {**planned["metadata"]["labels"], "gpu-training/submitted-by": "job-command"}
    assert sent["spec"] == planned["spec"]


@pytest.mark.parametrize("recorded", ["finished", "failed"])
def test_stop_of_a_job_that_no_longer_runs_changes_nothing(recorded, run):
    cluster = FakeCluster(_fixture(recorded))
    code, _, err = run(["job", "stop", "vision-adhoc", "--stack", STACK], Seams(connect=lambda _: cluster, policy=_passing_pack))
    assert code == 1 and recorded in err
    assert not [call for call in cluster.calls if call[0] == "stop"]


@pytest.mark.parametrize("args", [["status", "vision-adhoc", "--watch", "-1"],
                                  ["submit", "job.yaml", "--steps", "-5", "--steps-per-second", "2"],
                                  ["submit", "job.yaml", "--steps-per-second", "0"]])
def test_numbers_that_must_be_positive_exit_2_without_a_traceback(args, capfd):
    with pytest.raises(SystemExit) as exited:  # argparse's usage error
        main(["job", *args, "--stack", STACK], Seams(connect=_no_connect, policy=_passing_pack))
    err = capfd.readouterr().err
    assert exited.value.code == 2 and "invalid positive" in err and "Traceback" not in err


def test_logs_reads_the_pod_of_the_node_asked_for(capsys):
    cluster = FakeCluster(_fixture("running"))
    assert main(["job", "logs", "vision-adhoc", "--stack", STACK, "--rank", "1"],
                Seams(connect=lambda _: cluster, policy=_passing_pack)) == 0
    assert '"host": "vision-adhoc-node-0-1"' in capsys.readouterr().out


def test_bash_completion_is_valid_bash_and_knows_every_action():
    script = bash_completion(build_parser())
    for word in ("submit", "status", "logs", "stop", "list", "--dry-run", "--watch", "--follow"):
        assert word in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0


def test_a_refused_request_is_one_line_without_a_traceback(run):
    from kubernetes.client.exceptions import ApiException

    class Forbidden(FakeCluster):
        def jobset(self, namespace: str, name: str) -> dict[str, Any] | None:
            error = ApiException(status=403, reason="Forbidden")
            error.body = json.dumps({"kind": "Status", "message": 'jobsets.jobset.x-k8s.io "vision-adhoc" is forbidden: '
                                     'User "alice" cannot get resource "jobsets" in the namespace "team-vision"'})
            raise error

    code, out, err = run(["job", "stop", "vision-adhoc", "--stack", STACK],
                          Seams(connect=lambda _: Forbidden(None), policy=_passing_pack))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "HTTP 403 Forbidden" in err and 'cannot get resource "jobsets"' in err


def test_submit_takes_the_jobset_back_when_its_config_map_is_refused():
    """cluster.JobCluster itself, over stand-ins of the client's API objects."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from job_command.cluster import JobCluster

    calls: list[str] = []

    class Response:
        def __init__(self, body: dict[str, Any]):
            self.data = json.dumps(body).encode()

    class Custom:
        def create_namespaced_custom_object(self, group, version, namespace, plural, body, **_):
            calls.append(f"create {plural}/{body['metadata']['name']}")
            return Response({**body, "metadata": {**body["metadata"], "uid": "u-1"}})

        def delete_namespaced_custom_object(self, group, version, namespace, plural, name, **kwargs):
            calls.append(f"delete {plural}/{name} ({kwargs['propagation_policy']})")
            return Response({})

    class Core:
        def create_namespaced_config_map(self, namespace, body, **_):
            calls.append(f"create configmaps/{body['metadata']['name']} owned by "
                         f"{body['metadata']['ownerReferences'][0]['uid']}")
            raise ApiException(status=403, reason="Forbidden")

        def replace_namespaced_config_map(self, *args, **kwargs):
            pytest.fail("the command never updates a ConfigMap (the team's Role grants create only)")

    config = planned_config(STACK)
    assert isinstance(config, TeamStackConfig)
    job = config.training.jobs[0]
    cluster = JobCluster(client.ApiClient())
    cluster.custom, cluster.core = Custom(), Core()  # type: ignore[assignment]
    with pytest.raises(ApiException):
        cluster.submit(job_objects(job, team_job_placement(config, job)))
    assert calls == ["create jobsets/vision-finetune", "create configmaps/vision-finetune-hyperparameters owned by u-1",
                     "delete jobsets/vision-finetune (Foreground)"]


def test_status_command_prices_the_current_pods_at_the_pools_node_price(run):
    cluster = FakeCluster(_fixture("running"))
    now = parse_time("2026-12-06T10:30:00Z") or 0.0
    code, out, _ = run(["job", "status", "vision-adhoc", "--stack", STACK, "--json"],
                        Seams(connect=lambda _: cluster, policy=_passing_pack, now=lambda: now))
    assert code == 0
    report = json.loads(out)
    config = planned_config(STACK)
    assert isinstance(config, TeamStackConfig)
    pool = next(p for p in config.judged_platform.node_pools if p.name == "gpu-spot")
    node = job_price(config.training.jobs[0], pool, config.region).hourly_usd / config.training.jobs[0].nodes  # type: ignore[operator]
    assert report["state"] == "running" and report["progress"]["step"] == 1600
    assert report["cost_to_date_usd"] == pytest.approx(node * 2 * 25 / 60)
