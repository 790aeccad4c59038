"""The checkpoint file format (state_file.py): a safetensors file whose load never runs code.

What these tests hold the format to: a realistic training state comes back equal; what the
format cannot carry is refused at save with its path; a planted pickle (format 2 or 1) runs
nothing and the load falls back; restored tensors never alias the file; any safetensors reader
reads the tensors; and the first save after `prepare` blocks like later ones.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import pickle
import re
import statistics
import struct
import subprocess
import sys

import pytest
from launcher import checkpoint
from trainer_testlib import requires_torch

pytestmark = requires_torch


def _equal(a, b) -> bool:
    """Deep equality that tells dict types, tuples from lists and ints from floats apart, and
    takes nan for equal to nan."""
    import torch

    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return (list(a) == list(b) and all(_equal(a[k], b[k]) for k in a)
                and _equal(getattr(a, "_metadata", None), getattr(b, "_metadata", None)))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _trained(seed: int = 0):
    """A small model with buffers (BatchNorm: running stats, an int64 0-d counter) and an AdamW
    optimizer after two steps: its state_dict has int keys and tuple betas."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.ReLU(),
                                torch.nn.Linear(5, 3))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.95))
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(8, 6)).pow(2).mean().backward()
        opt.step()
    return model, opt


def _realistic_state(model, opt) -> dict:
    import torch

    return {
        "step": 2,
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "rng": torch.get_rng_state(),
        "mixed": {
            "bf16": torch.randn(4, 3).to(torch.bfloat16),
            "f16": torch.randn(5).half(),
            "f64": torch.randn(2, 2, dtype=torch.float64),
            "i64": torch.arange(7),
            "i8": torch.tensor([-3, 4], dtype=torch.int8),
            "bool": torch.tensor([True, False, True]),
            "zero-d": torch.tensor(1.25),
            "empty": torch.empty(0, 4),
            "non-contiguous": torch.arange(12.0).view(3, 4).t(),
        },
        "nested": [[1, [2.5, "x"]], {"deep": [None, True, False]}, (3, (4, torch.ones(2)))],
        "floats": [math.inf, -math.inf, math.nan, -0.0, 1e-310, 0.1],
        "keys": {1: "int", -7: "int", 2.5: "float", None: "none", False: "bool", (1, "a"): "tuple"},
        "tag lookalike": {"__tensor__": "not a tensor"},
        "hparams": {"lr": 1e-2, "name": "run-ü", "layers": [5, 3]},
    }


def _save(tmp_path, state, step: int = 1) -> str:
    checkpointer = checkpoint.AsyncCheckpointer(str(tmp_path / "ck"))
    checkpointer.prepare(state)
    checkpointer.save(step, state)
    done = checkpointer.wait()
    assert done is not None
    return done.path


def test_a_realistic_state_comes_back_equal_and_training_resumes_identically(tmp_path):
    import torch

    model, opt = _trained()
    state = _realistic_state(model, opt)
    path = _save(tmp_path, state)
    marker = checkpoint.inspect(path).marker
    assert marker["format"] == checkpoint.FORMAT_VERSION == 3
    assert list(marker["files"]) == ["rank-00000.safetensors"]

    back = checkpoint.load(path)
    assert _equal(state, back)
    assert type(back["model"]) is collections.OrderedDict and back["model"]._metadata == state["model"]._metadata
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.95)
    assert list(back["optimizer"]["state"]) == [0, 1, 2, 3, 4, 5]

    # A fresh model and optimizer loaded from it take the same next step as the originals.
    model2, opt2 = _trained(seed=1)
    model2.load_state_dict(back["model"])
    opt2.load_state_dict(back["optimizer"])
    x = torch.randn(8, 6)
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x).pow(2).mean().backward()
        o.step()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values(), strict=True))


@pytest.mark.parametrize(
    ("make", "path", "what"),
    [
        (lambda np, torch: {"hparams": {"lr": np.float64(0.1)}}, "state['hparams']['lr']", "numpy.float64"),
        (lambda np, torch: {"groups": [1, object()]}, "state['groups'][1]", "object cannot"),
        (lambda np, torch: {"size": torch.Size([2, 3])}, "state['size']", "torch.Size"),
        (lambda np, torch: {"s": {1, 2}}, "state['s']", "set cannot"),
        (lambda np, torch: {"d": collections.defaultdict(list)}, "state['d']", "defaultdict"),
        (lambda np, torch: {"opt": {"state": {0: {"fn": len}}}}, "state['opt']['state'][0]['fn']", "builtin_function"),
        (lambda np, torch: {"k": {torch.ones(1): 1}}, "state['k']", "a key of type torch.Tensor"),
        (lambda np, torch: {"t": (1, torch.eye(2).to_sparse())}, "state['t'][1]", "only dense tensors"),
    ],
)
def test_what_the_format_cannot_carry_is_refused_with_its_path(tmp_path, make, path, what):
    import numpy as np
    import torch
    from launcher import state_file

    state = make(np, torch)
    with pytest.raises(TypeError, match=r"^" + re.escape(path) + r": .*" + what):
        state_file.Stager().snapshot(state)
    with pytest.raises(TypeError, match=re.escape(path)):  # before step 1 already
        checkpoint.AsyncCheckpointer(str(tmp_path)).prepare(state)
    assert not (tmp_path / checkpoint.step_dir_name(1)).exists()


def test_an_ordered_dict_with_other_attributes_is_refused():
    import torch
    from launcher import state_file

    od = collections.OrderedDict(w=torch.ones(1))
    od.extra = 1  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(TypeError, match=r"state\['m'\]: an OrderedDict with attributes \['extra'\]"):
        state_file.Stager().snapshot({"m": od})


def test_any_safetensors_reader_reads_our_file(tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    from launcher import state_file

    model, opt = _trained()
    state = _realistic_state(model, opt)
    path = os.path.join(_save(tmp_path, state), checkpoint.shard_name(0))
    theirs = safetensors_torch.load_file(path)
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw)
    header = json.loads(raw[8:8 + n])
    ours = state_file.read_state(path, {"bytes": len(raw)})
    metadata = header.pop("__metadata__")
    assert metadata["format"] == state_file.FORMAT_TAG
    # Every tensor the state refers to by name is the one safetensors reads under that name.
    referenced = []

    def walk(encoded, decoded):
        tag = next(iter(encoded)) if isinstance(encoded, dict) and len(encoded) == 1 else None
        if tag == "__tensor__":
            referenced.append(encoded[tag])
            assert _equal(theirs[encoded[tag]], decoded)
        elif tag == "__tuple__":
            for e, d in zip(encoded[tag], decoded, strict=True):
                walk(e, d)
        elif tag in ("__dict__", "__odict__"):
            items = encoded[tag] if tag == "__dict__" else encoded[tag]["items"]
            for (_, e), d in zip(items, decoded.values(), strict=True):
                walk(e, d)
        elif tag == "__float__":
            assert math.isnan(decoded) or math.isinf(decoded)
        elif isinstance(encoded, dict):
            for k, e in encoded.items():
                walk(e, decoded[k])
        elif isinstance(encoded, list):
            for e, d in zip(encoded, decoded, strict=True):
                walk(e, d)

    walk(json.loads(metadata["state"]), ours)
    assert sorted(referenced) == sorted(theirs) == sorted(header)
    assert "model.0.weight" in theirs and "optimizer.state.0.exp_avg" in theirs  # names for people
    # The format's rules (safetensors README, "Format") and ours: data on a page, the header
    # padded with spaces, byte ranges back to back with no holes, each tensor aligned to its
    # element size.
    assert (8 + n) % 4096 == 0 and raw[8:8 + n].rstrip(b" ").endswith(b"}")
    spans = sorted((info["data_offsets"], theirs[name].element_size()) for name, info in header.items())
    assert spans[0][0][0] == 0 and spans[-1][0][1] == len(raw) - 8 - n
    assert all(a[0][1] == b[0][0] for a, b in itertools.pairwise(spans))
    assert all(begin % size == 0 for (begin, _), size in spans)


def test_a_file_that_safetensors_wrote_with_our_metadata_reads_back(tmp_path):
    """Our reader follows the spec, not our writer's habits: safetensors pads its header to 8
    bytes only, so the data is not on a page."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    import torch
    from launcher import state_file

    tensors = {"a": torch.arange(6.0).view(2, 3), "b": torch.tensor([1, 2], dtype=torch.int16),
               "c": torch.tensor([True])}
    tree = {"a": {"__tensor__": "a"}, "pair": {"__tuple__": [{"__tensor__": "b"}, {"__tensor__": "c"}]}}
    path = str(tmp_path / "theirs.safetensors")
    safetensors_torch.save_file(tensors, path, metadata={"format": state_file.FORMAT_TAG, "state": json.dumps(tree)})
    back = state_file.read_state(path, {"bytes": os.path.getsize(path)})
    assert _equal(back, {"a": tensors["a"], "pair": (tensors["b"], tensors["c"])})


def test_a_header_that_leaves_a_hole_or_overlaps_is_refused(tmp_path):
    import torch
    from launcher import state_file

    snapshot = state_file.Stager().snapshot({"a": torch.ones(4), "b": torch.zeros(2)})
    prefix = snapshot.prefix
    (n,) = struct.unpack_from("<Q", prefix)
    header = json.loads(prefix[8:8 + n])
    for name, offsets in (("b", [20, 28]), ("b", [8, 16]), ("a", [0, 12])):  # a hole, an overlap, a short one
        bad = json.loads(json.dumps(header))
        bad[name]["data_offsets"] = offsets
        text = json.dumps(bad).encode()
        path = tmp_path / "bad.safetensors"
        path.write_bytes(struct.pack("<Q", n) + text + b" " * (n - len(text)) + bytes(snapshot.data))
        with pytest.raises(state_file.StateFileError, match="is not where the header says"):
            state_file.read_state(str(path), {"bytes": path.stat().st_size})


# ------------------------------------------------------------ planted pickles


class _Plant:
    """Unpickled freely, runs `command` (what an attacker who can write the checkpoint
    directory would plant)."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _format2_file(pickled: bytes, data: bytes = b"") -> bytes:
    """A TRSTATE2 file as format 2 wrote it: header, pickled skeleton, zeros up to a page, data."""
    data_offset = (32 + len(pickled) + 4095) // 4096 * 4096
    head = struct.pack("<8sQQQ", b"TRSTATE2", len(pickled), data_offset, len(data)) + pickled
    return head + b"\0" * (data_offset - len(head)) + data


def _plant(root, step: int, version: int, payload: bytes) -> str:
    """A checkpoint directory of format 1 or 2 whose marker says it is complete, digest and all."""
    import hashlib

    path = root / checkpoint.step_dir_name(step)
    path.mkdir(parents=True)
    name = "rank-00000." + ("pt" if version == 1 else "state")
    (path / name).write_bytes(payload)
    meta = {"bytes": len(payload), "sha256" if version == 1 else "xxh3_128": hashlib.sha256(payload).hexdigest()}
    checkpoint.atomic_write_json(str(path / checkpoint.MARKER), {"format": version, "step": step, "files": {name: meta}})
    return str(path)


def _planted_pickles(command: str) -> tuple[bytes, bytes]:
    """A format-2 skeleton and a format-1 torch.save file that each run `command` when unpickled."""
    import io

    import torch

    skeleton = pickle.dumps({"state": {"step": 20, "w": _Plant(command)}, "tensors": []},
                            protocol=pickle.HIGHEST_PROTOCOL)
    saved = io.BytesIO()
    torch.save({"step": 30, "w": _Plant(command)}, saved)
    return skeleton, saved.getvalue()


def test_formats_1_and_2_are_refused_run_nothing_and_the_load_falls_back(tmp_path):
    """Formats 1 and 2 are no longer read (no built image wrote them: checkpoint.py); a planted
    one of either, pickles that run code when unpickled, is refused by its marker and rejected."""
    import io
    import zipfile

    import torch

    # The plants are live: unpickled freely (in another process), each runs its command.
    canary = tmp_path / "canary"
    skeleton, archive = _planted_pickles(f"touch {canary}")
    with zipfile.ZipFile(io.BytesIO(archive)) as z:  # torch.save's pickle is its data.pkl record
        archived = next(z.read(n) for n in z.namelist() if n.endswith("data.pkl"))
    for live in (skeleton, archived):
        subprocess.run([sys.executable, "-c", "import pickle, sys; pickle.loads(sys.stdin.buffer.read())"],
                       input=live, capture_output=True, timeout=60, check=False)
        assert canary.exists(), "the planted pickle is not live: the test would prove nothing"
        canary.unlink()

    root = tmp_path / "ck"
    good = checkpoint.save(str(root), 10, {"step": 10, "w": torch.ones(3)})
    pwned = tmp_path / "pwned"
    skeleton, archive = _planted_pickles(f"touch {pwned}")
    planted = {20: _plant(root, 20, 2, _format2_file(skeleton)), 30: _plant(root, 30, 1, archive)}
    assert [c.step for c in checkpoint.complete_checkpoints(str(root))] == [30, 20, 10]

    for step, version in ((20, 2), (30, 1)):
        with pytest.raises(checkpoint.CheckpointDigestError, match=f"format {version}, this launcher reads format 3 only"):
            checkpoint.load(planted[step])
    skipped = []
    path, state = checkpoint.load_with_fallback(str(root), None, checkpoint.load,
                                                lambda p, e: skipped.append(os.path.basename(p)))
    assert path == good and state is not None and state["step"] == 10
    assert skipped == [checkpoint.step_dir_name(30), checkpoint.step_dir_name(20)]
    assert not pwned.exists(), "loading a checkpoint ran code from it"
    # They will never load: rejected, so neither the launcher's next choice nor pruning counts
    # them among the complete checkpoints.
    assert [c.step for c in checkpoint.complete_checkpoints(str(root))] == [10]


def test_a_marker_of_a_newer_format_is_refused_and_kept(tmp_path):
    import torch

    path = checkpoint.save(str(tmp_path), 5, {"w": torch.ones(1)})
    marker = os.path.join(path, checkpoint.MARKER)
    with open(marker) as f:
        body = json.load(f)
    checkpoint.atomic_write_json(marker, {**body, "format": 4})
    with pytest.raises(checkpoint.CheckpointCorruptError, match="format 4, this launcher reads format 3 only") as error:
        checkpoint.load(path)
    assert not isinstance(error.value, checkpoint.CheckpointDigestError)  # the newer image that wrote it may load it


# ------------------------------------------------------------------- aliasing


def _mappings_of(path: str) -> list[str]:
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        return [line for line in f if line.rstrip("\n").endswith(real)]


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_restored_tensors_never_alias_the_file(tmp_path):
    import torch

    model, opt = _trained()
    state = _realistic_state(model, opt)
    saved = {"model": {k: v.clone() for k, v in state["model"].items()},
             "optimizer": {i: {k: v.clone() for k, v in s.items()} for i, s in state["optimizer"]["state"].items()}}
    path = _save(tmp_path, state)
    fpath = os.path.join(path, checkpoint.shard_name(0))
    back = checkpoint.load(path)
    model2, opt2 = _trained(seed=1)
    model2.load_state_dict(back["model"])
    opt2.load_state_dict(back["optimizer"])  # on CPU it keeps the tensors it is given
    first = next(model2.parameters())
    assert opt2.state[first]["exp_avg"].data_ptr() == back["optimizer"]["state"][0]["exp_avg"].data_ptr()
    assert _mappings_of(fpath) == [], "the file is still mapped after the restore"

    # Rewritten in place and then truncated (what a shared file system may do under a reader):
    # with the tensors views of a file mapping, the first would change them and the second
    # would kill the process with SIGBUS when they are touched.
    size = os.path.getsize(fpath)
    with open(fpath, "r+b") as f:
        f.write(b"\xff" * size)
        f.flush()
        os.fsync(f.fileno())
        f.truncate(0)
    for name, t in model2.state_dict().items():
        assert torch.equal(t, saved["model"][name]), name
    for i, p in enumerate(model2.parameters()):
        for key, t in opt2.state[p].items():
            assert torch.equal(t, saved["optimizer"][i][key]), (i, key)
    # Writable, and each a storage of its own (no offset into one shared buffer).
    for t in (back["mixed"]["i64"], back["rng"], back["mixed"]["zero-d"]):
        t.add_(1)
        assert t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()


# ------------------------------------------------------------------- prepare


def test_the_first_save_after_prepare_blocks_no_longer_than_later_ones(tmp_path, measurements):
    """Without `prepare` the first save of a process allocated its staging buffer and paid a
    page fault per page while copying into it. Timing on a shared machine is noisy: the ratio is
    measured in the same test, and a regression shows in every one of three tries."""
    import torch

    state = {"step": 1, "model": {f"layer{i}.weight": torch.randn(1 << 20) for i in range(16)}}  # 64 MiB
    ratios = []
    for attempt in range(3):
        checkpointer = checkpoint.AsyncCheckpointer(str(tmp_path / f"ck{attempt}"), keep=1)
        checkpointer.prepare(state)
        blocked = []
        for step in range(1, 7):
            blocked.append(checkpointer.save(step, state))
            checkpointer.wait()
        ratios.append(blocked[0] / statistics.median(blocked[1:]))
        if ratios[-1] <= 2:
            break
    measurements.record("unit: first save after prepare / later saves (64 MiB, blocked)", min(ratios), "x")
    assert min(ratios) <= 2, f"first save / median of later saves, per try: {ratios}"


# --- reading straight into the live state (load(..., into=...)) ---------------------------------

def test_a_restore_into_the_live_state_fills_its_tensors_in_place_and_the_rest_as_before(tmp_path):
    import torch

    model, opt = _trained()
    state = _realistic_state(model, opt)
    path = _save(tmp_path, state)
    fresh, _ = _trained(seed=1)
    live = fresh.state_dict()
    before = {name: t.data_ptr() for name, t in live.items()}
    wrong_shape = torch.zeros(2)  # not the saved shape: loaded as before, never written into
    back = checkpoint.load(path, into={"model": live, "mixed": {"f64": wrong_shape}})
    for name, t in back["model"].items():
        assert t.data_ptr() == before[name], f"{name} was not read into the live tensor"
        assert torch.equal(t, state["model"][name]), name
    assert torch.equal(wrong_shape, torch.zeros(2)) and back["mixed"]["f64"].data_ptr() != wrong_shape.data_ptr()
    assert _equal(back["mixed"], state["mixed"]) and _equal(back["optimizer"], state["optimizer"])
    checkpoint.restore_module(fresh, back["model"])  # nothing left to copy: the same storages
    for name, t in fresh.state_dict().items():
        assert torch.equal(t, state["model"][name]) and t.data_ptr() == before[name]


def test_a_digest_mismatch_after_reading_into_the_live_state_says_so_and_an_older_checkpoint_restores_it(tmp_path):
    import torch

    model, opt = _trained()
    older = _save(tmp_path, _realistic_state(model, opt), step=1)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1)
    newer = _save(tmp_path, _realistic_state(model, opt), step=2)
    fpath = os.path.join(newer, checkpoint.shard_name(0))
    with open(fpath, "r+b") as f:  # one byte of the data flipped: the header still reads
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    fresh, _ = _trained(seed=1)
    live = {"model": fresh.state_dict()}
    with pytest.raises(checkpoint.CheckpointDigestError) as raised:
        checkpoint.load(newer, into=live)
    assert raised.value.live_state_overwritten
    chosen, back = checkpoint.load_with_fallback(str(tmp_path / "ck"), None, lambda p: checkpoint.load(p, into=live))
    assert chosen == older and back is not None
    checkpoint.restore_module(fresh, back["model"])
    for name, t in fresh.state_dict().items():
        assert torch.equal(t, expected[name]), name


def test_when_no_checkpoint_restores_an_overwritten_live_state_the_load_stops_the_process(tmp_path):
    model, opt = _trained()
    only = _save(tmp_path, _realistic_state(model, opt))
    fpath = os.path.join(only, checkpoint.shard_name(0))
    with open(fpath, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    fresh, _ = _trained(seed=1)
    with pytest.raises(checkpoint.CheckpointCorruptError, match="Start the process again"):
        checkpoint.load_with_fallback(str(tmp_path / "ck"), None,
                                      lambda p: checkpoint.load(p, into={"model": fresh.state_dict()}))
    # Without a live state given, nothing was overwritten: no checkpoint, a fresh start.
    assert checkpoint.load_with_fallback(str(tmp_path / "ck"), None, checkpoint.load) == (None, None)


def test_a_read_that_fails_midway_into_the_live_state_says_it_overwrote_it(tmp_path, monkeypatch):
    import torch
    from launcher import state_file

    state = {"model": {"a": torch.full((1024,), 3.0), "b": torch.full((1024,), 4.0)}}
    path = _save(tmp_path, state)
    real_read_into = state_file._read_into  # pyright: ignore[reportPrivateUsage]
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        return real_read_into(*args, **kwargs)

    monkeypatch.setattr(state_file, "_read_into", failing)
    live = {"model": {"a": torch.zeros(1024), "b": torch.zeros(1024)}}
    with pytest.raises(checkpoint.CheckpointCorruptError) as raised:
        checkpoint.load(path, into=live)
    assert raised.value.live_state_overwritten and not isinstance(raised.value, checkpoint.CheckpointDigestError)


def test_a_damaged_header_with_a_live_state_given_is_rejected_by_its_digest_as_without_one(tmp_path):
    import torch

    path = _save(tmp_path, {"model": {"w": torch.ones(1000)}})
    fpath = os.path.join(path, checkpoint.shard_name(0))
    with open(fpath, "r+b") as f:
        data = f.read()
        f.seek(data.index(b"[1000]"))
        f.write(b"[2000]")  # the header says another shape
    live = {"model": {"w": torch.zeros(1000)}}
    with pytest.raises(checkpoint.CheckpointDigestError) as raised:
        checkpoint.load(path, into=live)
    assert not raised.value.live_state_overwritten and torch.equal(live["model"]["w"], torch.zeros(1000))
