"""What every framework integration shares inside a training worker: the stop agreed across the
gang at a step boundary, the checkpoint schedule, the verified resume choice, and the files that
tell the launcher how the worker ended (TRAIN_STOPPED_FILE with exit 143, TRAIN_FINISHED_FILE with
exit 0). See docs/bring-your-own-trainer.md."""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time
from typing import Any, NoReturn

from . import autoprogress, checkpoint, contract, events, framework_checkpoint, memory_tier, progress, schedule
from .checkpoint import CheckpointInfo
from .progress import _env_int
from .worker_exit import ConfigError, report_config_error

EXIT_STOPPED = 128 + signal.SIGTERM

__all__ = ["EXIT_STOPPED", "ConfigError", "Worker", "current"]


class Worker:
    """One per process (`current()`): rank and contract from the environment torchrun and the
    launcher set."""

    def __init__(self) -> None:
        env = os.environ
        self.rank = _env_int("RANK", 0)
        self.world_size = _env_int("WORLD_SIZE", 1)
        self.local_rank = _env_int("LOCAL_RANK", 0)
        self.checkpoint_dir = env.get("TRAIN_CHECKPOINT_DIR") or "/workspace/checkpoints"
        self.resume_from = env.get(contract.RESUME_VAR) or None
        self.keep = max(1, _env_int("TRAIN_CHECKPOINT_KEEP", 3))
        self.log_every = max(1, _env_int("TRAIN_LOG_EVERY_STEPS", 10))
        self.collective_timeout_s = float(env.get("TRAIN_COLLECTIVE_TIMEOUT_S") or 600)
        self.stop_signal: int | None = None
        self._ranks: framework_checkpoint.Ranks | None = None
        self._flags: Any = None
        self.schedule = schedule.CheckpointSchedule(
            mtbf_s=float(env.get("TRAIN_MTBF_S") or 6 * 3600),
            interval_override_s=float(env["TRAIN_CHECKPOINT_INTERVAL_S"]) if env.get("TRAIN_CHECKPOINT_INTERVAL_S") else None,
            every_steps=int(env["TRAIN_CHECKPOINT_EVERY_STEPS"]) if env.get("TRAIN_CHECKPOINT_EVERY_STEPS") else None,
        )
        self.memory = memory_tier.from_env(env)  # a bad value: ValueError before the first step, exit 2
        self.memory_schedule = memory_tier.TierSchedule(self.schedule, self.memory.interval_s) if self.memory else None
        self.memory_due = False
        """After `boundary`: a memory copy is due (and neither a stop nor a durable save)."""

    def event(self, name: str, **fields: Any) -> None:
        """A JSON log line from global rank 0."""
        if self.rank == 0:
            progress.log(name, **fields)

    def log_loss(self, step: int, loss: float) -> None:
        """A `loss` line from rank 0 every TRAIN_LOG_EVERY_STEPS steps."""
        if step % self.log_every == 0:
            self.event("loss", step=step, loss=round(float(loss), 6))
            events.shared_writer(self.rank).scalars(step, {"train/loss": float(loss)})

    # ------------------------------------------------------------------ stop

    def handle_stop_signals(self) -> None:
        """SIGTERM/SIGINT only set a flag, read at the next step boundary: a handler that stops
        or runs a collective itself (Lightning broadcasts from rank 0 inside it) hangs a gang
        whose other pods got no signal. Call again after a framework installed its own."""
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum

    def boundary(self, step: int) -> tuple[bool, bool]:
        """At the end of a step, on every rank: (stop, checkpoint due), agreed. Any rank's
        stop signal stops every rank at this same step; rank 0's clock decides "due"."""
        stop = self.stop_signal is not None
        due = self.rank == 0 and self.schedule.due(step)
        memory = self.rank == 0 and self.memory_schedule is not None and self.memory_schedule.due(step)
        if self.world_size > 1:
            stop, due, memory = self._any(stop, due, memory)
        self.memory_due = memory and not (stop or due)
        return stop, due

    def _any(self, *flags: bool) -> list[bool]:
        import torch
        import torch.distributed as dist

        self.ranks()  # the gloo group exists (created by every rank at the same point)
        tensor = torch.tensor([1 if f else 0 for f in flags], dtype=torch.int32)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self._flags)
        return [bool(v) for v in tensor.tolist()]

    def saved(self, step: int, cost_s: float) -> None:
        """A checkpoint of `step` was committed; it took `cost_s` of the loop's time."""
        self.schedule.record(step, cost_s)
        self.event("checkpoint_saved", step=step, duration_s=round(cost_s, 3))
        autoprogress.REPORTER.align(step)

    def saved_in_memory(self, step: int, blocked_s: float) -> None:
        """A memory copy of `step` was staged; the loop stood still `blocked_s` for it."""
        if self.memory_schedule is not None:
            self.memory_schedule.record(step)
        self.event("checkpoint_in_memory", step=step, blocked_s=round(blocked_s, 4))

    def exit_stopped(self, step: int) -> NoReturn:
        """After the stop checkpoint was committed: tell the launcher and end the worker with 143
        (every rank, so every pod's launcher exits 143 and the JobSet restarts the gang without
        spending `maxRestarts`)."""
        self._write(contract.STOPPED_VAR, {"step": step, "signal": self.stop_signal})
        self.event("stopped", step=step, signal=self.stop_signal)
        raise SystemExit(EXIT_STOPPED)

    def declare_finished(self, step: int | None = None) -> None:
        """Training finished: the worker's exit 0 is a finished run, also if a stop signal came."""
        self._write(contract.FINISHED_VAR, {"step": step})
        self.event("training_complete", step=step)

    def config_error(self, *lines: str) -> NoReturn:
        report_config_error(lines)
        raise SystemExit(2)

    def _write(self, var: str, report: dict) -> None:
        path = os.environ.get(var)
        if not path:
            return
        try:
            checkpoint.atomic_write_json(path, {**report, "rank": self.rank})
        except OSError as e:
            sys.stderr.write(f"launcher: cannot write {var} {path!r}: {e.strerror}\n")

    # ----------------------------------------------------------- checkpoints

    def ranks(self) -> framework_checkpoint.Ranks:
        """The collectives of the checkpoint protocol and the stop flags: a gloo group of their
        own (created on first use, by every rank at the same point), so they never interleave
        with the training loop's collectives."""
        if self._ranks is None:
            collective: checkpoint.Collective = checkpoint.SOLO
            if self.world_size > 1:
                import torch.distributed as dist

                from .collective import ProcessGroupCollective

                timeout = datetime.timedelta(seconds=self.collective_timeout_s)
                group = dist.new_group(backend="gloo", timeout=timeout)
                if not isinstance(group, dist.ProcessGroup):  # new_group's "not a member": every rank is
                    raise RuntimeError("this rank is not a member of the stop and checkpoint process group")
                self._flags = group
                collective = ProcessGroupCollective(group)
            self._ranks = framework_checkpoint.Ranks(self.rank, self.world_size, collective)
        return self._ranks

    def select_resume(self, framework: str) -> CheckpointInfo | None:
        """The verified checkpoint of `framework` to resume from (every rank, same answer),
        logged by rank 0."""
        started = time.monotonic()
        skipped: list[dict] = []
        info = framework_checkpoint.select(
            self.checkpoint_dir, self.resume_from, self.ranks(), framework,
            on_skip=lambda path, e: skipped.append({"path": path, "reason": str(e)}))
        for skip in skipped:
            self.event("checkpoint_skipped", **skip)
        if info is not None:
            self.event("checkpoint_resumed", step=info.step, path=info.path, skipped=len(skipped),
                         duration_s=round(time.monotonic() - started, 3))
            autoprogress.REPORTER.align(info.step)
        return info

    def select_memory_resume(self) -> CheckpointInfo | None:
        """The memory copy (launcher.memory_tier) every rank resumes from, or None (every rank, same
        answer). When it is one, the durable schedule goes on from the newest durable checkpoint."""
        if self.memory is None:
            return None
        started = time.monotonic()
        info = memory_tier.choose(self.memory, self.checkpoint_dir, self.ranks().collective, local_rank=self.local_rank,
                                  # from any rank: only the node's local rank 0 knows its copy failed
                                  on_skip=lambda path, e: progress.log("checkpoint_skipped", path=path, reason=str(e),
                                                                       tier="memory"))
        if info is not None:
            memory_tier.anchor(self.schedule, checkpoint.latest_complete(self.checkpoint_dir))
            self.event("checkpoint_resumed", step=info.step, path=info.path, tier="memory",
                       duration_s=round(time.monotonic() - started, 3))
            autoprogress.REPORTER.align(info.step)
        return info

    def forget_memory_copies_after(self, step: int) -> None:
        """The node's writer (local rank 0): memory copies past the step the run resumed from go."""
        if self.memory is not None and self.local_rank == 0:
            memory_tier.forget_newer(self.memory, step)

    def fresh_checkpoint_dir(self, path: str, step: int) -> None:
        """Before a framework saves into `path` (every rank): rank 0 removes a partial one an
        interrupted attempt left, and creates it; agreed."""
        def fresh() -> None:
            if os.path.exists(path):
                checkpoint.refuse_foreign(path)
                checkpoint._remove_checkpoint(path)
            os.makedirs(path)

        self.ranks().agreed(f"step {step}: preparing {path}", fresh if self.rank == 0 else lambda: None)

    def commit(self, path: str, step: int, *, framework: str, resume: str = "") -> None:
        framework_checkpoint.commit(path, step, self.ranks(), keep=self.keep, framework=framework, resume=resume)


_CURRENT: Worker | None = None


def current() -> Worker:
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = Worker()
    return _CURRENT
