#!/usr/bin/env python3
"""Trainer I/O against the raw speed of the same bytes, paired with its floor (bench/harness.py).

    PYTHONPATH=trainer python bench/trainer_bench.py [--pairs 5] [--state-mib 512] [--data-mib 512] [--dir DIR] [--json FILE]

Every goal runs as pairs (project, floor) in rotated order after one warm-up pair, discarded,
and is judged by the median of the per-pair ratios of wall time (ratios of the medians and of the
minimums printed beside it). Ratios read as the goal does: ">=" goals are the project's speed
over the floor's (floor time / project time), "<=" goals the project's time over the floor's.

- loader, 8 KiB and 512 KiB chunks: one epoch of a persistent `ShardLoader` with 2 workers (as
  in training), against the cheapest read of the same chunks in the same order: one memoryview
  copy per region out of a warm mapping into two reused buffers, offsets computed beforehand.
  Equal prefetch state: before either side runs, the bench sleeps until the loader's workers
  are idle; the chunks the loader had already read ahead of the epoch (counted from the index
  stream it pulled) are skipped by the floor too, so neither side starts with a head start.
  Goal: >= 0.8. Shown, not a goal: the loader's reader alone in one process, which must come out
  at or below about 1x (the floor must stay the cheapest read).
- save: `AsyncCheckpointer.save` + `wait` (copy, hashed write, fsync, rename, marker, directory
  fsyncs; the prune of the previous checkpoint runs in the background and is finished before the
  next run of either side) against a write + fsync of the checkpoint file's own bytes to a new
  file while the previous one stays on disk. Goal: >= 0.9. And against
  `torch.distributed.checkpoint.async_save` of the same state (+ its future, files fsynced; the
  previous directory deleted untimed), with one busy process per CPU running beside both sides:
  goal >= 1.0 (never slower than DCP under load).
- first save: the loop blocked by a process's first save (after `prepare`, as a trainer does
  before step 1) against a copy of the same state into preallocated memory; one pair, as a
  process has one first save. Goal: <= 1.5. Later saves against the same copy: <= 1.5.
- restore: `checkpoint.load(..., into=live state)` (read once, straight into the live state's
  preallocated tensors, hashed while read, digest verified), and the copy of whatever it could
  not read in place (nothing here), against reading the same file into preallocated memory.
  Shown beside it: the load alone into private memory, no live state given. Warm: both files in the
  page cache; cold: both dropped before every run (posix_fadvise DONTNEED). Goal (warm): >= 0.8.
- replicated state, run first (--replicated-only: alone), --ranks ranks (gloo, forked;
  bench/replicated_gang.py): every rank holds the
  same state (DDP), and the launcher's replicated writer (replicated.rank_share + AsyncCheckpointer:
  each rank writes its share as a state file) saves it against DCP under the same protocol
  (distributed_checkpoint.DistributedCheckpointer: async_save, which dedups replicated tensors over
  the ranks the same way), save + wait on every rank; then restore into the live state on every
  rank (replicated.load_merged(into=...) against distributed_checkpoint.load). Goals >= 1.0: the
  writer stays only while it is faster than DCP for the same state (the reason in replicated.py).

Sizes (defaults): at most about 3 GiB of memory (saving: the state, its staging buffer, the live
copy, the raw floor's bytes, DCP's staging; restoring: the state, the live copy, the raw read's
buffer, one loaded copy) and 3.1 GiB of disk; the replicated gang, before the rest, 256 MiB
(--replicated-mib) on each rank: about 1.1 GiB of memory per rank (measured peak) and 1 GiB of
disk (two checkpoints of each side); the bench
checks the free disk first and removes everything it wrote. Text on stdout, JSON into --json.
"""

from __future__ import annotations

import argparse
import contextlib
import mmap
import multiprocessing
import os
import resource
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from example_trainer.data import ShardChunks, ShardLoader, epoch_order
from example_trainer.pack_data import HEADER_BYTES, encode_shard, shard_name
from launcher import checkpoint, memory_tier

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.harness, as `make bench` runs it
from bench.harness import Goal, Report, Result, Sample, run_pairs, timed
from bench.replicated_gang import Gang

# (label, dim, batch): 60 x (32 x 4 + 8) = 8160 bytes; 128 x (1024 x 4 + 8) = 525312 bytes
CHUNK_SHAPES = (("8 KiB chunks", 32, 60), ("512 KiB chunks", 1024, 128))
LOADER_WORKERS = 2
TENSORS_IN_STATE = 64
# Long enough for the loader's workers to finish the blocks they were handed (a few 4 MiB
# copies), before either side of a loader pair starts.
SETTLE_S = 0.2


def pack(data_dir: Path, dim: int, batch: int, data_bytes: int) -> int:
    """Two shards of random samples; returns the bytes one epoch delivers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    per_sample = dim * 4 + 8
    samples = max(batch, data_bytes // per_sample // 2 // batch * batch)
    files = []
    for i in range(2):
        x, y = torch.randn(samples, dim), torch.randint(0, 10, (samples,))
        (data_dir / shard_name(i)).write_bytes(encode_shard(x, y, 10))
        files.append({"name": shard_name(i), "samples": samples})
    checkpoint.atomic_write_json(str(data_dir / "MANIFEST.json"),
                                 {"format": "TRSHARD1", "params": {}, "dim": dim, "classes": 10, "shards": files})
    return 2 * samples * per_sample


def raw_mmap_pass(ds: ShardChunks, order: list[int], features: memoryview, labels: memoryview) -> Callable[[], None]:
    """The cheapest read of every chunk, in `order`, into the same two buffers (`features`:
    feature_bytes, `labels`: label_bytes): one memoryview copy per region out of warm mappings
    of the shards, every chunk's offsets computed before timing, no function call per chunk.
    (Copying through torch tensor slices instead, four torch calls per chunk, ran 2.3-2.6x
    slower for 8 KiB chunks, which flattered the loader.)"""
    shards = []
    for path, n in ds.shards:
        with open(path, "rb") as f:
            shard = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        bytes(shard[::mmap.PAGESIZE])  # warm: every page mapped (and in the page cache) before timing
        shards.append((shard, HEADER_BYTES + n * ds.dim * 4))
    located = []
    for si, start in ds.chunks:
        shard, labels_at = shards[si]
        located.append((shard, HEADER_BYTES + start * ds.dim * 4, labels_at + start * 8))
    feature_bytes, label_bytes = ds.feature_bytes, ds.label_bytes

    def run() -> None:
        for idx in order:
            shard, f_at, l_at = located[idx]
            features[:] = shard[f_at:f_at + feature_bytes]
            labels[:] = shard[l_at:l_at + label_bytes]

    return run


def reader_pass(ds: ShardChunks, order: list[int], chunks_per_block: int) -> Callable[[], None]:
    """The loader's own reader (`ShardChunks.read_chunks_into`) in this process alone, block by
    block as the workers call it, into one reused block: what the loader's parallelism starts from."""
    views = [(memoryview(bytearray(ds.feature_bytes)), memoryview(bytearray(ds.label_bytes)))
             for _ in range(chunks_per_block)]

    def run() -> None:
        for start in range(0, len(order), chunks_per_block):
            ds.read_chunks_into(order[start:start + chunks_per_block], views)

    return run


class CountingIndices:
    """The loader's index stream, `order` repeated; counts what the loader pulled (read ahead)."""

    def __init__(self, order: list[int]):
        self.order, self.pulled = order, 0

    def __iter__(self) -> Iterator[int]:
        while True:
            for index in self.order:
                self.pulled += 1
                yield index


def bench_loader(work: Path, report: Report, pairs: int, data_bytes: int) -> None:
    for label, dim, batch in CHUNK_SHAPES:
        bench_loader_shape(work / label.replace(" ", "-"), label, dim, batch, report, pairs, data_bytes)


def bench_loader_shape(data_dir: Path, label: str, dim: int, batch: int, report: Report, pairs: int,
                       data_bytes: int) -> None:
    """One persistent loader (as in training) against the floor, then the loader's reader alone
    against the floor; the page cache warm for all. The data set is removed after: the disk
    holds one at a time, then the checkpoints."""
    nbytes = pack(data_dir, dim, batch, data_bytes)
    ds = ShardChunks(str(data_dir), batch)
    order = epoch_order(len(ds), 0, seed=0, rank=0, world_size=1)
    features, labels = memoryview(bytearray(ds.feature_bytes)), memoryview(bytearray(ds.label_bytes))
    raw_mmap_pass(ds, order, features, labels)()  # page cache warm for all
    indices = CountingIndices(order)
    started = time.perf_counter()
    loader = ShardLoader(ds, indices, num_workers=LOADER_WORKERS)
    next(loader)
    first_batch = time.perf_counter() - started
    for _ in range(len(order) - 1):  # the rest of the warm-up epoch
        next(loader)
    consumed = [len(order)]

    def loader_epoch() -> Sample:
        sample = timed(lambda: [next(loader) for _ in range(len(order))])
        consumed[0] += len(order)
        return sample

    def floor(skip_prefetched: bool = True) -> Sample:
        # What the loader read ahead before its epoch began (all of it, in a data set smaller
        # than its read-ahead: too small to time a loader by, as the note says).
        ahead = min(indices.pulled - consumed[0], len(order)) if skip_prefetched else 0
        return timed(raw_mmap_pass(ds, order[ahead:], features, labels))

    read_ahead = LOADER_WORKERS * loader.prefetch_blocks * loader.chunks_per_block
    small = f"; too small: the loader reads {read_ahead} of its {len(order)} chunks ahead" if read_ahead * 4 > len(order) else ""
    report.add(run_pairs(f"loader / raw mmap, {label}", (f"loader, {label}", loader_epoch),
                         (f"raw mmap, {label} (less the loader's read-ahead)", floor), pairs=pairs,
                         goal=Goal(">=", 0.8), before=lambda: time.sleep(SETTLE_S),
                         note=f"{nbytes / 2**20:.0f} MiB per epoch; startup to the first batch {first_batch:.3f} s{small}"))
    loader.close()
    reader = reader_pass(ds, order, loader.chunks_per_block)
    report.add(run_pairs(f"reader in one process / raw, {label}", (f"reader in one process, {label}",
                         lambda: timed(reader)), (f"raw mmap, {label}", lambda: floor(skip_prefetched=False)),
                         pairs=pairs, orient=">=",
                         note="no goal; about 1x or below: the floor must stay the cheapest read"))
    ds.close()
    shutil.rmtree(data_dir)


def raw_write(path: str, blob: memoryview, *, keep_previous: bool) -> None:
    """Write + fsync `blob` to a new file. `keep_previous`: the file written before stays on disk
    until this one is (as the newest complete checkpoint must); otherwise it is deleted first,
    and the new file may take the blocks just freed."""
    new, old = f"{path}.new", path
    if not keep_previous and os.path.exists(old):
        os.unlink(old)
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        while blob:
            blob = blob[os.write(fd, blob):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(new, old)  # the previous one, if kept, goes now


def raw_read(path: str, into: bytearray) -> None:
    with open(path, "rb", buffering=0) as f:
        f.readinto(into)


def drop_cache(*paths: str) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def make_state(state_bytes: int) -> dict:
    per_tensor = max(1, state_bytes // TENSORS_IN_STATE // 4)
    return {"step": 1, "model": {f"layer{i}.weight": torch.randn(per_tensor) for i in range(TENSORS_IN_STATE)}}


def _busy() -> None:
    while True:
        pass


@contextlib.contextmanager
def cpu_load() -> Iterator[int]:
    """One busy process per CPU for the duration: the load a shared CI machine adds."""
    busy = [multiprocessing.get_context("fork").Process(target=_busy, daemon=True) for _ in range(os.cpu_count() or 1)]
    for process in busy:
        process.start()
    try:
        yield len(busy)
    finally:
        for process in busy:
            process.kill()
            process.join()


class Saves:
    """The project's save and its floors, over one state and one live copy of it."""

    def __init__(self, work: Path, state: dict):
        self.work, self.state = work, state
        self.tensors = list(state["model"].values())
        self.live = [torch.zeros_like(t) for t in self.tensors]  # preallocated and touched, as a live state is
        self.root = str(work / "checkpoints")
        self.checkpointer = checkpoint.AsyncCheckpointer(self.root, keep=1)
        self.step = 0
        self.blob: memoryview | None = None
        self.raw_path = str(work / "raw.bin")
        self.dcp_dirs: list[Path] = []
        self.dcp_saves = 0

    def host_copy(self) -> Sample:
        return timed(lambda: [c.copy_(t) for c, t in zip(self.live, self.tensors, strict=True)])

    def save(self) -> tuple[Sample, Sample]:
        """(loop blocked, save + wait) of the next step."""
        self.step += 1
        started = time.perf_counter()
        blocked = self.checkpointer.save(self.step, self.state)
        done = self.checkpointer.wait()
        total = time.perf_counter() - started
        if self.blob is None:  # the raw floors write exactly the bytes of the checkpoint file
            assert done is not None
            with open(os.path.join(done.path, checkpoint.shard_name(0)), "rb") as f:
                self.blob = memoryview(bytearray(f.read()))
        return Sample(blocked), Sample(total)

    def settle(self) -> None:
        """Before every run of either side: the previous save's background prune finished."""
        self.checkpointer.close()

    def raw_write(self) -> Sample:
        assert self.blob is not None
        blob = self.blob
        return timed(lambda: raw_write(self.raw_path, blob, keep_previous=True))

    def dcp_save(self) -> Sample:
        from torch.distributed.checkpoint.filesystem import FileSystemWriter
        from torch.distributed.checkpoint.state_dict_saver import async_save

        self.dcp_saves += 1
        path = self.work / f"dcp-{self.dcp_saves}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "torch.distributed is ... uninitialized": one process, as meant
            started = time.perf_counter()
            future = async_save({"model": self.state["model"]}, checkpoint_id=str(path),
                                    storage_writer=FileSystemWriter(str(path), sync_files=True))
            future.result()  # pyright: ignore[reportAttributeAccessIssue]
            sample = Sample(time.perf_counter() - started)
        self.dcp_dirs.append(path)
        while len(self.dcp_dirs) > 1:  # its previous checkpoint deleted after, untimed (ours prunes in the background)
            shutil.rmtree(self.dcp_dirs.pop(0))
        return sample


def bench_saves(saves: Saves, report: Report, pairs: int) -> None:
    nbytes = sum(t.numel() * t.element_size() for t in saves.tensors)
    prepare = timed(lambda: saves.checkpointer.prepare(saves.state))
    copy = saves.host_copy()
    first_blocked, first_total = saves.save()
    report.add(Result("first save blocked / host memory copy", "loop blocked by the first save",
                      "host memory copy of the state", Goal("<=", 1.5), [first_blocked], [copy], 0,
                      note=f"one pair (a process has one first save), after prepare ({prepare.wall:.3f} s); "
                           f"the first save took {first_total.wall:.3f} s in all"))
    report.add(run_pairs("save / raw fsync'd write", ("checkpoint save + wait", lambda: saves.save()[1]),
                         ("raw write + fsync, previous kept", saves.raw_write), pairs=pairs, goal=Goal(">=", 0.9),
                         before=saves.settle, note=f"{nbytes / 2**20:.0f} MiB state in {TENSORS_IN_STATE} tensors"))
    report.add(run_pairs("loop blocked / host memory copy", ("loop blocked by a later save", lambda: saves.save()[0]),
                         ("host memory copy of the state", saves.host_copy), pairs=pairs, goal=Goal("<=", 1.5),
                         before=saves.settle))
    with cpu_load() as busy:
        report.add(run_pairs("save / dcp.async_save, under load", ("checkpoint save + wait", lambda: saves.save()[1]),
                             ("dcp.async_save + result", saves.dcp_save), pairs=pairs, goal=Goal(">=", 1.0),
                             before=saves.settle, note=f"{busy} busy processes beside both sides"))
    saves.settle()
    for path in saves.dcp_dirs:
        shutil.rmtree(path)


def bench_memory_tier(saves: Saves, report: Report, pairs: int) -> None:
    """A memory-tier save (launcher.memory_tier) against a host copy of the same state: the loop waits
    for the copy to host memory only; the copy into tmpfs is written after, as the tier writes it. In
    /dev/shm, the tmpfs an emptyDir of medium Memory is, where the machine has one."""
    shm = Path("/dev/shm")
    root = Path(tempfile.mkdtemp(prefix="memory-tier-", dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else saves.work))
    copies = memory_tier.MemoryCopies(memory_tier.MemoryTier(str(root), 1.0), writes=True)
    copies.prepare(saves.state)
    step = [0]

    def memory_save() -> Sample:
        step[0] += 1
        return Sample(copies.save(step[0], saves.state))

    try:
        report.add(run_pairs("memory-tier save blocked / host memory copy", ("loop blocked by a memory-tier save",
                             memory_save), ("host memory copy of the state", saves.host_copy), pairs=pairs,
                             goal=Goal("<=", 1.2), before=copies.close, note=f"tier in {root.parent}"))
    finally:
        copies.close()
        shutil.rmtree(root, ignore_errors=True)


def bench_restore(saves: Saves, report: Report, pairs: int) -> None:
    latest = checkpoint.latest_complete(saves.root)
    assert latest is not None and saves.blob is not None
    state_path = os.path.join(latest.path, checkpoint.shard_name(0))
    read_buffer = bytearray(len(saves.blob))
    saves.raw_write()  # raw.bin holds the checkpoint file's bytes
    # Memory for the loaded copy: the raw floor's bytes and the save's staging buffer (a fresh
    # checkpointer has none) are not needed any more.
    saves.blob, saves.checkpointer = None, checkpoint.AsyncCheckpointer(saves.root, keep=1)
    raw_read(saves.raw_path, read_buffer)  # its pages touched, as the live state's are

    live = {"model": dict(zip(saves.state["model"], saves.live, strict=True))}

    def restore() -> Sample:
        def run() -> None:
            # As a trainer restores (example_trainer/train.py): read into the live state where it
            # can, then copy whatever was not read in place (here: nothing).
            loaded = checkpoint.load(latest.path, into=live)
            for dst, src in zip(saves.live, loaded["model"].values(), strict=True):
                if src.data_ptr() != dst.data_ptr():
                    dst.copy_(src)
        return timed(run)

    raw = ("raw read into preallocated memory", lambda: timed(lambda: raw_read(saves.raw_path, read_buffer)))
    report.add(run_pairs("restore / raw read, warm", ("checkpoint load + copy into the live state", restore), raw,
                         pairs=pairs, goal=Goal(">=", 0.8), before=lambda: None,
                         note="both files in the page cache"))
    report.add(run_pairs("load alone / raw read, warm", ("checkpoint load, no copy",
                         lambda: timed(lambda: checkpoint.load(latest.path))), raw, pairs=pairs, orient=">="))
    report.add(run_pairs("restore / raw read, cold", ("checkpoint load + copy into the live state", restore), raw,
                         pairs=pairs, before=lambda: drop_cache(state_path, saves.raw_path), orient=">=",
                         note="both files dropped from the page cache before every run"))
    assert all(torch.equal(a, b) for a, b in zip(saves.live, saves.tensors, strict=True)), "the restore restored something else"


def bench_replicated(work: Path, report: Report, pairs: int, state_bytes: int, ranks: int) -> None:
    """First, before the other parts hold their state in this process (the ranks are forked from it)."""
    gang = Gang(work / "replicated-gang", ranks, state_bytes, TENSORS_IN_STATE)
    try:
        def side(name: str):
            return lambda: Sample(gang.run(name))

        settle = lambda: gang.run("settle")  # noqa: E731
        note = f"{state_bytes / 2**20:.0f} MiB replicated on {ranks} ranks, {TENSORS_IN_STATE} tensors"
        report.add(run_pairs("replicated save / DCP save", ("rank_share + AsyncCheckpointer save + wait",
                                                            side("ours_save")),
                             ("DistributedCheckpointer (dcp.async_save) + wait", side("dcp_save")),
                             pairs=pairs, goal=Goal(">=", 1.0), before=settle, note=note))
        settle()
        sizes = {name: gang.bytes_on_disk(name) for name in ("ours", "dcp")}
        report.add(run_pairs("replicated restore / DCP restore", ("replicated.load_merged into the live state",
                                                                  side("ours_restore")),
                             ("distributed_checkpoint.load (dcp.load) in place", side("dcp_restore")),
                             pairs=pairs, goal=Goal(">=", 1.0), before=settle,
                             note=f"one checkpoint on disk each: {sizes['ours'] / 2**20:.0f} MiB ours, "
                                  f"{sizes['dcp'] / 2**20:.0f} MiB DCP's"))
        assert gang.restored_equal(), "a restore restored something else"
    finally:
        gang.close()


def disk_needed(state_bytes: int, data_bytes: int, replicated_bytes: int = 0) -> int:
    """The most the bench holds on disk at once: two checkpoints (the newest and the one being
    written), the raw floor's file and its successor, two DCP checkpoints; the loader's data
    set is gone by then. The replicated gang, first and alone: two checkpoints of each side."""
    return max(data_bytes, 6 * state_bytes, 4 * replicated_bytes) + (64 << 20)


def peak_rss() -> dict[str, float]:
    """Peak resident memory in GiB of this process and of the largest child (Linux: KiB)."""
    scale = 2**20 if sys.platform != "darwin" else 2**30
    return {"bench_process_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale, 2),
            "largest_child_gib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / scale, 2)}


PARTS = ("loader", "saves", "memory", "restore")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2, help="ranks of the replicated-state gang")
    parser.add_argument("--replicated-mib", type=int, default=256, help="replicated state size on each rank")
    parser.add_argument("--replicated-only", action="store_true", help="only the replicated state against DCP")
    parser.add_argument("--state-mib", type=int, default=512, help="checkpoint state size")
    # 512 MiB per pass: a 256 MiB pass of 512 KiB chunks lasts ~15 ms, which measures the workers'
    # wake-up per epoch more than throughput.
    parser.add_argument("--data-mib", type=int, default=512, help="data read per loader pass and chunk size")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--check-disk", action="store_true", help="only check that the disk has room, then exit")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--json", type=Path, default=Path(__file__).resolve().parent.parent / "build" / "bench" / "latest.json")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.parts.split(",")) - set(PARTS))
    if unknown:
        print(f"trainer bench: unknown parts {unknown}; choose from {', '.join(PARTS)}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    state_bytes, data_bytes = args.state_mib << 20, args.data_mib << 20
    where = args.dir or tempfile.gettempdir()
    need, free = disk_needed(state_bytes, data_bytes, args.replicated_mib << 20), shutil.disk_usage(where).free
    if free < need:
        print(f"trainer bench: needs {need / 2**30:.1f} GiB free in {where}, has {free / 2**30:.1f} GiB. "
              "Fix: free some, pass --dir on a larger disk, or lower --state-mib / --data-mib", file=sys.stderr)
        return 2
    if args.check_disk:
        print(f"trainer bench: needs {need / 2**30:.1f} GiB free in {where}, has {free / 2**30:.1f} GiB")
        return 0
    report = Report("trainer")
    print(f"trainer I/O ({args.pairs} pairs per goal; needs {need / 2**30:.1f} GiB of disk in {where})")
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="trainer-bench-replicated-") as tmp:
        bench_replicated(Path(tmp), report, args.pairs, args.replicated_mib << 20, args.ranks)
    if args.replicated_only:
        report.save(args.json)
        return 0
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="trainer-bench-") as tmp:
        work, parts = Path(tmp), set(args.parts.split(","))
        if "loader" in parts:
            bench_loader(work, report, args.pairs, data_bytes)
        saves = Saves(work, make_state(state_bytes))
        for part, bench in (("saves", bench_saves), ("memory", bench_memory_tier), ("restore", bench_restore)):
            if part in parts:
                bench(saves, report, args.pairs)
    report.extra["peak_rss"] = peak_rss()
    report.extra["disk_needed_gib"] = round(need / 2**30, 2)
    print(f"peak memory: {report.extra['peak_rss']}")
    report.save(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
