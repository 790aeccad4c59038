"""Progress on the job itself (issue 42, item 2), the platform's side: the trainer container's own
API token, the tenant's Role (patch pods, nothing else) and the cluster's ValidatingAdmissionPolicy,
whose CEL is evaluated here by cel-python (standard CEL, the subset the policy is written in) on the
requests a trainer could make: only a change of its own pod's progress annotation passes.

What no offline test shows: that the API server compiles the policy without type-checking
warnings (`kubectl get validatingadmissionpolicy gpu-training-trainer-progress -o yaml`,
status.typeChecking) and puts the bound pod's name in the token's user info; docs/security.md says so.
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import kubernetes_validate
import pytest
from celpy import celtypes
from plan_queries import kubernetes_minor
from stack_configs import MANIFEST_STACKS, PLATFORM_STACKS, TEAM_STACKS

from components.workload import progress_access as access
from components.workload.training_job import API_TOKEN_DIR, API_TOKEN_VOLUME, POD_NAME_VAR, POD_NAMESPACE_VAR
from trainer.launcher import status_publisher

CEL = celpy.Environment()


def evaluate(expression: str, activation: dict[str, Any]) -> Any:
    return CEL.program(CEL.compile(expression)).evaluate(activation)


def is_true(result: Any) -> bool:
    """A validation passes only on a boolean true (an error or any other value refuses)."""
    return isinstance(result, celtypes.BoolType) and bool(result)


def admitted(policy: dict, *, obj: dict, old: dict, username: str, namespace: str, extra: dict) -> tuple[bool, list[str]]:
    """The policy's verdict on one pod UPDATE, as the API server computes it: match conditions, then
    variables, then every validation (True admits). (False, messages) for a refusal."""
    request = {"userInfo": {"username": username, "extra": extra}, "namespace": namespace, "operation": "UPDATE"}
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old),
                                  "request": celpy.json_to_cel(request)}
    spec = policy["spec"]
    if not all(evaluate(m["expression"], activation) for m in spec["matchConditions"]):
        return True, ["not matched"]
    activation["variables"] = celtypes.MapType({celtypes.StringType(v["name"]): evaluate(v["expression"], activation)
                                                for v in spec["variables"]})
    refused = [v["message"] for v in spec["validations"] if not is_true(evaluate(v["expression"], activation))]
    return not refused, refused


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "pretrain-node-0-0-x7k2p", "namespace": "team-vision",
                    "labels": {"app.kubernetes.io/name": "pretrain", "jobset.sigs.k8s.io/jobset-name": "pretrain"},
                    "annotations": {"gpu-training/hyperparameters-sha256": "ab12", "jobset.sigs.k8s.io/restart-attempt": "0"},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pretrain-node-0", "uid": "u1"}],
                    "finalizers": ["batch.kubernetes.io/job-tracking"]},
       "spec": {"serviceAccountName": "trainer", "containers": [{"name": "trainer", "image": "repo/trainer@sha256:1"}]}}
TRAINER = "system:serviceaccount:team-vision:trainer"
BOUND = {access.POD_NAME_EXTRA: ["pretrain-node-0-0-x7k2p"], "authentication.kubernetes.io/pod-uid": ["u2"]}


def changed(change) -> dict:
    pod = copy.deepcopy(POD)
    change(pod)
    return pod


def with_progress(pod: dict) -> None:
    pod["metadata"]["annotations"][access.PROGRESS_ANNOTATION] = '{"step":5}'


CASES = [
    # (case, new object, username, user extra, admitted?, message part)
    ("own pod, progress only", changed(with_progress), TRAINER, BOUND, True, ""),
    ("another pod of the namespace", changed(with_progress), TRAINER,
     {access.POD_NAME_EXTRA: ["other-node-0-0-aaaaa"]}, False, "only the pod its token is bound to"),
    ("a token bound to no pod", changed(with_progress), TRAINER, {}, False, "only the pod its token is bound to"),
    ("a label", changed(lambda p: p["metadata"]["labels"].update({"app.kubernetes.io/name": "web"})), TRAINER, BOUND,
     False, "labels"),
    ("another annotation", changed(lambda p: p["metadata"]["annotations"].update(
        {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})), TRAINER, BOUND, False, "only the annotation"),
    ("an annotation removed", changed(lambda p: p["metadata"]["annotations"].pop("gpu-training/hyperparameters-sha256")),
     TRAINER, BOUND, False, "only the annotation"),
    ("the image", changed(lambda p: p["spec"]["containers"][0].update({"image": "evil"})), TRAINER, BOUND, False,
     "only the annotation"),
    ("a finalizer", changed(lambda p: p["metadata"]["finalizers"].append("x/y")), TRAINER, BOUND, False, "finalizers"),
    ("owners", changed(lambda p: p["metadata"].pop("ownerReferences")), TRAINER, BOUND, False, "owners"),
    # Another account is not this policy's business (RBAC decides what it may do).
    ("another service account", changed(lambda p: p["metadata"]["labels"].clear()),
     "system:serviceaccount:team-vision:checkpoint-cleanup", {}, True, "not matched"),
    ("a trainer account of another namespace's name", changed(with_progress), "system:serviceaccount:team-other:trainer",
     BOUND, True, "not matched"),
]


@pytest.mark.parametrize(("obj", "username", "extra", "expected", "message"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_policy_admits_only_a_trainers_own_progress_annotation(obj, username, extra, expected, message):
    verdict, messages = admitted(access.admission_policy_manifest(), obj=obj, old=POD, username=username,
                                 namespace="team-vision", extra=extra)
    assert verdict is expected, messages
    assert not message or any(message in m for m in messages), messages


def test_a_pod_without_annotations_or_labels_gets_its_first_progress():
    bare = copy.deepcopy(POD)
    for key in ("annotations", "labels", "finalizers", "ownerReferences"):
        bare["metadata"].pop(key)
    new = copy.deepcopy(bare)
    new["metadata"]["annotations"] = {access.PROGRESS_ANNOTATION: "{}"}
    assert admitted(access.admission_policy_manifest(), obj=new, old=bare, username=TRAINER, namespace="team-vision",
                    extra=BOUND) == (True, [])


def test_the_launcher_and_the_manifests_agree_on_names_and_paths():
    assert status_publisher.ANNOTATION == access.PROGRESS_ANNOTATION
    assert (status_publisher.POD_NAME_VAR, status_publisher.POD_NAMESPACE_VAR) == (POD_NAME_VAR, POD_NAMESPACE_VAR)
    assert f"{API_TOKEN_DIR}/token" == status_publisher.TOKEN_FILE


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_each_tenant_lets_its_trainer_patch_pods_and_nothing_else(stack, plan_of):
    plan = plan_of(stack)
    minor = f"{kubernetes_minor(stack)}.0"
    roles = [m for m in plan.manifests() if m["kind"] in ("Role", "RoleBinding") and m["metadata"]["name"] == access.ROLE_NAME]
    namespaces = {m["metadata"]["namespace"] for m in plan.manifests() if m["kind"] == "JobSet"}
    assert namespaces <= {m["metadata"]["namespace"] for m in roles}
    for manifest in roles:
        kubernetes_validate.validate(manifest, minor, strict=True)
        namespace = manifest["metadata"]["namespace"]
        if manifest["kind"] == "Role":
            assert manifest["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
        else:
            assert manifest["subjects"] == [{"kind": "ServiceAccount", "name": "trainer", "namespace": namespace}]
            assert manifest["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": access.ROLE_NAME}


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_platform_cluster_has_the_policy_and_binds_it_everywhere(stack, plan_of):
    plan = plan_of(stack)
    minor = f"{kubernetes_minor(stack)}.0"
    by_kind = {m["kind"]: m for m in plan.manifests_on(None) if m["metadata"]["name"] == access.POLICY_NAME}
    assert set(by_kind) == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    for manifest in by_kind.values():
        kubernetes_validate.validate(manifest, minor, strict=True)
    assert by_kind["ValidatingAdmissionPolicy"] == access.admission_policy_manifest()
    binding = by_kind["ValidatingAdmissionPolicyBinding"]["spec"]
    assert binding == {"policyName": access.POLICY_NAME, "validationActions": ["Deny"]}  # no namespace left out


@pytest.mark.parametrize("stack", TEAM_STACKS)
def test_a_team_stack_relies_on_its_platforms_policy(stack, plan_of):
    assert not [m for m in plan_of(stack).manifests() if m["kind"].startswith("ValidatingAdmissionPolicy")]


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_only_the_trainer_container_holds_an_api_token_bound_to_its_pod(stack, plan_of):
    for jobset in [m for m in plan_of(stack).manifests() if m["kind"] == "JobSet"]:
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False and pod["serviceAccountName"] == "trainer"
        (volume,) = [v for v in pod["volumes"] if v["name"] == API_TOKEN_VOLUME]
        assert volume["projected"]["sources"][0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
        (trainer,) = pod["containers"]
        assert {"name": API_TOKEN_VOLUME, "mountPath": API_TOKEN_DIR, "readOnly": True} in trainer["volumeMounts"]
        env = {e["name"]: e for e in trainer["env"]}
        assert env[POD_NAME_VAR]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        assert env[POD_NAMESPACE_VAR]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
