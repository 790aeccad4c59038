"""Atomic, verifiable checkpoints shared by the launcher and any trainer.

Layout under TRAIN_CHECKPOINT_DIR (a shared file system for multi-node jobs)::

    step-000000120/
        rank-00000.pt             written by each rank that holds state
        rank-00000.pt.meta.json   {"bytes": N, "sha256": "..."} of that file
        COMPLETE                  JSON marker, written LAST by rank 0

Protocol (`save`): rank 0 clears a stale directory for the step, every writer
writes its file to a temporary name in the same directory, fsyncs it, renames
it and fsyncs the directory; after a barrier rank 0 writes the marker the same
way (listing every file with its size and sha256), fsyncs the parent directory,
and prunes old checkpoints (marker removed first, so a half-deleted checkpoint
is never taken for a complete one). A final barrier keeps every rank alive
until the marker exists.

A checkpoint is *complete* when its marker parses, names the same step and
every file it lists exists with the recorded size (`inspect`, cheap, no torch:
that is what the launcher uses). Loading (`load_with_fallback`) additionally
checks the sha256 and that torch.load succeeds; on any failure it falls back
to the next older complete checkpoint.

Only the standard library is imported at module level; torch is imported
lazily so the launcher starts fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

PREFIX = "step-"
MARKER = "COMPLETE"
META_SUFFIX = ".meta.json"
FORMAT_VERSION = 1
_STEP_RE = re.compile(r"^step-(\d{1,12})$")


class CheckpointCorruptError(Exception):
    """A checkpoint file does not match its marker or cannot be loaded."""


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    path: str
    complete: bool
    reason: str = ""
    marker: dict = field(default_factory=dict, compare=False, repr=False)


def step_dir_name(step: int) -> str:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return f"{PREFIX}{step:09d}"


def parse_step(name: str) -> int | None:
    """Step number of a checkpoint directory name, None for anything else."""
    m = _STEP_RE.match(name)
    return int(m.group(1)) if m else None


def shard_name(rank: int) -> str:
    return f"rank-{rank:05d}.pt"


# ---------------------------------------------------------------- durability


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(path: str) -> str:
    d, base = os.path.split(path)
    return os.path.join(d, f".{base}.tmp-{os.getpid()}-{time.monotonic_ns()}")


class _HashingWriter:
    """File-like wrapper counting and hashing what is written through it."""

    def __init__(self, f, hashing: bool):
        self._f = f
        self._h = hashlib.sha256() if hashing else None
        self.nbytes = 0

    def write(self, data) -> int:
        if self._h is not None:
            self._h.update(data)
        self.nbytes += len(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()

    def hexdigest(self) -> str | None:
        return self._h.hexdigest() if self._h is not None else None


def atomic_write(path: str, write: Callable[[BinaryIO], object], hashing: bool = True) -> dict:
    """Write via `write(fileobj)` to a temp file in the same directory, fsync,
    rename over `path`, fsync the directory. Returns {"bytes", "sha256"}."""
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            w = _HashingWriter(f, hashing)
            write(cast(BinaryIO, w))  # a file-like object: write() and flush()
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")
    return {"bytes": w.nbytes, "sha256": w.hexdigest()}


def atomic_write_bytes(path: str, data: bytes) -> dict:
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_json(path: str, obj) -> dict:
    data = (json.dumps(obj, sort_keys=True, indent=1) + "\n").encode()
    return atomic_write_bytes(path, data)


def atomic_torch_save(obj, path: str, hashing: bool = True) -> dict:
    import torch

    return atomic_write(path, lambda f: torch.save(obj, f), hashing=hashing)


# ----------------------------------------------------------------- discovery


def inspect(path: str) -> CheckpointInfo:
    """Structural completeness check (no torch, no hashing)."""
    step = parse_step(os.path.basename(os.path.normpath(path)))
    if step is None:
        return CheckpointInfo(-1, path, False, "not a checkpoint directory name")
    marker_path = os.path.join(path, MARKER)
    try:
        with open(marker_path, "rb") as f:
            marker = json.loads(f.read().decode())
    except FileNotFoundError:
        return CheckpointInfo(step, path, False, "no COMPLETE marker")
    except (OSError, ValueError) as e:
        return CheckpointInfo(step, path, False, f"unreadable marker: {e}")
    if not isinstance(marker, dict) or marker.get("step") != step:
        return CheckpointInfo(step, path, False, "marker does not name this step")
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        return CheckpointInfo(step, path, False, "marker lists no files")
    for name, meta in sorted(files.items()):
        if "/" in name or name.startswith("."):
            return CheckpointInfo(step, path, False, f"marker lists a bad name {name!r}")
        try:
            size = os.stat(os.path.join(path, name)).st_size
        except OSError:
            return CheckpointInfo(step, path, False, f"{name} is missing")
        want = meta.get("bytes") if isinstance(meta, dict) else None
        if size != want:
            return CheckpointInfo(step, path, False, f"{name} has {size} bytes, marker says {want}")
    return CheckpointInfo(step, path, True, "", marker)


def list_checkpoints(root: str) -> list[CheckpointInfo]:
    """All checkpoint directories under root, newest step first."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if parse_step(name) is None or not os.path.isdir(os.path.join(root, name)):
            continue
        out.append(inspect(os.path.join(root, name)))
    out.sort(key=lambda c: c.step, reverse=True)
    return out


def complete_checkpoints(root: str) -> list[CheckpointInfo]:
    return [c for c in list_checkpoints(root) if c.complete]


def latest_complete(root: str) -> CheckpointInfo | None:
    done = complete_checkpoints(root)
    return done[0] if done else None


# ---------------------------------------------------------------------- save


def _remove_checkpoint(path: str) -> None:
    marker = os.path.join(path, MARKER)
    try:
        os.unlink(marker)
        fsync_dir(path)
    except FileNotFoundError:
        pass
    shutil.rmtree(path, ignore_errors=True)


def prune(root: str, keep: int) -> list[str]:
    """Keep the newest `keep` complete checkpoints; remove older ones and stale
    incomplete directories older than the newest complete one."""
    if keep < 1:
        raise ValueError("keep must be >= 1")
    infos = list_checkpoints(root)
    complete = [c for c in infos if c.complete]
    if not complete:
        return []
    newest = complete[0].step
    kept = {c.path for c in complete[:keep]}
    removed = []
    for c in infos:
        if c.path in kept:
            continue
        if c.complete or c.step < newest:
            _remove_checkpoint(c.path)
            removed.append(c.path)
    if removed:
        fsync_dir(root)
    return removed


def _noop() -> None:
    return None


def save(
    root: str,
    step: int,
    state,
    *,
    rank: int = 0,
    world_size: int = 1,
    writes: bool | None = None,
    barrier: Callable[[], object] = _noop,
    keep: int = 3,
    meta: dict | None = None,
    hashing: bool = True,
) -> str:
    """Collective checkpoint save; every rank must call it with the same step.

    `writes` says whether this rank writes `state` (default: rank 0 only, right
    for replicated DDP state; pass True on every rank for sharded state).
    Returns the checkpoint directory.
    """
    if writes is None:
        writes = rank == 0
    path = os.path.join(root, step_dir_name(step))
    if rank == 0:
        os.makedirs(root, exist_ok=True)
        if os.path.exists(path):  # stale partial from an interrupted run
            _remove_checkpoint(path)
        os.makedirs(path)
        fsync_dir(root)
    barrier()
    if writes:
        name = shard_name(rank)
        info = atomic_torch_save(state, os.path.join(path, name), hashing=hashing)
        atomic_write_json(os.path.join(path, name + META_SUFFIX), info)
    barrier()
    if rank == 0:
        files = {}
        for entry in sorted(os.listdir(path)):
            if entry.endswith(META_SUFFIX) and not entry.startswith("."):
                with open(os.path.join(path, entry)) as f:
                    files[entry[: -len(META_SUFFIX)]] = json.load(f)
        marker = {
            "format": FORMAT_VERSION,
            "step": step,
            "world_size": world_size,
            "files": files,
            "created_unix": round(time.time(), 3),
            **(meta or {}),
        }
        atomic_write_json(os.path.join(path, MARKER), marker)
        fsync_dir(root)
        prune(root, keep)
    barrier()
    return path


# ---------------------------------------------------------------------- load


def verify_file(path: str, meta: dict) -> None:
    """Check size and (if recorded) sha256 of one checkpoint file."""
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise CheckpointCorruptError(f"{path}: {e}") from e
    if size != meta.get("bytes"):
        raise CheckpointCorruptError(f"{path}: {size} bytes, marker says {meta.get('bytes')}")
    want = meta.get("sha256")
    if want:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        if h.hexdigest() != want:
            raise CheckpointCorruptError(f"{path}: sha256 mismatch")


def load(path: str, rank: int = 0, map_location="cpu", verify: bool = True) -> dict[str, Any]:
    """Load one rank's file of a complete checkpoint; CheckpointCorruptError on failure."""
    info = inspect(path)
    if not info.complete:
        raise CheckpointCorruptError(f"{path}: incomplete ({info.reason})")
    name = shard_name(rank)
    files = info.marker["files"]
    if name not in files:
        raise CheckpointCorruptError(f"{path}: no file for rank {rank}")
    fpath = os.path.join(path, name)
    if verify:
        verify_file(fpath, files[name])
    import torch

    try:
        return torch.load(fpath, map_location=map_location, weights_only=False)
    except Exception as e:  # torch raises a variety of types on bad archives
        raise CheckpointCorruptError(f"{fpath}: torch.load failed: {e}") from e


def candidates(root: str, preferred: str | None) -> list[str]:
    """Checkpoint paths to try, newest first, starting at `preferred` if given."""
    paths = [c.path for c in complete_checkpoints(root)]
    if preferred:
        pref = os.path.normpath(preferred)
        pref_step = parse_step(os.path.basename(pref))
        older = [
            p for p in paths
            if pref_step is None or (parse_step(os.path.basename(p)) or 0) < pref_step
        ]
        return [pref, *older]
    return paths


def load_with_fallback(
    root: str,
    preferred: str | None,
    loader: Callable[[str], dict[str, Any]],
    on_skip: Callable[[str, Exception], None] | None = None,
) -> tuple[str | None, dict[str, Any] | None]:
    """Try `loader(path)` on `preferred`, then older complete checkpoints.

    Returns (path, loaded) of the first that loads, or (None, None)."""
    for path in candidates(root, preferred):
        try:
            return path, loader(path)
        except CheckpointCorruptError as e:
            if on_skip is not None:
                on_skip(path, e)
    return None, None


def describe(infos: Iterable[CheckpointInfo]) -> list[dict]:
    return [
        {"step": c.step, "path": c.path, "complete": c.complete, "reason": c.reason}
        for c in infos
    ]
