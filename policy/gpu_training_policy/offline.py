"""Run the pack over an offline plan (build/<stack>/resources.json) as the engine runs it over a
preview: every resource policy on every resource, every stack policy on the whole stack.

The plan holds what the engine hands the analyzer: each resource's type, URN, inputs as
registered (camelCase), provider and property dependencies. This module only reshapes those
records into the SDK's own argument objects, through the SDK's own deserialiser and
unknown-checking proxies; the rules are the pack's, unchanged. Where an offline plan differs from
a real preview (docs/policy.md says more):
- every value is known (the mock engine invents ids); in a preview, ids and ARNs of resources not
  created yet are unknown, and a rule that needs one is reported as "can't run during preview";
- stack policies get the resources' inputs; the engine gives them outputs, which for AWS
  resources repeat the inputs under the same names;
- secret values read "[secret]"; the engine hands policies the decrypted value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from inspect import isawaitable
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from gpu_training_policy import POLICIES
from gpu_training_policy.resources import package_of

PROVIDER_PREFIX = "pulumi:providers:"
REQUIRED_FIELDS = ("type", "name", "urn", "custom", "provider", "inputs", "propertyDependencies")


class PlanFormatError(Exception):
    """The plan was written by an older scripts/plan.py (no URNs or dependencies)."""


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    urn: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.level:<9} {self.policy}  {self.urn or '(stack)'}\n          {self.message}"


def load_records(plan_dir: Path) -> list[dict[str, Any]]:
    path = plan_dir / "resources.json"
    records = json.loads(path.read_text())
    for record in records:
        missing = [f for f in REQUIRED_FIELDS if f not in record]
        if missing:
            raise PlanFormatError(f"{path}: {record.get('name')} lacks {', '.join(missing)}; re-run `make plans`.")
    return records


def _props(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The property bag exactly as the SDK's analyzer builds it from the engine's message."""
    return unknown_checking_proxy(deserialize_properties(dict(inputs)))


class OfflineStack:
    """The resources of one plan as the SDK's validation arguments."""

    def __init__(self, records: Iterable[Mapping[str, Any]]):
        self.records = list(records)
        self._urns = {(r["type"], r["name"]): r["urn"] for r in self.records}
        self._providers = {r["name"]: r for r in self.records if r["type"].startswith(PROVIDER_PREFIX)}

    def provider(self, record: Mapping[str, Any]) -> PolicyProviderResource | None:
        if record["provider"]:
            provider = self._providers[record["provider"]]
            return PolicyProviderResource(provider["type"], _props(provider["inputs"]), provider["urn"], provider["name"])
        if not record["custom"] or record["type"].startswith(PROVIDER_PREFIX):
            return None  # components and providers themselves
        # A custom resource without an explicit provider gets the engine's default provider (the
        # built-in `pulumi` package's too: a StackReference always runs on it).
        stack_and_project = record["urn"].split("::")[:2]
        package = package_of(record["type"])
        return PolicyProviderResource(f"{PROVIDER_PREFIX}{package}", {},
                                      "::".join([*stack_and_project, f"{PROVIDER_PREFIX}{package}", "default"]), "default")

    def parent_urn(self, record: Mapping[str, Any]) -> str | None:
        """The parent's type is the last but one part of the URN's type chain."""
        chain = record["urn"].split("::")[2].split("$")
        if not record.get("parent") or len(chain) < 2:
            return None
        return self._urns.get((chain[-2], record["parent"]))

    def options(self, record: Mapping[str, Any]) -> PolicyResourceOptions:
        return PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                                     custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[],
                                     parent=self.parent_urn(record))

    def resource_args(self, record: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> ResourceValidationArgs:
        return ResourceValidationArgs(record["type"], _props(record["inputs"]), record["urn"], record["name"],
                                      self.options(record), self.provider(record), config, {})

    def stack_args(self, config: Mapping[str, Any] | None = None) -> StackValidationArgs:
        resources = {r["urn"]: PolicyResource(r["type"], _props(r["inputs"]), r["urn"], r["name"], self.options(r),
                                              self.provider(r), None, [], {}) for r in self.records}
        for record in self.records:
            resource = resources[record["urn"]]
            parent = self.parent_urn(record)
            resource.parent = resources.get(parent) if parent else None
            for key, urns in record["propertyDependencies"].items():
                resource.property_dependencies[key] = [resources[u] for u in urns if u in resources]
                resource.dependencies += [resources[u] for u in urns if u in resources]
        return StackValidationArgs(list(resources.values()), config, {})


def _level(policy: Policy) -> str:
    level = policy.enforcement_level or EnforcementLevel.ADVISORY
    return str(level.value)


def _reporter(violations: list[Violation], policy: Policy, level: str,
              resource_urn: str | None = None) -> Callable[..., None]:
    """The SDK's ReportViolation: for a resource policy the URN is always the resource's own."""
    def report(message: str, urn: str | None = None) -> None:
        violations.append(Violation(policy.name, level, resource_urn or urn, message))
    return report


def evaluate(records: Iterable[Mapping[str, Any]], policies: Iterable[Policy] = POLICIES,
             config: Mapping[str, Mapping[str, Any]] | None = None) -> list[Violation]:
    """Every violation the policies report on a plan, as the engine would list them.

    A policy that reads a value not known yet is reported the way the SDK does in a preview: one
    advisory "can't run during preview" note instead of its verdict."""
    stack = OfflineStack(records)
    violations: list[Violation] = []
    for policy in policies:
        level = _level(policy)
        if level == EnforcementLevel.DISABLED.value:
            continue
        policy_config = (config or {}).get(policy.name)
        if isinstance(policy, ResourceValidationPolicy):
            for record in stack.records:
                _run(policy, stack.resource_args(record, policy_config), record["urn"],
                     _reporter(violations, policy, level, record["urn"]), violations)
        elif isinstance(policy, StackValidationPolicy):
            _run(policy, stack.stack_args(policy_config), None, _reporter(violations, policy, level), violations)
    return violations


def _run(policy: ResourceValidationPolicy | StackValidationPolicy, args: Any, urn: str | None,
         report: Callable[..., None], violations: list[Violation]) -> None:
    try:
        result = policy.validate(args, report)
    except UnknownValueError as error:
        violations.append(Violation(policy.name, EnforcementLevel.ADVISORY.value, urn,
                                    f"can't run during preview: {error.message}"))
        return
    if isawaitable(result):
        raise TypeError(f"policy {policy.name} is asynchronous; the offline runner runs synchronous policies only")
