"""Two regions of one environment, two runs of one job name: neither ever takes the other's checkpoints.

The model of a MultiKueue environment's checkpoint storage (docs/multi-region.md): each region's
checkpoint directory is an FSx for Lustre file system linked to `checkpoints/` of that region's
artifacts bucket, exported on every change and imported on NEW, CHANGED and DELETED; the buckets
replicate `checkpoints/` to one another with delete-marker replication on. Collapsed to what a run
sees, one region's file system is a directory, and what changes in it reaches the other region's
directory later, file by file, in any order (S3 replication gives no order between objects),
deletions and renames (a supersede renames the marker) included; a replica is not replicated back
(S3 User Guide, "What does Amazon S3 replicate?"). Each cluster runs its own copy of the job, with
the TRAIN_CHECKPOINT_DIR and TRAIN_RUN_ID its stack plans (components/data/training_data.py).

Invariants, checked after every step of random interleavings of saves and replication:
- a run's newest complete checkpoint in its own region is one it wrote (it would resume from it);
- the checkpoint a run committed last is still complete in its own region (nobody superseded or
  deleted it).
With every run's checkpoints in `/workspace/checkpoints/<job>` (the layout before one namespace per
run), the same schedules break them: `test_one_shared_directory_breaks_the_invariants`.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import pytest
from launcher import checkpoint
from trainer_testlib import requires_torch

from components.data.training_data import CHECKPOINTS, run_checkpoint_dir, run_id

JOB = "pretrain-p5"
STACKS = ("prod", "prod-usw2")
EVERY_STEPS = 10
KEEP = 2


def _snapshot(root: str) -> dict[str, bytes]:
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return files


@dataclass
class Region:
    """One region's checkpoint file system; `known`: its content as last scanned or replicated."""

    root: str
    known: dict[str, bytes] = field(default_factory=dict)

    def local_changes(self) -> list[tuple[str, bytes | None]]:
        """What changed here since the last scan, not by replication (None: deleted)."""
        now = _snapshot(self.root)
        changes: list[tuple[str, bytes | None]] = [(p, data) for p, data in now.items() if self.known.get(p) != data]
        changes += [(p, None) for p in self.known if p not in now]
        self.known = now
        return changes

    def apply(self, path: str, data: bytes | None) -> None:
        """A replicated change: written (or deleted) and known, so it is not replicated back."""
        full = os.path.join(self.root, path)
        if data is None:
            if os.path.exists(full):
                os.unlink(full)
            self.known.pop(path, None)
            return
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
        self.known[path] = data


@dataclass
class Run:
    stack: str
    region: Region
    checkpoint_dir: str
    step: int = 0
    committed: str = ""


def _save(run: Run, monkeypatch) -> None:
    import torch

    monkeypatch.setenv(checkpoint.RUN_ID_ENV, run_id(run.stack, JOB))
    resumed = checkpoint.latest_complete(run.checkpoint_dir)
    if resumed is not None and resumed.step > run.step:  # a restart resumes from its newest checkpoint
        run.step = resumed.step
    run.step += EVERY_STEPS
    try:
        run.committed = checkpoint.save(run.checkpoint_dir, run.step,
                                        {"run": run.stack, "w": torch.full((8,), float(run.step))}, keep=KEEP)
    except checkpoint.CheckpointWriteError:
        run.committed = ""  # refused to clear another run's step directory: nothing committed


def _violations(runs: list[Run], monkeypatch) -> list[str]:
    found = []
    for run in runs:
        monkeypatch.setenv(checkpoint.RUN_ID_ENV, run_id(run.stack, JOB))
        latest = checkpoint.latest_complete(run.checkpoint_dir)
        if latest is not None and latest.marker.get("run") != run_id(run.stack, JOB):
            found.append(f"{run.stack} would resume from {latest.path}, written by {latest.marker.get('run')}")
        if run.committed and not checkpoint.inspect(run.committed).complete:
            found.append(f"{run.stack}'s last checkpoint {run.committed} is gone: "
                         f"{checkpoint.inspect(run.committed).reason}")
    return found


def _play(tmp_path, monkeypatch, *, seed: int, shared_directory: bool, rounds: int = 40) -> list[str]:
    """One random schedule of saves, scans and out-of-order deliveries; the first violations seen."""
    rng = random.Random(seed)
    regions = [Region(str(tmp_path / f"{seed}-{stack}")) for stack in STACKS]
    runs = []
    for stack, region in zip(STACKS, regions, strict=True):
        planned = JOB if shared_directory else run_checkpoint_dir(stack, JOB)
        relative = os.path.relpath(planned, CHECKPOINTS.mount_path) if planned.startswith("/") else planned
        runs.append(Run(stack, region, os.path.join(region.root, relative)))
    in_flight: list[tuple[Region, str, bytes | None]] = []
    for _ in range(rounds):
        action = rng.choice(("save", "save", "scan", "deliver", "deliver"))
        if action == "save":
            _save(rng.choice(runs), monkeypatch)
        elif action == "scan":
            source = rng.randrange(2)
            in_flight += [(regions[1 - source], path, data) for path, data in regions[source].local_changes()]
        else:
            rng.shuffle(in_flight)
            count = rng.randint(1, max(1, len(in_flight)))
            for destination, path, data in in_flight[:count]:
                destination.apply(path, data)
            del in_flight[:count]
        if found := _violations(runs, monkeypatch):
            return found
    return []


@requires_torch
@pytest.mark.parametrize("seed", range(12))
def test_runs_of_one_job_name_in_two_regions_never_meet(tmp_path, monkeypatch, seed):
    assert _play(tmp_path, monkeypatch, seed=seed, shared_directory=False) == []


@requires_torch
def test_one_shared_directory_breaks_the_invariants(tmp_path, monkeypatch):
    """The control: the model catches the bug that one namespace per run fixes."""
    broken = [seed for seed in range(12) if _play(tmp_path, monkeypatch, seed=seed, shared_directory=True)]
    assert len(broken) >= 6, broken


def test_a_run_never_prunes_or_clears_another_runs_checkpoint(tmp_path, monkeypatch):
    """Defence in depth: whatever replication brings into a run's directory, its marker says whose it is."""
    foreign = tmp_path / checkpoint.step_dir_name(50)
    foreign.mkdir()
    (foreign / "rank-00000.safetensors").write_bytes(b"x" * 10)
    checkpoint.atomic_write_json(str(foreign / checkpoint.MARKER), {
        "format": checkpoint.FORMAT_VERSION, "step": 50, "world_size": 1, "run": "prod-usw2/pretrain-p5",
        "files": {"rank-00000.safetensors": {"bytes": 10, "xxh3_128": "0"}}})
    monkeypatch.setenv(checkpoint.RUN_ID_ENV, "prod/pretrain-p5")
    info = checkpoint.inspect(str(foreign))
    assert info.foreign and not info.complete, info
    assert checkpoint.latest_complete(str(tmp_path)) is None
    assert checkpoint.prune(str(tmp_path), keep=1, committed=10) == []
    assert (foreign / checkpoint.MARKER).exists()
    with pytest.raises(checkpoint.CheckpointWriteError, match="another run"):
        checkpoint.refuse_foreign(str(foreign))
    monkeypatch.setenv(checkpoint.RUN_ID_ENV, "prod-usw2/pretrain-p5")
    assert checkpoint.inspect(str(foreign)).complete
    monkeypatch.delenv(checkpoint.RUN_ID_ENV)
    assert checkpoint.inspect(str(foreign)).complete, "without TRAIN_RUN_ID every marker is the run's own"


@requires_torch
def test_a_run_without_checkpoints_of_its_own_resumes_from_the_old_layout_once(tmp_path, monkeypatch):
    """Upgrading to one namespace per run: the run's new directory is empty; the launcher takes the
    newest complete checkpoint of TRAIN_LEGACY_CHECKPOINT_DIR, and its own from then on."""
    import torch
    from launcher.main import LEGACY_DIR_VAR, select_resume

    legacy, own = tmp_path / "pretrain-p5", tmp_path / "prod" / "pretrain-p5"
    monkeypatch.delenv(checkpoint.RUN_ID_ENV, raising=False)  # written before markers named a run
    for step in (10, 20):
        checkpoint.save(str(legacy), step, {"w": torch.zeros(2)}, keep=5)
    monkeypatch.setenv(checkpoint.RUN_ID_ENV, "prod/pretrain-p5")
    env = {LEGACY_DIR_VAR: str(legacy)}
    latest, _ = select_resume(str(own), env)
    assert latest is not None and latest.path == str(legacy / checkpoint.step_dir_name(20))
    checkpoint.save(str(own), 30, {"w": torch.zeros(2)})
    latest, _ = select_resume(str(own), env)
    assert latest is not None and latest.path == str(own / checkpoint.step_dir_name(30))
    assert select_resume(str(tmp_path / "other"), {})[0] is None  # no legacy directory named: a fresh start
