"""MultiKueue over prod's regions: the config rules, the manager's and the worker's objects against
the pinned Kueue CRDs, the access entry and credential path to each worker, and a dispatchable JobSet."""

from __future__ import annotations

import base64
import datetime
import json
import re

import pytest

from components.config import ConfigError, StackConfig
from components.config.multikueue import dispatcher_role_name, peering_name, stack_name_prefix
from components.config.stack import load_stack_config, stack_kind
from components.network.peering import peering_filters, vpc_filters
from components.workload import multikueue_token_script as script
from components.workload.multikueue import (
    ANY_REGION,
    MANAGED_BY,
    QUEUE_LABEL,
    WORKER_GROUP,
    WORKER_READ,
    dispatched_jobset,
    kubeconfig_secrets,
    rotation_manifests,
)
from tests.crd_schemas import validate_custom_resource
from tests.plan_queries import config_errors
from tests.stack_configs import DELETE, PROJECT, mutate, raw_config

WORKERS = {"prod-usw2": "us-west-2", "prod-use2": "us-east-2"}
"""prod's workers and their regions, in the order its stack file lists them."""


def kinds(plan, kind):
    return [m for m in plan.manifests() if m["kind"] == kind]


def problems(raw, stack):
    try:
        load_stack_config(raw, project=PROJECT, stack=stack, sibling_stacks_dir=None)
    except ConfigError as error:
        return error.errors
    return []


@pytest.mark.parametrize(("stack", "kind"), [
    ("prod", (None, "prod")), ("prod-usw2", (None, "prod")), ("staging-euw1", (None, "staging")),
    ("team-vision-prod", ("vision", "prod")), ("prod-", (None, None)), ("qa-usw2", (None, None)),
])
def test_stack_names_give_the_environment(stack, kind):
    assert stack_kind(stack) == kind


@pytest.mark.parametrize(("stack", "prefix"), [("prod", "gpu-training-prod"), ("prod-usw2", "gpu-training-prod-usw2")])
def test_a_regional_stack_has_a_name_prefix_of_its_own(stack, prefix):
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    assert config.name_prefix == prefix == stack_name_prefix(PROJECT, stack)
    assert config.training_namespace == "training-prod"  # the same namespace on every cluster: MultiKueue mirrors it


@pytest.mark.parametrize(("stack", "path", "value", "expected"), [
    ("prod", "multiKueue.workers", [], "is empty"),
    ("prod", "multiKueue.workers", [{"stack": "prod", "region": "us-east-1", "gpus": 8}], "is this stack itself"),
    ("prod", "multiKueue.workers", [{"stack": "staging-usw2", "region": "us-west-2", "gpus": 8}],
     "not a platform stack of environment 'prod'"),
    ("prod", "multiKueue.workers", [{"stack": "prod-usw2", "region": "us-west-2", "gpus": 8}] * 2, "listed twice"),
    ("prod", "multiKueue.workers", [{"stack": "prod-usw2", "region": "mars-1", "gpus": 8}], "workers[0].region"),
    ("prod", "multiKueue.workers", [{"stack": "prod-usw2", "region": "us-west-2", "gpus": 0}], "workers[0].gpus"),
    ("prod", "multiKueue.role", "boss", "must be one of manager, worker"),
    ("prod-usw2", "multiKueue.manager", "prod-usw2", "is this stack itself"),
    ("prod-usw2", "multiKueue.manager", DELETE, "multiKueue.manager: required key is missing"),
    ("prod-usw2", "cluster.endpointPublicAccess", True, "is on in a MultiKueue stack"),
])
def test_bad_multikueue_config_is_refused_before_any_resource(stack, path, value, expected):
    found = problems(mutate(raw_config(stack), path, value), stack)
    assert any(expected in problem for problem in found), found


def test_the_manager_objects_match_the_pinned_kueue_crds(plan_of):
    plan = plan_of("prod")
    objects = [m for kind in ("MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue",
                              "ResourceFlavor") for m in kinds(plan, kind)]
    assert {m["kind"] for m in objects} >= {"MultiKueueCluster", "MultiKueueConfig"}
    for manifest in objects:
        assert validate_custom_resource(manifest) == [], manifest["metadata"]
    clusters = {c["metadata"]["name"]: c["spec"]["clusterSource"] for c in kinds(plan, "MultiKueueCluster")}
    assert clusters == {worker: {"kubeConfig": {"locationType": "Secret", "location": f"{worker}-kubeconfig"}}
                        for worker in WORKERS}
    (config,) = kinds(plan, "MultiKueueConfig")
    assert config["spec"]["clusters"] == list(WORKERS)  # the order prod's stack file prefers them in
    (check,) = [c for c in kinds(plan, "AdmissionCheck") if c["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"]
    (queue,) = [q for q in kinds(plan, "ClusterQueue") if q["metadata"]["name"] == ANY_REGION]
    assert queue["spec"]["admissionChecksStrategy"]["admissionChecks"] == [{"name": check["metadata"]["name"]}]
    gpus = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert gpus["nvidia.com/gpu"] == 32 + 32  # the workers' quotas: the manager holds no more in flight than they admit


def test_the_credential_path_holds_no_long_lived_secret(plan_of):
    plan = plan_of("prod")
    (cronjob,) = [c for c in kinds(plan, "CronJob") if c["metadata"]["namespace"] == "kueue-system"]
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    workers = json.loads(pod["containers"][0]["env"][0]["value"])
    assert workers == [{"name": worker, "cluster": f"gpu-training-{worker}", "region": region, "dnsSuffix": "amazonaws.com"}
                       for worker, region in WORKERS.items()]
    (role,) = [r for r in kinds(plan, "Role") if r["metadata"]["namespace"] == "kueue-system"]
    # Only the workers' Secrets, by name: no create, no list, nothing else of kueue-system.
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "resourceNames": [f"{worker}-kubeconfig" for worker in WORKERS],
                              "verbs": ["get", "update", "patch"]}]
    # The Secrets exist before the CronJob runs, empty: no credential in the plan or the state.
    secrets = [s for s in plan.of_type("kubernetes:core/v1:Secret") if s["inputs"]["metadata"]["namespace"] == "kueue-system"]
    assert sorted(s["inputs"]["metadata"]["name"] for s in secrets) == sorted(f"{worker}-kubeconfig" for worker in WORKERS)
    assert not any({"data", "stringData"} & set(secret["inputs"]) for secret in secrets)
    (association,) = [a for a in plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if a["inputs"]["namespace"] == "kueue-system"]
    assert association["inputs"]["serviceAccount"] == "multikueue-token-rotation"
    (dispatcher,) = [r for r in plan.of_type("aws:iam/role:Role") if r["inputs"].get("name") == dispatcher_role_name(PROJECT, "prod")]
    (policy,) = [p for p in plan.of_type("aws:iam/rolePolicy:RolePolicy") if "DescribeWorkerClusters" in p["inputs"]["policy"]]
    statement = json.loads(policy["inputs"]["policy"])["Statement"]
    assert statement == [{"Sid": "DescribeWorkerClusters", "Effect": "Allow", "Action": "eks:DescribeCluster",
                          "Resource": [f"arn:aws:eks:{region}:123456789012:cluster/gpu-training-{worker}"
                                       for worker, region in WORKERS.items()]}]
    assert dispatcher


def test_the_worker_lets_the_manager_in_through_a_scoped_group(plan_of):
    plan = plan_of("prod-usw2")
    (entry,) = plan.of_type("aws:eks/accessEntry:AccessEntry") and [
        e for e in plan.of_type("aws:eks/accessEntry:AccessEntry") if e["inputs"].get("kubernetesGroups") == [WORKER_GROUP]]
    assert entry["inputs"]["principalArn"].endswith(f":role/{dispatcher_role_name(PROJECT, 'prod')}")
    assert entry["inputs"]["type"] == "STANDARD"
    group = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": WORKER_GROUP}]
    # The writes are bound in the training namespace only ...
    (binding,) = [b for b in kinds(plan, "RoleBinding") if b["metadata"]["name"] == WORKER_GROUP]
    assert binding["metadata"]["namespace"] == "training-prod" and binding["subjects"] == group
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WORKER_GROUP}
    # ... and no ClusterRoleBinding of the group grants a write: whoever holds a current token can
    # create a Job or JobSet in training-prod (and the teams' namespaces), not in kube-system.
    roles = {r["metadata"]["name"]: r for r in kinds(plan, "ClusterRole")}
    cluster_wide = [b for b in kinds(plan, "ClusterRoleBinding") if group[0] in b["subjects"]]
    assert [b["metadata"]["name"] for b in cluster_wide] == [WORKER_READ]
    for bound in cluster_wide:
        for rule in roles[bound["roleRef"]["name"]]["rules"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
    reads = {(group, resource) for rule in roles[WORKER_READ]["rules"] for group in rule["apiGroups"]
             for resource in rule["resources"]}
    # The script's queue reads and what MultiKueue watches cluster-wide.
    assert reads == {("kueue.x-k8s.io", "clusterqueues"), ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "workloads"),
                     ("batch", "jobs"), ("jobset.x-k8s.io", "jobsets")}
    for name in (WORKER_GROUP, WORKER_READ):
        resources = {resource for rule in roles[name]["rules"] for resource in rule["resources"]}
        assert "secrets" not in resources and "*" not in resources and "pods" not in resources
        assert not any("*" in rule["verbs"] for rule in roles[name]["rules"])
    writes = {resource for rule in roles[WORKER_GROUP]["rules"] if "create" in rule["verbs"] for resource in rule["resources"]}
    assert writes == {"jobs", "jobsets", "workloads"}


def test_a_jobset_on_the_manager_is_dispatchable(plan_of):
    manager, worker = plan_of("prod"), plan_of("prod-usw2")
    (jobset,) = kinds(manager, "JobSet")
    dispatched = dispatched_jobset(jobset)
    assert validate_custom_resource(dispatched) == []
    assert dispatched["spec"]["managedBy"] == MANAGED_BY
    namespace = dispatched["metadata"]["namespace"]
    queue = dispatched["metadata"]["labels"][QUEUE_LABEL]
    for plan in (manager, worker):  # the LocalQueue exists in the job's namespace on both clusters
        assert (namespace, queue) in {(q["metadata"]["namespace"], q["metadata"]["name"]) for q in kinds(plan, "LocalQueue")}
    # Everything the pods mount or assume exists on the worker under the same names.
    for name in (v.get("persistentVolumeClaim", {}).get("claimName") for v in
                 jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].get("volumes", [])):
        if name:
            assert name in {c["metadata"]["name"] for c in kinds(worker, "PersistentVolumeClaim")}


# The presigned token, checked against botocore's own signer (what `aws eks get-token` uses), at
# the moment botocore signed.
def test_the_token_is_the_one_aws_eks_get_token_would_make():
    pytest.importorskip("botocore")
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    keys = {"AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG", "Token": "session/token+="}
    request = AWSRequest(method="GET", url="https://sts.us-west-2.amazonaws.com/",
                         params={"Action": "GetCallerIdentity", "Version": "2011-06-15"},
                         headers={"x-k8s-aws-id": "gpu-training-prod-usw2"})
    SigV4QueryAuth(Credentials(keys["AccessKeyId"], keys["SecretAccessKey"], keys["Token"]), "sts", "us-west-2",
                   expires=script.PRESIGN_SECONDS).add_auth(request)
    request.prepare()
    theirs = dict(p.split("=", 1) for p in str(request.url).split("?", 1)[1].split("&"))
    signed_at = datetime.datetime.strptime(theirs["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    token = script.presigned_token(keys, cluster="gpu-training-prod-usw2", region="us-west-2", dns_suffix="amazonaws.com",
                                   now=signed_at)
    assert token.startswith("k8s-aws-v1.") and "=" not in token
    url = base64.urlsafe_b64decode(token.removeprefix("k8s-aws-v1.") + "==").decode()
    assert dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&")) == theirs


@pytest.mark.parametrize(("service", "region", "suffix", "host"), [
    ("sts", "us-west-2", "amazonaws.com", "sts.us-west-2.amazonaws.com"),
    ("eks", "cn-north-1", "amazonaws.com.cn", "eks.cn-north-1.amazonaws.com.cn"),
    ("sts", "cn-northwest-1", "amazonaws.com.cn", "sts.cn-northwest-1.amazonaws.com.cn"),
    ("eks", "us-gov-west-1", "amazonaws.com", "eks.us-gov-west-1.amazonaws.com"),
])
def test_the_token_script_calls_the_partitions_hosts(service, region, suffix, host):
    assert script.service_host(service, region, suffix) == host


def test_in_china_the_token_is_presigned_for_the_china_sts_host():
    keys = {"AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": "secret"}
    now = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)
    token = script.presigned_token(keys, cluster="c", region="cn-north-1", dns_suffix="amazonaws.com.cn", now=now)
    url = base64.urlsafe_b64decode(token.removeprefix("k8s-aws-v1.") + "==").decode()
    assert url.startswith("https://sts.cn-north-1.amazonaws.com.cn/?") and "cn-north-1%2Fsts%2Faws4_request" in url


def test_the_manager_learns_the_dns_suffix_from_the_partition():
    from offline.plan import INVOKE_ANSWERS
    answer = INVOKE_ANSWERS["aws:index/getPartition:getPartition"]
    assert answer("cn-north-1", {})["dnsSuffix"] == "amazonaws.com.cn"
    assert answer("us-east-1", {})["dnsSuffix"] == "amazonaws.com"
    worker = {"name": "w", "cluster": "gpu-training-w", "region": "cn-northwest-1", "dnsSuffix": "amazonaws.com.cn"}
    cronjob = rotation_manifests(system_pool="system", workers=[worker])[-1]
    env = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert json.loads(env[0]["value"]) == [worker]


def test_the_token_is_renewed_by_a_small_image_often_enough_and_a_stale_one_alarms(plan_of, monkeypatch, capsys):
    from components.workload.multikueue import (
        RENEWED_METRIC,
        ROTATION_DEADLINE_SECONDS,
        ROTATION_IMAGE,
        TOKEN_ALARM_PERIOD_SECONDS,
        renewed_filter_pattern,
    )
    plan = plan_of("prod")
    (cronjob,) = [m for m in kinds(plan, "CronJob") if m["metadata"]["name"] == "multikueue-token-rotation"]
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    trainer_images = {c["image"] for j in kinds(plan, "JobSet")
                      for c in j["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]}
    assert container["image"] == ROTATION_IMAGE and container["image"] not in trainer_images
    assert "@sha256:" in ROTATION_IMAGE
    # EKS accepts a token 15 minutes: a run every 10, each done (cold pull included) within 5.
    assert cronjob["spec"]["schedule"] == "*/10 * * * *" and ROTATION_DEADLINE_SECONDS <= 5 * 60
    assert cronjob["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == ROTATION_DEADLINE_SECONDS
    # One alarm per worker, on the renewals the script logs, missing data breaching.
    alarms = {a["inputs"]["dimensions"]["Worker"]: a["inputs"] for a in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
              if a["inputs"].get("metricName") == RENEWED_METRIC}
    assert set(alarms) == set(WORKERS)
    assert all(a["treatMissingData"] == "breaching" and a["period"] == TOKEN_ALARM_PERIOD_SECONDS <= 15 * 60
               for a in alarms.values())
    (renewals,) = [f["inputs"] for f in plan.of_type("aws:cloudwatch/logMetricFilter:LogMetricFilter")
                   if f["inputs"]["metricTransformation"]["name"] == RENEWED_METRIC]
    assert renewals["pattern"] == renewed_filter_pattern() and renewals["logGroupName"].endswith("/application")
    # The line the script prints is the one the filter matches (Fluent Bit puts it under log_processed).
    monkeypatch.setenv("WORKERS", json.dumps([{"name": "prod-usw2", "cluster": "c", "region": "us-west-2", "dnsSuffix": "x"}]))
    monkeypatch.setattr(script, "pod_identity_credentials", lambda: {})
    monkeypatch.setattr(script, "signed_get", lambda *a, **k: {"cluster": {"endpoint": "https://e",
                                                                          "certificateAuthority": {"data": "Q0E="}}})
    monkeypatch.setattr(script, "presigned_token", lambda *a, **k: "k8s-aws-v1.t")
    monkeypatch.setattr(script, "write_secret", lambda *a, **k: None)
    assert script.main() == 0
    event = {"log_processed": json.loads(capsys.readouterr().out.strip())}
    field, value = re.fullmatch(r'\{ \$\.(\S+) = "(.+)" \}', renewed_filter_pattern()).groups()
    parts = field.split(".")
    assert event[parts[0]][parts[1]] == value
    assert event["log_processed"]["worker"] == "prod-usw2"  # the dimension's field


def test_the_rotation_only_patches_the_secret_pulumi_created():
    (secret,) = kubeconfig_secrets(["prod-usw2"])
    assert secret["metadata"] == {"name": "prod-usw2-kubeconfig", "namespace": "kueue-system",
                                  "labels": {"app.kubernetes.io/managed-by": "multikueue-token-rotation"}}
    assert "data" not in secret and "stringData" not in secret
    patch = json.loads(script.secret_patch("{}"))
    assert patch == {"data": {"kubeconfig": base64.b64encode(b"{}").decode()}}  # nothing but the data: never a create


def test_the_kubeconfig_is_one_kueue_accepts():
    config = json.loads(script.kubeconfig(name="w", endpoint="https://x.eks.amazonaws.com", ca_data="Q0E=", token="t"))
    (user,) = config["users"]
    assert set(user["user"]) == {"token"}  # no exec plugin, no tokenFile (refused by Kueue's validateKubeconfig)
    (cluster,) = config["clusters"]
    assert "certificate-authority" not in cluster["cluster"] and not cluster["cluster"].get("insecure-skip-tls-verify")


def test_a_team_sees_the_one_queue_of_its_environment(plan_of):
    manager, team = plan_of("prod"), plan_of("team-vision-prod")
    (queue,) = [q for q in team.manifests_on(None) if q["kind"] == "LocalQueue" and q["metadata"]["name"] == ANY_REGION]
    # The team's own MultiKueue queue, with its total as a quota of its own, neither lent nor borrowed.
    # (made by the manager's platform stack from its registry of teams)
    (team_queue,) = [q for q in kinds(manager, "ClusterQueue") if q["metadata"]["name"] == queue["spec"]["clusterQueue"]]
    (cluster_queue,) = [q for q in kinds(manager, "ClusterQueue") if q["metadata"]["name"] == ANY_REGION]
    assert team_queue["spec"]["admissionChecksStrategy"] == cluster_queue["spec"]["admissionChecksStrategy"]
    (flavor,) = team_queue["spec"]["resourceGroups"][0]["flavors"]
    gpus = next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpus["nominalQuota"] > 0 and gpus["borrowingLimit"] == gpus["lendingLimit"] == 0
    # (the team's namespace: the manager's platform stack makes it too, workload/team_tenancy.py)
    (namespace,) = [n for n in manager.manifests_on(None)
                    if n["kind"] == "Namespace" and n["metadata"]["name"] == queue["metadata"]["namespace"]]
    # (kubernetes.io/metadata.name: the label the API server gives every namespace, its name.)
    by_name = "kubernetes.io/metadata.name"
    assert team_queue["spec"]["namespaceSelector"] == {"matchLabels": {by_name: namespace["metadata"]["name"]}}
    # The environment's queue (the platform's own dispatches) admits its training namespace only:
    # no team takes the platform's quota.
    assert cluster_queue["spec"]["namespaceSelector"] == {"matchLabels": {by_name: "training-prod"}}
    assert [n["metadata"]["name"] for n in kinds(manager, "Namespace") if n["metadata"]["name"] == "training-prod"]


# --- scripts/verify on the manager --------------------------------------------------------------

def _cluster(name, status, reason="Active", message="Connected"):
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "Active", "status": status, "reason": reason, "message": message}]}}


ACTIVE_CHECK = {"metadata": {"name": "multikueue"}, "status": {"conditions": [{"type": "Active", "status": "True"}]}}


@pytest.mark.parametrize(("clusters", "check", "status", "summary"), [
    ([_cluster("prod-usw2", "True")], ACTIVE_CHECK, "pass", "1 workers connected: prod-usw2"),
    ([_cluster("prod-usw2", "False", "ClientConnectionFailed", "Unauthorized")], ACTIVE_CHECK, "fail",
     "1 of 1 workers not connected"),
    ([_cluster("a", "True"), _cluster("b", "False")], ACTIVE_CHECK, "fail", "1 of 2 workers not connected"),
    ([], ACTIVE_CHECK, "fail", "no MultiKueueCluster"),
    ([_cluster("prod-usw2", "True")], None, "fail", "AdmissionCheck is not Active"),
])
def test_verify_says_whether_each_worker_is_connected(clusters, check, status, summary):
    from verify.multikueue import check_workers
    result = check_workers(clusters, check)
    assert (result.status.value, summary in result.summary) == (status, True), result


class ProbeKube:
    """The manager's API as the probe sees it: the Workload Kueue makes for the probe, in `states`."""

    def __init__(self, states, finished=None):
        self.states, self.created, self.deleted, self.finished = list(states), [], [], finished

    def custom_object(self, group, version, namespace, plural, name):
        """The local JobSet, its status as MultiKueue copies it back from the worker."""
        conditions = [{"type": self.finished, "status": "True"}] if self.finished else []
        return {**self.created[0], "status": {"conditions": conditions}}

    def create_custom_object(self, group, version, namespace, plural, body):
        self.created.append(body)

    def delete_custom_object(self, group, version, namespace, plural, name):
        self.deleted.append(name)

    def custom_objects(self, group, version, namespace, plural):
        state, worker = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        owner = self.created[0]["metadata"]["name"]
        return [{"metadata": {"ownerReferences": [{"kind": "JobSet", "name": owner}]},
                 "status": {"admissionChecks": [{"name": "multikueue", "state": state}],
                            **({"clusterName": worker} if worker else {})}}]


@pytest.mark.parametrize(("states", "status", "worker"), [
    ([("Pending", None), ("Ready", "prod-usw2")], "pass", "prod-usw2"),
    ([("Pending", None)], "fail", None),
    ([("Rejected", None)], "fail", None),
])
def test_the_probe_passes_only_once_a_worker_admits_it_and_is_always_deleted(states, status, worker):
    from verify.multikueue import check_probe
    clock = iter(range(0, 10_000, 10))
    kube = ProbeKube(states)
    result = check_probe(kube, "training-prod", "img@sha256:1", now=1.0, timeout_s=60, sleep=lambda _: None,
                         clock=lambda: next(clock))
    assert result.status.value == status and result.measurements.get("worker") == worker
    (probe,) = kube.created
    assert probe["spec"]["managedBy"] == MANAGED_BY and probe["metadata"]["labels"][QUEUE_LABEL] == ANY_REGION
    assert validate_custom_resource(probe) == []
    assert kube.deleted == [probe["metadata"]["name"]]


@pytest.mark.parametrize(("finished", "status", "says"), [
    ("Completed", "pass", "ran to completion on worker prod-usw2 (pool gpu-spot)"),
    ("Failed", "fail", "admitted the probe, which failed"),
    (None, "fail", "did not complete in 1 minutes"),   # admitted, but no GPU node ever came up
])
def test_the_probe_runs_a_gpu_pod_on_the_worker_to_completion(finished, status, says):
    from verify.multikueue import check_probe
    clock = iter(range(0, 10_000, 10))
    kube = ProbeKube([("Ready", "prod-usw2")], finished)
    result = check_probe(kube, "training-prod", "img@sha256:1", now=1.0, pool="gpu-spot", timeout_s=60,
                         sleep=lambda _: None, clock=lambda: next(clock))
    assert result.status.value == status and says in result.summary
    (probe,) = kube.created
    pod = probe["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu-training/pool": "gpu-spot"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert validate_custom_resource(probe) == []
    assert kube.deleted == [probe["metadata"]["name"]]


def test_the_probe_asks_for_the_managers_cheapest_gpu_pool(plan_of):
    from components.platform import probe_pool
    config = load_stack_config(raw_config("prod"), project=PROJECT, stack="prod")
    assert isinstance(config, StackConfig) and probe_pool(config) == "gpu-spot"  # spot g6/g5 before the p5 reservation
    assert plan_of("prod").outputs["multiKueue"]["probePool"] == "gpu-spot"


def test_no_two_stacks_of_an_environment_share_a_global_name(plan_of):
    """S3 bucket and IAM role names are global: prod-usw2's must never be prod's."""
    def names(stack):
        plan = plan_of(stack)
        return ({b["inputs"]["bucket"] for b in plan.of_type("aws:s3/bucket:Bucket")}
                | {r["inputs"]["name"] for r in plan.of_type("aws:iam/role:Role") if r["inputs"].get("name")}
                | {p["inputs"]["name"] for p in plan.of_type("aws:iam/policy:Policy") if p["inputs"].get("name")})
    shared = names("prod") & names("prod-usw2")
    assert not shared, shared
    assert {f"gpu-training-prod-usw2-{p}-123456789012" for p in ("datasets", "artifacts", "access-logs")} <= names("prod-usw2")


# --- data that follows the job ------------------------------------------------------------------

def _replication_rules(plan):
    return {r["inputs"]["bucket"]: r["inputs"]["rules"] for r in plan.of_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig")}


def _routes(rules):
    return [(r["filter"]["prefix"], r["destination"]["bucket"]) for r in rules]


def test_datasets_go_to_each_worker_and_checkpoints_to_every_other_cluster(plan_of):
    """S3 does not replicate a replica again: a checkpoint written in us-west-2 reaches us-east-2
    only by a rule of prod-usw2's own, not through prod."""
    account = "123456789012"
    manager = _replication_rules(plan_of("prod"))
    assert _routes(manager[f"gpu-training-prod-datasets-{account}"]) == [
        ("", f"arn:aws:s3:::gpu-training-{worker}-datasets-{account}") for worker in WORKERS]
    assert _routes(manager[f"gpu-training-prod-artifacts-{account}"]) == [
        ("checkpoints/", f"arn:aws:s3:::gpu-training-{worker}-artifacts-{account}") for worker in WORKERS]
    clusters = ("prod", *WORKERS)
    for worker in WORKERS:
        rules = _replication_rules(plan_of(worker))
        assert set(rules) == {f"gpu-training-{worker}-artifacts-{account}"}, worker  # no datasets leave a worker
        (bucket_rules,) = rules.values()
        assert _routes(bucket_rules) == [("checkpoints/", f"arn:aws:s3:::gpu-training-{other}-artifacts-{account}")
                                         for other in clusters if other != worker], worker
        assert len({r["priority"] for r in bucket_rules}) == len(bucket_rules)  # S3 refuses rules of equal priority
        # Re-encrypted under each destination region's data key, by the alias that stack gives it.
        regions = {"prod": "us-east-1", **WORKERS}
        assert [r["destination"]["encryptionConfiguration"]["replicaKmsKeyId"] for r in bucket_rules] == [
            f"arn:aws:kms:{regions[other]}:{account}:alias/gpu-training-{other}-data" for other in clusters if other != worker]
    for stack in clusters:  # the alias each cluster's replicas are encrypted under exists there
        assert f"alias/gpu-training-{stack}-data" in {a["inputs"]["name"] for a in plan_of(stack).of_type("aws:kms/alias:Alias")}


@pytest.mark.parametrize("stack", ["prod", *WORKERS])
def test_the_checkpoint_directory_is_linked_to_s3_where_the_pods_mount_it(plan_of, stack):
    from components.data.lustre import CHECKPOINTS_DIR
    plan = plan_of(stack)
    (link,) = [d["inputs"] for d in plan.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
               if d["inputs"]["fileSystemPath"] == f"/{CHECKPOINTS_DIR}"]
    assert link["dataRepositoryPath"].endswith("-artifacts-123456789012/checkpoints/")
    assert set(link["s3"]["autoExportPolicy"]["events"]) == {"NEW", "CHANGED", "DELETED"}
    assert set(link["s3"]["autoImportPolicy"]["events"]) == {"NEW", "CHANGED", "DELETED"}
    sub_paths = {m.get("subPath") for m in (mount for job in kinds(plan, "JobSet")
                 for c in job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
                 for mount in c.get("volumeMounts", [])) if m.get("mountPath") == "/workspace/checkpoints"}
    assert sub_paths <= {CHECKPOINTS_DIR}  # the launcher's /workspace/checkpoints is that directory


def _trainer_env(jobset):
    (container,) = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    sub_path = next((m.get("subPath", "") for m in container["volumeMounts"] if m["mountPath"] == "/workspace/checkpoints"), "")
    return sub_path, {e["name"]: e.get("value") for e in container["env"]}


def test_no_two_jobsets_of_an_environment_write_one_checkpoint_directory(plan_of):
    """checkpoints/ is one namespace across prod's regions (replicated both ways, imported into each
    Lustre): prod and prod-usw2 both run a `pretrain-p5`, each in a directory of its own stack; the
    stack's cleanup judges that directory alone."""
    owners: dict[tuple[str, str], str] = {}
    for stack in ("prod", *WORKERS, "team-vision-prod"):
        plan = plan_of(stack)
        (cleanup,) = [c for c in kinds(plan, "CronJob") if c["metadata"]["name"] == "checkpoint-cleanup"]
        (cleanup_container,) = cleanup["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        root = {e["name"]: e.get("value") for e in cleanup_container["env"]}["CHECKPOINT_ROOT"]
        assert root == f"/workspace/checkpoints/{stack}", stack
        for jobset in kinds(plan, "JobSet"):
            sub_path, env = _trainer_env(jobset)
            name = jobset["metadata"]["name"]
            assert env["TRAIN_CHECKPOINT_DIR"] == f"{root}/{name}" and env["TRAIN_RUN_ID"] == f"{stack}/{name}"
            key = (sub_path, env["TRAIN_CHECKPOINT_DIR"])
            assert key not in owners, f"{stack}'s {name} writes {key}, as {owners[key]} does"
            owners[key] = f"{stack}/{name}"
    assert {"prod/pretrain-p5", "prod-usw2/pretrain-p5"} <= set(owners.values())


def test_the_replication_role_writes_only_the_other_regions_buckets(plan_of):
    (policy,) = [p for p in plan_of("prod-usw2").of_type("aws:iam/rolePolicy:RolePolicy") if "WriteReplicas" in p["inputs"]["policy"]]
    statements = {s["Sid"]: s for s in json.loads(policy["inputs"]["policy"])["Statement"]}
    assert statements["WriteReplicas"]["Resource"] == [
        f"arn:aws:s3:::gpu-training-{other}-artifacts-123456789012/*" for other in ("prod", "prod-use2")]
    assert statements["EncryptReplicas"]["Condition"] == {
        "ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/gpu-training-prod-data", "alias/gpu-training-prod-use2-data"]}}


def test_a_worker_its_manager_does_not_list_is_refused(tmp_path):
    """Its manager would never dispatch to it, nor send it datasets: refused before anything exists."""
    (tmp_path / "Pulumi.prod.yaml").write_text(
        "config:\n  gpu-training:network:\n    vpcCidr: 10.30.0.0/16\n"
        "  gpu-training:multiKueue:\n    workers: [{stack: prod-usw2, region: us-west-2, gpus: 32}]\n")
    found = config_errors(raw_config("prod-use2"), "prod-use2", sibling_stacks_dir=tmp_path)
    assert any("gpu-training:multiKueue.manager" in p and "does not list 'prod-use2'" in p
               and "stacks/Pulumi.prod.yaml" in p for p in found), found


def test_a_regional_stack_must_not_overlap_its_environments_other_regions(tmp_path):
    for stack, cidr in (("prod", "10.30.0.0/16"), ("prod-usw2", "10.31.0.0/16"), ("staging", "10.20.0.0/16")):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text(f"config:\n  gpu-training:network:\n    vpcCidr: {cidr}\n")
    overlapping = mutate(raw_config("prod-usw2"), "network.vpcCidr", "10.30.128.0/17")
    found = config_errors(overlapping, "prod-usw2", sibling_stacks_dir=tmp_path)
    assert any("overlaps the VPC CIDR 10.30.0.0/16 of stack 'prod'" in p for p in found), found
    # ... and prod sees prod-usw2's range, though that file is not an environment's own.
    moved = mutate(raw_config("prod"), "network.vpcCidr", "10.31.0.0/16")
    found = config_errors(moved, "prod", sibling_stacks_dir=tmp_path)
    assert any("of stack 'prod-usw2'" in p for p in found), found


# --- the network path: manager <-> worker peering -------------------------------------------------

def _private_routes(plan):
    return {t["inputs"]["tags"]["Name"]: t["inputs"]["routes"] for t in plan.of_type("aws:ec2/routeTable:RouteTable")
            if "-private-" in t["inputs"]["tags"]["Name"]}


def test_the_manager_peers_with_each_worker_and_routes_its_range(plan_of):
    plan = plan_of("prod")
    worker_cidrs = {"prod-usw2": "10.31.0.0/16", "prod-use2": "10.32.0.0/16"}
    requests = {r["inputs"]["tags"]["Name"]: r for r in plan.of_type("aws:ec2/vpcPeeringConnection:VpcPeeringConnection")}
    accepters = {a["inputs"]["region"]: a for a in
                 plan.of_type("aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter")}
    assert set(requests) == {peering_name(PROJECT, "prod", worker) for worker in WORKERS}
    assert set(accepters) == set(WORKERS.values())
    routes = _private_routes(plan)
    assert len(routes) == 3  # one private table per AZ, each with every worker's range to its accepted connection
    for worker, region in WORKERS.items():
        request = requests[peering_name(PROJECT, "prod", worker)]
        assert request["inputs"]["peerRegion"] == region
        assert request["inputs"]["peerVpcId"] == f"vpc-gpu-training-{worker}"  # found by its Name tag and CIDR
        assert "autoAccept" not in request["inputs"]  # inter-Region: accepted on the other side
        accepter = accepters[region]
        assert accepter["inputs"]["autoAccept"] is True
        assert accepter["inputs"]["vpcPeeringConnectionId"] == f"{request['name']}-id"
        for table in routes.values():
            assert {"cidrBlock": worker_cidrs[worker], "vpcPeeringConnectionId": f"{accepter['name']}-id"} in table
    # The public table does not: nothing reaches the worker from the public subnets.
    public = [t for t in plan.of_type("aws:ec2/routeTable:RouteTable") if t["inputs"]["tags"]["Name"].endswith("-public")]
    assert [r["cidrBlock"] for t in public for r in t["inputs"]["routes"]] == ["0.0.0.0/0"]


def test_the_worker_routes_to_its_manager_and_opens_its_api_to_that_range_only(plan_of):
    plan = plan_of("prod-usw2")
    assert not plan.of_type("aws:ec2/vpcPeeringConnection:VpcPeeringConnection")  # the manager's to make
    for table in _private_routes(plan).values():
        assert {"cidrBlock": "10.30.0.0/16", "vpcPeeringConnectionId": "pcx-10-30-0-0-16-10-31-0-0-16"} in table
    control_plane = "security-groups-control-plane-id"
    from_cidrs = [r["inputs"] for r in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                  if r["inputs"]["securityGroupId"] == control_plane and r["inputs"].get("cidrIpv4")]
    assert [(r["cidrIpv4"], r["ipProtocol"], r["fromPort"], r["toPort"]) for r in from_cidrs] == [
        ("10.30.0.0/16", "tcp", 443, 443)]
    # The manager's API admits no other VPC: nothing dispatches to it.
    assert not [r for r in plan_of("prod").of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                if r["inputs"]["securityGroupId"] == control_plane and r["inputs"].get("cidrIpv4")]


@pytest.mark.parametrize(("filters", "name", "expected"), [
    (vpc_filters(name="gpu-training-prod-usw2", cidr="10.31.0.0/16"), "tag:Name", ["gpu-training-prod-usw2"]),
    (vpc_filters(name="gpu-training-prod-usw2", cidr="10.31.0.0/16"), "cidr-block-association.cidr-block", ["10.31.0.0/16"]),
    (peering_filters(requester_cidr="10.30.0.0/16", accepter_cidr="10.31.0.0/16"), "requester-vpc-info.cidr-block",
     ["10.30.0.0/16"]),
    (peering_filters(requester_cidr="10.30.0.0/16", accepter_cidr="10.31.0.0/16"), "accepter-vpc-info.cidr-block",
     ["10.31.0.0/16"]),
    (peering_filters(requester_cidr="10.30.0.0/16", accepter_cidr="10.31.0.0/16"), "status-code", ["active"]),
])
def test_the_lookups_filter_on_what_names_the_other_side(filters, name, expected):
    assert [f["values"] for f in filters if f["name"] == name] == [expected]


@pytest.mark.parametrize("stack", ["prod", "prod-usw2"])
def test_a_first_deploy_that_finds_no_other_side_plans_without_the_peering(monkeypatch, stack):
    """Adding a region: the manager's first deploy finds no worker VPC, the worker's none active
    peering. Each plans its stack without that half and says so; the next deploy adds it."""
    from offline import plan as offline_plan
    monkeypatch.setitem(offline_plan.INVOKE_ANSWERS, "aws:ec2/getVpcs:getVpcs", lambda region, args: {"ids": [], "id": region})
    monkeypatch.setitem(offline_plan.INVOKE_ANSWERS, "aws:ec2/getVpcPeeringConnections:getVpcPeeringConnections",
                        lambda region, args: {"ids": [], "id": region})
    plan = offline_plan.synthesize(stack)
    assert not plan.of_type("aws:ec2/vpcPeeringConnection:VpcPeeringConnection")
    assert not plan.of_type("aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter")
    for table in _private_routes(plan).values():
        assert [r["cidrBlock"] for r in table] == ["0.0.0.0/0"]
    assert any("multiKueue:" in w and "Adding a region" in w for w in plan.warnings), plan.warnings
    # The worker's API ingress does not wait for the peering: it names a range, not a connection.
    if stack == "prod-usw2":
        assert [r for r in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                if r["inputs"].get("cidrIpv4") == "10.30.0.0/16"]


def test_a_peer_without_a_readable_stack_file_is_refused_before_any_resource(tmp_path):
    (tmp_path / "Pulumi.prod.yaml").write_text(
        "config:\n  gpu-training:network:\n    vpcCidr: 10.30.0.0/16\n  gpu-training:multiKueue:\n    workers:\n"
        + "".join(f"      - {{stack: {worker}, region: {region}}}\n" for worker, region in WORKERS.items()))
    found = config_errors(raw_config("prod"), "prod", sibling_stacks_dir=tmp_path)
    assert any("multiKueue.workers[0].stack" in p and "no stack file" in p for p in found), found
    (tmp_path / "Pulumi.prod-usw2.yaml").write_text("config:\n  gpu-training:network:\n    vpcCidr: 10.31.0.0/16\n")
    (tmp_path / "Pulumi.prod-use2.yaml").write_text("config:\n  gpu-training:network:\n    vpcCidr: 10.32.0.0/16\n")
    config = load_stack_config(raw_config("prod"), project=PROJECT, stack="prod", sibling_stacks_dir=tmp_path)
    assert isinstance(config, StackConfig) and config.multikueue is not None
    assert config.multikueue.workers[0].vpc_cidr == "10.31.0.0/16"
    worker = load_stack_config(raw_config("prod-usw2"), project=PROJECT, stack="prod-usw2", sibling_stacks_dir=tmp_path)
    assert isinstance(worker, StackConfig) and worker.multikueue is not None
    assert worker.multikueue.manager_vpc_cidr == "10.30.0.0/16"


def test_a_workers_kubernetes_objects_wait_for_its_route_back_to_the_manager(plan_of):
    """The deploy runner sits in the manager's VPC: on the worker, every Kubernetes object waits
    for the private route tables that carry the route back (updated in the same `pulumi up`)."""
    worker = plan_of("prod-usw2")
    (provider,) = [key for key in worker.dependencies if key == ("pulumi:providers:kubernetes", "cluster-k8s")]
    tables = {key for key in worker.dependencies if key[0] == "aws:ec2/routeTable:RouteTable" and "private" in key[1]}
    assert tables and tables <= worker.dependencies[provider]
    manager = plan_of("prod")
    assert not any(key[0] == "aws:ec2/routeTable:RouteTable"
                   for key in manager.dependencies[("pulumi:providers:kubernetes", "cluster-k8s")])


@pytest.mark.parametrize(("region", "name", "cidr", "found"), [
    ("us-west-2", "gpu-training-prod-usw2", "10.31.0.0/16", True),
    ("us-east-1", "gpu-training-prod-usw2", "10.31.0.0/16", False),  # looked up in the wrong region
    ("us-west-2", "gpu-training-prod-usw2", "10.30.0.0/16", False),  # by another stack's CIDR
    ("us-west-2", "gpu-training-prod", "10.31.0.0/16", False),       # by another stack's name
])
def test_the_offline_vpc_lookup_finds_only_a_planned_stacks_vpc_where_it_is(region, name, cidr, found):
    """The mock answers as AWS would once the checkout's stacks are deployed, so a peering planned
    offline shows the manager looked in the right region, by the right name and CIDR."""
    from offline import plan as offline_plan
    filters = [{"name": "tag:Name", "values": [name]}, {"name": "cidr-block-association.cidr-block", "values": [cidr]}]
    assert bool(offline_plan.INVOKE_ANSWERS["aws:ec2/getVpcs:getVpcs"]("us-east-1", {"region": region, "filters": filters})["ids"]) == found
