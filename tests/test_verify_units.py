"""scripts/verify's pure parts, with tables: nccl-tests output (recorded), the reference table,
the loss trend test, the checkpoint cadence, the NCCL JobSet, and what the stacks export."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from launcher import fabric, gang
from stack_configs import MANIFEST_STACKS

from verify import checks, nccl_job, nccl_output, nccl_reference, progress_log
from verify.stack_outputs import JobPromise, UsageError, parse_outputs

SAMPLES = Path(__file__).parent / "fixtures" / "nccl"
# NCCL falling back to sockets on an EFA pool, as it logs it (tests/trainer/test_fabric_check.py).
FABRIC_FALLBACK_LINES = ["node-0:10208:10226 [0] NCCL INFO Using network Socket"]


def _refuse(_address: tuple[str, int], _timeout: float) -> object:
    raise ConnectionRefusedError("no rendezvous yet")


# --- nccl-tests output -------------------------------------------------------------------------
@pytest.mark.parametrize(("sample", "rows", "size", "out_of_place", "in_place", "avg"), [
    # srun-prefixed excerpt, 2 nodes p4de, no footer
    ("p4de-2node-allreduce-awsome.txt", 29, 2147483648, 78.33, 78.33, None),
    ("p5-2node-allreduce-awsome.txt", 31, 2147483648, 443.72, 442.06, None),
    # mpirun --tag-output prefix, footer with the average; '...' elision in the original
    ("p5-2node-eks-mpijob-tagged-output-awsome.txt", 7, 2147483648, 437.79, 437.89, 52.9753),
    ("p5-1node-awsbatch-awsome.txt", 32, 17179869184, 483.05, 483.35, 156.742),
    # unprefixed full header (nThread, devices, NCCL version), trailing spaces
    ("l40s-2node-1gpu-socket-fullheader.txt", 31, 8589934592, 8.11, 8.12, 3.98762),
])
def test_recorded_outputs_parse(sample, rows, size, out_of_place, in_place, avg):
    result = nccl_output.parse((SAMPLES / sample).read_text())
    assert len(result.rows) == rows
    row = result.row_at(size)
    assert row is not None and (row.out_of_place_busbw, row.in_place_busbw) == (out_of_place, in_place)
    assert result.avg_busbw == avg
    assert result.wrong_values == 0


@pytest.mark.parametrize(("text", "error"), [
    ("", "no nccl-tests result header"),
    ("NCCL INFO NET/Socket : Using [0]eth0\n", "no nccl-tests result header"),
    ("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n", "no result row"),
])
def test_output_without_results_is_an_error(text, error):
    with pytest.raises(nccl_output.NcclOutputError, match=error):
        nccl_output.parse(text)


def test_wrong_values_and_failed_footer_are_counted():
    text = (SAMPLES / "l40s-2node-1gpu-socket-fullheader.txt").read_text()
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("4294967296"))
    lines[row] = lines[row].rstrip()[:-1] + "3"  # the in-place #wrong column
    broken = "\n".join(lines).replace("# Out of bounds values : 0 OK", "# Out of bounds values : 2 FAILED")
    assert nccl_output.parse(broken).wrong_values == 5


# --- reference table -------------------------------------------------------------------------
def test_every_reference_names_a_source_and_a_date_and_matches_its_recorded_output():
    for ref in nccl_reference.REFERENCES.values():
        assert "@" in ref.source and ref.published
    for instance, sample in (("p4de.24xlarge", "p4de-2node-allreduce-awsome.txt"),
                             ("p5.48xlarge", "p5-2node-allreduce-awsome.txt")):
        row = nccl_output.parse((SAMPLES / sample).read_text()).row_at(nccl_reference.REFERENCE_SIZE_BYTES)
        assert row is not None and row.out_of_place_busbw == nccl_reference.REFERENCES[instance].busbw_gbps


@pytest.mark.parametrize(("types", "expected"), [
    (("p5.48xlarge",), 443.72),
    (("p4d.24xlarge", "p4de.24xlarge"), 77.35),  # the slower type of a mixed pool
    (("p5en.48xlarge",), None),  # no published figure: no threshold invented
    (("g6.48xlarge", "g5.48xlarge"), None),
    (("p5.48xlarge", "g6e.48xlarge"), None),
])
def test_reference_for_a_pool(types, expected):
    ref = nccl_reference.reference_for(types)
    assert (ref.busbw_gbps if ref else None) == expected


def _run(types=("p5.48xlarge",), nodes=2, efa=32, gpus=8):
    from components.config import Taint
    from verify.stack_outputs import PoolPromise

    pool = PoolPromise("p5-efa", gpus, efa, types, (Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule"),))
    return nccl_job.NcclRun("verify-nccl-p5-efa-00001", pool, nodes, "r.example/nccl@sha256:" + "b" * 64)


def test_type_without_reference_reports_the_number_and_is_not_judged():
    result = nccl_job.evaluate(_run(types=("p5en.48xlarge",)), (SAMPLES / "p5-2node-allreduce-awsome.txt").read_text(), "ns")
    assert result.status.value == "warn"
    assert "443.72 GB/s" in result.summary and "no published 2-node reference for p5en.48xlarge" in result.summary


def test_run_shape_other_than_the_reference_is_not_judged():
    result = nccl_job.evaluate(_run(nodes=4), (SAMPLES / "p5-2node-allreduce-awsome.txt").read_text(), "ns")
    assert result.status.value == "warn" and "this run used 4" in result.summary


def test_output_without_the_2gib_row_fails():
    text = "\n".join(line for line in (SAMPLES / "p5-2node-allreduce-awsome.txt").read_text().splitlines()
                     if "2147483648" not in line)
    assert nccl_job.evaluate(_run(), text, "ns").summary == "no 2 GiB row in the output"


# --- the NCCL JobSet ----------------------------------------------------------------------------
def test_nccl_jobset_is_queued_pinned_and_shaped_like_training(plan_of):
    outputs = parse_outputs("prod", plan_of("prod").outputs)
    run = nccl_job.NcclRun("verify-nccl-p5-efa-00001", outputs.pools["p5-efa"], 2, "r.example/nccl@sha256:" + "b" * 64)
    manifest = nccl_job.jobset_manifest(run, outputs)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == outputs.local_queue
    assert manifest["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    worker, launcher = manifest["spec"]["replicatedJobs"]
    assert worker["template"]["spec"]["parallelism"] == 2
    pod = worker["template"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"].endswith("@sha256:" + "b" * 64)
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert container["resources"]["requests"]["vpc.amazonaws.com/efa"] == "32"
    assert "hugepages-2Mi" not in container["resources"]["requests"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["NCCL_DEBUG"] == "INFO"
    assert pod["nodeSelector"] == {"gpu-training/pool": "p5-efa"}
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["securityContext"]["sysctls"] == [{"name": "net.ipv4.ip_local_port_range", "value": "50000 51999"}]
    script = launcher["template"]["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "-np 16 -N 8" in script and "-e 2G" in script and "-x FI_PROVIDER=efa" in script
    assert f"{run.name}-worker-0-1.{run.name} slots=8" in script
    assert "sshd -D -e -p 29400" in pod["containers"][0]["command"][-1]


def test_socket_pool_gets_no_efa_resources_or_env(plan_of):
    outputs = parse_outputs("prod", plan_of("prod").outputs)
    run = nccl_job.NcclRun("verify-nccl-gpu-spot-00001", outputs.pools["gpu-spot"], 2, "r.example/n@sha256:" + "c" * 64)
    container = nccl_job.jobset_manifest(run, outputs)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["containers"][0]
    assert "vpc.amazonaws.com/efa" not in container["resources"]["requests"]
    assert "FI_PROVIDER" not in {e["name"] for e in container["env"]}


def test_ssh_key_pair_is_openssh_ed25519():
    private, public = nccl_job.ssh_key_pair()
    assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and public.startswith("ssh-ed25519 ")


# --- loss trend and checkpoint cadence -------------------------------------------------------------
def test_trend_needs_many_points_and_ignores_a_single_pair():
    rng = random.Random(1)
    falling = [2.0 * math.exp(-i / 50) + rng.uniform(-0.05, 0.05) for i in range(200)]
    flat = [1.0 + rng.uniform(-0.05, 0.05) for _ in range(200)]
    flat_but_last_lower = [*flat[:-1], 0.5]  # one good pair of numbers is not a trend
    assert progress_log.loss_trend(falling).falling
    assert not progress_log.loss_trend(flat).falling
    assert not progress_log.loss_trend(flat_but_last_lower).falling
    assert not progress_log.loss_trend([3.0, 2.0, 1.0]).falling  # too few points
    assert not progress_log.loss_trend([1.0 + i / 100 for i in range(50)]).falling  # rising
    assert progress_log.loss_trend([2.0] * 20 + [1.0] * 20).falling  # ties handled


def _events(*records) -> list[progress_log.Event]:
    return progress_log.parse_events("\n".join(json.dumps(r) for r in records))


@pytest.mark.parametrize(("saves", "now", "late"), [
    ([600, 1200, 1800], 2000, False),
    ([600], 2000, True),  # 1400 s since the last save, period 600
    ([], 1100, False),    # first save not yet due twice over
    ([], 1300, True),
])
def test_checkpoint_cadence_by_time(saves, now, late):
    events = _events({"ts": 0, "event": "trainer_start", "checkpoint_interval_s": 600, "checkpoint_every_steps": None},
                     *[{"ts": t, "event": "checkpoint_saved", "next_interval_s": 600, "extra": [1]} for t in saves])
    cadence = progress_log.checkpoint_cadence(progress_log.current_run(events), now)
    assert cadence is not None and cadence.late is late


def test_checkpoint_cadence_by_steps_and_after_the_end():
    events = _events({"ts": 0, "event": "trainer_start", "checkpoint_every_steps": 100, "start_step": 0},
                     *[{"ts": i, "event": "step", "step": i, "loss": 1.0} for i in range(1, 260)],
                     {"ts": 100, "event": "checkpoint_saved", "step": 100})
    assert not progress_log.checkpoint_cadence(events, 1e9).late  # 159 steps since the save: < 2 x 100
    later = [*events, *_events(*[{"ts": i, "event": "step", "step": i} for i in range(260, 320)])]
    assert progress_log.checkpoint_cadence(later, 1e9).late  # 219 steps since the save
    finished = _events({"ts": 0, "event": "trainer_start", "checkpoint_interval_s": 60},
                       {"ts": 50, "event": "checkpoint_saved", "next_interval_s": 60},
                       {"ts": 70, "event": "training_complete"})
    assert not progress_log.checkpoint_cadence(finished, 10_000).late


def test_log_lines_are_read_by_event_name_only():
    text = ('noise\n{"ts":1,"event":"step","step":1,"loss":2.0,"new_field":{"a":1}}\n'
            '[rank0]: {"ts":2,"event":"brand_new_event"}\n{"not":"an event"}\n{broken json "event"\n'
            'launcher: error: TRAIN_RDZV_PORT must be between 1024 and 65535, got 80\n')
    assert [e.name for e in progress_log.parse_events(text)] == ["step", "brand_new_event"]
    assert progress_log.launcher_errors(text) == ["launcher: error: TRAIN_RDZV_PORT must be between 1024 and 65535, got 80"]


@pytest.mark.parametrize(("line", "kind"), [
    ("launcher: error: TRAIN_RDZV_PORT must be between 1024 and 65535, got 80", "config"),
    ("launcher: error: the rendezvous host job-node-0-0.job:29400 was not reachable within 900 s", "rendezvous"),
    ("launcher: error: fabric check failed on an EFA pool: NCCL chose Socket", "fabric"),
    ("launcher: error: cannot start torchrun: [Errno 2] No such file or directory", "start"),
    ("launcher: error: the gang has restarted 24 times, more than TRAIN_MAX_GANG_RESTARTS=23", "budget"),
])
def test_launcher_errors_are_told_apart(line, kind):
    """Every `launcher: error:` line was "the launcher rejected its configuration", an unreachable
    rendezvous and a fabric failure included."""
    assert progress_log.launcher_error_kind(line) == kind
    summary, cause = checks.LAUNCHER_ERRORS[kind]
    assert summary and cause


def test_the_launchers_own_messages_are_told_apart():
    """The words verify matches for the rendezvous, the restart budget and the fabric check are the
    launcher's own messages: a reworded one would read as a config error."""
    with pytest.raises(gang.GangError) as unreachable:
        gang.wait_for_rendezvous("job-node-0-0.job", 29400, 0.0, connect=_refuse, sleep=lambda _s: None)
    assert progress_log.launcher_error_kind(f"launcher: error: {unreachable.value}") == "rendezvous"
    with pytest.raises(gang.GangError) as spent:
        gang.check_restart_budget({gang.RESTART_ATTEMPT_VAR: "24", gang.MAX_RESTARTS_VAR: "23"})
    assert progress_log.launcher_error_kind(f"launcher: error: {spent.value}") == "budget"
    check = fabric.NetworkCheck()
    line = next(line for line in FABRIC_FALLBACK_LINES if check.feed(line))
    assert line and progress_log.launcher_error_kind(f"launcher: error: {fabric.failure_message(check)}") == "fabric"


@pytest.mark.parametrize(("step_times", "stall"), [
    ([], 600.0),                              # nothing to learn from: the floor
    ([0.0, 10.0, 20.0, 30.0], 600.0),         # steps logged every 10 s: the floor
    ([0.0, 400.0, 800.0, 1200.0], 1200.0),    # logged every 400 s (log_every steps): three gaps
    ([0.0, 400.0, 800.0, 800.0], 1200.0),     # a repeated stamp is no gap
])
def test_a_hang_is_judged_against_how_often_steps_are_logged(step_times, stall):
    assert progress_log.stall_after_seconds(step_times, 600.0) == stall


# --- what the stacks export, and the names verify looks for ---------------------------------------
@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_stack_exports_what_verify_reads(plan_of, stack):
    outputs = parse_outputs(stack, plan_of(stack).outputs)
    assert outputs.jobs and outputs.namespace and outputs.local_queue == "training"
    for job in outputs.jobs.values():
        assert outputs.pools[job.pool].gpus_per_node >= job.gpus_per_node


@pytest.mark.parametrize(("kubeconfig", "expected"), [
    ({"clusters": []}, {"clusters": []}),
    ('{"clusters": []}', {"clusters": []}),
    ("[secret]", None),       # `pulumi stack output` without --show-secrets
    ("[1, 2]", None), ("not json", None), (None, None), (3, None),
])
def test_the_kubeconfig_output_is_read_as_a_mapping_or_its_json_text_only(plan_of, kubeconfig, expected):
    assert parse_outputs("dev", {**plan_of("dev").outputs, "kubeconfig": kubeconfig}).kubeconfig == expected


def test_missing_outputs_are_listed_together():
    with pytest.raises(UsageError, match=r"clusterName: expected str.*nodePools: expected dict.*training: expected dict"):
        parse_outputs("old", {"region": "us-east-1"})


def test_controllers_verify_expects_are_the_releases_the_plan_installs(plan_of):
    releases = {(r["inputs"]["namespace"], r["inputs"]["name"]) for r in plan_of("prod").resources
                if r["type"] == "kubernetes:helm.sh/v3:Release"}
    # Each expected workload lives in a namespace the plan installs a release of its chart into.
    chart_of = {"cluster-autoscaler-aws-cluster-autoscaler": "cluster-autoscaler", "kueue-controller-manager": "kueue",
                "jobset-controller": "jobset", "external-secrets": "external-secrets",
                "external-secrets-webhook": "external-secrets", "external-secrets-cert-controller": "external-secrets",
                "nvidia-device-plugin": "nvidia-device-plugin", "aws-efa-k8s-device-plugin": "aws-efa-k8s-device-plugin"}
    for controller in checks.CONTROLLERS:
        assert (controller.namespace, chart_of[controller.name]) in releases, controller


def test_the_hang_diagnosis_names_the_fabric_security_group_the_plan_creates_for_each_pool(plan_of):
    plan = plan_of("prod")  # an EFA pool and a socket pool
    outputs = parse_outputs("prod", plan.outputs)
    groups = {r["inputs"]["name"] for r in plan.of_type("aws:ec2/securityGroup:SecurityGroup")}
    ctx = checks.Context("prod", outputs, kube=None, cloudwatch=lambda: None, now=0.0)  # the diagnosis reads outputs only
    causes = {}
    for pool in (p for p in outputs.pools.values() if p.gpu):
        group = checks.fabric_security_group(outputs.cluster_name, pool)
        assert group in groups, (group, sorted(groups))
        hang = checks._hang(ctx, checks.JobState(JobPromise("j", pool.name, 2, pool.gpus_per_node)), "j-node-0-0-abcde")
        assert f"fabric security group {group}," in hang.cause and f"Values={group} " in hang.command
        assert "kubectl -n training-prod exec j-node-0-0-abcde -- cat /proc/sys/net/ipv4/ip_local_port_range" in hang.command
        causes["efa" if pool.efa_per_node else "socket"] = hang.cause
    assert "all traffic between its members" in causes["efa"]
    assert "opens only TCP 29400 and 50000-51999 between its members" in causes["socket"]


def test_each_node_not_ready_shows_its_own_reason_and_the_kubelets_message(plan_of):
    class Kube:
        def nodes(self):
            return [{"metadata": {"name": "ip-10-0-0-5"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                    {"metadata": {"name": "ip-10-0-0-6"}, "status": {"conditions": [
                        {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                         "message": "container runtime network not ready: NetworkReady=false\n cni plugin not initialized"}]}},
                    {"metadata": {"name": "ip-10-0-0-7"}, "status": {}}]  # registered, no status posted yet

    ctx = checks.Context("prod", parse_outputs("prod", plan_of("prod").outputs), kube=Kube(), cloudwatch=lambda: None, now=0.0)
    result = checks.check_nodes(ctx)
    assert result.summary == "2 of 3 nodes not Ready"
    assert result.details == (
        "ip-10-0-0-6: Ready=False (KubeletNotReady: container runtime network not ready: NetworkReady=false cni plugin "
        "not initialized)",
        "ip-10-0-0-7: Ready=Unknown (no reason)")
    assert result.diagnosis is not None and result.diagnosis.command == "kubectl describe node ip-10-0-0-6"


@pytest.mark.parametrize(("instance_type", "efa", "pod_ips"), [
    ("p5.48xlarge", True, 49),      # 2 ENI slots on card 0, one taken by the efa-only interface: 1 x 49
    ("p5en.48xlarge", True, 147),   # 4 slots, 3 for the CNI
    ("g6e.12xlarge", True, 261),    # 10 slots, 9 x 29
    ("g6.2xlarge", False, 56),      # a socket pool keeps every slot: 4 x 14
])
def test_the_cni_pod_ip_ceiling_leaves_out_the_efa_only_slot(instance_type, efa, pod_ips):
    from components.facts.instance_types import INSTANCE_TYPES
    from verify.first_node import cni_pod_ips

    assert cni_pod_ips(INSTANCE_TYPES[instance_type], efa=efa) == pod_ips


# --- ci.runner-tags: the CI runners' instances ------------------------------------------------

class _Instances:
    """An EC2 client's describe_instances paginator over fixed instances (or an error)."""

    def __init__(self, instances: list[dict] | Exception):
        self.instances = instances
        self.filters: list[dict] = []

    def get_paginator(self, operation: str):
        assert operation == "describe_instances"
        return self

    def paginate(self, Filters: list[dict]):  # noqa: N803 (boto3's name)
        self.filters = Filters
        if isinstance(self.instances, Exception):
            raise self.instances
        return [{"Reservations": [{"Instances": self.instances[:1]}]}, {"Reservations": [{"Instances": self.instances[1:]}]}]


def _runner(instance_id: str, hours_up: float, **tags: str) -> dict:
    from datetime import UTC, datetime, timedelta

    return {"InstanceId": instance_id, "LaunchTime": datetime(2026, 12, 1, tzinfo=UTC) - timedelta(hours=hours_up),
            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}


NOW = 1_796_083_200.0  # 2026-12-01T00:00:00Z
TAGGED = {"environment": "prod", "project": "gpu-training"}


def _runner_outputs(group: str | None = "sg-0123456789abcdef0"):
    from verify.stack_outputs import StackOutputs

    return StackOutputs(cluster_name="gpu-training-prod", region="us-east-1", kubeconfig=None, pools={}, namespace="training",
                        local_queue="training", secret=None, jobs={}, nccl_ports=(50000, 51000), rendezvous_port=29400,
                        environment="prod", ci_runner_security_group=group)


@pytest.mark.parametrize(("instances", "status", "summary"), [
    ([_runner("i-1", 0.5, **TAGGED), _runner("i-2", 2, **TAGGED)], "pass",
     "2 runner instances tagged environment=prod, project=gpu-training"),
    ([_runner("i-1", 0.5, **TAGGED), _runner("i-2", 30, **TAGGED)], "warn", "1 up for more than 24 h"),
    ([_runner("i-1", 0.5, **TAGGED), _runner("i-2", 1, environment="prod", project="other")], "fail",
     "1 of 2 runner instances lack their environment/project tags"),
    ([], "skip", "no instance in the runners' security group sg-0123456789abcdef0"),
    (RuntimeError("Unable to locate credentials"), "fail", "cannot list the CI runners' instances"),
])
def test_the_runner_tag_check(instances, status, summary):
    from verify import ci_runners

    ec2 = _Instances(instances)
    result = ci_runners.check_runner_tags(_runner_outputs(), "gpu-training", lambda: ec2, NOW)
    assert result.status.value == status and summary in result.summary, result
    assert {"Name": "instance.group-id", "Values": ["sg-0123456789abcdef0"]} in ec2.filters
    if status == "warn":
        assert result.details == ("i-2",)


def test_a_team_stack_has_no_runners_to_check():
    from verify import ci_runners

    def no_client():
        raise AssertionError("a team stack's check must not call EC2")

    result = ci_runners.check_runner_tags(_runner_outputs(group=None), "gpu-training", no_client, NOW)
    assert result.status.value == "skip" and "team stack" in result.summary


def test_the_outputs_name_the_runner_group_of_a_platform_stack_only(plan_of):
    prod = parse_outputs("prod", plan_of("prod").outputs)
    assert prod.environment == "prod" and prod.ci_runner_security_group == plan_of("prod").outputs["ciRunnerSecurityGroupId"]
    assert prod.ci_runner_security_group
    team = parse_outputs("team-vision-prod", plan_of("team-vision-prod").outputs)
    assert team.environment == "prod" and team.ci_runner_security_group is None


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_a_planned_jobset_promises_what_the_stack_outputs_promise(stack, plan_of):
    """verify --job reads an ad-hoc job's shape from its JobSet (issue 42): on the plan's own JobSets,
    that reading must equal the stack's outputs, and a JobSet of another shape promises nothing."""
    from verify.stack_outputs import promise_of_jobset

    plan = plan_of(stack)
    outputs = parse_outputs(stack, plan.outputs)
    jobsets = [m for m in plan.manifests() if m["kind"] == "JobSet" and m["metadata"]["name"] in outputs.jobs]
    assert jobsets
    for jobset in jobsets:
        assert promise_of_jobset(jobset) == outputs.jobs[jobset["metadata"]["name"]]
    other = json.loads(json.dumps(jobsets[0]))
    other["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "nccl"
    assert promise_of_jobset(other) is None
    assert promise_of_jobset({"metadata": {"name": "x"}}) is None
