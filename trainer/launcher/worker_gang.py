"""Is this worker part of one run with its gang? At the worker's first optimizer step it must be in
a process group whose world size is the contract's (PET_NNODES x PET_NPROC_PER_NODE).
Otherwise the gang is several independent runs writing to one output directory while every
heartbeat looks healthy: seen with Lightning's own example without `num_nodes` (a
SingleDeviceStrategy per worker) and HF Trainer on CPU without `use_cpu`. The worker then fails
the pod with exit 2 (a config error: a restart runs the same way) and a line naming the likely
cause. HF Trainer on CPU without `use_cpu` creates the process group and still trains alone: its
own `TrainingArguments.parallel_mode` says so. A trainer whose workers train alone on purpose sets
TRAIN_INDEPENDENT_WORKERS=true.

Registered by launcher.worker_hooks as a global optimizer-step post hook, before the liveness
reporter's, and after `init_process_group` (a default group of another size fails at once).
Nothing here imports torch before the trainer did.
"""

from __future__ import annotations

import functools
import os
import sys
import weakref
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from . import progress
from .worker_exit import exit_bounded, report_config_error

INDEPENDENT_VAR = "TRAIN_INDEPENDENT_WORKERS"
EXIT_NOT_ONE_RUN = 2  # a config error to the launcher (TRAIN_CONFIG_ERROR_FILE)


def expected_world_size(env: Mapping[str, str]) -> int | None:
    """The contract's world size, or None when there is nothing to check (one worker, or workers
    that are independent on purpose)."""
    if env.get(INDEPENDENT_VAR, "").strip().lower() in ("1", "true", "yes"):
        return None
    try:
        world = int(env.get("PET_NNODES", "1")) * int(env.get("PET_NPROC_PER_NODE", "1"))
    except ValueError:
        return None
    return world if world > 1 else None


def likely_causes(modules: Mapping[str, Any], cuda: bool) -> list[str]:
    """What most likely left the framework single-process, from what the worker imported."""
    causes = []
    if "lightning" in modules or "pytorch_lightning" in modules:
        causes.append("Lightning was not told the node count: L.Trainer(num_nodes=PET_NNODES, "
                      "devices=PET_NPROC_PER_NODE), or L.Trainer(**trainer_kwargs()) from launcher.integrations.lightning")
    if "transformers" in modules and not cuda:
        causes.append("a CPU/GPU device mismatch: on a node without CUDA, HF Trainer runs distributed only with "
                      "TrainingArguments(use_cpu=True) (--use_cpu)")
    causes.append("the framework was not told the node count, or chose a device the node does not have")
    return causes


def gang_problem(expected: int | None, world: int | None, causes: list[str], framework_alone: str = "") -> str | None:
    """The config-error line, or None when this worker is in a process group of the expected size
    (`world` is None when it is in none) and its framework did not decide to train alone anyway
    (`framework_alone` says so)."""
    if expected is None or (world == expected and not framework_alone):
        return None
    if framework_alone:
        return (f"the gang is not one run: {framework_alone}, although a process group of world size {world} "
                f"exists; each worker trains alone. Likely cause: " + "; or ".join(causes)
                + f". A trainer whose workers train alone on purpose: set {INDEPENDENT_VAR}=true")
    where = "in no process group" if world is None else f"in a process group of world size {world}"
    return (f"the gang is not one run: this worker stepped its optimizer {where}, the contract's world size is "
            f"{expected} (PET_NNODES x PET_NPROC_PER_NODE), so each worker trains alone. Likely cause: "
            + "; or ".join(causes)
            + f". A trainer whose workers train alone on purpose: set {INDEPENDENT_VAR}=true")


def hf_training_alone(args: Any) -> str:
    """HF's own verdict, when the trainer made TrainingArguments: on CPU without `use_cpu`, its
    PartialState creates the process group, yet `parallel_mode` stays NOT_PARALLEL and the Trainer
    wraps no DDP (TrainingArguments._setup_devices, parallel_mode in transformers/training_args.py)."""
    try:
        mode = str(getattr(args.parallel_mode, "value", args.parallel_mode))
    except Exception:  # a TrainingArguments HF could not set up: its own error tells
        return ""
    return "" if mode == "distributed" else f"HF TrainingArguments.parallel_mode is {mode!r}, not 'distributed'"


class GangCheck:
    def __init__(self) -> None:
        self.checked = False
        self.training_args: weakref.ref | None = None
        """The last HF TrainingArguments the trainer made (note_training_args)."""

    def note_training_args(self, module: ModuleType) -> None:
        """After `transformers.training_args` is imported: remember each TrainingArguments made."""
        cls = module.TrainingArguments
        post_init = cls.__post_init__
        check = self

        def __post_init__(self: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807  # the dataclass hook's name
            result = post_init(self, *args, **kwargs)
            check.training_args = weakref.ref(self)
            return result

        cls.__post_init__ = __post_init__

    def on_optimizer_step(self, _optimizer: Any, _args: Any = None, _kwargs: Any = None) -> None:
        if self.checked:
            return
        self.checked = True
        expected = expected_world_size(os.environ)
        if expected is None:
            return
        import torch.distributed as dist

        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else None
        args = self.training_args() if self.training_args is not None else None
        self._fail_unless_one_run(expected, world, hf_training_alone(args) if args is not None else "")

    def after_init_process_group(self) -> None:
        """Right after the default process group exists: one of another size fails at once, before
        any step (a framework that passed its own `world_size`)."""
        import torch.distributed as dist

        expected = expected_world_size(os.environ)
        if expected is not None and dist.is_initialized():
            self._fail_unless_one_run(expected, dist.get_world_size(), "")

    def _fail_unless_one_run(self, expected: int, world: int | None, framework_alone: str) -> None:
        import torch

        problem = gang_problem(expected, world, likely_causes(sys.modules, torch.cuda.is_available()), framework_alone)
        if problem is None:
            return
        sys.stderr.write(f"launcher: error: {problem}\n")
        progress.log("gang_not_one_run", rank=int(os.environ.get("RANK", "0")), world_size=world, expected=expected)
        report_config_error([problem])
        exit_bounded(EXIT_NOT_ONE_RUN)


CHECK = GangCheck()


def checked_init_process_group(init: Callable[..., Any]) -> Callable[..., Any]:
    """`init_process_group` followed by the world-size check."""
    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = init(*args, **kwargs)
        CHECK.after_init_process_group()
        return result

    return init_process_group
