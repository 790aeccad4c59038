"""Reading packed shards at the speed of the storage: worker processes fill a shared-memory ring.

The unit of loading is a *chunk*: `batch_size` consecutive samples of one shard, read with two
memory copies (features, labels) out of the shard's mapping straight into their final place.
Each epoch shuffles the chunk order with a seeded generator; rank r takes every world_size-th
chunk. The position in the data is therefore a pure function of the global step, which is all a
checkpoint needs to resume exactly.

Why not `torch.utils.data.DataLoader` with one chunk per item: every item then crosses a
multiprocessing queue on its own (pickled, its storage moved into a fresh shared-memory segment
whose file descriptor is passed over a socket). Measured side by side with a plain memory-mapped
read of the same shards, that costs more than it hides: 4x (0.5 MB chunks) to 66x (8 KB chunks)
slower. `ShardLoader` instead

- maps one anonymous shared ring of `slots` blocks once, before the workers fork; a block holds
  `chunks_per_block` chunks (about `block_bytes`);
- sends each worker only a slot number and a list of chunk indices (a few bytes); the worker
  copies the chunks out of its mapping of the shards directly into the ring (one copy: page
  cache -> ring);
- hands the training loop views into the ring, in sampler order: no pickling, no per-item
  allocation, no copy in the training process;
- keeps its workers for the whole run (the sampler is endless), `prefetch_blocks` blocks ahead
  per worker.

A batch is valid until the loop asks for the next one: the loop moves on, the slot is refilled.
Copy it (`.clone()`, or `.to(device)`) to keep it longer. With CUDA the copy to the device comes
from pageable shared memory, which the driver stages synchronously, so reusing the slot after
`next()` is always safe.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import itertools
import mmap
import multiprocessing
import os
import signal
from collections.abc import Iterable, Iterator
from multiprocessing.process import BaseProcess
from typing import Any

import torch
from launcher.state_file import bytes_of

from .pack_data import HEADER_BYTES, read_header, read_manifest, shard_size

DEFAULT_BLOCK_BYTES = 4 << 20  # 4 MiB per message: IPC cost vanishes, the ring stays small
WORKER_POLL_S = 1.0


class ShardChunks:
    """The packed data set as an index of chunks, and a reader of one chunk into given memory."""

    def __init__(self, data_dir: str, batch_size: int):
        manifest = read_manifest(data_dir)
        if manifest is None:
            raise FileNotFoundError(f"no MANIFEST.json in {data_dir}")
        self.data_dir = data_dir
        self.batch_size = batch_size
        self.dim = int(manifest["dim"])
        self.classes = int(manifest["classes"])
        self.shards: list[tuple[str, int]] = []
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
        self.feature_bytes = batch_size * self.dim * 4
        self.label_bytes = batch_size * 8
        self._labels_at = [HEADER_BYTES + n * self.dim * 4 for _, n in self.shards]
        self._forget_maps()

    def __len__(self) -> int:
        return len(self.chunks)

    def _forget_maps(self) -> None:
        """Map every shard anew when next read (the mappings close when no tensor uses them)."""
        self._maps: list[memoryview | None] = [None] * len(self.shards)
        self._maps_pid = os.getpid()

    def _shard(self, si: int) -> memoryview:
        """The shard's bytes, memory-mapped once per process (a forked worker maps its own)."""
        path, n = self.shards[si]
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size != shard_size(n, self.dim):  # bytes mapped past the end would be a SIGBUS
                raise OSError(f"{path}: {size} bytes, its header says {shard_size(n, self.dim)}")
            view = self._maps[si] = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        return view

    def read_chunks_into(self, ids: Iterable[int], views: Iterable[tuple[memoryview, memoryview]]) -> None:
        """Copy chunk ids[j] into views[j] = (features: feature_bytes, labels: label_bytes), for
        each id: two copies per chunk out of the shard's mapping, straight from the page cache.

        (A mapping rather than positioned reads: the kernel's copy per 4 KiB page ran at half the
        speed of a memcpy out of a mapping for 512 KiB chunks, measured with
        bench/trainer_bench.py. The price: a shard that shrinks while mapped is a SIGBUS instead
        of an error; shards are written once.) The loop does nothing but the offset arithmetic
        and the two copies, with everything it needs in local names: for 8 KiB chunks this
        per-chunk work in Python, not the copying, bounds the loader."""
        if self._maps_pid != os.getpid():  # forked: the parent's mappings are not ours to use
            self._forget_maps()
        maps, chunks, labels_at = self._maps, self.chunks, self._labels_at
        row_bytes, feature_bytes, label_bytes = self.dim * 4, self.feature_bytes, self.label_bytes
        # Not strict: a block's last message may fill fewer chunks than it has views.
        for idx, (features, labels) in zip(ids, views, strict=False):
            si, start = chunks[idx]
            shard = maps[si]
            if shard is None:
                shard = self._shard(si)
            at = HEADER_BYTES + start * row_bytes
            features[:] = shard[at:at + feature_bytes]
            at = labels_at[si] + start * 8
            labels[:] = shard[at:at + label_bytes]

    def read_into(self, idx: int, features: memoryview, labels: memoryview) -> None:
        """Copy chunk `idx` into `features` (feature_bytes) and `labels` (label_bytes)."""
        self.read_chunks_into((idx,), ((features, labels),))

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.empty(self.batch_size, self.dim, dtype=torch.float32)
        y = torch.empty(self.batch_size, dtype=torch.int64)
        self.read_into(idx, bytes_of(x), bytes_of(y))
        return x, y

    def close(self) -> None:
        self._forget_maps()


def epoch_order(n_chunks: int, epoch: int, seed: int, rank: int, world_size: int) -> list[int]:
    """This rank's chunk indices for an epoch (equal length on every rank)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    perm = torch.randperm(n_chunks, generator=g).tolist()
    per_rank = n_chunks // world_size
    return perm[rank::world_size][:per_rank]


class ChunkSampler:
    """Endless stream of this rank's chunk indices, epoch after epoch, starting at global step
    `start_step`: one loader (and one set of worker processes) serves the whole run, and
    resuming needs only the step."""

    def __init__(self, n_chunks: int, seed: int, rank: int, world_size: int, start_step: int = 0):
        self.n_chunks = n_chunks
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.start_step = start_step
        self.per_rank = n_chunks // world_size
        if self.per_rank < 1:
            raise ValueError("fewer chunks than ranks")

    def __iter__(self) -> Iterator[int]:
        epoch, offset = divmod(self.start_step, self.per_rank)
        while True:
            yield from epoch_order(self.n_chunks, epoch, self.seed, self.rank, self.world_size)[offset:]
            epoch, offset = epoch + 1, 0


class LoaderWorkerError(RuntimeError):
    """A loader worker failed or died; the message says which and why."""


class ShardLoader:
    """Iterator of (features, labels) chunks in `indices` order, read ahead into a shared ring."""

    def __init__(self, dataset: ShardChunks, indices: Iterable[int], *, num_workers: int,
                 prefetch_blocks: int = 2, block_bytes: int = DEFAULT_BLOCK_BYTES):
        if num_workers < 0 or prefetch_blocks < 1:
            raise ValueError("num_workers must be >= 0 and prefetch_blocks >= 1")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_blocks = prefetch_blocks
        chunk_bytes = dataset.feature_bytes + dataset.label_bytes
        self.chunks_per_block = max(1, block_bytes // chunk_bytes)
        self._indices = iter(indices)
        # Each worker keeps `prefetch_blocks` blocks in flight; two more slots let the loop read a
        # block itself instead of sleeping while the next one is still being read.
        slots = num_workers * prefetch_blocks + 2
        k, b = self.chunks_per_block, dataset.batch_size
        feature_block = k * dataset.feature_bytes
        slot_bytes = feature_block + k * dataset.label_bytes
        # Anonymous MAP_SHARED memory: forked workers write into the very pages the loop reads.
        self._ring = mmap.mmap(-1, slots * slot_bytes)
        ring = memoryview(self._ring)
        self._chunk_views = []  # per slot: the byte views a reader fills, chunk by chunk
        self._batches = []  # per slot: the (x, y) tensor views the loop receives, chunk by chunk
        for slot in range(slots):
            base = slot * slot_bytes
            x = torch.frombuffer(self._ring, dtype=torch.float32, count=k * b * dataset.dim,
                                 offset=base).view(k * b, dataset.dim)
            y = torch.frombuffer(self._ring, dtype=torch.int64, count=k * b, offset=base + feature_block)
            self._batches.append(list(zip(x.split(b), y.split(b), strict=True)))
            self._chunk_views.append([
                (ring[base + j * dataset.feature_bytes: base + (j + 1) * dataset.feature_bytes],
                 ring[base + feature_block + j * dataset.label_bytes:
                      base + feature_block + (j + 1) * dataset.label_bytes])
                for j in range(k)])
        self._free = list(range(slots))
        # Blocks in delivery order: [slot, reader (worker index, or -1: read here), chunks (None
        # until known)]. A worker answers its blocks in the order it got them.
        self._queue: collections.deque[list] = collections.deque()
        self._in_flight = [0] * num_workers
        self._current: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._current_slot: int | None = None
        self._position = 0
        self._exhausted = False
        self._workers: list[BaseProcess] = []
        self._conns: list[Any] = []  # the loop's ends of the workers' pipes
        if num_workers:
            self._start_workers()
        self._dispatch()

    # ------------------------------------------------------------------ workers

    def _start_workers(self) -> None:
        # fork: the ring and the dataset index are inherited, nothing is pickled. The workers touch
        # no torch state, only memory copies into the ring (fork-safe even after CUDA/gloo started).
        ctx = multiprocessing.get_context("fork")
        pipes = [ctx.Pipe(duplex=True) for _ in range(self.num_workers)]
        parent_ends = [p for p, _ in pipes]
        for w, (_, child) in enumerate(pipes):
            others = [c for i, (_, c) in enumerate(pipes) if i != w]
            proc = ctx.Process(target=_worker_main, name=f"shard-loader-{w}", daemon=True,
                               args=(self.dataset, self._chunk_views, child, [*parent_ends, *others]))
            proc.start()
            child.close()
            self._workers.append(proc)
        self._conns = parent_ends

    def _next_block(self) -> list[int]:
        if self._exhausted:
            return []
        ids = list(itertools.islice(self._indices, self.chunks_per_block))
        self._exhausted = not ids
        return ids

    def _dispatch(self) -> None:
        """Hand the next blocks to workers with room, least busy first, while slots are free."""
        while self.num_workers and len(self._free) > 2:
            worker = min(range(self.num_workers), key=self._in_flight.__getitem__)
            if self._in_flight[worker] >= self.prefetch_blocks:
                return
            ids = self._next_block()
            if not ids:
                return
            slot = self._free.pop()
            self._conns[worker].send((slot, ids))
            self._in_flight[worker] += 1
            self._queue.append([slot, worker, None])

    def _read_here(self) -> bool:
        """Read the next block in this process (instead of waiting idle); False if there is none."""
        if not self._free:
            return False
        ids = self._next_block()
        if not ids:
            return False
        slot = self._free.pop()
        self.dataset.read_chunks_into(ids, self._chunk_views[slot])
        self._queue.append([slot, -1, len(ids)])
        return True

    def _receive(self, worker: int, wait: bool) -> bool:
        """Take the answer of `worker` for its oldest block; False if not there yet and not `wait`."""
        conn, proc = self._conns[worker], self._workers[worker]
        try:
            while not conn.poll(WORKER_POLL_S if wait else 0):
                if not wait:
                    return False
                if not proc.is_alive():
                    raise EOFError
            got_slot, count = conn.recv()
        except (EOFError, OSError):  # its end of the pipe closed: the worker is gone
            proc.join(timeout=WORKER_POLL_S)
            raise LoaderWorkerError(f"loader worker {worker} (pid {proc.pid}) exited unexpectedly "
                                    f"with code {proc.exitcode}") from None
        if got_slot == "error":
            raise LoaderWorkerError(f"loader worker {worker}: {count}")
        entry = next(e for e in self._queue if e[1] == worker and e[2] is None)
        if got_slot != entry[0]:
            raise LoaderWorkerError(f"loader worker {worker} filled slot {got_slot}, expected {entry[0]}")
        entry[2] = count
        self._in_flight[worker] -= 1
        return True

    def _next_block_ready(self) -> list:
        """The oldest block, once read; reads ahead here rather than sleep while it is not."""
        while True:
            if not self._queue and not self._read_here():
                raise StopIteration
            head = self._queue[0]
            if head[2] is not None or self._receive(head[1], wait=False):
                return self._queue.popleft()
            if not self._read_here():
                self._receive(head[1], wait=True)

    # ---------------------------------------------------------------- iteration

    def __iter__(self) -> ShardLoader:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._position >= len(self._current):
            if self._current_slot is not None:  # the loop is done with that block: reuse its slot
                self._free.append(self._current_slot)
                self._current_slot = None
            self._dispatch()
            slot, _, count = self._next_block_ready()
            self._current, self._current_slot, self._position = self._batches[slot][:count], slot, 0
            self._dispatch()
        batch = self._current[self._position]
        self._position += 1
        return batch

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
        for proc in self._workers:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._workers, self._conns = [], []
        self._queue.clear()


def _worker_main(dataset: ShardChunks, chunk_views, conn, inherited) -> None:
    """Loop of one loader worker: read the requested chunks into the ring, report the slot."""
    for other in inherited:  # so that a dead training process means EOF here
        other.close()
    # Stop signals are for the training process, which saves a checkpoint and closes the loader
    # itself. A worker killed by a stray SIGTERM/SIGINT would break the loop in the middle of it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        slot, ids = message
        try:
            dataset.read_chunks_into(ids, chunk_views[slot])
        except Exception as e:  # reported to the loop, which raises it
            conn.send(("error", f"{type(e).__name__}: {e}"))
            return
        conn.send((slot, len(ids)))


def _die_with_parent() -> None:
    """SIGKILL this worker when the training process dies (Linux), whatever happens to it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
