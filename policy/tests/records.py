"""Plan records for minimal cases, shaped as scripts/plan.py writes them."""

from __future__ import annotations

import copy
import json
from typing import Any

PROJECT = "gpu-training"
AWS_PROVIDER = "pulumi:providers:aws"


def urn(type_: str, name: str, stack: str = "dev") -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def resource(type_: str, name: str, inputs: dict[str, Any] | None = None, *, stack: str = "dev",
             provider: str | None = "aws", depends: dict[str, list[dict[str, Any]]] | None = None,
             custom: bool = True) -> dict[str, Any]:
    """One registered resource; `depends` maps an input to the records it was computed from."""
    return {
        "type": type_,
        "name": name,
        "urn": urn(type_, name, stack),
        "custom": custom,
        "parent": None,
        "provider": provider,
        "inputs": inputs or {},
        "propertyDependencies": {key: [r["urn"] for r in records] for key, records in (depends or {}).items()},
    }


def cost_tags(stack: str = "dev") -> dict[str, str]:
    environment = stack.rsplit("-", 1)[-1]
    tags = {"project": PROJECT, "environment": environment, "stack": stack, "cost-center": "ml-platform",
            "managed-by": "pulumi"}
    if stack.startswith("team-"):
        tags["team"] = stack.split("-")[1]
    return tags


def aws_provider(stack: str = "dev", tags: dict[str, str] | None = None) -> dict[str, Any]:
    """The stack's AWS provider as the Python SDK registers it: nested inputs as JSON text."""
    default_tags = cost_tags(stack) if tags is None else tags
    return resource(AWS_PROVIDER, "aws", {"defaultTags": json.dumps({"tags": default_tags}), "region": "us-east-1"},
                    stack=stack, provider=None)


def plan(*records: dict[str, Any], stack: str = "dev", tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A plan with the stack's AWS provider, a Kubernetes provider `k8s`, and `records`."""
    k8s = resource("pulumi:providers:kubernetes", "k8s", {"kubeconfig": "{}"}, stack=stack, provider=None)
    return [aws_provider(stack, tags), k8s, *records]


def with_changes(records: list[dict[str, Any]], *, add: tuple[dict[str, Any], ...] = (),
                 drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A copy of a real plan with records added and the records of the URNs in `drop` removed."""
    kept = [copy.deepcopy(r) for r in records if r["urn"] not in drop]
    return kept + list(add)


def find(records: list[dict[str, Any]], type_: str, name: str) -> dict[str, Any]:
    matches = [r for r in records if r["type"] == type_ and r["name"] == name]
    assert len(matches) == 1, f"the plan has {len(matches)} {type_} named {name}"
    return matches[0]


def policy_document(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
