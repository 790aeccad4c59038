"""A policy document written in fewer characters, with the same decision for every request.

IAM counts a managed policy's characters against 6,144, white space aside (IAM User Guide, "IAM
and AWS STS quotas"), and a boundary is one managed policy. Each step here leaves every
statement's meaning as it was (tests/test_boundary_compaction.py judges a corpus of requests
with tests/iam_eval.py against the document before and after):
- `Sid` is dropped: it is an optional label that IAM never evaluates (IAM User Guide, "IAM JSON
  policy elements: Sid");
- a list of one value is written as that value: Action, NotAction, Resource, NotResource and a
  condition key each take a string or an array of strings (IAM User Guide, "Grammar of the IAM
  JSON policy language": `<action_string> | [<action_string>, ...]`, the same for resources and
  condition values);
- a Resource or NotResource pattern another pattern of the same list already matches is
  dropped (`subsumed_by`), and so is a repeated one.
"""

from __future__ import annotations

from typing import Any

WILDCARDS = ("*", "?")
LIST_ELEMENTS = ("Action", "NotAction", "Resource", "NotResource")


def literal_prefix(pattern: str) -> str:
    """The characters before a pattern's first wildcard: every value it matches starts with them."""
    cut = min((pattern.index(w) for w in WILDCARDS if w in pattern), default=len(pattern))
    return pattern[:cut]


def subsumed_by(narrow: str, wide: str) -> bool:
    """Whether every value `narrow` matches, `wide` matches too, by the one rule needed here: `wide`
    ends in `*` and `narrow` starts with the rest of `wide`, so `narrow` = that rest + more, and the
    final `*` takes the more (a `*` in a resource pattern matches any characters, `/` and `:`
    included: IAM User Guide, "IAM JSON policy elements: Resource")."""
    return narrow != wide and wide.endswith("*") and narrow.startswith(wide[:-1])


def without_subsumed(patterns: list[str]) -> list[str]:
    """`patterns` less the repeats and those another of them already matches, in their order."""
    unique = list(dict.fromkeys(patterns))
    return [p for p in unique if not any(subsumed_by(p, other) for other in unique)]


def _one_or_many(values: list[Any]) -> Any:
    return values[0] if len(values) == 1 else values


def compact_statement(statement: dict[str, Any]) -> dict[str, Any]:
    """One statement without its Sid, its resource lists without subsumed patterns, and each list
    of one value written as the value."""
    compact: dict[str, Any] = {}
    for element, value in statement.items():
        if element == "Sid":
            continue
        if element in LIST_ELEMENTS and isinstance(value, list):
            patterns = without_subsumed(value) if element.endswith("Resource") else list(dict.fromkeys(value))
            compact[element] = _one_or_many(patterns)
        elif element == "Condition":
            compact[element] = {operator: {key: _one_or_many(v) if isinstance(v, list) else v
                                           for key, v in pairs.items()}
                                for operator, pairs in value.items()}
        else:
            compact[element] = value
    return compact


def compact_policy(document: dict[str, Any]) -> dict[str, Any]:
    """The document with every statement compacted (`compact_statement`)."""
    return {**document, "Statement": [compact_statement(s) for s in document["Statement"]]}
