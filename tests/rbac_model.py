"""Kubernetes RBAC, modelled as the API server decides it, for the offline tests of who may make what.

What is modelled (Kubernetes documentation, "Using RBAC Authorization"; kubernetes v1.33
pkg/apis/rbac/v1/evaluation_helpers.go, pkg/registry/rbac/validation/rule.go):

- A rule allows a request when its apiGroups, resources and verbs each match ("*" matches all; a
  resource matches exactly, as `<resource>/<subresource>` for a subresource, or through `*` or
  `*/<subresource>`: `jobsets` does not match `jobsets/finalizers`), and its resourceNames, when
  set, name the object (a create names none, so such a rule never allows a create).
- A grant holds rules at a scope: a RoleBinding's (a Role's or a ClusterRole's rules) only for
  requests in the binding's namespace; a ClusterRoleBinding's everywhere. An EKS access policy
  associated with the namespace scope behaves like a RoleBinding of it in each namespace (EKS User
  Guide, "Review access policy permissions": its rules are like Kubernetes roles).
- A cluster-scoped object (Namespace, PersistentVolume, ClusterRole) is requested with no
  namespace, so no namespaced grant reaches it; a request on `namespaces/<name>` carries `<name>` as
  its namespace (kubernetes apiserver pkg/endpoints/request/requestinfo.go: the namespace of
  /api/v1/namespaces/{name}), which is how `admin` reads its own namespace.
- Privilege escalation prevention: a Role (or ClusterRole) may be created only by whoever holds
  each of its permissions at the object's scope, and a RoleBinding only by whoever holds each
  permission of the role it references in the binding's namespace, unless it has `escalate` on
  the role kind (for roles) or `bind` on the referenced role (for bindings). What it "holds" is
  read by the RBAC rule resolver, from RoleBindings and ClusterRoleBindings only (kubernetes
  pkg/registry/rbac/role/policybased/storage.go, ConfirmNoEscalation with the RBAC ruleResolver),
  while `escalate` and `bind` are asked of every authorizer. So a permission an EKS access policy
  grants (EKS's own authorizer, not an RBAC object) lets its holder act, but not grant it:
  AmazonEKSAdminPolicy in a namespace cannot create a RoleBinding of `view` there
  (aws/containers-roadmap#2682, "attempting to grant RBAC permissions not currently held").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rule:
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    @staticmethod
    def of(manifest_rule: dict) -> Rule:
        return Rule(tuple(manifest_rule.get("apiGroups", ())), tuple(manifest_rule.get("resources", ())),
                    tuple(manifest_rule.get("verbs", ())), tuple(manifest_rule.get("resourceNames", ())))


@dataclass(frozen=True)
class Grant:
    rules: tuple[Rule, ...]
    namespace: str | None
    """The binding's namespace; None: cluster-wide (a ClusterRoleBinding, a cluster-scoped access policy)."""
    rbac: bool = True
    """An RBAC binding's (seen by escalation prevention); False: an EKS access policy's (acts only)."""


@dataclass(frozen=True)
class Request:
    verb: str
    api_group: str
    resource: str
    """`<resource>` or `<resource>/<subresource>`."""
    namespace: str | None
    """None for a cluster-scoped object."""
    name: str | None = None


@dataclass(frozen=True)
class Identity:
    grants: tuple[Grant, ...] = field(default_factory=tuple)


def _resource_matches(rule: Rule, resource: str) -> bool:
    subresource = resource.split("/", 1)[1] if "/" in resource else ""
    return any(r == "*" or r == resource or (subresource and r == f"*/{subresource}") for r in rule.resources)


def rule_allows(rule: Rule, request: Request) -> bool:
    return (("*" in rule.api_groups or request.api_group in rule.api_groups)
            and _resource_matches(rule, request.resource)
            and ("*" in rule.verbs or request.verb in rule.verbs)
            and (not rule.resource_names or (request.name is not None and request.verb != "create"
                                             and request.name in rule.resource_names)))


def allows(identity: Identity, request: Request) -> bool:
    return any((grant.namespace is None or grant.namespace == request.namespace) and rule_allows(rule, request)
               for grant in identity.grants for rule in grant.rules)


def _fragments(rule: Rule) -> Iterable[Request]:
    """Each (group, resource, verb, name) a rule grants, as a request whose fields are the rule's own
    values: a `*` asked for is covered only by a `*` held."""
    for group in rule.api_groups:
        for resource in rule.resources:
            for verb in rule.verbs:
                for name in rule.resource_names or (None,):
                    yield Request(verb=verb, api_group=group, resource=resource, namespace=None, name=name)


def _holds(identity: Identity, fragment: Request, namespace: str | None) -> bool:
    """Whether `identity` holds `fragment` at `namespace` (None: cluster-wide, by a cluster-wide grant),
    through RBAC: the only grants escalation prevention reads."""
    for grant in identity.grants:
        if not grant.rbac or (grant.namespace is not None and grant.namespace != namespace):
            continue
        for rule in grant.rules:
            groups_ok = "*" in rule.api_groups or fragment.api_group in rule.api_groups
            verbs_ok = "*" in rule.verbs or fragment.verb in rule.verbs
            names_ok = not rule.resource_names or (fragment.name is not None and fragment.name in rule.resource_names)
            if groups_ok and verbs_ok and names_ok and _resource_matches(rule, fragment.resource):
                return True
    return False


def uncovered(identity: Identity, rules: Sequence[Rule], namespace: str | None) -> list[Request]:
    """The permissions of `rules` that `identity` does not hold at `namespace`."""
    return [fragment for rule in rules for fragment in _fragments(rule) if not _holds(identity, fragment, namespace)]


def may_create_role(identity: Identity, rules: Sequence[Rule], *, namespace: str | None) -> bool:
    """A Role in `namespace` (None: a ClusterRole): `create` on it, and no escalation."""
    kind = "roles" if namespace is not None else "clusterroles"
    if not allows(identity, Request("create", "rbac.authorization.k8s.io", kind, namespace)):
        return False
    escalate = allows(identity, Request("escalate", "rbac.authorization.k8s.io", kind, namespace))
    return escalate or not uncovered(identity, rules, namespace)


def may_create_role_binding(identity: Identity, role_rules: Sequence[Rule], *, namespace: str, role_kind: str,
                            role_name: str) -> bool:
    """A RoleBinding in `namespace` of a role whose rules are `role_rules`."""
    if not allows(identity, Request("create", "rbac.authorization.k8s.io", "rolebindings", namespace)):
        return False
    kind = "roles" if role_kind == "Role" else "clusterroles"
    # `bind` is asked in the binding's namespace whichever kind of role it references (kubernetes
    # pkg/registry/rbac/escalation_check.go BindingAuthorized).
    bind = allows(identity, Request("bind", "rbac.authorization.k8s.io", kind, namespace, role_name))
    return bind or not uncovered(identity, role_rules, namespace)
