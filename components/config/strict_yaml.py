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
- no tags beyond the core ones, no merge keys (`<<`).

Every problem is one line naming the source, the line and column, what is wrong and the fix; it
never quotes the document beyond a short token (a secret may sit on that line).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable
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
# YAML 1.2's core schema float (the Pulumi CLI's reading), finite values only.
_DECIMAL = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
# Plain scalars YAML 1.2 reads as numbers or null while PyYAML (YAML 1.1) reads them as text.
_NUMBER_IN_YAML_1_2 = re.compile(r"[-+]?([0-9][0-9_]*([eE][-+]?[0-9]+)?|0o[0-7]+|0x[0-9a-fA-F]+|\.(inf|Inf|INF)|\.(nan|NaN|NAN))")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class YamlError(ValueError):
    """Input that is not plain, unambiguous data; the message is one line ending in a fix."""


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
    """Parse one YAML document into plain data (dict, list, str, int, float, bool, None)."""
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
        return None
    _check_size(node, source)
    return _construct(node, source)


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


def _construct(node: Node, source: str) -> Any:
    if isinstance(node, ScalarNode):
        return _scalar(node, source)
    if isinstance(node, SequenceNode):
        if node.tag != _SEQ:
            raise _bad_tag(node, source)
        return [_construct(item, source) for item in node.value]
    if isinstance(node, MappingNode):
        if node.tag != _MAP:
            raise _bad_tag(node, source)
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = _key(key_node, source)
            if key in result:
                raise YamlError(f"{_at(source, key_node)}: key {_token(key)} appears twice (first on line "
                                  f"{first_line[key]}); YAML readers keep only one of them. Fix: remove or merge one")
            first_line[key] = key_node.start_mark.line + 1
            result[key] = _construct(value_node, source)
        return result
    raise _bad_tag(node, source)


def _key(node: Node, source: str) -> str:
    if isinstance(node, ScalarNode) and node.tag == f"{_TAG}merge":
        raise YamlError(f"{_at(source, node)}: merge keys ('<<') are not plain data and not every reader "
                          "supports them. Fix: write the keys out")
    key = _construct(node, source) if isinstance(node, ScalarNode) else node
    if not isinstance(key, str):
        shown = _token(node.value) if isinstance(node, ScalarNode) else "a list or mapping"
        raise YamlError(f"{_at(source, node)}: key {shown} is not text (JSON, and so the Pulumi engine, has "
                          "text keys only). Fix: quote it")
    if not key or len(key) > MAX_KEY_CHARS or _CONTROL.search(key):
        raise YamlError(f"{_at(source, node)}: key {_token(key)} must be 1 to {MAX_KEY_CHARS} characters on one line, "
                          "without control characters. Fix: rename it")
    return key


def _bad_tag(node: Node, source: str) -> YamlError:
    return YamlError(f"{_at(source, node)}: the tag {_token(str(node.tag))} is not allowed: only plain data "
                       "(text, numbers, true/false, null, lists, mappings). Fix: remove the tag")


def _scalar(node: ScalarNode, source: str) -> Any:
    value, tag, plain = node.value, node.tag, node.style is None
    if tag == _STR:
        if plain and _NUMBER_IN_YAML_1_2.fullmatch(value):
            raise _ambiguous(node, source, "some YAML readers take it as a number")
        return value
    if tag == _NULL:
        return None
    if tag == _BOOL:
        if value in _BOOLS:
            return _BOOLS[value]
        raise _ambiguous(node, source, "it is true/false to some YAML readers and text to others; write true or false")
    if tag == _INT:
        if _JSON_INT.fullmatch(value):
            return _integer(value, lambda: _at(source, node))
        raise _ambiguous(node, source, "readers disagree on octal, hex, binary, '_' and base-60 numbers; "
                         "write a plain decimal number")
    if tag == _FLOAT:
        if _DECIMAL.fullmatch(value) and math.isfinite(float(value)):
            return float(value)
        raise _ambiguous(node, source, "it is not a finite decimal number")
    if tag == f"{_TAG}timestamp":
        raise _ambiguous(node, source, "it is a date or time to some YAML readers and text to others")
    if tag in (f"{_TAG}merge", f"{_TAG}value"):
        raise _ambiguous(node, source, "YAML 1.1 readers give it a meaning of its own")
    raise _bad_tag(node, source)


def _integer(digits: str, where: Callable[[], str]) -> int:
    # Python refuses to convert more than 4300 digits; no setting needs a tenth of that.
    if len(digits.lstrip("+-")) > MAX_DIGITS:
        raise YamlError(f"{where()}: a number of more than {MAX_DIGITS} digits. Fix: write a smaller number")
    return int(digits)


def _ambiguous(node: ScalarNode, source: str, why: str) -> YamlError:
    return YamlError(f"{_at(source, node)}: {_token(node.value)} is ambiguous: {why}. Fix: quote it "
                       "if you mean text")


def read_yaml_file(path: Path, *, source: str | None = None, max_bytes: int = MAX_FILE_BYTES) -> tuple[Any, str]:
    """(data, text) of a regular UTF-8 file of at most `max_bytes`; YamlError otherwise."""
    shown = source or path_for_message(path)
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
    finally:
        os.close(descriptor)
    if len(data) > max_bytes:
        raise YamlError(f"{shown}: is more than the {max_bytes // 1024} KiB allowed. Fix: keep it small")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise YamlError(f"{shown}: byte {error.start} is not UTF-8 text (a binary file?). "
                          "Fix: name a YAML text file") from None
    return load_yaml_text(text, source=shown), text


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
