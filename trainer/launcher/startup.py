"""Can this pod's training command start at all? Checked by the launcher before torchrun, so that
what no restart can cure exits 2 (a config error: the JobSet fails at once) instead of torchrun's
1, which spends a restart each time:

- torch absent: `python -m torch.distributed.run` itself fails with "No module named torch";
- a script that is not there: Python exits 2 with "can't open file" from C, before any hook of
  the launcher runs in the worker;
- a `-m` module whose top-level package is not importable, an executable not on PATH.

A missing submodule (`-m my_project.tarin`) is caught in the worker (launcher.worker_exit: runpy's
exit), since finding it would import its parent packages here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from typing import Any

PYTHON_WORDS = {"python", "python3", sys.executable, os.path.basename(sys.executable)}


class UsageError(Exception):
    pass


def training_command(command: list[str]) -> list[str]:
    """The command torchrun starts on every local rank, without an interpreter word."""
    if not command:
        raise UsageError("no training command given (e.g. python -m launcher -- -m my.train)")
    command = list(command)
    if command[0] in PYTHON_WORDS:
        command = command[1:]
        if not command:
            raise UsageError("the training command is only a Python interpreter")
    if command[0].startswith("-") and command[0] != "-m":
        raise UsageError(f"unsupported interpreter option {command[0]!r}: use -m MODULE or a script")
    if command[0] == "-m" and len(command) < 2:
        raise UsageError("-m needs a module name")
    return command


def is_python(command: list[str]) -> bool:
    return command[0] == "-m" or command[0].endswith(".py")


def command_problems(command: list[str], *, find_spec: Callable[[str], Any] = importlib.util.find_spec,
                     cwd: str | None = None) -> list[str]:
    """Why `command` (a training_command) cannot start here; one line each, empty when it can."""
    cwd = cwd or os.getcwd()
    problems = []
    if find_spec("torch") is None:
        problems.append(f"torch is not installed for {sys.executable}: the launcher runs the trainer under "
                        "torchrun (python -m torch.distributed.run); install torch in the image")
    if command[0] == "-m":
        top = command[1].split(".")[0]
        if find_spec(top) is None:
            problems.append(f"-m {command[1]}: no module named {top!r} on the workers' path (PYTHONPATH and "
                            f"the working directory {cwd}): check the name, or install the package")
    elif command[0].endswith(".py"):
        if not os.path.isfile(os.path.join(cwd, command[0])):
            problems.append(f"training script {command[0]!r} does not exist (working directory {cwd})")
    elif shutil.which(command[0]) is None:
        problems.append(f"training command {command[0]!r} is neither a file nor on PATH")
    return problems
