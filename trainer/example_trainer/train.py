"""Example DDP trainer that follows the launcher contract.

Run it through the launcher (python -m launcher -- -m example_trainer.train).
What it shows, in order: reading hyperparameters from TRAIN_HPARAMS_FILE,
packing data into binary shards once, a loader whose worker processes read ahead
into shared memory, resuming from TRAIN_RESUME_FROM with fallback to older
complete checkpoints, a per-step progress report (heartbeat + JSON log),
asynchronous checkpoints on a schedule (Young's interval, or the
TRAIN_CHECKPOINT_* overrides: the loop waits only for the copy to host memory),
and a final checkpoint on SIGTERM/SIGINT before exiting with 143.
"""

from __future__ import annotations

import datetime
import errno
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import yaml
from launcher import checkpoint, contract, replicated
from launcher.collective import checkpoint_collective
from launcher.progress import Progress
from launcher.schedule import CheckpointSchedule
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .data import ChunkSampler, ShardChunks, ShardLoader
from .pack_data import DEFAULT_PARAMS, PREPACK_HINT, ensure_packed, unpackable

EXIT_CONFIG = 2
EXIT_STOPPED = 143  # stopped by a signal after saving: the gang is restarted

HPARAM_DEFAULTS = {
    "seed": 0,
    "steps": 2000,
    "batch_size": 64,
    "lr": 0.003,
    "weight_decay": 0.0,
    "hidden": 128,
    "log_every": 1,
    "num_workers": 2,
    "prefetch_factor": 4,
    "pg_timeout_s": 600,
    # The bound on the checkpoint group's collectives. Ranks that write nothing (all but rank 0
    # for DDP state) wait in them for the slowest writer's whole write, which for a large state on
    # a shared file system can take far longer than any collective of the loop: pg_timeout_s
    # there failed every save. A dead peer still fails the loop within pg_timeout_s.
    "checkpoint_timeout_s": 3600,
    "checkpoint_cost_estimate_s": 30.0,
    "checkpoint_min_interval_s": 60.0,
    "device": "auto",  # auto | cpu | cuda
    "data": {},  # overrides of pack_data.DEFAULT_PARAMS
    # Test hooks, off by default.
    "step_delay_s": 0.0,  # sleep after every step (slows a tiny model down)
    "stall_after_steps": 0,  # >0: stop making progress after that step
}


@dataclass(frozen=True)
class Number:
    """What a number-valued hyperparameter accepts: an integer (never a bool, a float or a
    quoted string) or any finite number, from `low` (excluded if `above`) to `high`."""

    integer: bool
    low: int
    high: float = math.inf
    above: bool = False

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused, or None."""
        number = isinstance(value, int if self.integer else (int, float)) and not isinstance(value, bool)
        # An int is exact at any size (math.isfinite would overflow converting a huge one to float).
        if number and (isinstance(value, int) or math.isfinite(value)) \
                and (value > self.low if self.above else value >= self.low) \
                and value <= self.high:
            return None
        kind = "an integer" if self.integer else "a number"
        if self.high == math.inf:
            bounds = f"{'>' if self.above else '>='} {self.low}"
        else:
            bounds = f"> {self.low} and <= {self.high}" if self.above else f"from {self.low} to {self.high}"
        hint = ""
        if isinstance(value, str) and _looks_numeric(value):
            hint = (" (YAML read it as text: write it unquoted, with a decimal point and a signed exponent, "
                    "e.g. 3.0e-4 or 1.0e+15)")
        return f"must be {kind} {bounds}, got {value!r}{hint}"


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


SEED = Number(integer=True, low=0, high=2**32 - 1)
# Seconds: a year at most. datetime.timedelta (the process group's timeout) overflows past about
# 8.6e13 s, which would otherwise surface inside init_process_group, after the nodes are up.
SECONDS_LIMIT = 365 * 86400  # torch.Generator.manual_seed takes 64 bits: room for the epoch
# Every key the trainer reads, checked before any process group exists: a bad value is exit 2
# (the launcher's contract: a config error fails the JobSet at once) instead of a traceback
# after the nodes are up that consumes the job's restarts.
HPARAM_RULES: dict[str, Number | tuple[str, ...]] = {
    "seed": SEED,
    "steps": Number(integer=True, low=1),
    "batch_size": Number(integer=True, low=1),
    "lr": Number(integer=False, low=0, above=True),
    "weight_decay": Number(integer=False, low=0),
    "hidden": Number(integer=True, low=1),
    "log_every": Number(integer=True, low=1),
    # Upper bounds catch typos: every worker is a process, every prefetched block 4 MiB of ring.
    "num_workers": Number(integer=True, low=0, high=64),
    "prefetch_factor": Number(integer=True, low=1, high=64),
    "pg_timeout_s": Number(integer=False, low=0, high=SECONDS_LIMIT, above=True),
    "checkpoint_timeout_s": Number(integer=False, low=0, high=SECONDS_LIMIT, above=True),
    "checkpoint_cost_estimate_s": Number(integer=False, low=0, high=SECONDS_LIMIT, above=True),
    "checkpoint_min_interval_s": Number(integer=False, low=0, high=SECONDS_LIMIT),
    "device": ("auto", "cpu", "cuda"),
    "step_delay_s": Number(integer=False, low=0, high=SECONDS_LIMIT),
    "stall_after_steps": Number(integer=True, low=0),
}
DATA_RULES: dict[str, Number] = {
    "seed": SEED,
    "shards": Number(integer=True, low=1),
    "samples_per_shard": Number(integer=True, low=1),
    "dim": Number(integer=True, low=1),
    "classes": Number(integer=True, low=2),
    "noise": Number(integer=False, low=0),
}


class ConfigError(Exception):
    """The hyperparameters file is unusable; `errors` has one line per problem."""

    def __init__(self, errors: list[str]):
        super().__init__("; ".join(errors))
        self.errors = errors


def load_hparams(path: str) -> dict:
    where = f"TRAIN_HPARAMS_FILE {path!r}"
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except OSError as e:
        raise ConfigError([f"{where}: {e.strerror}"]) from e
    except yaml.YAMLError as e:
        raise ConfigError([f"{where}: invalid YAML ({e})".replace("\n", " ")]) from e
    if not isinstance(raw, dict):
        raise ConfigError([f"{where}: top level must be a mapping"])
    unknown = sorted(set(raw) - set(HPARAM_DEFAULTS), key=str)
    if unknown:
        raise ConfigError([f"{where}: unknown keys {unknown}; known: {sorted(HPARAM_DEFAULTS)}"])
    hp = {**HPARAM_DEFAULTS, **raw}
    errors = []
    for key, rule in HPARAM_RULES.items():
        if isinstance(rule, Number):
            problem = rule.problem(hp[key])
        else:
            problem = None if hp[key] in rule else f"must be one of {', '.join(rule)}, got {hp[key]!r}"
        if problem:
            errors.append(f"{where}: {key} {problem}")
    data = hp["data"] if hp["data"] is not None else {}
    if not isinstance(data, dict):
        errors.append(f"{where}: data must be a mapping of {sorted(DATA_RULES)}, got {data!r}")
        data = {}
    bad_data = sorted(set(data) - set(DATA_RULES), key=str)
    if bad_data:
        errors.append(f"{where}: unknown data keys {bad_data}; known: {sorted(DATA_RULES)}")
    for key in sorted(set(data) & set(DATA_RULES)):
        problem = DATA_RULES[key].problem(data[key])
        if problem:
            errors.append(f"{where}: data.{key} {problem}")
    per_shard = data.get("samples_per_shard", DEFAULT_PARAMS["samples_per_shard"])
    if not errors and hp["batch_size"] > per_shard:  # a chunk is batch_size samples of one shard
        errors.append(f"{where}: batch_size {hp['batch_size']} is larger than data.samples_per_shard "
                      f"{per_shard}: lower it, or raise data.samples_per_shard")
    if errors:
        raise ConfigError(errors)
    hp["data"] = data
    return hp


class StopFlag:
    """Set by SIGTERM/SIGINT; the loop polls it once per step."""

    def __init__(self):
        self.signum = 0

    def __call__(self, signum, _frame):
        self.signum = signum

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self)
        signal.signal(signal.SIGINT, self)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, classes: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x):
        return self.net(x)


def config_error(lines: list[str]) -> int:
    """Report a configuration that cannot work: one line each on stderr and, for the launcher, in
    TRAIN_CONFIG_ERROR_FILE (so the pod exits 2 and the JobSet fails at once); returns the exit code."""
    text = "".join(f"example_trainer: error: {line}\n" for line in lines)
    sys.stderr.write(text)
    report = os.environ.get(contract.CONFIG_ERROR_VAR)
    if report:
        try:
            checkpoint.atomic_write_bytes(report, text.encode())
        except OSError as e:
            sys.stderr.write(f"example_trainer: cannot write {contract.CONFIG_ERROR_VAR} {report!r}: {e.strerror}\n")
    return EXIT_CONFIG


def report_stopped(step: int, signum: int) -> None:
    """Tell the launcher (TRAIN_STOPPED_FILE) that this rank stopped with the gang after saving,
    so that a pod whose own workers got no signal exits 143 as well, not torchrun's 1."""
    _report(contract.STOPPED_VAR, {"step": step, "signal": signum})


def report_finished(step: int) -> None:
    """Tell the launcher (TRAIN_FINISHED_FILE) that training finished: this exit 0 is a finished
    run even if a stop signal came as it ended."""
    _report(contract.FINISHED_VAR, {"step": step})


def _report(var: str, report: dict) -> None:
    path = os.environ.get(var)
    if not path:
        return
    try:
        checkpoint.atomic_write_json(path, report)
    except OSError as e:
        sys.stderr.write(f"example_trainer: cannot write {var} {path!r}: {e.strerror}\n")


def main() -> int:
    stop = StopFlag()
    stop.install()
    try:
        c = contract.from_env()
        hp = load_hparams(c.hparams_file)
    except (contract.ContractError, ConfigError) as e:
        return config_error(e.errors)
    # Checked on every rank before the process group exists, like the hparams: the default
    # TRAIN_DATA_DIR is the datasets bucket, mounted read-only, and packing there cannot work.
    data_problem = unpackable(c.data_dir, hp["data"])
    if data_problem:
        return config_error([data_problem])

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and hp["device"] != "cpu"
    if use_cuda:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    backend = "nccl" if use_cuda else "gloo"
    # An explicit timeout turns a hung collective into an error instead of a hang.
    dist.init_process_group(
        backend, timeout=datetime.timedelta(seconds=float(hp["pg_timeout_s"]))
    )
    prog = Progress(log_every=hp["log_every"], rank=rank, local_rank=local_rank)
    started = time.monotonic()

    if local_rank == 0:  # once per node: fine on a shared or a node-local TRAIN_DATA_DIR
        try:
            ensure_packed(c.data_dir, hp["data"])
        except OSError as e:
            # A mount that looks writable but refuses what packing does (Mountpoint for S3
            # mounted without read-only refuses renames) is as much a config error as a read-only
            # one; anything else (a full or flaky disk) may pass on a restart.
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            return config_error([f"cannot pack the data set into TRAIN_DATA_DIR {c.data_dir!r} "
                                 f"({e.strerror}: {e.filename}): {PREPACK_HINT}"])
    dist.barrier()
    ds = ShardChunks(c.data_dir, hp["batch_size"])
    per_rank = len(ds) // world
    if per_rank < 1:
        return config_error([f"the data set has {len(ds)} chunks of batch_size {hp['batch_size']} samples, "
                             f"fewer than the {world} ranks: raise data.shards or data.samples_per_shard, "
                             "or lower batch_size"])

    torch.manual_seed(hp["seed"])
    model = MLP(ds.dim, hp["hidden"], ds.classes).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])

    # ---- resume: rank 0 picks the newest checkpoint whose every file loads (each rank wrote one)
    step = 0
    t0 = time.monotonic()
    skipped = []
    state = None
    resume_from = os.environ.get(contract.RESUME_VAR, "") or None
    chosen = None
    if rank == 0:
        def on_skip(path, err):
            skipped.append({"path": path, "reason": str(err)})
            prog.event("checkpoint_skipped", path=path, reason=str(err))

        chosen, state = checkpoint.load_with_fallback(
            c.checkpoint_dir,
            resume_from,
            # Straight into the model's parameters where they are on the CPU (one copy, no second pass).
            lambda p: replicated.load_merged(p, map_location="cpu", into={"model": model.state_dict()}),
            on_skip,
        )
    # Everyone loads what rank 0 verified (broadcast as a step number: a tensor
    # needs no pickling, and the directory name follows from the step).
    chosen_step = torch.tensor(
        [-1 if chosen is None else checkpoint.parse_step(os.path.basename(chosen))],
        dtype=torch.int64, device=device,
    )
    dist.broadcast(chosen_step, src=0)
    chosen_step = int(chosen_step.item())
    if chosen_step >= 0:
        if state is None:
            name = checkpoint.step_dir_name(chosen_step)
            if resume_from and os.path.basename(os.path.normpath(resume_from)) == name:
                chosen = resume_from
            else:
                chosen = os.path.join(c.checkpoint_dir, name)
            state = replicated.load_merged(chosen, map_location="cpu", verify=False, into={"model": model.state_dict()})
        checkpoint.restore_module(model, state["model"])
        checkpoint.load_optimizer_state(opt, state["optimizer"])  # in memory of its own, not the loaded buffer
        torch.set_rng_state(state["rng"])
        step = int(state["step"])
        prog.event(
            "checkpoint_resumed",
            step=step,
            path=chosen,
            duration_s=round(time.monotonic() - t0, 4),
            skipped=skipped,
        )
    else:
        prog.event("checkpoint_resumed", step=0, path=None, duration_s=0.0, skipped=skipped)
    del state
    prog.beat(step)

    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    loss_fn = nn.CrossEntropyLoss()
    sched = CheckpointSchedule(
        mtbf_s=c.mtbf_s,
        interval_override_s=c.checkpoint_interval_s,
        every_steps=c.checkpoint_every_steps,
        initial_cost_s=hp["checkpoint_cost_estimate_s"],
        min_interval_s=hp["checkpoint_min_interval_s"],
        start_step=step,
    )
    prog.event(
        "trainer_start",
        world_size=world,
        backend=backend,
        device=str(device),
        start_step=step,
        steps=hp["steps"],
        checkpoint_every_steps=c.checkpoint_every_steps,
        checkpoint_interval_s=None if c.checkpoint_every_steps else round(sched.interval_s, 3),
    )
    last_saved = step
    # Every rank writes its share of the (replicated) state, all at once: one writer would be one
    # client and one file, which a parallel file system stripes over a few of its servers only
    # (launcher/replicated.py). Rank 0 still writes the COMPLETE marker, last.
    checkpointer = checkpoint.AsyncCheckpointer(
        c.checkpoint_dir, rank=rank, world_size=world, keep=c.checkpoint_keep, writes=True,
        collective=checkpoint_collective(world, hp["checkpoint_timeout_s"]),
    )
    # Stage for the first save now, before step 1, so that it blocks the loop no longer than
    # later ones (and a state a checkpoint cannot hold fails here). A fresh AdamW holds no state
    # until its first step, then per parameter a 0-d step count and two moments of the
    # parameter's size: stand-ins of those sizes make the buffer as large as the first save's.
    moments = {} if opt.state else {i: {"step": torch.zeros(()), "exp_avg": p, "exp_avg_sq": p}
                                    for i, p in enumerate(model.parameters())}
    checkpointer.prepare(replicated.rank_share(
        {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict(), "moments": moments,
         "rng": torch.get_rng_state(), "hparams": hp, "world_size": world}, rank, world))
    reasons: dict[int, str] = {}

    def report(done: checkpoint.SavedCheckpoint | None) -> None:
        if done is None:
            return
        prog.event(
            "checkpoint_saved",
            step=done.step,
            path=done.path,
            reason=reasons.pop(done.step, "schedule"),
            duration_s=round(done.blocked_s + done.write_s, 4),
            blocked_s=round(done.blocked_s, 4),
            bytes=done.total_bytes,
            rank0_bytes=done.nbytes,
            write_mb_per_s=round(done.total_bytes / max(done.write_s, 1e-9) / 1e6, 1),
            next_interval_s=None if c.checkpoint_every_steps else round(sched.interval_s, 3),
        )
        prune_error = checkpointer.take_prune_error()
        if prune_error is not None:  # old checkpoints stay on disk; training goes on
            prog.event("checkpoint_prune_failed", reason=str(prune_error))

    def save(at_step: int, reason: str) -> None:
        nonlocal last_saved
        state = {
            "step": at_step,
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "rng": torch.get_rng_state(),
            "hparams": hp,
            "world_size": world,
        }
        reasons[at_step] = reason
        # The loop stops only for the copy to host memory: that is the cost Young's interval needs.
        blocked = checkpointer.save(at_step, replicated.rank_share(state, rank, world), meta={"job_id": c.job_id})
        sched.record(at_step, blocked)
        last_saved = at_step
        prog.beat(at_step)

    loader_started = time.monotonic()
    loader = ShardLoader(
        ds,
        ChunkSampler(len(ds), hp["seed"], rank, world, start_step=step),
        num_workers=hp["num_workers"],
        prefetch_blocks=hp["prefetch_factor"],
    )
    first_batch = True
    try:
        while step < hp["steps"]:
            x, y = next(loader)
            if first_batch:
                prog.event("loader_ready", first_batch_s=round(time.monotonic() - loader_started, 4),
                           workers=hp["num_workers"], chunks_per_block=loader.chunks_per_block)
                first_batch = False
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            loss = loss_fn(ddp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            # One small all-reduce per step carries the mean loss, "someone got a
            # stop signal" and rank 0's "checkpoint due" decision, so every rank
            # takes the same branch at the same step.
            ctrl = torch.zeros(3, device=device)
            ctrl[0] = loss.detach()
            ctrl[1] = 1.0 if stop.signum else 0.0
            ctrl[2] = 1.0 if rank == 0 and sched.due(step) else 0.0
            dist.all_reduce(ctrl)
            mean_loss, stopping, due = ctrl.tolist()
            mean_loss /= world

            if hp["stall_after_steps"] and step >= hp["stall_after_steps"]:
                prog.event("stalling", step=step)  # test hook: a hung loop
                while True:
                    time.sleep(0.2)

            prog.step(step, loss=mean_loss, samples=hp["batch_size"] * world, epoch=(step - 1) // per_rank)
            report(checkpointer.poll())
            if stopping or due or step >= hp["steps"]:
                reason = "signal" if stopping else ("final" if step >= hp["steps"] else "schedule")
                if step != last_saved:
                    save(step, reason)
                if stopping:
                    # close(), not wait(): the process ends in os._exit, which would kill the
                    # background prune of the previous checkpoint half-way.
                    report(checkpointer.close())
                    prog.event("stopped", step=step, signal=stop.signum)
                    # Every rank writes it, not only local rank 0: then the first worker to exit
                    # has written it before torchrun sees a failure and tears down the others.
                    report_stopped(step, stop.signum)
                    dist.destroy_process_group()
                    return EXIT_STOPPED
            if hp["step_delay_s"]:
                time.sleep(hp["step_delay_s"])
        report(checkpointer.close())  # the last save, then the background prune of the one before
    finally:
        loader.close()

    prog.event("training_complete", step=step, duration_s=round(time.monotonic() - started, 3))
    report_finished(step)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Past destroy_process_group, interpreter finalization can still abort the process (SIGABRT,
    # "terminate called without an active exception": gloo's C++ threads releasing tensors while
    # the interpreter is torn down, pytorch/pytorch#179291), seen here about once in eight runs of
    # the 2-rank DCP scenario. A finished run must not end as a failed worker, which would cost the
    # job a restart: everything is written and flushed by now, so exit without finalization.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
