"""The other reader of our stack files: what the Pulumi CLI (go-yaml v3.0.1) builds from a YAML text.

The CLI resolves every plain, untagged scalar by go-yaml's resolver (resolve.go; ported as
strict_yaml.go_yaml_plain_scalar, which tests/test_yaml_readers.py holds to go-yaml's own test
table); quoted and block scalars are text. `go_document(text)` builds the whole document that way,
on PyYAML's parse of its structure, so a test can demand that whatever our loader accepts is, value
for value and type for type, what the CLI reads: `same_data(load_yaml_text(text), go_document(text))`.
"""

from __future__ import annotations

import math
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from components.config.strict_yaml import _Composer, go_yaml_plain_scalar


class NotJudged:
    """A scalar this module does not model (an explicit tag): equal to anything."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


def go_document(text: str) -> Any:
    composer = _Composer(text)
    try:
        node = composer.get_single_node()
    finally:
        composer.dispose()
    return None if node is None else _build(node)


def _build(node: Node) -> Any:
    if isinstance(node, MappingNode):
        return {_build(key): _build(value) for key, value in node.value}
    if isinstance(node, SequenceNode):
        return [_build(item) for item in node.value]
    assert isinstance(node, ScalarNode)
    if node.style is not None:  # quoted, literal or folded: text to both readers
        return node.value
    if getattr(node, "explicit_tag", False):
        return NotJudged()
    kind, value = go_yaml_plain_scalar(node.value)
    return ("timestamp", value) if kind == "timestamp" else value


def same_data(ours: Any, theirs: Any) -> bool:
    """Equal with types: True is not 1, 1 is not 1.0, "1" is not 1."""
    if isinstance(theirs, NotJudged):
        return True
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, dict):
        return ours.keys() == theirs.keys() and all(same_data(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, list):
        return len(ours) == len(theirs) and all(same_data(a, b) for a, b in zip(ours, theirs, strict=True))
    if isinstance(ours, float):
        return ours == theirs or (math.isnan(ours) and math.isnan(theirs))
    return ours == theirs
