"""The deploy's roll gate (offline/roll_gate.py): `pulumi preview --json` steps -> the GPU node
groups an update rolls; nodes and pods -> the non-spot gangs on them. The step shape is Pulumi's
PreviewDigest (pulumi/pulumi pkg/display/json.go): op, urn, oldState/newState with type and
inputs, diffReasons, replaceReasons."""

from __future__ import annotations

import json
from typing import Any

import pytest

from offline.roll_gate import gangs_on, main, rolled_node_groups

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def step(op: str, name: str, *, type_: str = NODE_GROUP, ami: str = "AL2023_x86_64_NVIDIA", capacity: str = "ON_DEMAND",
         diff: tuple[str, ...] = (), group: str | None = None) -> dict[str, Any]:
    urn = f"urn:pulumi:prod::gpu-training::gpu-training:cluster:NodePools${type_}::{name}"
    inputs = {"amiType": ami, "capacityType": capacity, "nodeGroupName": group or f"gpu-training-prod-{name}"}
    state = {"urn": urn, "type": type_, "inputs": inputs if type_ == NODE_GROUP else {}}
    return {"op": op, "urn": urn, "oldState": state, "newState": state, "diffReasons": list(diff),
            "replaceReasons": [], "detailedDiff": None}


@pytest.mark.parametrize(("steps", "rolled"), [
    ([step("update", "p5-nodegroup", diff=("version",))], {"gpu-training-prod-p5-nodegroup": ["`version`"]}),
    ([step("update", "p5-nodegroup", diff=("releaseVersion", "tags"))], {"gpu-training-prod-p5-nodegroup": ["`releaseVersion`"]}),
    ([step("update", "p5-nodegroup", diff=("launchTemplate",))], {"gpu-training-prod-p5-nodegroup": ["`launchTemplate`"]}),
    # a scaling or tag change rolls nothing
    ([step("update", "p5-nodegroup", diff=("scalingConfig", "tags"))], {}),
    # replacement, in any of the engine's three replace ops
    ([step("replace", "p5-nodegroup")], {"gpu-training-prod-p5-nodegroup": ["replaced"]}),
    ([step("create-replacement", "p5-nodegroup"), step("delete-replaced", "p5-nodegroup")],
     {"gpu-training-prod-p5-nodegroup": ["replaced"]}),
    # its launch template's update (the group's template version is unknown in a preview)
    ([step("update", "p5-lt", type_=TEMPLATE), step("same", "p5-nodegroup")],
     {"gpu-training-prod-p5-nodegroup": ["its launch template"]}),
    # another pool's template, a new group, a CPU group: no roll
    ([step("update", "g6-lt", type_=TEMPLATE), step("same", "p5-nodegroup")], {}),
    ([step("create", "p5-nodegroup")], {}),
    ([step("update", "system-nodegroup", ami="AL2023_x86_64_STANDARD", diff=("version",))], {}),
], ids=["version", "release", "template-input", "scaling", "replace", "replace-steps", "template", "other-template",
        "create", "cpu"])
def test_rolled_node_groups_from_preview_steps(steps, rolled):
    assert {name: entry["why"] for name, entry in rolled_node_groups({"steps": steps}).items()} == rolled


def test_a_spot_group_is_named_but_marked_spot():
    rolled = rolled_node_groups({"steps": [step("update", "spot-nodegroup", capacity="SPOT", diff=("version",))]})
    assert rolled == {"gpu-training-prod-spot-nodegroup": {"why": ["`version`"], "spot": True}}


def node(name: str, group: str, capacity: str = "ON_DEMAND") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"eks.amazonaws.com/nodegroup": group,
                                                  "eks.amazonaws.com/capacityType": capacity}}}


def pod(namespace: str, jobset: str, node_name: str | None, phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "labels": {"jobset.sigs.k8s.io/jobset-name": jobset}},
            "spec": {"nodeName": node_name} if node_name else {}, "status": {"phase": phase}}


NODES = {"items": [node("n1", "p5"), node("n2", "p5"), node("n3", "g6"), node("n4", "spot", "SPOT"),
                   node("n5", "cb", "CAPACITY_BLOCK")]}


@pytest.mark.parametrize(("pods", "found"), [
    ([pod("training", "pretrain", "n1"), pod("training", "pretrain", "n2")], {"p5": ["training/pretrain"]}),
    ([pod("training", "pretrain", "n3")], {}),                       # on a group the update does not roll
    ([pod("training", "pretrain", "n4")], {}),                       # spot: drains on notice, never gates
    ([pod("training", "done", "n1", "Succeeded"), pod("training", "x", "n1", "Failed")], {}),
    ([pod("training", "pending", None, "Pending")], {}),             # not on any node yet
    ([pod("team-vision", "a", "n5"), pod("training", "b", "n1")], {"cb": ["team-vision/a"], "p5": ["training/b"]}),
], ids=["gang", "other-group", "spot", "finished", "unscheduled", "capacity-block"])
def test_gangs_on_rolled_node_groups(pods, found):
    assert gangs_on(["p5", "spot", "cb"], NODES, {"items": pods}) == found


def test_check_refuses_naming_group_gang_and_fix(tmp_path, capsys):
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [step("update", "p5", group="p5", diff=("version",))]}))
    nodes, pods = tmp_path / "nodes.json", tmp_path / "pods.json"
    nodes.write_text(json.dumps(NODES))
    pods.write_text(json.dumps({"items": [pod("training", "pretrain", "n1")]}))
    assert main(["check", str(preview), str(nodes), str(pods)]) == 2
    error = capsys.readouterr().err
    assert "node group p5 (`version`) runs training/pretrain" in error
    assert "scripts/gpu-training job stop" in error and "--allow-gang-roll" in error
    assert main(["check", str(preview), str(nodes), str(pods), "--allow-gang-roll"]) == 0
    assert "::warning::" in capsys.readouterr().out


def test_the_selector_picks_every_training_pod_the_platform_makes():
    """The gate lists pods by the labels each training pod carries (stack and ad-hoc jobs alike)."""
    from types import SimpleNamespace

    from components.workload import training_job
    from offline.roll_gate import TRAINING_POD_SELECTOR

    labels = training_job._pod_labels(SimpleNamespace(name="pretrain"))  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    wanted = {key: value for key, _, value in (term.partition("=") for term in TRAINING_POD_SELECTOR.split(","))}
    assert wanted.items() <= labels.items()
