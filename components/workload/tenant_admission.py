"""Kubernetes refuses what a team namespace may not make: ValidatingAdmissionPolicies (built into
Kubernetes, admissionregistration.k8s.io/v1, GA since 1.30) that the platform stack installs.

They hold, in every namespace named `team-*` (a team stack's namespace is `team-<team>`:
TeamStackConfig.training_namespace), what the policy pack checks on a team stack's plan
(policy/gpu_training_policy/tenancy.py ingress_problems, service_problems; governance.py's
bindings), so that a team's people, or a team stack deployed without the pack, cannot do it either:

- Ingress: only the annotations of the AWS Load Balancer Controller the viewer sets, each with
  the environment's value (scheme, IngressGroup, security group, subnets, inbound CIDRs, listen
  ports, certificate: an `internet-facing` scheme, `inbound-cidrs: 0.0.0.0/0` or another group
  would make a load balancer of the team's own or reshape the shared one); the health check under
  the namespace's path; no default backend; paths only under `/<namespace>`, Prefix or Exact, no
  wildcards, to Services only.
- Service: ClusterIP only (NodePort opens a port on every node, LoadBalancer makes a load
  balancer outside the platform's security group), no externalIPs (CVE-2020-8554).
- Job, JobSet, CronJob (issue #41 item 2): a queue name, so Kueue admits it within the team's
  quota (a CronJob only where it asks for GPUs); the JobSet and CronJob controllers' own Jobs
  are exempt, their parents having been judged.
- Pod: no `nfs` volume and no inline EFS CSI volume: a team mounts the shared file system only
  through the platform's PersistentVolume on its access point (its own directory).
- RoleBinding of MultiKueue's dispatcher role: to the dispatcher's group only (the team's deploy
  role may bind that role, and through it anyone could write Workloads' admission).
- NetworkPolicy: every rule names its peers (a rule without `from`/`to` is every peer); a
  namespace selector names the namespace itself (or, for egress, the cluster DNS in kube-system);
  an ingress ipBlock is one of the load balancer's subnets, which hold no pod
  (components/workload/viewer.py): a team cannot open its pods to another tenant's.

Why one binding over the namespaces by name rather than one per team: the policies need no list of
teams (the platform does not know its team stacks), and a namespace's name cannot change, whereas
its labels are the team stack's to set. `matchConditions` read `request.namespace`, the request's
namespace (AdmissionRequest.namespace). The expressions use only standard CEL (has, all, exists,
in, startsWith, contains, size), so tests/test_tenant_admission.py runs them with cel-python.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.common.manifests import built_in_object
from components.config.job_context import JOB_CONTEXT_CONFIG_MAP
from components.workload.multikueue import QUEUE_LABEL, WORKER_GROUP
from components.workload.team_members import members_group
from components.workload.viewer import ViewerExposure, ingress_annotations

TEAM_NAMESPACE_PREFIX = "team-"
ALB_PREFIX = "alb.ingress.kubernetes.io/"
HEALTH_CHECK = f"{ALB_PREFIX}healthcheck-path"
# The cluster DNS a team's pods reach (components/common/namespaces.py DNS_EGRESS).
DNS_NAMESPACE, DNS_APP = "kube-system", "kube-dns"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
GPU_RESOURCE = "nvidia.com/gpu"
IN_TEAM_NAMESPACE = f"request.namespace.startsWith('{TEAM_NAMESPACE_PREFIX}')"
OWN_PATH = "'/' + request.namespace"


def _literal(value: str) -> str:
    """A CEL string literal (JSON's escaping is CEL's for the characters config values hold)."""
    return json.dumps(value)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_literal(v) for v in values) + "]"


def platform_annotations(exposure: ViewerExposure) -> dict[str, str]:
    """The viewer's ALB annotations that are the same in every namespace (all but the health check)."""
    return {k: v for k, v in ingress_annotations(exposure, "").items() if k != HEALTH_CHECK}


def ingress_validations(exposure: ViewerExposure) -> list[dict[str, str]]:
    expected = platform_annotations(exposure)
    annotations = "object.metadata.annotations"
    known_keys = _list([*expected, HEALTH_CHECK])
    rules = "(has(object.spec.rules) ? object.spec.rules : [])"
    paths = f"{rules}.all(r, !has(r.http) || r.http.paths.all(p, %s))"
    return [
        {"expression": f"!has({annotations}) || {annotations}.all(k, !k.startsWith({_literal(ALB_PREFIX)}) || "
                       f"k in {known_keys})",
         "message": f"sets an annotation of the load balancer controller that a team's viewer does not; allowed: "
                    f"{', '.join([*expected, HEALTH_CHECK])}"},
        *({"expression": f"has({annotations}) && {_literal(key)} in {annotations} && "
                         f"{annotations}[{_literal(key)}] == {_literal(value)}",
           "message": f"must set {key} to the environment's {value}"} for key, value in expected.items()),
        {"expression": f"!has({annotations}) || !({_literal(HEALTH_CHECK)} in {annotations}) || "
                       f"{annotations}[{_literal(HEALTH_CHECK)}].startsWith({OWN_PATH} + '/')",
         "message": "checks health outside the namespace's own path"},
        {"expression": "!has(object.spec.defaultBackend)",
         "message": "sets a defaultBackend: the shared listener's default action"},
        {"expression": paths % (
            "has(p.path) && (p.pathType == 'Prefix' || p.pathType == 'Exact') && !p.path.contains('*') && "
            f"!p.path.contains('?') && (p.path == {OWN_PATH} || p.path.startsWith({OWN_PATH} + '/'))"),
         "message": "routes a path outside /<namespace>, or one that is not Prefix or Exact, or holds a wildcard"},
        {"expression": paths % "!has(p.backend.resource)",
         "message": "routes to a resource backend, not a Service of its namespace"},
    ]


def service_validations() -> list[dict[str, str]]:
    return [
        {"expression": "!has(object.spec.type) || object.spec.type == 'ClusterIP'",
         "message": "is not a ClusterIP Service: a team's Services are reached in the cluster or through the shared "
                    "load balancer only"},
        {"expression": "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
         "message": "claims externalIPs, which captures traffic to those addresses from every pod (CVE-2020-8554)"},
    ]


def _own_namespace(selector: str) -> str:
    return (f"has({selector}.matchLabels) && size({selector}.matchLabels) == 1 && "
            f"{_literal(NAMESPACE_NAME_LABEL)} in {selector}.matchLabels && "
            f"{selector}.matchLabels[{_literal(NAMESPACE_NAME_LABEL)}] == request.namespace && "
            f"(!has({selector}.matchExpressions) || size({selector}.matchExpressions) == 0)")


def _cluster_dns(peer: str) -> str:
    selector, pods = f"{peer}.namespaceSelector", f"{peer}.podSelector"
    return (f"has({selector}.matchLabels) && size({selector}.matchLabels) == 1 && "
            f"{_literal(NAMESPACE_NAME_LABEL)} in {selector}.matchLabels && "
            f"{selector}.matchLabels[{_literal(NAMESPACE_NAME_LABEL)}] == {_literal(DNS_NAMESPACE)} && "
            f"(!has({selector}.matchExpressions) || size({selector}.matchExpressions) == 0) && "
            f"has({pods}) && has({pods}.matchLabels) && {pods}.matchLabels == {{'k8s-app': {_literal(DNS_APP)}}} && "
            f"(!has({pods}.matchExpressions) || size({pods}.matchExpressions) == 0)")


def network_policy_validations(exposure: ViewerExposure) -> list[dict[str, str]]:
    ingress = "(has(object.spec.ingress) ? object.spec.ingress : [])"
    egress = "(has(object.spec.egress) ? object.spec.egress : [])"
    lb_subnets = _list(exposure.alb_subnet_cidrs)
    ingress_peer = (f"(has(p.ipBlock) ? (p.ipBlock.cidr in {lb_subnets}) : "
                    f"(!has(p.namespaceSelector) || {_own_namespace('p.namespaceSelector')}))")
    egress_peer = (f"(has(p.ipBlock) || !has(p.namespaceSelector) || {_own_namespace('p.namespaceSelector')} || "
                   f"{_cluster_dns('p')})")
    return [
        {"expression": f"{ingress}.all(r, has(r.from) && size(r.from) > 0)",
         "message": "has an ingress rule without `from`: it admits every pod of every namespace"},
        {"expression": f"{egress}.all(r, has(r.to) && size(r.to) > 0)",
         "message": "has an egress rule without `to`: it reaches every pod of every namespace"},
        {"expression": f"{ingress}.all(r, !has(r.from) || r.from.all(p, {ingress_peer}))",
         "message": "admits pods of another namespace, or addresses other than the load balancer's subnets"},
        {"expression": f"{egress}.all(r, !has(r.to) || r.to.all(p, {egress_peer}))",
         "message": "reaches pods of another namespace (only its own and the cluster DNS)"},
    ]


def _queued(labels: str) -> str:
    return f"has({labels}) && {_literal(QUEUE_LABEL)} in {labels} && {labels}[{_literal(QUEUE_LABEL)}] != ''"


def _asks_no_gpu(pod: str) -> str:
    asks = (f"(!has(c.resources) || ((!has(c.resources.limits) || !({_literal(GPU_RESOURCE)} in c.resources.limits)) && "
            f"(!has(c.resources.requests) || !({_literal(GPU_RESOURCE)} in c.resources.requests))))")
    return " && ".join(f"(!has({pod}.{field}) || {pod}.{field}.all(c, {asks}))"
                       for field in ("containers", "initContainers"))


def queue_validations() -> list[dict[str, str]]:
    """Issue #41 item 2: Kueue ignores a Job or JobSet without a queue name
    (manageJobsWithoutQueueName: false, workload/controllers.py), which would run outside the
    team's quota; so one is refused. A CronJob's Jobs are made by the CronJob controller, exempt
    below: a CronJob that asks for GPUs names a queue in its job template."""
    template = "object.spec.jobTemplate"
    return [{
        "expression": f"request.resource.resource == 'cronjobs' ? ({_queued(template + '.metadata.labels')} || "
                      f"{_asks_no_gpu(template + '.spec.template.spec')}) : {_queued('object.metadata.labels')}",
        "message": f"has no {QUEUE_LABEL} label: Kueue would not admit it, and it would run outside the team's "
                   "GPU quota (a CronJob that asks for GPUs names one in its job template)",
    }]


def _placed_by_the_scheduler(pod: str) -> str:
    return f"!has({pod}.priorityClassName) && !has({pod}.nodeName)"


def placement_validations() -> list[dict[str, str]]:
    """A team's pods are placed by Kueue and the scheduler, nothing else: a priorityClassName
    (system-node-critical is usable outside kube-system since Kubernetes 1.17) lets the scheduler
    preempt other namespaces' pods, and a nodeName skips the scheduler, its taints and the flavor's
    node selector (Kubernetes docs, "Pod Priority and Preemption", "Limit Priority Class
    consumption by default"; "Assigning Pods to Nodes", nodeName). A team's priority among its
    own jobs is Kueue's WorkloadPriorityClass label, which the JobSet keeps."""
    jobset = f"object.spec.replicatedJobs.all(r, {_placed_by_the_scheduler('r.template.spec.template.spec')})"
    cronjob = _placed_by_the_scheduler("object.spec.jobTemplate.spec.template.spec")
    job = _placed_by_the_scheduler("object.spec.template.spec")
    return [{
        "expression": f"request.resource.resource == 'jobsets' ? {jobset} : "
                      f"request.resource.resource == 'cronjobs' ? {cronjob} : {job}",
        "message": "sets a pod's priorityClassName or nodeName: a team's pods are placed by Kueue and the "
                   "scheduler (priority among a team's jobs: the kueue.x-k8s.io/priority-class label)",
    }]


# Who makes Jobs on behalf of an object already judged: the JobSet controller (a JobSet's child
# Jobs, which carry no queue name: Kueue manages the JobSet) in jobset-system, and Kubernetes'
# own controllers (the CronJob controller's Jobs) in kube-system. No team makes a service account
# in either namespace.
TRUSTED_MAKERS = ("system:serviceaccount:jobset-system:", "system:serviceaccount:kube-system:")
NOT_A_CONTROLLER = " && ".join(f"!request.userInfo.username.startsWith({_literal(m)})" for m in TRUSTED_MAKERS)


@dataclass(frozen=True)
class Guarded:
    """What a team namespace's objects of some kinds are judged for."""

    name: str
    resources: tuple[tuple[str, str], ...]
    """(API group, resource) pairs."""
    validations: list[dict[str, str]]
    conditions: tuple[str, ...] = ()
    """matchConditions besides the team namespace's."""


# The job context ConfigMap is the team stack's: a member (who may create ConfigMaps, for a job's
# hyperparameters) must not write one first, which would fail the stack's next `up` and have the
# job command judge live submissions against the member's data (docs/run-your-first-job.md).
IS_JOB_CONTEXT = f"object.metadata.name == {_literal(JOB_CONTEXT_CONFIG_MAP)}"
NOT_A_MEMBER = ("!has(request.userInfo.groups) || "
                f"!request.userInfo.groups.exists(g, g == request.namespace + {_literal(members_group(''))})")


# The team's deploy role may bind MultiKueue's dispatcher role (`bind` on that ClusterRole alone:
# team_tenancy.py), which writes Kueue Workloads and their status, so that its team stack can let
# the manager dispatch into the namespace (worker_tenant.py). Bound to anyone else, the role would
# let that subject write a Workload's `status.admission`, Kueue's record of a quota reservation, and
# admit work past the team's queue: a binding of it names the dispatcher's group and no one else.
BINDS_THE_DISPATCHER_ROLE = f"object.roleRef.kind == 'ClusterRole' && object.roleRef.name == {_literal(WORKER_GROUP)}"
ONLY_THE_DISPATCHER = (f"has(object.subjects) && size(object.subjects) > 0 && object.subjects.all(s, s.kind == 'Group' "
                       f"&& s.name == {_literal(WORKER_GROUP)})")


# Every team's checkpoints directory on the platform's EFS is owned by the trainer's user (team_volumes.py),
# and the file system lets any TLS client mount it (components/identity/policies.py file_system_policy), so
# what keeps a team in its own directory is that it mounts EFS only through its access point, a
# PersistentVolume the platform makes. A pod's own `nfs` volume, or an inline CSI volume of the EFS driver,
# would mount the file system's root past it; baseline Pod Security admits both (Kubernetes documentation,
# "Pod Security Standards": baseline forbids hostPath only).
NO_DIRECT_FILE_SYSTEM = ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.nfs) && "
                         "!(has(v.csi) && v.csi.driver == 'efs.csi.aws.com'))")


def guarded(exposure: ViewerExposure) -> tuple[Guarded, ...]:
    return (
        Guarded("gpu-training-team-ingress", (("networking.k8s.io", "ingresses"),), ingress_validations(exposure)),
        Guarded("gpu-training-team-service", (("", "services"),), service_validations()),
        Guarded("gpu-training-team-network-policy", (("networking.k8s.io", "networkpolicies"),),
                network_policy_validations(exposure)),
        Guarded("gpu-training-team-queue-name", (("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"), ("batch", "cronjobs")),
                [*queue_validations(), *placement_validations()], conditions=(NOT_A_CONTROLLER,)),
        Guarded("gpu-training-team-job-context", (("", "configmaps"),),
                [{"expression": NOT_A_MEMBER, "message": f"{JOB_CONTEXT_CONFIG_MAP} is written by the team stack's "
                                                          "deploys only, never by a team member"}],
                conditions=(IS_JOB_CONTEXT,)),
        Guarded("gpu-training-team-volumes", (("", "pods"),),
                [{"expression": NO_DIRECT_FILE_SYSTEM, "message": "mounts a file system directly (an `nfs` volume, "
                  "or the EFS CSI driver inline): mount your checkpoints through the claim the platform's volume binds"}]),
        Guarded("gpu-training-team-dispatcher-binding", (("rbac.authorization.k8s.io", "rolebindings"),),
                [{"expression": ONLY_THE_DISPATCHER, "message": f"binds {WORKER_GROUP} to a subject other than "
                                                                f"the group {WORKER_GROUP}, MultiKueue's dispatcher"}],
                conditions=(BINDS_THE_DISPATCHER_ROLE,)),
    )


def policy_manifest(kind: Guarded) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": kind.name},
        "spec": {
            # An expression that fails to evaluate refuses the request, as a false one does.
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": [resource]} for group, resource in kind.resources]},
            "matchConditions": [{"name": "in-a-team-namespace", "expression": IN_TEAM_NAMESPACE},
                                *({"name": "not-a-controller", "expression": c} for c in kind.conditions)],
            "validations": kind.validations,
        },
    }


def binding_manifest(kind: Guarded) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": kind.name},
        "spec": {"policyName": kind.name, "validationActions": ["Deny"]},
    }


@dataclass(frozen=True)
class TenantAdmissionArgs:
    exposure: ViewerExposure
    """The environment's load balancer, whose settings a team's Ingress must repeat."""


class TenantAdmission(pulumi.ComponentResource):
    """The platform's admission policies over every team namespace, with their bindings."""

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TenantAdmission", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        for kind in guarded(args.exposure):
            resource = kind.resources[0][1]
            created = built_in_object(f"{name}-{resource}", policy_manifest(kind), child)
            built_in_object(f"{name}-{resource}-binding", binding_manifest(kind),
                            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[created])))
        self.register_outputs({})
