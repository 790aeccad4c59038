"""A small evaluator of IAM policy documents, for asserting what a role may and may not do.

IAM's rules as the AWS policy evaluation logic states them: an explicit Deny wins, then any
Allow, otherwise the request is implicitly denied. Actions match as IAM matches them (IAM User
Guide, "IAM JSON policy elements: Action"): `*` alone is every action; otherwise
`<service prefix>:<action name>`, the prefix literal (IAM refuses a wildcard in it:
MalformedPolicyDocument, so `*:TagResource` raises here rather than match), and both compared
without regard to case, the name with `*` and `?`. Resources and string conditions match with
`*` and `?` (`*` also spans `/` and `:`); ARN conditions, ArnEquals as ArnLike, component by
component (`arn_match`).
Policy variables (`${key}`) in condition values take the request's value of that key.
Condition operators not listed here raise, so a test never passes on a condition it ignored.
A negated operator (StringNotEquals, StringNotLike, ArnNotEquals, ArnNotLike) on a key missing
from the request is true, as in IAM; `...IfExists` is true when the key is missing; `Null:
"false"` means "the key is present". A multivalued key (eks:kubernetesGroups) takes the set
qualifiers ("IAM JSON policy elements: Condition operators", "Set operators for multivalued
context keys"): `ForAllValues:` is true when every value of the request matches a value of the
policy, and so when the request has none; `ForAnyValue:` when one does.

A permissions boundary (IAM User Guide, "Permissions boundaries for IAM entities") caps a
role's identity policy: a request is allowed only when both allow it and neither denies it
(`evaluate_bounded`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

ALLOW, DENY, IMPLICIT_DENY = "Allow", "Deny", "ImplicitDeny"

_POSITIVE = {
    "StringEquals": lambda actual, wanted: actual == wanted,
    "ArnEquals": lambda actual, wanted: arn_match(wanted, actual),
    "Bool": lambda actual, wanted: actual.lower() == wanted.lower(),
    "StringLike": lambda actual, wanted: glob_match(wanted, actual),
    "ArnLike": lambda actual, wanted: arn_match(wanted, actual),
    "NumericLessThan": lambda actual, wanted: float(actual) < float(wanted),
}
# Negated operators: true when no value of the request matches any value of the policy.
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals",
            "ArnNotLike": "ArnLike"}


@cache  # pure, and a corpus test matches the same few patterns millions of times
def _pattern(glob: str, *, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(f"^{body}$", re.IGNORECASE if ignore_case else 0)


def glob_match(glob: str, value: str, *, ignore_case: bool = False) -> bool:
    return bool(_pattern(glob, ignore_case=ignore_case).match(value))


def arn_match(pattern: str, arn: str) -> bool:
    """ArnEquals and ArnLike alike (IAM User Guide, "IAM JSON policy elements: Condition operators",
    ARN condition operators: one row for both, "Case-sensitive matching of the ARN. Each of the six
    colon-delimited components of the ARN is checked separately and each can include multi-character
    match wildcards (*) or single-character match wildcards (?)"): ArnEquals takes wildcards too, and
    a `*` stays within its component (the sixth, the resource, keeps its own colons)."""
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    return len(wanted) == len(actual) and all(glob_match(w, a) for w, a in zip(wanted, actual, strict=True))


class MalformedPolicyError(ValueError):
    """A document IAM itself would refuse (MalformedPolicyDocument): no request is judged on it."""


def action_matches(pattern: str, action: str) -> bool:
    """Whether the Action element `pattern` names `action` (`service:Name`), as IAM compares them."""
    if pattern == "*":
        return True
    prefix, sep, name = pattern.partition(":")
    if not sep or not prefix or not name:
        raise MalformedPolicyError(f"action {pattern!r} is neither `*` nor <service prefix>:<action name>")
    if "*" in prefix or "?" in prefix:
        raise MalformedPolicyError(f"action {pattern!r} has a wildcard in its service prefix, which IAM refuses")
    wanted_prefix, _, wanted_name = action.partition(":")
    return prefix.lower() == wanted_prefix.lower() and glob_match(name, wanted_name, ignore_case=True)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


_VARIABLE = re.compile(r"\$\{([^}]+)\}")


def _resolve(value: str, context: Mapping[str, Any]) -> str | None:
    """A policy variable (`${aws:ResourceTag/environment}`) takes the request's value of that key;
    a value naming a key the request lacks matches nothing (IAM User Guide, "IAM policy elements:
    Variables and tags": "If the key ... is not present ... the condition ... false")."""
    missing = False

    def value_of(match: re.Match[str]) -> str:
        nonlocal missing
        if match.group(1) not in context:
            missing = True
            return ""
        return str(context[match.group(1)])

    resolved = _VARIABLE.sub(value_of, value)
    return None if missing else resolved


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, Any]) -> bool:
    qualifier, _, single = operator.rpartition(":")
    if qualifier:
        values = _as_list(context.get(key, []))
        each = [_condition_holds(single, key, expected, {**context, key: value}) for value in values]
        if qualifier == "ForAllValues":
            return all(each)
        if qualifier == "ForAnyValue":
            return any(each)
        raise NotImplementedError(f"set qualifier {qualifier} is not modelled by tests/iam_eval.py")
    resolved = [_resolve(str(v), context) for v in _as_list(expected)]
    if any(v is None for v in resolved):
        return False
    wanted = [v for v in resolved if v is not None]
    present = key in context
    actual = [str(v) for v in _as_list(context.get(key))] if present else []
    if operator == "Null":
        return (not present) == (wanted[0].lower() == "true")
    if operator.endswith("IfExists"):
        return not present or _condition_holds(operator.removesuffix("IfExists"), key, expected, context)
    if operator in _POSITIVE:
        return present and any(_POSITIVE[operator](a, w) for a in actual for w in wanted)
    if operator in _NEGATED:
        matches = _POSITIVE[_NEGATED[operator]]
        return not present or not any(matches(a, w) for a in actual for w in wanted)
    raise NotImplementedError(f"condition operator {operator} is not modelled by tests/iam_eval.py")


def _matches(statement: Mapping[str, Any], action: str, resource: str | None, context: Mapping[str, Any]) -> bool:
    if "Action" in statement:
        if not any(action_matches(a, action) for a in _as_list(statement["Action"])):
            return False
    elif any(action_matches(a, action) for a in _as_list(statement["NotAction"])):
        return False
    if resource is not None:
        if "Resource" in statement and not any(glob_match(r, resource) for r in _as_list(statement["Resource"])):
            return False
        if "NotResource" in statement and any(glob_match(r, resource) for r in _as_list(statement["NotResource"])):
            return False
    for operator, pairs in (statement.get("Condition") or {}).items():
        for key, expected in pairs.items():
            if not _condition_holds(operator, key, expected, context):
                return False
    return True


def evaluate(document: Mapping[str, Any], action: str, resource: str | None = None,
             context: Mapping[str, Any] | None = None) -> str:
    """ALLOW, DENY (explicit) or IMPLICIT_DENY for one request. `resource` None: a trust policy."""
    matching = [s for s in _as_list(document["Statement"]) if _matches(s, action, resource, context or {})]
    if any(s["Effect"] == "Deny" for s in matching):
        return DENY
    if any(s["Effect"] == "Allow" for s in matching):
        return ALLOW
    return IMPLICIT_DENY


def evaluate_bounded(identity: Mapping[str, Any], boundary: Mapping[str, Any], action: str, resource: str,
                     context: Mapping[str, Any] | None = None) -> str:
    """A request of a role with identity policy `identity` and permissions boundary `boundary`."""
    outcomes = (evaluate(identity, action, resource, context), evaluate(boundary, action, resource, context))
    if DENY in outcomes:
        return DENY
    return ALLOW if outcomes == (ALLOW, ALLOW) else IMPLICIT_DENY


def allowed_actions(document: Mapping[str, Any]) -> list[str]:
    return [a for s in _as_list(document["Statement"]) if s["Effect"] == "Allow" for a in _as_list(s.get("Action", []))]
