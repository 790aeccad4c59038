"""How a training worker ends when something goes wrong, whatever the trainer and its framework
installed (launcher.worker_hooks puts these in place at interpreter start):

- every uncaught error is printed whole on the pod's stderr and reported as a `worker_error` JSON
  line (type, message, rank) before the worker exits;
- an error no restart can cure, raised before the first optimizer step, and a start-up exit
  (argparse's `SystemExit(2)`, a `-m` module that does not exist) are written to
  TRAIN_CONFIG_ERROR_FILE with the line that says why: the pod exits 2 and the JobSet fails at
  once instead of spending every restart on it;
- a failed worker ends within EXIT_AFTER_ERROR_S, even when a frozen peer would hold up its
  shutdown.

Nothing here imports torch.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import os
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from . import autoprogress, contract, progress

# How long a worker that raised an uncaught error may take to end.
EXIT_AFTER_ERROR_S = 10.0


class ConfigError(ValueError):
    """Raise it (uncaught) for a configuration that cannot work: the pod exits 2, no restart."""


# Errors that are a property of the code or its configuration: a restart fails the same way.
# OSError (a flaky mount), RuntimeError (NCCL, CUDA, a dead peer) and MemoryError may not.
# ModuleNotFoundError, not every ImportError: a library that fails to load (libcuda on a bad
# node) may load on another node.
_CONFIG_ERROR_TYPES = (ConfigError, TypeError, ValueError, LookupError, AttributeError, NameError, ModuleNotFoundError,
                       AssertionError)
# Frameworks' own configuration errors, by class name (the framework may not be installed).
_CONFIG_ERROR_NAMES = {"MisconfigurationException"}


def is_config_error(error: BaseException) -> bool:
    if isinstance(error, (OSError, RuntimeError, MemoryError)):
        return False
    return isinstance(error, _CONFIG_ERROR_TYPES) or any(t.__name__ in _CONFIG_ERROR_NAMES for t in type(error).__mro__)


def report_config_error(lines: Sequence[str]) -> None:
    """Append lines to TRAIN_CONFIG_ERROR_FILE (every local rank may report the same error)."""
    path = os.environ.get(contract.CONFIG_ERROR_VAR)
    if not path:
        return
    try:
        with open(path, "a") as f:
            f.writelines(" ".join(line.split()) + "\n" for line in lines)
    except OSError as e:
        sys.stderr.write(f"launcher: cannot write {contract.CONFIG_ERROR_VAR} {path!r}: {e.strerror}\n")


def _rank() -> str:
    return os.environ.get("RANK", "0")


def print_whole(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    """The traceback on the process's real stderr, each line prefixed `[rankN]: ` as torch does.
    Not `sys.stderr`: torch's `_distributed_excepthook` (installed by `init_process_group`,
    torch/distributed/distributed_c10d.py) points `sys.stderr` at a StringIO while the hook it
    wraps runs and prints that buffer only after it returns; ours ends the process instead."""
    text = "".join(traceback.format_exception(etype, value, tb))
    lines = "".join(f"[rank{_rank()}]: {line}\n" for line in text.rstrip("\n").split("\n"))
    stream = sys.__stderr__
    try:
        assert stream is not None
        stream.write(lines)
        stream.flush()
    except Exception:  # a closed or missing stderr: the file descriptor still works
        with contextlib.suppress(OSError):
            os.write(2, lines.encode(errors="replace"))


def log_worker_error(etype: type[BaseException], value: BaseException) -> None:
    """The `worker_error` JSON line, on the real stdout (the launcher routes it to the pod's)."""
    with contextlib.suppress(Exception):
        progress.log("worker_error", stream=sys.__stdout__, rank=int(_rank()),
                     local_rank=int(os.environ.get("LOCAL_RANK", "0")), type=etype.__name__, message=str(value))


_HANDLING: list[bool] = []
"""Set while a worker hook handles an error: one further down the chain (ours again, under torch's
hook or a framework's) then leaves it to the outer one."""


def excepthook(previous: Callable[..., Any]) -> Callable[..., Any]:
    """sys.excepthook for a worker: print, report, mark the worker failed, end it (bounded)."""
    def hook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
        if _HANDLING:
            return
        _HANDLING.append(True)
        print_whole(etype, value, tb)
        log_worker_error(etype, value)
        if previous is not sys.__excepthook__:  # Python's own would print the traceback a second time
            with contextlib.suppress(Exception):
                previous(etype, value, tb)
        if is_config_error(value) and not autoprogress.REPORTER.stepped:
            report_config_error([f"{etype.__name__}: {value} (raised before the first optimizer step: "
                                 "a restart would fail the same way)"])
        failed = os.environ.get(contract.WORKER_FAILED_VAR)
        if failed:
            with contextlib.suppress(OSError):
                open(failed, "a").close()
        exit_bounded(1)

    hook.launcher_worker_hook = True  # pyright: ignore[reportFunctionMemberAccess]
    return hook


def ensure_outermost() -> None:
    """Put a worker hook on top again when another replaced sys.excepthook: one that keeps ours
    as its previous (torch's `_distributed_excepthook`) still reaches it, one that does not (an
    image's sitecustomize, a pretty-traceback library) would leave errors unreported."""
    if not getattr(sys.excepthook, "launcher_worker_hook", False):
        sys.excepthook = excepthook(sys.excepthook)


def exit_bounded(code: int) -> None:
    """End a worker that failed. Its normal shutdown can wait on a frozen peer for minutes: the
    destructors of its process groups, run when the interpreter finalizes, talk to that peer. So
    the atexit handlers (the trainer's own: loggers, uploads) get EXIT_AFTER_ERROR_S in a thread,
    and then the process ends without finalizing, and the pod fails within the collective timeout."""
    handlers = threading.Thread(target=getattr(atexit, "_run_exitfuncs", lambda: None), daemon=True)
    handlers.start()
    handlers.join(EXIT_AFTER_ERROR_S)
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()  # pyright: ignore[reportOptionalMemberAccess]
    os._exit(code)


class StartupExit(enum.Enum):
    """Why a worker asked to exit before its first optimizer step, when no restart can cure it."""

    USAGE = "usage"
    """Exit status 2: argparse's (and click's) command-line error, by convention."""
    NO_MODULE = "no_module"
    """runpy could not find the `-m` module (Python's own `sys.exit(message)`, status 1)."""


class StartupExits:
    """Records a start-up exit as `sys.exit` is called, and reports it when the process ends
    (atexit), unless it had stepped by then: a `SystemExit` is not an error, so no excepthook
    sees it, and torchrun turns the worker's 2 into its own 1."""

    def __init__(self) -> None:
        self.pending: tuple[StartupExit, str] | None = None
        self.usage_line = ""
        """argparse's last `prog: error: ...` line."""

    def wrap_exit(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def exit(status: object = None, /) -> Any:
            caller = sys._getframe(1).f_code.co_name
            self.note(status, caller)
            return original(status)

        return exit

    def note(self, status: object, caller: str) -> None:
        if autoprogress.REPORTER.stepped or self.pending is not None:
            return
        if caller == "_run_module_as_main" and isinstance(status, str):  # runpy, Lib/runpy.py
            self.pending = (StartupExit.NO_MODULE, status)
        elif status == 2:
            why = self.usage_line or "the trainer exited with status 2 (a command-line error, by convention)"
            self.pending = (StartupExit.USAGE, f"{why} (before the first optimizer step: a restart would fail the same way)")

    def patch_argparse(self, argparse: ModuleType) -> None:
        """Keep the line argparse prints before `exit(2)` (ArgumentParser.error, Lib/argparse.py)."""
        original = argparse.ArgumentParser.exit
        recorder = self

        def exit(self: Any, status: int = 0, message: str | None = None) -> Any:
            if status and message:
                recorder.usage_line = message.strip()
            return original(self, status, message)

        argparse.ArgumentParser.exit = exit

    def report(self) -> None:
        """At process exit: the pending start-up exit, if the process never stepped."""
        if self.pending is not None and not autoprogress.REPORTER.stepped:
            report_config_error([self.pending[1]])


STARTUP_EXITS = StartupExits()
