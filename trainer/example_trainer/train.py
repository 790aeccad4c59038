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
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from launcher import checkpoint, contract, memory_tier, replicated
from launcher.collective import checkpoint_collective
from launcher.progress import Progress
from launcher.schedule import CheckpointSchedule
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from . import memory
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


@dataclass(frozen=True)
class Run:
    """What holds for the whole run on this rank: the launcher's contract, the hyperparameters, the
    rank's place in the gang, its device and its progress report."""

    c: contract.Contract
    hp: dict
    rank: int
    world: int
    local_rank: int
    use_cuda: bool
    device: torch.device
    backend: str
    prog: Progress
    started: float  # time.monotonic() once the process group exists: training_complete's duration


@dataclass
class Training:
    """What the steps change: the model, its optimizer and the number of steps taken."""

    model: MLP
    opt: torch.optim.AdamW
    step: int = 0
    from_memory: bool = False
    """Resumed from the memory tier's copy (launcher.memory_tier), not from the shared file system."""


def main() -> int:
    """The run's steps, in order. Every rank runs the same collectives in the same order (a rank
    that skips or reorders one hangs the gang): the barrier in prepare_data, the broadcast in
    resume, DDP's own, the checkpoint group's in start_checkpoints, one all-reduce a step in agree."""
    stop = StopFlag()
    stop.install()
    try:
        c = contract.from_env()
        hp = load_hparams(c.hparams_file)
    except (contract.ContractError, ConfigError) as e:
        return config_error(e.errors)
    try:
        memory.tier()
    except memory_tier.MemoryTierError as e:
        return config_error([str(e)])
    # Checked on every rank before the process group exists, like the hparams: the default
    # TRAIN_DATA_DIR is the datasets bucket, mounted read-only, and packing there cannot work.
    data_problem = unpackable(c.data_dir, hp["data"])
    if data_problem:
        return config_error([data_problem])

    run = join_gang(c, hp)
    data = prepare_data(run)
    if isinstance(data, list):
        return config_error(data)
    ds, per_rank = data
    t = build_model(run, ds)
    resume(run, t)
    ddp = DistributedDataParallel(t.model, device_ids=[run.local_rank] if run.use_cuda else None)
    ckpt = start_checkpoints(run, t)
    loader_started = time.monotonic()
    loader = ShardLoader(
        ds,
        ChunkSampler(len(ds), hp["seed"], run.rank, run.world, start_step=t.step),
        num_workers=hp["num_workers"],
        prefetch_blocks=hp["prefetch_factor"],
    )
    try:
        stopped = train(run, t, ddp, ckpt, loader, loader_started, stop, per_rank)
    finally:
        loader.close()
    if stopped:
        return EXIT_STOPPED

    run.prog.event("training_complete", step=t.step, duration_s=round(time.monotonic() - run.started, 3))
    report_finished(t.step)
    dist.destroy_process_group()
    return 0


def join_gang(c: contract.Contract, hp: dict) -> Run:
    """This rank's device, and the process group of the gang."""
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
    return Run(c=c, hp=hp, rank=rank, world=world, local_rank=local_rank, use_cuda=use_cuda, device=device,
               backend=backend, prog=prog, started=time.monotonic())


def prepare_data(run: Run) -> tuple[ShardChunks, int] | list[str]:
    """Pack the data set once per node, then open it: (the chunks, how many per rank), or the lines
    of a configuration error."""
    c, hp = run.c, run.hp
    if run.local_rank == 0:  # once per node: fine on a shared or a node-local TRAIN_DATA_DIR
        try:
            ensure_packed(c.data_dir, hp["data"])
        except OSError as e:
            # A mount that looks writable but refuses what packing does (Mountpoint for S3
            # mounted without read-only refuses renames) is as much a config error as a read-only
            # one; anything else (a full or flaky disk) may pass on a restart.
            if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            return [f"cannot pack the data set into TRAIN_DATA_DIR {c.data_dir!r} "
                    f"({e.strerror}: {e.filename}): {PREPACK_HINT}"]
    dist.barrier()
    ds = ShardChunks(c.data_dir, hp["batch_size"])
    per_rank = len(ds) // run.world
    if per_rank < 1:
        return [f"the data set has {len(ds)} chunks of batch_size {hp['batch_size']} samples, "
                f"fewer than the {run.world} ranks: raise data.shards or data.samples_per_shard, "
                "or lower batch_size"]
    return ds, per_rank


def build_model(run: Run, ds: ShardChunks) -> Training:
    """The model and its optimizer, seeded alike on every rank, at step 0."""
    hp = run.hp
    torch.manual_seed(hp["seed"])
    model = MLP(ds.dim, hp["hidden"], ds.classes).to(run.device)
    opt = torch.optim.AdamW(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    return Training(model=model, opt=opt)


def resume(run: Run, t: Training) -> None:
    """Resume: rank 0 picks the newest checkpoint whose every file loads (each rank wrote one)."""
    t0 = time.monotonic()
    skipped: list[dict] = []
    state = None
    resume_from = os.environ.get(contract.RESUME_VAR, "") or None
    chosen = None
    in_memory = memory.agreed_copy(memory.tier(), run.c.checkpoint_dir, run.local_rank, run.device)
    if in_memory is not None:  # every node's own verified copy: each rank reads its node's
        chosen, t.from_memory = in_memory.path, True
        state = replicated.load_merged(chosen, map_location="cpu", verify=False, into={"model": t.model.state_dict()})
    elif run.rank == 0:
        chosen, state = pick_checkpoint(run, t.model, resume_from, skipped)
    chosen_step = in_memory.step if in_memory is not None else broadcast_step(run, chosen)
    memory.forget_newer(memory.tier(), run.local_rank, chosen_step)
    if chosen_step >= 0:
        if state is None:
            name = checkpoint.step_dir_name(chosen_step)
            if resume_from and os.path.basename(os.path.normpath(resume_from)) == name:
                chosen = resume_from
            else:
                chosen = os.path.join(run.c.checkpoint_dir, name)
            state = replicated.load_merged(chosen, map_location="cpu", verify=False,
                                           into={"model": t.model.state_dict()})
        checkpoint.restore_module(t.model, state["model"])
        checkpoint.load_optimizer_state(t.opt, state["optimizer"])  # in memory of its own, not the loaded buffer
        torch.set_rng_state(state["rng"])
        t.step = int(state["step"])
        run.prog.event(
            "checkpoint_resumed",
            step=t.step,
            path=chosen,
            duration_s=round(time.monotonic() - t0, 4),
            skipped=skipped,
            **({"tier": "memory"} if t.from_memory else {}),
        )
    else:
        run.prog.event("checkpoint_resumed", step=0, path=None, duration_s=0.0, skipped=skipped)
    del state
    run.prog.beat(t.step)


def pick_checkpoint(run: Run, model: MLP, resume_from: str | None,
                    skipped: list[dict]) -> tuple[str | None, dict | None]:
    """Rank 0's choice: (path, state) of the newest checkpoint that loads, or (None, None); each one
    skipped on the way is added to `skipped` and reported."""
    def on_skip(path, err):
        skipped.append({"path": path, "reason": str(err)})
        run.prog.event("checkpoint_skipped", path=path, reason=str(err))

    return checkpoint.load_with_fallback(
        run.c.checkpoint_dir,
        resume_from,
        # Straight into the model's parameters where they are on the CPU (one copy, no second pass).
        lambda p: replicated.load_merged(p, map_location="cpu", into={"model": model.state_dict()}),
        on_skip,
    )


def broadcast_step(run: Run, chosen: str | None) -> int:
    """The step of rank 0's checkpoint on every rank, -1 for none."""
    # Everyone loads what rank 0 verified (broadcast as a step number: a tensor
    # needs no pickling, and the directory name follows from the step).
    chosen_step = torch.tensor(
        [-1 if chosen is None else checkpoint.parse_step(os.path.basename(chosen))],
        dtype=torch.int64, device=run.device,
    )
    dist.broadcast(chosen_step, src=0)
    return int(chosen_step.item())


@dataclass
class Checkpoints:
    """The asynchronous checkpointer, its schedule, the reason of each save not yet reported, and
    the last step saved."""

    run: Run
    sched: CheckpointSchedule
    checkpointer: checkpoint.AsyncCheckpointer
    last_saved: int
    reasons: dict[int, str] = field(default_factory=dict)
    memory: memory_tier.MemoryCopies | None = None
    """The memory tier's copies of this node (written by its local rank 0), when the tier is on."""
    memory_sched: memory_tier.TierSchedule | None = None

    def report(self, done: checkpoint.SavedCheckpoint | None) -> None:
        if done is None:
            return
        self.run.prog.event(
            "checkpoint_saved",
            step=done.step,
            path=done.path,
            reason=self.reasons.pop(done.step, "schedule"),
            duration_s=round(done.blocked_s + done.write_s, 4),
            blocked_s=round(done.blocked_s, 4),
            bytes=done.total_bytes,
            rank0_bytes=done.nbytes,
            write_mb_per_s=round(done.total_bytes / max(done.write_s, 1e-9) / 1e6, 1),
            next_interval_s=None if self.run.c.checkpoint_every_steps else round(self.sched.interval_s, 3),
        )
        prune_error = self.checkpointer.take_prune_error()
        if prune_error is not None:  # old checkpoints stay on disk; training goes on
            self.run.prog.event("checkpoint_prune_failed", reason=str(prune_error))

    def save(self, t: Training, at_step: int, reason: str) -> None:
        run = self.run
        state = whole_state(run, t, at_step)
        self.reasons[at_step] = reason
        # The loop stops only for the copy to host memory: that is the cost Young's interval needs.
        blocked = self.checkpointer.save(at_step, replicated.rank_share(state, run.rank, run.world),
                                         meta={"job_id": run.c.job_id})
        self.sched.record(at_step, blocked)
        self.last_saved = at_step
        run.prog.beat(at_step)

    def save_in_memory(self, t: Training, at_step: int) -> None:
        """A memory copy of the whole state (every node holds it: replicated): only its copy to host
        memory stops the loop; it never moves the durable schedule."""
        if self.memory is None or self.memory_sched is None:
            return
        blocked = self.memory.save(at_step, whole_state(self.run, t, at_step))
        self.memory_sched.record(at_step)  # not last_saved: a stop or the end still saves durably
        self.run.prog.event("checkpoint_in_memory", step=at_step, blocked_s=round(blocked, 4))

    def close(self) -> checkpoint.SavedCheckpoint | None:
        """The durable save in flight and its prune, then the memory copy in flight."""
        done = self.checkpointer.close()
        if self.memory is not None:
            self.memory.close()
        return done


def whole_state(run: Run, t: Training, step: int) -> dict:
    return {"step": step, "model": t.model.state_dict(), "optimizer": t.opt.state_dict(), "rng": torch.get_rng_state(),
            "hparams": run.hp, "world_size": run.world}


def start_checkpoints(run: Run, t: Training) -> Checkpoints:
    """The schedule (announced in trainer_start) and the checkpointer, staged for the first save."""
    c, hp = run.c, run.hp
    sched = CheckpointSchedule(
        mtbf_s=c.mtbf_s,
        interval_override_s=c.checkpoint_interval_s,
        every_steps=c.checkpoint_every_steps,
        initial_cost_s=hp["checkpoint_cost_estimate_s"],
        min_interval_s=hp["checkpoint_min_interval_s"],
        start_step=t.step,
    )
    run.prog.event(
        "trainer_start",
        world_size=run.world,
        backend=run.backend,
        device=str(run.device),
        start_step=t.step,
        steps=hp["steps"],
        checkpoint_every_steps=c.checkpoint_every_steps,
        checkpoint_interval_s=None if c.checkpoint_every_steps else round(sched.interval_s, 3),
    )
    # Every rank writes its share of the (replicated) state, all at once: one writer would be one
    # client and one file, which a parallel file system stripes over a few of its servers only
    # (launcher/replicated.py). Rank 0 still writes the COMPLETE marker, last.
    checkpointer = checkpoint.AsyncCheckpointer(
        c.checkpoint_dir, rank=run.rank, world_size=run.world, keep=c.checkpoint_keep, writes=True,
        collective=checkpoint_collective(run.world, hp["checkpoint_timeout_s"]),
    )
    # Stage for the first save now, before step 1, so that it blocks the loop no longer than
    # later ones (and a state a checkpoint cannot hold fails here). A fresh AdamW holds no state
    # until its first step, then per parameter a 0-d step count and two moments of the
    # parameter's size: stand-ins of those sizes make the buffer as large as the first save's.
    moments = {} if t.opt.state else {i: {"step": torch.zeros(()), "exp_avg": p, "exp_avg_sq": p}
                                      for i, p in enumerate(t.model.parameters())}
    checkpointer.prepare(replicated.rank_share(
        {"step": t.step, "model": t.model.state_dict(), "optimizer": t.opt.state_dict(), "moments": moments,
         "rng": torch.get_rng_state(), "hparams": hp, "world_size": run.world}, run.rank, run.world))
    return with_memory_tier(Checkpoints(run=run, sched=sched, checkpointer=checkpointer, last_saved=t.step), t, moments)


def with_memory_tier(ckpt: Checkpoints, t: Training, moments: dict) -> Checkpoints:
    """The memory tier's copies and schedule, staged like the durable ones; after a resume from memory,
    the durable schedule goes on from the newest durable checkpoint (launcher.memory_tier.anchor)."""
    settings, run = memory.tier(), ckpt.run
    if settings is None:
        return ckpt
    ckpt.memory = memory_tier.MemoryCopies(settings, writes=run.local_rank == 0)
    ckpt.memory.prepare({**whole_state(run, t, t.step), "moments": moments})
    ckpt.memory_sched = memory_tier.TierSchedule(ckpt.sched, settings.interval_s)
    if t.from_memory:
        memory_tier.anchor(ckpt.sched, checkpoint.latest_complete(run.c.checkpoint_dir))
    return ckpt


def train(run: Run, t: Training, ddp: DistributedDataParallel, ckpt: Checkpoints, loader: ShardLoader,
          loader_started: float, stop: StopFlag, per_rank: int) -> bool:
    """Step until hp["steps"], saving on the schedule and at the end; True if stopped by a signal
    (saved, and out of the process group)."""
    hp = run.hp
    loss_fn = nn.CrossEntropyLoss()
    first_batch = True
    while t.step < hp["steps"]:
        x, y = next(loader)
        if first_batch:
            run.prog.event("loader_ready", first_batch_s=round(time.monotonic() - loader_started, 4),
                           workers=hp["num_workers"], chunks_per_block=loader.chunks_per_block)
            first_batch = False
        x = x.to(run.device, non_blocking=True)
        y = y.to(run.device, non_blocking=True)
        loss = loss_fn(ddp(x), y)
        t.opt.zero_grad(set_to_none=True)
        loss.backward()
        t.opt.step()
        t.step += 1
        mean_loss, stopping, due, in_memory = agree(run, ckpt, t.step, loss, stop)

        if hp["stall_after_steps"] and t.step >= hp["stall_after_steps"]:
            run.prog.event("stalling", step=t.step)  # test hook: a hung loop
            while True:
                time.sleep(0.2)

        run.prog.step(t.step, loss=mean_loss, samples=hp["batch_size"] * run.world, epoch=(t.step - 1) // per_rank)
        ckpt.report(ckpt.checkpointer.poll())
        if in_memory and not (stopping or due or t.step >= hp["steps"]):
            ckpt.save_in_memory(t, t.step)
        if stopping or due or t.step >= hp["steps"]:
            reason = "signal" if stopping else ("final" if t.step >= hp["steps"] else "schedule")
            if t.step != ckpt.last_saved:
                ckpt.save(t, t.step, reason)
            if stopping:
                stop_gang(run, ckpt, t.step, stop.signum)
                return True
        if hp["step_delay_s"]:
            time.sleep(hp["step_delay_s"])
    ckpt.report(ckpt.close())  # the last save, then the background prune of the one before
    return False


def agree(run: Run, ckpt: Checkpoints, step: int, loss: torch.Tensor,
          stop: StopFlag) -> tuple[float, float, float, float]:
    """(mean loss over the gang, someone is stopping, a checkpoint is due, a memory copy is due) after `step`."""
    # One small all-reduce per step carries the mean loss, "someone got a
    # stop signal" and rank 0's "checkpoint due" decision, so every rank
    # takes the same branch at the same step.
    ctrl = torch.zeros(4, device=run.device)
    ctrl[0] = loss.detach()
    ctrl[1] = 1.0 if stop.signum else 0.0
    ctrl[2] = 1.0 if run.rank == 0 and ckpt.sched.due(step) else 0.0
    ctrl[3] = 1.0 if run.rank == 0 and ckpt.memory_sched is not None and ckpt.memory_sched.due(step) else 0.0
    dist.all_reduce(ctrl)
    mean_loss, stopping, due, in_memory = ctrl.tolist()
    return mean_loss / run.world, stopping, due, in_memory


def stop_gang(run: Run, ckpt: Checkpoints, step: int, signum: int) -> None:
    """Stop with the gang after the signal's save: wait for it, report, leave the process group."""
    # close(), not wait(): the process ends in os._exit, which would kill the
    # background prune of the previous checkpoint half-way.
    ckpt.report(ckpt.close())
    run.prog.event("stopped", step=step, signal=signum)
    # Every rank writes it, not only local rank 0: then the first worker to exit
    # has written it before torchrun sees a failure and tears down the others.
    report_stopped(step, signum)
    dist.destroy_process_group()


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
