"""torchrun whose workers start from its own interpreter, torch already imported (in-place restarts).

Why: after a worker fails, an in-place round (launcher.inplace) starts new worker processes, and
a new Python interpreter importing torch is most of what a round costs (bench/recovery_bench.py's
breakdown, docs/testing.md: the interpreter and torch import alone took 7.8 to 12.8 s of a worker's
9 to 20 s start on the loaded 2-CPU development machine, against a 2 to 3.7 s round). torchrun already has torch imported, and
starts workers from itself when the entrypoint is a function: its multiprocessing context
(torch/distributed/elastic/multiprocessing/api.py MultiprocessContext, `--start-method fork`),
the path its own `--run-path` takes for a script (torch/distributed/run.py run_script_path, torch
2.13.0). This module is torchrun (`python -m launcher.preloaded_workers <torchrun arguments>`)
with a Python training command (`-m MODULE` or `SCRIPT.py`) run that way: each worker is a fork
of torchrun, still its direct child (the launcher's watch, signal forwarding and the bench see
the same process tree), that runs the command as `python -u` would have. `--no-python` commands
and anything else are torchrun's unchanged.

What a fork must redo that a new interpreter did (`run_command`): torchrun's signal handlers (its
PContext raises SignalException on SIGTERM, SIGINT, SIGHUP, SIGQUIT) back to Python's defaults;
torchrun's sockets released (`_release_inherited_sockets`); unbuffered stdout and stderr (`-u`);
sys.argv; the site customisations, rerun now that the worker's variables are set (the launcher's
worker hooks, launcher.worker_site, and the image's own), before sys.path[0] is the worker's; `-m`
through runpy._run_module_as_main, as `python -m` (a missing module is its start-up exit); an
uncaught error through sys.excepthook (the worker hooks' report: a config error still exits 2 and
is never retried); non-daemon threads joined and atexit handlers run, in the interpreter's order,
before the exit code goes back to torchrun (those registered in torchrun before the fork are its
imported modules' own, which a new interpreter importing them registers as well).

Only with in-place restarts on (launcher.main.torchrun_command): what only hardware can show is
whether a fork of torchrun behaves on a GPU node (torchrun initialises no CUDA before it forks;
the rendezvous' keep-alive thread and, on the host node, its TCPStore server are running). A fork
keeps torchrun's descriptors other than its sockets: multiprocessing's pipes, which the worker
needs, and the stores' event loops (epoll, io_uring, eventfd), which hold nothing outside the
process. Measured in a `--standalone` worker: 26 descriptors beyond stdio, 6 of them sockets
(now /dev/null), against none beyond stdio in a new interpreter torchrun starts.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.machinery
import importlib.util
import io
import logging
import os
import runpy
import signal
import stat
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

# torchrun's PContext installs handlers for these in torchrun (torch/distributed/run.py
# `--signals-to-handle`, default "SIGTERM,SIGINT,SIGHUP,SIGQUIT"); a fork inherits them.
_TORCHRUN_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


def python_command(cmd: Any, cmd_args: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """(`-m` or `path`, the module or script, its arguments) when torchrun would start `cmd
    cmd_args` as `python -u [-m] TARGET ARGS...` (run.py config_from_args), else None."""
    if not isinstance(cmd, str) or os.path.realpath(cmd) != os.path.realpath(os.getenv("PYTHON_EXEC", sys.executable)):
        return None
    args = list(cmd_args)
    if args[:1] != ["-u"] or len(args) < 2:
        return None
    if args[1] == "-m":
        return ("-m", args[2], args[3:]) if len(args) >= 3 else None
    return "path", args[1], args[2:]


def _reset_signals() -> None:
    for name in _TORCHRUN_SIGNALS:
        signum = getattr(signal, name)
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _release_inherited_sockets() -> int:
    """torchrun's sockets, each replaced by /dev/null in this fork; how many. A new interpreter
    started by torchrun has only stdin, stdout and stderr (subprocess's close_fds), and a fork has
    every descriptor of torchrun: on the host node the rendezvous store's listening socket (its
    port stays bound while a worker lives, after torchrun is gone) and the stores' connections
    (a close by torchrun sends no end-of-stream while a worker holds a copy). Not closed: the C++
    store objects copied into this fork still hold the numbers, and were one of them destroyed
    here (a garbage collection) it would close whatever file the trainer had opened under that
    number since; /dev/null under it is harmless. Pipes, event and epoll descriptors stay: the
    child's end of multiprocessing's pipes (popen_fork's sentinels; the error and return-value
    queues of torch.multiprocessing.start_processes and elastic's MultiprocessContext) are pipes,
    and the rest hold nothing outside this process (the stores' event loops)."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # no /proc (not Linux): left as they are
        return 0
    null = os.open(os.devnull, os.O_RDWR)
    released = 0
    try:
        for fd in (int(name) for name in names):
            with contextlib.suppress(OSError):  # listdir's own descriptor, closed since
                if fd > 2 and fd != null and stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.dup2(null, fd, inheritable=False)
                    released += 1
    finally:
        os.close(null)
    return released


def _unbuffered_stdio() -> None:
    """`python -u`: stdout and stderr written through, unbuffered, as torchrun's subprocesses have them."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        with_errors = getattr(stream, "errors", None) or "backslashreplace"
        setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=getattr(stream, "encoding", None),
                                            errors=with_errors, write_through=True))


def _rerun_sitecustomize() -> None:
    """The site customisation an interpreter start runs (launcher.worker_site first on PYTHONPATH: it
    installs the worker hooks now that LOCAL_RANK is set, then the image's own)."""
    # Searched on sys.path as at start: sys.modules holds the image's by now (worker_site ran it after itself).
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize")
    if spec is None or spec.loader is None or spec.origin is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _interpreter_exit() -> None:
    """What an interpreter does after its main module: non-daemon threads joined, then atexit."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # pyright: ignore[reportAttributeAccessIssue]  # the interpreter's own call at exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _worker_path(kind: str, target: str) -> str:
    """The sys.path[0] a new interpreter gives the command: the working directory for `-m`, the
    script's directory otherwise."""
    return os.getcwd() if kind == "-m" else os.path.dirname(os.path.abspath(target))


def _start_interpreter(kind: str, target: str) -> None:
    """The site customisation as an interpreter start runs it, then sys.path[0]. An interpreter
    imports `site` before it puts the script's directory (or, for `-m`, the working directory) on
    sys.path, so a sitecustomize.py there is not run: torchrun's own sys.path[0] goes first
    (PYTHONSAFEPATH or -P: there is none), and the worker's comes after."""
    first = not sys.flags.safe_path
    if first and sys.path:
        del sys.path[0]
    try:
        _rerun_sitecustomize()
    finally:
        if first:
            sys.path.insert(0, _worker_path(kind, target))


def _run_main(kind: str, target: str) -> None:
    """`python -m TARGET` is runpy._run_module_as_main (Lib/runpy.py, called from Modules/main.c):
    a module it cannot find is `sys.exit("<python>: No module named ...")` from it, which the
    worker hooks read as a start-up exit (launcher.worker_exit StartupExits). It runs the module in
    `__main__`'s namespace: a new, empty one, as a new interpreter's, not torchrun's."""
    if kind == "-m":
        sys.modules["__main__"] = types.ModuleType("__main__")
        runpy._run_module_as_main(target, alter_argv=True)  # pyright: ignore[reportAttributeAccessIssue]  # python -m's own
    else:
        runpy.run_path(target, run_name="__main__")


def run_command(kind: str, target: str, *args: str) -> None:
    """A worker: `python -u -m TARGET ARGS` (`kind` "-m") or `python -u TARGET ARGS` ("path") run
    in this forked process. A nonzero exit is raised as SystemExit, an error re-raised after
    sys.excepthook saw it, so torchrun records either as a failure (elastic record, ProcessFailure)."""
    _reset_signals()
    _release_inherited_sockets()
    _unbuffered_stdio()
    sys.argv = [target, *args]
    code: int | str | None = 0
    error: BaseException | None = None
    try:
        _start_interpreter(kind, target)
        _run_main(kind, target)
    except SystemExit as e:
        code = e.code
    except BaseException as e:  # as the interpreter: reported by the excepthook, exit 1
        sys.excepthook(type(e), e, e.__traceback__)
        error, code = e, 1
    _interpreter_exit()
    if isinstance(error, Exception):
        raise error
    if code not in (0, None):
        raise SystemExit(code)


def preloaded(config_from_args: Callable[..., tuple[Any, Any, list[str]]]) -> Callable[..., tuple[Any, Any, list[str]]]:
    """torchrun's config_from_args, with a Python training command started by fork as `run_command`."""
    def config_with_forked_workers(args: Any) -> tuple[Any, Any, list[str]]:
        config, cmd, cmd_args = config_from_args(args)
        command = python_command(cmd, cmd_args)
        if command is None or cuda_initialized():
            return config, cmd, cmd_args
        kind, target, rest = command
        config.start_method = "fork"
        return config, run_command, [kind, target, *rest]

    return config_with_forked_workers


class ExceptionInMessage(logging.Filter):
    """A record's exception text moved into its message. torchrun logs a failed worker of its
    multiprocessing context with `logger.exception` (elastic/multiprocessing/api.py
    MultiprocessContext._poll), and torch's log formatter imports torch._dynamo to format any
    record with an exception (torch/_logging/_internal.py TorchLogsFormatter.format): seconds
    between a worker's failure and the restart round, measured in torchrun under load (the figure:
    docs/testing.md, the in-place recovery). The same text, formatted as logging.Formatter does,
    without that import."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.msg, record.args = f"{record.getMessage()}\n{text}", None
            record.exc_info, record.exc_text = None, None
        return True


# What workers import later that `import torch` does not, imported once in torchrun before its
# agent starts (one thread then, none started by these), so that no round's worker pays it:
# torch._dynamo, which DistributedDataParallel's constructor imports (torch/nn/parallel/distributed.py
# `torch._dynamo.utils.get_optimize_ddp_mode()`, torch 2.13.0): 9 to 11 s of a restarted worker's
# start on the loaded 2-CPU development machine, measured. multiprocessing's forkserver preload
# (multiprocessing.set_forkserver_preload) is the same idea.
PRELOAD = ("torch._dynamo",)


# torch's documented way to ask "is CUDA usable" without initialising CUDA in a process that will
# fork (torch.cuda.is_available docs, "PYTORCH_NVML_BASED_CUDA_CHECK": "useful if forked processes
# fail with a CUDA initialization error"): set while the preloads run, should one of them ask.
_NVML_CHECK_VAR = "PYTORCH_NVML_BASED_CUDA_CHECK"


def _preload() -> None:
    asked = os.environ.get(_NVML_CHECK_VAR)
    os.environ[_NVML_CHECK_VAR] = "1"
    try:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception as e:  # the workers then import it themselves, as without this module
                sys.stderr.write(f"launcher: {name} not preloaded for the workers: {type(e).__name__}: {e}\n")
    finally:
        if asked is None:
            del os.environ[_NVML_CHECK_VAR]
        else:
            os.environ[_NVML_CHECK_VAR] = asked


def cuda_initialized() -> bool:
    """Whether this process initialised CUDA: a fork of it could not use CUDA (torch refuses, "Cannot
    re-initialize CUDA in forked subprocess"), so its workers start as torchrun's own then."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


# The logger of torchrun's multiprocessing contexts (its module's name: elastic.utils.logging.get_logger).
_WORKER_FAILURE_LOGGER = "torch.distributed.elastic.multiprocessing.api"


def main(argv: list[str] | None = None) -> None:
    from torch.distributed import run as torchrun

    logging.getLogger(_WORKER_FAILURE_LOGGER).addFilter(ExceptionInMessage())
    _preload()
    torchrun.config_from_args = preloaded(torchrun.config_from_args)  # run() looks it up at its call
    torchrun.main(argv)


if __name__ == "__main__":
    main()
