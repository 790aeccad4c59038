"""Budgets as code: every stack's plan has its monthly Budget, filtered by its cost-allocation
tags and alerting the platform's topic, which lets AWS Budgets publish; prod must have one."""

from __future__ import annotations

import json

import pytest
from stack_configs import DELETE, MANIFEST_STACKS, PLATFORM_STACKS, PROJECT, environment_of, mutate, raw_config

from components.config import ConfigError, load_stack_config
from offline.plan import MOCK_ACCOUNT_ID, synthesize

PLATFORM_TOPIC = "arn:aws:mock:us-east-1:123456789012:topic/observability-alerts"


def load(stack: str, raw=None):
    return load_stack_config(raw or raw_config(stack), project=PROJECT, stack=stack)


def budget_of(plan) -> dict:
    (budget,) = plan.of_type("aws:budgets/budget:Budget")
    return budget["inputs"]


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_stack_has_its_budget_alerting_the_platform_topic(stack, plan_of):
    config = load(stack)
    budget = budget_of(plan_of(stack))
    assert budget["budgetType"] == "COST" and budget["timeUnit"] == "MONTHLY" and budget["limitUnit"] == "USD"
    assert budget["limitAmount"] == str(config.budget.monthly_limit_usd)
    assert budget["name"] == f"{config.name_prefix}-monthly"
    thresholds = [(n["notificationType"], n["threshold"]) for n in budget["notifications"]]
    assert thresholds == [("ACTUAL", p) for p in config.budget.actual_percent] + \
        [("FORECASTED", p) for p in config.budget.forecast_percent]
    # A team's budget alerts its platform's topic, as the platform's plan exports it.
    topic = plan_of(f"{config.environment}").outputs["alertTopicArn"] if config.team else \
        PLATFORM_TOPIC.replace("us-east-1", config.region)
    for notification in budget["notifications"]:
        assert notification["comparisonOperator"] == "GREATER_THAN"
        assert notification["thresholdType"] == "PERCENTAGE"
        assert notification["subscriberSnsTopicArns"] == [topic]


def test_the_prod_budget_thresholds(plan_of):
    budget = budget_of(plan_of("prod"))
    assert budget["limitAmount"] == "120000"
    assert [(n["notificationType"], n["threshold"]) for n in budget["notifications"]] == [
        ("ACTUAL", 50), ("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100)]


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_a_platform_budget_counts_its_environment(stack, plan_of):
    budget = budget_of(plan_of(stack))
    assert budget["costFilters"] == [{"name": "TagKeyValue", "values": [f"user:environment${environment_of(stack)}"]}]
    assert "filterExpression" not in budget


def test_a_team_budget_counts_its_team_in_its_environment_only(plan_of):
    budget = budget_of(plan_of("team-vision-prod"))
    # Both tags at once: a TagKeyValue filter with two values would OR them.
    assert budget["filterExpression"] == {"ands": [
        {"tags": {"key": "environment", "values": ["prod"], "matchOptions": ["EQUALS"]}},
        {"tags": {"key": "team", "values": ["vision"], "matchOptions": ["EQUALS"]}},
    ]}
    assert budget["metrics"] == "UnblendedCost" and "costFilters" not in budget


@pytest.mark.parametrize("stack", [*PLATFORM_STACKS, "team-vision-prod"])
def test_stacks_leave_tag_activation_to_the_bootstrap_by_default(stack, plan_of):
    """Activation fails for a key AWS has not seen in billing data yet and in Organizations member
    accounts: a stack's first automatic deploy must not depend on it (the bootstrap activates them)."""
    assert not plan_of(stack).of_type("aws:costexplorer/costAllocationTag:CostAllocationTag")


@pytest.mark.parametrize(("stack", "keys"), [("dev", {"environment", "cost-center"}), ("team-vision-prod", {"team"})])
def test_a_stack_may_still_activate_the_tags_it_applies_and_never_deactivates_them(stack, keys):
    raw = mutate(raw_config(stack), "budget.activateCostAllocationTags", True)
    plan = synthesize(stack, overrides={"budget": raw["gpu-training:budget"]})
    tags = plan.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag")
    assert {t["inputs"]["tagKey"] for t in tags} == keys
    # Activation is account-wide: destroying one stack must not switch it off for the others.
    assert all(t["inputs"]["status"] == "Active" and t.get("retainOnDelete") is True for t in tags)
    assert plan.of_type("aws:budgets/budget:Budget")


def test_budgets_may_publish_to_the_encrypted_alert_topic(plan_of):
    plan = plan_of("prod")
    (policy,) = plan.of_type("aws:sns/topicPolicy:TopicPolicy")
    statements = {s["Sid"]: s for s in json.loads(policy["inputs"]["policy"])["Statement"]}
    budgets = statements["BudgetsPublish"]
    assert budgets["Principal"] == {"Service": "budgets.amazonaws.com"} and budgets["Action"] == "SNS:Publish"
    assert budgets["Resource"] == PLATFORM_TOPIC
    assert budgets["Condition"] == {"StringEquals": {"aws:SourceAccount": MOCK_ACCOUNT_ID},
                                    "ArnLike": {"aws:SourceArn": f"arn:aws:budgets::{MOCK_ACCOUNT_ID}:*"}}
    # SNS's default statement stays: the alarms keep publishing as before.
    assert statements["AccountOwnerUses"]["Condition"] == {"StringEquals": {"AWS:SourceOwner": MOCK_ACCOUNT_ID}}
    key = next(k for k in plan.of_type("aws:kms/key:Key") if k["name"] == "observability-alerts-key")
    key_statements = {s.get("Sid"): s for s in json.loads(key["inputs"]["policy"])["Statement"]}
    assert key_statements["BudgetsPublish"]["Principal"] == {"Service": "budgets.amazonaws.com"}
    assert key_statements["BudgetsPublish"]["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]


@pytest.mark.parametrize("stack", ["prod", "team-vision-prod"])
def test_a_prod_stack_without_a_budget_is_rejected_naming_the_key(stack):
    with pytest.raises(ConfigError) as raised:
        load(stack, mutate(raw_config(stack), "budget", DELETE))
    (error,) = [e for e in raised.value.errors if e.startswith(f"{PROJECT}:budget:")]
    assert "a prod stack must have a budget" in error and "Fix:" in error


def test_a_dev_stack_may_go_without_a_budget():
    raw = mutate(raw_config("dev"), "budget", DELETE)
    assert load("dev", raw).budget is None
    plan = synthesize("dev", overrides={"budget": {}})
    assert not plan.of_type("aws:budgets/budget:Budget")
    assert not plan.of_type("aws:costexplorer/costAllocationTag:CostAllocationTag")


# (case id, key path, value, text the error must contain)
INVALID = [
    ("limit-zero", "budget.monthlyLimitUsd", 0, "at least 1"),
    ("limit-quoted", "budget.monthlyLimitUsd", "60000", "whole number"),
    ("limit-missing", "budget.monthlyLimitUsd", DELETE, "required key is missing"),
    ("percent-zero", "budget.actualPercent", [0, 100], "between 1 and 1000"),
    ("percent-quoted", "budget.forecastPercent", ["100"], "whole number"),
    ("percent-twice", "budget.actualPercent", [80, 80], "lists a threshold twice"),
    ("no-thresholds", "budget", {"monthlyLimitUsd": 100, "actualPercent": [], "forecastPercent": []}, "never alerts"),
    ("too-many", "budget.actualPercent", list(range(10, 110, 10)), "10 notifications per budget"),
    ("typo", "budget.forecastPercents", [100], "did you mean 'forecastPercent'"),
    ("activate-quoted", "budget.activateCostAllocationTags", "yes", "true or false"),
]


@pytest.mark.parametrize(("path", "value", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
@pytest.mark.parametrize("stack", ["dev", "team-vision-prod"])
def test_invalid_budget_is_rejected_naming_the_key(stack, path, value, expected):
    with pytest.raises(ConfigError) as raised:
        load(stack, mutate(raw_config(stack), path, value))
    matching = [e for e in raised.value.errors if expected in e]
    assert matching, raised.value.errors
    assert all(e.startswith(f"{PROJECT}:budget") and "Fix:" in e for e in matching)
