# Over 600 lines: one reader: the loader, each ambiguous scalar's rule and fix text, and the error lines they make.
"""One strict reader for the YAML people write: stack files and hyperparameters files.

YAML is generous in ways that bite configuration. `costCenter: 2024-01-01` is a date to PyYAML
and text to the Pulumi CLI (Go's yaml.v3), `gpu: yes` is true to one and "yes" to the other,
`017` is 15 or 17, a repeated key silently keeps the last value, a `!!python/...` tag runs code
in unsafe loaders, and a ten-line alias bomb expands to gigabytes. Everything read here must be
plain data that means the same to every YAML reader and to JSON, or the reader says why not:

- one document, within a size limit; nesting and alias expansion within limits;
- mappings with unique, single-line text keys;
- scalars that are text, whole or decimal numbers in JSON's spelling, true/false or null;
  anything else a reader could take two ways (dates, yes/no/on/off, octal and hex numbers,
  `1_000`, `.inf`, `1e3`) must be quoted;
- every plain (unquoted, untagged) scalar means the same to PyYAML (YAML 1.1, this reader) and to
  the Pulumi CLI, which reads stack files with go-yaml v3 (YAML 1.2): `go_yaml_plain_scalar` is
  its resolver, resolve.go at v3.0.1 (pulumi/pulumi sdk/go/common/encoding/marshal.go imports
  gopkg.in/yaml.v3; sdk/go.mod pins v3.0.1). `LR: 1.5e3` is the text "1.5e3" to PyYAML and the
  number 1500 to the CLI, so it is refused: the plan would show one value and the pod get another;
- no tags beyond the core ones, no merge keys (`<<`).

Every problem is one line naming the source, the line and column, what is wrong and the fix; it
never quotes the document beyond a short token (a secret may sit on that line). A problem confined
to one value (an ambiguous scalar, a tag, a repeated key) does not stop the reading: the value is
replaced by a `Refused` holding the problem, never used, and `parse_yaml_text` returns every such
problem of the document at once (the stack file reader reports them with the schema's problems,
each with a fix for the type its key takes: `YamlProblem.fix_for`). What leaves no document to
read on (syntax, size, nesting, aliases, text that is not UTF-8, a key that is not plain text)
stops it with a YamlError.
"""

from __future__ import annotations

import calendar
import json
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

# Far above any stack file or hyperparameters file we know of (a few KiB), far below what could
# hurt: larger inputs are mistakes (a data file, a binary), rejected before they are parsed.
MAX_FILE_BYTES = 1024 * 1024
# Nodes after alias expansion: what json.dumps (the Pulumi engine's form of config) would write.
MAX_NODES = 50_000
MAX_DEPTH = 64
# A Kubernetes qualified name (253-character prefix, '/', 63-character name) is the longest key
# any of our mappings needs.
MAX_KEY_CHARS = 320
MAX_DIGITS = 100
_SHOWN_TOKEN_CHARS = 40

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null"))
_SEQ, _MAP = f"{_TAG}seq", f"{_TAG}map"
_JSON_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")
# YAML 1.2's core schema float: go-yaml's yamlStyleFloat (resolve.go), finite values only.
_DECIMAL = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
# PyYAML's (YAML 1.1) other booleans (resolver.py, tag:yaml.org,2002:bool): text to go-yaml v3.
_YAML11_BOOLS = {**{w: True for w in ("yes", "Yes", "YES", "on", "On", "ON")},
                 **{w: False for w in ("no", "No", "NO", "off", "Off", "OFF")}}
# go-yaml v3.0.1 resolve.go: the first character of a plain scalar says what it may be (resolveTable).
_GO_SIGN, _GO_DIGIT, _GO_MAP, _GO_DOT = "S", "D", "M", "."
_GO_HINTS = {**dict.fromkeys("+-", _GO_SIGN), **dict.fromkeys("0123456789", _GO_DIGIT),
             **dict.fromkeys("yYnNtTfFoO~", _GO_MAP), ".": _GO_DOT}
# resolveMap: whole values with a fixed meaning (YAML 1.2 core schema; no yes/no/on/off).
_GO_MAP_VALUES: dict[str, tuple[str, Any]] = {
    **{v: ("bool", True) for v in ("true", "True", "TRUE")}, **{v: ("bool", False) for v in ("false", "False", "FALSE")},
    **{v: ("null", None) for v in ("", "~", "null", "Null", "NULL")},
    **{v: ("float", math.nan) for v in (".nan", ".NaN", ".NAN")},
    **{v: ("float", math.inf) for v in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{v: ("float", -math.inf) for v in ("-.inf", "-.Inf", "-.INF")},
}
_GO_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")  # what strconv.ParseFloat takes after a leading '.'
# strconv.ParseInt(s, 0, 64): a sign, then 0x/0o/0b, a leading 0 (octal) or decimal digits.
_GO_INT = re.compile(r"(?P<sign>[-+]?)(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[oO](?P<oct>[0-7]+)|0[bB](?P<bin>[01]+)"
                     r"|0(?P<oct0>[0-7]*)|(?P<dec>[1-9][0-9]*))")
# allowedTimestampFormats: Go layouts with 1-2 digit month, day, hour, minute and second.
_GO_DATE = r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
_GO_TIME = r"(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{1,2}):(?P<s>[0-9]{1,2})(?:[.,][0-9]+)?"
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_GO_TIMESTAMPS = (re.compile(rf"{_GO_DATE}[Tt]{_GO_TIME}(?:Z|[-+](?P<zh>[0-9]{{2}}):(?P<zm>[0-9]{{2}}))"),
                  re.compile(rf"{_GO_DATE} {_GO_TIME}"), re.compile(_GO_DATE))
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class YamlError(ValueError):
    """Input that is not plain, unambiguous data: `messages`, one line each ending in a fix (one
    where the reading stopped, every problem of the document where it did not)."""

    def __init__(self, *messages: str):
        super().__init__("; ".join(messages))
        self.messages = messages


@dataclass(frozen=True)
class YamlProblem:
    """A problem confined to one value, which the reader carried on past (the value is `Refused`)."""

    line: int
    column: int
    rule: str
    """What is wrong, the value quoted as a short token (never a secret's)."""
    fix: str
    """The fix where nothing is known of what the key takes."""
    written: str | None = None
    """An ambiguous plain scalar as written, whose fix depends on the type its key takes; None otherwise."""
    secret: bool = False
    """A value of a stack file's `secrets` map: the fix is to encrypt it, whatever else is known."""

    def message(self, source: str) -> str:
        return f"{source}: line {self.line}, column {self.column}: {self.rule}. Fix: {self.fix}"

    def fix_for(self, expected: str | None) -> str:
        """The fix where the key takes `expected`: "string", "integer", "boolean", "list", "mapping"
        or "map" (components/config/keys.py's types); None: not known."""
        if self.written is None or self.secret or expected is None:
            return self.fix
        if expected == "string":
            return f"quote it: {_token(self.written)}"
        if expected == "integer":
            return _whole_number_fix(self.written)
        if expected == "boolean":
            word = _YAML11_BOOLS.get(self.written)
            return "write true or false, without quotes" if word is None else f"write {json.dumps(word)}, without quotes"
        if expected == "list":
            return "the key takes a list: write it as [a, b] (quote an item that looks like a date or a number)"
        if expected in ("mapping", "map"):
            return "the key takes `name: value` lines, indented below it"
        return self.fix


@dataclass(frozen=True)
class Refused:
    """What stands in the data for a value the reader refused: never the value, only why."""

    problems: tuple[YamlProblem, ...]


@dataclass(frozen=True)
class YamlDocument:
    data: Any
    """The document as plain data, a `Refused` in place of each value with a problem."""
    problems: tuple[YamlProblem, ...]
    """Every problem of the document, in the order of the text."""


class _RefusalError(Exception):
    def __init__(self, problem: YamlProblem):
        super().__init__(problem.rule)
        self.problem = problem


def refusals_in(value: Any) -> list[YamlProblem]:
    """The problems of the `Refused` values inside `value`, in the order of the data."""
    if isinstance(value, Refused):
        return list(value.problems)
    if isinstance(value, dict):
        return [problem for item in value.values() for problem in refusals_in(item)]
    if isinstance(value, list):
        return [problem for item in value for problem in refusals_in(item)]
    return []


def _leading_zero(written: str) -> bool:
    digits = written.lstrip("+-")
    return len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()


def _whole_number_fix(written: str) -> str:
    if _leading_zero(written):  # 017: octal 15 to some readers; the writer more likely meant 17
        return "write it as a plain decimal number without the leading 0 (readers disagree on what one means)"
    kind, value = go_yaml_plain_scalar(written)
    if kind in ("int", "float") and math.isfinite(value) and value == int(value) and len(str(int(value))) <= MAX_DIGITS:
        return f"write it as a plain decimal number: {int(value)}"
    return "write a whole number in plain decimal digits"


def _any_type_fix(written: str) -> str:
    """The fix of an ambiguous scalar where the type its key takes is not known: each reading."""
    if written in _YAML11_BOOLS:
        return "quote it if you mean text, or write true or false"
    if _leading_zero(written):
        return "quote it if you mean text, or write the number without the leading 0"
    kind, value = go_yaml_plain_scalar(written)
    if kind in ("int", "float") and math.isfinite(value):
        number = int(value) if value == int(value) and len(str(int(value))) <= MAX_DIGITS else value
        return f"quote it if you mean text, or write it as a plain decimal number ({number}) if you mean the number"
    return "quote it if you mean text"


def _token(text: str) -> str:
    """A short, single-line quote of input for a message (the start of it only)."""
    short = text if len(text) <= _SHOWN_TOKEN_CHARS else text[:_SHOWN_TOKEN_CHARS] + "..."
    return json.dumps(short, ensure_ascii=False)


def _at(source: str, node: Node) -> str:
    mark = node.start_mark
    return f"{source}: line {mark.line + 1}, column {mark.column + 1}"


class _Composer(yaml.SafeLoader):
    """PyYAML's safe composer with a nesting limit (the recursive composer would otherwise hit
    Python's recursion limit and raise RecursionError on `[[[[...`)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.depth = 0

    def compose_scalar_node(self, anchor: Any) -> ScalarNode:
        # Remember an explicit tag (`!!str 1e3`): such a scalar is not resolved by either reader.
        tag = self.peek_event().tag
        node = super().compose_scalar_node(anchor)
        node.explicit_tag = tag not in (None, "!")  # pyright: ignore[reportAttributeAccessIssue]
        return node

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise YamlError(f"line {mark.line + 1}, column {mark.column + 1}: nests deeper than {MAX_DEPTH} "
                              "levels. Fix: flatten the structure")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml_text(text: str, *, source: str) -> Any:
    """Parse one YAML document into plain data (dict, list, str, int, float, bool, None); a
    YamlError lists every problem of the document."""
    document = parse_yaml_text(text, source=source)
    if document.problems:
        raise YamlError(*(problem.message(source) for problem in document.problems))
    return document.data


def parse_yaml_text(text: str, *, source: str) -> YamlDocument:
    """One YAML document as plain data with a `Refused` in place of each value that has a problem,
    and those problems; YamlError where the reading cannot go on."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise YamlError(f"{source}: is larger than {MAX_FILE_BYTES // 1024} KiB. Fix: keep configuration small; "
                          "large data belongs in S3")
    composer: _Composer | None = None
    try:
        composer = _Composer(text)
        node = composer.get_single_node()
    except YamlError as problem:
        raise YamlError(f"{source}: {problem}") from None
    except yaml.MarkedYAMLError as error:
        raise YamlError(_syntax_message(source, error)) from None
    except yaml.reader.ReaderError as error:
        raise YamlError(f"{source}: position {error.position}: contains the control character "
                          f"#x{error.character if isinstance(error.character, int) else ord(error.character):04x}. "
                          "Fix: save it as plain UTF-8 text") from None
    except yaml.YAMLError as error:  # any other PyYAML complaint, kept to one line
        raise YamlError(f"{source}: is not valid YAML ({str(error).splitlines()[0][:200]}). Fix: correct the syntax") from None
    finally:
        if composer is not None:
            composer.dispose()
    if node is None:
        return YamlDocument(None, ())
    _check_size(node, source)
    problems: list[YamlProblem] = []
    data = _construct(node, source, problems)
    return YamlDocument(data, tuple(sorted(problems, key=lambda problem: (problem.line, problem.column))))


def _syntax_message(source: str, error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = " ".join(str(error.problem or error.context or "is not valid YAML").split())[:200]
    if "expected a single document" in str(error.context):
        return f"{source}: {where}holds more than one YAML document. Fix: keep one document (remove the extra '---')"
    return (f"{source}: {where}{problem}. Fix: correct the YAML syntax there (indentation, ':' after keys, "
            "closing brackets and quotes)")


def _check_size(root: Node, source: str) -> None:
    """Count nodes as json.dumps would write them (aliases expanded) without expanding them."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in in_progress:
            raise YamlError(f"{_at(source, node)}: an alias refers to the node that contains it. "
                              "Fix: write the structure out without the self-reference")
        in_progress.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            total += sum(size(item) for item in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        in_progress.discard(key)
        if total > MAX_NODES:
            raise YamlError(f"{_at(source, node)}: expands to more than {MAX_NODES} values (aliases counted "
                              "in full). Fix: write the values out instead of nesting aliases")
        sizes[key] = total
        return total

    size(root)


def _holds_secrets(key: str) -> bool:
    """A stack file's `secrets` map (`<project>:secrets` or, unqualified, `secrets`), or one of its
    entries written as a key of its own (`<project>:secrets.hf-token`: `pulumi config set` without
    --path): its values are never quoted in a message, even when a mistake in them stops the reading."""
    name = key.split(":", 1)[-1]
    return name == "secrets" or name.startswith(("secrets.", "secrets["))


def _construct(node: Node, source: str, problems: list[YamlProblem], secret: bool = False) -> Any:
    if isinstance(node, ScalarNode):
        return _scalar(node, problems, secret)
    if isinstance(node, SequenceNode) and node.tag == _SEQ:
        return [_construct(item, source, problems, secret) for item in node.value]
    if isinstance(node, MappingNode) and node.tag == _MAP:
        return _mapping(node, source, problems, secret)
    return _refused(_bad_tag(node), problems)


def _mapping(node: MappingNode, source: str, problems: list[YamlProblem], secret: bool) -> dict[str, Any]:
    result: dict[str, Any] = {}
    first_line: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = _key(key_node, source)
        value = _construct(value_node, source, problems, secret or _holds_secrets(key))
        if key in first_line:
            # Neither value is used (readers keep different ones); what was wrong inside them is still said.
            mark = key_node.start_mark
            repeated = YamlProblem(mark.line + 1, mark.column + 1, f"key {_token(key)} appears twice (first on line "
                                   f"{first_line[key]}); YAML readers keep only one of them", "remove or merge one")
            problems.append(repeated)
            value = Refused((repeated, *refusals_in(result[key]), *refusals_in(value)))
        else:
            first_line[key] = key_node.start_mark.line + 1
        result[key] = value
    return result


def _refused(problem: YamlProblem, problems: list[YamlProblem]) -> Refused:
    problems.append(problem)
    return Refused((problem,))


def _key(node: Node, source: str) -> str:
    """A mapping's key: plain text, or a YamlError (without its key, nothing below it has a place)."""
    if isinstance(node, ScalarNode) and node.tag == f"{_TAG}merge":
        raise YamlError(f"{_at(source, node)}: merge keys ('<<') are not plain data and not every reader "
                          "supports them. Fix: write the keys out")
    problems: list[YamlProblem] = []
    key = _scalar(node, problems) if isinstance(node, ScalarNode) else node
    if problems:
        raise YamlError(problems[0].message(source))
    if not isinstance(key, str):
        shown = _token(node.value) if isinstance(node, ScalarNode) else "a list or mapping"
        raise YamlError(f"{_at(source, node)}: key {shown} is not text (JSON, and so the Pulumi engine, has "
                          "text keys only). Fix: quote it")
    if not key or len(key) > MAX_KEY_CHARS or _CONTROL.search(key):
        raise YamlError(f"{_at(source, node)}: key {_token(key)} must be 1 to {MAX_KEY_CHARS} characters on one line, "
                          "without control characters. Fix: rename it")
    return key


def _bad_tag(node: Node) -> YamlProblem:
    mark = node.start_mark
    return YamlProblem(mark.line + 1, mark.column + 1, f"the tag {_token(str(node.tag))} is not allowed: only plain "
                       "data (text, numbers, true/false, null, lists, mappings)", "remove the tag")


def go_yaml_plain_scalar(value: str) -> tuple[str, Any]:
    """(kind, value) the Pulumi CLI's YAML reader, go-yaml v3.0.1, gives a plain untagged scalar:
    kind is str, bool, null, int, float or timestamp (resolve.go `resolve("", value)`)."""
    hint = _GO_HINTS.get(value[:1], "") if value else _GO_MAP
    if not hint:
        return "str", value
    if value in _GO_MAP_VALUES:
        return _GO_MAP_VALUES[value]
    if hint == _GO_DOT and _GO_DOT_FLOAT.fullmatch(value) and math.isfinite(float(value)):
        return "float", float(value)
    if hint in (_GO_SIGN, _GO_DIGIT):
        if _go_timestamp(value):
            return "timestamp", value
        plain = value.replace("_", "")
        number = _go_integer(plain)
        if number is not None:
            return "int", number
        # strconv.ParseFloat fails beyond float64 (±Inf, ErrRange); the value then stays text.
        if _DECIMAL.fullmatch(plain) and math.isfinite(float(plain)):
            return "float", float(plain)
    return "str", value


def _go_integer(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else ParseUint (no sign): the value, or None."""
    match = _GO_INT.fullmatch(text)
    if match is None or len(text) > 2 * MAX_DIGITS:
        return None
    digits, base = next((match[name], base) for name, base in (("hex", 16), ("oct", 8), ("bin", 2), ("oct0", 8), ("dec", 10))
                        if match[name] is not None)
    number = int(digits or "0", base) * (-1 if match["sign"] == "-" else 1)
    if -(2**63) <= number < 2**63 or (not match["sign"] and 0 <= number < 2**64):
        return number
    return None


def _go_timestamp(text: str) -> bool:
    """Whether time.Parse takes `text` in one of go-yaml's timestamp layouts (ranges checked)."""
    for layout in _GO_TIMESTAMPS:
        match = layout.fullmatch(text)
        if match is None:
            continue
        fields = match.groupdict()
        year, month, day = int(fields["y"]), int(fields["mo"]), int(fields["d"])
        # Go's years start at 0000 (Python's datetime at 1): the month's length by the leap rule.
        if not (1 <= month <= 12 and 1 <= day <= _DAYS_IN_MONTH[month - 1] + (month == 2 and calendar.isleap(year))):
            return False
        if fields.get("h") is not None and not (int(fields["h"]) < 24 and int(fields["mi"]) < 60 and int(fields["s"]) < 60):
            return False
        return fields.get("zh") is None or (int(fields["zh"]) <= 24 and int(fields["zm"]) < 60)
    return False


def _same_reading(ours: Any, go_kind: str, go_value: Any) -> bool:
    """Whether the value this reader built is what go-yaml gives the same scalar."""
    if go_kind in ("str", "null", "bool"):
        kind = {str: "str", type(None): "null", bool: "bool"}.get(type(ours))
        return kind == go_kind and ours == go_value
    if go_kind in ("int", "float"):
        return type(ours) is {"int": int, "float": float}[go_kind] and ours == go_value
    return False  # a timestamp: this reader never builds one


def _scalar(node: ScalarNode, problems: list[YamlProblem], secret: bool = False) -> Any:
    """The scalar's value, or a `Refused` (its problem recorded in `problems`)."""
    try:
        value = _scalar_value(node, secret)
    except _RefusalError as refusal:
        return _refused(refusal.problem, problems)
    if node.style is None and not getattr(node, "explicit_tag", False):
        go_kind, go_value = go_yaml_plain_scalar(node.value)
        if not _same_reading(value, go_kind, go_value):
            seen = ("a date or time" if go_kind == "timestamp" else go_kind if secret else f"{go_kind} {go_value!r}")
            ours = type(value).__name__ if secret else f"{type(value).__name__} {value!r}"
            return _refused(_ambiguous(node, f"the Pulumi CLI (go-yaml, YAML 1.2) reads it as {seen}, this reader as "
                                       f"{ours}, so the plan and the deployment would differ", secret), problems)
    return value


def _scalar_value(node: ScalarNode, secret: bool = False) -> Any:
    value, tag = node.value, node.tag
    if tag == _STR:
        return value
    if tag == _NULL:
        if value not in _GO_MAP_VALUES or _GO_MAP_VALUES[value][0] != "null":
            raise _RefusalError(_ambiguous(node, "it is tagged null but is not ~, null or empty", secret))
        return None
    if tag == _BOOL:
        if value in _BOOLS:
            return _BOOLS[value]
        raise _RefusalError(_ambiguous(node, "it is true/false to some YAML readers and text to others", secret))
    if tag == _INT:
        if not _JSON_INT.fullmatch(value):
            raise _RefusalError(_ambiguous(node, "readers disagree on octal, hex, binary, '_' and base-60 numbers", secret))
        if len(value.lstrip("+-")) > MAX_DIGITS:
            mark = node.start_mark
            raise _RefusalError(YamlProblem(mark.line + 1, mark.column + 1, f"a number of more than {MAX_DIGITS} digits",
                                       "write a smaller number", secret=secret))
        return int(value)
    if tag == _FLOAT:
        if _DECIMAL.fullmatch(value) and math.isfinite(float(value)):
            return float(value)
        raise _RefusalError(_ambiguous(node, "it is not a finite decimal number", secret))
    if tag == f"{_TAG}timestamp":
        raise _RefusalError(_ambiguous(node, "it is a date or time to some YAML readers and text to others", secret))
    if tag in (f"{_TAG}merge", f"{_TAG}value"):
        raise _RefusalError(_ambiguous(node, "YAML 1.1 readers give it a meaning of its own", secret))
    raise _RefusalError(_bad_tag(node))


def _integer(digits: str, where: Callable[[], str]) -> int:
    # Python refuses to convert more than 4300 digits; no setting needs a tenth of that.
    if len(digits.lstrip("+-")) > MAX_DIGITS:
        raise YamlError(f"{where()}: a number of more than {MAX_DIGITS} digits. Fix: write a smaller number")
    return int(digits)


def _ambiguous(node: ScalarNode, why: str, secret: bool = False) -> YamlProblem:
    line, column = node.start_mark.line + 1, node.start_mark.column + 1
    if secret:  # a secret in plain text: the fix is to encrypt it, never to quote it and commit it
        return YamlProblem(line, column, f"a value of the secrets map (value not shown) is ambiguous: {why}",
                           "set it with `pulumi config set --path --secret 'secrets.<name>' <value>`, which writes "
                           "`secure:` in its place", written=node.value, secret=True)
    return YamlProblem(line, column, f"{_token(node.value)} is ambiguous: {why}", _any_type_fix(node.value),
                       written=node.value)


def read_yaml_file(path: Path, *, source: str | None = None, max_bytes: int = MAX_FILE_BYTES) -> tuple[Any, str]:
    """(data, text) of a regular UTF-8 file of at most `max_bytes`; YamlError (every problem) otherwise."""
    shown = source or path_for_message(path)
    text = _read_text(path, shown, max_bytes)
    return load_yaml_text(text, source=shown), text


def read_yaml_document(path: Path, *, source: str | None = None,
                       max_bytes: int = MAX_FILE_BYTES) -> tuple[YamlDocument, str]:
    """(document, text) of a regular UTF-8 file of at most `max_bytes`: its values with a problem
    `Refused`; YamlError where it cannot be read on."""
    shown = source or path_for_message(path)
    text = _read_text(path, shown, max_bytes)
    return parse_yaml_text(text, source=shown), text


def _read_text(path: Path, shown: str, max_bytes: int) -> str:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected below anyway.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise YamlError(f"{shown}: does not exist. Fix: check the path") from None
    except IsADirectoryError:
        raise YamlError(f"{shown}: is a directory, not a YAML file. Fix: name the file") from None
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "not a usable path"
        raise YamlError(f"{shown}: cannot be read ({reason}). Fix: check the path") from None
    try:
        data = _read_regular_file(descriptor, shown, max_bytes)
    except OSError as error:  # EIO (/proc/self/mem is a "regular file" whose read fails), ESTALE, ...
        raise YamlError(f"{shown}: cannot be read ({error.strerror or type(error).__name__}). "
                        "Fix: check the path") from None
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise YamlError(f"{shown}: is more than the {max_bytes // 1024} KiB allowed. Fix: keep it small")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise YamlError(f"{shown}: byte {error.start} is not UTF-8 text (a binary file?). "
                          "Fix: name a YAML text file") from None


def _read_regular_file(descriptor: int, shown: str, max_bytes: int) -> bytes:
    """At most `max_bytes` + 1 bytes of an open regular file; YamlError for anything else."""
    info = os.fstat(descriptor)
    if stat.S_ISDIR(info.st_mode):
        raise YamlError(f"{shown}: is a directory, not a YAML file. Fix: name the file")
    if not stat.S_ISREG(info.st_mode):
        raise YamlError(f"{shown}: is not a regular file. Fix: name a YAML file")
    if info.st_size > max_bytes:
        raise YamlError(f"{shown}: is {info.st_size} bytes, more than the {max_bytes // 1024} KiB allowed. "
                          "Fix: keep it small; large data belongs in S3")
    data = b""
    while len(data) <= max_bytes:
        chunk = os.read(descriptor, max_bytes + 1 - len(data))
        if not chunk:
            break
        data += chunk
    return data


def escape_control(text: str) -> str:
    """`text` with its control characters (line breaks among them) written as \\xNN: one line."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def path_for_message(path: Path | str) -> str:
    """A user-given path as one short line: control characters escaped, the middle of a long one cut."""
    text = escape_control(str(path))
    return text if len(text) <= 200 else f"{text[:100]}...{text[-100:]}"


def load_json_text(text: str, *, source: str) -> Any:
    """JSON with the same rules: no duplicate keys, finite numbers, the same size and depth limits."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise YamlError(f"{source}: key {_token(key)} appears twice. Fix: remove or merge one")
            result[key] = value
        return result

    def not_finite(name: str) -> Any:
        raise YamlError(f"{source}: {name} is not a finite number. Fix: write a decimal number")

    if len(text) > MAX_FILE_BYTES:
        raise YamlError(f"{source}: is larger than {MAX_FILE_BYTES // 1024} KiB. Fix: keep it small")
    if _json_depth(text) > MAX_DEPTH:
        raise YamlError(f"{source}: nests deeper than {MAX_DEPTH} levels. Fix: flatten the structure")
    def number(text: str) -> float:
        value = float(text)
        return value if math.isfinite(value) else not_finite(text[:_SHOWN_TOKEN_CHARS])

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=not_finite, parse_float=number,
                          parse_int=lambda digits: _integer(digits, lambda: source))
    except json.JSONDecodeError as error:
        raise YamlError(f"{source}: is not valid JSON ({error.msg} at column {error.colno}). "
                          "Fix: correct the JSON, or quote the value as text") from None


def _json_depth(text: str) -> int:
    """Bracket nesting outside strings: checked before json.loads recurses into it."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest
