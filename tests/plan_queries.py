"""Questions the tests ask of a stack's offline plan (offline.plan.Plan) and its config."""

from __future__ import annotations

from stack_configs import PROJECT, raw_config

from components.config import ConfigError, StackConfig, TeamStackConfig, load_stack_config
from offline.plan import Plan, planned_config


def config_of(stack: str) -> StackConfig | TeamStackConfig:
    """The stack's config as the program loads it from its stack file."""
    return load_stack_config(raw_config(stack), project=PROJECT, stack=stack)


def config_errors(raw: dict, stack: str, **kwargs) -> list[str]:
    """The errors loading `raw` as `stack`'s config reports; none where it loads."""
    try:
        load_stack_config(raw, project=PROJECT, stack=stack, **kwargs)
    except ConfigError as error:
        return error.errors
    return []


def inputs_by_name(plan: Plan, type_token: str) -> dict[str, dict]:
    """The inputs of each planned resource of `type_token`, by resource name."""
    return {r["name"]: r["inputs"] for r in plan.of_type(type_token)}


def waits_for(plan: Plan, key) -> set:
    """Everything `key` waits for, directly or through what it waits for."""
    seen, todo = set(), [key]
    while todo:
        for dependency in plan.dependencies.get(todo.pop(), ()):
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return seen


def kubernetes_minor(stack: str) -> str:
    """The Kubernetes minor the stack's cluster runs (a team stack's: its platform's)."""
    config = planned_config(stack)
    platform = config.judged_platform if isinstance(config, TeamStackConfig) else config
    return platform.cluster.kubernetes_version
