"""The checkpoint directory exists, owned by the trainer's UID/GID, before any job mounts it: on
EFS the tenant's access point creates it; on FSx for Lustre a one-off Job per training namespace
(components/workload/checkpoint_directory.py), which every JobSet and the cleanup CronJob wait for."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from plan_queries import waits_for
from pod_security import violations
from stack_configs import MANIFEST_STACKS

from components.config.stack_names import stack_kind
from components.data import training_data
from components.workload import checkpoint_directory

JOB = ("kubernetes:batch/v1:Job", "storage-mounts-checkpoint-directory-job")
LUSTRE_STACKS = ("prod", "prod-usw2", "prod-use2")


def manifests(plan, kind: str) -> list[dict]:
    return [m for m in plan.manifests() if m["kind"] == kind]


def checkpoint_mounts(plan) -> list[dict]:
    """The checkpoints volumeMount of every training pod."""
    return [mount for jobset in manifests(plan, "JobSet") for replicated in jobset["spec"]["replicatedJobs"]
            for container in replicated["template"]["spec"]["template"]["spec"]["containers"]
            for mount in container["volumeMounts"] if mount["name"] == training_data.CHECKPOINTS.name]


def training_pod_users(plan) -> set[tuple[int, int]]:
    return {(spec["securityContext"]["runAsUser"], spec["securityContext"]["runAsGroup"])
            for jobset in manifests(plan, "JobSet") for replicated in jobset["spec"]["replicatedJobs"]
            for spec in [replicated["template"]["spec"]["template"]["spec"]]}


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_tenant_gets_its_checkpoint_directory_owned_by_the_pods_user(stack, plan_of):
    plan = plan_of(stack)
    trainer = (training_data.RUN_AS_USER, training_data.RUN_AS_GROUP)
    assert training_pod_users(plan) <= {trainer}, "the training pods run as the one constant the directory is made for"
    jobs = manifests(plan, "Job")
    if stack in LUSTRE_STACKS:
        (job,) = jobs
        (container,) = job["spec"]["template"]["spec"]["containers"]
        path, uid, gid, mode = container["command"][3:]
        assert (int(uid), int(gid)) == trainer
        assert mode == "750"
        sub_paths = {mount.get("subPath") for mount in checkpoint_mounts(plan)}
        assert sub_paths and path in {f"{checkpoint_directory.ROOT_MOUNT}/{sub}" for sub in sub_paths}, \
            "the directory the Job makes is the one the training pods mount"
    else:
        assert jobs == [], "on EFS the access point makes the directory: no Job"
        # The tenant's access point: the directory EFS creates on first mount, and the user every
        # operation through it runs as, are the training pods' own.
        # A team's access point is its platform's (workload/team_volumes.py).
        team, environment = stack_kind(stack)
        owner = plan_of(environment) if team and environment else plan
        points = [r["inputs"] for r in owner.of_type("aws:efs/accessPoint:AccessPoint")
                  if not team or r["inputs"]["rootDirectory"]["path"] == f"/workloads/team-{team}"]
        assert points
        for point in points:
            assert (point["posixUser"]["uid"], point["posixUser"]["gid"]) == trainer
            info = point["rootDirectory"]["creationInfo"]
            assert (info["ownerUid"], info["ownerGid"], info["permissions"]) == (*trainer, "0750")


@pytest.mark.parametrize("stack", LUSTRE_STACKS)
def test_nothing_that_mounts_the_checkpoints_starts_before_the_directory_exists(stack, plan_of):
    plan = plan_of(stack)
    jobsets = [key for key in plan.dependencies if key[0] == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"]
    # The MultiKueue token rotation mounts no checkpoints.
    cronjobs = [key for key in plan.dependencies if key[0] == "kubernetes:batch/v1:CronJob" and key[1] != "multikueue-cronjob"]
    assert jobsets and cronjobs
    for key in (*jobsets, *cronjobs):
        assert JOB in waits_for(plan, key), key
    # ... and the Job itself waits for the namespace and the Lustre volumes it mounts.
    waited = {name for _, name in waits_for(plan, JOB)}
    assert {"training-namespace-namespace", "storage-mounts-checkpoints"} <= waited, sorted(waited)


@pytest.mark.parametrize("stack", LUSTRE_STACKS)
def test_the_directory_job_passes_the_namespaces_pod_security_level_with_one_capability(stack, plan_of):
    plan = plan_of(stack)
    (job,) = manifests(plan, "Job")
    namespace = next(m for m in manifests(plan, "Namespace") if m["metadata"]["name"] == job["metadata"]["namespace"])
    enforced = namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert enforced == "baseline"
    pod = job["spec"]["template"]["spec"]
    assert violations(pod, enforced) == []
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["nodeSelector"] == {"gpu-training/pool": "system"}, "never wakes a GPU node"
    # restricted (warned and audited) reports exactly the accepted exception: root and CHOWN.
    assert violations(pod, "restricted"), "a root container is not restricted"
    assert job["spec"]["activeDeadlineSeconds"] <= 600, "within Pulumi's 10-minute await of a Job"


def run_script(path, uid: int, gid: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", checkpoint_directory.SCRIPT, str(path), str(uid), str(gid), "750"],
                          capture_output=True, text=True, timeout=30)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")


def test_the_script_makes_a_missing_directory_with_the_mode(tmp_path):
    target = tmp_path / "checkpoints"
    done = run_script(target, os.getuid(), os.getgid())
    assert done.returncode == 0, done.stderr
    assert target.is_dir() and (target.stat().st_mode & 0o777) == 0o750
    assert "owner" in done.stdout and "mode 750" in done.stdout


def test_the_script_leaves_a_directory_the_trainer_owns_as_it_is(tmp_path):
    target = tmp_path / "checkpoints"
    target.mkdir(mode=0o700)
    (target / "job-a").mkdir()
    assert run_script(target, os.getuid(), os.getgid()).returncode == 0
    assert (target.stat().st_mode & 0o777) == 0o700 and (target / "job-a").is_dir()


@needs_root
def test_the_script_gives_a_root_owned_directory_to_the_trainer(tmp_path):
    """What the kubelet made for an earlier pod (root's, the file system root's mode 1777)."""
    target = tmp_path / "checkpoints"
    target.mkdir()
    target.chmod(0o1777)
    done = run_script(target, 1000, 1000)
    assert done.returncode == 0, done.stderr
    st = target.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1000, 1000, 0o750)


@needs_root
def test_the_script_fails_on_a_directory_of_another_user(tmp_path):
    target = tmp_path / "checkpoints"
    target.mkdir()
    os.chown(target, 1234, 1234)
    done = run_script(target, 1000, 1000)
    assert done.returncode != 0 and "owned by 1234:1234, neither root nor the trainer 1000:1000" in done.stderr


def test_the_script_fails_on_a_file_in_its_place(tmp_path):
    target = tmp_path / "checkpoints"
    target.write_text("")
    done = run_script(target, os.getuid(), os.getgid())
    assert done.returncode != 0
