"""Trainer I/O: the shared-memory shard loader, state files, asynchronous and sharded checkpoints.

Speed is shown by `make bench` (ratios against raw reads and writes in the same run), never here:
these tests assert what the fast paths must keep doing right.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher import checkpoint
from trainer_testlib import TRAINER_DIR, requires_torch

pytestmark = requires_torch

SCENARIOS = str(Path(__file__).with_name("checkpoint_scenarios.py"))
# The scenarios import the launcher as the trainer image does: trainer/ on PYTHONPATH.
SCENARIO_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TRAINER_DIR), os.environ.get("PYTHONPATH")]))}


# ---------------------------------------------------------------------- loader


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    from example_trainer.pack_data import ensure_packed

    data_dir = str(tmp_path_factory.mktemp("data"))
    ensure_packed(data_dir, {"shards": 3, "samples_per_shard": 640, "dim": 12, "classes": 5})
    return data_dir


@pytest.mark.parametrize(
    ("workers", "prefetch", "block_bytes"),
    [
        (0, 1, 4 << 20),  # in-process, one block holds everything
        (0, 1, 1),  # in-process, one chunk per block
        (2, 2, 3 * 1664),  # two workers, blocks of 3 chunks (1664 bytes each): ends mid-block
        (1, 3, 4 << 20),
        (3, 1, 5000),
    ],
)
def test_loader_delivers_the_sampler_order_exactly(packed, workers, prefetch, block_bytes):
    import torch
    from example_trainer.data import ShardChunks, ShardLoader, epoch_order

    ds = ShardChunks(packed, batch_size=16)
    assert ds.feature_bytes + ds.label_bytes == 16 * (12 * 4 + 8) == 896
    order = epoch_order(len(ds), 0, seed=3, rank=0, world_size=1) + epoch_order(len(ds), 1, seed=3, rank=0, world_size=1)
    loader = ShardLoader(ds, order, num_workers=workers, prefetch_blocks=prefetch, block_bytes=block_bytes)
    try:
        got = [(x.clone(), y.clone()) for x, y in loader]
    finally:
        loader.close()
    assert len(got) == len(order) == 2 * 120
    for (x, y), idx in zip(got, order, strict=True):
        want_x, want_y = ds[idx]
        assert torch.equal(x, want_x) and torch.equal(y, want_y)
    assert loader.chunks_per_block == max(1, block_bytes // 896)


def test_loader_workers_stop_on_close_and_a_dead_worker_is_an_error(packed):
    from example_trainer.data import ChunkSampler, LoaderWorkerError, ShardChunks, ShardLoader

    ds = ShardChunks(packed, batch_size=16)
    loader = ShardLoader(ds, ChunkSampler(len(ds), 0, 0, 1), num_workers=2, prefetch_blocks=1, block_bytes=896)
    next(loader)
    pids = [p.pid for p in loader._workers]  # pyright: ignore[reportPrivateUsage]
    assert len(pids) == 2 and all(pids)
    os.kill(pids[1], signal.SIGKILL)
    with pytest.raises(LoaderWorkerError, match=rf"loader worker 1 \(pid {pids[1]}\) exited unexpectedly"):
        for _ in range(10):
            next(loader)
    loader.close()
    loader.close()  # idempotent
    time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in pids)


@pytest.mark.parametrize("loop_reads_too", [True, False])
def test_read_errors_reach_the_loop(packed, tmp_path, monkeypatch, loop_reads_too):
    import shutil

    from example_trainer.data import LoaderWorkerError, ShardChunks, ShardLoader

    copy = tmp_path / "data"
    shutil.copytree(packed, copy)
    ds = ShardChunks(str(copy), batch_size=16)
    with open(copy / "shard-00002.bin", "r+b") as f:  # damaged after the index was built
        f.truncate(1000)
    if not loop_reads_too:  # only the worker reads: its error comes back over the pipe
        monkeypatch.setattr(ShardLoader, "_read_here", lambda self: False)
    loader = ShardLoader(ds, range(len(ds)), num_workers=1, prefetch_blocks=1, block_bytes=896)
    expected = (LoaderWorkerError, OSError) if loop_reads_too else LoaderWorkerError
    with pytest.raises(expected, match=r"shard-00002\.bin: 1000 bytes, its header says 35904"):
        list(loader)
    loader.close()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return "gone"
    return stat[stat.rfind(")") + 2:].split()[0]


# ------------------------------------------------------------------ state files


def _states():
    import torch

    module_state = collections.OrderedDict(w=torch.randn(3, 4), b=torch.zeros(4))
    module_state._metadata = {"": {"version": 1}}  # pyright: ignore[reportAttributeAccessIssue]
    return {
        "floats": {"a": torch.randn(7, 5), "half": torch.randn(9).to(torch.bfloat16)},
        "ints and bools": [torch.arange(10), torch.tensor([True, False, True]), torch.tensor(3, dtype=torch.uint8)],
        "non-contiguous": {"t": torch.arange(24.0).view(4, 6).t(), "s": torch.arange(10.0)[::3]},
        "empty": {"e": torch.empty(0, 3), "scalar": torch.tensor(2.5)},
        "plain objects": {"step": 12, "lr": 0.1, "name": "x", "groups": [{"params": [0, 1]}], "tup": (1, torch.ones(2))},
        "module state": module_state,
    }


def _equal(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("case", list(_states()))
def test_state_file_round_trip(tmp_path, case):
    from launcher import state_file

    state = _states()[case]
    stager = state_file.Stager()
    path = str(tmp_path / "f.state")
    meta = checkpoint.atomic_write_fd(path, lambda fd: state_file.write_snapshot(fd, stager.snapshot(state)))
    assert meta["bytes"] == os.path.getsize(path) and len(meta["xxh3_128"]) == 32
    back = state_file.read_state(path, meta)
    assert _equal(state, back)
    if case == "module state":
        assert back._metadata == {"": {"version": 1}}
    if case == "floats":  # tensors are private: writing them never changes the file
        back["a"].add_(1)
        assert _equal(state, state_file.read_state(path, meta))


def test_state_file_detects_damage_and_the_stager_reuses_its_buffer(tmp_path):
    import torch
    from launcher import state_file

    stager = state_file.Stager()
    first = stager.snapshot({"w": torch.ones(1000)})
    buffer = stager._buffer  # pyright: ignore[reportPrivateUsage]
    second = stager.snapshot({"w": torch.full((1000,), 2.0)})
    assert stager._buffer is buffer  # pyright: ignore[reportPrivateUsage]
    assert first.nbytes == second.nbytes and bytes(second.data[:4]) == torch.tensor([2.0]).numpy().tobytes()

    path = str(tmp_path / "f.state")
    meta = checkpoint.atomic_write_fd(path, lambda fd: state_file.write_snapshot(fd, second))
    raw = bytearray(Path(path).read_bytes())
    for where in (10, len(raw) - 1):  # header, last data byte
        damaged = bytearray(raw)
        damaged[where] ^= 0x01
        Path(path).write_bytes(bytes(damaged))
        with pytest.raises(state_file.StateFileError, match="xxh3_128 mismatch"):
            state_file.read_state(path, meta)
    Path(path).write_bytes(bytes(raw[:-8]))
    with pytest.raises(state_file.StateFileError, match="bytes, marker says"):
        state_file.read_state(path, meta)
    with pytest.raises(TypeError, match="only dense tensors"):
        stager.snapshot({"s": torch.eye(3).to_sparse()})


# ---------------------------------------------------------- async checkpoints


def test_async_save_commits_in_the_background(tmp_path):
    import torch

    root = str(tmp_path / "ck")
    checkpointer = checkpoint.AsyncCheckpointer(root, keep=2)
    state = {"w": torch.randn(512, 512)}
    saved = state["w"].clone()
    blocked = checkpointer.save(10, state, meta={"job_id": "j"})
    state["w"].add_(1)  # the loop goes on changing its state: the snapshot is unaffected
    done = checkpointer.wait()
    assert done is not None and done.step == 10 and done.blocked_s == blocked and done.write_s > 0
    assert done.nbytes == os.path.getsize(os.path.join(done.path, "rank-00000.safetensors"))
    assert checkpointer.poll() is None  # reported once
    info = checkpoint.latest_complete(root)
    assert info is not None and info.step == 10 and info.marker["job_id"] == "j"
    assert torch.equal(checkpoint.load(info.path)["w"], saved)
    for step in (20, 30):
        checkpointer.save(step, state)  # waits for the previous save before reusing its buffer
    checkpointer.wait()
    checkpointer.close()  # the prune of step 10 runs after the commit, in the background: close() joins it
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [30, 20]


def test_a_failed_background_save_is_raised_and_leaves_no_marker(tmp_path):
    import torch

    root = tmp_path / "ck"
    root.mkdir()
    checkpoint.save(str(root), 10, {"w": torch.ones(3)})
    (root / checkpoint.step_dir_name(20)).write_text("a file where the step directory must go")
    checkpointer = checkpoint.AsyncCheckpointer(str(root))
    checkpointer.save(20, {"w": torch.ones(3)})
    with pytest.raises(checkpoint.CheckpointWriteError, match="step 20: preparing the directory failed on this rank"):
        checkpointer.wait()
    assert checkpoint.latest_complete(str(root)).step == 10

    # Another rank failed: this one writes its file but never the marker.
    refused = checkpoint.AsyncCheckpointer(str(root), collective=_Refusing())
    refused.save(30, {"w": torch.ones(3)})
    with pytest.raises(checkpoint.CheckpointWriteError, match="failed on another rank"):
        refused.wait()
    assert not (root / checkpoint.step_dir_name(30) / checkpoint.MARKER).exists()
    assert checkpoint.latest_complete(str(root)).step == 10


class _Refusing:
    """The collectives of a job in which another rank always fails."""

    def agree(self, ok: bool) -> bool:
        return False

    def all_gather(self, value):
        return [value]


class _RankOneReports:
    """Rank 0's collectives in a 2-rank job whose rank 1 reports `report` as what it wrote."""

    def __init__(self, report: dict):
        self.report = report

    def agree(self, ok: bool) -> bool:
        return ok

    def all_gather(self, value):
        return [value, self.report]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", r".*step-000000020: rank-00001\.safetensors is missing \(No such file"),  # a stale NFS view, a lost write
        ("short", r".*step-000000020: rank-00001\.safetensors has 5 bytes, its writer wrote 1000"),
        ("reported twice", r"rank 1 reports 'rank-00000\.safetensors': not a file name, or reported twice"),
        ("not a plain name", r"rank 1 reports '\.\./x': not a file name"),
    ],
)
def test_rank_0_writes_no_marker_unless_every_reported_file_is_there(tmp_path, case, message):
    """Rank 0 learns what to expect from the writers, never from a directory listing (a stale
    one on NFS could leave a rank out), and checks each file before the marker."""
    import torch

    root = tmp_path / "ck"
    checkpoint.save(str(root), 10, {"w": torch.ones(3)})
    step_dir = root / checkpoint.step_dir_name(20)
    report = {"missing": {"rank-00001.safetensors": {"bytes": 1000, "xxh3_128": "0" * 32}},
              "short": {"rank-00001.safetensors": {"bytes": 1000, "xxh3_128": "0" * 32}},
              "reported twice": {"rank-00000.safetensors": {"bytes": 1000, "xxh3_128": "0" * 32}},
              "not a plain name": {"../x": {"bytes": 1, "xxh3_128": "0" * 32}}}[case]
    collective = _RankOneReports(report)
    if case == "short":  # rank 1's file is there, but not all of it (yet)
        original = collective.all_gather

        def gather_after_a_short_write(value):
            (step_dir / "rank-00001.safetensors").write_bytes(b"12345")
            return original(value)

        collective.all_gather = gather_after_a_short_write
    checkpointer = checkpoint.AsyncCheckpointer(str(root), rank=0, world_size=2, writes=True, collective=collective)
    checkpointer.save(20, {"w": torch.ones(3)})
    with pytest.raises(checkpoint.CheckpointWriteError, match=rf"step 20: writing the marker failed on this rank: {message}"):
        checkpointer.wait()
    assert not (step_dir / checkpoint.MARKER).exists()
    assert checkpoint.latest_complete(str(root)).step == 10


def test_the_marker_lists_what_every_rank_reports(tmp_path):
    import torch

    root = tmp_path / "ck"
    collective = _RankOneReports({"rank-00001.safetensors": {"bytes": 4, "xxh3_128": "1" * 32}})
    original = collective.all_gather

    def gather_after_rank_1_wrote(value):
        (root / checkpoint.step_dir_name(20) / "rank-00001.safetensors").write_bytes(b"abcd")
        return original(value)

    collective.all_gather = gather_after_rank_1_wrote
    checkpointer = checkpoint.AsyncCheckpointer(str(root), rank=0, world_size=2, writes=True, collective=collective)
    checkpointer.save(20, {"w": torch.ones(3)})
    done = checkpointer.wait()
    assert done is not None and done.nbytes == os.path.getsize(os.path.join(done.path, "rank-00000.safetensors"))
    info = checkpoint.latest_complete(str(root))
    assert info is not None and info.step == 20 and info.marker["world_size"] == 2
    assert info.marker["files"]["rank-00001.safetensors"] == {"bytes": 4, "xxh3_128": "1" * 32}
    assert info.marker["files"]["rank-00000.safetensors"]["bytes"] == done.nbytes


def test_a_crash_during_a_background_write_keeps_the_previous_checkpoint(tmp_path, measurements):
    root = tmp_path / "ck"
    proc = subprocess.Popen([sys.executable, SCENARIOS, "crash", str(root)], stdout=subprocess.PIPE, text=True,
                            env=SCENARIO_ENV)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "writing"
        partial = root / checkpoint.step_dir_name(20)
        temps = [p for p in partial.iterdir() if p.name.startswith(".rank-00000.safetensors.tmp-")]
        assert len(temps) == 1 and temps[0].stat().st_size > 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    latest = checkpoint.latest_complete(str(root))
    assert latest is not None and latest.step == 10
    incomplete = checkpoint.inspect(str(partial))
    assert not incomplete.complete and incomplete.reason == "no COMPLETE marker"
    assert checkpoint.load(latest.path)["step"] == 10
    # The next save of that step starts from a clean directory.
    import torch

    again = checkpoint.save(str(root), 20, {"step": 20, "w": torch.zeros(2)})
    assert sorted(os.listdir(again)) == ["COMPLETE", "rank-00000.safetensors"]


def _two_ranks(scenario: str, root: Path) -> subprocess.CompletedProcess:
    from trainer_testlib import free_port

    env = {**SCENARIO_ENV, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
         "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--max-restarts", "0",
         SCENARIOS, scenario, str(root)],
        capture_output=True, text=True, timeout=180, env=env,
    )


@pytest.mark.parametrize("scenario", ["sharded", "replicated", "dcp"])
def test_sharded_save_and_restore_with_two_ranks(tmp_path, measurements, scenario):
    """sharded: every rank writes its own state file; replicated: every rank its share of the same
    DDP state (the example trainer's way); dcp: a DTensor through PyTorch DCP."""
    root = tmp_path / "ck"
    started = time.monotonic()
    p = _two_ranks(scenario, root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(re.findall(r"rank \d ok", p.stdout)) == ["rank 0 ok", "rank 1 ok"]
    newest = checkpoint.latest_complete(str(root))
    assert newest is not None and newest.marker["world_size"] == 2
    if scenario in ("sharded", "replicated"):
        assert set(newest.marker["files"]) == {"rank-00000.safetensors", "rank-00001.safetensors"}
    else:
        assert set(newest.marker["files"]) == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    measurements.record(f"2-rank {scenario} save+restore (incl. torchrun start)", time.monotonic() - started, "s")
