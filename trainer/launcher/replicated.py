"""Replicated state (DDP: every rank holds the same model and optimizer) checkpointed by every
rank in parallel, each writing a share of it, instead of rank 0 writing it all.

One writer is one client and one file: on FSx for Lustre a file larger than 1 GiB is striped
over 5 OSTs, so one file gets at most 5 OSTs' share of the file system's throughput whatever its
size (components/facts/file_systems.py), and one client's network flow caps it again. With every
rank writing 1/world of the bytes, as many clients and files write at once.

    share = rank_share(state, rank, world_size)     # the tensors this rank writes, and their path
    checkpointer = AsyncCheckpointer(root, rank=rank, world_size=world_size, writes=True, ...)
    checkpointer.save(step, share)
    ...
    state = load_merged(path)                        # every rank's file, merged into the whole state

The split is deterministic from the state's structure and tensor sizes alone, which are the same
on every rank of replicated state: tensors go, largest first, to the rank with the fewest bytes
so far (ties to the lower rank); everything that is not a tensor (the step, RNG states as
Python objects, hyperparameters, optimizer param_groups) stays with rank 0. A checkpoint of one
file (written by rank 0 alone, or before this module) is its own merge: old checkpoints load.
Resume may run on another world size: every rank reads every file.

Why not DCP, which saves replicated state too (its planner dedups replicated tensors over the
ranks the same way): measured for the same state under the same protocol, 256 MiB on 2 gloo ranks
(`bench/trainer_bench.py --replicated-only`, 2026-12-06, 2-core machine under load, two runs),
this writer saved 1.8-4.2x and restored 4.0-4.4x as fast as
distributed_checkpoint.DistributedCheckpointer (DCP goes through torch.save/torch.load per tensor,
and on CPU stages a fresh copy every save). The bench keeps a >= 1.0 goal on both: once it is not
met (DCP as fast), this module and state_file.py give way to DCP (docs/trainer-io-and-storage.md,
"Replicated state").

The protocol is checkpoint.py's: each rank writes `rank-RRRRR.safetensors` in the step's
directory, rank 0 writes the COMPLETE marker only after every rank reported its file, so a
checkpoint with a share missing is never complete and the launcher resumes from the newest one
that is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from . import checkpoint

Path = tuple[Any, ...]


def _tensor_leaves(obj: Any, path: Path = ()) -> Iterator[tuple[Path, int]]:
    """(path, bytes) of every tensor inside nested dicts; lists and other values are not entered."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield path, obj.numel() * obj.element_size()
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _tensor_leaves(value, (*path, key))


def owners(state: Any, world_size: int) -> dict[Path, int]:
    """Which rank writes each tensor of `state` (by its path of dict keys): largest first, each to
    the rank with the fewest bytes so far."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    leaves = sorted(_tensor_leaves(state), key=lambda leaf: (-leaf[1], repr(leaf[0])))
    loads = [0] * world_size
    result: dict[Path, int] = {}
    for path, nbytes in leaves:
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        result[path] = rank
        loads[rank] += nbytes
    return result


def _share(obj: Any, path: Path, rank: int, owner: dict[Path, int], inner: set[Path]) -> tuple[bool, Any]:
    """(whether this rank keeps anything of `obj`, what it keeps); `inner`: the paths of the dicts
    that hold a tensor somewhere below them."""
    if path in owner:
        return owner[path] == rank, obj
    if isinstance(obj, dict) and path in inner:
        kept = {}
        for key, value in obj.items():
            keep, part = _share(value, (*path, key), rank, owner, inner)
            if keep:
                kept[key] = part
        return bool(kept) or rank == 0, kept
    return rank == 0, obj


def rank_share(state: dict[str, Any], rank: int, world_size: int) -> dict[str, Any]:
    """The part of replicated `state` that `rank` writes: its tensors and, on rank 0, every
    value that is not a tensor. The shares of all ranks merge back into `state` (merge)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside a world of {world_size}")
    owner = owners(state, world_size)
    inner = {path[:i] for path in owner for i in range(len(path))}
    _, kept = _share(state, (), rank, owner, inner)
    return kept


def merge(shares: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole state from every rank's share. A value two shares both hold as a leaf is a
    corrupt checkpoint (each leaf has one owner)."""
    merged: dict[str, Any] = {}
    for share in shares:
        _merge_into(merged, share, ())
    return merged


def _merge_into(into: dict, share: dict, path: Path) -> None:
    for key, value in share.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge_into(into[key], value, (*path, key))
        elif key in into:
            raise checkpoint.CheckpointCorruptError(f"two ranks' files both hold {'/'.join(map(str, (*path, key)))}")
        else:
            into[key] = value


def ranks_in(path: str) -> list[int]:
    """The ranks whose files a complete checkpoint lists, in order."""
    info = checkpoint.inspect(path)
    if not info.complete:
        raise checkpoint.CheckpointCorruptError(f"{path}: incomplete ({info.reason})")
    found = []
    for name in info.marker["files"]:
        stem = os.path.basename(name).split(".", 1)[0]
        if stem.startswith("rank-") and stem[5:].isdigit():
            found.append(int(stem[5:]))
    if not found:
        raise checkpoint.CheckpointCorruptError(f"{path}: the marker lists no rank's file")
    return sorted(found)


def load_merged(path: str, map_location="cpu", verify: bool = True, into: Any = None) -> dict[str, Any]:
    """Every rank's file of a complete checkpoint, merged into the whole state
    (CheckpointCorruptError, or CheckpointDigestError with `verify`, as checkpoint.load). `into`:
    the live state, read into in place (checkpoint.load): each rank's share is a part of it."""
    shares = []
    for rank in ranks_in(path):
        try:
            shares.append(checkpoint.load(path, rank=rank, map_location=map_location, verify=verify, into=into))
        except checkpoint.CheckpointCorruptError as error:
            # An earlier rank's file may be in the live state already: the checkpoint as a whole overwrote it.
            error.live_state_overwritten = error.live_state_overwritten or (into is not None and bool(shares))
            raise
    return merge(shares)
