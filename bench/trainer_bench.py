#!/usr/bin/env python3
"""Trainer I/O against the raw speed of the same bytes, measured side by side in one run.

    PYTHONPATH=trainer python bench/trainer_bench.py [--repeat 5] [--state-mib 1024] [--data-mib 256] [--dir DIR]

Each figure is measured --repeat times, the project's path and its floor interleaved (drift hits
both alike); min and median are printed, and each ratio twice: of the medians and of the
minimums (project / raw: higher is better, except "loop blocked", where lower is better). On a
shared machine the minimums are the better estimate of what the code costs: other processes
only ever add time.

- loader, 8 KiB and 512 KiB chunks: one epoch of a persistent `ShardLoader` with 2 workers (as
  in training; its first epoch is a warm-up), against the cheapest read of the same chunks in
  the same order: one memoryview copy per region (features, labels) out of a warm mapping into
  the same two buffers, offsets computed beforehand. Startup to the first batch is printed
  apart. Goal: >= 0.8. Printed beside it, not a goal: the loader's reader alone, in
  one process (about 1x the floor: the floor must stay the cheapest read).
- checkpoint save: `AsyncCheckpointer.save` + `wait` (copy to host memory, write while hashing,
  fsync, rename, marker, directory fsyncs, pruning the previous one) against a write + fsync of
  the checkpoint file's own bytes to a new file while the previous file stays on disk, as the
  newest complete checkpoint must until the next one is. Goal: >= 0.7. Printed beside it, not a
  goal: the same raw write after deleting the previous file first; on a thin-provisioned
  virtual disk reusing just-freed blocks can be several times faster than new ones.
- checkpoint restore: what a trainer's resume costs, `checkpoint.load` (the file read once into
  private memory while it is hashed, digest verified) and the copy of every tensor into the
  live state (preallocated tensors, as `model.load_state_dict` copies into parameters), against
  reading the same file into preallocated memory: the cheapest way to get those bytes where the
  live state is. Page cache warm for both; "cold" drops both files from the page cache first
  (posix_fadvise DONTNEED; a virtual disk may still be cached by its host). Goal (warm):
  >= 0.8. Printed beside it, not a goal: the load alone, without the copy.
- loop blocked: how long `save` stops the training loop, against a copy of the same state into
  preallocated host memory. Goal: <= 1.5. The checkpointer is prepared first
  (`AsyncCheckpointer.prepare`, as a trainer does before step 1; its time is printed, not a
  goal), and the first save is counted with the others; the first save's blocked time against
  the median of the later ones has a goal of its own: <= 1.5 (needs --repeat >= 2).

Every goal's line ends in `met` or `not met`, judged on the ratio of the medians.
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from example_trainer.data import ShardChunks, ShardLoader, epoch_order
from example_trainer.pack_data import HEADER_BYTES, encode_shard, shard_name
from launcher import checkpoint

# (label, dim, batch): 60 x (32 x 4 + 8) = 8160 bytes; 128 x (1024 x 4 + 8) = 525312 bytes
CHUNK_SHAPES = (("8 KiB chunks", 32, 60), ("512 KiB chunks", 1024, 128))
LOADER_WORKERS = 2
RAW_WRITE_KEPT = "raw write + fsync, previous kept"
RAW_WRITE_FREED = "raw write + fsync, previous deleted first"
TENSORS_IN_STATE = 64
PREPARE = "prepare (allocate + touch staging)"
FIRST_SAVE = "loop blocked by the first save"
LATER_SAVES = "loop blocked by later saves"
LOAD_ALONE = "checkpoint load alone, warm"


class Figures:
    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}

    def add(self, name: str, seconds: float) -> None:
        self.times.setdefault(name, []).append(seconds)

    def median(self, name: str) -> float:
        return statistics.median(self.times[name])

    def line(self, name: str, nbytes: int | None = None) -> str:
        values = self.times[name]
        text = f"  {name:<38} median {self.median(name):8.4f} s   min {min(values):8.4f} s"
        if nbytes:
            text += f"   {nbytes / self.median(name) / 1e6:8.0f} MB/s"
        return text


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------------- loader


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


def bench_loader(work: Path, figures: Figures, repeat: int, data_bytes: int) -> list[tuple[str, int]]:
    """One persistent loader per chunk size (as in training) over repeat + 1 epochs: the first
    epoch (worker start, first reads) is a warm-up, each later one is timed against a raw pass
    and a pass of the loader's reader in this process alone."""
    sizes = []
    for label, dim, batch in CHUNK_SHAPES:
        data_dir = work / label.replace(" ", "-")
        nbytes = pack(data_dir, dim, batch, data_bytes)
        ds = ShardChunks(str(data_dir), batch)
        order = epoch_order(len(ds), 0, seed=0, rank=0, world_size=1)
        raw = raw_mmap_pass(ds, order, memoryview(bytearray(ds.feature_bytes)), memoryview(bytearray(ds.label_bytes)))
        raw()  # page cache warm for all
        started = time.perf_counter()
        loader = ShardLoader(ds, order * (repeat + 1), num_workers=LOADER_WORKERS)
        reader = reader_pass(ds, order, loader.chunks_per_block)
        next(loader)
        figures.add(f"loader first batch, {label}", time.perf_counter() - started)
        for _ in range(len(order) - 1):  # the rest of the warm-up epoch
            next(loader)
        for _ in range(repeat):
            epoch_started = time.perf_counter()
            for _ in range(len(order)):
                next(loader)
            figures.add(f"loader, {label}", time.perf_counter() - epoch_started)
            figures.add(f"raw mmap, {label}", timed(raw))
            figures.add(f"reader in one process, {label}", timed(reader))
        loader.close()
        del raw, reader  # their mappings of the shards
        ds.close()
        shutil.rmtree(data_dir)  # the disk holds one data set at a time, then the checkpoints
        sizes.append((label, nbytes))
    return sizes


# ------------------------------------------------------------------ checkpoints


def make_state(state_bytes: int) -> dict:
    per_tensor = max(1, state_bytes // TENSORS_IN_STATE // 4)
    return {"step": 1, "model": {f"layer{i}.weight": torch.randn(per_tensor) for i in range(TENSORS_IN_STATE)}}


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


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def bench_checkpoints(work: Path, figures: Figures, repeat: int, state_bytes: int) -> int:
    state = make_state(state_bytes)
    tensors = list(state["model"].values())
    # The floors' and the restore's destinations, preallocated and touched, as a live state is.
    copies = [torch.zeros_like(t) for t in tensors]
    live = [torch.zeros_like(t) for t in tensors]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    root = str(work / "checkpoints")
    checkpointer = checkpoint.AsyncCheckpointer(root, keep=1)
    figures.add(PREPARE, timed(lambda: checkpointer.prepare(state)))
    raw_path = str(work / "raw.bin")
    # The raw floor writes and reads exactly the bytes of the checkpoint file (random floats: a
    # storage layer that compresses or deduplicates helps neither side); they are read from the
    # first save's file, which is why each step's first run is the save.
    blob: list[memoryview] = []

    def save(step: int) -> None:
        started = time.perf_counter()
        blocked = checkpointer.save(step, state)
        done = checkpointer.wait()
        figures.add("checkpoint save (blocked + background)", time.perf_counter() - started)
        figures.add("loop blocked by save", blocked)
        figures.add(FIRST_SAVE if step == 1 else LATER_SAVES, blocked)
        if not blob:
            assert done is not None
            with open(os.path.join(done.path, checkpoint.shard_name(0)), "rb") as f:
                blob.append(memoryview(bytearray(f.read())))

    # Writes first, then reads, then cold reads, each set in rotating order: what ran just before
    # (a cold read, a 1 GiB write) slows the next operation on a shared virtual disk, and must
    # not always fall on the same side.
    for step in range(1, repeat + 1):
        figures.add("host memory copy of the state", timed(lambda: [c.copy_(t) for c, t in zip(copies, tensors, strict=True)]))
        runs = [
            lambda step=step: save(step),
            lambda: figures.add(RAW_WRITE_KEPT, timed(lambda: raw_write(raw_path, blob[0], keep_previous=True))),
            lambda: figures.add(RAW_WRITE_FREED, timed(lambda: raw_write(raw_path, blob[0], keep_previous=False))),
        ]
        shift = (step - 1) % 3
        for run in runs[shift:] + runs[:shift]:
            run()
    latest = checkpoint.latest_complete(root)
    assert latest is not None and latest.step == repeat
    state_path = os.path.join(latest.path, checkpoint.shard_name(0))
    read_buffer = bytearray(len(blob[0]))
    raw_read(raw_path, read_buffer)  # its pages touched, as the live state's are

    def restore() -> None:
        loaded = checkpoint.load(latest.path)
        for dst, src in zip(live, loaded["model"].values(), strict=True):
            dst.copy_(src)

    for cold in (False, True):
        kind = "cold" if cold else "warm"
        for attempt in range(repeat):
            runs = [(raw_path, f"raw read, {kind}", lambda: raw_read(raw_path, read_buffer)),
                    (state_path, f"checkpoint restore, {kind}", restore)]
            if not cold:
                runs.append((state_path, LOAD_ALONE, lambda: checkpoint.load(latest.path)))
            shift = attempt % len(runs)
            for path, name, read in runs[shift:] + runs[:shift]:
                if cold:
                    drop_cache(path)
                figures.add(name, timed(read))
    assert all(torch.equal(a, b) for a, b in zip(live, tensors, strict=True)), "the restore restored something else"
    return nbytes


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--state-mib", type=int, default=1024, help="checkpoint state size (default 1 GiB)")
    # 1 GiB per pass: a 256 MiB pass of 512 KiB chunks lasts ~15 ms, which measures the workers'
    # wake-up per epoch more than throughput; a training epoch reads far more.
    parser.add_argument("--data-mib", type=int, default=1024, help="data read per loader pass and chunk size")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    figures = Figures()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="trainer-bench-") as tmp:
        work = Path(tmp)
        sizes = bench_loader(work, figures, args.repeat, args.data_mib << 20)
        state_bytes = bench_checkpoints(work, figures, args.repeat, args.state_mib << 20)
    m = figures.median
    print(f"trainer I/O ({args.repeat} runs each; load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs)")
    for label, nbytes in sizes:
        print(figures.line(f"raw mmap, {label}", nbytes))
        print(figures.line(f"reader in one process, {label}", nbytes))
        print(figures.line(f"loader, {label}", nbytes))
        print(figures.line(f"loader first batch, {label}"))
    for name in ("host memory copy of the state", "loop blocked by save", FIRST_SAVE, LATER_SAVES, PREPARE,
                 RAW_WRITE_KEPT, RAW_WRITE_FREED,
                 "checkpoint save (blocked + background)", "raw read, warm", "checkpoint restore, warm", LOAD_ALONE,
                 "raw read, cold", "checkpoint restore, cold"):
        if name in figures.times:
            print(figures.line(name, None if name.startswith(("host", "loop", "prepare")) else state_bytes))
    print(f"ratios (project / raw, of the medians and of the minimums; {state_bytes / 2**30:.2f} GiB checkpoint)")
    # (name, top, bottom, goal): the ratio is top / bottom; for speeds the raw time is on top (so
    # the ratio is the project's speed over the floor's), for times the project's. A goal is
    # (">=", x) or ("<=", x), or None for a figure printed only to explain the others.
    pairs: list[tuple[str, str, str, tuple[str, float] | None]] = [
        (f"loader / raw mmap, {label}", f"raw mmap, {label}", f"loader, {label}", (">=", 0.8)) for label, _ in sizes]
    # Not a goal: how close the loader's reader alone comes to the floor (about 1, never much
    # above: the floor must stay the cheapest read of these bytes, or every ratio above flatters).
    pairs += [(f"reader in one process / raw, {label}", f"raw mmap, {label}", f"reader in one process, {label}", None)
              for label, _ in sizes]
    pairs += [
        ("save / raw fsync'd write", RAW_WRITE_KEPT, "checkpoint save (blocked + background)", (">=", 0.7)),
        ("save / raw write into freed blocks", RAW_WRITE_FREED, "checkpoint save (blocked + background)", None),
        ("restore / raw read, warm", "raw read, warm", "checkpoint restore, warm", (">=", 0.8)),
        ("restore / raw read, cold", "raw read, cold", "checkpoint restore, cold", None),
        ("load alone / raw read, warm", "raw read, warm", LOAD_ALONE, None),
        # Times, not throughputs: the project's figure on top, lower is better.
        ("loop blocked / host memory copy", "loop blocked by save", "host memory copy of the state", ("<=", 1.5)),
        ("first save / later saves, blocked", FIRST_SAVE, LATER_SAVES, ("<=", 1.5)),
    ]
    times = figures.times
    for name, top, bottom, goal in pairs:
        goal_text = f"(goal {goal[0]} {goal[1]})" if goal else ""
        if bottom not in times:
            print(f"  {name:<38} n/a (needs --repeat >= 2)   {goal_text}".rstrip())
            continue
        ratio = m(top) / m(bottom)
        verdict = ""
        if goal:
            verdict = "met" if (ratio >= goal[1] if goal[0] == ">=" else ratio <= goal[1]) else "not met"
        print(f"  {name:<38} {ratio:6.2f}x median  {min(times[top]) / min(times[bottom]):6.2f}x min   "
              f"{goal_text} {verdict}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
