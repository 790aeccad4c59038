"""launcher/replicated.py: replicated (DDP) state split into one share per rank, written by every
rank in parallel, merged back on load. The 2-process gloo run of the protocol is
test_trainer_io.py's `replicated` scenario; the example trainer's runs use it on every save."""

from __future__ import annotations

import os

import pytest
from launcher import checkpoint
from trainer_testlib import requires_torch

pytestmark = requires_torch

torch = pytest.importorskip("torch")
replicated = pytest.importorskip("launcher.replicated")


def state() -> dict:
    """A DDP trainer's state: model tensors of several sizes, AdamW state keyed by int, values
    that are not tensors."""
    return {
        "step": 7,
        "model": {"l1.weight": torch.zeros(64, 32), "l1.bias": torch.zeros(64), "l2.weight": torch.zeros(10, 64),
                  "l2.bias": torch.zeros(10)},
        "optimizer": {"state": {i: {"step": torch.tensor(3.0), "exp_avg": torch.ones(n), "exp_avg_sq": torch.ones(n)}
                                for i, n in enumerate((2048, 64, 640, 10))},
                      "param_groups": [{"lr": 1e-3, "params": [0, 1, 2, 3]}]},
        "rng": torch.zeros(5056, dtype=torch.uint8),
        "hparams": {"lr": 1e-3, "nested": {"seed": 1}},
    }


def tensor_paths(obj, path=()) -> dict[tuple, int]:
    if isinstance(obj, torch.Tensor):
        return {path: obj.numel() * obj.element_size()}
    if isinstance(obj, dict):
        return {p: n for key, value in obj.items() for p, n in tensor_paths(value, (*path, key)).items()}
    return {}


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    return a == b


@pytest.mark.parametrize("world", [1, 2, 3, 4, 16])
def test_every_tensor_has_one_owner_and_the_shares_merge_back_into_the_state(world):
    whole = state()
    shares = [replicated.rank_share(whole, rank, world) for rank in range(world)]
    held = [tensor_paths(share) for share in shares]
    everything = tensor_paths(whole)
    assert sorted(p for h in held for p in h) == sorted(everything), "each tensor in exactly one share"
    assert same(replicated.merge(shares), whole)
    for rank, share in enumerate(shares[1:], start=1):
        assert "step" not in share and "hparams" not in share, f"rank {rank}: values that are not tensors stay on rank 0"


@pytest.mark.parametrize("world", [2, 3, 4])
def test_the_shares_are_balanced_within_the_largest_tensor(world):
    whole = state()
    loads = [sum(tensor_paths(replicated.rank_share(whole, rank, world)).values()) for rank in range(world)]
    largest = max(tensor_paths(whole).values())
    assert max(loads) - min(loads) <= largest, loads
    assert all(load > 0 for load in loads), "with more tensors than ranks every rank writes"


def test_the_split_depends_on_the_structure_and_sizes_only():
    """Every rank computes its share alone: replicated state of other values splits the same way."""
    other = state()
    other["model"]["l1.weight"] = torch.full((64, 32), 5.0)
    assert replicated.owners(state(), 4) == replicated.owners(other, 4)


@pytest.mark.parametrize(("rank", "world"), [(2, 2), (-1, 2), (0, 0)])
def test_a_rank_outside_the_world_is_refused(rank, world):
    with pytest.raises(ValueError):
        replicated.rank_share(state(), rank, world)


def test_two_shares_holding_the_same_value_are_a_corrupt_checkpoint():
    with pytest.raises(checkpoint.CheckpointCorruptError, match="model/w"):
        replicated.merge([{"model": {"w": torch.zeros(1)}}, {"model": {"w": torch.zeros(1)}}])


def test_a_checkpoint_rank_0_wrote_alone_loads_whole(tmp_path):
    """Checkpoints from before the split (one file, all of the state) still resume."""
    whole = state()
    path = checkpoint.save(str(tmp_path), 7, whole)
    assert same(replicated.load_merged(path), whole)


def test_a_damaged_share_makes_the_checkpoint_fall_back_to_the_older_one(tmp_path):
    """The newest checkpoint's rank-1 share fails its digest: rank 0's verified load of every
    share skips it (and rejects it), and resumes from the older one."""
    root = str(tmp_path / "ck")
    for step in (1, 2):
        two_share_checkpoint(tmp_path, root, step)
    shard = os.path.join(root, checkpoint.step_dir_name(2), checkpoint.shard_name(1))
    with open(shard, "r+b") as f:
        f.seek(os.path.getsize(shard) - 8)
        f.write(b"\xff" * 8)
    skipped = []
    path, loaded = checkpoint.load_with_fallback(root, None, replicated.load_merged, lambda p, e: skipped.append(p))
    assert path is not None and path.endswith(checkpoint.step_dir_name(1)) and loaded is not None
    assert loaded["step"] == 1 and same(loaded["model"], state()["model"])
    assert [os.path.basename(p) for p in skipped] == [checkpoint.step_dir_name(2)]
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [1], "the damaged one is rejected"


def two_share_checkpoint(tmp_path, root: str, step: int) -> None:
    """A complete checkpoint of `step` as 2 ranks write it: each share saved alone (one writer,
    no collective), then put side by side under a marker listing both, as rank 0 writes it."""
    files = {}
    target = os.path.join(root, checkpoint.step_dir_name(step))
    os.makedirs(target)
    for rank in (0, 1):
        alone = checkpoint.save(str(tmp_path / f"alone-{step}-{rank}"), step,
                                replicated.rank_share({**state(), "step": step}, rank, 2), writes=True)
        files[checkpoint.shard_name(rank)] = checkpoint.inspect(alone).marker["files"][checkpoint.shard_name(0)]
        os.rename(os.path.join(alone, checkpoint.shard_name(0)), os.path.join(target, checkpoint.shard_name(rank)))
    checkpoint.atomic_write_json(os.path.join(target, checkpoint.MARKER), {
        "format": checkpoint.FORMAT_VERSION, "step": step, "world_size": 2, "files": files})


def test_a_share_that_fails_after_another_was_read_into_the_live_state_stops_the_process(tmp_path):
    """Rank 0's share is read into the live model, then rank 1's (no live target of its own)
    fails its digest: the live model holds a checkpoint's weights, not its own, so with no older
    checkpoint the load must stop, not start afresh on them."""
    root = str(tmp_path / "ck")
    two_share_checkpoint(tmp_path, root, 1)
    shard = os.path.join(root, checkpoint.step_dir_name(1), checkpoint.shard_name(1))
    with open(shard, "r+b") as f:
        f.seek(os.path.getsize(shard) - 8)
        f.write(b"\xff" * 8)
    live = {"model": {name: torch.zeros_like(t) for name, t in state()["model"].items()}}
    with pytest.raises(checkpoint.CheckpointCorruptError, match="Start the process again"):
        checkpoint.load_with_fallback(root, None, lambda p: replicated.load_merged(p, into=live))
