"""The job context: the team stack writes, in its namespace, the non-secret config an ad-hoc job is
judged against (components/config/job_context.py); `gpu-training job submit` reads it live and
judges the job against it with the same config model, giving the same verdicts and the same JobSet
as the offline path. The recorded ConfigMap is the one the team stack's own plan writes."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from job_command_runs import command_runner
from test_job_command import ADHOC, BAD_JOBS, STACK, FakeCluster, _job_file, _passing_pack

from components.config import ConfigError, TeamStackConfig
from components.config.job_context import (
    JOB_CONTEXT_CONFIG_MAP,
    JOB_CONTEXT_VERSION,
    KEYS,
    job_context_data,
    read_job_context,
)
from job_command.jobfile import load_team_job
from job_command.policy import PolicyVerdict
from job_command.seams import Seams
from offline.plan import REDACTED, synthesize

NAMESPACE = "team-vision"
# The API server refuses an object over 1 MiB (etcd's request limit, kubernetes docs "ConfigMaps":
# "The data stored in a ConfigMap cannot exceed 1 MiB"); the context stays a small fraction of it.
CONFIG_MAP_LIMIT_BYTES = 1024 * 1024


def _context_map(plan) -> dict[str, Any]:
    found = [m for m in plan.manifests_on(None)
             if m["kind"] == "ConfigMap" and m["metadata"]["name"] == JOB_CONTEXT_CONFIG_MAP]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def run(capfd):
    """main(argv, seams) -> (exit status, stdout, stderr)."""
    return command_runner(capfd)


@pytest.fixture(scope="module")
def recorded(plan_of) -> dict[str, Any]:
    """The ConfigMap as team-vision-prod's plan writes it (what `pulumi up` creates in the cluster)."""
    return _context_map(plan_of(STACK))


class ContextOnly:
    """A cluster that answers the job context read and fails the test on anything else."""

    def __init__(self, data: dict[str, Any] | None):
        self.data = data

    def job_context(self, namespace: str) -> dict[str, Any] | None:
        assert namespace == NAMESPACE
        return self.data

    def __getattr__(self, name: str) -> Any:
        pytest.fail(f"the cluster was called ({name}) beyond reading the job context")


# --- what the team stack writes -------------------------------------------------------------------

def test_the_team_stack_writes_its_job_context_in_its_namespace(recorded):
    assert recorded["metadata"]["namespace"] == NAMESPACE
    assert sorted(recorded["data"]) == sorted(KEYS)
    assert recorded["data"]["version"] == str(JOB_CONTEXT_VERSION)
    context = read_job_context(recorded["data"], stack=STACK, namespace=NAMESPACE)
    assert context.stack_jobs == ("vision-finetune",)
    # The team's secrets by name only, as the contract gives the platform's.
    assert context.team["gpu-training:secrets"] == {"wandb-api-key": "(not published)"}


def test_the_job_context_is_well_under_the_config_map_limit(recorded):
    size = len(json.dumps(recorded).encode())
    assert size < CONFIG_MAP_LIMIT_BYTES // 32, f"{size} bytes"


def test_no_secret_value_reaches_the_job_context():
    """A team stack with a secret's value set: the ConfigMap the plan writes names the secret only."""
    data = _context_map(synthesize(STACK, secret_overrides={
        "gpu-training:secrets": {"wandb-api-key": "s3cr3t-wandb-value"}}))["data"]
    text = json.dumps(data)
    assert "s3cr3t" not in text
    assert REDACTED not in text  # nothing secret at all: the plan shows any secret input as REDACTED
    assert json.loads(json.loads(data["team"])["gpu-training:secrets"]) == {"wandb-api-key": "(not published)"}


def test_any_secret_key_of_the_team_stays_out():
    """The config model refuses secrets outside `secrets`; were one there, the context leaves it out
    whole (published_config, as the platform contract does)."""
    data = job_context_data(stack=STACK, platform_config={}, project="gpu-training", stack_jobs=[],
                            team_engine_config={"gpu-training:costCenter": "s3cr3t-cc", "gpu-training:region": "us-east-1"},
                            team_secret_keys={"gpu-training:costCenter"})
    assert "s3cr3t" not in json.dumps(data)
    assert json.loads(data["team"]) == {"gpu-training:region": "us-east-1"}


# --- the reader: one version, clear errors ----------------------------------------------------------

@pytest.mark.parametrize(("data", "says", "fix"), [
    (None, "is missing (the team stack was deployed before it wrote one)", "pulumi up --stack team-vision-prod"),
    ({"version": str(JOB_CONTEXT_VERSION + 1)}, f"version: is {JOB_CONTEXT_VERSION + 1}, this command reads version",
     "update this checkout"),
    ({"version": "0"}, "version: is 0, this command reads version", "pulumi up --stack team-vision-prod"),
    ({"stack": "x"}, "version: is missing", "--job-context offline"),
])
def test_a_context_of_another_version_or_none_is_refused(data, says, fix):
    with pytest.raises(ConfigError) as raised:
        read_job_context(data, stack=STACK, namespace=NAMESPACE)
    text = str(raised.value)
    assert f"ConfigMap {JOB_CONTEXT_CONFIG_MAP} of namespace {NAMESPACE}" in text
    assert says in text and fix in text


def test_a_context_with_a_broken_part_names_it(recorded):
    data = {**recorded["data"], "platform": "not json", "stackJobs": "{}"}
    with pytest.raises(ConfigError) as raised:
        read_job_context(data, stack=STACK, namespace=NAMESPACE)
    assert "platform: is missing or not a JSON map" in str(raised.value)
    assert "stackJobs: is missing or not a JSON list" in str(raised.value)


# --- the command: live judges as offline does ---------------------------------------------------------

def test_live_and_offline_judge_a_job_alike(tmp_path, recorded):
    path = _job_file(tmp_path, ADHOC)
    live = load_team_job(STACK, path, context=read_job_context(recorded["data"], stack=STACK, namespace=NAMESPACE))
    offline = load_team_job(STACK, path)
    assert isinstance(live.team, TeamStackConfig)
    assert live.job == offline.job
    assert live.team.judged_platform.node_pools == offline.team.judged_platform.node_pools
    assert live.team.judged_platform.fabric == offline.team.judged_platform.fabric


def test_a_live_dry_run_prints_the_same_manifests_as_the_offline_one(tmp_path, run, recorded):
    path = str(_job_file(tmp_path, ADHOC))
    offline = run(["job", "submit", path, "--stack", STACK, "--dry-run"],
                  Seams(connect=_no_connect, policy=_passing_pack))
    live = run(["job", "submit", path, "--stack", STACK, "--dry-run", "--job-context", "live"],
               Seams(connect=lambda _: ContextOnly(recorded["data"]), policy=_passing_pack))
    assert offline[0] == live[0] == 0, live[2]
    assert live[1] == offline[1] and "kind: JobSet" in live[1]
    assert f"judged against: the deployed team stack (ConfigMap {JOB_CONTEXT_CONFIG_MAP}" in live[2]
    assert "judged against: this checkout" in offline[2]


@pytest.mark.parametrize(("family", "job", "says", "fix"), BAD_JOBS, ids=[case[0] for case in BAD_JOBS])
def test_live_gives_the_offline_verdicts_and_creates_nothing(tmp_path, family, job, says, fix, run, recorded):
    path = _job_file(tmp_path, job)
    code, out, err = run(["job", "submit", str(path), "--stack", STACK],
                         Seams(connect=lambda _: ContextOnly(recorded["data"]), policy=_no_policy))
    offline = run(["job", "submit", str(path), "--stack", STACK, "--job-context", "offline"],
                  Seams(connect=_no_connect, policy=_no_policy))
    assert code == offline[0] == 2 and out == ""
    assert f"{path}: {says}" in err and fix in err
    assert err == offline[2]


def test_a_live_context_of_the_platform_as_deployed_is_what_judges(tmp_path, run, recorded):
    """The deployed platform's gpu-spot pool has 4-GPU nodes, this checkout's 8-GPU ones: live refuses
    the 8-GPU job the checkout accepts."""
    platform = json.loads(recorded["data"]["platform"])
    pools = json.loads(platform["gpu-training:nodePools"])
    spot = next(pool for pool in pools if pool["name"] == "gpu-spot")
    # Half the GPUs per node, twice the nodes: the pool holds the quotas it did (the registry's sum).
    spot["instanceTypes"], spot["size"]["max"] = ["g6.12xlarge", "g5.12xlarge"], spot["size"]["max"] * 2
    platform["gpu-training:nodePools"] = json.dumps(pools)
    data = {**recorded["data"], "platform": json.dumps(platform)}
    path = _job_file(tmp_path, ADHOC)
    code, _, err = run(["job", "submit", str(path), "--stack", STACK],
                       Seams(connect=lambda _: ContextOnly(data), policy=_no_policy))
    assert code == 2
    assert f"{path}: gpusPerNode: exceeds the 4 GPUs of one g6.12xlarge node (got 8)" in err
    assert run(["job", "submit", str(path), "--stack", STACK, "--dry-run"],
               Seams(connect=_no_connect, policy=_passing_pack))[0] == 0


def test_a_job_the_pack_refuses_live_is_refused_after_the_context_read_only(tmp_path, run, recorded):
    def refusing_pack(stack: str, job: dict[str, Any]) -> PolicyVerdict:
        return PolicyVerdict(True, "plan: 1 mandatory, 0 advisory\n  mandatory some-policy  urn:...vision-adhoc")

    code, out, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", STACK],
                         Seams(connect=lambda _: ContextOnly(recorded["data"]), policy=refusing_pack))
    assert code == 2 and out == "" and "the policy pack refuses job vision-adhoc" in err


@pytest.mark.parametrize(("data", "says"), [
    (None, "is missing"),
    ({"version": str(JOB_CONTEXT_VERSION + 1)}, "update this checkout to the commit the team stack was deployed from"),
])
def test_submit_without_a_readable_context_exits_2(tmp_path, run, data, says):
    code, out, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", STACK],
                         Seams(connect=lambda _: ContextOnly(data), policy=_no_policy))
    assert code == 2 and out == "" and says in err and "Traceback" not in err


def test_a_live_submit_reads_the_context_and_submits_on_one_connection(tmp_path, run, recorded):
    connections: list[FakeCluster] = []

    def connect(_: argparse.Namespace) -> FakeCluster:
        connections.append(FakeCluster(None, recorded["data"]))
        return connections[-1]

    code, _, err = run(["job", "submit", str(_job_file(tmp_path, ADHOC)), "--stack", STACK],
                       Seams(connect=connect, policy=_passing_pack))
    assert code == 0, err
    assert len(connections) == 1
    assert [call[0] for call in connections[0].calls] == ["job_context", "jobset", "submit"]


def test_the_clients_read_of_the_context(recorded):
    """job_command.cluster.JobCluster over a stand-in of CoreV1Api: the ConfigMap by name, 404 as None."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from job_command.cluster import JobCluster

    class Response:
        data = json.dumps(recorded).encode()

    class Core:
        def __init__(self, found: bool):
            self.found = found

        def read_namespaced_config_map(self, name, namespace, **_):
            assert (name, namespace) == (JOB_CONTEXT_CONFIG_MAP, NAMESPACE)
            if not self.found:
                raise ApiException(status=404, reason="Not Found")
            return Response()

    cluster = JobCluster(client.ApiClient())
    cluster.core = Core(found=True)  # type: ignore[assignment]
    assert cluster.job_context(NAMESPACE) == recorded["data"]
    cluster.core = Core(found=False)  # type: ignore[assignment]
    assert cluster.job_context(NAMESPACE) is None


# --- helpers ---------------------------------------------------------------------------------------------

def _no_connect(_: argparse.Namespace) -> Any:
    pytest.fail("the command connected to a cluster for an offline judgement")


def _no_policy(stack: str, job: dict[str, Any]) -> Any:
    pytest.fail("the policy pack ran on a job that failed validation")


def test_a_job_file_that_is_not_one_job_fails_before_any_connection(tmp_path, run):
    path = tmp_path / "job.yaml"
    path.write_text("- not\n- a mapping\n")
    code, out, err = run(["job", "submit", str(path), "--stack", STACK], Seams(connect=_no_connect, policy=_no_policy))
    assert code == 2 and out == "" and "must hold one job" in err
