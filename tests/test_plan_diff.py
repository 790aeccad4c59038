"""scripts/plan-diff: the pure comparison as tables, and the whole command on a temporary copy
of this repository whose commits change a pool's size, change nothing, or break a stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from stack_configs import ROOT

from components.config.stack import stack_kind
from offline.affected_stacks import ChangeFacts, affected_stacks, platform_of
from offline.plan_cache import CACHE_VARIABLE, COMPLETE, BasePlanCache
from offline.plan_diff import (
    _ABSENT,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    SELECTION_SUMMARY,
    Change,
    StackPlan,
    TreePlans,
    build_report,
    commit_label,
    diff_stack,
    diff_values,
    load_cost_model,
    plan_tree,
    render_stack,
    replacement_paths,
    rolled_gpu_node_groups,
    truncate,
)
from offline.plan_diff import (
    _change_line as render_line,
)

DIFF_CASES = [
    # (old, new, expected [(path, old, new)])
    ({"a": 1}, {"a": 1}, []),
    ({"scalingConfig": {"maxSize": 4, "minSize": 0}}, {"scalingConfig": {"maxSize": 6, "minSize": 0}},
     [("scalingConfig.maxSize", 4, 6)]),
    ({"tags": {"a": "1"}}, {"tags": {"a": "1", "b": "2"}}, [("tags.b", _ABSENT, "2")]),
    ({"types": ["g5.xlarge"]}, {"types": ["g5.xlarge", "g6.xlarge"]}, [("types[1]", _ABSENT, "g6.xlarge")]),
    ({"types": ["a", "b"]}, {"types": ["b"]}, [("types[0]", "a", "b"), ("types[1]", "b", _ABSENT)]),
    # IAM policies are JSON text in the inputs: the path goes inside the document.
    ({"policy": json.dumps({"Statement": [{"Action": ["s3:GetObject"]}]})},
     {"policy": json.dumps({"Statement": [{"Action": ["s3:PutObject"]}]})},
     [("policy.Statement[0].Action[0]", "s3:GetObject", "s3:PutObject")]),
    ({"x": "{not json"}, {"x": "{still not"}, [("x", "{not json", "{still not")]),
    ({"v": None}, {"v": 0}, [("v", None, 0)]),
]


@pytest.mark.parametrize(("old", "new", "expected"), DIFF_CASES)
def test_diff_values_reports_each_changed_leaf(old, new, expected):
    assert [(c.path, c.old, c.new) for c in diff_values(old, new)] == expected


REPLACEMENT_CASES = [
    ("aws:eks/nodeGroup:NodeGroup", "scalingConfig.maxSize", False),
    ("aws:eks/nodeGroup:NodeGroup", "instanceTypes[1]", True),
    ("aws:eks/nodeGroup:NodeGroup", "launchTemplate.version", False),
    ("aws:eks/nodeGroup:NodeGroup", "launchTemplate.id", True),
    ("aws:eks/nodeGroup:NodeGroup", "subnetIds[0]", True),
    ("aws:eks/cluster:Cluster", "version", False),
    ("aws:eks/cluster:Cluster", "vpcConfig.subnetIds[2]", False),
    ("aws:eks/cluster:Cluster", "kubernetesNetworkConfig.serviceIpv4Cidr", True),
    ("aws:ec2/subnet:Subnet", "cidrBlock", True),
    ("aws:ec2/securityGroup:SecurityGroup", "description", True),
    ("aws:ec2/securityGroup:SecurityGroup", "tags.team", False),
    ("aws:iam/role:Role", "assumeRolePolicy.Statement[0].Condition", False),
    ("aws:iam/role:Role", "name", True),
    ("kubernetes:core/v1:ConfigMap", "data.config.yaml", True),
    ("kubernetes:core/v1:Namespace", "metadata.labels.team", False),
    ("kubernetes:core/v1:Namespace", "metadata.name", True),
    ("kubernetes:core/v1:PersistentVolumeClaim", "spec.resources.requests.storage", True),
    ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "spec.replicatedJobs[0].replicas", False),
    ("aws:s3/bucket:Bucket", "bucketPrefix", False),                 # not in the table: reported as an update
    ("aws:eks/nodeGroup:NodeGroup", "instanceTypesExtra", False),    # a prefix match needs a path boundary
]


@pytest.mark.parametrize(("type_token", "path", "replaced"), REPLACEMENT_CASES)
def test_replacement_is_flagged_only_for_inputs_the_provider_replaces_on(type_token, path, replaced):
    assert bool(replacement_paths(type_token, [Change(path, 1, 2)])) is replaced


def record(type_token: str, name: str, inputs: dict, parent: str | None = None) -> dict:
    return {"type": type_token, "name": name, "parent": parent, "provider": "aws", "inputs": inputs}


def stack_plan(*records: dict, manifests: dict | None = None) -> StackPlan:
    return StackPlan(resources={(r["type"], r["parent"] or "", r["name"]): r for r in records}, manifests=manifests or {})


def test_a_stack_summary_lists_adds_changes_replacements_removals_and_manifests():
    group = "aws:eks/nodeGroup:NodeGroup"
    base = stack_plan(record(group, "gpu", {"instanceTypes": ["p5.48xlarge"], "scalingConfig": {"maxSize": 2}}),
                      record("aws:sns/topic:Topic", "alerts", {"name": "old"}),
                      manifests={"configmap-ns-cfg.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "1"}}})
    head = stack_plan(record(group, "gpu", {"instanceTypes": ["p5en.48xlarge"], "scalingConfig": {"maxSize": 4}}),
                      record("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16"}),
                      manifests={"configmap-ns-cfg.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "2"}},
                                 "namespace-cluster-x.yaml": {"apiVersion": "v1", "kind": "Namespace"}})
    text = "\n".join(render_stack("prod", diff_stack(base, head), head, None))
    assert "`prod`: 1 to add, 1 to change, 1 to remove; 2 Kubernetes manifests changed" in text
    assert "| + | `vpc` | Vpc |" in text and "| - | `alerts` | Topic |" in text
    assert "| ± | `gpu` | NodeGroup | `instanceTypes[0]`: `p5.48xlarge` → `p5en.48xlarge`<br>`scalingConfig.maxSize`: `2` → `4` |" in text
    assert "`gpu` (NodeGroup): `instanceTypes[0]`" in text, "the instance type change replaces the node group"
    assert "manifest `configmap-ns-cfg.yaml`: `data.k`" in text
    assert "added `namespace-cluster-x.yaml`" in text


@pytest.mark.parametrize(("changed", "rolled"), [
    ({"version": "1.37"}, {"c-p5-efa": ["`version`"]}),
    ({"scalingConfig": {"maxSize": 4}}, {}),                                   # a size: no node replaced
    ({"instanceTypes": ["p5en.48xlarge"]}, {"c-p5-efa": ["replaced"]}),
    ({"template": {"userData": "new"}}, {"c-p5-efa": ["its launch template: `userData`"]}),
    ({"cpu": {"version": "1.37"}}, {}),                                        # a CPU pool rolls no gang
])
def test_the_diff_names_each_gpu_node_group_a_change_rolls(changed, rolled):
    def plan(changes: dict) -> StackPlan:
        gpu = {"nodeGroupName": "c-p5-efa", "amiType": "AL2023_x86_64_NVIDIA", "version": "1.36",
               "instanceTypes": ["p5.48xlarge"], "scalingConfig": {"maxSize": 2}}
        cpu = {"nodeGroupName": "c-system", "amiType": "AL2023_x86_64_STANDARD", "version": "1.36"}
        template = {"userData": "old"}
        gpu.update({k: v for k, v in changes.items() if k not in ("template", "cpu")})
        return stack_plan(record(NODE_GROUP, "node-pools-p5-efa-nodegroup", gpu, parent="pools"),
                          record(LAUNCH_TEMPLATE, "node-pools-p5-efa-lt", {**template, **changes.get("template", {})},
                                 parent="pools"),
                          record(NODE_GROUP, "node-pools-system-nodegroup", {**cpu, **changes.get("cpu", {})}, parent="pools"))
    base, head = plan({}), plan(changed)
    assert rolled_gpu_node_groups(diff_stack(base, head), head) == rolled
    text = "\n".join(render_stack("prod", diff_stack(base, head), head, None))
    assert ("**Rolls GPU node groups**" in text) == bool(rolled)


def test_env_vars_are_compared_by_name_not_by_position():
    old = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    new = {"env": [{"name": "NEW", "value": "0"}, {"name": "A", "value": "1"}, {"name": "B", "value": "3"}]}
    assert [(c.path, c.old, c.new) for c in diff_values(old, new)] == [
        ("env[B].value", "2", "3"), ("env[NEW]", _ABSENT, {"name": "NEW", "value": "0"})]
    # a list whose entries are not all named stays positional
    assert [c.path for c in diff_values({"l": [1, {"name": "x"}]}, {"l": [2, {"name": "x"}]})] == ["l[0]"]


def test_a_long_text_shows_where_it_changed():
    old = "The gang has not logged a step for 600 s: " + "x" * 80 + " check the pods."
    new = old.replace("600 s", "900 s")
    line = render_line(Change("alarmDescription", old, new))
    assert "600 s" in line and "900 s" in line


def test_what_matters_is_listed_before_the_elided_rest():
    changes = [Change(f"tags.t{i}", "a", "b") for i in range(12)] + [Change("scalingConfig.maxSize", 2, 4)]
    group = "aws:eks/nodeGroup:NodeGroup"
    base = stack_plan(record(group, "gpu", {"scalingConfig": {"maxSize": 2}, "tags": {f"t{i}": "a" for i in range(12)}}))
    head = stack_plan(record(group, "gpu", {"scalingConfig": {"maxSize": 4}, "tags": {f"t{i}": "b" for i in range(12)}}))
    assert len(diff_stack(base, head).changed[(group, "", "gpu")]) == len(changes)
    text = "\n".join(render_stack("prod", diff_stack(base, head), head, None))
    assert "`scalingConfig.maxSize`: `2` → `4`" in text and "… and 5 more" in text


OLD_TYPE, NEW_TYPE = "gpu-training:storage:DataBuckets", "gpu-training:data:DataBuckets"


def component(type_token: str, inputs: dict | None = None, aliases: tuple[str, ...] = ()) -> dict:
    result = {**record(type_token, "storage", inputs or {}), "urn": f"urn:pulumi:dev::gpu-training::{type_token}::storage"}
    return {**result, "aliases": list(aliases)} if aliases else result


RENAME_CASES = [
    # (head aliases, head inputs, expected renamed, added, removed, changed)
    ((f"urn:pulumi:dev::gpu-training::{OLD_TYPE}::storage",), {}, True, 0, 0, 0),
    ((f"urn:pulumi:dev::gpu-training::{OLD_TYPE}::storage",), {"bucket": "b"}, True, 0, 0, 1),
    ((), {}, False, 1, 1, 0),  # a new type without an alias: the engine deletes and creates it
    (("urn:pulumi:dev::gpu-training::gpu-training:other:DataBuckets::storage",), {}, False, 1, 1, 0),
]


@pytest.mark.parametrize(("aliases", "inputs", "renamed", "added", "removed", "changed"), RENAME_CASES)
def test_a_resource_whose_alias_names_a_base_urn_is_renamed_not_replaced(aliases, inputs, renamed, added, removed, changed):
    base, head = stack_plan(component(OLD_TYPE)), stack_plan(component(NEW_TYPE, inputs, aliases))
    diff = diff_stack(base, head)
    assert (bool(diff.renamed), len(diff.added), len(diff.removed), len(diff.changed)) == (renamed, added, removed, changed)
    text = "\n".join(render_stack("dev", diff, head, None))
    assert (f"`{NEW_TYPE}`, renamed (alias) from `{OLD_TYPE}`, not replaced" in text) == renamed
    assert ("1 renamed (alias)" in text) == renamed and not diff.empty


def test_cost_rows_show_before_after_and_delta():
    base = stack_plan(record("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16"}))
    head = stack_plan(record("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.1.0.0/16"}))
    costs = ({"GPU pools at maximum size, per hour": 110.08}, {"GPU pools at maximum size, per hour": 220.16})
    text = "\n".join(render_stack("prod", diff_stack(base, head), head, costs))
    assert "| GPU pools at maximum size, per hour | 110.08 | 220.16 | +110.08 |" in text


def test_truncation_keeps_whole_lines_and_says_so():
    text = "".join(f"line {i}\n" for i in range(1000))
    cut = truncate(text, 500)
    assert len(cut) <= 500 and "cut here" in cut
    assert all(line.startswith(("line ", "_…")) or not line for line in cut.splitlines())
    assert truncate("short\n", 500) == "short\n"


# --- the whole command, on a temporary repository ---------------------------------------------

GIT = ["git", "-c", "user.name=plan-diff test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def plan_diff(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # What scripts/plan-diff runs, with this Python: the copy's own offline package (-m: the copy's root first).
    return subprocess.run([sys.executable, "-m", "offline.plan_diff", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of this checkout's files (tracked and new, never ignored ones) as a fresh repository."""
    return copy_checkout(tmp_path_factory.mktemp("plan-diff") / "repo")


def set_gpu_pool_max(repo: Path, old: str, new: str) -> None:
    stack_file = repo / "stacks" / "Pulumi.dev.yaml"
    text = stack_file.read_text()
    line = f"size: {{min: 0, desired: 0, max: {old}}}"
    assert text.count(line) == 1, "the dev stack's gpu-spot pool changed shape; update this test"
    stack_file.write_text(text.replace(line, f"size: {{min: 0, desired: 0, max: {new}}}"))


def test_a_commit_that_raises_a_pools_max_size_shows_that_change(repo, tmp_path):
    set_gpu_pool_max(repo, "4", "6")
    git(repo, "commit", "--quiet", "-am", "dev: gpu-spot may grow to 6 nodes")
    changed = tmp_path / "changed.json"
    result = plan_diff(repo, "HEAD~1", "HEAD", "--stack", "dev", "--changed-stacks-file", str(changed))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| ~ | `node-pools-gpu-spot-nodegroup` | NodeGroup | `scalingConfig.maxSize`: `4` → `6` |" in out
    assert "Replaced, not updated" not in out, "a size change is an in-place update"
    assert "`spec.hard.requests.nvidia.com/gpu`: `4` → `6`" in out, "the namespace quota follows the pool"
    assert json.loads(changed.read_text()) == ["dev"]
    # The cost model is part of the checkout: the delta is always there, and not zero.
    rows = [line for line in out.splitlines() if line.startswith("| GPU pools at maximum size")]
    assert len(rows) == 1 and not rows[0].endswith("| +0.00 |"), out
    assert "the stack cost model is not in this checkout yet" not in out
    # docs/delivery.md's sample comment is this change, rendered by the same code (tests/test_doc_figures.py).
    assert not subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout.count("worktree ") > 1, "temporary worktrees are removed"


def test_a_commit_that_changes_no_plan_prints_no_changes(repo, tmp_path):
    git(repo, "commit", "--quiet", "--allow-empty", "-m", "nothing to plan")
    changed = tmp_path / "changed.json"
    result = plan_diff(repo, "HEAD~1", "--changed-stacks-file", str(changed))   # every stack, the working tree
    assert result.returncode == 0, result.stderr
    assert "no changes in the 7 stacks' offline plans." in result.stdout, result.stdout
    assert json.loads(changed.read_text()) == []


def test_a_stack_that_no_longer_plans_fails_the_diff_and_says_why(repo):
    set_gpu_pool_max(repo, "6", "-1")
    try:
        result = plan_diff(repo, "HEAD", "--stack", "dev")
    finally:
        git(repo, "checkout", "--", "stacks/Pulumi.dev.yaml")
    assert result.returncode == 1
    assert "gpu-training at the working tree did not plan" in result.stdout
    assert "nodePools" in result.stdout and "Traceback" not in result.stdout


def test_an_unknown_ref_is_a_clear_error(repo):
    result = plan_diff(repo, "no-such-branch")
    assert result.returncode == 2
    assert "'no-such-branch' is not a commit here" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.scenario  # plans several stacks in a git repository of its own (30 s)
def test_a_second_diff_against_the_same_base_takes_its_kept_base_plans_and_reads_the_same(repo, tmp_path):
    team_file = repo / "stacks/Pulumi.team-vision-prod.yaml"
    original = team_file.read_text()
    replace_once(team_file, "monthlyLimitUsd: 100", "monthlyLimitUsd: 150")
    kept = {**os.environ, CACHE_VARIABLE: str(tmp_path / "cache")}
    try:
        first, second = plan_diff(repo, "HEAD", env=kept), plan_diff(repo, "HEAD", env=kept)
        uncached = plan_diff(repo, "HEAD", env={**os.environ, CACHE_VARIABLE: "0"})
    finally:
        team_file.write_text(original)
    for result in (first, second, uncached):
        assert result.returncode == 0, result.stderr + result.stdout
    bodies = {result.stdout.partition(f"\n\n{SELECTION_SUMMARY}")[0] for result in (first, second, uncached)}
    assert len(bodies) == 1 and "### `team-vision-prod`" in bodies.pop(), "the same diff, kept base plans or not"
    assert "kept from an earlier run" not in first.stdout + uncached.stdout
    kept_line = next(line for line in second.stdout.splitlines() if "kept from an earlier run" in line)
    assert kept_line.endswith(": `team-vision-prod`"), kept_line
    (key,) = (tmp_path / "cache").iterdir()
    assert sorted(p.relative_to(key).as_posix() for p in key.rglob(COMPLETE)) == [f"main/team-vision-prod/{COMPLETE}"]


@pytest.mark.scenario  # plans several stacks in a git repository of its own (30 s)
def test_fill_cache_keeps_every_stack_of_a_commit_and_all_trusts_none_of_it(repo, tmp_path):
    kept = {**os.environ, CACHE_VARIABLE: str(tmp_path / "cache")}
    filled = plan_diff(repo, "HEAD", "--fill-cache", env=kept)
    assert filled.returncode == 0, filled.stderr
    (key,) = (tmp_path / "cache").iterdir()
    assert len(list(key.rglob(COMPLETE))) == len(list((repo / "stacks").glob("Pulumi.*.yaml"))) + 1  # and the bootstrap
    team_file = repo / "stacks/Pulumi.team-vision-prod.yaml"
    original = team_file.read_text()
    replace_once(team_file, "monthlyLimitUsd: 100", "monthlyLimitUsd: 150")
    try:
        selective, everything = plan_diff(repo, "HEAD", env=kept), plan_diff(repo, "HEAD", "--all", env=kept)
    finally:
        team_file.write_text(original)
    assert selective.returncode == 0 and everything.returncode == 0, selective.stderr + everything.stderr
    assert "kept from an earlier run" in selective.stdout and "kept from an earlier run" not in everything.stdout


@pytest.mark.parametrize(("tree", "fingerprint", "day", "same"), [
    ("t1", "f1", "2026-12-01", True),
    ("t2", "f1", "2026-12-01", False),  # another base tree
    ("t1", "f2", "2026-12-01", False),  # another Python environment (an SDK upgrade)
    ("t1", "f1", "2026-12-02", False),  # another day: EKS's calendar may judge a version otherwise
])
def test_a_kept_base_plan_is_read_only_for_the_same_tree_environment_and_day(tmp_path, tree, fingerprint, day, same):
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "resources.json").write_text("[]")
    BasePlanCache(tmp_path / "cache", "t1", fingerprint="f1", day="2026-12-01").put("dev", plan)
    found = BasePlanCache(tmp_path / "cache", tree, fingerprint=fingerprint, day=day).get("dev")
    assert (found is not None) == same
    if found is not None:
        assert (found / "resources.json").read_text() == "[]"


def test_the_day_a_plan_is_judged_on_is_its_key_s_day_and_an_unwritable_cache_is_no_failure(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("PLAN_TODAY", "2027-02-01")
    judged_then = BasePlanCache.from_environment(tmp_path / "default", "t")
    monkeypatch.delenv("PLAN_TODAY")
    judged_today = BasePlanCache.from_environment(tmp_path / "default", "t")
    assert judged_then is not None and judged_today is not None
    assert judged_then.key.endswith("-2027-02-01") and judged_then.key != judged_today.key
    (tmp_path / "a-file").write_text("")
    plan = tmp_path / "plan"
    plan.mkdir()
    BasePlanCache(tmp_path / "a-file", "t", fingerprint="f", day="d").put("dev", plan)  # says nothing, keeps nothing
    monkeypatch.setenv(CACHE_VARIABLE, "0")
    assert BasePlanCache.from_environment(tmp_path / "default", "t") is None


def test_an_entry_without_its_completion_mark_is_not_read(tmp_path):
    cache = BasePlanCache(tmp_path / "cache", "t", fingerprint="f", day="d")
    cache.entry("bootstrap/bootstrap").mkdir(parents=True)
    (cache.entry("bootstrap/bootstrap") / "resources.json").write_text("[")  # a run that died while writing
    assert cache.get("bootstrap/bootstrap") is None
    with pytest.raises(ValueError):
        cache.entry("../elsewhere")


# The component type tokens renamed to name their package, and the tokens their state was created under.
RENAMED_TYPES = {
    "gpu-training:cluster:NodePools": "gpu-training:compute:NodePools",
    "gpu-training:data:StorageMounts": "gpu-training:storage:StorageMounts",
    "gpu-training:data:LustreFileSystem": "gpu-training:storage:LustreFileSystem",
    "gpu-training:data:DataBuckets": "gpu-training:storage:DataBuckets",
    "gpu-training:data:CheckpointFileSystem": "gpu-training:storage:CheckpointFileSystem",
    "gpu-training:network:SecurityGroups": "gpu-training:security:SecurityGroups",
    "gpu-training:data:TrainerRegistry": "gpu-training:registry:TrainerRegistry",
}


def test_every_renamed_component_keeps_its_old_urn_as_an_alias(plan_of):
    """Without the alias a real `pulumi up` would delete and create every node pool, bucket and file system."""
    seen = set()
    for stack in ("dev", "prod", "team-vision-prod"):
        for record in plan_of(stack).resources:
            old = RENAMED_TYPES.get(record["type"])
            if old is not None:
                seen.add(record["type"])
                # The type is the URN's last type segment (after `$` under a parent component).
                types, _, name = record["urn"].rpartition("::")
                assert types.endswith(record["type"]), record["urn"]
                assert record.get("aliases") == [f"{types.removesuffix(record['type'])}{old}::{name}"], record["urn"]
    assert seen == set(RENAMED_TYPES), "every renamed type is in a plan"


def test_the_plans_of_a_diff_leave_out_the_example_value_lists(tmp_path, monkeypatch):
    """A failing stack's stderr is what the PR comment shows (its last 2,000 characters): the
    example-value lists of the stacks that planned after it would push the error out of it."""
    import offline.plan as plan_module
    import offline.plan_diff as plan_diff_module

    assert plan_diff_module.QUIET_PLACEHOLDERS == plan_module.QUIET_PLACEHOLDERS
    seen: list[dict[str, str]] = []

    class Process:
        def __init__(self, command, **kwargs):
            seen.append(kwargs["env"])
            kwargs["stderr"].write(b"stack dev: 1 configuration error; nothing was created:")

        def wait(self):
            return 2

    monkeypatch.setattr(plan_diff_module.subprocess, "Popen", Process)
    plans = plan_diff_module.plan_tree(ROOT, tmp_path, ["dev"])
    assert seen and all(env.get(plan_module.QUIET_PLACEHOLDERS) == "1" for env in seen)
    assert plans.failures["gpu-training"].startswith("stack dev: 1 configuration error")


# --- which stacks a change can affect ---------------------------------------------------------

LABELS = ["bootstrap/bootstrap", "dev", "prod", "prod-use2", "prod-usw2", "staging", "team-vision-prod", "team-nlp-dev"]
HPARAMS = frozenset({"trainer/example_trainer/hparams.yaml", "docs/hparams-demo.yaml"})

AFFECTED_CASES = [
    # (changed paths, environments whose vpcCidr view changed, expected replanned labels)
    (["stacks/Pulumi.dev.yaml"], (), ["dev", "team-nlp-dev"]),
    (["stacks/Pulumi.team-vision-prod.yaml"], (), ["team-vision-prod"]),
    # ... and the environment's further regions: a MultiKueue worker reads its fellow workers there.
    (["stacks/Pulumi.prod.yaml"], (), ["prod", "prod-use2", "prod-usw2", "team-vision-prod"]),
    # Its network.vpcCidr is what the other platform stacks check theirs against: each of them, and their teams.
    (["stacks/Pulumi.prod.yaml"], ("prod",), ["dev", "prod", "prod-use2", "prod-usw2", "staging", "team-nlp-dev", "team-vision-prod"]),
    (["stacks/Pulumi.staging.yaml"], (), ["staging"]),
    # A further region's stack file: that stack and the environment's teams (their tenancy on a
    # MultiKueue worker reads its plan), or every platform stack when its vpcCidr moved.
    (["stacks/Pulumi.prod-usw2.yaml"], (), ["prod-usw2", "team-vision-prod"]),
    (["stacks/Pulumi.prod-usw2.yaml"], ("prod-usw2",), ["dev", "prod", "prod-use2", "prod-usw2", "staging",
                                                        "team-nlp-dev", "team-vision-prod"]),
    (["stacks/Pulumi.qa-sandbox.yaml"], (), []),              # a stack file of no stack either ref has: read by none
    (["bootstrap/Pulumi.bootstrap.yaml"], (), ["bootstrap/bootstrap"]),
    (["bootstrap/ci_identity.py"], (), ["bootstrap/bootstrap"]),
    (["bootstrap/Pulumi.yaml"], (), ["bootstrap/bootstrap"]),
    (["__main__.py"], (), ["dev", "prod", "prod-use2", "prod-usw2", "staging", "team-nlp-dev", "team-vision-prod"]),
    (["components/compute/node_pools.py"], (), LABELS),
    (["components/config/keys.py", "docs/config.md"], (), LABELS),
    (["offline/plan.py"], (), LABELS),
    (["offline/plan_diff.py", "offline/affected_stacks.py"], (), []),  # the diff tool: runs from this checkout
    (["scripts/plan.py"], (), LABELS),
    (["scripts/build-image", "scripts/new-team-stack"], (), []),
    (["schemas/crds/kueue.x-k8s.io_clusterqueues.yaml"], (), LABELS),
    (["Pulumi.yaml"], (), LABELS),
    (["requirements.txt"], (), LABELS),
    (["requirements-dev.txt"], (), LABELS),
    (["docs/testing.md", "README.md", "tests/test_plan_diff.py", ".github/workflows/pull-request.yml",
      "bench/plan_bench.py", "trainer/launcher/checkpoint.py", "Makefile"], (), []),
    # A hyperparameters file becomes a job's ConfigMap, wherever it lives.
    (["trainer/example_trainer/hparams.yaml"], (), ["dev", "prod", "prod-use2", "prod-usw2", "staging", "team-nlp-dev", "team-vision-prod"]),
    (["docs/hparams-demo.yaml"], (), ["dev", "prod", "prod-use2", "prod-usw2", "staging", "team-nlp-dev", "team-vision-prod"]),
    (["trainer/example_trainer/./hparams.yaml"], (), ["dev", "prod", "prod-use2", "prod-usw2", "staging", "team-nlp-dev", "team-vision-prod"]),
    # Unknown paths replan everything: an input added without a rule costs time, never a wrong diff.
    (["sitecustomize.py"], (), LABELS),
    (["stacks/README"], (), LABELS),
    ([], (), []),
]


@pytest.mark.parametrize(("changed", "vpc_changed", "expected"), AFFECTED_CASES)
def test_a_change_replans_exactly_the_stacks_that_read_a_changed_path(changed, vpc_changed, expected):
    facts = ChangeFacts(hyperparameter_files=HPARAMS, vpc_cidr_changed=frozenset(vpc_changed))
    affected = affected_stacks(changed, LABELS, facts)
    assert sorted(affected) == sorted(expected)
    assert all(reasons for reasons in affected.values()), "every replanned stack says why"


def test_a_team_stack_follows_its_platform_and_says_so():
    affected = affected_stacks(["stacks/Pulumi.prod.yaml"], LABELS)
    assert affected["prod"] == ["`stacks/Pulumi.prod.yaml` (its stack file) changed"]
    assert affected["team-vision-prod"] == ["`stacks/Pulumi.prod.yaml` (its platform's stack file) changed"]
    sibling = affected_stacks(["stacks/Pulumi.prod.yaml"], LABELS, ChangeFacts(vpc_cidr_changed=frozenset({"prod"})))
    assert sibling["team-nlp-dev"] == ["its platform stack `dev`, whose plan it reads, is replanned"]


def test_a_team_stack_follows_its_environments_worker_stacks_and_says_so():
    affected = affected_stacks(["stacks/Pulumi.prod-usw2.yaml"], LABELS)
    assert affected["team-vision-prod"] == [
        "its environment's stack `prod-usw2` (a MultiKueue worker's plan it reads) is replanned"]
    assert "team-nlp-dev" not in affected


@pytest.mark.parametrize("label", ["dev", "prod", "team-vision-prod", "team-a-b-staging", "team-x-qa", "bootstrap/bootstrap"])
def test_the_platform_a_team_stack_reads_is_the_one_its_plan_synthesises(label):
    """offline/plan.py plans the platform stack_kind names (platform_plan_outputs): the same one."""
    team, environment = stack_kind(label)
    assert platform_of(label) == (environment if team and not label.startswith("bootstrap/") else None)


def test_every_path_of_this_checkout_has_a_rule_or_is_read_by_every_stack():
    """A new top-level directory gets a rule (it is replanned everything until then): list them here."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    unknown = sorted({path.split("/")[0] for path in listed
                      if any("no rule" in why for reasons in affected_stacks([path], LABELS).values() for why in reasons)})
    assert unknown == [], "offline/affected_stacks.py PATH_RULES: say which stacks read these"


# --- the selective diff equals a full replan ---------------------------------------------------

def replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name} no longer holds {old!r}; update this test"
    path.write_text(text.replace(old, new))


# (case, the change, the stacks the selective diff must replan). One of each kind of input.
EQUALITY_CASES = [
    ("dev stack file", lambda repo: set_gpu_pool_max(repo, "4", "6"), ["dev"]),
    ("team stack file", lambda repo: replace_once(repo / "stacks/Pulumi.team-vision-prod.yaml",
                                                  "monthlyLimitUsd: 100", "monthlyLimitUsd: 150"), ["team-vision-prod"]),
    ("platform stack file a team reads", lambda repo: replace_once(repo / "stacks/Pulumi.prod.yaml",
                                                                    "costCenter: ml-platform-prod", "costCenter: ml-prod"),
     ["prod", "prod-use2", "prod-usw2", "team-vision-prod"]),
    # A MultiKueue worker's stack file: the team's tenancy there reads the worker's plan.
    ("worker stack file a team reads", lambda repo: replace_once(repo / "stacks/Pulumi.prod-usw2.yaml",
                                                                  "costCenter: ml-platform-prod", "costCenter: ml-prod"),
     ["prod-usw2", "team-vision-prod"]),
    ("component code", lambda repo: (repo / "components/team.py").write_text(
        (repo / "components/team.py").read_text() + "\n# a change to the program's code\n"),
     ["bootstrap/bootstrap", "dev", "prod", "prod-use2", "prod-usw2", "staging", "team-vision-prod"]),
    ("bootstrap stack file", lambda repo: replace_once(repo / "bootstrap/Pulumi.bootstrap.yaml",
                                                       "costCenter: ml-platform\n", "costCenter: ml-platform-core\n"),
     ["bootstrap/bootstrap"]),
    ("docs only", lambda repo: (repo / "docs/testing.md").write_text((repo / "docs/testing.md").read_text() + "\nMore.\n"), []),
]


def copy_checkout(target: Path) -> Path:
    """This checkout's files (tracked and new, never ignored ones) as a fresh repository at one commit."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    git(target, "init", "--quiet", "--initial-branch=main")
    git(target, "add", "-A")
    git(target, "commit", "--quiet", "-m", "base")
    git(target, "tag", "base")
    return target


@pytest.fixture(scope="module")
def base_build(tmp_path_factory) -> tuple[Path, TreePlans]:
    """A copy of the checkout and the full plan of its base commit, made once for every case."""
    repo = copy_checkout(tmp_path_factory.mktemp("plan-diff-equality") / "repo")
    plans = plan_tree(repo, repo.parent / "full-base", [])
    every_stack = len(list((repo / "stacks").glob("Pulumi.*.yaml"))) + 1  # and the bootstrap
    assert not plans.failures and len(plans.stacks) == every_stack, plans.failures
    return repo, plans


def files_of(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# Each case plans every stack at its head (the full replan it is held to): 15-40 s apiece. `make test`
# runs the first; .ci/run all of them (PLAN_DIFF_EQUALITY=all), as it runs the slow doc commands.
ALWAYS_RUN = ("dev stack file",)


@pytest.mark.scenario  # plans the base and the head of a change (25 s a case)
@pytest.mark.parametrize(("case", "change", "replanned"), EQUALITY_CASES, ids=[c[0] for c in EQUALITY_CASES])
def test_the_selective_diff_equals_a_full_replan(base_build, case, change, replanned, tmp_path):
    if case not in ALWAYS_RUN and os.environ.get("PLAN_DIFF_EQUALITY") != "all":
        pytest.skip("plans every stack at a new head: run with PLAN_DIFF_EQUALITY=all (.ci/run does)")
    repo, full_base = base_build
    git(repo, "checkout", "--quiet", "-B", "case", "base")
    try:
        change(repo)
        git(repo, "commit", "--quiet", "-am", case)
        head_commit = git(repo, "rev-parse", "HEAD").strip()
        result = plan_diff(repo, "base", "HEAD", "--keep-plans", str(tmp_path / "selective"))
        full_head = plan_tree(repo, tmp_path / "full-head", [])  # the repository is checked out at HEAD
    finally:
        git(repo, "checkout", "--quiet", "main")
    assert result.returncode == 0, result.stderr + result.stdout
    full = build_report(commit_label(git(repo, "rev-parse", "base").strip(), "base"), commit_label(head_commit, "HEAD"),
                        full_base, full_head, load_cost_model())
    body, _, selection = result.stdout.partition(f"\n\n{SELECTION_SUMMARY}")
    assert body + "\n" == full.markdown, "the selective diff reads as the full replan's"
    assert [line.split("`")[1] for line in selection.splitlines() if line.startswith("- replanned")] == replanned
    selective = {f"{side}/{label}": directory for side in ("base", "head")
                 for label, directory in plan_tree_dirs(tmp_path / "selective" / side).items()}
    assert sorted(selective) == sorted(f"{side}/{label}" for side in ("base", "head") for label in replanned)
    for label in full_head.stacks:
        # A replanned stack's plans are the full replan's, byte for byte; a reused one's head plan is its base plan.
        expected = files_of(full_head.stacks[label])
        if label in replanned:
            assert files_of(selective[f"head/{label}"]) == expected, label
            assert files_of(selective[f"base/{label}"]) == files_of(full_base.stacks[label]), label
        else:
            assert files_of(full_base.stacks[label]) == expected, f"{label} is reused but its plan changed"


def plan_tree_dirs(build: Path) -> dict[str, Path]:
    """Stack label -> plan directory of one side of --keep-plans (main/<stack>, bootstrap/<stack>)."""
    found = {}
    for project in ("main", "bootstrap"):
        for directory in sorted((build / project).iterdir()) if (build / project).is_dir() else []:
            if (directory / "resources.json").is_file():
                found[directory.name if project == "main" else f"bootstrap/{directory.name}"] = directory
    return found
