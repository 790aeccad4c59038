"""Advisory cost policies: they warn in the preview and never block it."""

from __future__ import annotations

from pulumi_policy import (
    EnforcementLevel,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
)

from gpu_training_policy.compute import NODE_GROUP, capacity_type, is_gpu_node_group
from gpu_training_policy.resources import Report, describe, get, package_of, stack_of
from gpu_training_policy.rules import resource_rule, stack_rule

BUDGET = "aws:budgets/budget:Budget"


@resource_rule(Severity.LOW, EnforcementLevel.ADVISORY, resource_type=NODE_GROUP)
def on_demand_gpu_idle(args: ResourceValidationArgs, report: Report) -> None:
    """Outside prod, on-demand GPU node groups scale to zero (minSize 0)."""
    if not is_gpu_node_group(args.props):
        return
    stack = stack_of(args.urn, args.provider)
    minimum = get(get(args.props, "scalingConfig"), "minSize", 0)
    if not stack.is_prod and capacity_type(args.props) == "ON_DEMAND" and minimum > 0:
        report(f"{describe(args.name, args.resource_type)} keeps {minimum} on-demand GPU node(s) running in "
               f"{stack.environment or stack.name} even when no job needs them. Set minSize 0 (the Cluster "
               "Autoscaler scales up for queued jobs) or use spot capacity.")


@stack_rule(Severity.LOW, EnforcementLevel.ADVISORY)
def stack_has_budget(args: StackValidationArgs, report: Report) -> None:
    """Every stack that creates AWS resources has an AWS Budget."""
    resources = list(args.resources)
    if not any(package_of(r.resource_type) == "aws" for r in resources):
        return
    if not any(r.resource_type == BUDGET for r in resources):
        stack = stack_of(resources[0].urn)
        report(f"stack {stack.name} has no AWS Budget ({BUDGET}): nobody is told when it overspends.")


POLICIES = (on_demand_gpu_idle, stack_has_budget)
