"""The launcher's checkpoint protocol over the files a framework writes itself.

Hugging Face Trainer writes `checkpoint-N/`, Accelerate's `save_state` the directory it is given
(`checkpoint_N/` here), Lightning's `save_checkpoint` one `.ckpt` file (put in `step-N/`), in
place, without fsync or a completeness marker. Once the framework's save has returned on every
rank, `commit` turns such a directory into a checkpoint the launcher can trust:

1. every rank lists the directory as it sees it (a file written by a rank on another node may be
   missing from one node's cached listing on NFS, so rank 0 never relies on its own listing);
2. the union of those listings is split between the ranks, and each rank hashes its share
   (XXH3-128, as the launcher's own files) in parallel;
3. rank 0 checks that every file is there with the size its hasher saw, writes the `COMPLETE`
   marker last (format, step, every file with bytes and digest, the framework and the path the
   framework resumes from), fsyncs, and prunes to the keep count.

`select` is the other half: before the framework loads anything, the ranks verify the candidate
checkpoints' digests (split the same way), newest first from the launcher's choice; one that
fails is rejected (its marker renamed, as `checkpoint.reject` does) and the next older one is
tried. A truncated file already fails the launcher's size check, so a damaged newest checkpoint
never crash-loops the gang while an intact older one exists, and a same-size corruption is never
loaded silently.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import checkpoint
from .checkpoint import CheckpointCorruptError, CheckpointDigestError, CheckpointInfo, CheckpointWriteError, Collective

HASH_PIECE = 16 << 20


def listing(path: str) -> dict[str, int]:
    """{relative name: bytes} of every file under `path` that a marker may list."""
    found: dict[str, int] = {}
    for directory, subdirs, files in os.walk(path):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        for name in files:
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, path).replace(os.sep, "/")
            if rel in (checkpoint.MARKER, checkpoint.REJECTED_MARKER) or not checkpoint._listable(rel):
                continue
            try:
                found[rel] = os.stat(full).st_size
            except FileNotFoundError:
                continue
    return found


def file_digest(path: str) -> dict:
    """{"bytes", "xxh3_128"} of one file, read once."""
    import xxhash

    digest, nbytes = xxhash.xxh3_128(), 0
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(HASH_PIECE), b""):
            digest.update(piece)
            nbytes += len(piece)
    return {"bytes": nbytes, "xxh3_128": digest.hexdigest()}


def _share(names: list[str], rank: int, world_size: int) -> list[str]:
    """This rank's part of the files, the same split on every rank."""
    return sorted(names)[rank::world_size]


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int
    collective: Collective

    def agreed(self, what: str, action: Callable[[], object]) -> None:
        """Run `action` here, then agree with every rank that it worked everywhere."""
        checkpoint.run_agreed(self.collective, what, action)


def commit(path: str, step: int, ranks: Ranks, *, keep: int, framework: str, resume: str = "") -> None:
    """Every rank, after the framework's save into `path` returned on every rank."""
    seen = ranks.collective.all_gather(listing(path))
    names = sorted({name for view in seen for name in view})
    mine: dict[str, dict] = {}
    ranks.agreed(f"step {step}: hashing the files", lambda: mine.update(
        {name: file_digest(os.path.join(path, name)) for name in _share(names, ranks.rank, ranks.world_size)}))
    reports = ranks.collective.all_gather(mine)

    def write_marker() -> None:
        files = checkpoint.expected_files(path, reports)
        if resume and resume not in files and not os.path.isdir(os.path.join(path, resume)):
            raise CheckpointWriteError(f"{path}: the framework's resume path {resume!r} was not written")
        checkpoint.atomic_write_json(os.path.join(path, checkpoint.MARKER), {
            "format": checkpoint.FORMAT_VERSION, "step": step, "world_size": ranks.world_size,
            "files": files, "framework": framework, "resume": resume, "created_unix": round(time.time(), 3),
            **checkpoint.run_fields()})
        root = os.path.dirname(os.path.normpath(path))
        checkpoint.fsync_dir(root)
        checkpoint.prune(root, keep, committed=step)

    ranks.agreed(f"step {step}: writing the marker", write_marker if ranks.rank == 0 else lambda: None)


def verify(info: CheckpointInfo, ranks: Ranks) -> None:
    """Check this rank's share of the files against the marker's digests; agreed. Raises
    CheckpointDigestError on every rank when a file anywhere does not match."""
    files = info.marker.get("files", {})
    mismatch = unreadable = ""
    for name in _share(list(files), ranks.rank, ranks.world_size):
        try:
            got = file_digest(os.path.join(info.path, name))
        except OSError as e:  # a flaky mount: skip it this time, never reject it
            unreadable = f"{name}: {e.strerror or e}"
            break
        want = files[name]
        if got["bytes"] != want.get("bytes") or (want.get("xxh3_128") and got["xxh3_128"] != want["xxh3_128"]):
            mismatch = f"{name}: xxh3_128 mismatch"
            break
    # Gathered, not only agreed on: every rank's log names the file another rank found damaged.
    reports = ranks.collective.all_gather((mismatch, unreadable))
    mismatches = [f"{m} (rank {r})" for r, (m, _) in enumerate(reports) if m]
    unreadables = [f"{u} (rank {r})" for r, (_, u) in enumerate(reports) if u]
    if mismatches:
        raise CheckpointDigestError(f"{info.path}: {'; '.join(mismatches)}")
    if unreadables:
        raise CheckpointCorruptError(f"{info.path}: {'; '.join(unreadables)}")


LAUNCHER = "launcher"  # the framework of the launcher's own checkpoints (their markers name none)


def select(root: str, preferred: str | None, ranks: Ranks, framework: str,
           on_skip: Callable[[str, Exception], None] | None = None) -> CheckpointInfo | None:
    """The newest complete checkpoint of `framework` whose every file matches its digest (from
    `preferred`, the launcher's choice, downwards), the same on every rank; rejects the ones that
    do not match. Another framework's checkpoint (a team that changed trainers) is skipped: its
    load would fail on every restart."""
    candidates = ranks.collective.all_gather(checkpoint.candidates(root, preferred))[0]  # rank 0's view
    for path in candidates:
        info = checkpoint.inspect(path)
        try:
            if not ranks.collective.agree(info.complete):
                raise CheckpointCorruptError(f"{path}: incomplete ({info.reason or 'on another rank'})")
            written_by = info.marker.get("framework", LAUNCHER)
            if written_by != framework:
                raise CheckpointCorruptError(f"{path}: written by {written_by}, this trainer runs {framework}")
            verify(info, ranks)
        except CheckpointCorruptError as e:
            if isinstance(e, CheckpointDigestError) and ranks.rank == 0:
                checkpoint.reject(path)
            if on_skip is not None:
                on_skip(path, e)
            continue
        return info
    return None


def resume_path(info: CheckpointInfo) -> str:
    """What the framework resumes from: the marker's `resume` inside the checkpoint, or itself."""
    resume = info.marker.get("resume") or ""
    return os.path.join(info.path, resume) if resume else info.path
