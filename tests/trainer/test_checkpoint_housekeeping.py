"""A save's housekeeping off its critical path, and a restore that leaves nothing of the file behind:

- pruning the previous checkpoint runs in the background after the new marker is durable:
  `wait()` returns before it ends, `close()` joins it, and a prune blocked or killed at any
  point leaves the newest complete checkpoint in place;
- after a restore (model.load_state_dict + checkpoint.load_optimizer_state) no model or
  optimizer tensor shares memory with the checkpoint file or with the buffer `load` read it into.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest
from launcher import checkpoint
from trainer_testlib import TRAINER_DIR, requires_torch


def _small_state(step: int):
    import torch

    return {"step": step, "w": torch.full((64,), float(step))}


@requires_torch
def test_wait_returns_before_the_background_prune_and_close_joins_it(tmp_path, monkeypatch):
    root = str(tmp_path)
    checkpointer = checkpoint.AsyncCheckpointer(root, keep=1)
    checkpointer.save(1, _small_state(1))
    checkpointer.close()
    release, started = threading.Event(), threading.Event()
    real_prune = checkpoint.prune

    def blocked_prune(*args, **kwargs):
        started.set()
        assert release.wait(10)
        return real_prune(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "prune", blocked_prune)
    checkpointer.save(2, _small_state(2))
    done = checkpointer.wait()
    assert done is not None and done.step == 2
    assert started.wait(10), "no prune after the commit"
    # The save is complete while the prune has not run: both checkpoints are there, step 2 is newest.
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [2, 1]
    release.set()
    checkpointer.close()
    assert [c.step for c in checkpoint.list_checkpoints(root)] == [2]


@requires_torch
def test_a_prune_running_during_the_next_save_never_leaves_zero_complete_checkpoints(tmp_path, monkeypatch):
    root = str(tmp_path)
    checkpointer = checkpoint.AsyncCheckpointer(root, keep=1)
    seen: list[list[int]] = []
    real_remove = checkpoint._remove_checkpoint  # pyright: ignore[reportPrivateUsage]

    def slow_remove(path):
        seen.append([c.step for c in checkpoint.complete_checkpoints(root)])
        real_remove(path)
        seen.append([c.step for c in checkpoint.complete_checkpoints(root)])

    monkeypatch.setattr(checkpoint, "_remove_checkpoint", slow_remove)
    for step in range(1, 6):
        checkpointer.save(step, _small_state(step))
        checkpointer.wait()
        assert checkpoint.latest_complete(root).step == step  # pyright: ignore[reportOptionalMemberAccess]
    checkpointer.close()
    assert seen and all(steps for steps in seen), f"a moment with no complete checkpoint: {seen}"
    assert [c.step for c in checkpoint.list_checkpoints(root)] == [5]


KILLED_PRUNE = """
import os, signal, sys
from launcher import checkpoint
root, point = sys.argv[1], sys.argv[2]

def rmtree(path, ignore_errors=False):
    if point == "halfway":  # one file of the checkpoint gone, the rest still there
        os.unlink(os.path.join(path, sorted(os.listdir(path))[0]))
    os.kill(os.getpid(), signal.SIGKILL)

def unlink(path, *args, **kwargs):
    if point == "before the marker goes":
        os.kill(os.getpid(), signal.SIGKILL)
    return os.remove(path)

checkpoint.shutil.rmtree = rmtree
checkpoint.os.unlink = unlink
checkpoint.prune(root, keep=1)
"""


@requires_torch
@pytest.mark.parametrize("point", ["before the marker goes", "after the marker went", "halfway"])
def test_a_prune_killed_at_any_point_leaves_the_newest_complete_checkpoint(tmp_path, point):
    root = str(tmp_path)
    for step in (1, 2, 3):
        checkpoint.save(root, step, _small_state(step), keep=10)
    killed = subprocess.run([sys.executable, "-c", KILLED_PRUNE, root, point], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(TRAINER_DIR)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert checkpoint.latest_complete(root).step == 3  # pyright: ignore[reportOptionalMemberAccess]
    assert checkpoint.load(os.path.join(root, checkpoint.step_dir_name(3)))["step"] == 3
    checkpoint.prune(root, keep=1)  # the next prune removes what the killed one left
    assert [c.step for c in checkpoint.list_checkpoints(root)] == [3]


# ------------------------------------------------------------------------- restore


def _storage_range(t) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _file_mappings(path: str) -> list[tuple[int, int]]:
    """The address ranges of this process mapping `path` (Linux /proc/self/maps)."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() == os.path.realpath(path):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def _overlapping(tensors, ranges) -> list:
    return [t for t in tensors for start, end in ranges
            if t.numel() and _storage_range(t)[0] < end and start < _storage_range(t)[1]]


def _trained(torch):
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    model(torch.randn(4, 32)).sum().backward()
    optimizer.step()
    return model, optimizer


def _restore(torch, path, *, project_path: bool):
    model, optimizer = _trained(torch)  # the live state a resume loads into (its values overwritten)
    loaded = checkpoint.load(path)
    model.load_state_dict(loaded["model"])
    if project_path:
        checkpoint.load_optimizer_state(optimizer, loaded["optimizer"])
    else:
        optimizer.load_state_dict(loaded["optimizer"])
    live = [*model.state_dict().values(),
            *(v for per_param in optimizer.state.values() for v in per_param.values() if isinstance(v, torch.Tensor))]
    return model, optimizer, loaded, live


@requires_torch
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps (Linux)")
@pytest.mark.parametrize("project_path", [True, False], ids=["load_optimizer_state", "plain load_state_dict"])
def test_no_restored_tensor_is_a_view_of_the_checkpoint(tmp_path, project_path):
    """The project's restore leaves the live state in memory of its own. The plain
    `optimizer.load_state_dict` is the control: its state stays views of the loaded buffer on
    CPU, which is what the check must catch."""
    import torch

    model, optimizer = _trained(torch)
    path = checkpoint.save(str(tmp_path), 1, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    _, live_optimizer, loaded, live = _restore(torch, path, project_path=project_path)
    loaded_tensors = list(checkpoint._tensors_in(loaded))  # pyright: ignore[reportPrivateUsage]
    file_path = os.path.join(path, checkpoint.shard_name(0))
    assert not _overlapping(live, _file_mappings(file_path)), "a restored tensor is a view of the mapped file"
    shared = _overlapping(live, [_storage_range(t) for t in loaded_tensors])
    if not project_path:
        assert shared, "the control no longer shares the loaded buffer: this test checks nothing"
        return
    assert not shared, f"{len(shared)} restored tensors share memory with the loaded checkpoint"
    # Nothing written to the file (or the loaded buffer) afterwards reaches the live state.
    before = [t.clone() for t in live]
    with open(file_path, "r+b") as f:
        f.seek(4096)
        f.write(b"\xff" * (os.path.getsize(file_path) - 4096))
    for t in loaded_tensors:
        t.zero_()
    assert all(torch.equal(a, b) for a, b in zip(before, live, strict=True))
    expected = _trained(torch)[1].state_dict()["state"]
    assert all(torch.equal(live_optimizer.state_dict()["state"][i][k], expected[i][k]) for i in expected for k in expected[i])


@requires_torch
def test_a_slow_prune_of_one_save_never_takes_the_next_commit_for_a_line_left_behind(tmp_path, monkeypatch):
    """The prune after step 1 lists the directory slowly (a busy shared file system) while step 2
    commits: step 2 must not be taken for a checkpoint of a later line and superseded."""
    import time

    root = str(tmp_path)
    real_list = checkpoint.list_checkpoints

    def slow_list(*args, **kwargs):
        time.sleep(0.5)
        return real_list(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "list_checkpoints", slow_list)
    checkpointer = checkpoint.AsyncCheckpointer(root, keep=2)
    for step in (1, 2):
        checkpointer.save(step, _small_state(step))
        assert checkpointer.wait() is not None
    checkpointer.close()
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [2, 1]
