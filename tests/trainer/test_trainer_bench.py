"""A short smoke run of bench/trainer_bench.py (what `make bench` runs at full size): it must run
and print every ratio. It asserts no speed: speed goals are read from `make bench`."""

from __future__ import annotations

import re
import subprocess
import sys

from trainer_testlib import ROOT, requires_torch

pytestmark = requires_torch

RATIOS = [
    "loader / raw mmap, 8 KiB chunks",
    "loader / raw mmap, 512 KiB chunks",
    "save / raw fsync'd write",
    "save / raw write into freed blocks",
    "restore / raw read, warm",
    "restore / raw read, cold",
    "loop blocked / host memory copy",
]


def test_trainer_bench_runs_and_prints_every_ratio(tmp_path):
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "trainer_bench.py"), "--repeat", "1", "--state-mib", "4",
         "--data-mib", "2", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    for name in RATIOS:
        assert re.search(rf"^  {re.escape(name)} +\d+\.\d\dx median +\d+\.\d\dx min", p.stdout, re.M), \
            f"no ratio {name!r}:\n{p.stdout}"
    assert re.search(r"loader first batch, 8 KiB chunks +median", p.stdout)
    assert list(tmp_path.iterdir()) == [], "the bench cleans up after itself"
