"""Fixtures: every test reads stacks through the same synthesiser `make plan` uses. Helpers that
tests import by name live in modules of their own (stack_configs.py), never here: two conftest.py
(this one and tests/trainer's) would answer to one name `conftest`."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from components.config import stack as stack_model
from offline.plan import Plan, synthesize

# The suite judges EKS version support as of this day, never the wall clock: the same commit
# passes or fails the same way on any date (tests/test_kubernetes_versions.py moves the day itself).
TESTS_TODAY = date(2026, 11, 30)
os.environ["PLAN_TODAY"] = TESTS_TODAY.isoformat()  # plans, in this process and in subprocesses


@pytest.fixture(autouse=True, scope="session")
def _config_judged_on_a_fixed_day():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stack_model, "current_date", lambda: TESTS_TODAY)
        yield


_plans: dict[str, Plan] = {}


# The bootstrap is a project of its own (bootstrap/Pulumi.yaml) whose one stack is `bootstrap`.
BOOTSTRAP = "bootstrap"


@pytest.fixture(scope="session")
def plan_of():
    """plan_of(stack) -> Plan, synthesised once per test session (`bootstrap`: the bootstrap's)."""
    def get(stack: str) -> Plan:
        if stack not in _plans:
            project = {"project_dir": Path(__file__).resolve().parent.parent / BOOTSTRAP} if stack == BOOTSTRAP else {}
            _plans[stack] = synthesize(stack, **project)
        return _plans[stack]
    return get


# Tests that start real launcher gangs (launcher + torchrun + workers, 5-60 s each on 2 cores) are
# scenarios: `make test` leaves them out to stay near 12 minutes, `make test-scenarios` runs only
# them, and CI runs both. A test is one by asking for a gang fixture (tests/trainer/conftest.py
# `launch`, test_bring_your_own_trainer.py `gang_of`), so a new gang test needs no mark of its own;
# any other whole-program test of 20 s or more (several stacks planned end to end, the browser)
# says `@pytest.mark.scenario` with its reason.
GANG_FIXTURES = frozenset({"launch", "gang_of"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if GANG_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.scenario)
