"""Fixtures: every test reads stacks through the same synthesiser `make plan` uses. Helpers that
tests import by name live in modules of their own (stack_configs.py), never here: two conftest.py
(this one and tests/trainer's) would answer to one name `conftest`."""

from __future__ import annotations

import fcntl
import os
import pickle
from datetime import date
from pathlib import Path

import pytest

from components.config import stack as stack_model
from components.config.placeholders import PLACEHOLDERS, PlaceholderKind
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


def _synthesize(stack: str) -> Plan:
    if stack == BOOTSTRAP:
        return synthesize(stack, project_dir=Path(__file__).resolve().parent.parent / BOOTSTRAP)
    return synthesize(stack)


class _PlanPickler(pickle.Pickler):
    """A plan's placeholders hold their kind, whose `matches` is a lambda pickle cannot name: the
    kind travels as its name and comes back as the same object of PLACEHOLDERS."""

    def persistent_id(self, obj: object) -> str | None:
        return obj.name if isinstance(obj, PlaceholderKind) else None


class _PlanUnpickler(pickle.Unpickler):
    def persistent_load(self, pid: str) -> PlaceholderKind:
        return next(kind for kind in PLACEHOLDERS if kind.name == pid)


def _plan_shared_by_workers(stack: str, directory: Path) -> Plan:
    """The first xdist worker to ask plans the stack and leaves it in `directory` (this session's
    own temporary directory, so never a stale plan); the others wait on the lock and read it
    (a few ms against 2-5 s of CPU for each plan, once per worker before)."""
    stored = directory / f"plan-{stack}.pickle"
    with (directory / f"plan-{stack}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if stored.exists():
            with stored.open("rb") as file:
                return _PlanUnpickler(file).load()
        plan = _synthesize(stack)
        partial = stored.with_suffix(".partial")
        with partial.open("wb") as file:
            _PlanPickler(file, protocol=pickle.HIGHEST_PROTOCOL).dump(plan)
        partial.rename(stored)
        return plan


@pytest.fixture(scope="session")
def plan_of(tmp_path_factory: pytest.TempPathFactory, worker_id: str):
    """plan_of(stack) -> Plan, synthesised once per test session (`bootstrap`: the bootstrap's)
    and shared by its xdist workers (pytest-xdist's `worker_id` is "master" without them)."""
    # Each worker's basetemp is <the session's>/popen-gwN: the parent is the whole session's.
    shared = tmp_path_factory.getbasetemp().parent if worker_id != "master" else None

    def get(stack: str) -> Plan:
        if stack not in _plans:
            _plans[stack] = _plan_shared_by_workers(stack, shared) if shared else _synthesize(stack)
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
