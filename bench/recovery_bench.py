#!/usr/bin/env python3
"""Recovery on the localhost gang: the time from a fault to the next trained step, and the steps
redone, with in-place restarts (launcher.inplace) paired against today's full restart.

    PYTHONPATH=trainer python bench/recovery_bench.py [--pairs 3] [--classes crash,collective,...] [--json FILE]

The gang: two launchers (pods 0 and 1) of one job on 127.0.0.1, one example-trainer worker each
(gloo on CPU), a checkpoint every CHECKPOINT_EVERY steps, a fault a few steps past one. Both sides
of a pair start from the same running gang (launched with PET_MAX_RESTARTS on), in rotated
order (bench/harness.py):
- project, in place: the fault, then whatever the launchers do by themselves; the time ends at the
  first step line of the restarted workers;
- floor, full restart (today's path, as JobSet's recreate after a failed pod): at the fault both
  launchers' process trees are killed and two new launchers start. JobSet's own reaction (seeing
  the failed Job, deleting the pods) and pod scheduling and container start are not in it, which
  favours the full restart: a cluster adds them to the floor only.

Fault classes: `crash` (SIGKILL of pod 1's worker: an OOM kill, a segfault), `collective` (pod 1's
worker raises a RuntimeError, as a failed NCCL/gloo collective does: injected through a
sitecustomize that raises from a SIGUSR1 handler), `freeze` (every process of pod 1 stopped: pod 0
fails after the collective timeout; with restarts on it waits TRAIN_INPLACE_RESTART_WAIT_S for a
round that never comes, then the gang is recreated as on the floor), and, shown once without a
pair since in place changes nothing for them, `lost` (pod 1's whole tree killed: JobSet recreates)
and `stop` (SIGTERM to pod 0: both stop after saving with 143 and the gang restarts), and `memory`: a
worker crash in place with the memory checkpoint tier on (launcher.memory_tier: a copy in each pod's
memory every MEMORY_INTERVAL_S, a durable one every MEMORY_DURABLE_EVERY steps), its steps redone
against the steps between two memory copies before the fault. Goals: a worker crash in place <= 0.5x
the full restart; with the memory tier, steps redone <= the memory tier's interval. Breakdowns of one
full restart and one in-place restart come from the events' timestamps; the interpreter and torch import is timed alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from launcher import inplace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.harness, as `make bench` runs it
from bench.harness import Goal, Report, Result, Sample, run_pairs, timed_process

TRAINER_DIR = Path(__file__).resolve().parent.parent / "trainer"
# In-place rounds per launcher when on: more than any pair spends (torchrun sets no bound of its own).
IN_PLACE_ROUNDS = 20
CHECKPOINT_EVERY = 10
COLLECTIVE_TIMEOUT_S = 10
MEMORY_INTERVAL_S = 0.5
MEMORY_DURABLE_EVERY = 40  # durable copies 4x as far apart as the other classes': the memory copy does the rest
HPARAMS = {"seed": 0, "steps": 1_000_000, "batch_size": 64, "lr": 0.003, "hidden": 64, "log_every": 1,
           "num_workers": 1, "prefetch_factor": 2, "pg_timeout_s": COLLECTIVE_TIMEOUT_S,
           "checkpoint_min_interval_s": 0.0, "step_delay_s": 0.05,
           "data": {"shards": 2, "samples_per_shard": 4096, "dim": 32, "classes": 10}}
# In the workers only (torchrun sets LOCAL_RANK): SIGUSR1 raises in the training loop, where a
# failed collective raises.
# Rank 0's worker also marks its interpreter start, for the breakdown.
INJECT_SITE = """\
import json, os, signal, sys, time
if "LOCAL_RANK" in os.environ:
    if os.environ.get("RANK") == "0":
        sys.stdout.write(json.dumps({"ts": time.time(), "event": "bench_worker_start"}) + "\\n")
        sys.stdout.flush()
    def _collective_error(signum, frame):
        raise RuntimeError("injected by bench/recovery_bench.py: a collective failed on this rank")
    signal.signal(signal.SIGUSR1, _collective_error)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, IndexError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rfind(")") + 2:].split()
            if entry.isdigit() and int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def tree(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        kids = children(frontier.pop())
        found += kids
        frontier += kids
    return found


class Pod:
    def __init__(self, env: dict[str, str], out: Path, started: float):
        self.out, self.started = out, started
        with open(out, "wb") as stdout, open(out.with_suffix(".stderr"), "wb") as stderr:  # kept for a look
            self.proc = subprocess.Popen([sys.executable, "-m", "launcher", "--", "-m", "example_trainer.train"],
                                         env=env, stdout=stdout, stderr=stderr, start_new_session=True)

    def events(self) -> list[dict]:
        found = []
        for line in self.out.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                if line.startswith("{"):
                    found.append(json.loads(line))
        return found

    def workers(self) -> list[int]:
        return [w for t in children(self.proc.pid) for w in children(t)]

    def kill(self) -> None:
        pids = [self.proc.pid, *tree(self.proc.pid)]
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids[1:]):
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


class Gang:
    """Two launchers of one job, relaunched as a JobSet recreate would (new processes, same
    checkpoint directory), and what their events say."""

    def __init__(self, work: Path, inject_site: Path, memory_tier: bool = False):
        self.work, self.attempt, self.pods = work, 0, []
        self.checkpoint_every = MEMORY_DURABLE_EVERY if memory_tier else CHECKPOINT_EVERY
        # Each pod's own emptyDir: a recreated pod (a new attempt) starts with an empty one.
        self.memory = {"TRAIN_MEMORY_CHECKPOINT_INTERVAL_S": str(MEMORY_INTERVAL_S)} if memory_tier else {}
        (work / "hparams.yaml").write_text(yaml.safe_dump(HPARAMS))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "TORCHELASTIC_", "PET_"))}
        self.env.update({
            "PYTHONPATH": os.pathsep.join([str(TRAINER_DIR), str(inject_site)]), "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore", "TRAIN_JOB_ID": "recovery-bench", "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "1", "TRAIN_RDZV_HOST": "127.0.0.1",
            "TRAIN_CHECKPOINT_DIR": str(work / "checkpoints"), "TRAIN_DATA_DIR": str(work / "data"),
            "TRAIN_HPARAMS_FILE": str(work / "hparams.yaml"), "TRAIN_CHECKPOINT_EVERY_STEPS": str(self.checkpoint_every),
            "TRAIN_COLLECTIVE_TIMEOUT_S": str(COLLECTIVE_TIMEOUT_S), "TRAIN_LOG_EVERY_STEPS": "1"})
        self.in_place = False

    def start(self, in_place: bool) -> None:
        """New launchers (JobSet's recreate): with in-place restarts on, or as today."""
        self.attempt += 1
        self.in_place = in_place
        port = str(free_port())
        started = time.time()
        mode = {inplace.RESTARTS_VAR: str(IN_PLACE_ROUNDS if in_place else 0), **self.memory}
        memory = ({i: {"TRAIN_MEMORY_CHECKPOINT_DIR": str(self.work / f"a{self.attempt}-pod{i}-memory")} for i in range(2)}
                  if self.memory else {0: {}, 1: {}})
        self.pods = [Pod({**self.env, **mode, **memory[i], "TRAIN_RDZV_PORT": port,
                          "TRAIN_RESTART_ATTEMPT": str(self.attempt - 1),
                          "TRAIN_HEARTBEAT_FILE": str(self.work / f"a{self.attempt}-pod{i}" / "heartbeat")},
                         self.work / f"a{self.attempt}-pod{i}.stdout", started) for i in range(2)]

    def kill(self) -> None:
        for pod in self.pods:
            pod.kill()

    def events(self) -> list[dict]:
        return sorted((e for pod in self.pods for e in pod.events()), key=lambda e: e.get("ts", 0))

    def wait_for(self, what: str, found: Callable[[list[dict]], object], timeout: float = 240) -> object:
        deadline = time.monotonic() + timeout
        while not (value := found(self.events())):
            if time.monotonic() > deadline:
                raise RuntimeError(f"recovery bench: no {what} within {timeout} s; output in {self.work}")
            time.sleep(0.05)
        return value

    def last_step(self, events: list[dict], before: float | None = None) -> int:
        return max((e["step"] for e in events if e.get("event") == "step" and (before is None or e["ts"] <= before)),
                   default=0)

    def run_to_mid_interval(self) -> None:
        """Until the gang trains, a few steps past a checkpoint (the fault then redoes them)."""
        def past(events: list[dict]) -> bool:
            resumed = [e for e in events if e.get("event") == "checkpoint_resumed"]
            base = resumed[-1]["step"] if resumed else 0
            every = self.checkpoint_every
            target = (base // every + 1) * every + every // 2
            return self.last_step(events) >= target
        self.wait_for("training past a checkpoint", past)

    def next_step_after(self, fault_ts: float, last_step: int) -> tuple[float, dict]:
        """(the fault to the first step of resumed workers, the recovery's events)."""
        def found(events: list[dict]):
            resumed = next((e for e in events if e.get("event") == "checkpoint_resumed" and e["ts"] > fault_ts), None)
            step = resumed and next((e for e in events if e.get("event") == "step" and e["ts"] > resumed["ts"]), None)
            return step and (resumed, step)
        resumed, step = self.wait_for("step after the fault", found)  # type: ignore[misc]
        events = self.events()
        redone = max(0, last_step - resumed["step"])  # a stop saves at a step after the signal: none redone
        return step["ts"] - fault_ts, {"resumed": resumed, "step": step, "redone": redone,
                                       "events": [e for e in events if e["ts"] > fault_ts - 0.001]}

    def ensure(self, in_place: bool) -> None:
        """A gang in that mode, training (restarted untimed if it is in the other)."""
        if not self.pods or self.in_place != in_place or any(p.proc.poll() is not None for p in self.pods):
            self.kill()
            self.start(in_place)

    def recreate_when_a_pod_ends(self, timeout: float = 240) -> None:
        """JobSet's recreate: once a pod's launcher exited (its Job failed), every pod is replaced."""
        self.wait_for("a pod to end", lambda _: any(p.proc.poll() is not None for p in self.pods), timeout)
        self.kill()
        self.start(self.in_place)


def inject(gang: Gang, kind: str) -> float:
    """The fault on pod 1 (pod 0 for a stop); its time."""
    pod = gang.pods[0 if kind == "stop" else 1]
    targets = {"crash": (pod.workers(), signal.SIGKILL), "collective": (pod.workers(), signal.SIGUSR1),
               "freeze": ([pod.proc.pid, *tree(pod.proc.pid)], signal.SIGSTOP),
               "lost": ([pod.proc.pid, *tree(pod.proc.pid)], signal.SIGKILL), "stop": ([pod.proc.pid], signal.SIGTERM)}
    pids, sig = targets[kind]
    if not pids:
        raise RuntimeError(f"recovery bench: pod 1 has no worker to fault; output in {gang.work}")
    at = time.time()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return at


class Faults:
    """Each side of a pair: one fault of `kind` on a running gang, and its recovery."""

    def __init__(self, gang: Gang):
        self.gang = gang
        self.details: dict[str, list[dict]] = {}

    def measure(self, kind: str, in_place: bool) -> Sample:
        gang = self.gang
        gang.ensure(in_place)
        gang.run_to_mid_interval()
        at = inject(gang, kind)
        trained = gang.last_step(gang.events(), before=at)  # read before a recreate replaces the pods' output
        if kind == "lost":  # the lost pod's Job fails: JobSet deletes every pod and creates them again
            gang.kill()
            gang.start(in_place)
        elif kind in ("freeze", "stop") or not in_place:  # today's path: a pod ends, then the recreate
            gang.recreate_when_a_pod_ends()
        seconds, detail = gang.next_step_after(at, trained)
        detail["pods"], detail["fault_at"] = [p.started for p in gang.pods], at
        self.details.setdefault(f"{kind}/{'in place' if in_place else 'full'}", []).append(detail)
        return Sample(seconds)

    def side(self, kind: str, in_place: bool) -> Callable[[], Sample]:
        return lambda: self.measure(kind, in_place)


def _first(events: list[dict], name: str, after: float = 0.0, last: bool = False) -> float | None:
    times = [e["ts"] for e in events if e.get("event") == name and e["ts"] >= after]
    return (max(times) if last else min(times)) if times else None


def breakdown(detail: dict, fault_at: float, in_place: bool) -> dict[str, float | None]:
    """Where a recovery's seconds went, from the events' timestamps (rank 0 logs the trainer's)."""
    events, resumed, step = detail["events"], detail["resumed"], detail["step"]
    restore_start = resumed["ts"] - resumed["duration_s"]
    marks: list[tuple[str, float | None]]
    if in_place:
        marks = [("fault noticed (workers exited)", _first(events, "workers_exited", fault_at)),
                 ("workers stopped on every pod, rendezvous, new workers (round started)",
                  _first(events, "workers_restarted", fault_at, last=True)),
                 ("worker process started", _first(events, "bench_worker_start", fault_at))]
    else:
        launched = max(detail["pods"])
        marks = [("fault to a pod's exit, recreate (launchers spawned)", launched),
                 ("launcher start (to launcher_start)", _first(events, "launcher_start", launched, last=True)),
                 ("torchrun start (imports torch) and rendezvous, worker process started",
                  _first(events, "bench_worker_start", fault_at))]
    marks += [("worker: torch import, process group, data, model (to the restore)", restore_start),
              ("restore", resumed["ts"]),
              ("first step", step["ts"])]
    out, before = {}, fault_at
    for name, at in marks:
        out[name] = None if at is None else round(at - before, 3)
        before = at if at is not None else before
    return out


def single(faults: Faults, kind: str, report: Report) -> None:
    """A fault class in place changes nothing for: measured once, shown without a pair."""
    sample = faults.measure(kind, True)
    detail = faults.details[f"{kind}/in place"][-1]
    report.extra.setdefault("single", {})[kind] = {"seconds": round(sample.wall, 3), "steps_redone": detail["redone"]}
    print(f"  {kind}: fault to the next step {sample.wall:7.2f} s, steps redone {detail['redone']} (JobSet's recreate)")


def paired(faults: Faults, kind: str, pairs: int, report: Report) -> None:
    goal = Goal("<=", 0.5) if kind in ("crash", "collective") else None
    note = {"crash": "SIGKILL of pod 1's worker", "collective": "pod 1's worker raises a RuntimeError",
            "freeze": f"pod 1 stopped: pod 0 fails after the {COLLECTIVE_TIMEOUT_S} s collective timeout; in place "
                      f"adds its {inplace.DEFAULT_RESTART_WAIT_S} s restart wait before the recreate"}[kind]
    result = run_pairs(f"{kind}: fault to the next step", (f"in place ({kind})", faults.side(kind, True)),
                       (f"full restart ({kind})", faults.side(kind, False)), pairs=pairs, warmup=0, goal=goal,
                       note=note)
    report.add(result)
    redone = {side: [d["redone"] for d in faults.details[f"{kind}/{side}"]] for side in ("in place", "full")}
    report.extra.setdefault("steps_redone", {})[kind] = redone
    print(f"    steps redone: in place {redone['in place']}, full restart {redone['full']} "
          f"(checkpoint every {CHECKPOINT_EVERY} steps)")


def import_floor(pairs: int) -> float:
    """The interpreter and torch import alone (a worker, torchrun and the launcher's python each pay
    the interpreter; the worker and torchrun the torch import)."""
    samples = sorted(timed_process([sys.executable, "-c", "import torch"]).wall for _ in range(pairs))
    return samples[len(samples) // 2]


def memory_tier_crash(work: Path, inject_site: Path, pairs: int, report: Report) -> None:
    """`memory`: worker crashes in place with the memory tier on; steps redone against the steps
    between the last two memory copies before each fault (the tier's interval, in steps)."""
    (work / "memory-tier").mkdir()
    gang = Gang(work / "memory-tier", inject_site, memory_tier=True)
    faults, redone, interval = Faults(gang), [], []
    try:
        for _ in range(pairs):
            faults.measure("crash", True)
            detail = faults.details["crash/in place"][-1]
            copies = [e["step"] for e in gang.events() if e.get("event") == "checkpoint_in_memory"
                      and e["ts"] < detail["fault_at"]]
            if detail["resumed"].get("tier") != "memory" or len(copies) < 2:
                raise RuntimeError(f"recovery bench: the crash did not resume from a memory copy; output in {gang.work}")
            redone.append(Sample(float(detail["redone"])))
            interval.append(Sample(float(copies[-1] - copies[-2])))
    finally:
        gang.kill()
    report.add(Result("memory tier: steps redone after a worker crash / its interval", "steps redone (in place)",
                      "steps between two memory copies", Goal("<=", 1.0), redone, interval, 0,
                      note=f"counts, not seconds: a memory copy every {MEMORY_INTERVAL_S} s, a durable one every "
                           f"{MEMORY_DURABLE_EVERY} steps"))
    print(f"  memory: steps redone {[int(s.wall) for s in redone]}, steps between memory copies "
          f"{[int(s.wall) for s in interval]}")


CLASSES = ("crash", "collective", "freeze", "lost", "stop", "memory")


def run(work: Path, classes: list[str], pairs: int, report: Report) -> None:
    inject_site = work / "inject"
    inject_site.mkdir()
    (inject_site / "sitecustomize.py").write_text(INJECT_SITE)
    gang = Gang(work, inject_site)
    faults = Faults(gang)
    try:
        for kind in classes:
            if kind == "memory":
                memory_tier_crash(work, inject_site, pairs, report)
            elif kind in ("lost", "stop"):
                single(faults, kind, report)
            else:
                paired(faults, kind, 1 if kind == "freeze" else pairs, report)
    finally:
        gang.kill()
    shown = {}
    for key in ("crash/in place", "crash/full"):
        if faults.details.get(key):
            detail = faults.details[key][-1]
            fault_at = detail["events"][0]["ts"] if detail["events"] else 0.0
            shown[key] = breakdown(detail, detail.get("fault_at", fault_at), key.endswith("in place"))
    report.extra["breakdown"] = shown
    report.extra["interpreter_and_torch_import_s"] = round(import_floor(3), 3)
    for key, parts in shown.items():
        print(f"  breakdown, {key}: " + ", ".join(f"{k} {v}" for k, v in parts.items()))
    print(f"  interpreter and torch import alone: {report.extra['interpreter_and_torch_import_s']} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="pairs for the crash and collective classes")
    parser.add_argument("--classes", default=",".join(CLASSES), help=f"comma-separated, of {', '.join(CLASSES)}")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent.parent / "build" / "bench" / "latest.json")
    args = parser.parse_args(argv)
    classes = [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        print(f"recovery bench: unknown classes {unknown}; choose from {', '.join(CLASSES)}", file=sys.stderr)
        return 2
    report = Report("recovery")
    print(f"recovery on the localhost gang (2 launchers x 1 worker, gloo; {args.pairs} pairs for crash and collective)")
    with tempfile.TemporaryDirectory(prefix="recovery-bench-") as tmp:
        run(Path(tmp), classes, args.pairs, report)
    report.save(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
