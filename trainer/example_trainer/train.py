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
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from launcher import checkpoint, contract, replicated
from launcher.collective import checkpoint_collective
from launcher.progress import Progress
from launcher.schedule import CheckpointSchedule
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .data import ChunkSampler, ShardChunks, ShardLoader
from .hparams import ConfigError, load_hparams
from .pack_data import PREPACK_HINT, ensure_packed, unpackable

EXIT_CONFIG = 2
EXIT_STOPPED = 143  # stopped by a signal after saving: the gang is restarted

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
