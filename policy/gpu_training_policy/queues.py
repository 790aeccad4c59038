"""The teams' Kueue ClusterQueues, which the platform stack makes from its registry of teams
(components/workload/team_queues.py, components/config/teams.py): what a queue could say to take
other teams' GPUs is refused here too, whoever writes it.

A team's ClusterQueue (`team-<team>`, and `team-<team>.any-region` on a MultiKueue manager) must
- admit the team's namespace alone;
- bound its borrowing: a borrowingLimit on every resource of every flavor (Kueue borrows without
  bound where it is null: kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go, BorrowingLimit);
- take the platform's preemption only: reclaim within the cohort up to its nominal quota, which the
  platform's config summed with every other queue's to fit each pool; never borrow by preempting
  (`borrowWithinCohort`) and no fair-sharing weight of its own;
- on `.any-region`, carry the MultiKueue check alone (it admits nothing on the manager's nodes).
A team stack makes none (governance.py, team-stack-scope).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ResourceValidationArgs, Severity

from gpu_training_policy.resources import Report, describe, get, is_list
from gpu_training_policy.rules import resource_rule

CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MULTIKUEUE_CHECK = "multikueue"
ANY_REGION_SUFFIX = ".any-region"
# components/workload/queues.py cluster_queue_manifest: a queue below its quota takes lent GPUs back.
PLATFORM_PREEMPTION = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if is_list(value) else value


def team_cluster_queue_problems(name: str, spec: Any) -> list[str]:
    """Why team ClusterQueue `name` could take more than its quota, or []."""
    spec = _plain(spec)
    namespace = name.removesuffix(ANY_REGION_SUFFIX)
    problems = []
    selector = get(spec, "namespaceSelector")
    if selector != {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}:
        problems.append(f"admits namespaces {selector}, not the team's alone "
                        f"({{matchLabels: {{{NAMESPACE_NAME_LABEL}: {namespace}}}}})")
    unbounded = [f"{get(flavor, 'name')}/{get(resource, 'name')}"
                 for group in get(spec, "resourceGroups") or [] for flavor in get(group, "flavors") or []
                 for resource in get(flavor, "resources") or [] if get(resource, "borrowingLimit") is None]
    if unbounded:
        problems.append(f"borrows without a limit on {', '.join(unbounded)} (no borrowingLimit: all the cohort's idle "
                        "quota)")
    if get(spec, "fairSharing") is not None:
        problems.append(f"sets a fair-sharing weight of its own ({get(spec, 'fairSharing')})")
    preemption = get(spec, "preemption")
    if name.endswith(ANY_REGION_SUFFIX):
        checks = get(get(spec, "admissionChecksStrategy") or {}, "admissionChecks")
        if checks != [{"name": MULTIKUEUE_CHECK}]:
            problems.append(f"lacks the MultiKueue check alone ({checks}): it would admit its quota on the manager's "
                            "own nodes")
        if preemption is not None:
            problems.append(f"preempts ({preemption}); a dispatching queue preempts nothing")
    elif preemption != PLATFORM_PREEMPTION:
        problems.append(f"preempts as {preemption}, not as the platform's queues do ({PLATFORM_PREEMPTION}): "
                        "borrowWithinCohort or another policy takes GPUs other teams hold within their quota")
    return problems


@resource_rule(Severity.HIGH, resource_type=CLUSTER_QUEUE)
def team_cluster_queues(args: ResourceValidationArgs, report: Report) -> None:
    """A team's ClusterQueue admits its namespace alone, bounds its borrowing on every resource, preempts only as the
    platform's queues do (no borrowWithinCohort, no fair-sharing weight), and its any-region queue carries the MultiKueue
    check alone."""
    name = get(get(args.props, "metadata") or {}, "name")
    if not (isinstance(name, str) and name.startswith("team-")):
        return
    for problem in team_cluster_queue_problems(name, get(args.props, "spec") or {}):
        report(f"{describe(args.name, args.resource_type)}, team ClusterQueue {name}, {problem}. The platform makes "
               "team queues from its registry of teams (gpu-training:teams), bounded by components/workload/team_queues.py.")


POLICIES = (team_cluster_queues,)
