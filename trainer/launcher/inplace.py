"""In-place restarts: a failed worker restarts the gang's workers inside the running pods.

torchrun's own restart rounds do it (`--max-restarts N`, which torchrun reads from its own
PET_MAX_RESTARTS when the flag is not given: torch/distributed/run.py, argparse_util.env;
torch/distributed/elastic/agent/server/api.py `SimpleElasticAgent._invoke_run`, torch 2.13.0):
when a local worker fails, its agent stops its other workers and joins the next c10d rendezvous
round, spending one of N; every other agent
sees the waiting node (`num_nodes_waiting() > 0` while its group is healthy, spending none) or its
own workers' failure (spending one), stops its workers and joins too; once all `PET_NNODES`
agents are in, every agent starts a new set of workers. Past N on any node its agent stops, torchrun
exits 1, the pod fails and JobSet recreates the gang as before (its failure policy, maxRestarts).

torchrun restarts whatever exit a worker has, so the launcher decides what must not be retried
(launcher.supervisor):
- a config error (TRAIN_CONFIG_ERROR_FILE) or a stop with the gang (TRAIN_STOPPED_FILE): torchrun
  is ended as soon as the workers are gone, before or after a new round started; the pod exits 2 or
  143 as before;
- a round's workers that start after such a report do not run the trainer (`reported_before`,
  from the worker hooks): a round that torchrun started before the launcher's next look (0.5 s
  apart, a forked round takes less) would otherwise report the error again or train after the stop;
- after a stop signal, a new round is ended at once (nothing trains after a stop);
- a round that does not start within `restart_wait_s` of the failure (a frozen or lost peer never
  rejoins: torchrun would wait for it for its join_timeout, TRAIN_RDZV_WAIT_S + 120 s) ends torchrun
  as a worker failure did before (exit 1): the gang fails within the collective timeout plus this.

With restarts on, a Python training command's workers are forks of torchrun, torch and torch._dynamo
already imported (launcher.preloaded_workers): a new interpreter and those imports were most of a
round's time. Nothing above changes with it: the worker hooks, the reports and the exit codes are
the same (tests/trainer/test_preloaded_workers.py).

Each round's workers resume from the newest committed checkpoint: the launcher chose
TRAIN_RESUME_FROM before torchrun started, so every worker of a torchrun allowed to restart
chooses again at its start (`refresh_resume`, from the worker hooks), the same way the launcher did.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from . import contract, progress, resume_choice

# torchrun's own setting, which the workload sets and torchrun reads itself; the launcher reads it
# too, for its watch over the rounds (launcher.supervisor). The wait is the launcher's own.
RESTARTS_VAR = "PET_MAX_RESTARTS"
RESTART_WAIT_VAR = "TRAIN_INPLACE_RESTART_WAIT_S"
# Forked workers (launcher.preloaded_workers) are on with in-place restarts; `false` starts each
# worker as a new interpreter, as torchrun does: for a trainer or an image whose workers misbehave
# as forks (a fork of torchrun on a GPU node has not run here: trainer/README.md).
FORKED_WORKERS_VAR = "TRAIN_FORKED_WORKERS"
# What this setting was called before it was torchrun's own: refused, so that a manifest written for
# an older image does not lose its in-place restarts without a word.
RENAMED_FROM = "TRAIN_INPLACE_RESTARTS"
# A healthy gang re-forms in seconds (torchrun's monitor interval is 0.1 s; bench/recovery_bench.py
# measured the localhost round). On a cluster the other nodes' agents may need up to 30 s to stop
# workers stuck in a collective (torchrun sends SIGTERM, then SIGKILL after 30 s:
# torch/distributed/elastic/multiprocessing/api.py PContext.close). A round that takes longer
# falls back to the recreate, which is always safe.
DEFAULT_RESTART_WAIT_S = 30
# Set by torchrun in every worker it starts (local_elastic_agent.py `_start_workers`).
TORCHRUN_MAX_RESTARTS_VAR = "TORCHELASTIC_MAX_RESTARTS"


# torchrun's agent shares its rendezvous TCPStore with the workers by default since torch 2.5, and
# keeps it across restart rounds: a later round's workers then read keys of the earlier one (a peer's
# old gloo address, NCCL unique id) and fail to connect (pytorch/pytorch#135712, "not compatible
# with torchelastic restarts"; reproduced here with torch 2.13.0: "Gloo connectFullMesh failed ...
# Connection refused"). Its documented opt-out makes every round build a store of its own (rank 0's
# worker hosts it on a free port: dynamic_rendezvous.py next_rendezvous, RendezvousStoreInfo.build).
# That port is an ephemeral one (elastic/utils/distributed.py get_free_port binds port 0), so on a
# socket pool it falls in ncclPortRange, which the pods pin and the security group opens, like the
# agent's shared store's port 0 it replaces.
SHARED_STORE_OPT_OUT = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


class InPlaceError(ValueError):
    """An in-place restart setting is unusable."""


@dataclass(frozen=True)
class InPlace:
    restarts: int
    """torchrun's `--max-restarts`: worker restart rounds per node before the pod fails."""
    restart_wait_s: float
    """How long a round may take to start new workers after one failed before torchrun is ended."""
    forked_workers: bool = True
    """Whether a Python command's workers are forks of torchrun (launcher.preloaded_workers)."""


def _whole(environ: Mapping[str, str], name: str, default: int, lo: int, hi: int | None) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    bounds = f"from {lo} to {hi}" if hi is not None else f">= {lo}"
    try:
        value = int(raw, 10)
    except ValueError:
        raise InPlaceError(f"{name} must be a whole number {bounds}, got {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        raise InPlaceError(f"{name} must be a whole number {bounds}, got {value}")
    return value


def from_env(environ: Mapping[str, str]) -> InPlace | None:
    """The in-place settings, or None when off (PET_MAX_RESTARTS unset or 0: a failed worker fails
    the pod); InPlaceError naming the variable. The launcher checks the count only as far as it
    needs it: a whole number >= 0, the bound torchrun asserts too, but torchrun's AssertionError
    would exit 1 and spend a gang restart on a setting no restart cures (exit 2 here)."""
    if environ.get(RENAMED_FROM, "").strip():
        raise InPlaceError(f"{RENAMED_FROM} is now torchrun's own {RESTARTS_VAR}: set {RESTARTS_VAR}="
                           f"{environ[RENAMED_FROM].strip()!r} instead (trainer/README.md)")
    restarts = _whole(environ, RESTARTS_VAR, 0, 0, None)
    wait = _whole(environ, RESTART_WAIT_VAR, DEFAULT_RESTART_WAIT_S, 1, 3600)
    forked = environ.get(FORKED_WORKERS_VAR, "true").strip().lower()
    if forked not in ("true", "false"):
        raise InPlaceError(f"{FORKED_WORKERS_VAR} must be true or false, got {forked!r}")
    return InPlace(restarts, float(wait), forked == "true") if restarts else None


def reported_before(environ: Mapping[str, str]) -> str | None:
    """In a worker of a restart round: what an earlier round of this torchrun reported that ends the
    run (a config error, a stop with the gang), or None. Each is written before its worker exits,
    and torchrun starts a round only once every worker of the last one is gone, so a report there
    at a round's start is an earlier round's."""
    if environ.get("TORCHELASTIC_RESTART_COUNT", "0") in ("", "0"):
        return None
    for what, var in contract.RUN_ENDING_REPORTS:
        if environ.get(var) and os.path.exists(environ[var]):
            return what
    return None


def refresh_resume(environ: MutableMapping[str, str]) -> str | None:
    """In a worker of a torchrun that may restart its workers: TRAIN_RESUME_FROM chosen again, as
    the launcher chose it (resume_choice.select_resume), since a later round must start from what the
    earlier ones committed. The new choice, or None when nothing changed or this is no such worker."""
    if environ.get(TORCHRUN_MAX_RESTARTS_VAR, "0") in ("", "0") or not environ.get("TRAIN_CHECKPOINT_DIR"):
        return None
    latest, _ = resume_choice.select_resume(environ["TRAIN_CHECKPOINT_DIR"], environ)
    chosen = latest.path if latest else ""
    if chosen == environ.get(contract.RESUME_VAR, ""):
        return None
    environ[contract.RESUME_VAR] = chosen
    if environ.get("RANK", "0") == "0":
        progress.log("resume_selected", path=chosen, step=latest.step if latest else None,
                     restart_count=int(environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0), in_place=True)
    return chosen
