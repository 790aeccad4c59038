"""Moving a running team's ClusterQueue from its team stack to the platform stack
(docs/team-stacks.md, "Moving a team's ClusterQueue to the platform"): the platform adopts the very
object the team stack made, by name, and its first apply must change no field the team stack's
apply owns (a server-side apply of another value to a field another manager owns is a conflict:
Kubernetes docs, "Server-Side Apply", Conflicts). So, for the team's old quota as its registry
row, the platform's queue is the team stack's queue with borrowingLimit added, nothing changed.

"The team stack's queue" is what the previous release really planned, never today's code: the
fixture tests/fixtures/team_queue_migration/team-vision-prod-e282846.json holds the ClusterQueues,
LocalQueues and Namespaces of `make plan STACK=team-vision-prod` at commit e2828460 (the last one
before 0d65b4e moved the queues to the platform), for the stack file as shipped and for one with a
borrowed pool; its `made_by` says how it was made."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from components.workload.multikueue import team_any_region_cluster_queue, team_any_region_queue_name
from components.workload.team_queues import team_any_region_resource_name, team_queue_resource_name
from offline.plan import Plan, synthesize

RECORDED = json.loads((Path(__file__).resolve().parent / "fixtures" / "team_queue_migration"
                       / "team-vision-prod-e282846.json").read_text())
CLUSTER_QUEUE, LOCAL_QUEUE, NAMESPACE = RECORDED["types"]
ENVIRONMENT, TEAM = "prod", "vision"
# The one field the migration doc lets the platform add: a borrowingLimit on a flavor's resource.
ADDED_FIELD = re.compile(r"^\.spec\.resourceGroups\[\d+\]\.flavors\[\d+\]\.resources\[\d+\]\.borrowingLimit$")


def differences(new: Any, old: Any, path: str = "") -> list[str]:
    """Each field where `new` is not `old` with borrowingLimits added: changed, removed or added
    elsewhere. A list of another length is one change (its items cannot be paired)."""
    if isinstance(new, dict) and isinstance(old, dict):
        found = [f"removed {path}.{key}: {old[key]!r}" for key in old if key not in new]
        found += [f"added {path}.{key}: {new[key]!r}" for key in new
                  if key not in old and not ADDED_FIELD.match(f"{path}.{key}")]
        return found + [d for key in new if key in old for d in differences(new[key], old[key], f"{path}.{key}")]
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [d for i, (n, o) in enumerate(zip(new, old, strict=True)) for d in differences(n, o, f"{path}[{i}]")]
    return [] if new == old and type(new) is type(old) else [f"changed {path}: {old!r} -> {new!r}"]


def recorded(case: str, type_token: str) -> list[dict[str, Any]]:
    return [record for record in RECORDED["cases"][case]["objects"] if record["type"] == type_token]


def platform_stack_of(provider: str) -> str:
    """The platform stack of the cluster a team stack's provider reached: `platform-cluster` is the
    environment's platform (the MultiKueue manager), `<worker>-cluster` a worker's."""
    return ENVIRONMENT if provider == "platform-cluster" else provider.removesuffix("-cluster")


def team_queues_of(plan: Plan) -> dict[str, dict[str, Any]]:
    """The team's ClusterQueues a platform plan makes, by object name."""
    return {r["inputs"]["metadata"]["name"]: r["inputs"] for r in plan.of_type(CLUSTER_QUEUE)
            if r["inputs"]["metadata"]["name"].startswith(f"team-{TEAM}")}


def assert_adopts_unchanged(case: str, plans: dict[str, Plan]) -> None:
    old_queues = recorded(case, CLUSTER_QUEUE)
    assert {(platform_stack_of(r["provider"]), r["inputs"]["metadata"]["name"]) for r in old_queues} == \
        {(stack, name) for stack, plan in plans.items() for name in team_queues_of(plan)}, "the same objects, by name"
    for old in old_queues:
        new = team_queues_of(plans[platform_stack_of(old["provider"])])[old["inputs"]["metadata"]["name"]]
        assert differences(new, old["inputs"]) == [], old["urn"]
        assert all("borrowingLimit" in resource for group in new["spec"]["resourceGroups"]
                   for flavor in group["flavors"] for resource in flavor["resources"]), "borrowing is bounded now"


def test_the_platforms_queues_are_the_shipped_team_stacks_with_bounded_borrowing_only(plan_of):
    """Today's platform plans, with the registry row equal to the shipped team stack's quota
    (stacks/Pulumi.prod*.yaml `teams`), against the queues that release planned."""
    assert RECORDED["cases"]["shipped"]["training"] == {"gpuQuota": {"gpu-spot": 16}}
    assert_adopts_unchanged("shipped", {stack: plan_of(stack) for stack in ("prod", "prod-use2", "prod-usw2")})


def test_a_borrowed_pool_is_adopted_unchanged_too():
    """The three platform stacks planned again with the recorded borrowed row (about 13 s on 2 cores)."""
    row = {"name": TEAM, **RECORDED["cases"]["borrowed"]["training"]}
    assert_adopts_unchanged("borrowed", {stack: synthesize(stack, overrides={"teams": [row]})
                                         for stack in ("prod", "prod-use2", "prod-usw2")})


def test_the_team_stack_keeps_its_local_queues(plan_of):
    """Step 4 of the doc updates the team's LocalQueues in place: the same URN, the same cluster, the
    same object; a LocalQueue's clusterQueue never changes (Kueue's CRD refuses it: "field is
    immutable", schemas/crds/kueue.x-k8s.io_localqueues.yaml). Its namespaces are the platform's now,
    handed over without a replacement (docs/team-stacks.md, "Moving a team's namespace to the
    platform"; tests/test_team_tenancy.py holds them equal)."""
    today = {r["urn"]: r for r in plan_of(f"team-{TEAM}-{ENVIRONMENT}").resources}
    assert recorded("shipped", NAMESPACE) and not [r for r in today.values() if r["type"] == NAMESPACE]
    for old in recorded("shipped", LOCAL_QUEUE):
        assert old["urn"] in today, old["urn"]
        new = today[old["urn"]]
        assert (new["provider"], new["inputs"]["metadata"]["name"], new["inputs"]["metadata"].get("namespace")) == \
            (old["provider"], old["inputs"]["metadata"]["name"], old["inputs"]["metadata"].get("namespace"))
        assert new["inputs"].get("spec") == old["inputs"].get("spec")
    assert not [r["urn"] for r in today.values() if r["type"] == CLUSTER_QUEUE], "the team stack makes no ClusterQueue"


def test_the_comparison_sees_a_changed_removed_or_added_field():
    old = recorded("shipped", CLUSTER_QUEUE)[0]["inputs"]
    limited = json.loads(json.dumps(old))
    limited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 0
    assert differences(limited, old) == []
    for change in ({"queueingStrategy": "StrictFIFO"}, {"cohortName": None}, {"stopPolicy": "Hold"}):
        changed = json.loads(json.dumps(old))
        changed["spec"].update(change)
        changed["spec"] = {k: v for k, v in changed["spec"].items() if v is not None}
        assert len(differences(changed, old)) == 1, change
    assert differences({"n": "0Gi"}, {"n": 0}) == ["changed .n: 0 -> '0Gi'"], "the same quantity, another value"


def test_the_platform_names_the_queues_as_the_migration_doc_does():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "team-stacks.md").read_text()
    section = doc.split("## Moving a team's ClusterQueue to the platform", 1)[1].split("\n## ", 1)[0]
    for name in (team_queue_resource_name("<team>"), team_any_region_resource_name("<team>"),
                 "team-queue-cluster-queue", "team-any-region-cluster-queue", "-team-cluster-queue"):
        assert name in section, name
    assert "PULUMI_K8S_UPSERT_EXISTING_OBJECTS" in section and "retainOnDelete" in section
    assert team_any_region_cluster_queue(f"team-{TEAM}", cohort=ENVIRONMENT, gpus=16)["metadata"]["name"] == \
        team_any_region_queue_name(f"team-{TEAM}") == f"team-{TEAM}.any-region"
