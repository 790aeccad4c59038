"""An IAM evaluator for the pack: what a policy document allows, asked as IAM answers it.

IAM's rules (IAM User Guide, "Policy evaluation logic"): an explicit Deny wins, then an Allow,
otherwise the request is implicitly denied. Actions (IAM User Guide, "IAM JSON policy elements:
Action") are `*` or `<service prefix>:<action name>`, compared without regard to case, the name
with `*` and `?`. Resources (".. elements: Resource") match with `*` and `?`, case-sensitively; a
`*` also spans `:` and `/` here (every partition, region and account a wildcard can stand for: the
wider reading, which only refuses more). A policy variable (`${aws:username}`) may stand for any
value: a `*`. NotAction and NotResource match everything but what they name.

Conditions: the pack asks whether *some* request outside a team's tenancy is allowed, so a
condition on a key the question fixes (`context`) is evaluated, and one on any other key is taken
as the request's choice: an Allow's condition may hold, a Deny's may not (a Deny on a condition the
requester controls protects nothing). Operators it does not know count the same way. ARN
operators match component by component, as IAM does (`arn_match`), not with the Resource
element's wider reading: under an ArnNotLike, wider would grant less.

The project's tests judge the real documents with tests/iam_eval.py; the pack cannot import tests/
(its own environment), hence this module, kept to what the pack asks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

ALLOW, DENY, IMPLICIT_DENY = "Allow", "Deny", "ImplicitDeny"


@lru_cache(maxsize=8192)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    pattern = re.sub(r"\$\{[^}]*\}", "*", pattern)
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{body}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def glob_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    return bool(_glob(pattern, ignore_case).match(value))


def action_matches(pattern: str, action: str) -> bool:
    """IAM's comparison of an Action element with `service:Name`: `*`, or the prefix whole and the
    name as a glob, both without regard to case. (IAM refuses a wildcard in the prefix; read as a
    glob here, it only matches more.)"""
    if pattern == "*":
        return True
    prefix, _, name = pattern.partition(":")
    wanted_prefix, _, wanted_name = action.partition(":")
    return glob_match(prefix, wanted_prefix, ignore_case=True) and glob_match(name, wanted_name, ignore_case=True)


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def arn_match(pattern: str, arn: str) -> bool:
    """IAM's ArnEquals and ArnLike alike (IAM User Guide, "IAM JSON policy elements: Condition
    operators", ARN condition operators: "Each of the six colon-delimited components of the ARN is
    checked separately and each can include multi-character match wildcards (*) or single-character
    match wildcards (?)"). A `*` spanning colons would make an ArnNotLike hold for fewer ARNs than
    IAM's, so an Allow behind it would seem to grant less than it does."""
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    return len(wanted) == len(actual) and all(glob_match(w, a) for w, a in zip(wanted, actual, strict=True))


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda actual, wanted: actual == wanted,
    "StringEqualsIgnoreCase": lambda actual, wanted: actual.lower() == wanted.lower(),
    "StringLike": lambda actual, wanted: glob_match(wanted, actual),
    # ArnEquals takes `*` and `?` as ArnLike does: read as equality, an Allow whose ArnEquals names
    # `arn:aws:iam::*:role/*` would seem to hold for no principal but the literal one.
    "ArnEquals": lambda actual, wanted: arn_match(wanted, actual),
    "ArnLike": lambda actual, wanted: arn_match(wanted, actual),
}
_ARN_OPERATORS = {"ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike"}
_NEGATED = {"StringNotEquals": "StringEquals", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
            "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike"}


def _condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, Any], effect: str) -> bool:
    """Whether one key of one operator holds; `effect` decides what a key the context lacks means."""
    unfixed = effect == ALLOW  # a key the question leaves open: the requester's choice
    base = operator.split(":", 1)[-1].removesuffix("IfExists")
    lowered = {str(k).lower(): v for k, v in context.items()}
    if key.lower() not in lowered:
        return unfixed
    actual = [str(v) for v in as_list(lowered[key.lower()])]
    wanted = [str(v) for v in as_list(expected)]
    if base in _ARN_OPERATORS and any(len(w.split(":", 5)) < 6 for w in wanted):
        # A pattern without six components (a lone `*`): IAM documents no reading of it, so it
        # counts as a condition the pack does not know.
        return unfixed
    if base in _STRING_TESTS:
        return any(_STRING_TESTS[base](a, w) for a in actual for w in wanted)
    if base in _NEGATED:
        return not any(_STRING_TESTS[_NEGATED[base]](a, w) for a in actual for w in wanted)
    if base == "Null":
        return any(w.lower() == "false" for w in wanted)
    return unfixed


def _matches(statement: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any]) -> bool:
    effect = str(statement.get("Effect"))
    if "NotAction" in statement:
        if any(action_matches(str(a), action) for a in as_list(statement["NotAction"])):
            return False
    elif not any(action_matches(str(a), action) for a in as_list(statement.get("Action"))):
        return False
    if "NotResource" in statement:
        if any(glob_match(str(r), resource) for r in as_list(statement["NotResource"])):
            return False
    elif "Resource" in statement and not any(glob_match(str(r), resource) for r in as_list(statement["Resource"])):
        return False
    condition = statement.get("Condition")
    if isinstance(condition, Mapping):
        for operator, block in condition.items():
            if isinstance(block, Mapping) and not all(_condition_holds(str(operator), str(k), v, context, effect)
                                                      for k, v in block.items()):
                return False
    return True


def plain(value: Any) -> Any:
    """The engine's property proxies (Mappings and Sequences) as dicts, lists and scalars."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def statements_of(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [s for s in as_list(document.get("Statement")) if isinstance(s, Mapping)]


def evaluate(document: Mapping[str, Any], action: str, resource: str, context: Mapping[str, Any] | None = None) -> str:
    """ALLOW, DENY (explicit) or IMPLICIT_DENY for one request (a Resource-less statement, as in a
    key's or secret's own policy, applies to the resource it is attached to)."""
    matching = [s for s in statements_of(document) if _matches(s, action, resource, context or {})]
    if any(s.get("Effect") == DENY for s in matching):
        return DENY
    return ALLOW if any(s.get("Effect") == ALLOW for s in matching) else IMPLICIT_DENY


# --- the question the pack asks: is anything outside allowed? ------------------------------------

# Actions the question tries where a statement names a wildcard or NotAction: what reaches data
# or identity in the services a team's roles use (one read, one write, one administration each).
PROBE_ACTIONS = (
    "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "s3:PutBucketPolicy",
    "secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue", "secretsmanager:PutResourcePolicy",
    "sts:AssumeRole", "iam:PassRole", "kms:Decrypt", "kms:PutKeyPolicy", "ssm:GetParameter", "ssm:SendCommand",
    "eks:DescribeCluster", "logs:GetLogEvents", "elasticfilesystem:ClientRootAccess",
)
# What a `*` of a Resource pattern is filled with to find a witness ARN: nothing, a name, another
# team's part of a shared bucket or secret path, a longer team name (vision -> vision-x).
FILLERS = ("x", "", "teams/zz-other-team/x", "zz-other-team/x", "-x/x", "x-x")
# Where the resource service of an action is not its prefix.
RESOURCE_SERVICE = {"sts": "iam"}


def _candidate_actions(statement: Mapping[str, Any]) -> list[str]:
    if "NotAction" in statement:
        return [a for a in PROBE_ACTIONS if not any(action_matches(str(p), a) for p in as_list(statement["NotAction"]))]
    found = []
    for pattern in (str(p) for p in as_list(statement.get("Action"))):
        if "*" in pattern or "?" in pattern:
            found += [a for a in PROBE_ACTIONS if action_matches(pattern, a)]
        else:
            found.append(pattern)
    return found


def _fills(pattern: str) -> Iterable[str]:
    if "*" not in pattern and "?" not in pattern and "${" not in pattern:
        yield pattern
        return
    pattern = re.sub(r"\$\{[^}]*\}", "*", pattern).replace("?", "z")
    for filler in FILLERS:
        yield pattern.replace("*", filler)
        head, _, tail = pattern.partition("*")
        yield head + filler + tail.replace("*", "x")


def allows_outside(document: Mapping[str, Any], outside: Callable[[str, str], bool],
                   generic: Callable[[str], Iterable[str]] = lambda service: (),
                   context: Mapping[str, Any] | None = None, *, star_is_self: bool = False) -> list[tuple[str, str]]:
    """(action, ARN) pairs outside a tenancy (`outside(action, arn)`) that the document allows.
    Witness ARNs come from each Allow statement's own Resource patterns, their wildcards filled,
    and from `generic(service)` (ARNs outside the tenancy). `star_is_self`: a resource's own policy
    (a key's, a secret's), whose `*` or missing Resource is that resource: only the ARNs it names
    are asked about."""
    found: dict[tuple[str, str], None] = {}
    for statement in statements_of(document):
        if statement.get("Effect") != ALLOW:
            continue
        patterns = [str(r) for r in as_list(statement.get("Resource", statement.get("NotResource")))]
        if star_is_self:
            patterns = [p for p in patterns if p != "*"]
            if "NotResource" in statement or not patterns:
                continue
        for action in _candidate_actions(statement):
            service = action.split(":", 1)[0].lower()
            witnesses = [w for p in patterns for w in _fills(p)]
            witnesses += [] if star_is_self else list(generic(RESOURCE_SERVICE.get(service, service)))
            for arn in dict.fromkeys(witnesses):
                if outside(action, arn) and evaluate(document, action, arn, context) == ALLOW:
                    found[(action, arn)] = None
                    break
    return list(found)
