"""A monthly AWS Budget per stack, alerting the platform's topic, and the tags it counts by.

- Platform stack: cost tagged `environment=<env>` (the provider's default tags put it on every
  resource of the environment, team stacks included).
- Team stack: cost tagged with both `environment=<env>` and `team=<team>`: a team name may exist
  in several environments. The team's GPU hours run on the platform's shared nodes, which carry
  no team tag: they count in the environment's budget (docs/cost.md, "What a budget sees").
- Alerts: one notification per configured percentage of the limit, on actual and on forecast
  cost, to the platform's alert topic (AWS Budgets cannot publish to another account's topic).
- Cost-allocation tags: a tag key counts in Budgets only once activated, an account-wide switch.
  The bootstrap activates COST_ALLOCATION_TAG_KEYS once, with an administrator (bootstrap/billing.py).
  A stack activates the keys it applies only when `budget.activateCostAllocationTags` is true,
  idempotently (activating an active key is a no-op, UpdateCostAllocationTagsStatus), and never
  deactivates one on destroy (`retain_on_delete`): another stack in the account may rely on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.config.budget import BudgetConfig

# What a budget counts: unblended cost, as AWS bills it before Savings Plans amortisation.
METRIC = "UnblendedCost"
# Every tag key a budget filters by, and the billing tag: what the bootstrap activates.
COST_ALLOCATION_TAG_KEYS = ("cost-center", "environment", "team")


def budget_name(name_prefix: str) -> str:
    """Budget names are unique per account: the stack's prefix makes them so."""
    return f"{name_prefix}-monthly"


def tag_filter_arguments(tags: Mapping[str, str]) -> dict[str, Any]:
    """Budget arguments that count only cost carrying every one of `tags`.

    One tag: the classic `TagKeyValue` cost filter (`user:<key>$<value>`). Several: a filter
    expression that ANDs them (values inside one TagKeyValue filter would be ORed)."""
    if len(tags) == 1:
        ((key, value),) = tags.items()
        return {"cost_filters": [{"name": "TagKeyValue", "values": [f"user:{key}${value}"]}]}
    return {
        "metrics": METRIC,
        "filter_expression": {"ands": [{"tags": {"key": key, "values": [value], "match_options": ["EQUALS"]}}
                                       for key, value in sorted(tags.items())]},
    }


def budget_notifications(config: BudgetConfig, topic_arn: pulumi.Input[str]) -> list[aws.budgets.BudgetNotificationArgsDict]:
    """One notification per threshold: actual cost first, then the month's forecast."""
    return [
        {"comparison_operator": "GREATER_THAN", "notification_type": kind, "threshold": float(percent),
         "threshold_type": "PERCENTAGE", "subscriber_sns_topic_arns": [topic_arn]}
        for kind, percents in (("ACTUAL", config.actual_percent), ("FORECASTED", config.forecast_percent))
        for percent in percents
    ]


@dataclass(frozen=True)
class StackBudgetArgs:
    config: BudgetConfig
    """The monthly limit in USD and the actual and forecast alert thresholds (percent)."""
    name_prefix: str
    """Names the budget."""
    tags: Mapping[str, str]
    """The cost-allocation tags whose costs count (all of them at once)."""
    alert_topic_arn: pulumi.Input[str]
    """Where the budget's alerts are published."""
    activate_tags: tuple[str, ...]
    """Tag keys this stack applies and activates for cost allocation."""


class StackBudget(pulumi.ComponentResource):
    budget: aws.budgets.Budget

    def __init__(self, name: str, args: StackBudgetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:observability:StackBudget", name, None, opts)
        config = args.config
        self.budget = aws.budgets.Budget(
            f"{name}-monthly",
            name=budget_name(args.name_prefix),
            budget_type="COST",
            time_unit="MONTHLY",
            limit_amount=str(config.monthly_limit_usd),
            limit_unit="USD",
            notifications=budget_notifications(config, args.alert_topic_arn),
            **tag_filter_arguments(args.tags),
            opts=pulumi.ResourceOptions(parent=self),
        )
        if config.activate_cost_allocation_tags:
            for key in args.activate_tags:
                aws.costexplorer.CostAllocationTag(
                    f"{name}-tag-{key}", tag_key=key, status="Active",
                    opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True))
        self.register_outputs({"budgetName": self.budget.name})
