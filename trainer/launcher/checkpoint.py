# Over 600 lines: the checkpoint layout's writer, pruner, background committer and reader, sharing its atomic writes and digests.
"""Atomic, verifiable checkpoints shared by the launcher and any trainer.

Layout under TRAIN_CHECKPOINT_DIR (a shared file system for multi-node jobs)::

    step-000000120/
        rank-00000.safetensors        written by each rank that holds state (state_file.py)
        COMPLETE                      JSON marker, written LAST by rank 0: every file with its
                                      {"bytes": N, "xxh3_128": "..."}

Protocol: rank 0 clears a stale directory for the step; every writer writes its file to a
temporary name in the same directory, fsyncs it, renames it and fsyncs the directory; once every
rank agrees that its file is there, every rank sends rank 0 the {name: size and digest} of the
files it wrote (an all-gather), rank 0 checks that each of them is there with that size and only
then writes the marker the same way, fsyncs the parent directory, and prunes old checkpoints
in the background, off the save's critical path (marker removed first, so a half-deleted
checkpoint is never taken for a complete one; only after the new marker is durable, so a prune
still running or killed leaves the newest complete checkpoint in place). A last agreement keeps
every rank alive until the marker exists. (Rank 0 never lists the directory to
learn what was written: on NFS, EFS included, a listing may be stale and leave a rank out.)

`AsyncCheckpointer` runs that protocol so that the training loop waits only for the copy of
the state to host memory (`state_file.Stager`); writing, hashing (during the write, one pass),
the renames and the marker happen on a background thread. Its collectives go through a
`Collective` (`collective.ProcessGroupCollective`), which must use a process group of its own
(e.g. a gloo group made for checkpoints) because they run concurrently with the training loop's
collectives. `save` is the same protocol, waited for.

Whose checkpoint: the marker names the run that wrote it (`"run"`: TRAIN_RUN_ID, `<stack>/<job>`,
set by the platform). A checkpoint whose marker names another run is never selected, superseded,
cleared or pruned by this one (`CheckpointInfo.foreign`): runs of one environment's regions each
have a directory of their own, and this keeps it so whatever replication brings in. A marker
without a run (written before markers named one, or by a run without TRAIN_RUN_ID) is this run's.

A checkpoint is *complete* when its marker parses, names the same step and every file it lists
exists with the recorded size (`inspect`, cheap, no torch: that is what the launcher uses).
Loading (`load_with_fallback`) additionally checks the digest; on any failure it falls back to
the next older complete checkpoint, and one whose digest does not match stops being complete
(`reject`: its marker is renamed `COMPLETE.rejected`).

File formats, named by the marker's "format": 3 (now) is a safetensors file per rank, the state's
non-tensor rest as JSON in its header: loading it parses JSON and copies bytes, and never runs
code from the file (state_file.py). Formats 1 (torch.save, until 2026-11-30) and 2 (a pickled
skeleton, until 2026-12-01) are no longer read: no image that wrote them was ever built, so no
run can hold one (docs/trainer-io-and-storage.md, "Older checkpoints"). Their markers load as
CheckpointCorruptError, and loading falls back to an older checkpoint.

Only the standard library is imported at module level; torch is imported lazily so the launcher
starts fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Protocol, cast

PREFIX = "step-"
MARKER = "COMPLETE"
REJECTED_MARKER = "COMPLETE.rejected"  # the marker of a checkpoint that failed its digest (reject)
SUPERSEDED_MARKER = "COMPLETE.superseded"  # the marker of a checkpoint of a line the run left (prune)
RUN_ID_ENV = "TRAIN_RUN_ID"  # the run this process belongs to; its markers name it (module docstring)
FORMAT_VERSION = 3  # safetensors files (state_file.py)
# Checkpoint directory names: the launcher's own and DCP's `step-N`, and the names frameworks
# choose themselves: Hugging Face Trainer's `checkpoint-N` (transformers.trainer_utils
# PREFIX_CHECKPOINT_DIR) and Accelerate's `checkpoint_N` (its automatic checkpoint naming).
_STEP_RE = re.compile(r"(?:step-|checkpoint-|checkpoint_)(\d{1,12})")


class CheckpointCorruptError(Exception):
    """A checkpoint file does not match its marker or cannot be loaded."""

    live_state_overwritten = False
    """Set when some of the checkpoint's bytes had been read into the live state (`load(...,
    into=...)`) before the failure: it is neither that checkpoint nor what it was before."""


class CheckpointDigestError(CheckpointCorruptError):
    """A checkpoint file's bytes do not match the digest in its marker: it will never load."""


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    path: str
    complete: bool
    reason: str = ""
    marker: dict = field(default_factory=dict, compare=False, repr=False)
    foreign: bool = False
    """Its marker names another run: never this run's to select, supersede, clear or prune."""


def current_run() -> str:
    """This process's run (TRAIN_RUN_ID), "" when the platform set none."""
    return os.environ.get(RUN_ID_ENV, "").strip()


def run_fields() -> dict[str, str]:
    """What a marker records of the run that writes it (nothing without TRAIN_RUN_ID)."""
    run = current_run()
    return {"run": run} if run else {}


def step_dir_name(step: int) -> str:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return f"{PREFIX}{step:09d}"


def parse_step(name: str) -> int | None:
    """Step number of a checkpoint directory name, None for anything else."""
    m = _STEP_RE.fullmatch(name)
    return int(m.group(1)) if m else None


def shard_name(rank: int) -> str:
    return f"rank-{rank:05d}.safetensors"


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

    def __init__(self, f):
        self._f = f
        self._h = hashlib.sha256()
        self.nbytes = 0

    def write(self, data) -> int:
        self._h.update(data)
        self.nbytes += len(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def atomic_write_fd(path: str, fill: Callable[[int], dict]) -> dict:
    """Fill a temp file in the same directory through its descriptor (`fill` writes and fsyncs),
    rename it over `path`, fsync the directory. Returns what `fill` returned."""
    tmp = _tmp_name(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            info = fill(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")
    return info


def atomic_write(path: str, write: Callable[[BinaryIO], object]) -> dict:
    """Write via `write(fileobj)` to a temp file in the same directory, fsync,
    rename over `path`, fsync the directory. Returns {"bytes", "sha256"}."""

    def fill(fd: int) -> dict:
        with open(fd, "wb", closefd=False) as f:
            w = _HashingWriter(f)
            write(cast(BinaryIO, w))  # a file-like object: write() and flush()
            f.flush()
            os.fsync(fd)
        return {"bytes": w.nbytes, "sha256": w.hexdigest()}

    return atomic_write_fd(path, fill)


def atomic_write_bytes(path: str, data: bytes) -> dict:
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_json(path: str, obj) -> dict:
    data = (json.dumps(obj, sort_keys=True, indent=1) + "\n").encode()
    return atomic_write_bytes(path, data)


# ----------------------------------------------------------------- discovery

# PyTorch Distributed Checkpoint's own index file (distributed_checkpoint.py); any other name
# starting with a dot is a temporary file.
DCP_METADATA = ".metadata"


def _listable(name: str) -> bool:
    """A name a marker may list: a relative path inside the checkpoint directory (frameworks
    write subdirectories, e.g. FSDP's `pytorch_model_fsdp_0/`), none of whose parts is hidden
    (temporary files) except DCP's index file."""
    parts = name.split("/")
    return all(parts) and not name.startswith("/") and all(
        not p.startswith(".") or (p == DCP_METADATA and i == len(parts) - 1) for i, p in enumerate(parts))



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
        if os.path.exists(os.path.join(path, REJECTED_MARKER)):
            return CheckpointInfo(step, path, False, "rejected at load: a file did not match its digest")
        if os.path.exists(os.path.join(path, SUPERSEDED_MARKER)):
            return CheckpointInfo(step, path, False, "superseded: the run resumed from an older checkpoint and saved past it")
        return CheckpointInfo(step, path, False, "no COMPLETE marker")
    except (OSError, ValueError) as e:
        return CheckpointInfo(step, path, False, f"unreadable marker: {e}")
    if not isinstance(marker, dict) or marker.get("step") != step:
        return CheckpointInfo(step, path, False, "marker does not name this step")
    run, mine = marker.get("run"), current_run()
    if run and mine and run != mine:
        return CheckpointInfo(step, path, False, f"written by another run ({run!r}, this is {mine!r})", marker,
                              foreign=True)
    files = marker.get("files")
    if not isinstance(files, dict) or not files:
        return CheckpointInfo(step, path, False, "marker lists no files")
    for name, meta in sorted(files.items()):
        if not _listable(name):
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
    paths = [os.path.join(root, name) for name in names if parse_step(name) is not None]
    return sorted((inspect(p) for p in paths if os.path.isdir(p)), key=lambda c: c.step, reverse=True)


def complete_checkpoints(root: str) -> list[CheckpointInfo]:
    return [c for c in list_checkpoints(root) if c.complete]


def latest_complete(root: str) -> CheckpointInfo | None:
    done = complete_checkpoints(root)
    return done[0] if done else None


# ---------------------------------------------------------------------- save


def _remove_checkpoint(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(path, MARKER))
        fsync_dir(path)
    shutil.rmtree(path, ignore_errors=True)


def prune(root: str, keep: int, committed: int | None = None) -> list[str]:
    """Keep the newest `keep` complete checkpoints; remove older ones and stale
    incomplete directories older than the newest complete one (rejected ones included).

    `committed`: the step whose marker the caller just wrote. It counts as the newest, whatever
    else is there: a complete checkpoint of a later step belongs to a line the run left when it
    resumed from an older checkpoint (RESUME_FROM, or a fallback past one that did not load), and
    is superseded (its marker renamed, its files kept), so that a restart resumes this run, and
    this run's checkpoints are not pruned as older than it; its directory goes once the run's own
    line passes its step. Incomplete directories of later steps are left alone (the next save may
    be writing one). Another run's checkpoints (`foreign`) are never touched. Returns the
    directories removed."""
    if keep < 1:
        raise ValueError("keep must be >= 1")
    infos = [c for c in list_checkpoints(root) if not c.foreign]
    if committed is not None:
        for c in infos:
            if c.complete and c.step > committed:
                _supersede(c.path)
        infos = [c for c in infos if c.step <= committed]
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


def refuse_foreign(path: str) -> None:
    """CheckpointWriteError when `path` holds another run's checkpoint: a save never clears it."""
    info = inspect(path)
    if info.foreign:
        raise CheckpointWriteError(f"{path}: {info.reason}; two runs share this checkpoint directory "
                                   "(give each run its own TRAIN_CHECKPOINT_DIR)")


def _supersede(path: str) -> None:
    try:
        os.replace(os.path.join(path, MARKER), os.path.join(path, SUPERSEDED_MARKER))
    except FileNotFoundError:
        return
    fsync_dir(path)


class Collective(Protocol):
    """The collectives the protocol runs between its steps, on a process group of its own."""

    def agree(self, ok: bool) -> bool:
        """True iff every rank passed True (an all-reduce MIN)."""
        ...

    def all_gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank."""
        ...


class _Solo:
    """The collectives of a single process."""

    def agree(self, ok: bool) -> bool:
        return ok

    def all_gather(self, value: Any) -> list[Any]:
        return [value]


SOLO: Collective = _Solo()


class CheckpointWriteError(Exception):
    """A background save failed on this rank or another; the newest complete checkpoint is
    still the previous one."""


def run_agreed(collective: Collective, what: str, action: Callable[[], object] | None) -> None:
    """Run `action` (if this rank has one), then agree with every rank that it worked there;
    CheckpointWriteError naming `what` and where it failed otherwise."""
    error = None
    if action is not None:
        try:
            action()
        except Exception as e:  # reported below, after every rank has answered
            error = e
    if not collective.agree(error is None):
        where = f"on this rank: {error}" if error is not None else "on another rank"
        raise CheckpointWriteError(f"{what} failed {where}") from error


@dataclass(frozen=True)
class SavedCheckpoint:
    """A committed checkpoint, as this rank saw it."""

    step: int
    path: str
    nbytes: int
    """Bytes this rank wrote (0 for a rank that holds no state)."""
    blocked_s: float
    """How long `save` stopped the caller: the copy to host memory (and any wait for the
    previous save)."""
    write_s: float
    """From the end of the copy until the marker existed on every rank."""
    total_bytes: int = 0
    """Bytes every rank wrote together: the whole checkpoint (what the marker lists)."""


class BackgroundCommits:
    """What every asynchronous checkpointer shares: one save in flight on a thread of its own,
    its outcome handed to the training loop by `poll()`/`wait()`, collective agreement between
    the protocol's steps, and the marker written from what every writer reports."""

    def __init__(self, root: str, *, rank: int, world_size: int, collective: Collective, keep: int):
        self.root, self.rank, self.world_size, self.keep = root, rank, world_size, keep
        self._collective = collective
        self._thread: threading.Thread | None = None
        self._done: SavedCheckpoint | None = None
        self._error: BaseException | None = None
        self._committed_bytes = 0
        self._pruner: threading.Thread | None = None
        self.prune_error: OSError | None = None
        """The last background prune's failure, if any: old checkpoints stay, nothing else is lost."""

    def poll(self) -> SavedCheckpoint | None:
        """The checkpoint committed since the last call, once; raises CheckpointWriteError if the
        save in the background failed."""
        if self._thread is not None and not self._thread.is_alive():
            self._join()
        self._raise_error()
        done, self._done = self._done, None
        return done

    def wait(self) -> SavedCheckpoint | None:
        """Block until nothing is in flight, then `poll()`."""
        self._join()
        return self.poll()

    def close(self) -> SavedCheckpoint | None:
        """`wait()`, then for the background prune of old checkpoints: call it before exiting."""
        done = self.wait()
        self._join_pruner()
        return done

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _join_pruner(self) -> None:
        pruner, self._pruner = self._pruner, None
        if pruner is not None:
            pruner.join()

    def take_prune_error(self) -> OSError | None:
        """The last background prune's failure, once (the trainer reports it; old checkpoints stay)."""
        error, self.prune_error = self.prune_error, None
        return error

    def _prune_in_background(self, step: int) -> None:
        """Rank 0, once the new marker and its directory entry are durable: prune on a thread of
        its own, so that a save's time (and `wait()`) does not include deleting the previous
        checkpoint (0.22-0.26 s of a 0.93 s save of 1 GiB on the 2-core development VM). One prune at a time. Not a
        daemon thread: an exiting interpreter finishes it (and `close()` joins it); a process
        killed while it runs leaves at worst a checkpoint without its marker, which the next
        prune removes."""
        self._join_pruner()

        def run() -> None:
            try:
                prune(self.root, self.keep, committed=step)
            except OSError as e:
                self.prune_error = e

        self._pruner = threading.Thread(target=run, name="checkpoint-prune")
        self._pruner.start()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise CheckpointWriteError(str(error)) from error

    def _start(self, step: int, commit: Callable[[], tuple[str, int]], blocked_s: float, copied: float) -> None:
        def run() -> None:
            try:
                path, nbytes = commit()
                self._done = SavedCheckpoint(step, path, nbytes, blocked_s, time.monotonic() - copied,
                                             self._committed_bytes)
            except BaseException as e:  # handed to the training loop by poll()/wait()
                self._error = e

        self._thread = threading.Thread(target=run, name=f"checkpoint-{step}")
        self._thread.start()

    def _step(self, step: int, what: str, action: Callable[[], object] | None) -> None:
        """Run `action` (if this rank has one), then agree with every rank that it worked there."""
        run_agreed(self._collective, f"step {step}: {what}", action)

    def _prepare(self, path: str) -> None:
        """Rank 0: a fresh, empty directory for the step (a stale partial one is removed)."""
        os.makedirs(self.root, exist_ok=True)
        if os.path.exists(path):  # stale partial from an interrupted run
            refuse_foreign(path)
            _remove_checkpoint(path)
        os.makedirs(path)
        fsync_dir(self.root)

    def _commit(self, path: str, step: int, written: dict[str, dict], meta: dict) -> None:
        """Every rank, once each has written its files (`written`: {name: {"bytes", digest}}):
        rank 0 gathers every rank's report, checks that each file is there with its size, and
        only then writes the marker, last; then prunes. Agreed, like every step."""
        reports = self._collective.all_gather(written)
        self._committed_bytes = sum(meta["bytes"] for report in reports for meta in report.values())
        commit = (lambda: self._commit_marker(path, step, reports, meta)) if self.rank == 0 else None
        self._step(step, "writing the marker", commit)

    def _commit_marker(self, path: str, step: int, reports: list[dict[str, dict]], meta: dict) -> None:
        files = expected_files(path, reports)
        # The previous save's prune first: run while this marker appears, it would take this
        # checkpoint for one of a later step than it committed, left behind (prune's `committed`).
        self._join_pruner()
        atomic_write_json(os.path.join(path, MARKER), {
            "format": FORMAT_VERSION,
            "step": step,
            "world_size": self.world_size,
            "files": files,
            "created_unix": round(time.time(), 3),
            **meta,
            **run_fields(),  # last: a caller's meta never names another run
        })
        fsync_dir(self.root)
        self._prune_in_background(step)


def expected_files(path: str, reports: list[dict[str, dict]]) -> dict[str, dict]:
    """The files every rank reports it wrote into `path`, merged; CheckpointWriteError unless
    each is a plain name reported once and is there with the reported size."""
    files: dict[str, dict] = {}
    for rank, report in enumerate(reports):
        for name, meta in report.items():
            if not _listable(name) or name in files:
                raise CheckpointWriteError(f"rank {rank} reports {name!r}: not a file name, or reported twice")
            files[name] = meta
    if not files:
        raise CheckpointWriteError(f"{path}: no rank reports a file")
    for name, meta in sorted(files.items()):
        try:
            size = os.stat(os.path.join(path, name)).st_size
        except OSError as e:
            raise CheckpointWriteError(f"{path}: {name} is missing ({e.strerror})") from e
        if size != meta.get("bytes"):
            raise CheckpointWriteError(f"{path}: {name} has {size} bytes, its writer wrote {meta.get('bytes')}")
    return files


class AsyncCheckpointer(BackgroundCommits):
    """Collective checkpoints that stop the training loop only for the copy to host memory.

    Every rank calls `save(step, state)` at the same step. `writes` says whether this rank writes
    its `state` (default: rank 0 only; True on every rank for sharded state, or for replicated DDP
    state split with replicated.rank_share: each rank writes its own file, all in parallel). `collective` (needed when
    world_size > 1: `collective.checkpoint_collective`) runs on the background thread, over a
    process group of its own.

    `poll()` returns each committed checkpoint once (None until then) and raises
    CheckpointWriteError if a background save failed; `wait()` blocks until nothing is in
    flight. Call `wait()` before the process group is destroyed, and `close()` (which also waits
    for the background prune of old checkpoints) before exiting.
    """

    def __init__(self, root: str, *, rank: int = 0, world_size: int = 1, writes: bool | None = None,
                 collective: Collective = SOLO, keep: int = 3, keep_while_writing: int | None = None):
        from . import state_file

        super().__init__(root, rank=rank, world_size=world_size, collective=collective, keep=keep)
        self.writes = rank == 0 if writes is None else writes
        self._stager = state_file.Stager()
        self.keep_while_writing = keep_while_writing
        """With it, rank 0 prunes to this many complete checkpoints before each write (on the writer's
        thread), so the root holds at most one more, the one being written: the memory tier's bound on
        its emptyDir (launcher.memory_tier keeps `keep` - 1 while writing)."""

    def prepare(self, state: Any) -> None:
        """Stage for `state` before the first save (call it before step 1, with a state whose
        tensors have the sizes the first save's will have): the host buffer is allocated and
        its pages touched here, not in the first `save`, which then blocks the loop no longer
        than later ones. A state that a save would refuse is refused here (TypeError). Does
        nothing on a rank that writes nothing."""
        if self.rank == 0:
            os.makedirs(self.root, exist_ok=True)  # the first save then only adds its step's directory
        if self.writes:
            # No wait for a save in flight: its snapshot keeps the buffer it writes from alive.
            self._stager.prepare(state)

    def save(self, step: int, state: Any, meta: dict | None = None) -> float:
        """Snapshot `state` and commit it in the background; returns the seconds this blocked."""
        started = time.monotonic()
        self._join()  # its buffer is about to be reused
        self._raise_error()
        snapshot = self._stager.snapshot(state) if self.writes else None
        copied = time.monotonic()
        self._start(step, lambda: self._write(step, snapshot, dict(meta or {})), copied - started, copied)
        return copied - started

    def _write(self, step: int, snapshot, meta: dict) -> tuple[str, int]:
        from . import state_file

        path = os.path.join(self.root, step_dir_name(step))
        written: dict[str, dict] = {}

        def write_file() -> None:
            name = shard_name(self.rank)
            written[name] = atomic_write_fd(os.path.join(path, name), lambda fd: state_file.write_snapshot(fd, snapshot))

        self._step(step, "preparing the directory", (lambda: self._make_room(path)) if self.rank == 0 else None)
        self._step(step, "writing a rank's file", write_file if snapshot is not None else None)
        self._commit(path, step, written, meta)
        return path, sum(m["bytes"] for m in written.values())

    def _make_room(self, path: str) -> None:
        if self.keep_while_writing is not None:
            self._join_pruner()  # the last commit's prune, which keeps `keep`
            prune(self.root, self.keep_while_writing)
        self._prepare(path)


def save(root: str, step: int, state: Any, *, rank: int = 0, world_size: int = 1, writes: bool | None = None,
         collective: Collective = SOLO, keep: int = 3, meta: dict | None = None) -> str:
    """The same collective save, waited for; returns the checkpoint directory."""
    checkpointer = AsyncCheckpointer(root, rank=rank, world_size=world_size, writes=writes, collective=collective,
                                     keep=keep)
    checkpointer.save(step, state, meta)
    return checkpointer.close().path  # pyright: ignore[reportOptionalMemberAccess]  # wait() raises on failure


# ---------------------------------------------------------------------- load


def verify_file(path: str, meta: dict) -> None:
    """Check size and the recorded digest (xxh3_128) of one file."""
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise CheckpointCorruptError(f"{path}: {e}") from e
    if size != meta.get("bytes"):
        raise CheckpointCorruptError(f"{path}: {size} bytes, marker says {meta.get('bytes')}")
    want = meta.get("xxh3_128")
    if not want:
        return
    import xxhash

    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    if h.hexdigest() != want:
        raise CheckpointDigestError(f"{path}: xxh3_128 mismatch")


def load(path: str, rank: int = 0, map_location="cpu", verify: bool = True, into: Any = None) -> Any:
    """Load one rank's file of a complete checkpoint; CheckpointCorruptError on failure.

    `verify` checks the file's digest (pass False only for a file another rank just verified).
    `into`: the live state (e.g. {"model": model.state_dict()}): the file's tensors are read
    straight into the live CPU tensors at the same places (state_file.read_state), which the
    state returned then holds; `restore_module` skips the copy for them."""
    info = inspect(path)
    if not info.complete:
        raise CheckpointCorruptError(f"{path}: incomplete ({info.reason})")
    version = info.marker.get("format", 1)
    if version != FORMAT_VERSION:
        # Formats 1 and 2 will never load again: rejected (load_with_fallback), as a digest
        # mismatch is. A newer format is left alone, for the newer image that wrote it.
        error = CheckpointDigestError if version in (1, 2) else CheckpointCorruptError
        raise error(f"{path}: format {version!r}, this launcher reads format {FORMAT_VERSION} only")
    name = shard_name(rank)
    files = info.marker["files"]
    if name not in files:
        raise CheckpointCorruptError(f"{path}: no file for rank {rank}")
    fpath = os.path.join(path, name)
    from . import state_file

    meta = files[name] if verify else {"bytes": files[name].get("bytes")}
    try:
        state = state_file.read_state(fpath, meta, into=into)
    except state_file.StateFileDigestError as e:
        error = CheckpointDigestError(str(e))  # it will never load: rejected by load_with_fallback
        error.live_state_overwritten = state_file.overwrote_live_state(e)
        raise error from e
    except (OSError, state_file.StateFileError) as e:
        error = CheckpointCorruptError(str(e))
        error.live_state_overwritten = state_file.overwrote_live_state(e)
        raise error from e
    if map_location not in (None, "cpu"):
        state = _to_device(state, map_location)
    return state


def restore_module(module: Any, saved: dict) -> None:
    """`module.load_state_dict(saved)`, unless `load(..., into={...: module.state_dict()})` read
    every tensor of it into the module's own memory already (the same keys, each the module's
    storage): then there is nothing left to copy, and a copy onto itself would cost a second pass. A
    module with load hooks (tied weights, recomputed buffers) gets its load_state_dict all the same."""
    live = module.state_dict()
    hooked = any(m._load_state_dict_pre_hooks or m._load_state_dict_post_hooks for m in module.modules())
    if not hooked and saved.keys() == live.keys() and all(
            getattr(saved[key], "data_ptr", None) and saved[key].data_ptr() == live[key].data_ptr()
            and saved[key].shape == live[key].shape for key in live):
        return
    module.load_state_dict(saved)


def load_optimizer_state(optimizer: Any, saved: dict) -> None:
    """`optimizer.load_state_dict(saved)`, with the optimizer's state then in memory of its own.

    On CPU `load_state_dict` keeps the loaded tensors themselves as the optimizer's state (it
    casts to the parameter's dtype and device, a no-op there), and every tensor `load` returns
    is a view of the one buffer the file was read into: the live state would keep that whole
    buffer alive (the model's copy in it included) for the rest of the run. Each such tensor is
    copied into a tensor of its own here (on a GPU, `load_state_dict`'s copy to the device does
    that already, and nothing is copied twice)."""
    import torch

    loaded = {t.untyped_storage().data_ptr() for t in _tensors_in(saved) if t.device.type == "cpu" and t.numel()}
    optimizer.load_state_dict(saved)
    for per_param in optimizer.state.values():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor) and value.numel() and value.untyped_storage().data_ptr() in loaded:
                per_param[key] = value.clone()


def _tensors_in(obj: Any) -> Iterable[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors_in(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors_in(value)


def _to_device(obj: Any, device) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(v, device) for v in obj)
    return obj


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


def reject(path: str) -> None:
    """Take a checkpoint that failed its digest out of the complete ones. Its marker still passes
    `inspect`, so the launcher would pick it first on every restart, and `prune` would count it
    among the `keep` newest and delete good checkpoints in its place (with keep=1, every new one
    right after its commit). The marker is renamed, not deleted, for a post-mortem; the directory
    goes with the next prune after a newer checkpoint, or when a save of its step replaces it."""
    try:
        os.replace(os.path.join(path, MARKER), os.path.join(path, REJECTED_MARKER))
    except FileNotFoundError:
        return  # rejected already, by another rank or an earlier attempt
    fsync_dir(path)


def load_with_fallback(
    root: str,
    preferred: str | None,
    loader: Callable[[str], dict[str, Any]],
    on_skip: Callable[[str, Exception], None] | None = None,
) -> tuple[str | None, dict[str, Any] | None]:
    """Try `loader(path)` on `preferred`, then older complete checkpoints.

    Returns (path, loaded) of the first that loads, or (None, None). A checkpoint that fails its
    digest (CheckpointDigestError) is rejected on the way (`reject`); any other failure may pass
    (a flaky mount), and the checkpoint stays as it is. A loader that reads into the live state
    (`load(..., into=...)`) and fails its digest has overwritten it: an older checkpoint may still
    restore it, but when none loads, the state is neither a checkpoint nor a fresh start, and
    CheckpointCorruptError says to start the process again (the rejected one is not tried again)."""
    overwritten = None
    for path in candidates(root, preferred):  # (an older one that loads restores what an overwrite did)
        try:
            return path, loader(path)
        except CheckpointCorruptError as e:
            if isinstance(e, CheckpointDigestError):
                reject(path)
            if e.live_state_overwritten:
                overwritten = path
            if on_skip is not None:
                on_skip(path, e)
    if overwritten is not None:
        raise CheckpointCorruptError(
            f"{overwritten} failed to load after it was read into the live state, and no older checkpoint "
            "loads: the state is neither a checkpoint nor a fresh initialisation. Start the process again "
            "(that checkpoint is rejected and will not be read again)")
    return None, None


def describe(infos: Iterable[CheckpointInfo]) -> list[dict]:
    return [
        {"step": c.step, "path": c.path, "complete": c.complete, "reason": c.reason}
        for c in infos
    ]
