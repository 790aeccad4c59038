"""The pack's tests read the offline plans `make plans` writes (build/<stack>/resources.json):
the same inputs the engine hands the policies. `make policy-test` writes them first."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

POLICY_DIR = Path(__file__).resolve().parent.parent
ROOT = POLICY_DIR.parent
for path in (POLICY_DIR, POLICY_DIR / "tests"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from gpu_training_policy.offline import load_records  # noqa: E402

BUILD_DIR = Path(os.environ.get("GPU_TRAINING_BUILD_DIR", ROOT / "build"))
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
# The bootstrap program (state bucket, keys, CI roles) is a project of its own; `make plans` plans it too.
BOOTSTRAP_STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "bootstrap").glob("Pulumi.*.yaml"))

_plans: dict[str, list[dict[str, Any]]] = {}


def plan_records(stack: str) -> list[dict[str, Any]]:
    if stack not in _plans:
        plan_dir = BUILD_DIR / stack
        if not (plan_dir / "resources.json").is_file():
            pytest.fail(f"no offline plan in {plan_dir}: run `make plans` first (`make policy-test` does)", pytrace=False)
        _plans[stack] = load_records(plan_dir)
    return _plans[stack]
