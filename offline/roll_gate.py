"""The deploy's roll gate: which GPU node groups a `pulumi up` would roll, and which running gangs
on reserved or on-demand capacity sit on them (scripts/deploy-environment asks before each
platform stack's `up`; docs/gpu-fabric-and-capacity.md, "Updates that do not drain running gangs").

    .venv/bin/python scripts/_roll_gate.py rolled PREVIEW_JSON
    .venv/bin/python scripts/_roll_gate.py check PREVIEW_JSON NODES_JSON PODS_JSON [--allow-gang-roll]

PREVIEW_JSON is `pulumi preview --json`'s output: one PreviewDigest whose `steps` each carry `op`,
`urn`, `oldState`/`newState` (apitype.ResourceV3: `type`, `inputs`, `outputs`), `diffReasons` (the
top-level keys that differ, update steps) and `replaceReasons` (replacement steps) (pulumi/pulumi
pkg/display/json.go, `PreviewDigest` and `previewStep`). NODES_JSON and PODS_JSON are `kubectl get
nodes -o json` and `kubectl get pods --all-namespaces -l <the training pods' labels> -o json`.

`rolled` prints each GPU node group the update rolls, one a line. `check` exits 2 naming each
rolled node group that runs a gang on non-spot capacity, the gangs and the fix; with
--allow-gang-roll it names them as a warning and exits 0. Spot gangs never stop a deploy: their
nodes leave on the 2-minute notice whatever is planned, and they carry no PodDisruptionBudget.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from offline.plan_diff import LAUNCH_TEMPLATE, NODE_GROUP, ROLLING_NODE_GROUP_INPUTS

# Step ops that put new nodes in a group: an in-place update, or a replacement, which the engine
# shows as `replace` and performs as `create-replacement` plus `delete-replaced` (pulumi/pulumi
# pkg/resource/deploy/step.go, the StepOp constants).
UPDATE_OPS = frozenset({"update"})
REPLACE_OPS = frozenset({"replace", "create-replacement", "delete-replaced"})
# The labels EKS puts on every node of a managed node group (EKS User Guide, "Managed node groups":
# eks.amazonaws.com/nodegroup, eks.amazonaws.com/capacityType ON_DEMAND, SPOT or CAPACITY_BLOCK).
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
# The labels of every training pod the platform creates (components/workload/training_job.py
# _pod_labels), and the label JobSet puts on each pod of a JobSet.
TRAINING_POD_SELECTOR = "app.kubernetes.io/part-of=gpu-training,app.kubernetes.io/component=training"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
FIX = ("Fix: wait for the gangs to finish; or stop each at a checkpoint (`scripts/gpu-training job stop JOB "
       "--stack STACK`, or delete the JobSet) after holding the queue, as docs/gpu-fabric-and-capacity.md "
       "\"Updates that do not drain running gangs\" describes; or, knowing the node group update will wait on "
       "the gangs' PodDisruptionBudgets and then fail, rerun with --allow-gang-roll.")


def _step_type(step: Mapping[str, Any]) -> str:
    state = step.get("newState") or step.get("oldState") or {}
    return str(state.get("type") or str(step.get("urn", "")).rsplit("::", 1)[0].rsplit("$", 1)[-1])


def _step_name(step: Mapping[str, Any]) -> str:
    return str(step.get("urn", "")).rsplit("::", 1)[-1]


def _inputs(step: Mapping[str, Any]) -> Mapping[str, Any]:
    return (step.get("newState") or step.get("oldState") or {}).get("inputs") or {}


def _roll_reasons(step: Mapping[str, Any]) -> list[str]:
    op = str(step.get("op", ""))
    if op in REPLACE_OPS:
        return ["replaced"]
    if op in UPDATE_OPS:
        return [f"`{key}`" for key in step.get("diffReasons") or [] if key in ROLLING_NODE_GROUP_INPUTS]
    return []


def rolled_node_groups(preview: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """GPU node group name -> {"why": [...], "spot": bool}, for each group the previewed update rolls.
    A launch template update is a roll too: its new default version reaches the group's
    `launchTemplate.version`, unknown during a preview (`<prefix>-lt` beside `<prefix>-nodegroup`)."""
    steps = [step for step in preview.get("steps") or [] if isinstance(step, Mapping)]
    templates = {_step_name(step).removesuffix("-lt") for step in steps
                 if _step_type(step) == LAUNCH_TEMPLATE and step.get("op") in UPDATE_OPS | REPLACE_OPS}
    rolled: dict[str, dict[str, Any]] = {}
    for step in steps:
        inputs = _inputs(step)
        if _step_type(step) != NODE_GROUP or "NVIDIA" not in str(inputs.get("amiType", "")):
            continue
        why = _roll_reasons(step)
        if _step_name(step).removesuffix("-nodegroup") in templates and step.get("op") not in REPLACE_OPS:
            why.append("its launch template")
        if why:
            name = str(inputs.get("nodeGroupName") or _step_name(step))
            entry = rolled.setdefault(name, {"why": [], "spot": inputs.get("capacityType") == "SPOT"})
            entry["why"] += [reason for reason in why if reason not in entry["why"]]
    return rolled


def gangs_on(node_groups: Sequence[str], nodes: Mapping[str, Any], pods: Mapping[str, Any]) -> dict[str, list[str]]:
    """Node group -> the gangs (namespace/JobSet) with a scheduled, unfinished pod on one of its
    non-spot nodes. A pod on a spot node never counts: it leaves on the reclaim notice anyway."""
    groups = set(node_groups)
    node_group: dict[str, str] = {}
    for node in nodes.get("items") or []:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(NODEGROUP_LABEL) in groups and labels.get(CAPACITY_TYPE_LABEL) != "SPOT":
            node_group[str(node["metadata"]["name"])] = str(labels[NODEGROUP_LABEL])
    found: dict[str, list[str]] = {}
    for pod in pods.get("items") or []:
        metadata, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        group = node_group.get(str(spec.get("nodeName") or ""))
        if group is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        labels = metadata.get("labels") or {}
        gang = f"{metadata.get('namespace', '')}/{labels.get(JOBSET_NAME_LABEL) or labels.get('app.kubernetes.io/name', '?')}"
        if gang not in found.setdefault(group, []):
            found[group].append(gang)
    return {group: sorted(gangs) for group, gangs in sorted(found.items())}


def refusal(rolled: Mapping[str, Mapping[str, Any]], gangs: Mapping[str, Sequence[str]]) -> str:
    lines = [f"- node group {group} ({'; '.join(rolled[group]['why'])}) runs {', '.join(names)}"
             for group, names in gangs.items()]
    return "\n".join(["this update rolls GPU node groups that run gangs on reserved or on-demand capacity:",
                      *lines, FIX])


def _load(path: str) -> Mapping[str, Any]:
    try:
        data = json.loads(Path(path).read_text() or "{}")
    except (OSError, ValueError) as error:
        raise SystemExit(f"roll_gate: cannot read {path} as JSON: {error}") from None
    return data if isinstance(data, Mapping) else {}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="_roll_gate.py", description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("rolled").add_argument("preview")
    check = sub.add_parser("check")
    for name in ("preview", "nodes", "pods"):
        check.add_argument(name)
    check.add_argument("--allow-gang-roll", action="store_true")
    args = parser.parse_args(argv)
    rolled = rolled_node_groups(_load(args.preview))
    if args.command == "rolled":
        print("\n".join(f"{name}\t{'spot' if entry['spot'] else 'held'}\t{'; '.join(entry['why'])}"
                        for name, entry in rolled.items()))
        return 0
    held = [name for name, entry in rolled.items() if not entry["spot"]]
    gangs = gangs_on(held, _load(args.nodes), _load(args.pods))
    if not gangs:
        return 0
    if args.allow_gang_roll:
        print(f"::warning::--allow-gang-roll: {refusal(rolled, gangs)}".replace("\n", " "))
        return 0
    print(f"deploy-environment: {refusal(rolled, gangs)}", file=sys.stderr)
    return 2
