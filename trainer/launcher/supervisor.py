"""Runs torchrun for the launcher: forwards stop signals to the workers, routes their stdout,
reaps children as PID 1, and ends torchrun when waiting longer would be wrong (a worker failed
and torchrun hangs on a peer; a stop whose grace period runs out). How the wait ended is a
`TorchrunEnd`, and its `torchrun_rc` is what the launcher's exit code weighs."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, BinaryIO

from . import contract, progress

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stat_fields(pid: int | str) -> list[str] | None:
    """/proc/<pid>/stat's fields from the state (field 3, proc(5)) on, or None where it cannot be
    read: the command name before them may hold spaces and parentheses, so they start after its last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()


def process_stats() -> dict[int, list[str]]:
    """Every process's stat fields (as stat_fields), by pid: one scan of /proc (Linux)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    stats = {}
    for entry in entries:
        if entry.isdigit() and (fields := stat_fields(entry)) is not None:
            stats[int(entry)] = fields
    return stats


def children_of(pid: int, *, running: bool = False) -> list[int]:
    """Direct children of pid, from /proc (Linux); with `running`, not those that exited and wait
    for pid to reap them (zombies)."""
    return [child for child, fields in process_stats().items()
            if len(fields) > 1 and fields[1] == str(pid) and not (running and fields[0] == "Z")]


def started_at(pid: int) -> float | None:
    """When pid started, in wall-clock seconds (to a clock tick, 10 ms): /proc/<pid>/stat's field 22
    counts clock ticks since boot (proc(5)), the time CLOCK_BOOTTIME counts too."""
    try:
        ticks = int((stat_fields(pid) or [])[19])
    except (ValueError, IndexError):
        return None
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))


def _set_parent_death_signal() -> None:
    """In the torchrun child: get SIGTERM if the launcher dies (Linux only)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG


def route_output(pipe: IO[bytes] | None, stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
                 observe: Callable[[dict], None] | None = None) -> None:
    """The workers' stdout, line by line: JSON objects (the launcher's and the trainer's events) to
    the pod's stdout, anything else (frameworks print dicts, banners, progress) to its stderr, so
    stdout stays JSON lines that log metric filters and `scripts/verify` can parse. `observe` sees
    each JSON object after it was written (launcher.run_status); its failure never stops the routing."""
    if pipe is None:
        return
    out = stdout or sys.stdout.buffer
    err = stderr or sys.stderr.buffer
    for line in iter(pipe.readline, b""):
        record = _json_object(line) if line.lstrip().startswith(b"{") else None
        target = out if record is not None else err
        target.write(line)
        target.flush()
        if record is not None and observe is not None:
            with contextlib.suppress(Exception):
                observe(record)


def _json_object(line: bytes) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class StopRequest:
    """The first stop signal (SIGTERM, SIGINT) the launcher got, from the start of `main`. The
    launcher is the container's PID 1, and PID 1 ignores a signal it has no handler for: without
    one from the start, the kubelet's SIGTERM during the rendezvous wait (up to TRAIN_RDZV_WAIT_S)
    would be lost, and the pod would sit out its grace period until the SIGKILL."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.signum: int | None = None
        self.at: float | None = None
        """When the first stop signal came (`clock`): the kubelet's SIGKILL follows a grace period later."""
        self.clock = clock
        self.on_signal: Callable[[int], None] | None = None
        """Called on every stop signal, once something can act on it (the Supervisor)."""

    def install(self) -> None:
        for s in FORWARDED_SIGNALS:
            signal.signal(s, self._handle)

    def _handle(self, signum, _frame) -> None:
        self.request(signum)

    def request(self, signum: int) -> None:
        if self.signum is None:
            self.signum, self.at = signum, self.clock()
        if self.on_signal is not None:
            self.on_signal(signum)


# How long torchrun may outlive its workers once one of them failed. Its agent talks to the
# rendezvous store that another pod's agent may host: with that pod frozen (a hung node), each
# store call waits its 60 s read timeout, and a worker that failed in TRAIN_COLLECTIVE_TIMEOUT_S
# would leave the pod running for minutes more.
TORCHRUN_EXIT_GRACE_S = 10.0


class WorkerWatch:
    """Notices when torchrun's workers are all gone, one of them failed (TRAIN_WORKER_FAILED_FILE)
    and torchrun itself is still running. After workers that succeeded, torchrun may wait for the
    other pods' agents in its exit barrier (up to 300 s, torch.distributed.elastic.agent.server.api):
    that wait is left alone until a stop signal's deadline (Supervisor)."""

    def __init__(self, torchrun_pid: int, failed_file: str, clock: Callable[[], float] = time.monotonic,
                 exit_grace_s: float = TORCHRUN_EXIT_GRACE_S):
        self.torchrun_pid, self.failed_file, self.clock = torchrun_pid, failed_file, clock
        self.exit_grace_s = exit_grace_s
        """How long torchrun may go on without workers after one failed: TORCHRUN_EXIT_GRACE_S, or
        with in-place restarts the time a new round may take to start (launcher.inplace)."""
        self._had_workers = False
        self._gone_since: float | None = None
        self._next_look = 0.0
        self.workers_gone = False
        """The workers had started and none runs now (torchrun may still)."""
        self.running: list[int] = []
        """The workers running at the last look."""
        self.rounds = 0
        """New sets of workers torchrun started after the first (its restart rounds)."""
        self.round_gap_s: float | None = None
        """For the last new round: seconds from the look that found no worker running to it."""
        self._empty_since: float | None = None

    @property
    def had_workers(self) -> bool:
        return self._had_workers

    def torchrun_outlived_its_workers(self) -> bool:
        now = self.clock()
        if now < self._next_look:
            return False
        self._next_look = now + 0.5  # a /proc scan: twice a second is plenty
        running = children_of(self.torchrun_pid, running=True)  # a hung torchrun does not reap its workers
        if running:
            self._note_round(running, now)
            self._had_workers, self._gone_since, self.workers_gone = True, None, False
            return False
        self.running = []
        if self._empty_since is None:
            self._empty_since = now
        self.workers_gone = self._had_workers
        if not self._had_workers or not os.path.exists(self.failed_file):
            return False
        if self._gone_since is None:
            self._gone_since = now
        return now - self._gone_since >= self.exit_grace_s

    def _note_round(self, running: list[int], now: float) -> None:
        """torchrun stops every local worker before a restart round (SimpleElasticAgent._restart_workers),
        so a round's workers share no process with the last look's; a set that only grew is one
        round starting. The failed file was the last round's: cleared for the new one, unless the new
        round's own worker wrote it, failing before this look (0.5 s apart, more under load): that
        failure must still end a torchrun that starts no further round."""
        if self._had_workers and set(running).isdisjoint(self.running):
            self.rounds += 1
            self.round_gap_s = None if self._empty_since is None else now - self._empty_since
            if not _written_by_this_round(self.failed_file, running, if_unknown=False):
                with contextlib.suppress(OSError):
                    os.unlink(self.failed_file)
        self.running, self._empty_since = running, None


def _written_by_this_round(path: str, running: list[int], if_unknown: bool = True) -> bool:
    """A report file written after the running workers started is theirs; one written before is an
    earlier round's, whose workers exited and torchrun restarted between two looks (0.5 s apart, more
    under load): that round must not train on. Unknown start times or no file: `if_unknown` (for a
    report, theirs: the workers end anyway; for the failed file, not: a stale one kept would end a
    healthy round's torchrun waiting in its exit barrier)."""
    try:
        written = os.path.getmtime(path)
    except OSError:
        return if_unknown
    starts = [start for start in map(started_at, running) if start is not None]
    return if_unknown if not starts else written >= min(starts) - START_TIME_ERROR_S


# started_at's error: one clock tick (USER_HZ, 100 on Linux) and the read of two clocks.
START_TIME_ERROR_S = 0.02


class TorchrunEnd(enum.Enum):
    """How the launcher's wait for torchrun ended."""

    EXITED = "exited"
    """torchrun exited by itself: its own exit code."""
    HUNG_AFTER_FAILURE = "hung_after_failure"
    """A worker failed and torchrun outlived it by TORCHRUN_EXIT_GRACE_S: killed, a failure."""
    BARRIER_AT_STOP_DEADLINE = "barrier_at_stop_deadline"
    """After a stop signal its workers had ended, and torchrun still waited in its exit barrier at the
    stop deadline: killed. torch enters that barrier only once every local worker exited 0
    (SimpleElasticAgent._invoke_run, torch/distributed/elastic/agent/server/api.py): the workers' 0."""
    WORKERS_AT_STOP_DEADLINE = "workers_at_stop_deadline"
    """After a stop signal the workers were still running (or one had failed) at the stop deadline:
    killed, a failure unless they reported a stop."""
    NOT_RESTARTED = "not_restarted"
    """With in-place restarts (launcher.inplace): the workers reported a config error or a stop with
    the gang, or a new round started after a stop signal: killed rather than let it retry; the
    workers' reports decide the exit code as they do without restarts."""


# What each end gives as torchrun's exit code, which launcher.main.classify weighs into an Outcome.
TORCHRUN_RC = {TorchrunEnd.HUNG_AFTER_FAILURE: 1, TorchrunEnd.BARRIER_AT_STOP_DEADLINE: 0,
               TorchrunEnd.WORKERS_AT_STOP_DEADLINE: 1, TorchrunEnd.NOT_RESTARTED: 1}


class Supervisor:
    """Runs torchrun, forwards stop signals to the workers, reaps children. After a stop signal it
    never waits past `grace_s - contract.STOP_MARGIN_S`: the kubelet SIGKILLs the pod `grace_s`
    after its SIGTERM, and torchrun may wait for the other pods' agents for 300 s in its exit
    barrier (a worker that exits 0 on SIGTERM, as Lightning's does, while a peer runs on). With no
    grace period stated, only that barrier is bounded (by Kubernetes' default grace): workers still
    saving are left to the kubelet rather than cut short by a guess."""

    def __init__(self, cmd: list[str], env: dict[str, str], stop_request: StopRequest, grace_s: float | None = None,
                 observe: Callable[[dict], None] | None = None, restart_wait_s: float | None = None):
        self.cmd = cmd
        self.observe = observe
        """Sees each JSON line of the workers (launcher.run_status.RunStatus.observe)."""
        self.restart_wait_s = restart_wait_s
        """With in-place restarts (launcher.inplace), how long a new round may take; None: torchrun
        never restarts its workers."""
        self._rounds_seen = 0
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.stop_request = stop_request
        self.grace_s = grace_s
        """The pod's grace period; None when the workload does not state it (contract.UNSTATED_GRACE_S)."""
        self.end = TorchrunEnd.EXITED
        self._said_gone = False
        self._signalled: set[int] = set()
        """Every process a stop signal was forwarded to: a round whose workers all got it started
        before the signal, whenever the watch first saw it."""
        stop_request.on_signal = self._forward

    @property
    def received(self) -> int | None:
        return self.stop_request.signum

    def stop(self) -> None:
        """Stop the workers as on SIGTERM (from another thread, e.g. the fabric check)."""
        self.stop_request.request(signal.SIGTERM)

    def _forward(self, signum: int) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        # Signal the workers directly, not torchrun: torchrun would SIGKILL
        # them 30 s after passing the signal on, which may be too short to
        # flush a checkpoint. torchrun exits by itself once they are gone.
        targets = children_of(proc.pid) or [proc.pid]
        self._signalled.update(targets)
        for pid in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        progress.log("signal_forwarded", signal=signal.Signals(signum).name, pids=targets)

    def stop_deadline(self) -> float | None:
        """When the launcher ends torchrun after a stop signal (`StopRequest.clock` time), if one came."""
        at = self.stop_request.at
        grace = contract.UNSTATED_GRACE_S if self.grace_s is None else self.grace_s
        return None if at is None else at + grace - contract.STOP_MARGIN_S

    def _check(self, watch: WorkerWatch) -> None:
        """Between reaps: end torchrun if waiting longer would be wrong."""
        if self.proc is None or self.end is not TorchrunEnd.EXITED:
            return
        if watch.torchrun_outlived_its_workers():
            progress.log("torchrun_killed", reason=f"still running {watch.exit_grace_s:.0f} s after its workers ended"
                         + (" and no new round started" if self.restart_wait_s is not None else ""))
            self._kill(TorchrunEnd.HUNG_AFTER_FAILURE)
            return
        if self.restart_wait_s is not None and self._not_restarted(watch):
            return
        if watch.workers_gone and not self._said_gone:
            # What the pod does between the trainer's last line (`stopped`, `training_complete`)
            # and its exit: the workers' shutdown took until now; torchrun may wait on.
            self._said_gone = True
            failed = os.path.exists(watch.failed_file)
            progress.log("workers_exited", failed=failed, torchrun=(
                f"a worker failed: torchrun gets {watch.exit_grace_s:.0f} s to start new workers in place or end"
                if failed and self.restart_wait_s is not None else
                f"a worker failed: torchrun gets {TORCHRUN_EXIT_GRACE_S:.0f} s to end" if failed else
                "waits for the other pods' agents in its exit barrier (up to 300 s; after a stop, until "
                f"{(self.grace_s or contract.UNSTATED_GRACE_S) - contract.STOP_MARGIN_S:.0f} s after the signal)"))
        deadline = self.stop_deadline()
        if deadline is None or self.stop_request.clock() < deadline:
            return
        running = children_of(self.proc.pid, running=True)
        in_barrier = watch.had_workers and not running and not os.path.exists(watch.failed_file)
        if not in_barrier and self.grace_s is None:
            return  # workers at work (a stop save?) and no grace period stated: the kubelet decides
        end = TorchrunEnd.BARRIER_AT_STOP_DEADLINE if in_barrier else TorchrunEnd.WORKERS_AT_STOP_DEADLINE
        progress.log("stop_deadline", end=end.value, grace_s=self.grace_s or contract.UNSTATED_GRACE_S,
                     margin_s=contract.STOP_MARGIN_S, workers_running=running)
        self._kill(end, running)

    def _not_restarted(self, watch: WorkerWatch) -> bool:
        """In-place restarts: log each new round; end torchrun (True) rather than let it restart
        workers that reported a config error or a stop with the gang, or start a round after a
        stop signal. The stop file is written before the worker exits: only once none runs, or a
        new round started anyway, is it this round's end. A round first seen after the signal may
        have started before it (the looks are 0.5 s apart, more under load): its workers got the
        signal and are stopping, so it is left to end as any stopping round does."""
        if watch.rounds > self._rounds_seen:
            self._rounds_seen, self._said_gone = watch.rounds, False
            progress.log("workers_restarted", round=watch.rounds, gap_s=None if watch.round_gap_s is None
                         else round(watch.round_gap_s, 3), pids=watch.running)
            if self.received is not None and not self._signalled.issuperset(watch.running):
                progress.log("torchrun_killed", reason="a new round of workers after a stop signal")
                self._kill(TorchrunEnd.NOT_RESTARTED, watch.running)
                return True
        reported = [(what, self.env[var]) for what, var in contract.RUN_ENDING_REPORTS
                    if self.env.get(var) and os.path.exists(self.env[var])]
        if not reported:
            return False
        what, path = reported[0]
        if watch.running and _written_by_this_round(path, watch.running):
            return False  # its workers end on their own, once the report is written
        progress.log("torchrun_killed", reason=f"the workers reported {what}: not restarted in place")
        self._kill(TorchrunEnd.NOT_RESTARTED, watch.running)
        return True

    def _kill(self, end: TorchrunEnd, workers: list[int] | None = None) -> None:
        assert self.proc is not None
        for pid in workers or []:  # workers run in sessions of their own: torchrun's group misses them
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.end = end

    def run(self) -> int | None:
        """torchrun's exit code, or what its end stands for (TORCHRUN_RC); None if a stop came
        before it started (nothing to save)."""
        if self.received is not None:
            return None
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            stdout=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_set_parent_death_signal,
        )
        router = threading.Thread(target=route_output, args=(self.proc.stdout,), kwargs={"observe": self.observe},
                                  name="stdout-router", daemon=True)
        router.start()
        if self.received is not None:  # signal arrived while starting
            self._forward(self.received)
        watch = WorkerWatch(self.proc.pid, self.env.get(contract.WORKER_FAILED_VAR, ""),
                            exit_grace_s=TORCHRUN_EXIT_GRACE_S if self.restart_wait_s is None else self.restart_wait_s)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == self.proc.pid:  # other pids: orphans reaped as PID 1
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                break
            if pid == 0:
                self._check(watch)
                time.sleep(0.1)
        rc = self.proc.returncode if self.proc.returncode is not None else self.proc.wait()
        # A worker's orphan may hold the pipe open: never wait for it long, and after a stop
        # deadline hardly at all (the SIGKILL is STOP_MARGIN_S away).
        router.join(timeout=1 if self.end is not TorchrunEnd.EXITED else 5)
        if self.end is not TorchrunEnd.EXITED:
            return TORCHRUN_RC[self.end]
        return 128 - rc if rc < 0 else rc
