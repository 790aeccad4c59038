# Over 600 lines: the Section reader and its typed getters, one per value type, sharing the key-row lookup and problem log.
"""Reading raw stack configuration while collecting every error at once.

Each `Section` wraps one mapping of the stack file. Each problem is a `ConfigProblem` record
naming the full key, the value received (never a secret's), the rule broken and how to fix it;
the report is rendered from the records, and whether a key passed is asked of their keys, never
of their text. Parsing carries on past a bad value so the user sees every problem in one run,
under one rule: a value that failed validation is never used by a later check.

- A getter that rejects a value records the error and returns an inert placeholder ("", 0,
  False, [], {}, None), never the bad value; no later rule reports on that key again.
- A value the stack file reader refused (stack_file.py: an ambiguous scalar, a repeated key)
  arrives as `refused_value(...)`, a stand-in holding the reader's problems: `ErrorLog.take_refused_values`
  reports them first, and the key is then unusable like any rejected one (its getter returns the
  placeholder, nothing else is said of it), so one run reports the file's problems and the
  schema's together.
- A check that combines values runs only when they passed: `section.ok("min", "max")`; an item
  (a pool, a job) whose section `failed` is left out of checks that depend on it, and references
  to it are not judged again.
- A key's default, bounds and closed values are its row's in the key table (components/config/keys.py):
  a getter reads them from the row of the key it reads, and refuses (`KeyTableError`) a parser that
  passes them again; a parser passes a default only where the row's is UNSET or Derived (computed).
- Integers are bounded by the 32-bit range the Kubernetes and AWS APIs store them in, unless the
  row gives a tighter bound; free-form values that reach a pod or an API as text must be text
  (whole numbers are written in decimal): `true` would arrive as "True".
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any, TypeVar

import pulumi

from components.config.keys import REQUIRED, UNSET, Derived, Key, own_row_of, row_of
from components.config.strict_yaml import escape_control

# Kubernetes (int32 fields such as ttlSecondsAfterFinished) and most AWS APIs (Integer) store
# numbers in 32 bits; a larger value passes here only where a field says so.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# A report stays readable (and small enough for any CI log) however broken the input is: long
# values are cut, and past the budget the remaining errors are only counted.
MAX_SHOWN_VALUE_CHARS = 80
MAX_MESSAGE_CHARS = 1000
MAX_REPORT_CHARS = 16_000


SECRET = "[secret]"
"""What stands for a secret's text in a problem: its value, or any text of it a message would echo."""


@dataclass(frozen=True)
class ConfigProblem:
    """One configuration problem, one line of the report: the key it is about, the rule broken,
    the fix, and the value received (`SECRET` for a secret's, None where the rule shows none).

    Whether a key passed is asked of `key`, never of the rendered text."""

    key: str
    """The dotted key path (`gpu-training:network.vpcCidr`), or what the user must look at where
    the problem is no key's: a file, a command-line flag, `stack 'name'`."""
    rule: str
    fix: str = ""
    """How to fix it; "" where `rule` already says (a YAML reader's message names its own fix)."""
    value: str | None = None
    """The value received as the line shows it (`shown(...)`); `SECRET` for a secret's, which the line
    does not show; None where the rule needs no value."""
    where: str = ""
    """The file or flag the key was read from, where the line names it: a stack file read before the
    keys are judged, or the platform stack whose problems a team stack reports. Such a problem is
    about no key of the stack being judged (`is_about` is false)."""

    def is_about(self, key: str) -> bool:
        """Whether this problem is about `key` or a key inside it (`a.b` is inside `a`, `a.bc` is not)."""
        return not self.where and is_within(self.key, key)

    @property
    def subject(self) -> str:
        """What the line starts with: the key, after the file or flag it was read from when the line names one."""
        return f"{self.where}: {self.key}" if self.where else self.key

    def __str__(self) -> str:
        shown_value = "" if self.value is None else " (value not shown)" if self.value == SECRET else f" (got {self.value})"
        fix = f". Fix: {self.fix}" if self.fix else ""
        return f"{self.subject}: {self.rule}{shown_value}{fix}"


class ConfigError(pulumi.RunError):
    """Invalid stack configuration. `pulumi up` prints a RunError without a traceback."""

    def __init__(self, problems: Iterable[ConfigProblem], *, judged_against: str = ""):
        """`judged_against`: what the config was judged against, where the report must say it (a
        team stack's deployed platform: scripts/deploy-environment reads it from the first line)."""
        self.problems = tuple(problems)
        self.errors = [str(problem) for problem in self.problems]
        """The problems as the report words them, one line each."""
        count = len(self.errors)
        against = f" against {judged_against}" if judged_against else ""
        lines = [f"{count} configuration error{'s' if count != 1 else ''}{against}; nothing was created:"]
        budget = MAX_REPORT_CHARS
        for shown_count, error in enumerate(self.errors):
            line = f"  - {one_line(error)}"
            if len(line) > budget:
                lines.append(f"  ... and {count - shown_count} more (fix the ones above and run again)")
                break
            lines.append(line)
            budget -= len(line) + 1
        super().__init__("\n".join(lines))


REFUSED_MARK = "<refused by the stack file reader: "
"""How `refused_value` starts. It travels through the engine's config as any text does (not with
`[` or `{`, which decode_raw_config would try as JSON)."""
_REFUSED_END = " :refused>"
_PROBLEM_FIELDS = frozenset(field.name for field in fields(ConfigProblem))
_POSITION = re.compile(r"(.*): line (\d+), column (\d+)")


def refused_value(problems: Sequence[ConfigProblem]) -> str:
    """What stands in the config for a value the stack file reader refused: its problems, never the value."""
    return f"{REFUSED_MARK}{json.dumps([asdict(problem) for problem in problems])}{_REFUSED_END}"


def refused_problems(value: Any) -> tuple[ConfigProblem, ...]:
    """The problems a `refused_value` holds; () for any other value."""
    if not (isinstance(value, str) and value.startswith(REFUSED_MARK) and value.endswith(_REFUSED_END)):
        return ()
    try:
        entries = json.loads(value[len(REFUSED_MARK):-len(_REFUSED_END)])
    except (ValueError, RecursionError):  # text that only looks like one
        return ()
    if not isinstance(entries, list) or not entries:
        return ()
    problems: list[ConfigProblem] = []
    for entry in entries:
        if not (isinstance(entry, dict) and set(entry) == _PROBLEM_FIELDS
                and all(isinstance(part, str) or (name == "value" and part is None) for name, part in entry.items())):
            return ()
        problems.append(ConfigProblem(**entry))
    return tuple(problems)


def refused_in(value: Any) -> list[ConfigProblem]:
    """The problems of every `refused_value` inside `value`."""
    if isinstance(value, Mapping):
        return [problem for item in value.values() for problem in refused_in(item)]
    if isinstance(value, list):
        return [problem for item in value for problem in refused_in(item)]
    return list(refused_problems(value))


def file_position(problem: ConfigProblem) -> tuple[str, int, int]:
    """(file, line, column) of a problem whose `where` names them (`file: line L, column C`); the
    order of a report that starts with the file's problems."""
    found = _POSITION.fullmatch(problem.where)
    return (found[1], int(found[2]), int(found[3])) if found else (problem.where, 0, 0)


def one_line(message: str) -> str:
    """A message as one bounded line: control characters escaped, the end of a long one cut."""
    text = escape_control(message)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 3] + "..."


def shown(value: Any) -> str:
    """`repr` of a received value, cut short in the middle: an error must not echo a whole file
    back, and the end stays visible (a trailing newline is a mistake too)."""
    text = repr(value)
    if len(text) <= MAX_SHOWN_VALUE_CHARS:
        return text
    half = (MAX_SHOWN_VALUE_CHARS - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def is_within(key: str, outer: str) -> bool:
    """Whether `key` is `outer` or a key inside it: `outer` followed by `:` (below a project), `.`
    (a mapping's key) or `[` (a list's item)."""
    return key == outer or (key.startswith(outer) and key[len(outer):len(outer) + 1] in (":", ".", "["))


class ErrorLog(list[ConfigProblem]):
    """The problems of one load, and the keys whose values must never appear in them (secrets,
    including anything set with `--secret`)."""

    def __init__(self, secret_keys: Collection[str] = ()):
        super().__init__()
        self.secret_keys = frozenset(secret_keys)
        self._refusals: list[ConfigProblem] = []
        """The problems refusing a key set as a secret, or a value the stack file reader refused:
        what else is said of that key is said of its placeholder, never of the value the user wrote."""
        self._refused_values: list[str] = []
        """The keys whose value the stack file reader refused (`take_refused_values`)."""

    def refuse(self, problem: ConfigProblem) -> None:
        self._refusals.append(problem)
        self.append(problem)

    def take_refused_values(self, raw: Mapping[str, Any]) -> None:
        """Report, in the order of the file, the problems of each `refused_value` in `raw` under the
        key it stands at; nothing else is reported of those keys (each is `refused_value_at`)."""
        found: list[ConfigProblem] = []

        def walk(key: str, value: Any) -> None:
            problems = refused_problems(value)
            if problems:
                self._refused_values.append(key)
                found.extend(replace(problem, key=key) for problem in problems)
            elif isinstance(value, Mapping):
                for name, item in value.items():
                    walk(f"{key}.{name}", item)
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    walk(f"{key}[{index}]", item)

        for key, value in raw.items():
            walk(key, value)
        for problem in sorted(found, key=file_position):
            self.refuse(problem)

    def refused_value_at(self, key: str) -> bool:
        """Whether `key`, or a key it lies inside, holds a value the stack file reader refused."""
        return any(is_within(key, refused) for refused in self._refused_values)

    def reported(self, key: str, *, since: int = 0) -> bool:
        """Whether a problem about `key` (or a key inside it) was recorded, from the `since`th on,
        or a value there was refused by the stack file reader (reported before anything else)."""
        return (any(problem.is_about(key) for problem in self[since:])
                or any(is_within(refused, key) for refused in self._refused_values))

    def hides(self, key: str) -> bool:
        return any(is_within(key, secret) for secret in self.secret_keys)

    def _of_refused_key(self, problem: ConfigProblem) -> bool:
        if any(problem is refusal for refusal in self._refusals):
            return False
        # A stand-in of a refused value that reached a message (a list shown whole) says nothing of the value.
        return (any(problem.is_about(refusal.key) for refusal in self._refusals)
                or (bool(self._refused_values) and REFUSED_MARK in str(problem)))

    def without_secret_values(self, raw: Mapping[str, Any], *, also: Any = None) -> list[ConfigProblem]:
        """The problems with every text of a secret replaced by [secret]: a secret (a key of `raw`
        that is hidden, and `also`) must not appear whatever path it took into a message (a pool
        name listed in a fix, say). The last line of defence behind `hides`."""
        values: set[str] = set()

        def collect(value: Any) -> None:
            if isinstance(value, str):
                values.add(value)
            elif isinstance(value, Mapping):
                for item in value.values():
                    collect(item)
            elif isinstance(value, list):
                for item in value:
                    collect(item)

        collect(also)
        for key, value in raw.items():
            if self.hides(key):
                collect(value)
        # Very short values would blank out ordinary words; no real secret is that short.
        hidden = sorted((v for v in values if len(v) >= 4), key=len, reverse=True)
        return [_redacted(problem, hidden, key_too=bool(problem.where) or self.hides(problem.key))
                for problem in self if not self._of_refused_key(problem)]


def _redacted(problem: ConfigProblem, hidden: list[str], *, key_too: bool) -> ConfigProblem:
    """`problem` with each of the `hidden` texts replaced by [secret] wherever it appears; the key
    itself is plain config unless `key_too` (a secret's key, or one of another stack's problems)."""

    def redact(text: str) -> str:
        for value in hidden:
            text = text.replace(value, SECRET)
        return text

    result = replace(problem, key=redact(problem.key) if key_too else problem.key, where=redact(problem.where),
                     rule=redact(problem.rule), fix=redact(problem.fix),
                     value=None if problem.value is None else redact(problem.value))
    if any(value in str(result)[len(result.subject):] for value in hidden):
        # A secret that straddles two parts of the line (rule and value, say): what follows the key is redacted whole.
        result = replace(result, rule=redact(str(problem)[len(problem.subject) + 2:]), fix="", value=None)
    return result


def refuse_plain_keys_set_as_secrets(errors: ErrorLog, *, project: str, readable: Collection[str],
                                     fix: str, also: Collection[str] = ()) -> None:
    """A key marked secret (`secure:` in the stack file, `pulumi config set --secret`, plan.py's
    --secret) that the program reads as plain config: its value would reach resources, tags,
    manifests and plans in plain text, and the offline plan would validate a placeholder instead
    of it. Only the keys in `readable` (and what lies inside them) are read as secrets. Keys of
    other namespaces are judged here only when in `also`: the rest are reported as unknown."""
    readable_keys = [f"{project}:{key}" for key in readable]
    for key in sorted(errors.secret_keys):
        if any(is_within(key, allowed) for allowed in readable_keys):
            continue
        if not key.startswith(f"{project}:") and key not in also:
            continue
        errors.refuse(ConfigProblem(
            key, "is set as a secret (`secure:` in the stack file, `pulumi config set --secret` or plan.py --secret), "
            "but the program reads it as plain config: its value would reach resources, tags and manifests in plain text",
            fix, value=SECRET))


def report_keys_named_as_paths(own: dict[str, Any], prefix: str, errors: ErrorLog) -> None:
    """`pulumi config set 'secrets.hf-token' x` without --path writes one top-level key with the
    dots in its name: no key here holds a '.' or '[', so each such key is that mistake (removed
    from `own`, so it is not also reported as unknown; its value, maybe a secret, is not shown).
    Said even where the stack file reader refused the value: the key must be set again anyway."""
    for key in [k for k in own if "." in k or "[" in k]:
        del own[key]
        secret = " --secret" if key.startswith(("secrets.", "secrets[")) else ""
        errors.refuse(ConfigProblem(
            f"{prefix}{key}", "unknown key: a key's name with a path in it",
            f"did you mean `pulumi config set --path{secret} '{key}' <value>`? Without --path the CLI writes the dots "
            f"into the key's name; remove this key (`pulumi config rm '{key}'`) and set it again with --path"))


def own_keys(raw: Mapping[str, Any], *, project: str, secret_keys: Collection[str]) -> tuple[ErrorLog, dict[str, Any]]:
    """How every stack's load starts (the program's and the bootstrap's): the ErrorLog that hides the
    values of `secret_keys`, the stack file's own problems first in it; the project's keys without
    their `project:` prefix, keys named as paths reported and left out."""
    errors = ErrorLog(secret_keys)
    errors.take_refused_values(raw)
    prefix = f"{project}:"
    own = {key[len(prefix):]: value for key, value in raw.items() if key.startswith(prefix)}
    report_keys_named_as_paths(own, prefix, errors)
    return errors, own


_MISSING = object()
"""A getter's default when the parser passes none: the row's default, or none (required)."""
_WHOLE_NUMBER = re.compile(r"[-+]?[0-9]{1,18}")
Vocabulary = TypeVar("Vocabulary", bound=StrEnum)


class KeyTableError(Exception):
    """A parser passed a default, bound or closed set that the key's row holds (or should): a bug,
    never the user's mistake, so it is raised rather than reported."""


def _row_default(row: Key | None, given: Any) -> Any:
    """The default a getter uses: the row's literal one (none where the row says required), or, where
    the row's is UNSET or Derived (what the parser computes: another key's value, the environment's
    rule), the parser's."""
    if row is None or row.default is UNSET or isinstance(row.default, Derived):
        return given
    if given is not _MISSING:
        raise KeyTableError(f"{row.path}: the parser passes a default ({given!r}), but the key table's row says "
                            f"{row.default!r}: read it from the row (components/config/keys.py) without one")
    return _MISSING if row.default is REQUIRED else copy.deepcopy(row.default)


def _row_bounds(row: Key | None, minimum: int | None, maximum: int | None) -> tuple[int | None, int | None]:
    if row is None:
        return minimum, maximum
    if minimum is not None or maximum is not None:
        raise KeyTableError(f"{row.path}: the parser passes bounds ({minimum}, {maximum}): they belong in the key's "
                            "row (components/config/keys.py minimum=, maximum=)")
    return row.minimum, row.maximum


def _row_choices(row: Key | None, given: tuple[str, ...]) -> tuple[str, ...]:
    """The closed set a string is checked against: the row's. A parser passes one only as its
    vocabulary (`choice`), which must be the row's."""
    if row is None:
        return given
    if given and given != row.allowed:
        raise KeyTableError(f"{row.path}: the parser's choices {given} are not the key table's {row.allowed}")
    return row.allowed


def did_you_mean(word: str, choices: list[str]) -> str:
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"did you mean '{by_lower[close[0]]}'?" if close else f"known keys: {', '.join(sorted(choices))}."


class Section:
    """One mapping of config; `path` is the dotted key users see (e.g. `gpu-training:network`)."""

    def __init__(self, errors: ErrorLog, path: str, data: Any, *, separator: str = ".", missing: bool = False,
                 null_entries: bool = False):
        """`null_entries`: the keys of this mapping may be left empty (`dev:`), meaning their defaults."""
        self.errors = errors
        self.path = path
        self.separator = separator
        self._read: set[str] = set()
        self._asked: set[str] = set()
        """Keys looked for with `has` (read or not): spellings `finish` may suggest."""
        self._first_error = len(errors)
        # Keys found missing or of the wrong type: nothing inside them is judged again (each rule
        # would only repeat the same mistake in other words).
        self._unusable_keys: list[str] = []
        self._unusable = missing or not isinstance(data, Mapping)
        if not missing and not isinstance(data, Mapping):
            self.error(path, data, "must be a mapping of keys to values", "write it as `key: value` lines")
        if self._unusable:
            self._unusable_keys.append(path)
        self.data: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        # `key:` with nothing after it is YAML's null: never a value of this config, and read as
        # "not set" it would silently become the default (or no Lustre at all).
        self._empty = set() if null_entries else {str(name) for name, value in self.data.items() if value is None}
        for name in sorted(self._empty):
            self.errors.append(ConfigProblem(self.key(name), "is empty (YAML null)",
                                             "give it a value, or remove the key to use its default"))
            self._unusable_keys.append(self.key(name))

    def key(self, name: str) -> str:
        return f"{self.path}{self.separator}{name}"

    def row(self, name: str) -> Key | None:
        """The key table's row of `name` in this section (not its map's, for a map's entry); None
        outside the gpu-training project."""
        return own_row_of(self.key(name))

    def error(self, key: str, value: Any, problem: str, fix: str) -> None:
        if any(is_within(key, unusable) for unusable in self._unusable_keys) or self.errors.refused_value_at(key):
            return  # reported already as missing, of the wrong type or refused by the stack file reader
        self.errors.append(ConfigProblem(key, problem, fix, value=SECRET if self.errors.hides(key) else shown(value)))

    def unusable(self, key: str, value: Any, problem: str, fix: str) -> None:
        """Report a value that cannot be used at all (wrong type, unparsable): rules about it,
        or about anything inside it, are not reported after this."""
        self.error(key, value, problem, fix)
        self._unusable_keys.append(key)

    @property
    def failed(self) -> bool:
        """Whether this section, or anything inside it, was reported since it was read."""
        return self._unusable or self.errors.reported(self.path, since=self._first_error)

    def ok(self, *names: str) -> bool:
        """Whether the named keys (and everything inside them) passed: guard checks that combine them."""
        return not self._unusable and not any(self.errors.reported(self.key(name), since=self._first_error)
                                              for name in names)

    def _default(self, name: str, given: Any) -> Any:
        """The default of `name` in this section: the row's, or the parser's where it computes one (`_row_default`)."""
        return _row_default(self.row(name), given)

    def _get(self, name: str, default: Any) -> Any:
        self._read.add(name)
        if name in self.data and self.errors.refused_value_at(self.key(name)):
            self._unusable_keys.append(self.key(name))
            return _MISSING  # reported by the stack file reader: the getter's placeholder, and nothing more
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is _MISSING and not self._unusable and name not in self._empty:
            self.errors.append(ConfigProblem(self.key(name), "required key is missing", "set it in the stack file."))
            self._unusable_keys.append(self.key(name))
        return default

    def missing(self, name: str, why: str, fix: str) -> None:
        """Report `name` as required here though the schema lets it be left out elsewhere."""
        if name in self._empty:
            return  # reported as empty
        self.errors.append(ConfigProblem(self.key(name), f"required key is missing: {why}", fix))

    def has(self, name: str) -> bool:
        self._asked.add(name)
        return self.data.get(name) is not None

    def optional_string(self, name: str, *, check: Callable[[str], str | None] | None = None,
                        fix: str = "") -> str | None:
        """A string that may be left out (None then): a key whose row says UNSET or Derived."""
        return self.string(name, check=check, fix=fix) if self.has(name) else self._get(name, self._default(name, None))

    def string(self, name: str, default: Any = _MISSING, *, choices: tuple[str, ...] = (),
               check: Callable[[str], str | None] | None = None, fix: str = "", empty_ok: bool = False,
               parser_judges_choices: bool = False) -> str:
        """`choices`: the row's allowed values (a parser passes only its vocabulary's: `choice`);
        `parser_judges_choices`: the parser judges them itself, with messages of its own."""
        choices = () if parser_judges_choices else _row_choices(self.row(name), choices)
        default = self._default(name, default)
        value = self._get(name, default)
        if value is _MISSING:
            return ""
        if not isinstance(value, str):
            self.unusable(self.key(name), value, "must be a string", fix or "quote the value")
            return ""
        if not value.strip() and not empty_ok and default is not _MISSING and name in self.data:
            # Written out, an empty text is a value the user meant: read as the default, it
            # would pass silently (an empty lustre.availabilityZone is no zone, not the default's).
            wanted = f"use one of {', '.join(choices)}" if choices else "give it a value"
            self.unusable(self.key(name), value, "is empty", f"{wanted}, or remove the key to use its default")
            return ""
        if choices and value not in choices:
            self.unusable(self.key(name), value, f"must be one of {', '.join(choices)}", f"use one of {', '.join(choices)}")
            return ""
        if check is not None:
            problem = check(value)
            if problem:
                self.unusable(self.key(name), value, problem, fix)
                return ""
        return value

    def choice(self, name: str, vocabulary: type[Vocabulary], default: Any = _MISSING) -> Vocabulary | None:
        """One value of a closed vocabulary; None after recording an error."""
        value = self.string(name, default, choices=tuple(vocabulary))
        return vocabulary(value) if value else None

    def integer(self, name: str, default: Any = _MISSING, *, minimum: int | None = None,
                maximum: int | None = None, fix: str = "") -> int:
        default = self._default(name, default)
        value = self._get(name, default)
        if value is _MISSING:
            return 0
        return self.check_integer(self.key(name), value, minimum=minimum, maximum=maximum, fix=fix)

    def check_integer(self, key: str, value: Any, *, minimum: int | None = None,
                      maximum: int | None = None, fix: str = "") -> int:
        minimum, maximum = _row_bounds(row_of(key), minimum, maximum)
        placeholder = minimum if minimum is not None else 0
        # bool is an int subclass in Python; `true` is never a valid count or port.
        if isinstance(value, bool) or not isinstance(value, int):
            self.unusable(key, value, "must be a whole number", self._whole_number_fix(key, value, fix))
            return placeholder
        if maximum is None and value > INT32_MAX:
            self.unusable(key, value, f"must be at most {INT32_MAX}: the Kubernetes and AWS APIs store it as a 32-bit integer",
                          fix or "choose a smaller value")
            return placeholder
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            self.unusable(key, value, f"must be {bounds}", fix or f"choose a value {bounds}")
            return placeholder
        if value < INT32_MIN:
            self.unusable(key, value, f"must be at least {INT32_MIN}: the APIs store it as a 32-bit integer",
                          fix or "choose a larger value")
            return placeholder
        return value

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        default = self._default(name, default)
        value = self._get(name, default)
        if value is _MISSING:
            return False
        if not isinstance(value, bool):
            word = value.strip().lower() if isinstance(value, str) else None
            fix = ("write true or false without quotes" if word not in ("true", "false")
                   else "remove the quotes" if self.errors.hides(self.key(name))
                   else f"remove the quotes: write {word}, not {json.dumps(value)}")
            self.unusable(self.key(name), value, "must be true or false", fix)
            return False
        return value

    def _whole_number_fix(self, key: str, value: Any, fix: str) -> str:
        """The fix of a value that is no whole number: a number written as text is told to lose its
        quotes whatever the key's own fix (a range) says, since the value may well be in range."""
        if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value.strip()):
            return ("remove the quotes" if self.errors.hides(key)
                    else f"remove the quotes: write {int(value.strip())}, not {json.dumps(value)}")
        if isinstance(value, float) and value.is_integer() and not self.errors.hides(key):
            return f"write {int(value)}, without the decimal point"
        return fix or "write a number without quotes"

    def items(self, name: str, default: Any = _MISSING) -> list[Any]:
        default = self._default(name, default)
        value = self._get(name, default)
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            self.unusable(self.key(name), value, "must be a list", "write it as a YAML list: [a, b]")
            return []
        return value

    def mapping(self, name: str, default: Any = _MISSING) -> dict[str, Any]:
        default = self._default(name, default)
        value = self._get(name, default)
        if value is _MISSING:
            return {}
        if not isinstance(value, Mapping):
            self.unusable(self.key(name), value, "must be a mapping", "write it as `key: value` lines")
            return {}
        return dict(value)

    def section(self, name: str, default: Any = _MISSING, *, null_entries: bool = False) -> Section:
        default = self._default(name, default)
        value = self._get(name, default)
        return Section(self.errors, self.key(name), value, missing=value is _MISSING, null_entries=null_entries)

    def text(self, key: str, value: Any) -> str | None:
        """A free-form value that reaches a pod or an API as text (env values, labels, args).

        Text passes as it is and whole numbers in decimal (`8` -> "8"); anything else would change
        on the way (`true` -> "True", `0.10` -> "0.1", an empty value -> "None") and is rejected.
        """
        if self.errors.refused_value_at(key):
            self._unusable_keys.append(key)
            return None
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        self.unusable(key, value, "must be text: a YAML true/false, decimal, null, list or mapping would not reach "
                      "its destination as written", 'quote it, e.g. "true" or "0.10" (an empty value is "")')
        return None

    def string_map(self, name: str) -> dict[str, str]:
        """A mapping of names to text values (see `text`); rejected entries are left out."""
        result = {}
        for entry, value in self.mapping(name).items():
            converted = self.text(f"{self.key(name)}.{entry}", value)
            if converted is not None:
                result[str(entry)] = converted
        return result

    def string_list(self, name: str, default: Any = _MISSING) -> list[str]:
        """A list of text values (see `text`); rejected items are left out."""
        result = []
        for index, value in enumerate(self.items(name, default)):
            converted = self.text(f"{self.key(name)}[{index}]", value)
            if converted is not None:
                result.append(converted)
        return result

    def network(self, key: str, value: Any) -> ipaddress.IPv4Network | None:
        """Parse an IPv4 CIDR (host bits must be zero); None after recording an error."""
        if not isinstance(value, str):  # Python reads a whole number as an address: 3325256704 is 198.51.100.0/32
            self.unusable(key, value, "must be a CIDR written as text", "write it like 10.20.0.0/16")
            return None
        if "/" not in value:  # Python would read a single address (/32)
            self.unusable(key, value, "has no prefix length (a CIDR is address/length)", "add it, e.g. 10.20.0.0/16")
            return None
        try:
            return ipaddress.IPv4Network(value, strict=True)
        except (ValueError, TypeError) as exc:
            self.unusable(key, value, f"is not a valid IPv4 CIDR ({exc})", "write it like 10.20.0.0/16 with the host bits zero")
            return None

    def ignore(self, *names: str) -> None:
        """Keys handled elsewhere: `finish` will not report them as unknown."""
        self._read.update(names)

    def finish(self) -> None:
        """Report keys nobody read: usually a typo that would otherwise be silently ignored."""
        for unknown in sorted(set(map(str, self.data)) - self._read - self._empty):
            # A zero-width space or a Cyrillic a (U+0430) makes a key unknown that reads like a known one:
            # such a key is shown with its characters escaped.
            odd = not (unknown.isascii() and unknown.isprintable() and unknown.strip() == unknown)
            spelled = f" (spelled {json.dumps(unknown)}: it holds invisible, space or non-ASCII characters)" if odd else ""
            self.errors.append(ConfigProblem(self.key(unknown), f"unknown key{spelled}", "remove it or correct the "
                                             f"spelling; {did_you_mean(unknown, sorted(self._read | self._asked))}"))
