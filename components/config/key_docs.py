"""Pulumi.yaml's `config:` block and the key table of docs/configuration-errors.md, rendered from
the key table (keys.py): the two texts a person reads to learn the keys say what the parsers read.

Pure text in, text out; scripts/config_docs.py writes or checks the files, and
tests/test_config_keys.py fails when either differs from what is rendered here.
"""

from __future__ import annotations

import json
import textwrap

from components.config.keys import BOTH, INTEGER, KEYS, LIST, PLATFORM, REQUIRED, STRING, TEAM, UNSET, Derived, Key, stacks_of

PULUMI_YAML_START = "# Every key the program reads"
DOC_START = "<!-- Generated from components/config/keys.py by scripts/config_docs.py --write: edit the table there. -->"
DOC_END = "<!-- End of the generated key table. -->"
# Pulumi.yaml's descriptions are folded at this width; the file's own lines stay under 120.
DESCRIPTION_WIDTH = 110


def literal(value: object) -> str:
    """A default as a stack file would write it: `true`, `[29400]`, `{first: 50000, last: 51999}`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value or json.dumps(value)  # an empty text is written ""
    if isinstance(value, list):
        return f"[{', '.join(literal(item) for item in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name}: {literal(item)}" for name, item in value.items()) + "}"
    return str(value)


def default_text(key: Key) -> str:
    if key.default is REQUIRED or key.default is UNSET:
        return repr(key.default)
    if isinstance(key.default, Derived):
        return key.default.text
    return literal(key.default)


def bounds_text(key: Key) -> str:
    """The row's bounds as a reader says them (`1 to 99`, `at least 1`); a list's or map's are each item's."""
    if key.minimum is None and key.maximum is None:
        return ""
    text = (f"{key.minimum} to {key.maximum}" if key.minimum is not None and key.maximum is not None
            else f"at least {key.minimum}" if key.minimum is not None else f"at most {key.maximum}")
    return text if key.type == INTEGER else f"each {text}"


def stacks_text(key: Key) -> str:
    stacks = stacks_of(key)
    return "both" if stacks == BOTH else next(iter(stacks))


def children(top: Key) -> tuple[Key, ...]:
    return tuple(key for key in KEYS if key is not top and key.top == top.path)


def _summary(top: Key, key: Key) -> str:
    default = ("required" if key.default is REQUIRED else "unset by default" if key.default is UNSET
               else f"default {default_text(key)}")
    facts = [key.type, *([f"one of {', '.join(key.allowed)}"] if key.allowed else []),
             *([bounds_text(key)] if bounds_text(key) else []), default]
    relative = key.path[len(top.path):].removeprefix("[]").lstrip(".")  # a pool's `name`, not `[].name`
    return f"{relative} ({'; '.join(facts)}): {key.doc}"


def description(top: Key) -> str:
    """The Pulumi.yaml description of a top-level key: its meaning, then each key inside it."""
    only = {frozenset({PLATFORM}): " Platform stacks only.", frozenset({TEAM}): " Team stacks only."}.get(stacks_of(top), "")
    default = f" Default: {top.default.text}." if isinstance(top.default, Derived) else ""
    each = ["Each item:"] if top.type == LIST else []
    parts = [top.doc + only + default, *each, *(_summary(top, key) for key in children(top))]
    if top.allowed:
        parts.append(f"One of {', '.join(top.allowed)}.")
    return " ".join(parts)


def declares_type(top: Key) -> bool:
    """Whether Pulumi.yaml gives the key a `type`: the engine then requires it, or applies its default,
    in every stack; so only for text both kinds of stack read (a team-only key given a default would
    reach platform stacks as a key they do not read)."""
    return top.type == STRING and stacks_of(top) == BOTH


def pulumi_yaml_config() -> str:
    lines = [
        f"{PULUMI_YAML_START}, rendered from the key table components/config/keys.py by",
        "# scripts/config_docs.py --write: edit the table, not this block. Structured keys are objects in the",
        "# stack files; the config model (components/config/) validates all of them before any resource is",
        "# created and names the key, the bad value and the fix on error. Keys without `type` are objects or",
        "# lists, or are read by one kind of stack only; docs/configuration-errors.md lists every key.",
        "config:",
    ]
    for top in (key for key in KEYS if key.stacks is not None):
        lines.append(f"  {top.path}:")
        if declares_type(top):
            lines.append(f"    type: {top.type}")
            if top.default is not REQUIRED:
                lines.append('    default: ""')
        lines.append("    description: >-")
        lines += textwrap.wrap(description(top), DESCRIPTION_WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6,
                               break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def rendered_pulumi_yaml(current: str) -> str:
    """`current` (Pulumi.yaml) with its config block, which runs to the end of the file, rendered anew."""
    start = current.find(f"\n{PULUMI_YAML_START}")
    if start < 0:
        raise ValueError(f"Pulumi.yaml has no line starting {PULUMI_YAML_START!r}: the config block's place is unknown")
    return current[:start + 1] + pulumi_yaml_config()


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def key_table() -> str:
    rows = ["| Key | Type | Default | Stacks | What it is |", "| --- | --- | --- | --- | --- |"]
    for key in KEYS:
        kind = (key.type + (f": {', '.join(f'`{value}`' for value in key.allowed)}" if key.allowed else "")
                + (f", {bounds_text(key)}" if bounds_text(key) else ""))
        literal_default = not (key.default is REQUIRED or key.default is UNSET or isinstance(key.default, Derived))
        shown_default = f"`{default_text(key)}`" if literal_default else default_text(key)
        rows.append(f"| `{key.path}` | {_cell(kind)} | {_cell(shown_default)} | {stacks_text(key)} | {_cell(key.doc)} |")
    return "\n".join(rows) + "\n"


def rendered_errors_doc(current: str) -> str:
    """`current` (docs/configuration-errors.md) with the text between its two markers rendered anew."""
    start, end = current.find(DOC_START), current.find(DOC_END)
    if start < 0 or end < start:
        raise ValueError("docs/configuration-errors.md lacks the key table's markers: " + DOC_START + " ... " + DOC_END)
    return current[:start + len(DOC_START)] + "\n" + key_table() + current[end:]

