"""How a policy is declared: its check function, whose name and docstring are the policy's.

    @resource_rule(Severity.HIGH)
    def efs_encrypted(args: ResourceValidationArgs, report: Report) -> None:
        \"\"\"EFS file systems are encrypted at rest with a customer managed key.\"\"\"

is the policy `efs-encrypted` with that description: the name, the text the engine shows and the
check stand in one place, and every policy of the pack is declared the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpu_training_policy.resources import Report

ResourceCheck = Callable[[ResourceValidationArgs, Report], None]
StackCheck = Callable[[StackValidationArgs, Report], None]


def policy_name(check: Callable[..., None]) -> str:
    """The policy's name: its function's, with hyphens as the engine's names have them."""
    return check.__name__.replace("_", "-")


def policy_description(check: Callable[..., None]) -> str:
    """The docstring on one line, as the engine shows a description."""
    if not check.__doc__:
        raise ValueError(f"policy {check.__name__} has no docstring: write what it requires there")
    return " ".join(check.__doc__.split())


def resource_rule(severity: Severity, enforcement: EnforcementLevel = EnforcementLevel.MANDATORY,
                  config_schema: PolicyConfigSchema | None = None, resource_type: str | None = None
                  ) -> Callable[[ResourceCheck], ResourceValidationPolicy]:
    """A check of one resource at a time as a policy (mandatory unless told otherwise). config_schema:
    the settings a stack's policy configuration may give it (`args.get_config()`); resource_type: the
    one type it judges, every other resource passes without it being asked."""
    def declare(check: ResourceCheck) -> ResourceValidationPolicy:
        def validate(args: ResourceValidationArgs, report: Report) -> None:
            if resource_type is None or args.resource_type == resource_type:
                check(args, report)

        return ResourceValidationPolicy(name=policy_name(check), description=policy_description(check),
                                        enforcement_level=enforcement, severity=severity, validate=validate,
                                        config_schema=config_schema)
    return declare


def stack_rule(severity: Severity, enforcement: EnforcementLevel = EnforcementLevel.MANDATORY
               ) -> Callable[[StackCheck], StackValidationPolicy]:
    """A check of the whole stack at once as a policy (mandatory unless told otherwise)."""
    def declare(check: StackCheck) -> StackValidationPolicy:
        return StackValidationPolicy(name=policy_name(check), description=policy_description(check),
                                     enforcement_level=enforcement, severity=severity, validate=check)
    return declare
