"""Helpers for the trainer tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher.supervisor import process_stats

ROOT = Path(__file__).resolve().parents[2]
TRAINER_DIR = ROOT / "trainer"

HAVE_TORCH = importlib.util.find_spec("torch") is not None
requires_torch = pytest.mark.skipif(
    not HAVE_TORCH,
    reason="torch is not installed (pip install torch==2.13.0, see requirements-dev.txt)",
)

# Small, fast data for every run: 2 shards x 4096 samples, 64 per batch -> 64 steps/epoch/rank.
SMALL_DATA = {"shards": 2, "samples_per_shard": 4096, "dim": 32, "classes": 10}
BASE_HPARAMS = {
    "seed": 0,
    "steps": 150,
    "batch_size": 64,
    "lr": 0.003,
    "hidden": 64,
    "log_every": 1,
    "num_workers": 2,
    "prefetch_factor": 2,
    "pg_timeout_s": 60,
    "checkpoint_min_interval_s": 0.0,
    "data": SMALL_DATA,
}


# ------------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ppid_map() -> dict[int, int]:
    return {pid: int(fields[1]) for pid, fields in process_stats().items() if len(fields) > 1}


def descendants(pid: int) -> list[int]:
    """All live descendants of pid (torchrun starts workers in sessions of their own,
    so the launcher's process group alone does not reach them)."""
    ppids = _ppid_map()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in ppids.items() if pp == parent]
        found.extend(kids)
        frontier.extend(kids)
    return found


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the launcher's process group and every descendant, frozen first so
    nothing gets to react (a crash, not a shutdown)."""
    pids = [proc.pid, *descendants(proc.pid)]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    # Wait until the killed workers are really gone (they hold the rendezvous port).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids[1:]):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().decode(errors="replace")
    except OSError:
        return False
    return state[state.rfind(")") + 2:].split()[0] != "Z"


class LauncherRun:
    """One launcher process with stdout/stderr in files under tmp_path."""

    def __init__(self, env: dict, workdir: Path, name: str, command: list[str] | None = None,
                 prefix: list[str] | None = None):
        self.name = name
        self.out_path = workdir / f"{name}.stdout"
        self.err_path = workdir / f"{name}.stderr"
        self.started = time.monotonic()
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*(prefix or []), sys.executable, "-m", "launcher", "--", *(command or ["-m", "example_trainer.train"])],
                env=env,
                cwd=workdir,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def events(self) -> list[dict]:
        out = []
        for line in self.out_path.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out

    def of(self, event: str) -> list[dict]:
        return [e for e in self.events() if e.get("event") == event]

    def steps(self) -> list[dict]:
        return self.of("step")

    def stderr_tail(self, n: int = 40) -> str:
        return "\n".join(self.err_path.read_text(errors="replace").splitlines()[-n:])

    def wait_for(self, predicate, timeout: float, what: str):
        """Poll the JSON events until predicate(events) is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            value = predicate(events)
            if value:
                return value
            if self.proc.poll() is not None:
                events = self.events()
                value = predicate(events)
                if value:
                    return value
                pytest.fail(
                    f"{self.name}: exited rc={self.proc.returncode} before {what}\n"
                    f"--- stderr tail ---\n{self.stderr_tail()}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"{self.name}: no {what} within {timeout}s\n--- stderr tail ---\n{self.stderr_tail()}")
            time.sleep(0.05)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc)
            pytest.fail(f"{self.name}: still running after {timeout}s\n--- stderr tail ---\n{self.stderr_tail()}")

    def kill(self) -> None:
        kill_tree(self.proc)


def last_step(events: list[dict]) -> int:
    return max((e["step"] for e in events if e.get("event") == "step"), default=0)
