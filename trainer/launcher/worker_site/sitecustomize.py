"""Runs at the start of every Python process of a launcher-run job (the launcher puts this
directory first on PYTHONPATH). In a training worker (torchrun sets LOCAL_RANK for it) it installs
launcher.worker_hooks; then it runs the image's own sitecustomize, if there is one further along
sys.path, as Python would have without this one."""

from __future__ import annotations

import importlib.util
import os
import sys


def _install_worker_hooks() -> None:
    if "LOCAL_RANK" not in os.environ or not os.environ.get("TRAIN_HEARTBEAT_FILE"):
        return  # torchrun itself, or a process outside a launcher-run job
    try:
        from launcher import worker_hooks

        worker_hooks.install()
    except Exception as e:  # a worker must still start; its liveness will tell
        sys.stderr.write(f"launcher: worker hooks not installed: {type(e).__name__}: {e}\n")


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), "sitecustomize.py")
        if os.path.abspath(os.path.dirname(candidate)) == here or not os.path.isfile(candidate):
            continue
        spec = importlib.util.spec_from_file_location("sitecustomize", candidate)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
        return


def _worker_hook_on_top() -> None:
    """After the image's sitecustomize, which may have replaced sys.excepthook."""
    if "launcher.worker_exit" in sys.modules and os.environ.get("TRAIN_WORKER_PID") == str(os.getpid()):
        sys.modules["launcher.worker_exit"].ensure_outermost()


_install_worker_hooks()
_run_next_sitecustomize()
_worker_hook_on_top()
