"""Walking parsed YAML/JSON documents (nested dicts and lists)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any


def values_under(document: Any, keys: Collection[str], kind: type) -> Iterator[Any]:
    """Each value of type `kind` under one of `keys`, at any depth of `document`; what is found is
    not searched further."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key in keys and isinstance(value, kind):
                yield value
            else:
                yield from values_under(value, keys, kind)
    elif isinstance(document, list):
        for value in document:
            yield from values_under(value, keys, kind)
