"""Every policy document of every stack: no Allow grants `*` where a narrower grant exists.

Found generically: any input string of any resource that parses as JSON with a `Statement` is a
policy (role trust and inline policies, key policies, bucket and file-system policies, ...).
An Allow may not use `*` or `service:*` actions, a bare `*` resource, NotAction or NotResource,
unless it is listed below with the reason. Deny statements may be as broad as they like.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from iam_eval import ALLOW, DENY, evaluate
from stack_configs import MANIFEST_STACKS, PLATFORM_STACKS, ROOT

from bootstrap import policies as bootstrap_policies
from components.cluster.load_balancer_controller import documented_policy
from components.facts.iam_actions import RESOURCE_STAR_ONLY_ACTIONS
from offline.plan import synthesize

# Every stack file: platform stacks and team stacks.
ALL_STACKS = MANIFEST_STACKS

# (resource name, statement Sid) -> why this broad Allow is the narrowest that works.
JUSTIFIED = {
    ("cluster-autoscaler-policy", "ScaleOnlyThisClustersGroups"):
        "Auto Scaling group ARNs embed a generated id; the statement is narrowed instead by the "
        "condition on the cluster's ownership tag, as the Cluster Autoscaler documents.",
    ("observability-alerts-key", "CloudWatchAlarmsPublish"):
        "In a key policy `*` is the key itself; CloudWatch may only decrypt/generate data keys, "
        "and only for this account (aws:SourceAccount).",
    ("observability-alerts-key", "BudgetsPublish"):
        "In a key policy `*` is the key itself; AWS Budgets may only decrypt/generate data keys "
        "to publish budget alerts to the encrypted topic, and only for this account (aws:SourceAccount).",
    ("logs-key", "CloudWatchLogsOfThisEnvironment"):
        "In a key policy `*` is the key itself; CloudWatch Logs of this region may use it only for "
        "this environment's log groups (kms:EncryptionContext:aws:logs:arn).",
    ("storage-buckets-data-key", "FsxForLustreReadsTheDatasetsBucket"):
        "In a key policy `*` is the key itself; only FSx's S3 access roles of this account, only "
        "through S3, only for the datasets bucket (the statement the FSx guide prescribes).",
}

# Policies a vendor documents for its component, used verbatim: their `*` resources are the
# vendor's (most are narrowed by a condition on the controller's own tags). Exempt only while the
# planned document is exactly the stored one of the pinned version.
VENDOR_DOCUMENTED = {
    "load-balancer-controller-policy":
        "the AWS Load Balancer Controller's docs/install/iam_policy.json of the chart's app version "
        "(components/facts/aws_load_balancer_controller_iam_policy.json)",
}


def is_vendor_documented(resource: dict) -> bool:
    if resource["name"] not in VENDOR_DOCUMENTED:
        return False
    planned = json.loads(resource["inputs"]["policy"])
    return any(planned == documented_policy(partition) for partition in ("aws", "aws-us-gov", "aws-cn"))


def policies(value: Any, path: str = "") -> Iterator[tuple[str, dict]]:
    if isinstance(value, str) and '"Statement"' in value:
        try:
            document = json.loads(value)
        except json.JSONDecodeError:
            return
        if isinstance(document, dict) and "Statement" in document:
            yield path, document
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from policies(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from policies(item, f"{path}[{index}]")


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def is_key_policy_root_statement(resource: dict, statement: dict) -> bool:
    """A key policy's `kms:*` on `*` (this key) for its own account root: KMS's documented way to
    let IAM policies govern the key. Without it the key can become unmanageable."""
    principal = statement.get("Principal", {})
    principal = principal.get("AWS") if isinstance(principal, dict) else principal
    return (resource["type"] == "aws:kms/key:Key" and as_list(statement.get("Action")) == ["kms:*"]
            and as_list(statement.get("Resource")) == ["*"] and isinstance(principal, str)
            and principal.startswith("arn:aws:iam::") and principal.endswith(":root") and "Condition" not in statement)


def broad_grants(resource: dict, statement: dict) -> list[str]:
    if statement.get("Effect") != "Allow":
        return []
    problems = [f"uses {key}" for key in ("NotAction", "NotResource") if key in statement]
    actions = as_list(statement.get("Action", []))
    problems += [f"action {a}" for a in actions if a == "*" or a.endswith(":*")]
    if "Resource" in statement and "*" in as_list(statement["Resource"]) and not set(actions) <= RESOURCE_STAR_ONLY_ACTIONS:
        problems.append("resource *")
    return problems


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_no_allow_is_broader_than_needed(stack, plan_of):
    found, offenders = 0, []
    for resource in plan_of(stack).resources:
        for path, document in policies(resource["inputs"]):
            found += 1
            for statement in as_list(document["Statement"]):
                problems = broad_grants(resource, statement)
                if not problems or is_key_policy_root_statement(resource, statement):
                    continue
                if (resource["name"], statement.get("Sid")) in JUSTIFIED or is_vendor_documented(resource):
                    continue
                offenders.append(f"{resource['type']} {resource['name']} {path} Sid={statement.get('Sid')}: "
                                 f"{', '.join(problems)}")
    assert found >= (10 if stack in PLATFORM_STACKS else 2), "the policy finder found too few documents to be working"
    assert not offenders, "\n".join(offenders)


def test_the_justified_exceptions_are_still_needed(plan_of):
    """An exception whose statement is gone (or got narrower) must leave the list."""
    still_broad = set()
    for stack in ALL_STACKS:
        for resource in plan_of(stack).resources:
            for _, document in policies(resource["inputs"]):
                for statement in as_list(document["Statement"]):
                    if broad_grants(resource, statement):
                        still_broad.add((resource["name"], statement.get("Sid")))
    assert set(JUSTIFIED) <= still_broad


def test_the_checker_catches_broad_grants():
    role = {"type": "aws:iam/rolePolicy:RolePolicy", "name": "x"}
    key = {"type": "aws:kms/key:Key", "name": "k"}
    root = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "kms:*", "Resource": "*"}
    assert broad_grants(role, {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b"}) == ["action s3:*"]
    assert broad_grants(role, {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["*"]}) == ["resource *"]
    assert broad_grants(role, {"Effect": "Allow", "NotAction": ["iam:*"], "Resource": "arn:aws:s3:::b"}) == ["uses NotAction"]
    assert broad_grants(role, {"Effect": "Deny", "Action": "*", "Resource": "*"}) == []
    assert broad_grants(role, {"Effect": "Allow", "Action": ["ec2:DescribeImages"], "Resource": "*"}) == []
    assert is_key_policy_root_statement(key, root)
    assert not is_key_policy_root_statement(role, root)
    assert not is_key_policy_root_statement(key, {**root, "Principal": {"AWS": "*"}})


def test_the_trainer_image_role_grants_nothing_broad():
    """The bootstrap's role for main.yml's image job (GitHub-hosted, third-party build steps) is held
    to the stacks' rule: its one `*` is ECR's login token, which authorizes on no resource."""
    plan = synthesize("bootstrap", project_dir=ROOT / "bootstrap")
    name = bootstrap_policies.ci_role_name("gpu-training", "image", "dev")
    record = next(r for r in plan.of_type("aws:iam/role:Role") if r["inputs"]["name"] == name)
    inline = next(r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r["name"] == record["name"])
    statements = as_list(json.loads(inline["inputs"]["policy"])["Statement"])
    assert [problem for statement in statements for problem in broad_grants(inline, statement)] == []
    assert any(as_list(s["Resource"]) == ["*"] for s in statements), "the login token needs Resource *"
    # Nothing attached beside the inline document: it is the role's whole grant.
    assert all(a["inputs"]["role"] != name for a in plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment"))


def key_use(env: str, principal_tags: dict[str, str]) -> dict[str, str]:
    """A request to use a key of the stack (tagged like every resource of it) by a principal with these tags."""
    return {"aws:ResourceTag/environment": env, "aws:ResourceTag/project": "gpu-training",
            **{f"aws:PrincipalTag/{key}": value for key, value in principal_tags.items()}}


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_every_key_names_its_users_by_environment_and_project(stack, plan_of):
    """Every customer key of every stack refuses, in its own policy, a role of another environment
    or project; its own roles, AWS services and people stay with IAM (components/common/kms.py)."""
    env = stack.rsplit("-", 1)[-1]
    other = "dev" if env != "dev" else "prod"
    keys = plan_of(stack).of_type("aws:kms/key:Key")
    assert keys
    for key in keys:
        document = json.loads(key["inputs"]["policy"])
        for action in ("kms:Decrypt", "kms:GenerateDataKey", "kms:CreateGrant"):
            refused = [key_use(env, {"environment": other, "project": "gpu-training"}),
                       key_use(env, {"environment": env, "project": "other-project"})]
            assert all(evaluate(document, action, "*", c) == DENY for c in refused), f"{key['name']}: {action}"
            for allowed in (key_use(env, {"environment": env, "project": "gpu-training"}), key_use(env, {})):
                assert evaluate(document, action, "*", allowed) == ALLOW, f"{key['name']}: {action} {allowed}"
