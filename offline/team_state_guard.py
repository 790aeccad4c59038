"""The deploy's guard against a team stack's `up` deleting what the platform now owns
(docs/team-stacks.md, "Moving a team's ClusterQueue to the platform", "Moving a team's namespace
to the platform", "Moving a team's volumes to the platform").

    .venv/bin/python scripts/_team_state_guard.py STACK STATE_JSON

STATE_JSON is `pulumi stack export --stack STACK`'s output: an apitype.UntypedDeployment whose
`deployment.resources` each carry `urn`, `type` and, when set, `retainOnDelete` (pulumi/pulumi
sdk/go/common/apitype/core.go, `ResourceV3`). A team stack of this release makes none of the
types below: a team stack deployed before the platform took them over still holds them, and its
next `up` deletes each one it holds without `retainOnDelete` (the resource left the program).
Deleting the Namespace deletes everything in it: the team's jobs, claims and secrets. The guard
exits 2 naming the stack, the URNs and the step of the doc that lets go of them; else 0.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DOC = "docs/team-stacks.md"
# Each type a team stack let go of, with the doc section and step that marks it retainOnDelete
# (or, for the access point, moves it to the platform stack's state).
RELEASED_TYPES: Mapping[str, str] = {
    "kubernetes:core/v1:Namespace": "\"Moving a team's namespace to the platform\", step 1",
    "kubernetes:core/v1:ResourceQuota": "\"Moving a team's namespace to the platform\", step 1",
    "kubernetes:core/v1:LimitRange": "\"Moving a team's namespace to the platform\", step 1",
    "kubernetes:core/v1:PersistentVolume": "\"Moving a team's volumes to the platform\", step 2",
    "aws:efs/accessPoint:AccessPoint": "\"Moving a team's volumes to the platform\", step 1",
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": "\"Moving a team's ClusterQueue to the platform\", step 2",
}


def unreleased(state: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(URN, type) of each resource of a released type that the next `up` would delete."""
    resources = (state.get("deployment") or {}).get("resources") or []
    return [(resource["urn"], resource["type"]) for resource in resources
            if resource.get("type") in RELEASED_TYPES and resource.get("retainOnDelete") is not True]


def refusal(stack: str, found: Sequence[tuple[str, str]]) -> str:
    steps = sorted({RELEASED_TYPES[kind] for _, kind in found})
    urns = "".join(f"\n  {urn}" for urn, _ in found)
    return (f"team stack {stack} still holds objects the platform now owns, without retainOnDelete: its "
            f"`pulumi up` would delete them (deleting the Namespace deletes the team's jobs, claims and "
            f"secrets):{urns}\nFix: {DOC}, {'; '.join(steps)}, then run this deploy again.")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: _team_state_guard.py STACK STATE_JSON", file=sys.stderr)
        return 2
    stack, path = args
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        print(f"deploy-environment: cannot read the exported state of team stack {stack} ({path}): {error}. "
              f"Fix: check that `pulumi stack export --stack {stack}` works with this role.", file=sys.stderr)
        return 2
    found = unreleased(state)
    if not found:
        return 0
    print(f"deploy-environment: {refusal(stack, found)}", file=sys.stderr)
    return 2
