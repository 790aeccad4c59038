"""ARNs name the partition of the stack's region: a stack or a bootstrap planned in AWS GovCloud names no arn:aws: ARN."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GOV_REGION = "us-gov-west-1"


def gov_cloud_overrides() -> dict:
    """dev, moved to us-gov-west-1: its zones, and its principals and boundary in the aws-us-gov partition."""
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())["config"]

    def in_gov_cloud(value):
        return json.loads(json.dumps(value).replace("arn:aws:", "arn:aws-us-gov:"))

    # The pools pinned to a us-east-1 AZ ID (gpu-spot: its gangs stay in one zone) move to one of GovCloud's.
    pools = [{**pool, "availabilityZones": ["usgw1-az1"]} if "availabilityZones" in pool else pool
             for pool in config["gpu-training:nodePools"]]
    return {"region": GOV_REGION, "iamPermissionsBoundary": in_gov_cloud(config["gpu-training:iamPermissionsBoundary"]),
            "nodePools": pools,
            "network": {**config["gpu-training:network"], "availabilityZones": [f"{GOV_REGION}a", f"{GOV_REGION}b"]},
            "cluster": in_gov_cloud(config["gpu-training:cluster"])}


def test_a_gov_cloud_stack_names_only_gov_cloud_arns():
    from offline.plan import synthesize

    plan = synthesize("dev", overrides=gov_cloud_overrides())
    inputs = json.dumps([record["inputs"] for record in plan.resources])
    partitions = set(re.findall(r"\barn:([a-z-]*):", inputs))
    assert partitions == {"aws-us-gov"}, "ARNs of another partition: " + ", ".join(
        sorted(set(re.findall(r"\barn:aws:[^\"\\]{0,60}", inputs))))


def test_a_gov_cloud_bootstrap_names_only_gov_cloud_arns():
    from offline.plan import synthesize

    # Its team's member as IAM writes a GovCloud role's ARN: the registry refuses another partition's.
    members = ["arn:aws-us-gov:iam::111122223333:role/vision-researchers"]
    plan = synthesize("bootstrap", project_dir=ROOT / "bootstrap", overrides={
        "region": GOV_REGION, "teams": {"vision": {"repository": "example-org/vision-training", "members": members}}})
    inputs = json.dumps([record["inputs"] for record in plan.resources])
    partitions = set(re.findall(r"\barn:([a-z-]*):", inputs))
    assert partitions == {"aws-us-gov"}, "ARNs of another partition: " + ", ".join(
        sorted(set(re.findall(r"\barn:aws:[^\"\\]{0,60}", inputs))))
