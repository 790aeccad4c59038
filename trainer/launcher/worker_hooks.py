"""What the launcher installs in every training worker at interpreter start (worker_site), so
that an unmodified PyTorch script gets the platform's duties done:

- liveness: PyTorch's global optimizer-step post hook feeds launcher.autoprogress (heartbeat,
  step lines), registered as soon as `torch.optim.optimizer` is imported;
- a bounded collective timeout: `torch.distributed.init_process_group` gets at most
  TRAIN_COLLECTIVE_TIMEOUT_S (HF Trainer, Lightning and Accelerate default to 1800 s, so a frozen
  peer would be noticed only by the liveness probe);
- errors (launcher.worker_exit): every uncaught error printed whole and reported (`worker_error`);
  one that no restart can cure (a TypeError, ValueError, KeyError, ... or `ConfigError`, raised
  before this process's first optimizer step) and a start-up exit (argparse's `SystemExit(2)`, a
  missing `-m` module) are written to TRAIN_CONFIG_ERROR_FILE, so the pod exits 2 and the JobSet
  fails at once instead of spending every restart on it. Errors that a restart may cure (OSError,
  RuntimeError such as a NCCL or CUDA failure, MemoryError) and anything after the first step keep
  torchrun's exit code;
- one run per gang (launcher.worker_gang): at the first optimizer step, a worker outside a process
  group of the contract's world size fails the pod with exit 2.

Nothing here imports torch: the hooks attach when the trainer imports it.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import importlib.abc
import importlib.machinery
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from . import autoprogress, inplace, progress, worker_gang
from .worker_exit import STARTUP_EXITS, ConfigError, ensure_outermost, excepthook, is_config_error, report_config_error

__all__ = ["ConfigError", "bounded_init_process_group", "install", "is_config_error", "report_config_error"]


def bounded_init_process_group(init: Callable[..., Any], limit_s: float) -> Callable[..., Any]:
    """`init_process_group` whose timeout is at most `limit_s` (also when the caller gives none)."""
    signature = inspect.signature(init)
    limit = datetime.timedelta(seconds=limit_s)

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        asked = bound.arguments.get("timeout")
        if asked is None or asked > limit:
            bound.arguments["timeout"] = limit
            if os.environ.get("RANK", "0") == "0":
                progress.log("collective_timeout_bounded", asked_s=None if asked is None else asked.total_seconds(),
                             bound_s=limit_s)
        return init(*bound.args, **bound.kwargs)

    return init_process_group


def _wrap_init_process_group(c10d: ModuleType) -> None:
    """The timeout bound, then the gang's world-size check (launcher.worker_gang)."""
    try:
        limit_s = float(os.environ.get("TRAIN_COLLECTIVE_TIMEOUT_S", ""))
    except ValueError:
        limit_s = 0.0
    if limit_s > 0:
        c10d.init_process_group = bounded_init_process_group(c10d.init_process_group, limit_s)  # pyright: ignore[reportAttributeAccessIssue]
    c10d.init_process_group = worker_gang.checked_init_process_group(c10d.init_process_group)  # pyright: ignore[reportAttributeAccessIssue]


def _register_step_hook(optimizer_module: ModuleType) -> None:
    # The gang check first: it must see the first step before the reporter marks it stepped.
    optimizer_module.register_optimizer_step_post_hook(worker_gang.CHECK.on_optimizer_step)
    optimizer_module.register_optimizer_step_post_hook(autoprogress.REPORTER.on_optimizer_step)
    optimizer_module.register_optimizer_step_post_hook(_hook_on_top_at_first_step)


def _hook_on_top_at_first_step(*_: Any) -> None:
    """Once: a framework or library imported since start may have replaced sys.excepthook."""
    if autoprogress.REPORTER.optimizer_steps <= 1:
        ensure_outermost()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function on a module right after it executed, the first time it is imported
    (before any `from x import *` of a parent package copies its names)."""

    def __init__(self, hooks: dict[str, Callable[[ModuleType], None]]):
        self.hooks = hooks

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.hooks:
            return None
        spec = None
        for finder in sys.meta_path:  # the finder that would have found it (editable installs have their own)
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        hook = self.hooks.pop(fullname)
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            try:
                hook(module)
            except Exception as e:  # the trainer must still run
                sys.stderr.write(f"launcher: hook on {fullname} failed: {type(e).__name__}: {e}\n")

        spec.loader.exec_module = exec_module  # pyright: ignore[reportAttributeAccessIssue]  # this spec's own loader
        return spec


def _hook_imported(hooks: dict[str, Callable[[ModuleType], None]]) -> None:
    """The hooks of modules imported already, run now and dropped from `hooks`: argparse in any
    worker; torch's too in a worker forked from torchrun (launcher.preloaded_workers). Modules that
    took init_process_group by name at their import keep the original: torch.distributed (`from
    .distributed_c10d import *`), torch.distributed.device_mesh (which init_device_mesh calls), a
    library's own. Each such copy is replaced too, or a trainer calling through it would miss the wrap."""
    for name in [name for name in hooks if name in sys.modules]:
        module, hook = sys.modules[name], hooks.pop(name)
        before = getattr(module, "init_process_group", None)
        hook(module)
        if before is not None:
            _rebind(before, module.init_process_group)


def _rebind(before: object, after: object) -> None:
    """Every module's `init_process_group` that is `before`, set to `after`."""
    for module in list(sys.modules.values()):
        try:
            if getattr(module, "init_process_group", None) is before:
                module.init_process_group = after  # pyright: ignore[reportAttributeAccessIssue]
        except Exception:  # a lazy module's __getattr__ or a read-only one: not a copy we can replace
            continue


def _not_after_a_report() -> None:
    """A restart round's worker ends before the trainer runs when an earlier round reported a
    config error or a stop (launcher.inplace.reported_before): exit 1, a failed round, which the
    launcher ends torchrun on; its report decides the pod's exit code, as without restarts."""
    reported = inplace.reported_before(os.environ)
    if reported is None:
        return
    sys.stderr.write(f"launcher: restart round {os.environ.get('TORCHELASTIC_RESTART_COUNT')} not run: "
                     f"an earlier round reported {reported}\n")
    sys.stderr.flush()
    os._exit(1)  # nothing of the trainer ran: nothing to clean up, and the interpreter is still starting


# Set by the first process that installs the hooks: the worker torchrun started. The processes
# it starts itself (DataLoader workers, compile workers, helpers) inherit the variable and keep
# out: their errors and steps are not the worker's.
WORKER_PID_VAR = "TRAIN_WORKER_PID"


def install() -> None:
    owner = os.environ.get(WORKER_PID_VAR)
    if owner and owner != str(os.getpid()):
        return
    os.environ[WORKER_PID_VAR] = str(os.getpid())
    _not_after_a_report()
    sys.excepthook = excepthook(sys.excepthook)
    sys.exit = STARTUP_EXITS.wrap_exit(sys.exit)
    atexit.register(STARTUP_EXITS.report)
    hooks: dict[str, Callable[[ModuleType], None]] = {
        "torch.optim.optimizer": _register_step_hook,
        "torch.distributed.distributed_c10d": _wrap_init_process_group,
        "transformers.training_args": worker_gang.CHECK.note_training_args,
    }
    hooks["argparse"] = STARTUP_EXITS.patch_argparse
    _hook_imported(hooks)
    sys.meta_path.insert(0, _AfterImport(hooks))
    try:  # a restart round's workers resume from what the rounds before committed
        inplace.refresh_resume(os.environ)
    except Exception as e:  # the launcher's choice stands; the trainer's fallback loads what it can
        sys.stderr.write(f"launcher: resume not chosen again: {type(e).__name__}: {e}\n")
