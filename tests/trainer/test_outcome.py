"""The launcher's outcomes: one table to exit code and JobSet action (launcher/outcome.py), the
one trainer/README.md shows. The table against the planned JobSet failure policies is
tests/test_workload.py's test_each_launcher_outcome_gets_the_jobset_action_its_table_says."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher.outcome import OUTCOMES, JobSetAction, Outcome, exit_code, markdown_table

README = Path(__file__).resolve().parents[2] / "trainer" / "README.md"


def test_every_outcome_has_one_row():
    assert list(OUTCOMES) == list(Outcome)


def test_the_readme_shows_the_table():
    assert markdown_table() in README.read_text(), (
        "trainer/README.md's exit-code table differs from launcher/outcome.py's OUTCOMES: paste the output of "
        "`cd trainer && python -m launcher.outcome` over it")


@pytest.mark.parametrize(("outcome", "passed", "code"), [
    (Outcome.FINISHED, None, 0),
    (Outcome.FINISHED, 1, 0),                   # finished before the signal: torchrun's 1 does not show
    (Outcome.STOPPED, 0, 143),                  # a stop never reads as success
    (Outcome.STOPPED, 1, 143),                  # a peer's torchrun 1 after a gang stop
    (Outcome.STOPPED_BEFORE_START, 143, 143),
    (Outcome.STOPPED_BEFORE_START, 130, 130),   # SIGINT
    (Outcome.CONTRACT_ERROR, None, 2),
    (Outcome.TRAINER_CONFIG_ERROR, 1, 2),       # torchrun's 1 would spend a restart
    (Outcome.RESTART_BUDGET_SPENT, None, 2),
    (Outcome.WRONG_NETWORK, 0, 2),
    (Outcome.TORCHRUN_NOT_STARTED, None, 2),
    (Outcome.RENDEZVOUS_UNREACHABLE, None, 1),
    (Outcome.NOT_STOPPED, 143, 1),              # 143 would pass for a disruption
    (Outcome.WORKER_FAILED, 1, 1),
    (Outcome.WORKER_FAILED, 137, 137),          # torchrun's own code
])
def test_exit_codes(outcome, passed, code):
    assert exit_code(outcome, passed) == code


@pytest.mark.parametrize(("outcome", "action"), [
    (Outcome.FINISHED, JobSetAction.NONE),
    (Outcome.PRINTED_ONLY, JobSetAction.NONE),
    (Outcome.STOPPED, JobSetAction.RESTART_FREE),
    (Outcome.STOPPED_BEFORE_START, JobSetAction.RESTART_FREE),
    (Outcome.CONTRACT_ERROR, JobSetAction.FAIL),          # never retried
    (Outcome.TRAINER_CONFIG_ERROR, JobSetAction.FAIL),
    (Outcome.RESTART_BUDGET_SPENT, JobSetAction.FAIL),
    (Outcome.WRONG_NETWORK, JobSetAction.FAIL),
    (Outcome.TORCHRUN_NOT_STARTED, JobSetAction.FAIL),
    (Outcome.RENDEZVOUS_UNREACHABLE, JobSetAction.RESTART),
    (Outcome.NOT_STOPPED, JobSetAction.RESTART),          # a hang must spend a restart
    (Outcome.WORKER_FAILED, JobSetAction.RESTART),
])
def test_jobset_actions(outcome, action):
    assert OUTCOMES[outcome].action is action


def test_only_a_finished_run_or_a_printout_exits_0():
    assert {o for o, e in OUTCOMES.items() if e.code == 0 or e.action is JobSetAction.NONE} == {
        Outcome.FINISHED, Outcome.PRINTED_ONLY}
