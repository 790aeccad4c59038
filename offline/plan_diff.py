#!/usr/bin/env python3
# Over 600 lines: one command's pipeline: plan two trees, diff them per resource, render the diff.
"""Offline plan diff: what a change does to every stack, without credentials.

    scripts/plan-diff BASE_REF [HEAD_REF] [--stack NAME ...] [--all] [--keep-plans DIR]
                      [--changed-stacks-file FILE]

Plans, at BASE_REF and at HEAD_REF (each in a git worktree in a temporary directory; without
HEAD_REF, the working tree as it is, uncommitted and untracked files included), the stacks the
change can affect: those whose plan reads a path that differs between the two trees
(offline/affected_stacks.py: a stack's own stack file, for a team stack its platform's, the
program's code and the files it reads). The other stacks' head plan is their base plan: they are
reported unchanged without being planned. `--all` (or PLAN_DIFF_ALL=1) plans every stack at both
refs; the diff reads the same either way. Both refs are planned at once, with this checkout's
Python environment and each tree's own `scripts/plan.py`. Prints a Markdown summary per stack:
resources added, removed and changed with the input paths that changed, a warning where the
change forces AWS or Kubernetes to replace the resource, the Kubernetes manifests changed, and
the cost delta from the stack cost model (components/facts/cost_model.py); then which stacks
were replanned and why, and which were reused. A change that alters no plan prints "no changes".
Exit status: 0, or 1 when a stack fails to plan at a ref (the summary says which and why), 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from offline.affected_stacks import MAIN_STACK_DIR, ChangeFacts, affected_stacks, stack_kind
from offline.documents import values_under
from offline.plan_cache import CACHE_VARIABLE, COMPLETE, BasePlanCache, label_dir

ROOT = Path(__file__).resolve().parent.parent
MAIN_PROJECT = "gpu-training"
BOOTSTRAP_DIR = "bootstrap"
# Resource types that are not Kubernetes objects of their own (as in offline/plan.py).
NON_MANIFEST_K8S_TYPES = ("kubernetes:helm.sh/", "kubernetes:yaml")
# libyaml's parser where PyYAML has it (the same YAML 1.1 safe reading, ~10x faster): a diff reads
# every manifest of the plans it compares, and the stack files of both trees.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# A GitHub comment holds at most 65,536 characters; leave room for the heading it gets.
DEFAULT_MAX_CHARS = 60_000
MAX_VALUE_CHARS = 60
MAX_PATHS_PER_RESOURCE = 8
# Of a long text that changed (an alarm's description, a script), what is shown around the change.
CONTEXT_CHARS = 12
# Paths that say what a change does to the training: listed before the rest of a resource's changes.
MEANINGFUL_PATH_WORDS = ("instanceTypes", "scalingConfig", "capacityType", "image", "parallelism", "completions",
                         "nodeSelector", "resources", "nvidia.com/gpu", "version", "amiType", "TRAIN_")
# Set for the plans made here: no example-value lists (as offline/plan.py reads it), which would
# push a failing stack's error out of the text kept for the comment.
QUIET_PLACEHOLDERS = "PLAN_QUIET_PLACEHOLDERS"
DEFAULT_CACHE = ROOT / "build" / "plan-diff-cache"
# Set (to anything but 0) for a full replan of every stack, as --all.
ALL_VARIABLE = "PLAN_DIFF_ALL"

# Inputs whose change makes the provider replace the resource (delete and create, or create
# and delete) instead of updating it in place. What we know, with where it is written:
# - AWS (pulumi-aws bridges terraform-provider-aws: ForceNew in the resource schema):
#   internal/service/eks/node_group.go @012e0a32, eks/cluster.go @00555dc5,
#   ec2/vpc_subnet.go @00cda125, ec2/vpc_security_group.go @01606926, iam/role.go @0040ea69.
# - Kubernetes (pulumi-kubernetes provider/pkg/provider/diff.go @00302beb, forceNewProperties):
#   .metadata.name and .metadata.namespace of every kind, plus the per-kind fields below.
# Anything not listed is reported as an update, which is what the provider does unless its
# schema says otherwise: `pulumi preview` in the pull request has the final word.
REPLACED_ON_CHANGE: dict[str, tuple[str, ...]] = {
    "aws:eks/nodeGroup:NodeGroup": ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes",
                                    "launchTemplate.id", "launchTemplate.name", "nodeGroupName", "nodeGroupNamePrefix",
                                    "nodeRoleArn", "remoteAccess", "subnetIds"),
    "aws:eks/cluster:Cluster": ("name", "roleArn", "kubernetesNetworkConfig.serviceIpv4Cidr",
                                "kubernetesNetworkConfig.ipFamily", "bootstrapSelfManagedAddons",
                                "accessConfig.bootstrapClusterCreatorAdminPermissions", "remoteNetworkConfig"),
    "aws:ec2/subnet:Subnet": ("availabilityZone", "availabilityZoneId", "cidrBlock", "vpcId", "ipv6Native", "outpostArn"),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "description", "vpcId"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
}
KUBERNETES_REPLACED_ON_CHANGE: dict[str, tuple[str, ...]] = {
    "*": ("metadata.name", "metadata.namespace"),
    "kubernetes:core/v1:ConfigMap": ("binaryData", "data"),
    "kubernetes:core/v1:Secret": ("type", "stringData", "data"),
    "kubernetes:core/v1:PersistentVolumeClaim": ("spec",),
    "kubernetes:core/v1:PersistentVolume": ("spec.csi", "spec.nfs", "spec.hostPath", "spec.local"),
    "kubernetes:core/v1:ResourceQuota": ("spec.scopes",),
    "kubernetes:storage.k8s.io/v1:StorageClass": ("parameters", "provisioner"),
    "kubernetes:batch/v1:Job": ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
}


NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
# What makes a managed node group drain and replace its nodes, one at a time on GPU pools (MINIMAL):
# a new Kubernetes version or AMI release, another AMI type, a new launch template version (EKS User
# Guide, "Managed node update behavior"), or the group's replacement. A GPU pool's launch template
# is `<pool prefix>-lt` beside its `<pool prefix>-nodegroup` (components/cluster/node_pools.py).
ROLLING_NODE_GROUP_INPUTS = ("version", "releaseVersion", "amiType", "launchTemplate")


class PlanDiffError(Exception):
    """A problem with the arguments or the repository: exit 2 with this message."""


# --- comparing values ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    path: str
    old: Any
    new: Any


_ABSENT = object()


def _maybe_json(value: Any) -> Any:
    """Inputs such as IAM policies are JSON text: compare them as documents, not as strings."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def diff_values(old: Any, new: Any, path: str = "") -> list[Change]:
    """Every leaf that differs, as dotted paths with [index] for lists; absent sides are _ABSENT."""
    old, new = _maybe_json(old), _maybe_json(new)
    if isinstance(old, dict) and isinstance(new, dict):
        changes: list[Change] = []
        for key in sorted(set(old) | set(new)):
            changes += diff_values(old.get(key, _ABSENT), new.get(key, _ABSENT), _join(path, str(key)))
        return changes
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _by_name(old), _by_name(new)
        if old_named is not None and new_named is not None:
            # Env vars, containers, volumes, ports: an entry is its name, not its position (one
            # added in the middle is one change, not every later entry's).
            changes = []
            for name in [*old_named, *(n for n in new_named if n not in old_named)]:
                changes += diff_values(old_named.get(name, _ABSENT), new_named.get(name, _ABSENT), f"{path}[{name}]")
            return changes
        changes = []
        for index in range(max(len(old), len(new))):
            changes += diff_values(old[index] if index < len(old) else _ABSENT,
                                   new[index] if index < len(new) else _ABSENT, f"{path}[{index}]")
        return changes
    return [] if old == new else [Change(path, old, new)]


def _by_name(items: list[Any]) -> dict[str, Any] | None:
    """The list as {name: entry} when every entry is a mapping with a distinct text `name`, else None."""
    named = {item["name"]: item for item in items if isinstance(item, dict) and isinstance(item.get("name"), str)}
    return named if items and len(named) == len(items) else None


def _path_covers(prefix: str, path: str) -> bool:
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


def replacement_paths(type_token: str, changes: list[Change]) -> list[str]:
    """The changed paths that make the provider replace a resource of `type_token`."""
    if type_token.startswith("kubernetes:"):
        known = KUBERNETES_REPLACED_ON_CHANGE["*"] + KUBERNETES_REPLACED_ON_CHANGE.get(type_token, ())
    else:
        known = REPLACED_ON_CHANGE.get(type_token, ())
    return [c.path for c in changes if any(_path_covers(prefix, c.path) for prefix in known)]


# --- plans --------------------------------------------------------------------------------------

Key = tuple[str, str, str]


@dataclass
class StackPlan:
    resources: dict[Key, dict[str, Any]]
    manifests: dict[str, Any]


def is_manifest_type(type_token: str) -> bool:
    return type_token.startswith("kubernetes:") and not type_token.startswith(NON_MANIFEST_K8S_TYPES)


def load_stack_plan(directory: Path) -> StackPlan:
    records = json.loads((directory / "resources.json").read_text())
    manifests_dir = directory / "manifests"
    manifests = {p.name: yaml.load(p.read_text(), Loader=YAML_LOADER) for p in sorted(manifests_dir.glob("*.yaml"))} \
        if manifests_dir.is_dir() else {}
    return StackPlan(resources={(r["type"], r["parent"] or "", r["name"]): r for r in records}, manifests=manifests)


@dataclass
class ResourceDiff:
    added: list[Key] = field(default_factory=list)
    removed: list[Key] = field(default_factory=list)
    changed: dict[Key, list[Change]] = field(default_factory=dict)
    manifests_added: list[str] = field(default_factory=list)
    manifests_removed: list[str] = field(default_factory=list)
    manifests_changed: dict[str, list[Change]] = field(default_factory=dict)
    renamed: dict[Key, Key] = field(default_factory=dict)
    """head key -> base key, where the head resource's alias names the base resource's URN: the
    engine moves it to the new URN (children follow their parent's alias), nothing is replaced."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.manifests_added or self.manifests_removed
                    or self.manifests_changed or self.renamed)


def renamed_resources(base: StackPlan, head: StackPlan) -> dict[Key, Key]:
    """Head resources (not in base under their own key) whose alias is a base resource's URN."""
    base_key_of_urn = {record.get("urn"): key for key, record in base.resources.items()}
    return {key: base_key_of_urn[alias] for key, record in head.resources.items() if key not in base.resources
            for alias in record.get("aliases", []) if alias in base_key_of_urn}


def diff_stack(base: StackPlan, head: StackPlan) -> ResourceDiff:
    """Kubernetes objects are reported with their manifests; everything else as resources."""
    result = ResourceDiff(renamed=renamed_resources(base, head))
    keys = sorted((set(base.resources) - set(result.renamed.values())) | set(head.resources))
    for key in keys:
        if is_manifest_type(key[0]):
            continue
        base_key = result.renamed.get(key, key)
        if base_key not in base.resources:
            result.added.append(key)
        elif key not in head.resources:
            result.removed.append(key)
        else:
            old, new = base.resources[base_key], head.resources[key]
            changes = diff_values({"inputs": old["inputs"], "provider": old.get("provider")},
                                  {"inputs": new["inputs"], "provider": new.get("provider")})
            if changes:
                result.changed[key] = [Change(c.path.removeprefix("inputs."), c.old, c.new) for c in changes]
    for name in sorted(set(base.manifests) | set(head.manifests)):
        if name not in base.manifests:
            result.manifests_added.append(name)
        elif name not in head.manifests:
            result.manifests_removed.append(name)
        else:
            changes = diff_values(base.manifests[name], head.manifests[name])
            if changes:
                result.manifests_changed[name] = changes
    return result


# --- cost ---------------------------------------------------------------------------------------

CostFigures = dict[str, float]


def load_cost_model() -> Callable[[list[dict[str, Any]]], CostFigures]:
    """The stack cost model of this checkout (components/facts/cost_model.py).

    Both refs are priced with this one model, so the delta shows what the change does to the
    stack, not a price table update."""
    from components.facts import cost_model as model

    def figures(resources: list[dict[str, Any]]) -> CostFigures:
        cost = model.plan_cost(resources)
        return {
            "fixed, per month": float(cost.fixed_monthly_usd),
            "usage at the stated volumes, per month": float(cost.usage_monthly_usd),
            "GPU pools at minimum size, per hour": float(cost.gpu_hourly_at_min_usd),
            "GPU pools at maximum size, per hour": float(cost.gpu_hourly_at_max_usd),
        }

    return figures


# --- running git and the planner ----------------------------------------------------------------

def git(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise PlanDiffError(f"git {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout.strip()


def resolve(ref: str) -> str:
    try:
        return git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except PlanDiffError:
        raise PlanDiffError(f"'{ref}' is not a commit here. Fix: name a branch, tag or commit "
                            "(git fetch it first in a shallow clone).") from None


@contextmanager
def worktree(commit: str, parent: Path, label: str) -> Iterator[Path]:
    path = parent / label
    git("worktree", "prune")  # entries of runs that were killed before they cleaned up
    git("worktree", "add", "--detach", "--quiet", str(path), commit)
    try:
        yield path
    finally:
        git("worktree", "remove", "--force", str(path))


@dataclass
class TreePlans:
    stacks: dict[str, Path]
    """Stack label -> its plan directory."""
    failures: dict[str, str]
    """Stack label (or project) -> why it did not plan."""


def _projects(tree: Path) -> list[tuple[str, Path]]:
    """(label prefix, project dir): the main project, and the bootstrap where the tree has one."""
    projects = [("", tree)]
    if (tree / BOOTSTRAP_DIR / "Pulumi.yaml").is_file():
        projects.append((f"{BOOTSTRAP_DIR}/", tree / BOOTSTRAP_DIR))
    return projects


@functools.lru_cache(maxsize=16)
def _stack_dir(project_dir: Path) -> Path:
    """The project's stackConfigDir, as offline/plan.py's all_stacks reads it (a broken project file
    plans nothing either way: every stack of it is replanned and reports why)."""
    try:
        settings = yaml.load((project_dir / "Pulumi.yaml").read_text(), Loader=YAML_LOADER)
    except (OSError, yaml.YAMLError):
        settings = None
    return project_dir / str((settings or {}).get("stackConfigDir") or ".") if isinstance(settings, dict) else project_dir


def project_stacks(project_dir: Path) -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in _stack_dir(project_dir).glob("Pulumi.*.yaml"))


def tree_labels(tree: Path) -> list[str]:
    """Every stack label of a tree (`dev`, `bootstrap/bootstrap`), from its stack files."""
    return [f"{prefix}{stack}" for prefix, project_dir in _projects(tree) for stack in project_stacks(project_dir)]


@dataclass
class _Running:
    project: str
    out: Path
    log: Path
    process: subprocess.Popen[bytes]


def start_plans(tree: Path, build: Path, stacks: list[str], only: Collection[str] | None = None) -> list[_Running]:
    """Start planning the tree's stacks with this Python (the tree's own scripts/plan.py and
    components/): `stacks` limits the main project's, `only` (labels) every project's; None: all.
    A project whose every stack is planned gets `--all`, as a full replan does."""
    running = []
    build.mkdir(parents=True, exist_ok=True)
    for prefix, project_dir in _projects(tree):
        everything = project_stacks(project_dir)
        wanted = [s for s in (stacks if stacks and not prefix else everything) if only is None or f"{prefix}{s}" in only]
        if not wanted:
            continue
        out, log = build / (prefix.rstrip("/") or "main"), build / f"{prefix.rstrip('/') or 'main'}.log"
        full = wanted == everything and not (stacks and not prefix)
        selection = ["--all"] if full else [arg for stack in wanted for arg in ("--stack", stack)]
        command = [sys.executable, str(tree / "scripts" / "plan.py"), *selection, "--build-dir", str(out)]
        if prefix:
            command += ["--project", str(project_dir)]
        with log.open("wb") as output:  # stdout and stderr as one: read back only when it fails
            process = subprocess.Popen(command, cwd=tree, stdout=subprocess.DEVNULL, stderr=output,
                                       env={**os.environ, QUIET_PLACEHOLDERS: "1"})
        running.append(_Running(prefix or MAIN_PROJECT, out, log, process))
    return running


def finish_plans(running: list[_Running]) -> TreePlans:
    plans = TreePlans(stacks={}, failures={})
    for run in running:
        if run.process.wait() != 0:
            plans.failures[run.project] = run.log.read_text(errors="replace").strip()[-2000:]
        prefix = "" if run.project == MAIN_PROJECT else run.project
        for directory in sorted(run.out.iterdir()) if run.out.is_dir() else []:
            if (directory / "resources.json").is_file():
                plans.stacks[f"{prefix}{directory.name}"] = directory
    return plans


def plan_tree(tree: Path, build: Path, stacks: list[str]) -> TreePlans:
    """Plan the tree's stacks (see start_plans) and wait for them."""
    return finish_plans(start_plans(tree, build, stacks))


# --- what to replan -----------------------------------------------------------------------------

def changed_paths(base_commit: str, head_commit: str | None) -> list[str]:
    """Every path that differs between the two trees planned (both names of a rename; without
    head, the working tree with its untracked files). The trees themselves, not base...head: the
    base is planned at its tip, whatever the merge base."""
    diff = git("diff", "--name-only", "--no-renames", "-z", base_commit, *([head_commit] if head_commit else []))
    untracked = "" if head_commit else git("ls-files", "--others", "--exclude-standard", "-z")
    return sorted(set(filter(None, (diff + "\0" + untracked).split("\0"))))


def hyperparameter_files(trees: list[Path]) -> frozenset[str]:
    """The hyperparameters files the main project's stack files name in any of `trees`, and the default."""
    from components.config.training import DEFAULT_HYPERPARAMETERS

    found = {DEFAULT_HYPERPARAMETERS}
    for tree in trees:
        for path in _stack_dir(tree).glob("Pulumi.*.yaml"):
            text = path.read_text(errors="replace")
            try:
                found.update(values_under(yaml.load(text, Loader=YAML_LOADER), ("hyperparameters",), str))
            except yaml.YAMLError:  # the strict reader may still read it: take every line that names one
                found.update(line.split(":", 1)[1].strip().strip("\"'") for line in text.splitlines()
                             if line.strip().startswith("hyperparameters:"))
    return frozenset(posixpath.normpath(name) for name in found if name)


def vpc_cidrs_changed(base_tree: Path, head_tree: Path, changed: list[str]) -> frozenset[str]:
    """The environments whose network.vpcCidr, as a sibling platform stack reads it, differs."""
    from components.config.sibling_stacks import sibling_vpc_cidrs

    def view(tree: Path, environment: str) -> list[str]:
        found, _ = sibling_vpc_cidrs(_stack_dir(tree), project=MAIN_PROJECT, stack="", environments=(environment,))
        return [str(sibling.cidr) for sibling in found]

    def platform_label(path: str) -> str | None:
        label = path.removeprefix(f"{MAIN_STACK_DIR}/Pulumi.").removesuffix(".yaml")
        team, environment = stack_kind(label)
        return label if path != label and team is None and environment else None

    # Every platform stack file counts, a further region's (prod-usw2) as much as its environment's.
    return frozenset(label for path in changed if (label := platform_label(path))
                     and view(base_tree, stack_kind(label)[1] or label) != view(head_tree, stack_kind(label)[1] or label))


@dataclass
class Selection:
    replanned: dict[str, list[str]]
    """Stack label -> why it is planned at both refs."""
    reused: list[str]
    """Labels whose inputs are the same at both refs: their head plan is their base plan, not made."""
    everything: bool = False
    """--all: every stack planned at both refs."""
    cached: list[str] = field(default_factory=list)
    """Replanned labels whose base plan an earlier diff against the same base made (offline/plan_cache.py)."""


def select_stacks(base_tree: Path, head_tree: Path, changed: list[str], stacks: list[str], everything: bool) -> Selection:
    labels = sorted(set(tree_labels(base_tree)) | set(tree_labels(head_tree)))
    wanted = [label for label in labels if not stacks or label.startswith(f"{BOOTSTRAP_DIR}/") or label in stacks]
    if everything:
        return Selection(replanned={label: ["`--all`"] for label in wanted}, reused=[], everything=True)
    facts = ChangeFacts(hyperparameter_files=hyperparameter_files([base_tree, head_tree]),
                        vpc_cidr_changed=vpc_cidrs_changed(base_tree, head_tree, changed))
    affected = affected_stacks(changed, labels, facts)
    return Selection(replanned={label: affected[label] for label in wanted if label in affected},
                     reused=[label for label in wanted if label not in affected])


# --- the summary --------------------------------------------------------------------------------

def _short(value: Any) -> str:
    if value is _ABSENT:
        return "(none)"
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    text = text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def _changed_parts(old: str, new: str) -> tuple[str, str]:
    """Two long texts cut to the part where they differ, with a few characters of context."""
    prefix = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    suffix = next((i for i, (a, b) in enumerate(zip(reversed(old), reversed(new), strict=False)) if a != b),
                  min(len(old), len(new)))
    suffix = min(suffix, len(old) - prefix, len(new) - prefix)
    start = max(0, prefix - CONTEXT_CHARS)

    def cut(text: str) -> str:
        end = len(text) - max(0, suffix - CONTEXT_CHARS)
        return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
    return cut(old), cut(new)


def _change_line(change: Change) -> str:
    old, new = change.old, change.new
    if isinstance(old, str) and isinstance(new, str) and max(len(old), len(new)) > MAX_VALUE_CHARS:
        old, new = _changed_parts(old, new)
    return f"`{change.path}`: {_short(old)} → {_short(new)}"


def _first_the_meaningful(changes: list[Change]) -> list[Change]:
    """What a reviewer reads first (the pool, the nodes, the image, GPUs), then the rest, in order."""
    return sorted(changes, key=lambda c: not any(word in c.path for word in MEANINGFUL_PATH_WORDS))


def _manifest_changes(changes: list[Change]) -> str:
    shown = "; ".join(_change_line(c) for c in _first_the_meaningful(changes)[:MAX_PATHS_PER_RESOURCE])
    return shown + (f" … and {len(changes) - MAX_PATHS_PER_RESOURCE} more" if len(changes) > MAX_PATHS_PER_RESOURCE else "")


def _changes_cell(changes: list[Change]) -> str:
    changes = _first_the_meaningful(changes)
    shown = [_change_line(c) for c in changes[:MAX_PATHS_PER_RESOURCE]]
    if len(changes) > MAX_PATHS_PER_RESOURCE:
        shown.append(f"… and {len(changes) - MAX_PATHS_PER_RESOURCE} more")
    return "<br>".join(shown)


def _type_name(type_token: str) -> str:
    return type_token.rsplit(":", 1)[-1] if ":" in type_token else type_token


def _renamed_cell(key: Key, base_key: Key) -> str:
    return f"`{key[0]}`, renamed (alias) from `{base_key[0]}`, not replaced"


def render_stack(stack: str, diff: ResourceDiff, head: StackPlan, costs: tuple[CostFigures, CostFigures] | None) -> list[str]:
    counts = [f"{len(diff.added)} to add", f"{len(diff.changed)} to change", f"{len(diff.removed)} to remove"]
    manifest_count = len(diff.manifests_added) + len(diff.manifests_changed) + len(diff.manifests_removed)
    if diff.renamed:
        counts.append(f"{len(diff.renamed)} renamed (alias)")
    lines = [f"### `{stack}`: {', '.join(counts)}; {manifest_count} Kubernetes manifests changed", ""]
    replacements: list[str] = []
    if diff.added or diff.removed or diff.changed or diff.renamed:
        lines += ["| | resource | type | changed inputs |", "|---|---|---|---|"]
        for key in diff.added:
            lines.append(f"| + | `{key[2]}` | {_type_name(key[0])} | |")
        for key, base_key in diff.renamed.items():
            if key not in diff.changed:
                lines.append(f"| → | `{key[2]}` | {_renamed_cell(key, base_key)} | |")
        for key, changes in diff.changed.items():
            forcing = replacement_paths(key[0], changes)
            mark = "±" if forcing else "~"
            if forcing:
                replacements.append(f"`{key[2]}` ({_type_name(key[0])}): {', '.join(f'`{p}`' for p in forcing)}")
            type_cell = _renamed_cell(key, diff.renamed[key]) if key in diff.renamed else _type_name(key[0])
            lines.append(f"| {mark} | `{key[2]}` | {type_cell} | {_changes_cell(changes)} |")
        for key in diff.removed:
            lines.append(f"| - | `{key[2]}` | {_type_name(key[0])} | |")
        lines.append("")
    for name, changes in diff.manifests_changed.items():
        type_token = _manifest_type(head, name)
        forcing = replacement_paths(type_token, changes) if type_token else []
        if forcing:
            replacements.append(f"manifest `{name}`: {', '.join(f'`{p}`' for p in forcing)}")
    if replacements:
        lines += ["**Replaced, not updated** (the provider deletes and creates these):", ""]
        lines += [f"- {entry}" for entry in replacements] + [""]
    if rolled := rolled_gpu_node_groups(diff, head):
        lines += ["**Rolls GPU node groups** (every node drained and replaced; a running gang on reserved or "
                  "on-demand capacity holds the update with its PodDisruptionBudget until it fails: hold the queue "
                  "first, docs/gpu-fabric-and-capacity.md \"Updates that do not drain running gangs\"):", ""]
        lines += [f"- `{name}`: {'; '.join(why)}" for name, why in rolled.items()] + [""]
    if manifest_count:
        lines += ["<details><summary>Kubernetes manifests</summary>", ""]
        lines += [f"- added `{name}`" for name in diff.manifests_added]
        lines += [f"- changed `{name}`: {_manifest_changes(changes)}" for name, changes in diff.manifests_changed.items()]
        lines += [f"- removed `{name}`" for name in diff.manifests_removed]
        lines += ["", "</details>", ""]
    if costs:
        lines += _cost_lines(*costs)
    return lines


def rolled_gpu_node_groups(diff: ResourceDiff, head: StackPlan) -> dict[str, list[str]]:
    """GPU node group name -> what in this change rolls its nodes (each is drained and replaced)."""
    rolled: dict[str, list[str]] = {}
    for key, record in head.resources.items():
        inputs = record.get("inputs") or {}
        if key[0] != NODE_GROUP or "NVIDIA" not in str(inputs.get("amiType", "")):
            continue
        changes = diff.changed.get(key, [])
        why = [f"`{c.path}`" for c in changes if any(_path_covers(p, c.path) for p in ROLLING_NODE_GROUP_INPUTS)]
        if replacement_paths(key[0], changes):
            why.append("replaced")
        template_changes = diff.changed.get((LAUNCH_TEMPLATE, key[1], key[2].removesuffix("-nodegroup") + "-lt"), [])
        if template_changes:
            why.append(f"its launch template: {', '.join(f'`{c.path}`' for c in template_changes[:3])}")
        if why:
            rolled[str(inputs.get("nodeGroupName") or key[2])] = why
    return rolled


def _manifest_type(plan: StackPlan, filename: str) -> str | None:
    manifest = plan.manifests.get(filename) or {}
    api_version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{kind}" if kind else None


def _cost_lines(base: CostFigures, head: CostFigures) -> list[str]:
    lines = ["| cost (USD) | before | after | delta |", "|---|---:|---:|---:|"]
    for label in head:
        old, new = base.get(label, 0.0), head[label]
        lines.append(f"| {label} | {old:,.2f} | {new:,.2f} | {new - old:+,.2f} |")
    return [*lines, ""]


@dataclass
class Report:
    markdown: str
    changed_stacks: list[str]
    failed: bool


def build_report(base_label: str, head_label: str, base: TreePlans, head: TreePlans,
                 cost_of: Callable[[list[dict[str, Any]]], CostFigures], selection: Selection | None = None) -> Report:
    """The comment. `selection`: the stacks reused (no plan at either ref: unchanged by construction)
    and why the others were replanned, said after the diff; the diff itself reads as a full replan's."""
    lines = [f"## Offline plan diff: {base_label} → {head_label}", ""]
    failures = {**{f"{k} at {base_label}": v for k, v in base.failures.items()},
                **{f"{k} at {head_label}": v for k, v in head.failures.items()}}
    for where, why in failures.items():
        lines += [f"**{where} did not plan:**", "", "```", why, "```", ""]
    changed, unchanged = [], []
    reused = set(selection.reused) if selection else set()
    for stack in sorted(set(base.stacks) | set(head.stacks) | reused):
        if stack in reused:
            unchanged.append(stack)
            continue
        project = _project_of(stack)
        if (stack not in base.stacks and project in base.failures) or (stack not in head.stacks and project in head.failures):
            continue  # it did not plan on one side (reported above), so it is neither added nor removed
        empty = StackPlan(resources={}, manifests={})
        old = load_stack_plan(base.stacks[stack]) if stack in base.stacks else empty
        new = load_stack_plan(head.stacks[stack]) if stack in head.stacks else empty
        diff = diff_stack(old, new)
        if diff.empty:
            unchanged.append(stack)
            continue
        changed.append(stack)
        costs = None
        unpriced = ""
        if not stack.startswith(f"{BOOTSTRAP_DIR}/"):
            try:
                costs = (cost_of(list(old.resources.values())), cost_of(list(new.resources.values())))
            except ValueError as error:  # prices.UnpricedRegionError: the stack's region has no price table
                unpriced = f"_Cost delta: not priced: {error}_"
        lines += render_stack(stack, diff, new, costs)
        if unpriced:
            lines += [unpriced, ""]
    if not changed and not failures:
        lines.append(f"no changes in the {len(unchanged)} stacks' offline plans.")
    elif unchanged:
        lines.append(f"No changes: {', '.join(f'`{s}`' for s in unchanged)}.")
    if selection is not None:
        lines += ["", *selection_lines(selection)]
    return Report(markdown="\n".join(lines).rstrip() + "\n",
                  changed_stacks=[s for s in changed if not s.startswith(f"{BOOTSTRAP_DIR}/")], failed=bool(failures))


SELECTION_SUMMARY = "<details><summary>Stacks planned"
CACHE_NOTE = "PLAN_DIFF_CACHE=0 plans it again"
MAX_REASONS = 3


def selection_lines(selection: Selection) -> list[str]:
    """Which stacks were planned at both refs and why, and which were reused."""
    total = len(selection.replanned) + len(selection.reused)
    lines = [f"{SELECTION_SUMMARY}: {len(selection.replanned)} of {total}</summary>", ""]
    if selection.everything:
        lines.append("- every stack, at both refs (`--all` / `PLAN_DIFF_ALL=1`)")
    for label, reasons in ([] if selection.everything else selection.replanned.items()):
        more = f"; and {len(reasons) - MAX_REASONS} more" if len(reasons) > MAX_REASONS else ""
        lines.append(f"- replanned `{label}`: {'; '.join(reasons[:MAX_REASONS])}{more}")
    if selection.cached:
        lines.append(f"- base plan kept from an earlier run against the same base (same tree, Python environment "
                     f"and day; {CACHE_NOTE}): {', '.join(f'`{label}`' for label in selection.cached)}")
    if selection.reused:
        lines.append(f"- reused, not replanned (no file their plans read changed, so the head plan is the base plan): "
                     f"{', '.join(f'`{label}`' for label in selection.reused)}")
    return [*lines, "", "</details>"]


def truncate(markdown: str, max_chars: int) -> str:
    if len(markdown) <= max_chars:
        return markdown
    note = "\n\n_… cut here: the whole diff is in the job's log and summary._\n"
    return markdown[:max_chars - len(note)].rsplit("\n", 1)[0] + note


# --- command line -------------------------------------------------------------------------------

def stacks_of_environments(stacks: list[str], environments: list[str]) -> list[str]:
    """The stacks (platform `<env>`, team `team-<team>-<env>`) that belong to one of `environments`;
    all of them when `environments` is empty."""
    if not environments:
        return stacks
    return [stack for stack in stacks if stack in environments
            or (stack.startswith("team-") and stack.rsplit("-", 1)[-1] in environments)]


def commit_label(commit: str, ref: str) -> str:
    return f"`{ref}` ({commit[:12]})" if ref != commit else f"`{commit[:12]}`"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plan-diff", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("base", metavar="BASE_REF")
    parser.add_argument("head", metavar="HEAD_REF", nargs="?", help="default: the working tree as it is")
    parser.add_argument("--stack", action="append", default=[], help="only these stacks of the main project")
    parser.add_argument("--all", action="store_true", dest="everything",
                        help=f"plan every stack at both refs, not only those the change can affect (or {ALL_VARIABLE}=1)")
    parser.add_argument("--keep-plans", type=Path, metavar="DIR",
                        help="write the plans made to DIR/base and DIR/head (a new or empty directory) and keep them")
    parser.add_argument("--changed-stacks-file", type=Path,
                        help="write the main project's changed stacks here as a JSON list (CI's preview matrix)")
    parser.add_argument("--changed-stacks-environment", action="append", default=[], metavar="ENVIRONMENT",
                        help="only the changed stacks of this environment go into --changed-stacks-file (repeatable)")
    parser.add_argument("--max-chars", type=int, default=DEFAULT_MAX_CHARS, help="cut the summary to this length")
    parser.add_argument("--fill-cache", action="store_true",
                        help=f"only plan every stack at BASE_REF into the base-plan cache ({CACHE_VARIABLE}, "
                             "default build/plan-diff-cache) for later diffs against it")
    return parser


@contextmanager
def _head_tree(head_commit: str | None, work: Path) -> Iterator[Path]:
    if head_commit is None:
        yield ROOT
    else:
        with worktree(head_commit, work, "head") as tree:
            yield tree


def _plans_dir(keep: Path | None, work: Path) -> Path:
    if keep is None:
        return work
    if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        raise PlanDiffError(f"--keep-plans {keep}: exists and is not an empty directory. Fix: name a new or empty one")
    return keep


def diff_refs(args: argparse.Namespace, everything: bool) -> Report:
    """Plan what the change can affect (everything: every stack) at both refs, concurrently, and compare."""
    base_commit = resolve(args.base)
    head_commit = resolve(args.head) if args.head else None
    cost_of = load_cost_model()
    changed = changed_paths(base_commit, head_commit)
    head_label = commit_label(head_commit, args.head) if head_commit else "the working tree"
    with tempfile.TemporaryDirectory(prefix="plan-diff-") as scratch:
        work = Path(scratch)
        plans = _plans_dir(args.keep_plans, work)
        with worktree(base_commit, work, "base") as base_tree, _head_tree(head_commit, work) as head_tree:
            selection = select_stacks(base_tree, head_tree, changed, args.stack, everything)
            unknown = sorted(set(args.stack) - set(selection.replanned) - set(selection.reused))
            if unknown:
                raise PlanDiffError(f"--stack {', '.join(unknown)}: no such stack at either ref. Fix: name a stack of "
                                    f"{MAIN_STACK_DIR}/ (Pulumi.<stack>.yaml)")
            only = set(selection.replanned)
            # --all is the full replan, trusting no shortcut: no kept plan either.
            cache = None if everything else base_plan_cache(base_commit)
            kept = {label: entry for label in sorted(only) if cache and (entry := cache.get(label))}
            selection.cached = sorted(kept)
            side_dir = {side: plans / f"plans-{side}" if args.keep_plans is None else plans / side for side in ("base", "head")}
            started = [start_plans(base_tree, side_dir["base"], args.stack, only - set(kept)),
                       start_plans(head_tree, side_dir["head"], args.stack, only)]
            base, head = (finish_plans(running) for running in started)
        if cache is not None:
            for label, directory in base.stacks.items():
                if label not in kept and _project_of(label) not in base.failures:
                    cache.put(label, directory)
            cache.prune()
        base.stacks.update(_kept_plans(kept, side_dir["base"] if args.keep_plans else None))
        return build_report(commit_label(base_commit, args.base), head_label, base, head, cost_of, selection)


def base_plan_cache(commit: str) -> BasePlanCache | None:
    return BasePlanCache.from_environment(DEFAULT_CACHE, git("rev-parse", f"{commit}^{{tree}}"))


def fill_cache(ref: str) -> int:
    """Plan every stack of `ref` into the base-plan cache (CI's job on main: the pull requests
    based on that commit read them, and never write the cache themselves)."""
    commit = resolve(ref)
    cache = base_plan_cache(commit)
    if cache is None:
        raise PlanDiffError(f"--fill-cache: {CACHE_VARIABLE} turns the cache off. Fix: unset it or name a directory")
    with tempfile.TemporaryDirectory(prefix="plan-diff-") as scratch, worktree(commit, Path(scratch), "base") as tree:
        plans = finish_plans(start_plans(tree, Path(scratch) / "plans", []))
        for label, directory in plans.stacks.items():
            if _project_of(label) not in plans.failures:
                cache.put(label, directory)
    cache.prune()
    for project, why in plans.failures.items():
        print(f"plan-diff: {project} did not plan at {commit[:12]}: {why}", file=sys.stderr)
    print(f"plan-diff: kept the base plans of {len(plans.stacks)} stacks of {commit[:12]} in {cache.root / cache.key}")
    return 1 if plans.failures else 0


def _project_of(label: str) -> str:
    return f"{BOOTSTRAP_DIR}/" if label.startswith(f"{BOOTSTRAP_DIR}/") else MAIN_PROJECT


def _kept_plans(kept: dict[str, Path], keep_dir: Path | None) -> dict[str, Path]:
    """The cached base plans, copied where --keep-plans keeps the base plans (main/<stack>, bootstrap/<stack>)."""
    if keep_dir is None:
        return kept
    copied = {}
    for label, entry in kept.items():
        target = keep_dir / label_dir(label)
        shutil.copytree(entry, target, ignore=shutil.ignore_patterns(COMPLETE))
        copied[label] = target
    return copied


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    everything = args.everything or os.environ.get(ALL_VARIABLE, "") not in ("", "0")
    try:
        if args.fill_cache:
            return fill_cache(args.base)
        report = diff_refs(args, everything)
    except PlanDiffError as error:
        print(f"plan-diff: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(truncate(report.markdown, args.max_chars))
    if args.changed_stacks_file:
        changed = stacks_of_environments(report.changed_stacks, args.changed_stacks_environment)
        try:
            args.changed_stacks_file.write_text(json.dumps(changed) + "\n")
        except OSError as error:
            print(f"plan-diff: --changed-stacks-file {args.changed_stacks_file}: cannot be written "
                  f"({error.strerror or type(error).__name__}). Fix: name a file in an existing directory",
                  file=sys.stderr)
            return 2
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
