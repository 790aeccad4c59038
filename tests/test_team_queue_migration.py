"""Moving a running team's ClusterQueue from its team stack to the platform stack
(docs/team-stacks.md, "Moving a team's ClusterQueue to the platform"): the platform adopts the very
object the team stack made, by name, and its first apply must change no field the team stack's
apply owns (a server-side apply of another value to a field another manager owns is a conflict:
Kubernetes docs, "Server-Side Apply", Conflicts). So, for the team's old quota as its registry
row, the platform's queue is the team stack's queue with borrowingLimit added, nothing changed."""

from __future__ import annotations

from typing import Any

import pytest
from stack_configs import PROJECT, raw_config

from components.config import StackConfig, load_stack_config
from components.config.teams import TeamQueueConfig
from components.workload.multikueue import team_any_region_cluster_queue, team_any_region_queue_name
from components.workload.queues import cluster_queue_manifest
from components.workload.team_queues import team_any_region_resource_name, team_cluster_queue_manifest, team_queue_resource_name

# What a team stack of the previous release made (components/workload/queues.py TrainingQueue): the
# queue named as the namespace, the team's training.gpuQuota, no borrowingLimit on owned quota.
OLD_TEAM_QUEUE_NAME = "team-{team}"


def without_added_limits(new: Any, old: Any) -> Any:
    """`new` less the borrowingLimit keys `old` lacks: what remains must equal `old`."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: without_added_limits(v, old.get(k)) for k, v in new.items() if k in old or k != "borrowingLimit"}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [without_added_limits(n, o) for n, o in zip(new, old, strict=True)]
    return new


def prod_gpu_pools():
    config = load_stack_config(raw_config("prod"), project=PROJECT, stack="prod", sibling_stacks_dir=None)
    assert isinstance(config, StackConfig)
    return [pool for pool in config.node_pools if pool.gpu]


@pytest.mark.parametrize(("quota", "borrowed"), [
    ({"gpu-spot": 16}, frozenset()),
    ({"gpu-spot": 16, "p5-efa": 8}, frozenset({"p5-efa"})),
])
def test_the_platforms_queue_is_the_team_stacks_with_bounded_borrowing_only(quota, borrowed):
    pools = prod_gpu_pools()
    old = cluster_queue_manifest("team-vision", cohort="prod", namespace="team-vision", pools=pools, gpu_quota=quota,
                                 borrowed_pools=borrowed)
    new = team_cluster_queue_manifest(TeamQueueConfig("vision", quota, borrowed), cohort="prod", pools=pools)
    assert new["metadata"]["name"] == OLD_TEAM_QUEUE_NAME.format(team="vision") == old["metadata"]["name"]
    assert new != old, "borrowing is bounded now"
    assert without_added_limits(new, old) == old


def test_a_workers_queue_and_the_any_region_queue_are_the_same_objects():
    """A worker's team queue was capped (borrowingLimit 0 everywhere) and stays so with no gpuBorrowingLimit;
    the manager's any-region queue is built by the same function as before."""
    pools = prod_gpu_pools()
    new = team_cluster_queue_manifest(TeamQueueConfig("vision", {"gpu-spot": 16}), cohort="prod", pools=pools)
    assert all(r["borrowingLimit"] in (0, "0Gi") for f in new["spec"]["resourceGroups"][0]["flavors"]
               for r in f["resources"])
    assert team_any_region_cluster_queue("team-vision", cohort="prod", gpus=16)["metadata"]["name"] == \
        team_any_region_queue_name("team-vision") == "team-vision.any-region"


def test_the_platform_names_the_queues_as_the_migration_doc_does():
    doc = (__import__("pathlib").Path(__file__).resolve().parent.parent / "docs" / "team-stacks.md").read_text()
    section = doc.split("## Moving a team's ClusterQueue to the platform", 1)[1].split("\n## ", 1)[0]
    for name in (team_queue_resource_name("<team>"), team_any_region_resource_name("<team>"),
                 "team-queue-cluster-queue", "team-any-region-cluster-queue", "-team-cluster-queue"):
        assert name in section, name
    assert "PULUMI_K8S_UPSERT_EXISTING_OBJECTS" in section and "retainOnDelete" in section
