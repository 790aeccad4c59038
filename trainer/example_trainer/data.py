"""Reading packed shards with a multi-process, prefetching DataLoader.

The unit of loading is a *chunk*: `batch_size` consecutive samples of one
shard, read with two positioned reads (features, labels). Each epoch shuffles
the chunk order with a seeded generator; rank r takes every world_size-th
chunk. The position in the data is therefore a pure function of
the global step (epoch = step // chunks per rank), which is all a checkpoint
needs to resume exactly.
"""

from __future__ import annotations

import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from .pack_data import HEADER_BYTES, read_header, read_manifest, shard_size


class ShardChunks(Dataset):
    def __init__(self, data_dir: str, batch_size: int):
        manifest = read_manifest(data_dir)
        if manifest is None:
            raise FileNotFoundError(f"no MANIFEST.json in {data_dir}")
        self.data_dir = data_dir
        self.batch_size = batch_size
        self.dim = int(manifest["dim"])
        self.classes = int(manifest["classes"])
        self.shards = []
        self.chunks: list[tuple[int, int]] = []
        for si, entry in enumerate(manifest["shards"]):
            path = os.path.join(data_dir, entry["name"])
            with open(path, "rb") as f:
                n, dim, _ = read_header(f)
            if dim != self.dim or os.path.getsize(path) != shard_size(n, dim):
                raise ValueError(f"{path}: size or dimension does not match its header")
            self.shards.append((path, n))
            for start in range(0, n - batch_size + 1, batch_size):
                self.chunks.append((si, start))
        self._fds: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.chunks)

    def _fd(self, si: int) -> int:
        fd = self._fds.get(si)
        if fd is None:  # opened lazily, per worker process
            fd = os.open(self.shards[si][0], os.O_RDONLY)
            self._fds[si] = fd
        return fd

    def _read(self, fd: int, offset: int, nbytes: int, dtype) -> torch.Tensor:
        buf = bytearray(nbytes)
        got = os.preadv(fd, [buf], offset)
        if got != nbytes:
            raise OSError(f"short read: {got} of {nbytes} bytes")
        return torch.frombuffer(buf, dtype=dtype)

    def __getitem__(self, idx: int):
        si, start = self.chunks[idx]
        _, n = self.shards[si]
        fd = self._fd(si)
        b, d = self.batch_size, self.dim
        x = self._read(fd, HEADER_BYTES + start * d * 4, b * d * 4, torch.float32).view(b, d)
        y = self._read(fd, HEADER_BYTES + n * d * 4 + start * 8, b * 8, torch.int64)
        return x, y

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_fds"] = {}
        return state


def epoch_order(n_chunks: int, epoch: int, seed: int, rank: int, world_size: int) -> list[int]:
    """This rank's chunk indices for an epoch (equal length on every rank)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(n_chunks, generator=g).tolist()
    per_rank = n_chunks // world_size
    return perm[rank::world_size][:per_rank]


class ChunkSampler(Sampler):
    """Endless stream of this rank's chunk indices, epoch after epoch, starting
    at global step `start_step`: one DataLoader (and one set of worker
    processes) serves the whole run, and resuming needs only the step."""

    def __init__(self, n_chunks: int, seed: int, rank: int, world_size: int, start_step: int = 0):
        self.n_chunks = n_chunks
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.start_step = start_step
        self.per_rank = n_chunks // world_size
        if self.per_rank < 1:
            raise ValueError("fewer chunks than ranks")

    def __iter__(self):
        epoch, offset = divmod(self.start_step, self.per_rank)
        while True:
            yield from epoch_order(self.n_chunks, epoch, self.seed, self.rank, self.world_size)[offset:]
            epoch, offset = epoch + 1, 0


def _worker_init(_worker_id: int) -> None:
    # Stop signals are for the training process, which saves a checkpoint and
    # shuts the loader down itself. A worker killed by a stray SIGTERM/SIGINT
    # would instead raise "DataLoader worker exited unexpectedly" in the
    # trainer in the middle of that save.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def make_loader(
    dataset: ShardChunks,
    sampler: ChunkSampler,
    *,
    num_workers: int,
    prefetch_factor: int,
    pin_memory: bool,
) -> DataLoader:
    kwargs = {}
    if num_workers > 0:
        kwargs = {
            "prefetch_factor": prefetch_factor,
            "worker_init_fn": _worker_init,
        }
    return DataLoader(
        dataset,
        batch_size=None,  # each item already is a batch (one chunk)
        sampler=sampler,
        num_workers=num_workers,
        pin_memory=pin_memory,
        **kwargs,
    )
