"""`teams`: the platform stack's registry of its environment's teams and their GPU quotas.

The platform owns every ClusterQueue of its cluster (components/workload/team_queues.py): a team
stack makes only namespace-scoped objects, its LocalQueue onto the ClusterQueue `team-<name>` the
platform made from this registry. So what a team could do to take other teams' GPUs (quota beyond
the pool, borrowing without a limit, a preemption policy of its own) is judged here, in the
platform's review, and summed in the platform's own plan: the platform's training.gpuQuota and
every team's owned quota together must fit each pool.

A row's `name` is the team's name, as in its stack `team-<name>-<env>` (and as the bootstrap's team
registry spells it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from components.config.node_pools import NodePoolConfig
from components.config.platform_names import reserved_team_name_problem
from components.config.reader import Section
from components.config.stack_names import TEAM_NAME, team_namespace
from components.config.training import TrainingConfig, gpu_pools_fix, overcommitted_pools

TEAMS_KEY = "teams"


@dataclass(frozen=True)
class TeamQueueConfig:
    """One team's ClusterQueue, as the platform makes it."""

    name: str
    """The team's name: its namespace and ClusterQueue are `team-<name>`."""
    gpu_quota: dict[str, int]
    """GPU pool -> the queue's quota of it (nominal, or a borrowing limit for a borrowed pool)."""
    borrowed_pools: frozenset[str] = frozenset()
    """Pools whose quota the queue borrows from the cohort instead of owning."""
    borrowing_limit: dict[str, int] = field(default_factory=dict)
    """Owned pool -> GPUs it may borrow beyond its quota (0 where not named: never unbounded)."""

    @property
    def namespace(self) -> str:
        return team_namespace(self.name)

    @property
    def owned_gpu_quota(self) -> dict[str, int]:
        return {pool: gpus for pool, gpus in self.gpu_quota.items() if pool not in self.borrowed_pools}


def team_queue(teams: Collection[TeamQueueConfig], team: str) -> TeamQueueConfig | None:
    return next((row for row in teams if row.name == team), None)


def parse_teams(root: Section, *, pools: tuple[NodePoolConfig, ...], invalid_pools: Collection[str] | None,
                platform_training: TrainingConfig, platform_quota_ok: bool) -> tuple[TeamQueueConfig, ...]:
    """The rows of `teams`; a pool reference to `invalid_pools` (reported already) is not judged,
    nor any when it is None (the pools could not be read)."""
    by_name = {pool.name: pool for pool in pools}
    rows: list[TeamQueueConfig] = []
    judged = True
    for index, raw in enumerate(root.items(TEAMS_KEY)):
        row_section = Section(root.errors, f"{root.key(TEAMS_KEY)}[{index}]", raw)
        row, row_judged = _parse_row(row_section, by_name, invalid_pools)
        judged = judged and row_judged
        rows.append(row)
    names = [row.name for row in rows if row.name]
    for name in sorted({n for n in names if names.count(n) > 1}):
        root.error(root.key(TEAMS_KEY), name, "names a team twice", "give each team one row")
    if judged and platform_quota_ok and invalid_pools is not None:
        _check_owned_sum(root, pools, platform_training, rows)
        _check_lenders(root, platform_training, rows)
    return tuple(rows)


def _parse_row(s: Section, pools: dict[str, NodePoolConfig],
               invalid_pools: Collection[str] | None) -> tuple[TeamQueueConfig, bool]:
    name = s.string("name", check=lambda v: None if TEAM_NAME.fullmatch(v) else "is not a team name",
                    fix="use the team of its stack team-<team>-<env>: lowercase letters, digits and '-'")
    reserved = reserved_team_name_problem(name, pools) if name and TEAM_NAME.fullmatch(name) else None
    if reserved:
        s.error(s.key("name"), name, reserved, "rename the team (its stacks team-<team>-<env> and its row in the "
                "bootstrap's teams)")
    quota_section = s.section("gpuQuota")
    quota: dict[str, int] = {}
    gpu_pools = gpu_pools_fix([p.name for p in pools.values() if p.gpu], invalid_pools)
    for pool_name in list(quota_section.data):
        gpus = quota_section.integer(pool_name)
        if not quota_section.ok(pool_name):
            continue
        quota[pool_name] = gpus
        pool = pools.get(pool_name)
        if invalid_pools is None or pool_name in invalid_pools:
            continue
        if pool is None or not pool.gpu:
            s.error(quota_section.key(pool_name), pool_name, "is not a GPU pool of this stack", gpu_pools)
        elif gpus > _capacity(pool):
            s.error(quota_section.key(pool_name), gpus, f"exceeds pool {pool_name}'s {_capacity(pool)} GPUs "
                    f"({pool.max_size} nodes x {pool.gpus_per_node})", "lower the quota or raise the pool's size.max")
    borrowed = s.string_list("gpuQuotaBorrowed")
    for pool_name in borrowed:
        if pool_name not in quota:
            s.error(s.key("gpuQuotaBorrowed"), pool_name, "is not a pool of this row's gpuQuota",
                    "list only pools that gpuQuota gives GPUs")
    if len(set(borrowed)) != len(borrowed):
        s.error(s.key("gpuQuotaBorrowed"), borrowed, "lists a pool twice", "list each once")
    limit = _parse_borrowing_limit(s, quota, frozenset(borrowed), pools)
    s.finish()
    judged = s.ok("name", "gpuQuota", "gpuQuotaBorrowed", "gpuBorrowingLimit")
    return TeamQueueConfig(name=name, gpu_quota=quota, borrowed_pools=frozenset(borrowed), borrowing_limit=limit), judged


def _parse_borrowing_limit(s: Section, quota: dict[str, int], borrowed: frozenset[str],
                           pools: dict[str, NodePoolConfig]) -> dict[str, int]:
    """`gpuBorrowingLimit`: how far an owned pool's queue may borrow beyond its quota. Kueue lets a
    queue without a borrowingLimit borrow all of the cohort's idle quota (kueue v0.19.2
    apis/kueue/v1beta2/clusterqueue_types.go, ResourceQuota.BorrowingLimit: "If null, it means
    that there is no borrowing limit"), so the platform always writes one: 0 unless named here."""
    limits_section = s.section("gpuBorrowingLimit", {})
    limits: dict[str, int] = {}
    for pool_name in list(limits_section.data):
        gpus = limits_section.integer(pool_name)
        if not limits_section.ok(pool_name):
            continue
        key = limits_section.key(pool_name)
        pool = pools.get(pool_name)
        if pool_name not in quota or pool_name in borrowed:
            s.error(key, pool_name, "is not an owned pool of this row's gpuQuota",
                    "name a pool of gpuQuota that gpuQuotaBorrowed does not list (a borrowed pool's limit is its quota)")
        elif pool is not None and quota[pool_name] + gpus > _capacity(pool):
            s.error(key, gpus, f"with the quota of {quota[pool_name]} allows {quota[pool_name] + gpus} GPUs, more than "
                    f"pool {pool_name}'s {_capacity(pool)}", f"lower it to {_capacity(pool) - quota[pool_name]} or less")
        limits[pool_name] = gpus
    return limits


def _capacity(pool: NodePoolConfig) -> int:
    return pool.max_size * pool.gpus_per_node


PLATFORM_OWNER = "the platform's training.gpuQuota"


def _check_owned_sum(root: Section, pools: tuple[NodePoolConfig, ...], platform_training: TrainingConfig,
                     rows: list[TeamQueueConfig]) -> None:
    """The quota every queue of the cluster owns, summed per pool in the platform's own plan: Kueue
    admits a workload within its queue's nominalQuota whatever the others own, so owned quota beyond
    the pool admits gangs whose nodes never come up (training.overcommitted_pools)."""
    owners: list[tuple[str, Mapping[str, int]]] = [(PLATFORM_OWNER, platform_training.owned_gpu_quota)]
    owners += [(f"team {row.name}", row.owned_gpu_quota) for row in rows]
    for over in overcommitted_pools(pools, owners):
        listed = ", ".join(f"{owner} owns {gpus}" for owner, gpus in over.owners)
        team_rows = [index for index, row in enumerate(rows) if row.owned_gpu_quota.get(over.pool)]
        if not team_rows:
            continue  # the platform's own quota alone: training.gpuQuota's capacity check reports it
        last = team_rows[-1]
        room = over.capacity - (over.owned - rows[last].owned_gpu_quota[over.pool])
        key = f"{root.key(TEAMS_KEY)}[{last}].gpuQuota.{over.pool}"
        platform_owns = bool(platform_training.owned_gpu_quota.get(over.pool))
        root.error(key, rows[last].owned_gpu_quota[over.pool],
                   f"brings the owned quota of pool {over.pool} to {over.owned} of its {over.capacity} GPUs ({listed}): "
                   "Kueue would admit gangs whose nodes can never come up",
                   f"{f'lower it to {room} or less' if room > 0 else 'remove it'}, or let the team borrow the pool: "
                   f"gpuQuotaBorrowed: [{over.pool}] in its row"
                   + (f" (the platform owns {over.pool}: the team then runs on GPUs the platform leaves idle, "
                      "and is preempted when the platform reclaims them)" if platform_owns else ""))


def _check_lenders(root: Section, platform_training: TrainingConfig, rows: list[TeamQueueConfig]) -> None:
    """A borrowed pool needs another queue of the cohort that owns some of it, or its jobs wait forever."""
    for index, row in enumerate(rows):
        for pool in sorted(row.borrowed_pools):
            lenders = [platform_training.owned_gpu_quota.get(pool, 0)] + [
                other.owned_gpu_quota.get(pool, 0) for other in rows if other is not row]
            if not any(lenders):
                root.error(f"{root.key(TEAMS_KEY)}[{index}].gpuQuotaBorrowed", pool,
                           f"borrows pool {pool}, which no other queue of the cohort owns: its jobs are never admitted",
                           f"own it instead (remove {pool} from gpuQuotaBorrowed), or give the platform's "
                           f"training.gpuQuota or another team quota on {pool}")
