"""Shared helpers: every test reads stacks through the same synthesiser `make plan` uses."""

from __future__ import annotations

import copy
import os
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "scripts"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from plan import Plan, synthesize  # noqa: E402

from components.config import decode_raw_config  # noqa: E402
from components.config import stack as stack_model  # noqa: E402
from components.config.stack_file import stack_config  # noqa: E402

# The suite judges EKS version support as of this day, never the wall clock: the same commit
# passes or fails the same way on any date (tests/test_kubernetes_versions.py moves the day itself).
TESTS_TODAY = date(2026, 11, 30)
os.environ["PLAN_TODAY"] = TESTS_TODAY.isoformat()  # plans, in this process and in subprocesses


@pytest.fixture(autouse=True, scope="session")
def _config_judged_on_a_fixed_day():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stack_model, "current_date", lambda: TESTS_TODAY)
        yield


PROJECT = "gpu-training"
PLATFORM_STACKS = ("dev", "staging", "prod")
# Stacks whose Kubernetes manifests are validated and scanned.
TEAM_STACKS = ("team-vision-prod",)
MANIFEST_STACKS = PLATFORM_STACKS + TEAM_STACKS
DELETE = object()


def raw_config(stack: str) -> dict[str, Any]:
    """The decoded config of a stack file, as `load_stack_config` receives it."""
    _, config, _ = stack_config(stack)
    return decode_raw_config(config)


def mutate(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy of `raw` with `project:key.sub.sub` set to `value` (or removed with DELETE)."""
    result = copy.deepcopy(raw)
    top, *rest = path.split(".")
    key = top if ":" in top else f"{PROJECT}:{top}"
    if not rest:
        if value is DELETE:
            result.pop(key, None)
        else:
            result[key] = value
        return result
    node = result.setdefault(key, {})
    for part in rest[:-1]:
        node = node.setdefault(part, {})
    if value is DELETE:
        node.pop(rest[-1], None)
    else:
        node[rest[-1]] = value
    return result


_plans: dict[str, Plan] = {}


@pytest.fixture(scope="session")
def plan_of():
    """plan_of(stack) -> Plan, synthesised once per test session."""
    def get(stack: str) -> Plan:
        if stack not in _plans:
            _plans[stack] = synthesize(stack)
        return _plans[stack]
    return get
