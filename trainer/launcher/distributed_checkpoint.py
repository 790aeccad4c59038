"""Sharded checkpoints through PyTorch Distributed Checkpoint (DCP), under the same protocol.

For state that is itself sharded (FSDP2 / DTensor, tensor parallel), where each rank holds a
different piece and a resume may run on a different number of ranks: DCP plans which rank
writes what (replicated tensors once, shards by their owners, all ranks in parallel), reshards
on load, and `async_save` stops the loop only while it stages the state in host memory.

What this module adds is the launcher's protocol (checkpoint.py): a fresh `step-NNNNNNNNN`
directory, every file recorded with its size and XXH3-128 digest (computed while DCP writes it,
one pass), the `COMPLETE` marker written last by rank 0 after every rank has agreed, pruning,
and on load a verified, collective fallback: every rank checks a share of the files, and if any
rank finds damage, all of them skip that checkpoint together.

    checkpointer = DistributedCheckpointer(root, rank=r, world_size=w, process_group=gloo_group)
    checkpointer.save(step, {"model": model_sd, "optim": optim_sd})   # returns the blocked seconds
    ...
    checkpointer.poll()  /  checkpointer.wait()                       # as AsyncCheckpointer
    path = load_newest(root, state_dict, process_group=gloo_group)    # in place, like dcp.load

`process_group` must have a CPU backend (gloo): async_save's collectives run on its thread, and
that group must not be the training loop's. Multi-rank DCP gathers plans with numpy.
Speed: DCP writes each tensor with torch.save and reads it back the same way. Measured once on
the 2-core development machine, 1 GiB in one process: save 0.62x a raw fsync'd write (without
hashing), restore 0.11x a warm raw read; the project's own state files (state_file.py, what
`make bench` measures) are the faster choice for per-rank state.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Generator
from typing import Any

import torch
import torch.distributed as dist
import xxhash

# The defining modules of torch.distributed.checkpoint's public names (its __init__ re-exports
# them with a star import, which type checkers do not follow).
from torch.distributed.checkpoint.filesystem import FileSystem, FileSystemWriter
from torch.distributed.checkpoint.state_dict_loader import load as dcp_load
from torch.distributed.checkpoint.state_dict_saver import async_save

from . import checkpoint
from .checkpoint import META_SUFFIX, BackgroundCommits, CheckpointCorruptError, atomic_write_json, step_dir_name
from .state_file import DIGEST


def group_agree(process_group: dist.ProcessGroup | None) -> Callable[[bool], bool]:
    """`agree(ok)`: True iff every rank of `process_group` says ok (all-reduce MIN)."""

    def agree(ok: bool) -> bool:
        if process_group is None and not dist.is_initialized():
            return ok
        flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=process_group)
        return bool(flag.item())

    return agree


class _HashingStream:
    """A writable stream that counts and hashes what goes through it; the rest is the file's."""

    def __init__(self, stream: Any):
        self._stream = stream
        self._digest = xxhash.xxh3_128()
        self.nbytes = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self._digest.update(view)
        self.nbytes += len(view)
        return self._stream.write(view)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()

    def __getattr__(self, name: str) -> Any:  # tell, flush, fileno, close, ...
        return getattr(self._stream, name)


class _RecordingFileSystem(FileSystem):
    """DCP's file system, recording `<file>.meta.json` ({"bytes", "xxh3_128"}) for every file it
    writes, hashed while written, so the marker can list them without reading anything back."""

    @contextlib.contextmanager
    def create_stream(self, path: str | os.PathLike, mode: str) -> Generator[Any, None, None]:
        if "w" not in mode:
            with super().create_stream(path, mode) as stream:
                yield stream
            return
        with super().create_stream(path, mode) as stream:
            recorder = _HashingStream(stream)
            yield recorder
        atomic_write_json(str(path) + META_SUFFIX, {"bytes": recorder.nbytes, DIGEST: recorder.hexdigest()})

    def rename(self, path: str | os.PathLike, new_path: str | os.PathLike) -> None:
        super().rename(path, new_path)  # .metadata.tmp -> .metadata
        os.replace(str(path) + META_SUFFIX, str(new_path) + META_SUFFIX)


class _Writer(FileSystemWriter):
    def __init__(self, path: str):
        # One file per rank, fsynced. With a GPU the staging buffers in (pinned) host memory are kept
        # from save to save, so a save does not allocate and page-fault a fresh copy each time; DCP
        # pins cached buffers, which needs CUDA, so on CPU every save stages a fresh copy.
        super().__init__(path, single_file_per_rank=True, sync_files=True, thread_count=1, overwrite=True,
                         cache_staged_state_dict=torch.cuda.is_available())
        self.fs = _RecordingFileSystem()


class DistributedCheckpointer(BackgroundCommits):
    """`save(step, state_dict)` on every rank at the same step; see the module docstring."""

    def __init__(self, root: str, *, rank: int, world_size: int, process_group: dist.ProcessGroup | None,
                 keep: int = 3):
        super().__init__(root, rank=rank, world_size=world_size, agree=group_agree(process_group), keep=keep)
        self.process_group = process_group
        self._writer = _Writer(root)  # one writer, reused: it owns the cached staging buffers

    def save(self, step: int, state_dict: dict[str, Any], meta: dict | None = None) -> float:
        """Stage `state_dict` in host memory (what the loop waits for) and commit it in the
        background; returns the seconds this blocked."""
        import time

        started = time.monotonic()
        self._join()
        self._raise_error()
        path = os.path.join(self.root, step_dir_name(step))
        # Nothing else uses the group now (the previous save is done): agree here, before DCP
        # writes anything into the directory.
        self._step(step, "preparing the directory", (lambda: self._prepare(path)) if self.rank == 0 else None)
        future = async_save(state_dict, checkpoint_id=path, storage_writer=self._writer,
                                process_group=self.process_group)
        copied = time.monotonic()

        def commit() -> tuple[str, int]:
            self._step(step, "writing the shards", future.result)  # pyright: ignore[reportAttributeAccessIssue]
            self._step(step, "writing the marker",
                       (lambda: self._commit_marker(path, step, dict(meta or {}))) if self.rank == 0 else None)
            return path, _bytes_written_by(path, self.rank)

        self._start(step, commit, copied - started, copied)
        return copied - started


def _bytes_written_by(path: str, rank: int) -> int:
    total = 0
    for entry in os.listdir(path):
        if entry.startswith(f"__{rank}_") and not entry.endswith(META_SUFFIX):
            total += os.path.getsize(os.path.join(path, entry))
    return total


def load(path: str, state_dict: dict[str, Any], *, process_group: dist.ProcessGroup | None) -> None:
    """Load a complete checkpoint into `state_dict` in place (collective). Every rank verifies
    its share of the files first; CheckpointCorruptError on every rank if any file is damaged."""
    agree = group_agree(process_group)
    rank = dist.get_rank(process_group) if dist.is_initialized() else 0
    world = dist.get_world_size(process_group) if dist.is_initialized() else 1
    info = checkpoint.inspect(path)
    problem = None if info.complete else f"{path}: incomplete ({info.reason})"
    if problem is None:
        files = info.marker["files"]
        for name in sorted(files)[rank::world]:
            try:
                checkpoint.verify_file(os.path.join(path, name), files[name])
            except CheckpointCorruptError as e:
                problem = str(e)
                break
    if not agree(problem is None):
        raise CheckpointCorruptError(problem or f"{path}: another rank found a damaged file")
    dcp_load(state_dict, checkpoint_id=path, process_group=process_group)


def load_newest(root: str, state_dict: dict[str, Any], *, process_group: dist.ProcessGroup | None,
                on_skip: Callable[[str, Exception], None] | None = None) -> str | None:
    """Load the newest complete checkpoint that verifies on every rank; None if there is none.
    Rank 0 lists the candidates and the others follow it, so every rank tries the same ones."""
    candidates = [c.path for c in checkpoint.complete_checkpoints(root)]
    if dist.is_initialized():
        shared = [candidates]
        dist.broadcast_object_list(shared, src=0, group=process_group)
        candidates = shared[0]
    for path in candidates:
        try:
            load(path, state_dict, process_group=process_group)
            return path
        except CheckpointCorruptError as e:
            if on_skip is not None:
                on_skip(path, e)
    return None
