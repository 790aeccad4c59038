"""A team's tenancy on its environment's MultiKueue workers: what a job dispatched to a worker finds
there (namespace, queues, identity, volumes, secrets), through the worker's own providers."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from components.config import ConfigError, StackConfig, TeamStackConfig, load_stack_config
from components.config.multikueue import WorkerCluster
from components.config.platform_contract import CONTRACT_OUTPUT, worker_problems
from components.config.teams import TeamQueueConfig
from components.workload.multikueue import (
    ADMISSION_CHECK,
    ANY_REGION,
    FLAVOR,
    QUEUE_LABEL,
    WORKER_GROUP,
    dispatched_jobset,
    dispatcher_role_binding,
    team_any_region_queue_name,
)
from components.workload.team_queues import team_cluster_queue_manifest
from offline import plan as plan_module
from offline.plan import synthesize
from tests.crd_schemas import validate_custom_resource
from tests.stack_configs import PROJECT, ROOT, bootstrap_knows, mutate, raw_config

TEAM_STACK, MANAGER, NAMESPACE = "team-vision-prod", "prod", "team-vision"
GPU = "nvidia.com/gpu"


def workers(manager_plan):
    return manager_plan.outputs["multiKueue"]["workers"]


def on_cluster(plan, cluster, kind):
    """Manifests of `kind` the plan makes on `cluster` (a worker stack, or None for the platform's own)."""
    return [m for m in plan.manifests_on(cluster) if m["kind"] == kind]


def records(plan, type_token, name):
    return [r for r in plan.of_type(type_token) if r["name"] == name]


def gpus(cluster_queue, flavor):
    (found,) = [f for f in cluster_queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == flavor]
    return {r["name"]: r for r in found["resources"]}[GPU]


def test_the_manager_has_workers_for_the_team_to_reach(plan_of):
    assert workers(plan_of(MANAGER)) == ["prod-usw2", "prod-use2"], "the tests below read each worker of prod"


def test_each_worker_gets_the_teams_namespace_objects_through_its_own_cluster(plan_of):
    team = plan_of(TEAM_STACK)
    providers = {r["provider"] for r in team.manifest_records()}
    for worker in workers(plan_of(MANAGER)):
        provider = f"{worker}-cluster"
        assert provider in providers and team.other_clusters[provider] == worker
        for kind in ("LocalQueue", "RoleBinding", "ServiceAccount", "PersistentVolumeClaim", "SecretStore",
                     "ExternalSecret"):
            objects = on_cluster(team, worker, kind)
            assert objects, f"no {kind} on {worker}"
            assert all(m["metadata"]["namespace"] == NAMESPACE for m in objects)
        # The namespace and its caps are the worker's platform's, from its registry of teams (team_tenancy.py).
        for kind in ("Namespace", "ResourceQuota", "LimitRange"):
            assert not on_cluster(team, worker, kind)
            assert [m for m in on_cluster(plan_of(worker), None, kind)
                    if (m["metadata"].get("namespace") or m["metadata"]["name"]) == NAMESPACE], f"no {kind} on {worker}"
        assert not on_cluster(team, worker, "JobSet"), "jobs are submitted on the manager and dispatched"
        assert not on_cluster(team, worker, "ClusterQueue"), "the worker's platform makes the team's ClusterQueue"
        assert not on_cluster(team, worker, "CronJob")


def test_the_worker_namespace_is_the_managers_and_its_any_region_queue_selects_it(plan_of):
    manager = plan_of(MANAGER)
    # Each cluster's platform makes the team's namespace (team_tenancy.py), alike everywhere.
    (own,) = [n for n in on_cluster(manager, None, "Namespace") if n["metadata"]["name"] == NAMESPACE]
    (selecting,) = [q for q in on_cluster(manager, None, "ClusterQueue")
                    if q["metadata"]["name"] == team_any_region_queue_name(NAMESPACE)]
    # (kubernetes.io/metadata.name: the label the API server gives every namespace, its name.)
    assert selecting["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    for worker in workers(manager):
        (there,) = [n for n in on_cluster(plan_of(worker), None, "Namespace") if n["metadata"]["name"] == NAMESPACE]
        assert there["metadata"] == own["metadata"]


def test_the_any_region_queue_is_on_the_manager_and_every_worker_by_the_same_name(plan_of):
    team = plan_of(TEAM_STACK)
    clusters = [None, *workers(plan_of(MANAGER))]
    queues = {cluster: [q for q in on_cluster(team, cluster, "LocalQueue") if q["metadata"]["name"] == ANY_REGION]
              for cluster in clusters}
    assert all(len(found) == 1 and found[0]["metadata"]["namespace"] == NAMESPACE for found in queues.values()), queues
    for cluster in clusters:
        (queue,) = queues[cluster]
        # The platform of that cluster made it, from its registry of teams.
        (target,) = [q for q in on_cluster(plan_of(cluster or MANAGER), None, "ClusterQueue")
                     if q["metadata"]["name"] == queue["spec"]["clusterQueue"]]
        assert validate_custom_resource(target) == [] and validate_custom_resource(queue) == []


def test_quota_in_total_on_the_manager_and_per_region_on_each_worker(plan_of):
    (row,) = [r for r in raw_config(MANAGER)[f"{PROJECT}:teams"] if r["name"] == "vision"]
    quota = json.loads(json.dumps(row["gpuQuota"]))
    (total,) = [q for q in on_cluster(plan_of(MANAGER), None, "ClusterQueue")
                if q["metadata"]["name"] == team_any_region_queue_name(NAMESPACE)]
    assert total["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": ADMISSION_CHECK}]
    # A quota of its own, the team's total: it neither takes the environment's any-region quota nor lends it.
    assert gpus(total, FLAVOR) == {"name": GPU, "nominalQuota": sum(quota.values()), "borrowingLimit": 0, "lendingLimit": 0}
    for worker in workers(plan_of(MANAGER)):
        (regional,) = [q for q in on_cluster(plan_of(worker), None, "ClusterQueue") if q["metadata"]["name"] == NAMESPACE]
        for pool, owned in quota.items():
            assert gpus(regional, f"pool-{pool}") == {"name": GPU, "nominalQuota": owned, "borrowingLimit": 0}


@pytest.mark.parametrize(("gpu_quota", "borrowed", "expected"), [
    ({"gpu-spot": 16}, frozenset(), {"pool-gpu-spot": (16, 0), "pool-p5-efa": (0, 0)}),
    ({"gpu-spot": 8, "p5-efa": 16}, frozenset(), {"pool-gpu-spot": (8, 0), "pool-p5-efa": (16, 0)}),
    # A borrowed pool owns nothing and borrows up to its quota, as on the manager.
    ({"gpu-spot": 8}, frozenset({"gpu-spot"}), {"pool-gpu-spot": (0, 8), "pool-p5-efa": (0, 0)}),
])
def test_a_regional_queue_never_exceeds_the_teams_quota(gpu_quota, borrowed, expected):
    worker = load_stack_config(raw_config("prod-usw2"), project=PROJECT, stack="prod-usw2")
    assert isinstance(worker, StackConfig)
    pools = [p for p in worker.node_pools if p.gpu]
    manifest = team_cluster_queue_manifest(TeamQueueConfig("vision", gpu_quota, borrowed), cohort="prod", pools=pools)
    got = {f["name"]: (gpus(manifest, f["name"])["nominalQuota"], gpus(manifest, f["name"])["borrowingLimit"])
           for f in manifest["spec"]["resourceGroups"][0]["flavors"]}
    assert got == expected
    assert all("borrowingLimit" in r for f in manifest["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"])
    assert validate_custom_resource(manifest) == []


def test_the_dispatchers_group_is_bound_in_the_team_namespace_only():
    binding = dispatcher_role_binding(NAMESPACE)
    assert binding["metadata"] == {"name": WORKER_GROUP, "namespace": NAMESPACE}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WORKER_GROUP}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": WORKER_GROUP}]


def test_identity_volumes_and_secrets_on_a_worker_are_the_workers(plan_of):
    team = plan_of(TEAM_STACK)
    for worker in workers(plan_of(MANAGER)):
        deployed = plan_of(worker).outputs[CONTRACT_OUTPUT]["resources"]
        region = plan_of(worker).outputs["region"]
        (provider,) = records(team, "pulumi:providers:aws", f"aws-{worker}")
        assert provider["inputs"]["region"] == region
        (association,) = records(team, "aws:eks/podIdentityAssociation:PodIdentityAssociation",
                                 f"{worker}-team-trainer-identity-pod-identity")
        assert association["provider"] == f"aws-{worker}"
        assert association["inputs"]["clusterName"] == deployed["clusterName"]
        assert association["inputs"]["namespace"] == NAMESPACE
        # The team's claims there bind the volumes the worker's platform made on its own file system,
        # through the team's access point it publishes, and on its datasets replica (team_volumes.py).
        assert not on_cluster(team, worker, "PersistentVolume") and not team.of_type("aws:efs/accessPoint:AccessPoint")
        claims = {c["metadata"]["name"]: c["spec"]["volumeName"] for c in on_cluster(team, worker, "PersistentVolumeClaim")}
        assert claims == {"checkpoints": f"checkpoints-{NAMESPACE}", "datasets": f"datasets-{NAMESPACE}"}
        volumes = {v["metadata"]["name"]: v for v in plan_of(worker).manifests_on(None) if v["kind"] == "PersistentVolume"}
        point = deployed["teamCheckpointAccessPoints"][NAMESPACE.removeprefix("team-")]
        assert volumes[f"checkpoints-{NAMESPACE}"]["spec"]["csi"]["volumeHandle"] == \
            f"{deployed['checkpointFileSystemId']}::{point['id']}"
        assert volumes[f"datasets-{NAMESPACE}"]["spec"]["csi"]["volumeAttributes"]["bucketName"] == deployed["datasetsBucket"]
        # The trainer role: trusted in the worker's cluster too, reading the worker's buckets there.
        (trainer,) = records(team, "aws:iam/role:Role", "team-trainer")
        clusters = json.loads(trainer["inputs"]["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"][
            "aws:RequestTag/eks-cluster-name"]
        assert deployed["clusterName"] in clusters and plan_of(MANAGER).outputs["clusterName"] in clusters
        (access,) = records(team, "aws:iam/rolePolicy:RolePolicy", f"team-trainer-{worker}-access")
        resources = [r for s in json.loads(access["inputs"]["policy"])["Statement"] for r in s["Resource"]]
        assert any(deployed["datasetsBucket"] in r for r in resources)
        assert all("/teams/vision/" in r for r in resources if deployed["artifactsBucket"] + "/" in r)


def role_policy(plan, name):
    (policy,) = records(plan, "aws:iam/rolePolicy:RolePolicy", name)
    return json.loads(policy["inputs"]["policy"])


def test_a_worker_syncs_the_teams_secrets_from_the_managers_region_through_the_teams_one_reader(plan_of):
    team = plan_of(TEAM_STACK)
    secrets = {s["inputs"]["name"] for s in team.of_type("aws:secretsmanager/secret:Secret")}
    (reader,) = records(team, "aws:iam/role:Role", "team-secrets-reader")
    trusted = json.loads(reader["inputs"]["assumeRolePolicy"])["Statement"][0]["Principal"]["AWS"]
    manager = plan_of(MANAGER).outputs[CONTRACT_OUTPUT]["resources"]["secretsSyncRoleArn"]
    reader_arn = f"arn:aws:iam::{plan_module.MOCK_ACCOUNT_ID}:role/{reader['inputs']['name']}"
    worker_sync_roles = [plan_of(w).outputs[CONTRACT_OUTPUT]["resources"]["secretsSyncRoleArn"]
                         for w in workers(plan_of(MANAGER))]
    assert sorted(trusted) == sorted([manager, *worker_sync_roles])  # each cluster's sync role, no other
    for worker in workers(plan_of(MANAGER)):
        # ... and the worker's External Secrets role may assume it: its manager's team readers.
        (assume,) = role_policy(plan_of(worker), "workload-roles-secrets-sync-teams-access")["Statement"]
        assert assume["Action"] == ["sts:AssumeRole"] and any(fnmatch.fnmatchcase(reader_arn, r) for r in assume["Resource"])
        (store,) = on_cluster(team, worker, "SecretStore")
        (own_store,) = on_cluster(team, None, "SecretStore")
        assert store["spec"] == own_store["spec"]  # the manager's region, the same reader role
        assert store["spec"]["provider"]["aws"]["region"] == plan_of(MANAGER).outputs["region"]
        (external,) = on_cluster(team, worker, "ExternalSecret")
        assert {d["remoteRef"]["key"] for d in external["spec"]["data"]} == secrets


def test_a_worker_assumes_no_reader_of_its_own_name(plan_of):
    """The worker's External Secrets role reaches its manager's team readers, not a prefix of its own
    (no team stack makes `gpu-training-prod-usw2-team-*`), and a platform's own is unchanged."""
    for stack, prefix in (("prod-usw2", "gpu-training-prod"), ("prod-use2", "gpu-training-prod"), ("prod", "gpu-training-prod"),
                          ("dev", "gpu-training-dev")):
        (assume,) = role_policy(plan_of(stack), "workload-roles-secrets-sync-teams-access")["Statement"]
        assert [r.rsplit(":role/", 1)[1] for r in assume["Resource"]] == [f"{prefix}-team-*-secrets"], stack


def printed_registry_rows(stdout: str) -> list[dict]:
    """The rows of `teams` that scripts/new-team-stack tells the operator to add to the platform's stack file."""
    lines = [line for line in stdout.splitlines() if line.startswith("    ")]
    return yaml.safe_load(textwrap.dedent("\n".join(lines)))


@pytest.mark.parametrize("environment", ["dev", "staging"])
def test_a_team_on_a_platform_without_multikueue_gets_nothing_beyond_its_cluster(tmp_path, monkeypatch, environment):
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "new-team-stack"), "nlp", environment,
                           "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    stack = f"team-nlp-{environment}"
    # The platform with the team's row that new-team-stack printed (dev's own queue owns all of
    # gpu-spot: the row borrows it there).
    bootstrap_knows(monkeypatch, tmp_path, "nlp")
    platform = synthesize(environment, overrides={"teams": printed_registry_rows(made.stdout)})
    plan = synthesize(stack, tmp_path / f"Pulumi.{stack}.yaml", platform_outputs=platform.outputs)
    assert [r["name"] for r in plan.of_type("pulumi:providers:kubernetes")] == ["platform-cluster"]
    assert [r["name"] for r in plan.of_type("pulumi:providers:aws")] == ["aws"]
    assert plan.other_clusters == {}
    # The queue is the platform's, with the row's quota of one whole node; the team's LocalQueue points at it.
    assert not [m for m in plan.manifests() if m["kind"] == "ClusterQueue"]
    (queue,) = [m for m in platform.manifests() if m["kind"] == "ClusterQueue" and m["metadata"]["name"] == "team-nlp"]
    (row,) = printed_registry_rows(made.stdout)
    ((pool, quota),) = row["gpuQuota"].items()
    sample = re.search(r"gpusPerNode: (\d+)", (tmp_path / f"Pulumi.{stack}.yaml").read_text())
    assert sample is not None
    node = int(sample[1])
    assert quota == node, "a quota of one whole node of the pool: the file's sample job fits it"
    assert gpus(queue, f"pool-{pool}")["nominalQuota" if "gpuQuotaBorrowed" not in row else "borrowingLimit"] == quota
    (local,) = [m for m in plan.manifests() if m["kind"] == "LocalQueue"]
    assert local["spec"]["clusterQueue"] == "team-nlp"
    assert not [m for m in plan.manifests() if m["metadata"]["name"] in (ANY_REGION, team_any_region_queue_name("team-nlp"))]
    (trainer,) = records(plan, "aws:iam/role:Role", "team-trainer")
    condition = json.loads(trainer["inputs"]["assumeRolePolicy"])["Statement"][0]["Condition"]["StringEquals"]
    assert condition["aws:RequestTag/eks-cluster-name"] == f"gpu-training-{environment}"


# --- a worker's contract judged before any resource ---------------------------------------------

def team_and_worker(worker_raw=None):
    platform = load_stack_config(raw_config(MANAGER), project=PROJECT, stack=MANAGER, sibling_stacks_dir=None)
    assert isinstance(platform, StackConfig)
    team = load_stack_config(raw_config(TEAM_STACK), project=PROJECT, stack=TEAM_STACK, platform=platform)
    assert isinstance(team, TeamStackConfig)
    worker = load_stack_config(worker_raw or raw_config("prod-usw2"), project=PROJECT, stack="prod-usw2",
                               sibling_stacks_dir=None)
    assert isinstance(worker, StackConfig)
    assert platform.multikueue is not None
    (entry,) = [w for w in platform.multikueue.workers if w.stack == "prod-usw2"]
    return team, entry, worker


@pytest.mark.parametrize(("change", "expected"), [
    (lambda raw: raw, []),
    (lambda raw: mutate(raw, "multiKueue.manager", "prod-euw1"), ["gpu-training:multiKueue: is not a MultiKueue worker of 'prod'"]),
    # The worker's platform makes the team's queue there from its own registry (config/teams.py).
    (lambda raw: mutate(raw, "teams", []), ["gpu-training:teams: lists no team vision on worker stack 'prod-usw2'"]),
])
def test_a_worker_that_cannot_hold_the_team_is_refused(change, expected):
    team, entry, worker = team_and_worker(change(raw_config("prod-usw2")))
    assert [f"{p.key}: {p.rule}".split(": its platform makes")[0] for p in worker_problems(team, entry, worker)] == expected


def test_a_worker_in_another_region_than_the_manager_lists_is_refused():
    team, entry, worker = team_and_worker()
    (problem,) = worker_problems(team, WorkerCluster(stack=entry.stack, region="us-east-2", gpus=entry.gpus), worker)
    assert problem.key == "gpu-training:region" and "the manager lists us-east-2" in problem.rule
    assert problem.where.startswith("worker stack 'prod-usw2'")


def test_a_worker_contract_of_another_version_stops_the_team_before_any_resource(monkeypatch, plan_of):
    real = plan_module.referenced_stack_outputs

    def newer_worker(*args, **kwargs):
        outputs = real(*args, **kwargs)
        worker = json.loads(json.dumps(outputs[f"/{PROJECT}/prod-usw2/platform-contract"]))
        worker[CONTRACT_OUTPUT]["version"] = 2
        return {**outputs, f"/{PROJECT}/prod-usw2/platform-contract": worker}

    monkeypatch.setattr(plan_module, "referenced_stack_outputs", newer_worker)
    with pytest.raises(ConfigError) as raised:
        synthesize(TEAM_STACK, platform_outputs=plan_of(MANAGER).outputs)
    (error,) = raised.value.errors
    assert error.startswith(f"platform stack organization/{PROJECT}/prod-usw2: output platformContract: version 2"), error
    assert str(raised.value).splitlines()[0].endswith("nothing was created:")


def test_a_team_job_dispatched_to_a_worker_finds_everything_its_pods_name_there(plan_of):
    """A team JobSet made dispatchable (on `any-region`, managed by MultiKueue) names a queue, a
    service account, claims, ConfigMaps and a Secret: each exists in the team's namespace on every worker."""
    team = plan_of(TEAM_STACK)
    (jobset,) = on_cluster(team, None, "JobSet")
    dispatched = dispatched_jobset(jobset)
    pods = [r["template"]["spec"]["template"]["spec"] for r in dispatched["spec"]["replicatedJobs"]]
    named = {
        "LocalQueue": {dispatched["metadata"]["labels"][QUEUE_LABEL]},
        "ServiceAccount": {pod["serviceAccountName"] for pod in pods},
        "PersistentVolumeClaim": {v["persistentVolumeClaim"]["claimName"] for pod in pods for v in pod["volumes"]
                                  if "persistentVolumeClaim" in v},
        "ConfigMap": {v["configMap"]["name"] for pod in pods for v in pod["volumes"] if "configMap" in v},
        "ExternalSecret": {e["valueFrom"]["secretKeyRef"]["name"] for pod in pods for c in pod["containers"]
                           for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})},
    }
    assert all(named.values()), named  # the job names one of each: the test checks something
    for worker in workers(plan_of(MANAGER)):
        for kind, names in named.items():
            there = {m["metadata"]["name"] if kind != "ExternalSecret" else m["spec"]["target"]["name"]
                     for m in on_cluster(team, worker, kind) if m["metadata"]["namespace"] == jobset["metadata"]["namespace"]}
            assert names <= there, f"{worker} lacks the {kind} {sorted(names - there)}"
