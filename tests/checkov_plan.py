"""An offline plan (resources.json) as the Terraform plan JSON checkov reads (`--framework
terraform_plan`), so checkov's AWS checks run over what the stacks create.

pulumi-aws resources are Terraform's: `aws:s3/bucket:Bucket` is `aws_s3_bucket` (EC2's types drop
the module: `aws:ec2/vpc:Vpc` is `aws_vpc`), inputs are camelCase where Terraform's attributes are
snake_case, and Pulumi names repeated blocks in the plural (`rules`) where Terraform writes the
block's singular (`rule`). A value that is another planned resource's id (the offline plan's ids
are `<name>-id`) becomes a reference in `configuration`, which checkov's graph checks follow (a
bucket and its logging, a security group and what it is attached to).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def terraform_type(token: str) -> str | None:
    match = re.fullmatch(r"aws:([a-zA-Z0-9]+)/[a-zA-Z0-9]+:([A-Za-z0-9]+)", token)
    if not match:
        return None
    module, kind = match.group(1), snake(match.group(2))
    if module == "ec2":
        return f"aws_{kind}"
    if module == "cloudwatch" and kind.startswith("log_"):
        return f"aws_cloudwatch_{kind}"
    return f"aws_{module}_{kind}"


def singular(key: str, value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict):
        if key.endswith("ies"):
            return key[:-3] + "y"
        if key.endswith("sses"):
            return key[:-2]
        if key.endswith("s"):
            return key[:-1]
    return key


def block(value: Any) -> Any:
    """Nested objects as Terraform's one-element block lists."""
    if isinstance(value, dict):
        return [{singular(snake(k), v): block(v) for k, v in value.items()}] if value else []
    if isinstance(value, list):
        return [block(v)[0] if isinstance(v, dict) else block(v) for v in value]
    return value


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


def _attributes(inputs: dict[str, Any]) -> dict[str, Any]:
    """Top-level inputs; tags and policy documents (JSON text) stay as they are."""
    return {singular(snake(k), v): v if k == "tags" or isinstance(v, str) else block(v) for k, v in inputs.items()}


def _references(resource: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """`configuration` expressions: each attribute that names another planned resource."""
    expressions = {}
    for key, value in list(resource["values"].items()):
        targets = sorted({ids[v] for v in strings(value) if v in ids and ids[v] != resource["address"]})
        if not targets or key in ("name", "tags"):
            continue
        expressions[key] = {"references": [ref for target in targets for ref in (f"{target}.id", target)]}
        if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            del resource["values"][key]   # a plain reference: checkov puts the reference in its place
    return expressions


def terraform_plan(plan_records: list[dict[str, Any]]) -> dict[str, Any]:
    """The plan's resources (offline/plan.py's records, as in resources.json) as a Terraform plan."""
    records = [r for r in plan_records if r.get("custom") and terraform_type(r["type"])]
    resources, by_name = [], {}
    for record in records:
        kind, name = terraform_type(record["type"]), re.sub(r"\W", "_", record["name"])
        resource = {"address": f"{kind}.{name}", "mode": "managed", "type": kind, "name": name,
                    "provider_name": "registry.terraform.io/hashicorp/aws", "values": _attributes(record["inputs"])}
        resources.append(resource)
        by_name.setdefault(record["name"], []).append(resource)
    # Resources of one component share its name (a bucket and its policy): an id is the main one's.
    ids = {f"{name}-id": min(group, key=lambda r: len(r["type"]))["address"] for name, group in by_name.items()}
    configuration = [{"address": r["address"], "mode": "managed", "type": r["type"], "name": r["name"],
                      "expressions": _references(r, ids)} for r in resources]
    return {"format_version": "1.1", "terraform_version": "1.6.0",
            "planned_values": {"root_module": {"resources": resources}},
            "resource_changes": [{"address": r["address"], "mode": "managed", "type": r["type"], "name": r["name"],
                                  "provider_name": r["provider_name"],
                                  "change": {"actions": ["create"], "before": None, "after": r["values"]}}
                                 for r in resources],
            "configuration": {"root_module": {"resources": configuration}}}
