"""A gang of ranks on this machine (gloo, forked processes) that each hold the same replicated state
(DDP: every rank the whole model) and save or restore it on command, for bench/trainer_bench.py:
the launcher's replicated writer (replicated.rank_share + AsyncCheckpointer's state files) against
PyTorch DCP under the same protocol (distributed_checkpoint.DistributedCheckpointer, which dedups
replicated tensors over the ranks the same way: torch/distributed/checkpoint/_dedup_save_plans.py,
each tensor to the rank with the fewest bytes so far). Both commit through checkpoint.py (fsync,
digest, COMPLETE marker), so the difference is the writer and the reader alone."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from multiprocessing.connection import Connection
from pathlib import Path

import torch
import torch.distributed as dist
from launcher import checkpoint, distributed_checkpoint, replicated
from launcher.collective import ProcessGroupCollective

SIDES = ("ours_save", "dcp_save", "ours_restore", "dcp_restore", "settle")


class _Rank:
    def __init__(self, rank: int, world: int, work: Path, state: dict):
        self.rank, self.world = rank, world
        self.state = state
        self.live = {"model": {k: torch.zeros_like(v) for k, v in state["model"].items()}}
        group = dist.new_group(backend="gloo")  # the checkpoint's own group, as collective.checkpoint_collective
        assert isinstance(group, dist.ProcessGroup)  # every rank is a member
        self.ours_root, self.dcp_root = str(work / "replicated"), str(work / "dcp")
        self.ours = checkpoint.AsyncCheckpointer(self.ours_root, rank=rank, world_size=world, writes=True,
                                                 collective=ProcessGroupCollective(group), keep=1)
        self.ours.prepare(replicated.rank_share(state, rank, world))
        self.dcp = distributed_checkpoint.DistributedCheckpointer(self.dcp_root, rank=rank, world_size=world,
                                                                  process_group=group, keep=1)
        self.group, self.step = group, 0

    def run(self, side: str) -> None:
        if side == "ours_save":
            self.step += 1
            self.ours.save(self.step, replicated.rank_share(self.state, self.rank, self.world))
            self.ours.wait()
        elif side == "dcp_save":
            self.step += 1
            self.dcp.save(self.step, {"model": self.state["model"]})
            self.dcp.wait()
        elif side == "ours_restore":
            latest = checkpoint.latest_complete(self.ours_root)
            assert latest is not None
            loaded = replicated.load_merged(latest.path, into=self.live)
            for name, dst in self.live["model"].items():  # whatever was not read in place (nothing here)
                if loaded["model"][name].data_ptr() != dst.data_ptr():
                    dst.copy_(loaded["model"][name])
        elif side == "dcp_restore":
            latest = checkpoint.latest_complete(self.dcp_root)
            assert latest is not None
            distributed_checkpoint.load(latest.path, self.live, process_group=self.group)
        else:  # settle: both checkpointers' background prunes finished
            self.ours.close()
            self.dcp.close()

    def restored_equal(self) -> bool:
        return all(torch.equal(self.live["model"][k], v) for k, v in self.state["model"].items())


def _rank_main(rank: int, world: int, init_file: str, work: Path, state_bytes: int, tensors: int,
               conn: Connection) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(0)  # the same state on every rank: replicated
    per_tensor = max(1, state_bytes // tensors // 4)
    me = _Rank(rank, world, work, {"model": {f"layer{i}.weight": torch.randn(per_tensor) for i in range(tensors)}})
    while (side := conn.recv()) != "stop":
        if side == "check":
            conn.send(me.restored_equal())
            continue
        dist.barrier()
        started = time.perf_counter()
        me.run(side)
        dist.barrier()
        conn.send(time.perf_counter() - started)
    me.ours.close()
    me.dcp.close()
    dist.destroy_process_group()


class Gang:
    """`world` forked ranks; `run(side)` runs one side on every rank between two barriers and
    returns rank 0's wall seconds."""

    def __init__(self, work: Path, world: int, state_bytes: int, tensors: int):
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        init_file = str(work / "rendezvous")
        ctx = multiprocessing.get_context("fork")
        self.conns, self.procs = [], []
        for rank in range(world):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_rank_main, args=(rank, world, init_file, work, state_bytes, tensors, child),
                               daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def run(self, side: str) -> float:
        for conn in self.conns:
            conn.send(side)
        times = [conn.recv() for conn in self.conns]
        return times[0]

    def restored_equal(self) -> bool:
        for conn in self.conns:
            conn.send("check")
        return all(conn.recv() for conn in self.conns)

    def bytes_on_disk(self, side: str) -> int:
        root = self.work / ("replicated" if side == "ours" else "dcp")
        return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())

    def close(self) -> None:
        for conn in self.conns:
            conn.send("stop")
        for proc in self.procs:
            proc.join(timeout=60)
        shutil.rmtree(self.work, ignore_errors=True)
        if os.path.exists(self.work):
            raise RuntimeError(f"could not remove {self.work}")
