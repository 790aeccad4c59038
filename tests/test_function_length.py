"""Functions stay short enough to read in one screen: none in the product (every module outside the
tests and the virtualenvs: the program, its offline plan, the bootstrap, its scripts, the go-live
checks, the job command, the benches, the policy pack, the trainer image) is longer than MAX_LINES (a
long one is split into named steps); a module longer than MAX_MODULE_LINES says why in its first
lines."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 80
MAX_MODULE_LINES = 600
LONG_MODULE_REASON = "# Over 600 lines: "
# Folders that hold no product code, from the root: the tests, the policy pack's virtualenv, the plans
# (dot folders such as .venv and caches are skipped everywhere). A new package is checked without being
# named here.
NOT_PRODUCT = frozenset({"tests", "build", "policy/tests", "policy/venv"})


def long_functions(source: str, max_lines: int = MAX_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function, nested or a method, longer than `max_lines` (decorators excluded)."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > max_lines]


@pytest.mark.parametrize(("source", "expected"), [
    ("def f():\n" + "    x = 1\n" * 79, []),                 # 80 lines: at the limit
    ("def f():\n" + "    x = 1\n" * 80, [("f", 81)]),
    ("class C:\n    def m(self):\n" + "        x = 1\n" * 80, [("m", 81)]),
    ("def outer():\n    def inner():\n" + "        x = 1\n" * 80, [("outer", 82), ("inner", 81)]),
])
def test_long_functions(source, expected):
    assert long_functions(source) == expected


def python_files() -> list[Path]:
    """Every product module, and the scripts without a suffix that run on Python."""
    modules = []
    for folder, subfolders, files in os.walk(ROOT):
        here = Path(folder).relative_to(ROOT)
        subfolders[:] = sorted(d for d in subfolders if (here / d).as_posix() not in NOT_PRODUCT
                               and not d.startswith(".") and d != "__pycache__")
        modules += [Path(folder) / name for name in sorted(files) if name.endswith(".py")]
    commands = [path for path in sorted((ROOT / "scripts").iterdir())
                if path.is_file() and not path.suffix and path.read_text().startswith("#!/usr/bin/env python")]
    return modules + commands


def test_no_function_is_longer_than_the_limit():
    found = [f"{path.relative_to(ROOT)}: {name} ({lines} lines)" for path in python_files()
             for name, lines in long_functions(path.read_text())]
    assert not found, f"split these into named steps of at most {MAX_LINES} lines:\n" + "\n".join(found)


def test_a_module_over_the_limit_says_why_at_its_top():
    found = [f"{path.relative_to(ROOT)} ({len(lines)} lines)" for path in python_files()
             if len(lines := path.read_text().splitlines()) > MAX_MODULE_LINES
             and not any(line.startswith(LONG_MODULE_REASON) for line in lines[:2])]
    assert not found, (f"split these, or give the reason in a first line `{LONG_MODULE_REASON}<why>.` "
                       "(after a #! line):\n" + "\n".join(found))
