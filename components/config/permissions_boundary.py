"""The top-level `iamPermissionsBoundary` key: the managed policy every IAM role of the stack
carries as permissions boundary.

    gpu-training:iamPermissionsBoundary: arn:aws:iam::111122223333:policy/gpu-training-boundary-prod

The bootstrap creates one per environment (`pulumi stack output permissionsBoundaryArns` in
bootstrap/) and its CI deploy roles create no role without it. Optional, for accounts that run
without the bootstrap; when set, every role gets it. A team stack takes its platform stack's.
"""

from __future__ import annotations

import re

from components.config.reader import Section
from components.facts.regions import ARN_PARTITION

KEY = "iamPermissionsBoundary"
# A customer or AWS managed policy (IAM identifiers: path and name of [\w+=,.@-], ASCII only).
POLICY_ARN = re.compile(r"arn:" + ARN_PARTITION + r":iam::(\d{12}|aws):policy/(?:[\w+=,.@-]+/)*(?P<name>[\w+=,.@-]{1,128})",
                        re.ASCII)
# The bootstrap's names (bootstrap/policies/names.py boundary_policy_name): <project>-boundary-<env>.
BOOTSTRAP_NAME = re.compile(r"(?P<project>.+)-boundary-(?P<environment>dev|staging|prod)")


def boundary_problem(arn: str, *, project: str, environment: str) -> str | None:
    """Why `arn` cannot be this stack's boundary, or None."""
    match = POLICY_ARN.fullmatch(arn)
    if not match:
        return "is not the ARN of an IAM managed policy"
    names = BOOTSTRAP_NAME.fullmatch(match["name"])
    if names and names["project"] == project and names["environment"] != environment:
        return (f"is the {names['environment']} environment's boundary; the deploy role of {environment} creates roles "
                f"only with {environment}'s")
    return None


def parse_permissions_boundary(root: Section, *, project: str, environment: str) -> str | None:
    """None when unset (Pulumi.yaml's default is the empty string: the engine requires a default
    for a typed key a stack may leave out)."""
    if root.data.get(KEY) == "":
        root.ignore(KEY)
        return None
    return root.optional_string(
        KEY, check=lambda arn: boundary_problem(arn, project=project, environment=environment),
        fix=f"use the bootstrap's permissionsBoundaryArns.{environment}, e.g. "
            f"arn:aws:iam::<account-id>:policy/{project}-boundary-{environment}, or remove the key")
