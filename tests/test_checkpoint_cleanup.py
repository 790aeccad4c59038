"""Cleanup of what training leaves: which checkpoint directories go (a pure function, as a table),
one whole pass on a real directory tree, the CronJob as rendered (validated, scanned, admitted by
its namespace's Pod Security level), the EFS lifecycle and the autoscaler's scale-down timing."""

from __future__ import annotations

import os
import time
from pathlib import Path

import kubernetes_validate
import pytest
from plan_queries import kubernetes_minor
from pod_security import violations
from stack_configs import MANIFEST_STACKS, PROJECT, environment_of, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.workload import checkpoint_cleanup_script as script
from components.workload.checkpoint_cleanup import SCRIPT, cronjob_manifest
from components.workload.checkpoint_cleanup_script import Directory, select, unfinished_jobs
from components.workload.training_job import SUBMITTED_BY_JOB_COMMAND, SUBMITTED_BY_LABEL
from offline.plan import synthesize

NOW = 1_800_000_000.0
DAY = 86400.0


def days_ago(days: float) -> float:
    return NOW - days * DAY


# (case, directory, unfinished JobSets, removed?, reason contains)
SELECTION = [
    ("finished-and-old", Directory("old-run", days_ago(45)), set(), True, "unchanged for 45.0 days"),
    ("running-and-old", Directory("pretrain-p5", days_ago(400)), {"pretrain-p5"}, False, "has not finished"),
    ("running-and-new", Directory("pretrain-p5", days_ago(0.01)), {"pretrain-p5"}, False, "has not finished"),
    ("finished-recently", Directory("old-run", days_ago(29.9)), set(), False, "within 30 days"),
    ("exactly-the-age", Directory("old-run", days_ago(30)), set(), True, "(>= 30)"),
    ("another-job-runs", Directory("old-run", days_ago(45)), {"pretrain-p5"}, True, "finished or gone"),
    ("not-a-job-name", Directory("lost+found", days_ago(900)), set(), False, "not a job directory"),
    ("hidden", Directory(".snapshot", days_ago(900)), set(), False, "not a job directory"),
    ("upper-case", Directory("Old-Run", days_ago(900)), set(), False, "not a job directory"),
    ("a-file", Directory("notes", days_ago(900), is_plain_directory=False), set(), False, "not a plain directory"),
    ("from-the-future", Directory("skewed", NOW + DAY), set(), False, "clock skew"),
]


@pytest.mark.parametrize(("directory", "unfinished", "removed", "reason"), [c[1:] for c in SELECTION],
                         ids=[c[0] for c in SELECTION])
def test_which_directories_go(directory, unfinished, removed, reason):
    (decision,) = select([directory], unfinished=unfinished, now=NOW, max_age_days=30)
    assert decision.remove is removed and reason in decision.reason


def test_a_running_jobs_directory_stays_while_its_neighbours_go():
    decisions = select([Directory("pretrain-p5", days_ago(90)), Directory("old-run", days_ago(90)),
                        Directory("example-ddp", days_ago(2))], unfinished={"pretrain-p5"}, now=NOW, max_age_days=30)
    assert [(d.name, d.remove) for d in decisions] == [("example-ddp", False), ("old-run", True), ("pretrain-p5", False)]


def jobset(name: str, *conditions: tuple[str, str], terminal: str | None = None) -> dict:
    status: dict = {"conditions": [{"type": t, "status": s} for t, s in conditions]} if conditions else {}
    if terminal:
        status["terminalState"] = terminal
    return {"metadata": {"name": name}, "status": status}


def test_finished_jobsets_are_told_from_waiting_ones():
    listed = {"items": [
        jobset("done", ("Completed", "True")),
        jobset("broken", ("Failed", "True")),
        jobset("terminal", terminal="Completed"),
        jobset("queued", ("Suspended", "True")),          # Kueue holds it: must keep its checkpoints
        jobset("restarting", ("Completed", "False")),
        {"metadata": {"name": "fresh"}},                 # no status yet
    ]}
    assert unfinished_jobs(listed) == {"queued", "restarting", "fresh"}
    assert unfinished_jobs({"items": []}) == frozenset()


# --- one whole pass on a real tree --------------------------------------------------------------

def make_job_dir(root: Path, name: str, age_days: float, *, newest_file_age_days: float | None = None) -> Path:
    """<root>/<name>/step-000000010/rank-00000.pt, every mtime `age_days` old (one file maybe newer)."""
    step = root / name / "step-000000010"
    step.mkdir(parents=True)
    shard = step / "rank-00000.pt"
    shard.write_bytes(b"weights")
    old = time.time() - age_days * DAY
    for path in (shard, step, root / name):
        os.utime(path, (old, old))
    if newest_file_age_days is not None:
        recent = time.time() - newest_file_age_days * DAY
        os.utime(shard, (recent, recent))
    return root / name


class FakeApi:
    """The Kubernetes API as the script sees it: the JobSet list, then single JobSets."""

    def __init__(self, jobsets: list[dict], *, later: dict[str, dict] | None = None):
        self.jobsets = {j["metadata"]["name"]: j for j in jobsets}
        self.later = later or {}
        self.paths: list[str] = []

    def get(self, path: str):
        self.paths.append(path)
        if path.endswith("/jobsets"):
            return {"items": list(self.jobsets.values())}
        name = path.rsplit("/", 1)[-1]
        return self.later.get(name, self.jobsets.get(name))


def run(root: Path, api: FakeApi, *, dry_run: bool) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = script.run(root=str(root), namespace="training-prod", max_age_days=30, dry_run=dry_run,
                      get=api.get, log=lines.append)
    return code, lines


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "checkpoints"
    make_job_dir(root, "pretrain-p5", 60)                          # running (its JobSet unfinished), old files
    make_job_dir(root, "old-run", 60)                              # finished long ago
    make_job_dir(root, "gone-run", 45)                             # JobSet deleted
    make_job_dir(root, "touched-run", 60, newest_file_age_days=1)  # finished, but a file changed yesterday
    (root / "README").write_text("not a job")
    return root


def test_a_pass_removes_only_finished_old_directories(tmp_path):
    root = tree(tmp_path)
    api = FakeApi([jobset("pretrain-p5", ("Suspended", "False")), jobset("old-run", ("Completed", "True")),
                   jobset("touched-run", ("Failed", "True"))])
    code, lines = run(root, api, dry_run=False)
    assert code == 0
    assert sorted(p.name for p in root.iterdir()) == ["README", "pretrain-p5", "touched-run"]
    assert lines[0].startswith(f"checkpoint cleanup of {root} in namespace training-prod: 5 entries, "
                               "1 unfinished JobSets, 2 to remove after 30 days (removing)")
    # Every decision is logged before anything is removed.
    assert [line.split(":")[0] for line in lines[1:6]] == ["keep   README", "remove gone-run", "remove old-run",
                                                          "keep   pretrain-p5", "keep   touched-run"]
    assert lines[6:] == ["removed gone-run", "removed old-run"]
    # The API is asked again about each job just before its directory goes.
    assert api.paths[1:] == ["/apis/jobset.x-k8s.io/v1alpha2/namespaces/training-prod/jobsets/gone-run",
                             "/apis/jobset.x-k8s.io/v1alpha2/namespaces/training-prod/jobsets/old-run"]


def test_a_dry_run_logs_the_same_decisions_and_removes_nothing(tmp_path):
    root = tree(tmp_path)
    before = sorted(p.name for p in root.iterdir())
    code, lines = run(root, FakeApi([jobset("pretrain-p5")]), dry_run=True)
    assert code == 0 and sorted(p.name for p in root.iterdir()) == before
    assert "(dry run, nothing is removed)" in lines[0]
    assert sum(line.startswith("remove ") for line in lines) == 2 and not any(line.startswith("removed") for line in lines)


def test_a_job_resubmitted_during_the_pass_keeps_its_directory(tmp_path):
    root = tmp_path / "checkpoints"
    make_job_dir(root, "old-run", 60)
    api = FakeApi([jobset("old-run", ("Completed", "True"))], later={"old-run": jobset("old-run")})
    code, lines = run(root, api, dry_run=False)
    assert code == 0 and (root / "old-run").exists()
    assert lines[-1] == "kept   old-run: its JobSet was (re)started during this run"


def adhoc_jobset(name: str, *conditions: tuple[str, str]) -> dict:
    """A JobSet the job command submitted: the plan's manifest plus the label only the command sets."""
    submitted = jobset(name, *conditions)
    submitted["metadata"]["labels"] = {SUBMITTED_BY_LABEL: SUBMITTED_BY_JOB_COMMAND, "app.kubernetes.io/name": name}
    return submitted


@pytest.mark.parametrize("stack", ["dev", "team-vision-prod"])
def test_an_ad_hoc_runs_directory_is_judged_by_its_live_jobset_like_a_stack_job(stack, tmp_path, plan_of):
    """Issue 42: a run no stack file names (submitted ad hoc into the namespace) keeps its checkpoints
    while its JobSet is queued, running or restarting. The CronJob knows no job names: what it judges
    comes from the namespace's JobSets, so a deploy that never heard of the run cannot orphan it."""
    cronjob = cronjob_of(plan_of(stack))
    env = {e["name"]: e.get("value") for e in cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    planned = {m["metadata"]["name"] for m in plan_of(stack).manifests() if m["kind"] == "JobSet"}
    assert not any(name in value for name in planned for value in env.values() if value), env
    root = tmp_path / "checkpoints"
    for name in ("adhoc-sweep-1", "adhoc-queued", "adhoc-done"):
        make_job_dir(root, name, 60)
    api = FakeApi([adhoc_jobset("adhoc-sweep-1", ("Suspended", "False")), adhoc_jobset("adhoc-queued", ("Suspended", "True")),
                   adhoc_jobset("adhoc-done", ("Completed", "True"))])
    code, lines = run(root, api, dry_run=False)
    assert code == 0 and sorted(p.name for p in root.iterdir()) == ["adhoc-queued", "adhoc-sweep-1"]
    assert "keep   adhoc-queued: its JobSet has not finished (queued, running or restarting)" in lines


def test_without_the_jobset_list_nothing_is_removed(tmp_path):
    root = tree(tmp_path)
    before = sorted(p.name for p in root.iterdir())

    def unreachable(path: str):
        raise OSError("connection refused")

    with pytest.raises(OSError):
        script.run(root=str(root), namespace="n", max_age_days=1, dry_run=False, get=unreachable, log=print)
    lines: list[str] = []
    assert script.run(root=str(root), namespace="n", max_age_days=1, dry_run=False, get=lambda p: None,
                      log=lines.append) == 1
    assert "nothing removed" in lines[0] and sorted(p.name for p in root.iterdir()) == before


def test_a_directory_that_cannot_be_removed_fails_the_run_but_not_the_others(tmp_path):
    root = tmp_path / "checkpoints"
    make_job_dir(root, "a-run", 60)
    make_job_dir(root, "b-run", 60)

    def remove(path: str) -> None:
        if path.endswith("a-run"):
            raise PermissionError("read-only")
        import shutil
        shutil.rmtree(path)

    lines: list[str] = []
    code = script.run(root=str(root), namespace="n", max_age_days=30, dry_run=False, get=FakeApi([]).get,
                      remove=remove, log=lines.append)
    assert code == 1 and (root / "a-run").exists() and not (root / "b-run").exists()
    assert "error: a-run: read-only" in lines


def test_symlinks_are_never_followed(tmp_path):
    outside = make_job_dir(tmp_path / "elsewhere", "precious", 90)
    root = tmp_path / "checkpoints"
    root.mkdir()
    (root / "link-run").symlink_to(outside)
    code, _ = run(root, FakeApi([]), dry_run=False)
    assert code == 0 and (root / "link-run").is_symlink() and (outside / "step-000000010" / "rank-00000.pt").exists()


# --- the CronJob as rendered --------------------------------------------------------------------

def cronjob_of(plan) -> dict:
    # (a MultiKueue manager also runs its token rotation, in kueue-system: tests/test_multikueue.py)
    (cronjob,) = [m for m in plan.manifests_on(None) if m["kind"] == "CronJob" and m["metadata"]["namespace"] != "kueue-system"]
    return cronjob


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_cronjob_is_valid_and_admitted_by_its_namespace(stack, plan_of):
    plan = plan_of(stack)
    cronjob = cronjob_of(plan)
    kubernetes_validate.validate(cronjob, f"{kubernetes_minor(stack)}.0", strict=True)
    namespace = cronjob["metadata"]["namespace"]
    # A team's namespace is its platform's (workload/team_tenancy.py).
    made_by = plan_of(environment_of(stack)) if namespace.startswith("team-") else plan
    (ns,) = [m for m in made_by.manifests_on(None) if m["kind"] == "Namespace" and m["metadata"]["name"] == namespace]
    enforced = ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
    # The level the namespace enforces, and the stricter one it warns about.
    for level in (enforced, "restricted"):
        assert violations(template["spec"], level, template["metadata"].get("annotations")) == [], level


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_cronjob_has_its_own_read_only_identity_and_runs_the_repo_script(stack, plan_of):
    plan = plan_of(stack)
    cronjob = cronjob_of(plan)
    namespace = cronjob["metadata"]["namespace"]
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    by_kind = {m["kind"]: m for m in plan.manifests() if m["metadata"].get("name") == "checkpoint-cleanup"}
    assert by_kind["ServiceAccount"]["automountServiceAccountToken"] is False
    assert by_kind["Role"]["rules"] == [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list"]}]
    assert by_kind["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": "checkpoint-cleanup", "namespace": namespace}]
    assert by_kind["RoleBinding"]["roleRef"]["name"] == "checkpoint-cleanup"
    assert by_kind["ConfigMap"]["data"] == {SCRIPT.name: SCRIPT.read_text()}
    assert pod["serviceAccountName"] == "checkpoint-cleanup" and pod["automountServiceAccountToken"] is False
    (token,) = [v["projected"] for v in pod["volumes"] if "projected" in v]
    assert token["sources"][0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}}
    # Same hardening as the training pods, on the system pool (never a GPU node), one run at a time.
    (container,) = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    for jobset in [m for m in plan.manifests() if m["kind"] == "JobSet"]:
        training = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert container["securityContext"] == training["containers"][0]["securityContext"]
        assert pod["securityContext"] == {k: v for k, v in training["securityContext"].items() if k != "sysctls"}
    assert pod["nodeSelector"] == {"gpu-training/pool": "system"}
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    assert {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}} in pod["volumes"]
    assert "@sha256:" in container["image"]


@pytest.mark.parametrize(("stack", "after_days", "dry_run"), [
    ("dev", "7", "false"), ("staging", "14", "true"), ("prod", "30", "true"), ("team-vision-prod", "30", "true")])
def test_the_cleanup_settings_come_from_the_stack_file(stack, after_days, dry_run, plan_of):
    env = {e["name"]: e.get("value") for e in cronjob_of(plan_of(stack))["spec"]["jobTemplate"]["spec"]["template"]
           ["spec"]["containers"][0]["env"]}
    assert env["MAX_AGE_DAYS"] == after_days and env["DRY_RUN"] == dry_run


def test_a_new_stack_starts_in_dry_run():
    storage = dict(raw_config("dev")["gpu-training:storage"])
    del storage["checkpointCleanup"]
    env = {e["name"]: e.get("value") for e in cronjob_of(synthesize("dev", overrides={"storage": storage}))
           ["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["DRY_RUN"] == "true" and env["MAX_AGE_DAYS"] == "30"


@pytest.mark.parametrize(("pod_change", "level", "expected"), [
    ({"hostNetwork": True}, "baseline", "spec.hostNetwork"),
    ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, "baseline", "hostPath"),
    ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}, "baseline", "sysctl kernel.msgmax"),
    ({"containers": [{"name": "c", "securityContext": {"privileged": True}}]}, "baseline", "privileged"),
    ({"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}, "baseline", "SYS_ADMIN"),
    ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]}, "baseline", "hostPort"),
    ({"containers": [{"name": "c", "securityContext": {}}]}, "restricted", "allowPrivilegeEscalation"),
    ({"containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False}}]}, "restricted", "ALL capabilities"),
    ({"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "c", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}, "restricted", "seccomp profile None"),
    ({"volumes": [{"name": "n", "nfs": {"server": "x", "path": "/"}}]}, "restricted", "type ['nfs']"),
])
def test_the_pod_security_checker_catches_each_rule(pod_change, level, expected):
    pod = {"containers": [{"name": "c"}], **pod_change}
    assert any(expected in v for v in violations(pod, level)), violations(pod, level)


def test_the_pod_security_checker_admits_the_reference_restricted_pod():
    manifest = cronjob_manifest(namespace="n", stack="dev", image="r/i@sha256:" + "0" * 64, system_pool="system",
                                cleanup=load_stack_config(raw_config("dev"), project=PROJECT, stack="dev")
                                .storage.checkpoint_cleanup)
    pod = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert violations(pod, "restricted") == []
    assert violations({**pod, "hostPID": True}, "restricted") == ["spec.hostPID"]


# --- what else training leaves ------------------------------------------------------------------

@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_old_checkpoint_files_move_to_infrequent_access(stack, plan_of):
    (fs,) = plan_of(stack).of_type("aws:efs/fileSystem:FileSystem")
    assert fs["inputs"]["lifecyclePolicies"] == [{"transitionToIa": "AFTER_7_DAYS"},
                                                 {"transitionToPrimaryStorageClass": "AFTER_1_ACCESS"}]


@pytest.mark.parametrize(("stack", "unneeded", "delay"), [("dev", "5m", "10m"), ("staging", "10m", "10m"), ("prod", "10m", "10m")])
def test_gpu_scale_down_timing_comes_from_the_stack_file(stack, unneeded, delay, plan_of):
    (release,) = [r["inputs"] for r in plan_of(stack).of_type("kubernetes:helm.sh/v3:Release")
                  if r["inputs"]["chart"] == "cluster-autoscaler"]
    args = release["values"]["extraArgs"]
    assert args["scale-down-unneeded-time"] == unneeded and args["scale-down-delay-after-add"] == delay


@pytest.mark.parametrize(("stack", "path", "value", "expected"), [
    ("dev", "scaleDown.unneededMinutes", 0, "between 1 and 1440"),
    ("dev", "scaleDown.delayAfterAddMinutes", "10m", "whole number"),
    ("dev", "storage.checkpointCleanup.afterDays", 0, "between 1 and 3650"),
    ("dev", "storage.checkpointCleanup.dryRun", "no", "true or false"),
    ("dev", "storage.checkpointCleanup.maxAgeDays", 3, "did you mean 'afterDays'"),
    ("team-vision-prod", "scaleDown", {"unneededMinutes": 5}, "belongs to the platform stack"),
])
def test_invalid_cleanup_and_scale_down_settings_are_rejected_naming_the_key(stack, path, value, expected):
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config(stack), path, value), project=PROJECT, stack=stack)
    matching = [e for e in raised.value.errors if expected in e]
    assert matching, raised.value.errors
    assert all(e.startswith(f"{PROJECT}:{path.split('.')[0]}") and "Fix:" in e for e in matching)
