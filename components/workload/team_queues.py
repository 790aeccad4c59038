"""The teams' ClusterQueues, made by the platform stack from its registry of teams (`teams`,
components/config/teams.py): a team stack makes only namespace-scoped objects, its LocalQueues onto
these (components/workload/tenant.py, worker_tenant.py).

Each queue keeps the name the team stack gave it before (`team-<team>`; `team-<team>.any-region` on
a MultiKueue manager), so moving it from the team stack to the platform changes who manages it,
never the queue Kueue admits by (docs/team-stacks.md, "Moving a team's ClusterQueue to the
platform").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from components.common.manifests import custom_resource
from components.config import NodePoolConfig
from components.config.teams import TeamQueueConfig
from components.workload.multikueue import team_any_region_cluster_queue
from components.workload.queues import COVERED_RESOURCES, cluster_queue_manifest
from components.workload.sizing import flavor_quota


def team_cluster_queue_manifest(row: TeamQueueConfig, *, cohort: str, pools: list[NodePoolConfig]) -> dict[str, Any]:
    """The team's ClusterQueue: its row's quota in the environment's cohort, lent while idle, and a
    borrowingLimit on every resource of every flavor (kueue v0.19.2 ClusterQueue: a workload may use
    "nominalQuota+borrowingLimit"; a null limit borrows without bound): gpuBorrowingLimit's GPUs and
    their nodes' CPU, memory and EFA on an owned pool, 0 on a pool it has no quota of, its quota on a
    borrowed pool (queues.flavor_resources). Preemption is the platform's (queues.py), never the team's."""
    manifest = cluster_queue_manifest(row.namespace, cohort=cohort, namespace=row.namespace, pools=pools,
                                      gpu_quota=row.gpu_quota, borrowed_pools=row.borrowed_pools)
    by_name = {pool.name: pool for pool in pools}
    for flavor in manifest["spec"]["resourceGroups"][0]["flavors"]:
        pool = by_name[flavor["name"].removeprefix("pool-")]
        owned = row.owned_gpu_quota.get(pool.name, 0)
        extra = row.borrowing_limit.get(pool.name, 0)
        limit = _difference(flavor_quota(pool, owned + extra), flavor_quota(pool, owned))
        for resource in flavor["resources"]:
            resource.setdefault("borrowingLimit", limit[resource["name"]])
    assert [r["name"] for r in manifest["spec"]["resourceGroups"][0]["flavors"][0]["resources"]] == COVERED_RESOURCES
    return manifest


def _difference(more: dict[str, int | str], less: dict[str, int | str]) -> dict[str, int | str]:
    """`more` less `less`, per resource, in `more`'s unit; none at all is written 0, never "0Gi".

    The team stacks of the release before the registry wrote a worker's borrowingLimits as 0 on
    every resource, memory included (commit e2828460, worker_tenant.capped_cluster_queue_manifest),
    and the platform adopts those very objects: a ClusterQueue is a custom resource, whose
    int-or-string quantities (schemas/crds/kueue.x-k8s.io_clusterqueues.yaml: borrowingLimit anyOf
    integer, string) the API server stores as applied, so "0Gi" would be another value in a
    field the team stack's manager owns, a server-side apply conflict (Kubernetes docs,
    "Server-Side Apply", Conflicts; tests/test_team_queue_migration.py)."""
    def amount(value: int | str) -> int:
        return int(str(value).removesuffix("Gi"))
    found = {name: amount(more[name]) - amount(less[name]) for name in more}
    return {name: (f"{found[name]}Gi" if isinstance(value, str) and found[name] else found[name])
            for name, value in more.items()}


def team_queue_resource_name(team: str) -> str:
    """The Pulumi name of team `team`'s ClusterQueue in the platform stack (part of its URN)."""
    return f"team-{team}-cluster-queue"


def team_any_region_resource_name(team: str) -> str:
    return f"team-{team}-any-region-cluster-queue"


def team_cluster_queues(rows: Sequence[TeamQueueConfig], *, cohort: str, pools: list[NodePoolConfig],
                        manager: bool, depends_on: Sequence[pulumi.Resource],
                        opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """Each registered team's ClusterQueue, and on a MultiKueue manager its `any-region` one (the
    team's total, neither lent nor borrowed: multikueue.team_any_region_cluster_queue). Nothing
    waits for the team's namespace: a ClusterQueue is cluster-scoped and selects it by name."""
    made = []
    after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=list(depends_on)))
    for row in rows:
        made.append(custom_resource(team_queue_resource_name(row.name),
                                    team_cluster_queue_manifest(row, cohort=cohort, pools=pools), after))
        if manager:
            made.append(custom_resource(team_any_region_resource_name(row.name), team_any_region_cluster_queue(
                row.namespace, cohort=cohort, gpus=sum(row.gpu_quota.values())), after))
    return made
