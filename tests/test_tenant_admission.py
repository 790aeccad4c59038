"""Issue #41 item 3: the platform's ValidatingAdmissionPolicies (components/workload/
tenant_admission.py) refuse in a team namespace what the policy pack refuses in a team stack's
plan, and admit every object the team plan itself makes.

The planned policies are run as the API server runs them (Kubernetes docs, "Validating Admission
Policy"): a request is judged when it matches the resource rules and every matchCondition; it is
refused when a validation is false or fails to evaluate (failurePolicy: Fail, validationActions:
Deny). The CEL is evaluated with cel-python, a CEL implementation of its own (not the API
server's cel-go): the expressions keep to the standard macros and functions both implement.
"""

import copy
from collections.abc import Callable, Sequence
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType
from celpy.evaluation import CELEvalError
from test_team_stack import STACK

from components.workload.multikueue import WORKER_GROUP

POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
NAMESPACE = "team-vision"
RESOURCES = {"Ingress": ("networking.k8s.io", "ingresses"), "Service": ("", "services"),
             "NetworkPolicy": ("networking.k8s.io", "networkpolicies"), "Job": ("batch", "jobs"),
             "JobSet": ("jobset.x-k8s.io", "jobsets"), "CronJob": ("batch", "cronjobs"), "ConfigMap": ("", "configmaps"),
             "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"), "Pod": ("", "pods")}
DEPLOYER = "arn:aws:sts::111122223333:assumed-role/gpu-training-ci-deploy-prod/run"  # whoever applies the stack
_compiled: dict[str, Any] = {}


def program(expression: str) -> Any:
    if expression not in _compiled:
        environment = celpy.Environment()
        _compiled[expression] = environment.program(environment.compile(expression))
    return _compiled[expression]


def holds(expression: str, activation: dict[str, Any]) -> bool:
    """True only when the expression evaluates to true: false and errors both refuse (failurePolicy Fail)."""
    try:
        result = program(expression).evaluate(activation)
    except CELEvalError:
        return False
    return result is True or (isinstance(result, BoolType) and bool(result))


def matches(policy: dict[str, Any], kind: str, activation: dict[str, Any]) -> bool:
    group, resource = RESOURCES[kind]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    if not any(group in r["apiGroups"] and resource in r["resources"] and "CREATE" in r["operations"] for r in rules):
        return False
    return all(holds(c["expression"], activation) for c in policy["spec"].get("matchConditions", []))


def refusals(policies: list[dict[str, Any]], manifest: dict[str, Any], user: str = DEPLOYER,
             groups: Sequence[str] = ("system:authenticated",)) -> list[str]:
    """The messages of every validation that refuses `manifest` (CREATE in its namespace, by `user` in `groups`)."""
    namespace = manifest["metadata"].get("namespace")
    group, resource = RESOURCES[manifest["kind"]]
    activation = {"object": json_to_cel(manifest), "oldObject": None, "request": json_to_cel({
        "namespace": namespace, "operation": "CREATE", "userInfo": {"username": user, "groups": list(groups)},
        "resource": {"group": group, "version": manifest["apiVersion"].rsplit("/", 1)[-1], "resource": resource}})}
    return [v["message"] for policy in policies if matches(policy, manifest["kind"], activation)
            for v in policy["spec"]["validations"] if not holds(v["expression"], activation)]


@pytest.fixture(scope="module")
def policies(plan_of) -> list[dict[str, Any]]:
    """The prod platform's policies: the cluster team-vision-prod's namespace lives on."""
    found = [m for m in plan_of("prod").manifests_on(None)
             if m["kind"] == POLICY and m["metadata"]["name"].startswith("gpu-training-team-")]  # not the trainer's progress (test_progress_access.py)
    assert {p["metadata"]["name"] for p in found} == {
        "gpu-training-team-ingress", "gpu-training-team-service", "gpu-training-team-network-policy",
        "gpu-training-team-queue-name", "gpu-training-team-job-context", "gpu-training-team-dispatcher-binding", "gpu-training-team-volumes"}
    return found


@pytest.fixture(scope="module")
def team_objects(plan_of) -> dict[str, dict[str, Any]]:
    """The team plan's own objects of the guarded kinds in its namespace, by kind/name."""
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in plan_of(STACK).manifests_on(None)
            if m["kind"] in RESOURCES and m["metadata"].get("namespace") == NAMESPACE}


def test_every_policy_is_bound_to_deny(plan_of, policies):
    bindings = {b["spec"]["policyName"]: b for b in plan_of("prod").manifests_on(None) if b["kind"] == BINDING}
    for policy in policies:
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert bindings[policy["metadata"]["name"]]["spec"]["validationActions"] == ["Deny"]
        # No binding narrows it: every namespace, then the matchCondition on the name.
        assert "matchResources" not in bindings[policy["metadata"]["name"]]["spec"]


def test_the_team_plans_own_objects_are_admitted(policies, team_objects):
    assert {k.split("/")[0] for k in team_objects} == set(RESOURCES) - {"Job", "Pod"}
    for name, manifest in team_objects.items():
        assert refusals(policies, manifest) == [], name


def test_the_platform_namespace_is_not_judged(plan_of, policies):
    """The platform's own namespace (training-<env>) is the platform's to shape: not a team's."""
    objects = [m for m in plan_of("prod").manifests_on(None) if m["kind"] in RESOURCES
               and m["metadata"].get("namespace") == "training-prod"]
    assert objects
    for manifest in objects:
        moved = copy.deepcopy(manifest)
        if manifest["kind"] == "Service":
            moved["spec"]["type"] = "LoadBalancer"
        assert refusals(policies, moved) == []


def changed(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, dict[str, Any]]], dict[str, Any]]:
    def make(objects: dict[str, dict[str, Any]]) -> dict[str, Any]:
        manifest = copy.deepcopy(objects[name])
        change(manifest)
        return manifest
    return make


def annotate(**values: str | None) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        annotations = manifest["metadata"]["annotations"]
        for key, value in values.items():
            full = "alb.ingress.kubernetes.io/" + key.replace("_", "-").replace("-name", ".name")
            if value is None:
                annotations.pop(full, None)
            else:
                annotations[full] = value
    return change


def path(value: str, path_type: str = "Prefix") -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        item = manifest["spec"]["rules"][0]["http"]["paths"][0]
        item["path"], item["pathType"] = value, path_type
    return change


def spec(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda manifest: manifest["spec"].update(values)


VIEWER, SERVICE, SAME = "Ingress/tensorboard", "Service/tensorboard", "NetworkPolicy/allow-same-namespace"
ALB_POLICY = "NetworkPolicy/allow-viewer-from-alb"
TENSORBOARD = {"matchLabels": {"app.kubernetes.io/name": "tensorboard"}}
BYPASSES = {
    # --- Ingress annotation values (the pack once read only their names)
    "internet-facing": changed(VIEWER, annotate(scheme="internet-facing")),
    "inbound-cidrs 0.0.0.0/0": changed(VIEWER, annotate(inbound_cidrs="0.0.0.0/0")),
    "a group of its own": changed(VIEWER, annotate(group_name="team-vision-public")),
    "no group: a load balancer of its own": changed(VIEWER, annotate(group_name=None)),
    "another security group": changed(VIEWER, annotate(security_groups="sg-0123456789abcdef0")),
    "the private subnets": changed(VIEWER, annotate(subnets="gpu-training-prod-private-us-east-1a")),
    "a forward to another team's target group": changed(VIEWER, annotate(**{"actions.forward": "{}"})),
    "another namespace's health check": changed(VIEWER, annotate(healthcheck_path="/team-nlp/")),
    "a default backend": changed(VIEWER, spec(defaultBackend={"service": {"name": "tensorboard", "port": {"number": 6006}}})),
    "another team's path": changed(VIEWER, path("/team-nlp")),
    "a path only starting like its own": changed(VIEWER, path("/team-vision2")),
    "a wildcard path": changed(VIEWER, path("/team-vision*")),
    "an ImplementationSpecific path": changed(VIEWER, path("/team-vision", "ImplementationSpecific")),
    "the whole load balancer": changed(VIEWER, path("/")),
    # --- Services
    "a LoadBalancer Service": changed(SERVICE, spec(type="LoadBalancer")),
    "a NodePort Service": changed(SERVICE, spec(type="NodePort")),
    "externalIPs": changed(SERVICE, spec(externalIPs=["10.30.0.10"])),
    # --- NetworkPolicies that open other namespaces' pods
    "ingress from every namespace": changed(SAME, spec(ingress=[{"from": [{"namespaceSelector": {}}]}])),
    "ingress rule without from": changed(SAME, spec(ingress=[{}])),
    "ingress from the pods' subnets": changed(ALB_POLICY, spec(ingress=[{"from": [{"ipBlock": {"cidr": "10.30.0.0/16"}}]}])),
    "egress to another team's TensorBoard": changed(SAME, spec(egress=[{"to": [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-nlp"}}, "podSelector": TENSORBOARD}]}])),
    "egress to every namespace's TensorBoard": changed(SAME, spec(egress=[{"to": [{
        "namespaceSelector": {}, "podSelector": TENSORBOARD}]}])),
    "egress rule without to": changed(SAME, spec(egress=[{"ports": [{"port": 6006, "protocol": "TCP"}]}])),
    "its own namespace widened by an expression": changed(SAME, spec(egress=[{"to": [{"namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": NAMESPACE},
        "matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}}]}])),
    "every pod of kube-system": changed("NetworkPolicy/allow-dns", lambda m: m["spec"]["egress"][0]["to"][0].pop("podSelector")),
}


# The refusal each bypass must meet (a fragment of its validation's message): not just any.
REFUSED_BY = {
    "internet-facing": "scheme", "inbound-cidrs 0.0.0.0/0": "inbound-cidrs", "a group of its own": "group.name",
    "no group: a load balancer of its own": "group.name", "another security group": "security-groups",
    "the private subnets": "subnets", "a forward to another team's target group": "does not; allowed",
    "another namespace's health check": "checks health", "a default backend": "defaultBackend",
    "another team's path": "routes a path", "a path only starting like its own": "routes a path",
    "a wildcard path": "routes a path", "an ImplementationSpecific path": "routes a path",
    "the whole load balancer": "routes a path", "a LoadBalancer Service": "not a ClusterIP",
    "a NodePort Service": "not a ClusterIP", "externalIPs": "externalIPs",
    "ingress from every namespace": "admits pods of another namespace", "ingress rule without from": "without `from`",
    "ingress from the pods' subnets": "admits pods of another namespace",
    "egress to another team's TensorBoard": "reaches pods of another namespace",
    "egress to every namespace's TensorBoard": "reaches pods of another namespace",
    "egress rule without to": "without `to`", "its own namespace widened by an expression": "reaches pods",
    "every pod of kube-system": "reaches pods of another namespace",
}


@pytest.mark.parametrize("bypass", BYPASSES, ids=list(BYPASSES))
def test_kubernetes_refuses_in_a_team_namespace(bypass, policies, team_objects):
    messages = refusals(policies, BYPASSES[bypass](team_objects))
    assert any(REFUSED_BY[bypass] in m for m in messages), (bypass, messages)


def test_a_team_may_still_shape_its_own_namespace(policies, team_objects):
    """Controls: what stays inside the namespace is admitted, so the refusals above are about what they change."""
    allowed = [
        changed(VIEWER, path("/team-vision/runs", "Exact")),
        changed(SAME, spec(egress=[{"to": [{"podSelector": TENSORBOARD}], "ports": [{"port": 6006, "protocol": "TCP"}]}])),
        changed(SAME, spec(ingress=[{"from": [{"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}}]}])),
        changed(SERVICE, spec(type="ClusterIP")),
    ]
    for make in allowed:
        assert refusals(policies, make(team_objects)) == []


# --- issue #41 item 2: a Job or JobSet that Kueue would not admit (no queue name) is refused
QUEUE = "kueue.x-k8s.io/queue-name"
JOBSET, CRONJOB = "JobSet/vision-finetune", "CronJob/checkpoint-cleanup"


def unqueued(manifest: dict[str, Any]) -> None:
    manifest["metadata"]["labels"].pop(QUEUE)


def bare_job(objects: dict[str, dict[str, Any]], labels: dict[str, str] | None = None) -> dict[str, Any]:
    """One replicated job of the team's JobSet, as a Job of its own."""
    template = objects[JOBSET]["spec"]["replicatedJobs"][0]["template"]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "bypass", "namespace": NAMESPACE, "labels": labels or {}}, "spec": template["spec"]}


def gpu_cronjob(manifest: dict[str, Any]) -> None:
    container = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = "8"


@pytest.mark.parametrize("make", [
    changed(JOBSET, unqueued),
    changed(JOBSET, lambda m: m["metadata"]["labels"].update({QUEUE: ""})),
    bare_job,
    changed(CRONJOB, gpu_cronjob),
], ids=["a JobSet without a queue name", "an empty queue name", "a bare GPU Job", "a CronJob of GPU Jobs"])
def test_kubernetes_refuses_work_kueue_would_not_admit(make, policies, team_objects):
    assert any("kueue.x-k8s.io/queue-name" in m for m in refusals(policies, make(team_objects)))


def _pod_of_jobset(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _pod_of_cronjob(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("make", [
    changed(JOBSET, lambda m: _pod_of_jobset(m).update(priorityClassName="system-node-critical")),
    changed(JOBSET, lambda m: _pod_of_jobset(m).update(nodeName="ip-10-0-1-1.ec2.internal")),
    changed(CRONJOB, lambda m: _pod_of_cronjob(m).update(priorityClassName="system-cluster-critical")),
    lambda objects: {**bare_job(objects, {QUEUE: "training"}), "spec": {
        **bare_job(objects)["spec"], "template": {**bare_job(objects)["spec"]["template"], "spec": {
            **bare_job(objects)["spec"]["template"]["spec"], "nodeName": "ip-10-0-1-1.ec2.internal"}}}},
], ids=["a JobSet at system-node-critical", "a JobSet on a named node", "a CronJob at system-cluster-critical",
        "a queued Job on a named node"])
def test_kubernetes_refuses_pods_placed_around_kueue_and_the_scheduler(make, policies, team_objects):
    """Both would reach other teams: a system priority preempts their pods, a nodeName skips the
    taints and the flavor's nodes. The queue name alone does not make such a pod safe."""
    assert any("priorityClassName or nodeName" in m for m in refusals(policies, make(team_objects)))


def test_the_controllers_jobs_and_queued_jobs_are_admitted(policies, team_objects):
    """A JobSet's child Jobs (the JobSet controller's, jobset-system) and a CronJob's Jobs (the
    CronJob controller's, kube-system) carry no queue name: their parents were judged."""
    child = bare_job(team_objects)
    assert refusals(policies, child, user="system:serviceaccount:jobset-system:jobset-controller") == []
    assert refusals(policies, child, user="system:serviceaccount:kube-system:cronjob-controller") == []
    assert refusals(policies, child, user="system:serviceaccount:team-vision:trainer")  # a team's own account is not
    assert refusals(policies, bare_job(team_objects, {QUEUE: "training"})) == []


@pytest.mark.parametrize("worker", ["prod-use2", "prod-usw2"])
def test_the_teams_objects_on_each_multikueue_worker_are_admitted_there(worker, plan_of):
    """A worker platform installs the same policies with its own load balancer; the team's tenancy
    there (workload/worker_tenant.py: policies, service account, queues; its JobSets come from the
    manager with their queue name) passes them."""
    policies = [m for m in plan_of(worker).manifests_on(None) if m["kind"] == POLICY]
    objects = [m for m in plan_of(STACK).manifests_on(worker)
               if m["kind"] in RESOURCES and m["metadata"].get("namespace") == NAMESPACE]
    assert policies and objects
    assert any(m["kind"] == "RoleBinding" and m["roleRef"]["name"] == WORKER_GROUP for m in objects)
    for manifest in objects:
        assert refusals(policies, manifest) == [], manifest["metadata"]["name"]


def test_only_the_team_stack_writes_the_job_context(policies, team_objects):
    """A member may create ConfigMaps (a job's hyperparameters), but not the job context the job
    command judges live submissions against: written first, it would fail the stack's next `up`."""
    context = team_objects["ConfigMap/gpu-training-job-context"]
    member = ("system:authenticated", f"{NAMESPACE}-members")
    assert any("written by the team stack's deploys only" in m
               for m in refusals(policies, context, user="vision-member", groups=member))
    assert refusals(policies, context) == []  # the deploy identity
    hyperparameters = {**context, "metadata": {**context["metadata"], "name": "vision-adhoc-hyperparameters"}}
    assert refusals(policies, hyperparameters, user="vision-member", groups=member) == []


def dispatcher_binding(*subjects: dict[str, str], role: str = WORKER_GROUP) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "mine", "namespace": NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": list(subjects)}


GROUP = "rbac.authorization.k8s.io"


@pytest.mark.parametrize("subjects", [
    [{"kind": "Group", "apiGroup": GROUP, "name": "team-vision-deployers"}],
    [{"kind": "ServiceAccount", "name": "trainer", "namespace": NAMESPACE}],
    [{"kind": "Group", "apiGroup": GROUP, "name": WORKER_GROUP}, {"kind": "User", "apiGroup": GROUP, "name": "me"}],
    [],
], ids=["its deployers", "its trainer", "the dispatcher and one more", "no subject"])
def test_the_dispatcher_role_is_bound_to_the_dispatcher_alone(policies, subjects):
    """The team's deploy role may bind MultiKueue's dispatcher role (team_tenancy.py), whose rules
    write Workloads' status (Kueue's admission record): bound to the team's own subjects it would
    let the team admit its own work past its queue."""
    messages = refusals(policies, dispatcher_binding(*subjects))
    assert any("MultiKueue's dispatcher" in m for m in messages), messages


def test_other_bindings_are_not_the_dispatcher_policys_to_judge(policies):
    """Controls: the dispatcher's own binding, and a binding of another role to the team's subjects."""
    assert refusals(policies, dispatcher_binding({"kind": "Group", "apiGroup": GROUP, "name": WORKER_GROUP})) == []
    assert refusals(policies, dispatcher_binding({"kind": "Group", "apiGroup": GROUP, "name": "team-vision-deployers"},
                                                 role="view")) == []


def pods_of_the_team_plan(plan_of) -> list[dict[str, Any]]:
    """Each pod the team plan's JobSets, Deployments and CronJobs would make, as a Pod in its namespace."""
    pods = []
    for m in plan_of(STACK).manifests_on(None):
        if m["metadata"].get("namespace") != NAMESPACE:
            continue
        templates = ([job["template"]["spec"]["template"] for job in m["spec"]["replicatedJobs"]] if m["kind"] == "JobSet"
                     else [m["spec"]["template"]] if m["kind"] == "Deployment"
                     else [m["spec"]["jobTemplate"]["spec"]["template"]] if m["kind"] == "CronJob" else [])
        pods += [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NAMESPACE},
                  "spec": t["spec"]} for t in templates]
    return pods


def test_the_team_plans_pods_are_admitted(plan_of, policies):
    pods = pods_of_the_team_plan(plan_of)
    assert len(pods) >= 3 and any(v.get("persistentVolumeClaim") for p in pods for v in p["spec"].get("volumes", []))
    for pod in pods:
        assert refusals(policies, pod) == []


@pytest.mark.parametrize("volume", [
    {"name": "root", "nfs": {"server": "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com", "path": "/"}},
    {"name": "root", "csi": {"driver": "efs.csi.aws.com", "volumeAttributes": {"fileSystemId": "fs-0123456789abcdef0"}}},
], ids=["nfs", "inline EFS CSI"])
def test_a_pod_may_not_mount_the_file_system_past_its_access_point(plan_of, policies, volume):
    """Every team's directory is owned by the trainer's user: mounted at the root, one team's pod
    would read another's checkpoints."""
    pod = copy.deepcopy(pods_of_the_team_plan(plan_of)[0])
    pod["spec"]["volumes"] = [*pod["spec"].get("volumes", []), volume]
    assert any("mounts a file system directly" in m for m in refusals(policies, pod))
