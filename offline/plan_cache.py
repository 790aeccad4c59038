"""Base plans kept between plan diffs: a commit's plans are made once per environment and day.

Every push to a pull request diffs against the same base commit, and the base side of that diff
is the same every time: the same tree, planned by its own scripts/plan.py with the same Python
environment. So `scripts/plan-diff` keeps the base plans it makes, and the next diff against that
base takes them instead of planning them again; only the head is planned. An entry is keyed by
what decides a plan's bytes:

- the base commit's tree (its content, whatever the commit's message or parents);
- the Python environment that planned it: the interpreter's version and every installed
  distribution with its version (the `*.dist-info` names of its site-packages), so an SDK or
  provider upgrade plans afresh;
- the day the plans judge each Kubernetes version against EKS's calendar on: PLAN_TODAY where
  set (offline/plan.py reads it, and the plans inherit it), else today (UTC).

Nothing else enters a plan (offline/plan.py reads no clock but the day, no network, no account).
tests/test_plan_diff.py holds a diff from cached base plans to the same bytes as one without.

The cache is a directory (PLAN_DIFF_CACHE, default build/plan-diff-cache; "0" turns it off):
<tree>-<environment>-<day>/<stack label>/ holds one plan directory, written to a temporary name
and renamed into place whole, so a run that dies leaves no half entry. The KEPT_ENTRIES keys used
last are kept. In CI only main writes it: a push to main plans every stack into it
(`scripts/plan-diff --fill-cache`, .github/workflows/main.yml) and saves it; a pull request's
run restores the entry of its base commit and never saves one, so no pull request's code can hand
another run (or a later push of its own) base plans it made.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

CACHE_VARIABLE = "PLAN_DIFF_CACHE"
TODAY_VARIABLE = "PLAN_TODAY"
"""offline/plan.py's day override (its TODAY_VARIABLE): the plans are judged on that day."""
STALE_STAGING_SECONDS = 3600
"""A staging directory older than this belongs to a run that died: prune removes it."""
KEPT_ENTRIES = 8
"""Keys kept (each a base commit's plans, ~5 MB for every stack of this project)."""
COMPLETE = ".complete"
"""Written last into a stack's entry: an entry without it is not read."""


def environment_fingerprint() -> str:
    """The interpreter and every distribution installed for it (names and versions), hashed."""
    site = Path(sysconfig.get_paths()["purelib"])
    installed = sorted(p.name for p in site.glob("*.dist-info")) if site.is_dir() else []
    text = "\n".join([sys.version, str(site), *installed])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def label_dir(label: str) -> str:
    """`dev` -> main/dev, `bootstrap/bootstrap` -> bootstrap/bootstrap (no label escapes the entry)."""
    prefix, _, stack = label.rpartition("/")
    if not stack or stack.startswith(".") or (prefix and prefix.startswith(".")):
        raise ValueError(f"not a stack label: {label!r}")
    return f"{prefix or 'main'}/{stack}"


class BasePlanCache:
    def __init__(self, root: Path, tree: str, *, fingerprint: str | None = None, day: str | None = None):
        self.root = root
        day = day or os.environ.get(TODAY_VARIABLE, "").strip() or datetime.now(UTC).date().isoformat()
        self.key = f"{tree}-{fingerprint or environment_fingerprint()}-{day}"

    @classmethod
    def from_environment(cls, default_root: Path, tree: str) -> BasePlanCache | None:
        """The cache PLAN_DIFF_CACHE names (default_root when unset); None when it is "0" or empty."""
        configured = os.environ.get(CACHE_VARIABLE)
        if configured is not None and configured.strip() in ("", "0"):
            return None
        return cls(Path(configured) if configured else default_root, tree)

    def entry(self, label: str) -> Path:
        return self.root / self.key / label_dir(label)

    def get(self, label: str) -> Path | None:
        """The plan directory kept for this label, or None."""
        entry = self.entry(label)
        if not (entry / COMPLETE).is_file():
            return None
        with contextlib.suppress(OSError):
            os.utime(self.root / self.key)  # used now: prune keeps the keys used last
        return entry

    def put(self, label: str, plan_dir: Path) -> None:
        """Keep a copy of a plan directory; an entry already there stays as it is."""
        entry = self.entry(label)
        if (entry / COMPLETE).is_file():
            return
        staging = None
        try:  # a cache that cannot be written is no cache, not a failure
            entry.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
            shutil.copytree(plan_dir, staging, dirs_exist_ok=True)
            (staging / COMPLETE).write_text("")
            shutil.rmtree(entry, ignore_errors=True)  # an incomplete entry of a run that died
            os.rename(staging, entry)
        except OSError:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)

    def prune(self, keep: int = KEPT_ENTRIES) -> None:
        """Remove all but the `keep` keys used last, and staging directories of runs that died."""
        try:
            keys = sorted((p for p in self.root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            return
        for stale in keys[keep:]:
            if stale.name != self.key:
                shutil.rmtree(stale, ignore_errors=True)
        now = time.time()
        for staging in self.root.glob("*/*/.*-*"):
            with contextlib.suppress(OSError):
                if staging.is_dir() and now - staging.stat().st_mtime > STALE_STAGING_SECONDS:
                    shutil.rmtree(staging, ignore_errors=True)
