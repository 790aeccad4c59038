"""Checkpoint interval (Young), discovery/ordering, atomic save, verified loading."""

from __future__ import annotations

import json
import math
import os

import pytest
from launcher import checkpoint
from launcher.schedule import CheckpointSchedule, checkpoint_interval, young_interval
from trainer_testlib import requires_torch

# ------------------------------------------------------------------ Young 1974


@pytest.mark.parametrize(
    ("cost_s", "mtbf_s", "tau_s"),
    [
        (120, 75 * 60, 1039.23),  # the baseline notes' example: ~17 min
        (30, 6 * 3600, 1138.42),
        (60, 24 * 3600, 3220.0),
        (1, 2, 2.0),
        (0.5, 1, 1.0),
        (8, 8, 11.3137),
        (300, 3600, 1469.69),
    ],
)
def test_young_interval_table(cost_s, mtbf_s, tau_s):
    assert young_interval(cost_s, mtbf_s) == pytest.approx(tau_s, rel=1e-4)


@pytest.mark.parametrize(
    ("cost_s", "mtbf_s"),
    [(0, 100), (-1, 100), (10, 0), (10, -5), (math.inf, 10), (10, math.nan), ("1", 10)],
)
def test_young_interval_rejects_nonsense(cost_s, mtbf_s):
    with pytest.raises(ValueError):
        young_interval(cost_s, mtbf_s)


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((120, 4500), {}, 1039.23),
        ((120, 4500), {"override_s": 300}, 300.0),
        ((0.01, 100), {"min_s": 60}, 60.0),
        ((120, 4500), {"max_s": 600}, 600.0),
    ],
)
def test_checkpoint_interval_table(args, kwargs, expected):
    assert checkpoint_interval(*args, **kwargs) == pytest.approx(expected, rel=1e-4)


def test_schedule_time_mode_uses_measured_cost():
    now = [0.0]
    s = CheckpointSchedule(mtbf_s=200.0, initial_cost_s=1.0, clock=lambda: now[0])
    assert s.interval_s == pytest.approx(20.0)  # sqrt(2*1*200)
    now[0] = 19.9
    assert not s.due(10)
    now[0] = 20.0
    assert s.due(10)
    s.record(10, 4.0)  # first measurement replaces the estimate
    assert s.interval_s == pytest.approx(40.0)
    assert not s.due(10)
    s.record(20, 0.0)  # then an exponential moving average: (4 + 0.001) / 2
    assert s.cost_s == pytest.approx(2.0005)


def test_schedule_step_mode_and_override():
    s = CheckpointSchedule(mtbf_s=100.0, every_steps=5, start_step=10, clock=lambda: 0.0)
    assert [st for st in range(10, 30) if s.due(st)][:1] == [15]
    s.record(15, 1.0)
    assert not s.due(19) and s.due(20)
    o = CheckpointSchedule(mtbf_s=100.0, interval_override_s=7.0, clock=lambda: 0.0)
    assert o.interval_s == 7.0


# ------------------------------------------------------------- discovery/order


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("step-000000120", 120),
        ("step-0", 0),
        ("step-000000120\n", None),  # `$` would match before the newline
        ("step-000000120.tmp", None),
        (".step-000000120", None),
        ("step-", None),
        ("step--1", None),
        ("checkpoint-5", 5),       # Hugging Face Trainer's own name
        ("checkpoint_5", 5),       # Accelerate's
        ("checkpoint-x", None),
    ],
)
def test_parse_step(name, step):
    assert checkpoint.parse_step(name) == step


def _fake_checkpoint(root, step, *, size=16, marker=True, truncate_to=None, marker_step=None, raw_marker=None):
    path = root / checkpoint.step_dir_name(step)
    path.mkdir(parents=True)
    (path / "rank-00000.pt").write_bytes(b"\0" * (size if truncate_to is None else truncate_to))
    if raw_marker is not None:
        (path / checkpoint.MARKER).write_text(raw_marker)
    elif marker:
        body = {"step": step if marker_step is None else marker_step,
                "files": {"rank-00000.pt": {"bytes": size, "sha256": None}}}
        (path / checkpoint.MARKER).write_text(json.dumps(body))
    return str(path)


@pytest.mark.parametrize(
    ("layout", "latest", "reasons"),
    [
        # (step, kind) ... -> newest complete step, incomplete reasons by step
        ([(10, "ok"), (20, "ok"), (30, "ok")], 30, {}),
        ([(10, "ok"), (20, "ok"), (30, "nomarker")], 20, {30: "no COMPLETE marker"}),
        ([(10, "ok"), (20, "truncated"), (30, "nomarker")], 10,
         {20: "has 8 bytes, marker says 16", 30: "no COMPLETE marker"}),
        ([(10, "ok"), (20, "badjson")], 10, {20: "unreadable marker"}),
        ([(10, "ok"), (20, "wrongstep")], 10, {20: "does not name this step"}),
        ([(9, "ok"), (10, "ok"), (100, "ok")], 100, {}),  # numeric, not lexical order
        ([(10, "nomarker")], None, {10: "no COMPLETE marker"}),
        ([], None, {}),
    ],
)
def test_discovery_table(tmp_path, layout, latest, reasons):
    kinds = {
        "ok": {},
        "nomarker": {"marker": False},
        "truncated": {"truncate_to": 8},
        "badjson": {"raw_marker": "{not json"},
        "wrongstep": {"marker_step": 999},
    }
    for step, kind in layout:
        _fake_checkpoint(tmp_path, step, **kinds[kind])
    (tmp_path / "not-a-checkpoint").mkdir()
    (tmp_path / "step-000000077").write_text("a file, not a directory")
    found = checkpoint.list_checkpoints(str(tmp_path))
    assert [c.step for c in found] == sorted((s for s, _ in layout), reverse=True)
    best = checkpoint.latest_complete(str(tmp_path))
    assert (best.step if best else None) == latest
    got = {c.step: c.reason for c in found if not c.complete}
    assert set(got) == set(reasons)
    for step, text in reasons.items():
        assert text in got[step]


def test_missing_root_has_no_checkpoints(tmp_path):
    assert checkpoint.list_checkpoints(str(tmp_path / "nope")) == []


def test_prune_keeps_newest_complete_and_drops_stale_partials(tmp_path):
    for step in (10, 20, 30, 40):
        _fake_checkpoint(tmp_path, step)
    _fake_checkpoint(tmp_path, 15, marker=False)  # stale partial, older than newest complete
    _fake_checkpoint(tmp_path, 50, marker=False)  # newer partial: left alone
    removed = checkpoint.prune(str(tmp_path), keep=2)
    assert sorted(os.path.basename(p) for p in removed) == [
        "step-000000010", "step-000000015", "step-000000020"
    ]
    assert [c.step for c in checkpoint.list_checkpoints(str(tmp_path))] == [50, 40, 30]


def test_a_commit_after_resuming_from_an_older_checkpoint_supersedes_the_line_it_left_and_keeps_its_own(tmp_path):
    """Resumed from step 20 while 30 and 40 exist (RESUME_FROM, or 30 and 40 failed to load):
    the commit of step 25 makes the run's own line the newest; 30 and 40 are superseded (their
    files kept until the run saves past them); a later partial is left alone."""
    for step in (10, 20, 30, 40):
        _fake_checkpoint(tmp_path, step)
    _fake_checkpoint(tmp_path, 25)
    _fake_checkpoint(tmp_path, 26, marker=False)  # the next save, being written
    removed = checkpoint.prune(str(tmp_path), keep=2, committed=25)
    assert [os.path.basename(p) for p in removed] == ["step-000000010"]
    listed = {c.step: c for c in checkpoint.list_checkpoints(str(tmp_path))}
    assert sorted(listed) == [20, 25, 26, 30, 40]
    assert [s for s, c in listed.items() if c.complete] == [25, 20]
    assert listed[40].reason.startswith("superseded") and listed[30].reason.startswith("superseded")
    assert checkpoint.latest_complete(str(tmp_path)).step == 25, "a restart resumes this run"
    for step in (35, 45):  # the run saves past the steps it left: their directories go
        _fake_checkpoint(tmp_path, step)
        checkpoint.prune(str(tmp_path), keep=2, committed=step)
    assert [c.step for c in checkpoint.list_checkpoints(str(tmp_path))] == [45, 35]


def test_candidates_start_at_preferred(tmp_path):
    paths = {s: _fake_checkpoint(tmp_path, s) for s in (10, 20, 30)}
    assert checkpoint.candidates(str(tmp_path), paths[20]) == [paths[20], paths[10]]
    assert checkpoint.candidates(str(tmp_path), None) == [paths[30], paths[20], paths[10]]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "f.json"
    info = checkpoint.atomic_write_json(str(target), {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert info["bytes"] == target.stat().st_size
    assert os.listdir(tmp_path) == ["f.json"]

    def boom(_f):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        checkpoint.atomic_write(str(target), boom)
    assert os.listdir(tmp_path) == ["f.json"] and json.loads(target.read_text()) == {"a": 1}


# --------------------------------------------------------- save/load with torch


@requires_torch
def test_save_load_round_trip_and_fallback(tmp_path, measurements):
    import time

    import torch

    root = str(tmp_path)
    states = {}
    for step in (10, 20, 30):
        states[step] = {"step": step, "w": torch.full((256, 256), float(step))}
        t0 = time.perf_counter()
        path = checkpoint.save(root, step, states[step], keep=2)
        write_s = time.perf_counter() - t0
        assert path.endswith(checkpoint.step_dir_name(step))
    marker = json.loads((tmp_path / checkpoint.step_dir_name(30) / "COMPLETE").read_text())
    assert marker["step"] == 30 and marker["format"] == 3
    assert len(marker["files"]["rank-00000.safetensors"]["xxh3_128"]) == 32
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [30, 20]  # keep=2

    t0 = time.perf_counter()
    loaded = checkpoint.load(os.path.join(root, checkpoint.step_dir_name(30)))
    load_s = time.perf_counter() - t0
    assert torch.equal(loaded["w"], states[30]["w"]) and loaded["step"] == 30

    # Same-size corruption passes the launcher's cheap check but not the verified load.
    shard = tmp_path / checkpoint.step_dir_name(30) / "rank-00000.safetensors"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert checkpoint.latest_complete(root).step == 30
    # Without verification (a file another rank has just verified) the damage goes unnoticed.
    assert not torch.equal(checkpoint.load(os.path.join(root, checkpoint.step_dir_name(30)), verify=False)["w"],
                           states[30]["w"])
    skipped = []
    path, obj = checkpoint.load_with_fallback(
        root, os.path.join(root, checkpoint.step_dir_name(30)), checkpoint.load,
        lambda p, e: skipped.append((os.path.basename(p), str(e))),
    )
    assert os.path.basename(path) == checkpoint.step_dir_name(20) and obj["step"] == 20
    assert skipped[0][0] == checkpoint.step_dir_name(30) and "xxh3_128 mismatch" in skipped[0][1]

    # Nothing complete to fall back to.
    assert checkpoint.load_with_fallback(str(tmp_path / "empty"), None, checkpoint.load) == (None, None)
    measurements.record("unit: 256 KiB checkpoint save (atomic+fsync+xxh3)", write_s, "s")
    measurements.record("unit: 256 KiB checkpoint load (read+verify)", load_s, "s")


@requires_torch
def test_a_checkpoint_that_fails_its_digest_stops_counting_as_complete(tmp_path):
    """A newer checkpoint rejected at load still passed the cheap completeness check, so prune
    counted it among the `keep` newest: with keep=1 every new checkpoint was deleted right after
    its commit, and every restart picked the damaged one first."""
    import torch

    root = str(tmp_path)
    for step in (100, 200):
        checkpoint.save(root, step, {"step": step, "w": torch.full((1000,), float(step))}, keep=2)
    damaged = os.path.join(root, checkpoint.step_dir_name(200))
    shard = os.path.join(damaged, "rank-00000.safetensors")
    with open(shard, "r+b") as f:  # bit rot: same size, so only the digest tells
        f.seek(-8, os.SEEK_END)
        f.write(b"\xff" * 8)
    assert checkpoint.latest_complete(root).path == damaged

    path, state = checkpoint.load_with_fallback(root, damaged, checkpoint.load)
    assert path == os.path.join(root, checkpoint.step_dir_name(100)) and state["step"] == 100
    info = checkpoint.inspect(damaged)
    assert not info.complete and "digest" in info.reason
    assert os.path.exists(os.path.join(damaged, checkpoint.REJECTED_MARKER)), "kept for a post-mortem"

    saved = checkpoint.save(root, 150, {"step": 150, "w": torch.full((1000,), 150.0)}, keep=1)
    assert [c.step for c in checkpoint.complete_checkpoints(root)] == [150]
    assert checkpoint.latest_complete(root).path == saved and checkpoint.load(saved)["step"] == 150


@requires_torch
def test_a_checkpoint_that_merely_failed_to_load_stays_complete(tmp_path):
    """An error that may pass (an unreadable file on a flaky mount) is no reason to give up a
    checkpoint: only a digest mismatch is."""
    import torch

    root = str(tmp_path)
    for step in (100, 200):
        checkpoint.save(root, step, {"step": step, "w": torch.ones(10)}, keep=2)
    newest = os.path.join(root, checkpoint.step_dir_name(200))

    def flaky(path):
        if path == newest:
            raise checkpoint.CheckpointCorruptError(f"{path}: [Errno 5] Input/output error")
        return checkpoint.load(path)

    path, _ = checkpoint.load_with_fallback(root, newest, flaky)
    assert path != newest and checkpoint.latest_complete(root).path == newest


@requires_torch
def test_save_replaces_a_stale_partial_directory(tmp_path):
    _fake_checkpoint(tmp_path, 50, marker=False)
    (tmp_path / checkpoint.step_dir_name(50) / "junk").write_text("x")
    path = checkpoint.save(str(tmp_path), 50, {"ok": True})
    assert sorted(os.listdir(path)) == ["COMPLETE", "rank-00000.safetensors"]
    assert checkpoint.load(path) == {"ok": True}
