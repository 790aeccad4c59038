"""The plan's architecture view: drawn from the dependencies the program declares, reduced to
the main links, and written by `make plan` for every stack."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from stack_configs import MANIFEST_STACKS, ROOT

from offline.architecture import GROUPS, component_edges, mermaid, transitive_reduction

A, B, C, D = (("t:m:X", n) for n in "abcd")


@pytest.mark.parametrize(("edges", "reduced"), [
    ({(A, B), (B, C), (A, C)}, {(A, B), (B, C)}),                  # A -> C is implied
    ({(A, B), (B, C), (C, D), (A, D)}, {(A, B), (B, C), (C, D)}),  # implied through two hops
    ({(A, B), (A, C)}, {(A, B), (A, C)}),                          # siblings stay
    ({(A, C), (B, C)}, {(A, C), (B, C)}),                          # two roots stay
    (set(), set()),
])
def test_transitive_reduction(edges, reduced):
    assert transitive_reduction(edges) == reduced


def test_component_edges_follow_children_up_to_their_top_level_component():
    child_of_a, child_of_b = ("t:m:Y", "a-child"), ("t:m:Y", "b-child")
    parents = {A: None, B: None, child_of_a: A, child_of_b: B}
    dependencies = {child_of_b: {child_of_a}, child_of_a: set(), A: set(), B: {A}}
    assert component_edges(parents, dependencies) == {(A, B)}


def edges_of(text: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^  (\w+) --> (\w+)$", text, flags=re.M))


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_component_of_the_stack_is_drawn(stack, plan_of):
    plan = plan_of(stack)
    text = mermaid(stack, plan.resources, plan.parents, plan.dependencies)
    assert text.count("```mermaid") == 1
    for record in plan.resources:
        if record["type"].startswith("gpu-training:") and record["parent"] is None:
            assert f'["{record["name"]}<br/>' in text, record["name"]


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_component_lands_in_a_named_group(stack, plan_of):
    """A component whose type token names a module GROUPS does not know would be drawn under
    "Other", apart from its domain."""
    modules = {r["type"].split(":")[1] for r in plan_of(stack).resources if r["type"].startswith("gpu-training:")}
    assert modules and modules <= set(GROUPS), modules - set(GROUPS)


def test_the_prod_view_shows_the_main_links_and_nothing_implied(plan_of):
    plan = plan_of("prod")
    edges = edges_of(mermaid("prod", plan.resources, plan.parents, plan.dependencies))
    main_links = {("network", "security_groups"), ("security_groups", "cluster"), ("cluster", "node_pools"),
                  # On Lustre the job waits for the volumes through the checkpoint directory made on them.
                  ("storage_mounts", "storage_mounts_checkpoint_directory"),
                  ("storage_mounts_checkpoint_directory", "job_pretrain_p5"), ("training_queue", "job_pretrain_p5"),
                  ("storage_buckets", "workload_roles"), ("checkpoints_efs", "workload_roles")}
    assert main_links <= edges
    assert ("network", "cluster") not in edges, "implied by network -> security groups -> cluster"


def test_make_plan_writes_the_view(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "plan.py"), "--stack", "team-vision-prod",
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "team_queue --> job_vision_finetune" in (tmp_path / "architecture.md").read_text()
