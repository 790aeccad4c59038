"""What a team stack's Kubernetes objects point at: volumes on the team's own EFS access point,
secret stores that assume the team's own reader role, a viewer Ingress that routes only the
team's path `/team-<team>` of the environment's shared ALB, Services reached only in the cluster.

A team's names (components/team.py, components/workload/tenant.py): its namespace `team-<team>`,
its checkpoint directory `/workloads/team-<team>` (an EFS access point its platform now makes,
components/workload/team_volumes.py; `allowed-resource-types` refuses one, or a PersistentVolume, in a
team stack, and these rules stay the second check of either), its roles `<project>-<env>-team-<team>-*`. These are stack
policies: "created by this stack" is a property dependency, known in every preview, where the
access point's id and the role's ARN are not yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pulumi_policy import PolicyResource, Severity, StackValidationArgs

from gpu_training_policy.reach import owns_role_name
from gpu_training_policy.resources import (
    Report,
    Stack,
    as_list,
    describe,
    get,
    has,
    known,
    known_items,
    stack_of,
    strings,
)
from gpu_training_policy.rules import stack_rule

PV = "kubernetes:core/v1:PersistentVolume"
SECRET_STORE = "kubernetes:external-secrets.io/v1:SecretStore"
EXTERNAL_SECRET = "kubernetes:external-secrets.io/v1:ExternalSecret"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
ROLE = "aws:iam/role:Role"
EFS_DRIVER = "efs.csi.aws.com"
S3_DRIVER = "s3.csi.aws.com"
# The S3 CSI driver mounts with the pod's own role only when asked to; `driver`, the default,
# uses the driver's credentials, which read every team's data (awslabs/mountpoint-s3-csi-driver,
# docs/CONFIGURATION.md, volumeAttributes.authenticationSource).
POD_AUTHENTICATION = "pod"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SERVICE = "kubernetes:core/v1:Service"
# The AWS Load Balancer Controller's annotations a viewer's Ingress sets (components/workload/
# viewer.py ingress_annotations). Any other of its annotations is refused in a team stack:
# `actions.*` forwards to any target group by ARN (another team's viewer) or redirects,
# `conditions.*` and `group.order` reshape the shared listener's rules (kubernetes-sigs/
# aws-load-balancer-controller docs/guide/ingress/annotations.md).
ALB_ANNOTATION_PREFIX = "alb.ingress.kubernetes.io/"
TEAM_ALB_ANNOTATIONS = frozenset({
    "scheme", "target-type", "group.name", "security-groups", "manage-backend-security-group-rules", "inbound-cidrs",
    "listen-ports", "healthcheck-path", "success-codes", "certificate-arn", "ssl-redirect", "subnets"})
EVERY_ADDRESS = frozenset({"0.0.0.0/0", "::/0"})
# `ImplementationSpecific` lets the controller read `*` and `?` in a path: /team-vision* is also
# /team-vision2/...; Prefix and Exact paths are matched as written (Kubernetes Ingress docs).
TEAM_PATH_TYPES = ("Prefix", "Exact")
# A team's Services are reached inside the cluster or through the shared ALB only: NodePort opens
# a port on every node, LoadBalancer makes a load balancer of its own (outside the platform's
# security group), ExternalName and externalIPs redirect other clients' traffic (CVE-2020-8554).
TEAM_SERVICE_TYPES = ("ClusterIP",)
# A team's people (components/workload/team_members.py): STANDARD access entries whose only group
# is the namespace's members group, bound by the namespace's own RoleBinding; the one access
# policy they get is View, scoped to the namespace by its exact name. An access scope takes
# wildcards ("You can use wildcard characters for a namespace name": EKS User Guide, "Associate
# access policies with access entries"), so `team-*` would be every team's namespace; a chosen
# user name or group could be one a ClusterRoleBinding names.
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
TEAM_ACCESS_POLICIES = ("AmazonEKSViewPolicy",)
ACCESS_POLICY_ARN = re.compile(r"arn:[a-z-]+:eks::aws:cluster-access-policy/(?P<name>\w+)")
ROLE_ARN = re.compile(r"^arn:[^:]+:iam::\d{12}:role/(?:.*/)?(?P<name>[^/]+)$")
ACCESS_POINT_ID = re.compile(r"fsap-[0-9a-f]+")


def _own(resource: PolicyResource, key: str, resource_type: str) -> list[PolicyResource]:
    return [d for d in resource.property_dependencies.get(key, []) if d.resource_type == resource_type]


def _access_point_problems(access_point: PolicyResource, stack: Stack) -> Iterator[str]:
    root = get(get(access_point.props, "rootDirectory"), "path")
    own = stack.team_access_point_root
    if root is not None and root != own and not str(root).startswith(own + "/"):
        yield f"roots an EFS access point at {root}, outside the team's {own}"


def _efs_volume_problems(volume: PolicyResource, handle: Any, stack: Stack) -> Iterator[str]:
    parts = str(handle).split(":") if handle is not None else []
    access_point = parts[2] if len(parts) > 2 else ""
    if handle is not None and not access_point:
        yield f"mounts EFS volume {handle} without an access point (the whole file system, every team's directory)"
        return
    own = _own(volume, "spec", ACCESS_POINT)
    if not own:
        yield f"mounts the access point {access_point or '(unknown)'}, which this team stack did not create"
        return
    # The access point's own root is judged on the access point (_access_point_problems).
    known_ids = {m.group(0) for ap in own for key in ("id", "arn") if isinstance(v := known(ap.props, key), str)
                 for m in ACCESS_POINT_ID.finditer(v)}
    if ACCESS_POINT_ID.fullmatch(access_point) and access_point not in known_ids:
        yield f"mounts the access point {access_point}, not the one this stack created"


def volume_problems(volume: PolicyResource, stack: Stack) -> list[str]:
    spec = get(volume.props, "spec") or {}
    csi = get(spec, "csi")
    if csi is None:
        sources = sorted(k for k in spec if k not in ("accessModes", "capacity", "claimRef", "mountOptions",
                                                      "persistentVolumeReclaimPolicy", "storageClassName",
                                                      "volumeMode", "nodeAffinity", "volumeAttributesClassName"))
        return [f"is a volume of {', '.join(sources) or 'no source'}, not of the EFS or S3 CSI driver"]
    driver = get(csi, "driver")
    if driver == EFS_DRIVER:
        return list(_efs_volume_problems(volume, known(csi, "volumeHandle"), stack))
    if driver == S3_DRIVER:
        source = get(get(csi, "volumeAttributes") or {}, "authenticationSource")
        return [] if source == POD_AUTHENTICATION else [
            f"mounts S3 with the driver's own credentials (authenticationSource {source}), not the pod's role"]
    return [f"uses the CSI driver {driver}, not the EFS or S3 driver a team's volumes use"]


def _role_problem(store: PolicyResource, aws: Any, stack: Stack) -> str | None:
    if not has(aws, "role"):
        # Without a role the controller reads with its own identity: the platform's sync role.
        return "names no role, so it reads with the External Secrets controller's own (platform) identity"
    role = known(aws, "role")  # not known yet in a first preview: then only the dependency decides
    if isinstance(role, str) and (match := ROLE_ARN.match(role)):
        return None if owns_role_name(stack, match["name"]) else (
            f"assumes the role {role}; a team's roles are named {stack.team_name_prefix}<one word>")
    own = [r for r in _own(store, "spec", ROLE) if owns_role_name(stack, str(known(r.props, "name", "")))]
    return None if own else f"assumes the role {role or '(not known yet)'}, which is not one of this team stack's roles"


def store_problems(store: PolicyResource, stack: Stack) -> list[str]:
    provider = get(get(store.props, "spec") or {}, "provider") or {}
    problems = [f"uses the {kind} provider; a team's store reads AWS Secrets Manager only" for kind in provider
                if kind != "aws"]
    aws = get(provider, "aws")
    if aws is None:
        return problems or ["has no AWS provider"]
    problem = _role_problem(store, aws, stack)
    if problem:
        problems.append(problem)
    problems += [f"authenticates through {path} = {value}, another namespace" for path, value in strings(get(aws, "auth") or {})
                 if path.endswith(".namespace") and value != stack.team_namespace]
    return problems


def external_secret_problems(secret: PolicyResource) -> list[str]:
    spec = get(secret.props, "spec") or {}
    refs = [get(spec, "secretStoreRef")] + [get(get(item, "sourceRef") or {}, "storeRef")
                                            for key in ("data", "dataFrom") for item in as_list(get(spec, key))]
    kinds = {str(get(ref, "kind", "SecretStore")) for ref in refs if ref is not None}
    return [f"reads through a {kind}, not the namespace's own SecretStore" for kind in sorted(kinds - {"SecretStore"})]


def _path_problem(path: Any, path_type: Any, stack: Stack) -> str | None:
    own = f"/{stack.team_namespace}"
    if path_type not in TEAM_PATH_TYPES:
        return f"routes path {path} as {path_type}, not as one of {', '.join(TEAM_PATH_TYPES)}"
    if not isinstance(path, str) or "*" in path or "?" in path or not (path == own or path.startswith(own + "/")):
        return f"routes path {path} of the shared load balancer, outside the team's {own}"
    return None


def _annotation_value_problems(annotations: Any, stack: Stack) -> list[str]:
    """The values that decide which load balancer, and who reaches it (issue #41: a group of the
    team's own with `inbound-cidrs: 0.0.0.0/0` was a public ALB): the environment's IngressGroup
    and security group (components/workload/viewer.py exposure_of), never every address. The
    platform's scheme and exact CIDRs are not in a team's plan: the cluster's admission policy
    holds those (components/workload/tenant_admission.py)."""
    prefix = f"{stack.project}-{stack.environment}"
    expected = {"group.name": f"{prefix}-viewer", "security-groups": f"{prefix}-viewer-alb"}
    problems = []
    for name, value in expected.items():
        actual = known(annotations, ALB_ANNOTATION_PREFIX + name)
        if name == "group.name" and not has(annotations, ALB_ANNOTATION_PREFIX + name):
            problems.append(f"sets no {ALB_ANNOTATION_PREFIX}group.name: the Ingress would get a load balancer of its own")
        elif actual is not None and actual != value:
            problems.append(f"sets {ALB_ANNOTATION_PREFIX}{name} to {actual}, not the environment's {value}")
    cidrs = known(annotations, ALB_ANNOTATION_PREFIX + "inbound-cidrs")
    if isinstance(cidrs, str) and {c.strip() for c in cidrs.split(",")} & EVERY_ADDRESS:
        problems.append(f"admits every address ({ALB_ANNOTATION_PREFIX}inbound-cidrs: {cidrs})")
    return problems


def ingress_problems(ingress: PolicyResource, stack: Stack) -> list[str]:
    """A team's Ingress joins the environment's ALB (its IngressGroup) with its own path only: a path
    of another team's, the listener's default action or an annotation's action would take or
    redirect that team's traffic."""
    spec = get(ingress.props, "spec") or {}
    annotations = get(get(ingress.props, "metadata") or {}, "annotations") or {}
    problems = [f"sets {key}, which this pack does not let a team stack set" for key in sorted(annotations)
                if key.startswith(ALB_ANNOTATION_PREFIX) and key.removeprefix(ALB_ANNOTATION_PREFIX) not in
                TEAM_ALB_ANNOTATIONS]
    problems += _annotation_value_problems(annotations, stack)
    if has(spec, "defaultBackend"):
        problems.append("sets a defaultBackend: the shared listener's default action, every request no rule matches")
    for rule in as_list(get(spec, "rules")):
        for item in as_list(get(get(rule, "http") or {}, "paths")):
            if problem := _path_problem(get(item, "path"), get(item, "pathType"), stack):
                problems.append(problem)
            if has(get(item, "backend") or {}, "resource"):
                problems.append("routes to a resource backend, not a Service of its namespace")
    return problems


def service_problems(service: PolicyResource) -> list[str]:
    spec = get(service.props, "spec") or {}
    kind = get(spec, "type", "ClusterIP")
    problems = [] if kind in TEAM_SERVICE_TYPES else [f"is a Service of type {kind}, not {', '.join(TEAM_SERVICE_TYPES)}"]
    if get(spec, "externalIPs"):
        problems.append("claims externalIPs: it captures traffic to those addresses from every pod (CVE-2020-8554)")
    return problems


def members_group(stack: Stack) -> str:
    """The team's members group (components/workload/team_members.py members_group)."""
    return f"{stack.team_namespace}-members"


def access_entry_problems(props: Any, stack: Stack) -> list[str]:
    """Why a team stack's EKS access entry reaches beyond the team's namespace; empty when it does not."""
    problems = []
    kind = get(props, "type", "STANDARD")
    if kind != "STANDARD":
        problems.append(f"is an access entry of type {kind}, a node's or a service's identity, not STANDARD")
    groups = [g for _, g in known_items(get(props, "kubernetesGroups") or [])]
    problems += [f"puts its principal in the Kubernetes group {g}, not the team's {members_group(stack)}"
                 for g in groups if g != members_group(stack)]
    if get(props, "userName") is not None:
        problems.append(f"sets the Kubernetes user name {known(props, 'userName') or '(not known yet)'}, which a binding "
                        "outside the namespace may name; EKS derives a role's own")
    return problems


def access_association_problems(props: Any, stack: Stack) -> list[str]:
    """Why a team stack's access policy association grants beyond View in the team's namespace."""
    scope = get(props, "accessScope") or {}
    problems = []
    if get(scope, "type") != "namespace":
        problems.append(f"has the access scope {get(scope, 'type')}, not namespace")
    namespaces = as_list(get(scope, "namespaces"))
    if not namespaces or any(n != stack.team_namespace for n in namespaces):
        problems.append(f"is scoped to the namespaces {namespaces}, not exactly [{stack.team_namespace}] (a scope "
                        "takes wildcards)")
    policy = known(props, "policyArn")
    match = ACCESS_POLICY_ARN.fullmatch(policy) if isinstance(policy, str) else None
    if match is None or match["name"] not in TEAM_ACCESS_POLICIES:
        problems.append(f"associates the access policy {policy or '(not known yet)'}, not one of "
                        f"{', '.join(TEAM_ACCESS_POLICIES)}")
    return problems


# What a team's resource changes, and what it must point at: a resource of the same stack. A
# literal name or ARN (a platform role, another team's secret) has no such dependency.
OWN_TARGETS = {
    "aws:iam/rolePolicy:RolePolicy": ("role", ROLE, "adds permissions to the role"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("roleArn", ROLE, "binds the role"),
    "aws:secretsmanager/secretVersion:SecretVersion": ("secretId", "aws:secretsmanager/secret:Secret",
                                                       "writes a value into the secret"),
}


def target_problems(resource: PolicyResource) -> list[str]:
    field, target_type, does = OWN_TARGETS[resource.resource_type]
    if _own(resource, field, target_type):
        return []
    return [f"{does} {known(resource.props, field) or '(not known yet)'}, which this team stack did not create"]


def reference_problems(resource: PolicyResource, stack: Stack) -> list[str]:
    """Why a team stack's resource points at something not the team's; empty when it does not."""
    if resource.resource_type == PV:
        return volume_problems(resource, stack)
    if resource.resource_type == SECRET_STORE:
        return store_problems(resource, stack)
    if resource.resource_type == EXTERNAL_SECRET:
        return external_secret_problems(resource)
    if resource.resource_type == ACCESS_POINT:
        return list(_access_point_problems(resource, stack))
    if resource.resource_type == INGRESS:
        return ingress_problems(resource, stack)
    if resource.resource_type == SERVICE:
        return service_problems(resource)
    if resource.resource_type in OWN_TARGETS:
        return target_problems(resource)
    return []


@stack_rule(Severity.CRITICAL)
def team_references_own(args: StackValidationArgs, report: Report) -> None:
    """In team stacks, persistent volumes mount only the team's own EFS access point (or S3 with the pod's role), access
    points root in the team's directory, SecretStores assume only the team's roles, ExternalSecrets read only through the
    namespace's SecretStore, Ingresses route only the team's path of the shared load balancer, Services are ClusterIP, and
    role policies, Pod Identity associations and secret values apply only to the stack's own roles and secrets."""
    for resource in args.resources:
        stack = stack_of(resource.urn, resource.provider)
        if not stack.is_team:
            continue
        for problem in reference_problems(resource, stack):
            report(f"{describe(resource.name, resource.resource_type)} {problem}; team {stack.team} reaches only its "
                   f"own access point ({stack.team_access_point_root}), roles ({stack.team_name_prefix}<word>), "
                   f"secrets and load balancer path (/{stack.team_namespace}).", resource.urn)


POLICIES = (team_references_own,)
