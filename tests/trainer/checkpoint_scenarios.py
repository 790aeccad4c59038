"""Processes the checkpoint tests start: python checkpoint_scenarios.py SCENARIO ROOT

crash    saves step 10, then starts a background save of step 20 whose writes crawl, prints
         `writing` once part of the new file is on disk, and waits to be killed.
sharded  run under torchrun with 2 processes: every rank saves its own shard (writes=True)
         through an AsyncCheckpointer agreeing over a gloo group of its own, then loads its
         shard back and checks it; then rank 1's file of the next save vanishes before the
         marker (as a stale NFS view would hide it): that save fails on both ranks, no marker;
         prints `rank R ok`.
replicated  run under torchrun with 2 processes: the same (DDP-replicated) model and AdamW state
         on both ranks, each writing its share (replicated.rank_share, writes=True) in parallel;
         every rank loads the merged whole back and checks it equals the state; then rank 1's
         share of the next save vanishes before the marker: no marker, the newest complete
         checkpoint stays the first; prints `rank R ok`.
dcp      run under torchrun with 2 processes: a DTensor sharded over both ranks goes through
         DistributedCheckpointer (DCP async_save) four times and loads back into zeros; then
         the three newest are damaged three ways (a shard DCP cannot read although the marker
         agrees with it, a shard the marker leaves out, a shard that fails its digest) and every
         rank falls back to the oldest together.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import xxhash
from launcher import checkpoint, state_file
from launcher.collective import ProcessGroupCollective


def _lose_each_file_once_written() -> None:
    """From now on in this process, each file the checkpointer writes is deleted once written."""
    write = checkpoint.atomic_write_fd

    def write_then_lose(path: str, fill):
        meta = write(path, fill)
        os.unlink(path)
        return meta

    checkpoint.atomic_write_fd = write_then_lose


def crash(root: str) -> None:
    checkpoint.save(root, 10, {"step": 10, "w": torch.full((256, 1024), 10.0)})
    state_file.WRITE_PIECE = 64 << 10
    written = [0]

    def crawl(fd: int, piece: memoryview) -> None:
        os.write(fd, piece)
        written[0] += 1
        if written[0] == 4:
            print("writing", flush=True)
        time.sleep(0.2)

    state_file._write_all = crawl  # pyright: ignore[reportPrivateUsage]
    checkpointer = checkpoint.AsyncCheckpointer(root)
    checkpointer.save(20, {"step": 20, "w": torch.full((256, 1024), 20.0)})
    checkpointer.wait()  # never returns: the test kills this process first
    print("finished", flush=True)


def sharded(root: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.new_group(backend="gloo")
    shard = {"rank": rank, "w": torch.arange(1000, dtype=torch.float32) + 1000 * rank,
             "nested": {"b": torch.full((3, 5), rank, dtype=torch.bfloat16)}}
    checkpointer = checkpoint.AsyncCheckpointer(root, rank=rank, world_size=world, writes=True,
                                                collective=ProcessGroupCollective(group))
    checkpointer.save(5, shard)
    done = checkpointer.wait()
    assert done is not None and done.nbytes > 0
    info = checkpoint.latest_complete(root)
    assert info is not None and info.step == 5
    assert sorted(info.marker["files"]) == [checkpoint.shard_name(r) for r in range(world)]
    back = checkpoint.load(info.path, rank=rank)
    assert back["rank"] == rank and torch.equal(back["w"], shard["w"])
    assert torch.equal(back["nested"]["b"], shard["nested"]["b"])

    if rank == 1:  # its file is written, then gone before rank 0 writes the marker
        _lose_each_file_once_written()
    checkpointer.save(6, shard)
    try:
        checkpointer.wait()
        raise AssertionError("a save with a missing rank file committed")
    except checkpoint.CheckpointWriteError as e:
        expected = f"{checkpoint.shard_name(1)} is missing" if rank == 0 else "failed on another rank"
        assert "writing the marker failed" in str(e) and expected in str(e), e
    assert not os.path.exists(os.path.join(root, checkpoint.step_dir_name(6), checkpoint.MARKER))
    latest = checkpoint.latest_complete(root)
    assert latest is not None and latest.step == 5
    os.write(1, f"rank {rank} ok\n".encode())  # one write: both ranks share the pipe
    dist.destroy_process_group()


def _replicated_state(step: int) -> dict:
    torch.manual_seed(0)  # the same on every rank, as DDP keeps it
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(4, 64)).sum().backward()
    opt.step()
    return {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
            "rng": torch.get_rng_state(), "hparams": {"lr": 1e-3}}


def _assert_same(a, b) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), (a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (sorted(map(str, a)), sorted(map(str, b)))
        for key in a:
            _assert_same(a[key], b[key])
    else:
        assert a == b, (a, b)


def replicated_shares(root: str) -> None:
    import torch.distributed as dist
    from launcher import replicated

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.new_group(backend="gloo")
    state = _replicated_state(5)
    checkpointer = checkpoint.AsyncCheckpointer(root, rank=rank, world_size=world, writes=True,
                                                collective=ProcessGroupCollective(group))
    checkpointer.save(5, replicated.rank_share(state, rank, world))
    done = checkpointer.wait()
    assert done is not None and 0 < done.nbytes < done.total_bytes, done
    info = checkpoint.latest_complete(root)
    assert info is not None and info.step == 5
    assert sorted(info.marker["files"]) == [checkpoint.shard_name(r) for r in range(world)]
    assert done.total_bytes == sum(f["bytes"] for f in info.marker["files"].values())
    own = checkpoint.load(info.path, rank=rank)
    assert ("step" in own) == (rank == 0), "what is not a tensor stays with rank 0"
    _assert_same(replicated.load_merged(info.path), state)

    if rank == 1:  # its share is written, then gone before rank 0 writes the marker
        _lose_each_file_once_written()
    checkpointer.save(6, replicated.rank_share(_replicated_state(6), rank, world))
    try:
        checkpointer.wait()
        raise AssertionError("a save with a missing share committed")
    except checkpoint.CheckpointWriteError as e:
        assert "writing the marker failed" in str(e), e
    assert not os.path.exists(os.path.join(root, checkpoint.step_dir_name(6), checkpoint.MARKER))
    latest = checkpoint.latest_complete(root)
    assert latest is not None and latest.step == 5
    os.write(1, f"rank {rank} ok\n".encode())
    dist.destroy_process_group()


def dcp_sharded(root: str) -> None:
    import torch.distributed as dist
    from launcher import distributed_checkpoint
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.new_group(backend="gloo")
    mesh = init_device_mesh("cpu", (world,))
    full = torch.arange(64, dtype=torch.float32).view(8, 8)

    def state(value: torch.Tensor, step: int) -> dict:
        return {"model": {"w": distribute_tensor(value, mesh, [Shard(0)])}, "step": torch.tensor(step)}

    checkpointer = distributed_checkpoint.DistributedCheckpointer(root, rank=rank, world_size=world,
                                                                  process_group=group, keep=10)
    for step in (5, 6, 7, 8):
        checkpointer.save(step, state(full * step, step))
        done = checkpointer.wait()
        assert done is not None and done.step == step and done.nbytes > 0
    newest = checkpoint.latest_complete(root)
    assert newest is not None and newest.step == 8
    assert ".metadata" in newest.marker["files"] and len(newest.marker["files"]) == 1 + world

    target = state(torch.zeros(8, 8), 0)
    path = distributed_checkpoint.load_newest(root, target, process_group=group)
    assert path == newest.path and torch.equal(target["model"]["w"].full_tensor(), full * 8)
    assert int(target["step"]) == 8

    if rank == 0:
        _damage_dcp_checkpoints(root)
    dist.barrier()
    skipped: list[str] = []
    target = state(torch.zeros(8, 8), 0)
    path = distributed_checkpoint.load_newest(root, target, process_group=group,
                                              on_skip=lambda p, e: skipped.append(f"{os.path.basename(p)}: {e}"))
    assert path is not None and path.endswith(checkpoint.step_dir_name(5)), (path, skipped)
    assert torch.equal(target["model"]["w"].full_tensor(), full * 5) and int(target["step"]) == 5
    assert [s.split(":")[0] for s in skipped] == [checkpoint.step_dir_name(s) for s in (8, 7, 6)], skipped
    assert "DCP could not load it: " in skipped[0] and "rank 1: RuntimeError" in skipped[0], skipped
    assert ("reads ['__1_0.distcp'], which the marker does not list" if rank == 0 else "another rank") in skipped[1], \
        skipped
    assert "mismatch" in skipped[2] or "another rank" in skipped[2], skipped
    # Only the digest mismatch can never load: it stops counting as complete, so prune cannot
    # keep it in place of a good checkpoint. DCP's failures and the marker's omission stay.
    dist.barrier()
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [8, 7, 5]
    assert "did not match its digest" in checkpoint.inspect(os.path.join(root, checkpoint.step_dir_name(6))).reason
    os.write(1, f"rank {rank} ok\n".encode())
    dist.destroy_process_group()


def _damage_dcp_checkpoints(root: str) -> None:
    """Rank 1's shard of steps 8, 7 and 6 damaged three ways."""
    import json

    def shard_of(step: int) -> str:
        return os.path.join(root, checkpoint.step_dir_name(step), "__1_0.distcp")

    def rewrite_marker(step: int, change) -> None:
        marker_path = os.path.join(root, checkpoint.step_dir_name(step), checkpoint.MARKER)
        with open(marker_path) as f:
            marker = json.load(f)
        change(marker["files"])
        checkpoint.atomic_write_json(marker_path, marker)

    # 8: cut short, and the marker agrees with the short file (a writer that reported what it
    # wrote, not what DCP needed): every digest passes, DCP's own read fails.
    with open(shard_of(8), "r+b") as f:
        f.truncate(os.path.getsize(shard_of(8)) // 2)
    with open(shard_of(8), "rb") as f:
        short = f.read()
    rewrite_marker(8, lambda files: files.update(
        {"__1_0.distcp": {"bytes": len(short), state_file.DIGEST: xxhash.xxh3_128(short).hexdigest()}}))
    # 7: the marker leaves the shard out (what a stale directory listing on NFS wrote), and the
    # shard is cut short: nothing the marker lists is damaged.
    rewrite_marker(7, lambda files: files.pop("__1_0.distcp"))
    with open(shard_of(7), "r+b") as f:
        f.truncate(10)
    # 6: same-size damage: the cheap size check passes, the digest does not.
    with open(shard_of(6), "r+b") as f:
        f.seek(os.path.getsize(shard_of(6)) // 2)
        f.write(b"\xff" * 8)


if __name__ == "__main__":
    {"crash": crash, "sharded": sharded, "replicated": replicated_shares, "dcp": dcp_sharded}[sys.argv[1]](sys.argv[2])
    # As the trainer does (train.py): no interpreter finalization after destroy_process_group,
    # which aborts now and then with gloo's threads (pytorch/pytorch#179291).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
