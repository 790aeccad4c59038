"""bench/recovery_bench.py's pure parts (the bench itself runs in `make bench`, several minutes):
a recovery's breakdown adds up to the fault-to-step time it explains, and a bad class exits 2."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from trainer_testlib import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("recovery_bench", ROOT / "bench" / "recovery_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["recovery_bench"] = module
    spec.loader.exec_module(module)
    return module


def _detail(events: list[dict], **extra) -> dict:
    resumed = next(e for e in events if e["event"] == "checkpoint_resumed")
    step = next(e for e in events if e["event"] == "step" and e["ts"] > resumed["ts"])
    return {"events": events, "resumed": resumed, "step": step, **extra}


def test_an_in_place_breakdown_adds_up_to_the_fault_to_step_time(bench):
    events = [{"ts": 100.4, "event": "workers_exited"}, {"ts": 102.0, "event": "workers_restarted"},
              {"ts": 102.5, "event": "workers_restarted"}, {"ts": 102.7, "event": "bench_worker_start"},
              {"ts": 110.0, "event": "checkpoint_resumed", "step": 10, "duration_s": 0.5},
              {"ts": 111.0, "event": "step", "step": 11}]
    parts = bench.breakdown(_detail(events), 100.0, in_place=True)
    assert list(parts.values()) == [0.4, 2.1, 0.2, 6.8, 0.5, 1.0]  # the round starts when the last pod's does
    assert sum(parts.values()) == pytest.approx(11.0)


def test_a_full_restart_breakdown_starts_at_the_recreate(bench):
    events = [{"ts": 103.3, "event": "launcher_start"}, {"ts": 103.4, "event": "launcher_start"},
              {"ts": 110.0, "event": "bench_worker_start"},
              {"ts": 119.0, "event": "checkpoint_resumed", "step": 10, "duration_s": 1.0},
              {"ts": 120.0, "event": "step", "step": 11}]
    parts = bench.breakdown(_detail(events, pods=[102.9, 103.0]), 100.0, in_place=False)
    assert list(parts.values()) == [3.0, 0.4, 6.6, 8.0, 1.0, 1.0]
    assert sum(parts.values()) == pytest.approx(20.0)


def test_an_unknown_fault_class_exits_2(bench, capsys):
    assert bench.main(["--classes", "crash,meteor"]) == 2
    assert "unknown classes ['meteor']" in capsys.readouterr().err
