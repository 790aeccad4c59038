"""A short smoke run of bench/trainer_bench.py (what `make bench` runs at full size): it must run
and print every ratio; and the loader's floor must stay the cheapest read of the same bytes. It
asserts no speed: speed goals are read from `make bench`."""

from __future__ import annotations

import dis
import json
import os
import re
import subprocess
import sys

import pytest
from trainer_testlib import ROOT, TRAINER_DIR, requires_torch

pytestmark = requires_torch

GOALS = [
    "replicated save / DCP save",  # first: its ranks are forked before the other parts hold their state
    "replicated restore / DCP restore",
    "loader / raw mmap, 8 KiB chunks",
    "loader / raw mmap, 512 KiB chunks",
    "first save blocked / host memory copy",
    "save / raw fsync'd write",
    "loop blocked / host memory copy",
    "save / dcp.async_save, under load",
    "memory-tier save blocked / host memory copy",
    "restore / raw read, warm",
]
SHOWN = [
    "reader in one process / raw, 8 KiB chunks",
    "reader in one process / raw, 512 KiB chunks",
    "load alone / raw read, warm",
    "restore / raw read, cold",
]


def test_trainer_bench_runs_and_gives_a_verdict_per_goal(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trainer_bench.py"), "--pairs", "1", "--state-mib", "4",
         "--data-mib", "2", "--replicated-mib", "4", "--dir", str(out), "--json", str(tmp_path / "latest.json")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(TRAINER_DIR)},  # as `make bench` runs it (the trainer image's path)
    )
    assert p.returncode == 0, p.stdout + p.stderr
    for name in GOALS:
        assert re.search(rf"^  {re.escape(name)}  \[\d+ pairs?, \d+ warm-up discarded; goal [<>]= [\d.]+ by paired "
                         rf"(wall|cpu) ratio: (met|not met)\]$", p.stdout, re.M), f"no verdict for {name!r}:\n{p.stdout}"
    for name in SHOWN:
        assert re.search(rf"^  {re.escape(name)}  \[.*shown, no goal\]$", p.stdout, re.M), f"no {name!r}:\n{p.stdout}"
    assert re.search(r"paired +\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)", p.stdout)
    saved = json.loads((tmp_path / "latest.json").read_text())["trainer"]
    assert [r["name"] for r in saved["results"] if r["goal"]] == GOALS
    assert {r["verdict"] for r in saved["results"] if r["goal"]} <= {"met", "not met"}
    assert list(out.iterdir()) == [], "the bench cleans up after itself"


def test_trainer_bench_says_what_disk_it_needs_before_it_starts(tmp_path, capsys):
    bench = _bench_module()
    assert bench.main(["--state-mib", str(1 << 20), "--check-disk", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "needs 6144.1 GiB free" in err and "Fix:" in err
    assert bench.main(["--state-mib", "4", "--data-mib", "2", "--check-disk", "--dir", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("state_mib", "data_mib", "replicated_mib", "gib"), [
    (512, 512, 0, 3.0625), (64, 1024, 0, 1.0625), (1, 1, 0, 0.0684),
    (512, 512, 256, 3.0625),  # the replicated gang's 4 x 256 MiB: less than the saves' 6 x 512 MiB
    (64, 64, 512, 2.0625),    # 4 x 512 MiB
])
def test_disk_needed_holds_two_checkpoints_two_raw_files_and_two_dcp_ones(state_mib, data_mib, replicated_mib, gib):
    assert _bench_module().disk_needed(state_mib << 20, data_mib << 20, replicated_mib << 20) / 2**30 == pytest.approx(
        gib, abs=1e-3)


CALL_OPCODES = {dis.opmap[name] for name in ("CALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW",
                                             "CALL_FUNCTION_EX", "CALL_KW") if name in dis.opmap}


def _calls_in(code, run) -> int:
    """Calls (of anything: Python functions, builtins, torch methods) executed by the frames of
    `code` while `run()` runs, counted opcode by opcode."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if frame.f_code is not code:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode" and frame.f_code.co_code[frame.f_lasti] in CALL_OPCODES:
            count += 1
        return trace

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


def _bench_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("trainer_bench", ROOT / "bench" / "trainer_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_loader_floor_is_the_cheapest_read_of_the_same_bytes(tmp_path):
    """The floor reads each chunk's bytes, in order, into the same buffers, with no call per chunk
    (the floor it replaced made four torch calls per chunk and ran 2.3x slower than a plain copy
    for 8 KiB chunks); nor does the loader's reader make one, once the shards are mapped."""
    from example_trainer.data import ShardChunks
    from launcher.state_file import bytes_of

    bench = _bench_module()
    bench.pack(tmp_path, dim=8, batch=4, data_bytes=40 * 4 * (8 * 4 + 8))
    ds = ShardChunks(str(tmp_path), 4)
    features, labels = memoryview(bytearray(ds.feature_bytes)), memoryview(bytearray(ds.label_bytes))
    for idx in (len(ds) - 1, 0, len(ds) // 2 + 1):  # in both shards
        bench.raw_mmap_pass(ds, [idx], features, labels)()
        x, y = ds[idx]
        assert bytes(features) == bytes(bytes_of(x)) and bytes(labels) == bytes(bytes_of(y))

    order = list(range(len(ds)))[::-1]
    assert len(order) >= 10
    passes = [bench.raw_mmap_pass(ds, part, features, labels) for part in (order[:1], order)]
    assert [_calls_in(run.__code__, run) for run in passes] == [0, 0]
    views = [(features, labels)] * len(order)
    ds.read_chunks_into(order, views)  # maps the shards
    calls = [_calls_in(ShardChunks.read_chunks_into.__code__, lambda part=part: ds.read_chunks_into(part, views))
             for part in (order[:1], order)]
    assert calls[0] == calls[1], f"calls per chunk in read_chunks_into: {calls}"
