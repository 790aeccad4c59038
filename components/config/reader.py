"""Reading raw stack configuration while collecting every error at once.

Each `Section` wraps one mapping of the stack file. Its getters return a usable placeholder
when a value is bad, so parsing carries on and the user sees all problems in one run; the
messages name the full key, the value received and how to fix it.
"""

from __future__ import annotations

import difflib
import ipaddress
from collections.abc import Callable, Mapping
from typing import Any

import pulumi


class ConfigError(pulumi.RunError):
    """Invalid stack configuration. `pulumi up` prints a RunError without a traceback."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        count = len(self.errors)
        heading = f"{count} configuration error{'s' if count != 1 else ''}; nothing was created:"
        super().__init__("\n".join([heading, *(f"  - {e}" for e in self.errors)]))


_MISSING = object()


def did_you_mean(word: str, choices: list[str]) -> str:
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"did you mean '{by_lower[close[0]]}'?" if close else f"known keys: {', '.join(sorted(choices))}."


class Section:
    """One mapping of config; `path` is the dotted key users see (e.g. `gpu-training:network`)."""

    def __init__(self, errors: list[str], path: str, data: Any, *, separator: str = "."):
        self.errors = errors
        self.path = path
        self.separator = separator
        self._read: set[str] = set()
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            self.error(path, data, "must be a mapping of keys to values", "write it as `key: value` lines")
            data = {}
        self.data = data

    def key(self, name: str) -> str:
        return f"{self.path}{self.separator}{name}"

    def error(self, key: str, value: Any, problem: str, fix: str) -> None:
        self.errors.append(f"{key}: {problem} (got {value!r}). Fix: {fix}")

    def _get(self, name: str, default: Any) -> Any:
        self._read.add(name)
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is _MISSING:
            self.errors.append(f"{self.key(name)}: required key is missing. Fix: set it in the stack file.")
        return default

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def optional_string(self, name: str, *, check: Callable[[str], str | None] | None = None,
                        fix: str = "") -> str | None:
        """A string that may be left out (None then)."""
        return self.string(name, check=check, fix=fix) if self.has(name) else self._get(name, None)

    def string(self, name: str, default: Any = _MISSING, *, choices: tuple[str, ...] = (),
               check: Callable[[str], str | None] | None = None, fix: str = "") -> str:
        value = self._get(name, default)
        if value is _MISSING:
            return ""
        if not isinstance(value, str):
            self.error(self.key(name), value, "must be a string", fix or "quote the value")
            return ""
        if choices and value not in choices:
            self.error(self.key(name), value, f"must be one of {', '.join(choices)}", f"use one of {', '.join(choices)}")
            return value
        if check is not None:
            problem = check(value)
            if problem:
                self.error(self.key(name), value, problem, fix)
        return value

    def integer(self, name: str, default: Any = _MISSING, *, minimum: int | None = None,
                maximum: int | None = None, fix: str = "") -> int:
        value = self._get(name, default)
        if value is _MISSING:
            return 0
        return self.check_integer(self.key(name), value, minimum=minimum, maximum=maximum, fix=fix)

    def check_integer(self, key: str, value: Any, *, minimum: int | None = None,
                      maximum: int | None = None, fix: str = "") -> int:
        # bool is an int subclass in Python; `true` is never a valid count or port.
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(key, value, "must be a whole number", fix or "write a number without quotes")
            return minimum or 0
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            bounds = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            self.error(key, value, f"must be {bounds}", fix or f"choose a value {bounds}")
        return value

    def boolean(self, name: str, default: Any = _MISSING) -> bool:
        value = self._get(name, default)
        if value is _MISSING:
            return False
        if not isinstance(value, bool):
            self.error(self.key(name), value, "must be true or false", "write true or false without quotes")
            return False
        return value

    def items(self, name: str, default: Any = _MISSING) -> list[Any]:
        value = self._get(name, default)
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            self.error(self.key(name), value, "must be a list", "write it as a YAML list: [a, b]")
            return []
        return value

    def mapping(self, name: str, default: Any = _MISSING) -> dict[str, Any]:
        value = self._get(name, default)
        if value is _MISSING:
            return {}
        if not isinstance(value, Mapping):
            self.error(self.key(name), value, "must be a mapping", "write it as `key: value` lines")
            return {}
        return dict(value)

    def section(self, name: str, default: Any = _MISSING) -> Section:
        value = self._get(name, default)
        return Section(self.errors, self.key(name), None if value is _MISSING else value)

    def network(self, key: str, value: Any) -> ipaddress.IPv4Network | None:
        """Parse an IPv4 CIDR (host bits must be zero); None after recording an error."""
        try:
            return ipaddress.IPv4Network(value, strict=True)
        except (ValueError, TypeError) as exc:
            self.error(key, value, f"is not a valid IPv4 CIDR ({exc})", "write it like 10.20.0.0/16 with the host bits zero")
            return None

    def ignore(self, *names: str) -> None:
        """Keys handled elsewhere: `finish` will not report them as unknown."""
        self._read.update(names)

    def finish(self) -> None:
        """Report keys nobody read: usually a typo that would otherwise be silently ignored."""
        for unknown in sorted(set(self.data) - self._read):
            self.errors.append(
                f"{self.key(unknown)}: unknown key. Fix: remove it or correct the spelling; "
                f"{did_you_mean(unknown, sorted(self._read))}"
            )
