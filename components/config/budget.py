"""The `budget` section: a monthly AWS Budget for the stack and when it alerts.

    gpu-training:budget:
      monthlyLimitUsd: 60000
      actualPercent: [80, 100]       # alert when the month's actual cost passes these
      forecastPercent: [100]         # alert when AWS forecasts the month to end above these

A platform stack's budget counts every cost tagged `environment=<env>` (the environment,
its team stacks included); a team stack's counts what is tagged with both its environment and
its team. Alerts go to the platform's alert topic. Every prod stack must have one.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config.reader import Section

# AWS Budgets: "A budget can have up to ten notifications" (Budgets API, Notification).
MAX_NOTIFICATIONS = 10


@dataclass(frozen=True)
class BudgetConfig:
    monthly_limit_usd: int
    actual_percent: tuple[int, ...]
    forecast_percent: tuple[int, ...]
    activate_cost_allocation_tags: bool
    """Activate this stack's cost-allocation tag keys from the stack too (off by default: the
    bootstrap activates them once; only an organization's management account or a standalone
    account may, and only for keys AWS has seen in billing data; see docs/cost.md)."""


def parse_budget(section: Section, *, environment: str) -> BudgetConfig | None:
    """None when the stack has no budget (allowed outside prod)."""
    if not section.data:
        if environment == "prod":
            section.error(section.path, None, "a prod stack must have a budget",
                          "add e.g. `budget: {monthlyLimitUsd: 60000, actualPercent: [80, 100], "
                          "forecastPercent: [100]}` (make cost STACK=<stack> shows what the stack costs)")
        section.finish()
        return None
    limit = section.integer("monthlyLimitUsd", fix="write the monthly limit in whole US dollars, e.g. 60000")
    actual = _percents(section, "actualPercent")
    forecast = _percents(section, "forecastPercent")
    if not actual and not forecast:
        section.error(section.key("actualPercent"), [], "a budget without thresholds never alerts",
                      "list at least one percentage in actualPercent or forecastPercent")
    if len(actual) + len(forecast) > MAX_NOTIFICATIONS:
        section.error(section.path, {"actualPercent": list(actual), "forecastPercent": list(forecast)},
                      f"AWS Budgets allows {MAX_NOTIFICATIONS} notifications per budget", "list fewer thresholds")
    activate = section.boolean("activateCostAllocationTags")
    section.finish()
    return BudgetConfig(limit, actual, forecast, activate)


def _percents(section: Section, name: str) -> tuple[int, ...]:
    key, row = section.key(name), section.row(name)
    assert row is not None
    values = []
    for index, raw in enumerate(section.items(name)):
        values.append(section.check_integer(f"{key}[{index}]", raw, fix="write a percentage of monthlyLimitUsd "
                                            f"between {row.minimum} and {row.maximum}"))
    if len(set(values)) != len(values) and section.ok(name):
        section.error(key, values, "lists a threshold twice", "list each percentage once")
    return tuple(sorted(set(values)))
