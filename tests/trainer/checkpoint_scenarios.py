"""Processes the checkpoint tests start: python checkpoint_scenarios.py SCENARIO ROOT

crash    saves step 10, then starts a background save of step 20 whose writes crawl, prints
         `writing` once part of the new file is on disk, and waits to be killed.
sharded  run under torchrun with 2 processes: every rank saves its own shard (writes=True)
         through an AsyncCheckpointer agreeing over a gloo group of its own, then loads its
         shard back and checks it; prints `rank R ok`.
dcp      run under torchrun with 2 processes: a DTensor sharded over both ranks goes through
         DistributedCheckpointer (DCP async_save) twice, loads back into zeros; then a damaged
         shard of the newest checkpoint makes every rank fall back to the older one together.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "trainer"))

import torch
from launcher import checkpoint, state_file


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

    def agree(ok: bool) -> bool:
        flag = torch.tensor([int(ok)])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
        return bool(flag.item())

    shard = {"rank": rank, "w": torch.arange(1000, dtype=torch.float32) + 1000 * rank,
             "nested": {"b": torch.full((3, 5), rank, dtype=torch.bfloat16)}}
    checkpointer = checkpoint.AsyncCheckpointer(root, rank=rank, world_size=world, writes=True, agree=agree)
    checkpointer.save(5, shard)
    done = checkpointer.wait()
    assert done is not None and done.nbytes > 0
    info = checkpoint.latest_complete(root)
    assert info is not None and info.step == 5
    assert sorted(info.marker["files"]) == [checkpoint.shard_name(r) for r in range(world)]
    back = checkpoint.load(info.path, rank=rank)
    assert back["rank"] == rank and torch.equal(back["w"], shard["w"])
    assert torch.equal(back["nested"]["b"], shard["nested"]["b"])
    os.write(1, f"rank {rank} ok\n".encode())  # one write: both ranks share the pipe
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
                                                                  process_group=group, keep=3)
    for step, value in ((5, full), (6, full * 2)):
        checkpointer.save(step, state(value, step))
        done = checkpointer.wait()
        assert done is not None and done.step == step and done.nbytes > 0
    newest = checkpoint.latest_complete(root)
    assert newest is not None and newest.step == 6
    assert ".metadata" in newest.marker["files"] and len(newest.marker["files"]) == 1 + world

    target = state(torch.zeros(8, 8), 0)
    path = distributed_checkpoint.load_newest(root, target, process_group=group)
    assert path == newest.path and torch.equal(target["model"]["w"].full_tensor(), full * 2)
    assert int(target["step"]) == 6

    if rank == 0:  # same-size damage to one shard: the cheap check passes, the digest does not
        shard = os.path.join(newest.path, "__1_0.distcp")
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            f.write(b"\xff" * 8)
    dist.barrier()
    skipped: list[str] = []
    target = state(torch.zeros(8, 8), 0)
    path = distributed_checkpoint.load_newest(root, target, process_group=group,
                                              on_skip=lambda p, e: skipped.append(str(e)))
    assert path is not None and path.endswith(checkpoint.step_dir_name(5)), path
    assert torch.equal(target["model"]["w"].full_tensor(), full) and int(target["step"]) == 5
    assert len(skipped) == 1 and ("mismatch" in skipped[0] or "another rank" in skipped[0]), skipped
    os.write(1, f"rank {rank} ok\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    {"crash": crash, "sharded": sharded, "dcp": dcp_sharded}[sys.argv[1]](sys.argv[2])
