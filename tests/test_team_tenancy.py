"""Issue #41 item 1, Kubernetes side: a team stack deployable by its team deploy role.

The role's only Kubernetes identity is the platform's access entry (team_deploy_access.py):
AmazonEKSAdminPolicy scoped to `team-<team>`, and the group `team-<team>-deployers`, which the
platform binds in that namespace to the ClusterRole `gpu-training-team-deployer`; the platform makes
the namespace, its ResourceQuota and LimitRange (team_tenancy.py). Here every Kubernetes object of
team-vision-prod's plan, on the manager and on each worker, is asked of that identity under the
RBAC its platforms plan, with Kubernetes' own rules (tests/rbac_model.py), escalation included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from rbac_model import (
    Grant,
    Identity,
    Request,
    Rule,
    allows,
    may_create_role,
    may_create_role_binding,
    uncovered,
)
from stack_configs import PROJECT, raw_config

from components.workload.multikueue import WORKER_GROUP
from components.workload.team_tenancy import (
    DEPLOYER_CLUSTER_ROLE,
    deployer_cluster_role,
    team_deployers_group,
)

TEAM, TEAM_STACK, NAMESPACE = "vision", "team-vision-prod", "team-vision"
ENTRY = "aws:eks/accessEntry:AccessEntry"
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminPolicy"
FIXTURES = Path(__file__).parent / "fixtures" / "team_namespace_before"

_CREATE_WRITE = ("create", "delete", "deletecollection", "patch", "update")
_READ = ("get", "list", "watch")
# AmazonEKSAdminPolicy, row by row (EKS User Guide, "Review access policy permissions",
# AmazonEKSAdminPolicy; awsdocs/amazon-eks-user-guide latest/ug/manage-access/k8s-access/
# access-policy-reference.adoc). A fixed list of built-in resources: no custom resource, no
# namespaces or resourcequotas write, no persistentvolumes.
AMAZON_EKS_ADMIN_POLICY = (
    Rule(("apps",), ("daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                     "replicasets/scale", "statefulsets", "statefulsets/scale"), _CREATE_WRITE),
    Rule(("apps",), ("controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                     "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
                     "statefulsets/scale", "statefulsets/status"), _READ),
    Rule(("authorization.k8s.io",), ("localsubjectaccessreviews",), ("create",)),
    Rule(("autoscaling",), ("horizontalpodautoscalers",), _CREATE_WRITE),
    Rule(("autoscaling",), ("horizontalpodautoscalers", "horizontalpodautoscalers/status"), _READ),
    Rule(("batch",), ("cronjobs", "jobs"), _CREATE_WRITE),
    Rule(("batch",), ("cronjobs", "cronjobs/status", "jobs", "jobs/status"), _READ),
    Rule(("discovery.k8s.io",), ("endpointslices",), _READ),
    Rule(("extensions",), ("daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses",
                           "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"),
         _CREATE_WRITE),
    Rule(("extensions",), ("daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
                           "ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale",
                           "replicasets/status", "replicationcontrollers/scale"), _READ),
    Rule(("networking.k8s.io",), ("ingresses", "ingresses/status", "networkpolicies"), _READ),
    Rule(("networking.k8s.io",), ("ingresses", "networkpolicies"), _CREATE_WRITE),
    Rule(("policy",), ("poddisruptionbudgets",), _CREATE_WRITE),
    Rule(("policy",), ("poddisruptionbudgets", "poddisruptionbudgets/status"), _READ),
    Rule(("rbac.authorization.k8s.io",), ("rolebindings", "roles"), (*_CREATE_WRITE, *_READ)),
    Rule(("",), ("configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
                 "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                 "services/status"), _READ),
    Rule(("",), ("pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"), _READ),
    Rule(("",), ("configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                 "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"),
         _CREATE_WRITE),
    Rule(("",), ("pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"), _CREATE_WRITE),
    Rule(("",), ("serviceaccounts",), ("impersonate",)),
    Rule(("",), ("bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                 "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"), _READ),
    Rule(("",), ("namespaces",), _READ),
)

# Each kind a team plan makes: its API group, its resource, whether it lives in a namespace.
KINDS = {
    "Namespace": ("", "namespaces", False), "PersistentVolume": ("", "persistentvolumes", False),
    "ResourceQuota": ("", "resourcequotas", True), "LimitRange": ("", "limitranges", True),
    "ConfigMap": ("", "configmaps", True), "PersistentVolumeClaim": ("", "persistentvolumeclaims", True),
    "Service": ("", "services", True), "ServiceAccount": ("", "serviceaccounts", True),
    "Deployment": ("apps", "deployments", True), "CronJob": ("batch", "cronjobs", True),
    "Ingress": ("networking.k8s.io", "ingresses", True), "NetworkPolicy": ("networking.k8s.io", "networkpolicies", True),
    "Role": ("rbac.authorization.k8s.io", "roles", True), "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles", False),
    "JobSet": ("jobset.x-k8s.io", "jobsets", True), "LocalQueue": ("kueue.x-k8s.io", "localqueues", True),
    "SecretStore": ("external-secrets.io", "secretstores", True),
    "ExternalSecret": ("external-secrets.io", "externalsecrets", True),
}
# What Pulumi's Kubernetes provider asks of each object it manages (team_tenancy.MANAGE).
PULUMI_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


def _rules(manifest: dict[str, Any]) -> tuple[Rule, ...]:
    return tuple(Rule.of(rule) for rule in manifest.get("rules", []))


def deployer_identity(plan, team: str, environment: str) -> Identity:
    """Team `team`'s deploy role on the cluster of platform plan `plan`, from what that plan makes:
    its access entry's groups, its access policy's scope, and the RBAC objects binding those groups."""
    suffix = f":role/{PROJECT}-ci-team-{team}-{environment}"
    (entry,) = [e["inputs"] for e in plan.of_type(ENTRY) if e["inputs"]["principalArn"].endswith(suffix)]
    # (an access policy is EKS's authorizer, not an RBAC object: escalation prevention ignores it)
    grants = [Grant(AMAZON_EKS_ADMIN_POLICY if a["inputs"]["policyArn"] == ADMIN_POLICY else (), namespace, rbac=False)
              for a in plan.of_type(ASSOCIATION) if a["inputs"]["principalArn"] == entry["principalArn"]
              for namespace in a["inputs"]["accessScope"].get("namespaces") or [None]]
    groups = set(entry.get("kubernetesGroups") or [])
    manifests = plan.manifests_on(None)
    roles = {("ClusterRole", m["metadata"]["name"], None): m for m in manifests if m["kind"] == "ClusterRole"}
    roles |= {("Role", m["metadata"]["name"], m["metadata"]["namespace"]): m for m in manifests if m["kind"] == "Role"}
    for binding in (m for m in manifests if m["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s["kind"] == "Group" and s["name"] in groups for s in binding.get("subjects", [])):
            continue
        namespace = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles[(ref["kind"], ref["name"], namespace if ref["kind"] == "Role" else None)]
        grants.append(Grant(_rules(role), namespace))
    return Identity(tuple(grants))


def _role_rules(manifest: dict[str, Any], team_objects: list[dict], platform_objects: list[dict]) -> tuple[Rule, ...]:
    """The rules of the role a RoleBinding references: a Role of the team plan, or a ClusterRole of the platform's."""
    ref, namespace = manifest["roleRef"], manifest["metadata"]["namespace"]
    candidates = team_objects if ref["kind"] == "Role" else platform_objects
    (role,) = [m for m in candidates if m["kind"] == ref["kind"] and m["metadata"]["name"] == ref["name"]
               and m["metadata"].get("namespace") == (namespace if ref["kind"] == "Role" else None)]
    return _rules(role)


def refusals(identity: Identity, manifest: dict, team_objects: list[dict], platform_objects: list[dict]) -> list[str]:
    """Why `identity` may not manage `manifest` as Pulumi does (empty: it may)."""
    group, resource, namespaced = KINDS[manifest["kind"]]
    metadata = manifest["metadata"]
    namespace = metadata.get("namespace") if namespaced else None
    refused = [f"{verb} {resource}" for verb in PULUMI_VERBS if not allows(identity, Request(
        verb, group, resource, namespace, None if verb in ("create", "list", "watch") else metadata["name"]))]
    if manifest["kind"] in ("Role", "ClusterRole") and not may_create_role(identity, _rules(manifest), namespace=namespace):
        refused.append(f"escalation: {[f'{r.verb} {r.api_group}/{r.resource}' for r in uncovered(identity, _rules(manifest), namespace)]}")
    if manifest["kind"] == "RoleBinding":
        rules = _role_rules(manifest, team_objects, platform_objects)
        if not may_create_role_binding(identity, rules, namespace=str(namespace), role_kind=manifest["roleRef"]["kind"],
                                       role_name=manifest["roleRef"]["name"]):
            refused.append(f"escalation: binds {[f'{r.verb} {r.api_group}/{r.resource}' for r in uncovered(identity, rules, namespace)]}")
    return refused


def _team_clusters(plan_of) -> list[tuple[str | None, str]]:
    """(the team plan's cluster key, the platform stack of that cluster): the manager's, then each worker's."""
    team_plan = plan_of(TEAM_STACK)
    workers = sorted({stack for stack in team_plan.other_clusters.values()})
    assert workers, "team-vision-prod reaches no worker: the walk would miss the workers' clusters"
    return [(None, "prod"), *[(worker, worker) for worker in workers]]


def test_the_team_deploy_role_may_make_every_object_of_its_plan(plan_of):
    team_plan = plan_of(TEAM_STACK)
    walked = 0
    refused_kinds: dict[str, list[str]] = {}
    for cluster, platform_stack in _team_clusters(plan_of):
        platform = plan_of(platform_stack)
        identity = deployer_identity(platform, TEAM, "prod")
        team_objects = team_plan.manifests_on(cluster)
        for manifest in team_objects:
            walked += 1
            why = refusals(identity, manifest, team_objects, platform.manifests_on(None))
            if why:
                refused_kinds.setdefault(manifest["kind"], []).append(f"{platform_stack}: {manifest['metadata']['name']}: {why}")
    assert walked >= 55, f"walked {walked} objects only"
    # Every object, escalation checks included, is the team deploy role's to make: its PersistentVolumes
    # (cluster-scoped) are the platform's (workload/team_volumes.py).
    assert refused_kinds == {}


def test_the_team_plan_makes_no_namespace_quota_or_limits_and_knows_every_kind(plan_of):
    kinds = {m["kind"] for m in plan_of(TEAM_STACK).manifests()}
    assert not kinds & {"Namespace", "ResourceQuota", "LimitRange"}
    assert kinds <= set(KINDS), f"kinds the walk does not know: {kinds - set(KINDS)}"


@pytest.mark.parametrize("platform_stack", ["prod", "prod-usw2"])
def test_outside_its_namespace_the_team_deploy_role_is_refused(plan_of, platform_stack):
    identity = deployer_identity(plan_of(platform_stack), TEAM, "prod")
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-audio"}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "x", "namespace": "training-prod"}}
    cluster_role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"},
                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-audio"}}
    for manifest in (config_map, jobset, cluster_role, namespace):
        assert "create " + KINDS[manifest["kind"]][1] in refusals(identity, manifest, [], []), manifest
    # Its own namespace's caps are the platform's: readable, not writable.
    assert allows(identity, Request("get", "", "resourcequotas", NAMESPACE, "training-quota"))
    for verb in ("update", "patch", "delete"):
        assert not allows(identity, Request(verb, "", "resourcequotas", NAMESPACE, "training-quota"))
        assert not allows(identity, Request(verb, "", "namespaces", NAMESPACE, NAMESPACE))
    # A ClusterQueue (its GPU quota) is cluster-scoped: not even in its own namespace's name.
    assert not allows(identity, Request("patch", "kueue.x-k8s.io", "clusterqueues", None, NAMESPACE))


def test_a_role_granting_more_than_the_deployer_holds_is_refused_though_it_may_create_roles(plan_of):
    """The case a lenient model (create on roles suffices) gets wrong: Kubernetes refuses a Role
    that grants what its creator lacks, so the team-member Role (jobsets/finalizers, Workloads)
    needs the deployer ClusterRole's rules for them, and a subresource is not its resource's."""
    team_objects = plan_of(TEAM_STACK).manifests_on(None)
    (member_role,) = [m for m in team_objects if m["kind"] == "Role" and m["metadata"]["name"] == "team-member"]
    identity = deployer_identity(plan_of("prod"), TEAM, "prod")
    assert may_create_role(identity, _rules(member_role), namespace=NAMESPACE)
    without = Identity(tuple(Grant(tuple(r for r in g.rules if "jobsets/finalizers" not in r.resources), g.namespace)
                             for g in identity.grants))
    assert allows(without, Request("create", "rbac.authorization.k8s.io", "roles", NAMESPACE))  # the lenient view
    assert not may_create_role(without, _rules(member_role), namespace=NAMESPACE)
    assert [(f.verb, f.resource) for f in uncovered(without, _rules(member_role), NAMESPACE)] == [
        ("update", "jobsets/finalizers")]
    # Nor may it grant itself a ClusterQueue through a Role of its namespace.
    greedy = [Rule(("kueue.x-k8s.io",), ("clusterqueues",), ("patch",))]
    assert not may_create_role(identity, greedy, namespace=NAMESPACE)


def test_rbac_model_follows_kubernetes_semantics():
    """Kubernetes documentation, "Using RBAC Authorization" (rbac_model.py names each source)."""
    admin_here = Identity((Grant(AMAZON_EKS_ADMIN_POLICY, NAMESPACE),))
    # A namespaced grant reaches its namespace only, and no cluster-scoped object.
    assert allows(admin_here, Request("create", "", "configmaps", NAMESPACE))
    assert not allows(admin_here, Request("create", "", "configmaps", "team-audio"))
    assert not allows(admin_here, Request("create", "", "persistentvolumes", None))
    # Its own namespace is readable (namespaces/<name> carries <name> as its namespace), not writable.
    assert allows(admin_here, Request("get", "", "namespaces", NAMESPACE, NAMESPACE))
    assert not allows(admin_here, Request("create", "", "namespaces", None))
    # A resource is matched exactly: `pods` is not `pods/log`'s rule, nor a CRD's plural in another group.
    assert not allows(Identity((Grant((Rule(("",), ("pods",), ("get",)),), None),)), Request("get", "", "pods/log", "x"))
    assert not allows(Identity((Grant((Rule(("",), ("jobsets",), ("create",)),), None),)),
                      Request("create", "jobset.x-k8s.io", "jobsets", "x"))
    assert allows(Identity((Grant((Rule(("",), ("*/log",), ("get",)),), None),)), Request("get", "", "pods/log", "x"))
    # resourceNames never allow a create (the request names no object).
    named = Identity((Grant((Rule(("",), ("configmaps",), ("create", "get"), ("a",)),), None),))
    assert allows(named, Request("get", "", "configmaps", "x", "a"))
    assert not allows(named, Request("create", "", "configmaps", "x", "a"))
    # A `*` asked for in a new Role is covered only by a `*` held.
    assert uncovered(admin_here, [Rule(("",), ("*",), ("get",))], NAMESPACE)
    # What an EKS access policy grants acts but cannot be granted on: escalation prevention reads
    # RBAC objects only (aws/containers-roadmap#2682: AmazonEKSAdminPolicy in a namespace, refused a
    # RoleBinding of `view` there). A lenient model, counting every authorizer's grants, allows it.
    eks_admin = Identity((Grant(AMAZON_EKS_ADMIN_POLICY, NAMESPACE, rbac=False),))
    viewish = [Rule(("",), ("pods", "configmaps"), ("get", "list", "watch"))]
    assert allows(eks_admin, Request("get", "", "pods", NAMESPACE, "p"))
    assert not may_create_role_binding(eks_admin, viewish, namespace=NAMESPACE, role_kind="ClusterRole", role_name="view")
    assert not may_create_role(eks_admin, viewish, namespace=NAMESPACE)
    # `bind` on the referenced role lets one bind what one does not hold.
    binder = Identity((Grant((Rule(("rbac.authorization.k8s.io",), ("rolebindings",), ("create",)),
                              Rule(("rbac.authorization.k8s.io",), ("clusterroles",), ("bind",), ("view",))), NAMESPACE),))
    view = [Rule(("",), ("pods",), ("get",))]
    assert may_create_role_binding(binder, view, namespace=NAMESPACE, role_kind="ClusterRole", role_name="view")
    assert not may_create_role_binding(binder, view, namespace=NAMESPACE, role_kind="ClusterRole", role_name="edit")


@pytest.mark.parametrize("platform_stack", ["prod", "prod-usw2", "prod-use2"])
def test_the_platform_binds_each_registered_team_and_its_entry_carries_the_group(plan_of, platform_stack):
    plan = plan_of(platform_stack)
    manifests = plan.manifests_on(None)
    (role,) = [m for m in manifests if m["kind"] == "ClusterRole" and m["metadata"]["name"] == DEPLOYER_CLUSTER_ROLE]
    assert role["rules"] == deployer_cluster_role()["rules"]
    assert not [m for m in manifests if m["kind"] == "ClusterRoleBinding" and m["roleRef"]["name"] == DEPLOYER_CLUSTER_ROLE]
    for row in raw_config(platform_stack)[f"{PROJECT}:teams"]:
        team = row["name"]
        (binding,) = [m for m in manifests if m["kind"] == "RoleBinding" and m["roleRef"]["name"] == DEPLOYER_CLUSTER_ROLE
                      and m["metadata"]["namespace"] == f"team-{team}"]
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                        "name": team_deployers_group(team)}]
        (entry,) = [e["inputs"] for e in plan.of_type(ENTRY) if e["inputs"]["principalArn"].endswith(f"-ci-team-{team}-prod")]
        assert entry["kubernetesGroups"] == [team_deployers_group(team)]


@pytest.mark.parametrize(("platform_stack", "prefix"), [("prod", ""), ("prod-usw2", "prod-usw2--"), ("prod-use2", "prod-use2--")])
@pytest.mark.parametrize("kind", ["Namespace", "ResourceQuota", "LimitRange"])
def test_the_platform_adopts_what_the_team_stack_made_unchanged(plan_of, platform_stack, prefix, kind):
    """The platform's objects equal, field for field, what team-vision-prod made on that cluster in
    the previous release (its plan's manifests, kept in tests/fixtures/team_namespace_before): the
    platform's first apply of each changes nothing (docs/team-stacks.md, "Moving a team's namespace
    to the platform")."""
    files = {"Namespace": f"{prefix}namespace-cluster-{NAMESPACE}.yaml",
             "ResourceQuota": f"{prefix}resourcequota-{NAMESPACE}-training-quota.yaml",
             "LimitRange": f"{prefix}limitrange-{NAMESPACE}-container-defaults.yaml"}
    before = yaml.safe_load((FIXTURES / files[kind]).read_text())
    (made,) = [m for m in plan_of(platform_stack).manifests_on(None)
               if m["kind"] == kind and (m["metadata"].get("namespace") or m["metadata"]["name"]) == NAMESPACE]
    assert made == before


def test_the_deployer_role_adds_no_built_in_power_beyond_amazon_eks_admin_policy():
    """Its built-in rules are there only so the team may grant them (escalation prevention reads RBAC):
    each is something AmazonEKSAdminPolicy already lets the team do in its namespace."""
    admin_here = Identity((Grant(AMAZON_EKS_ADMIN_POLICY, NAMESPACE),))
    custom_groups = {"jobset.x-k8s.io", "kueue.x-k8s.io", "external-secrets.io"}
    built_in = [Rule.of(r) for r in deployer_cluster_role()["rules"]
                if not set(r["apiGroups"]) & custom_groups and r["verbs"] != ["bind"]]
    assert built_in, "the role holds no built-in rule: the team-member Role could not be created"
    assert uncovered(admin_here, built_in, NAMESPACE) == []


def test_the_deployer_role_writes_no_status_and_binds_only_the_dispatcher_role():
    """A Workload's status is Kueue's admission record: a team that wrote it would admit its own
    work past its queue. The one `bind` lets the team stack bind MultiKueue's dispatcher role on a
    worker; the platform's admission policy holds that binding to the dispatcher's group
    (tests/test_tenant_admission.py)."""
    rules = deployer_cluster_role()["rules"]
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    assert not [r for r in rules if any("/status" in res for res in r["resources"]) and set(r["verbs"]) & writes]
    workloads = [r for r in rules if "workloads" in r["resources"]]
    assert workloads and all(set(r["verbs"]) & writes <= {"patch"} for r in workloads)  # patch: `active: false` (stop)
    assert [r for r in rules if "bind" in r["verbs"] or "escalate" in r["verbs"]] == [
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"],
         "resourceNames": [WORKER_GROUP]}]
