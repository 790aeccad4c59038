"""Run a command of this repository under the project's virtualenv, whichever python started it.

Docs show the scripts run directly (`scripts/new-team-stack nlp prod`): their shebang finds the
first `python3` on PATH, which outside an activated venv is one without the Pulumi SDK. Each
script calls `require(...)` before its first import of a package the venv holds:

- the packages are importable (an activated venv, `.venv/bin/python scripts/...`): nothing happens;
- else, when `<repository>/.venv/bin/python` exists, the same command line runs again under it;
- else (or that venv lacks them too): exit 2 with one line naming the make target that builds it.

Stdlib only, and nothing newer than the pythons a fresh machine may start it with: it runs before
the interpreter is known to be the project's (3.11).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
USAGE_ERROR = 2
# The top-level modules of requirements.txt (what `make venv` installs): every script that plans
# or reads a stack needs them.
RUNTIME_MODULES = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "yaml")


def require(prog: str, modules: tuple[str, ...] = RUNTIME_MODULES, make_target: str = "venv") -> None:
    """Return when `modules` are importable; otherwise re-run this process under the project's venv
    or exit 2 with one line saying `make <make_target>`."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    if VENV_PYTHON.exists() and not _is_venv_python():
        try:
            os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), *_command_line()])
        except OSError as error:  # a venv whose interpreter is gone (its base python was removed)
            _exit(prog, f"{VENV_PYTHON} cannot run ({error.strerror}): run `make clean {make_target}`")
    where = "its virtualenv lacks" if VENV_PYTHON.exists() else "no virtualenv at .venv, and this python lacks"
    _exit(prog, f"{where} {', '.join(missing)}: run `make {make_target}` in {ROOT}, then run it again")


def _is_venv_python() -> bool:
    """Already the venv's interpreter (by its prefix, or as the path started: `-S` keeps the base
    prefix): a second exec would loop."""
    return (Path(sys.prefix).resolve() == VENV.resolve()
            or os.path.abspath(sys.executable) == str(VENV_PYTHON))


def _command_line() -> list[str]:
    """The arguments after the interpreter, as started: `-m bench.x`, flags and the script path
    relative to the unchanged working directory (orig_argv is 3.10+; before it, the script's)."""
    original = getattr(sys, "orig_argv", None)
    return list(original[1:]) if original else [sys.argv[0], *sys.argv[1:]]


def _exit(prog: str, message: str) -> NoReturn:
    sys.stderr.write(f"{prog}: error: {message}\n")
    sys.exit(USAGE_ERROR)
