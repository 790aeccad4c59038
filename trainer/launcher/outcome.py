"""How a launcher run ends: one name per outcome, and one table from it to the pod's exit code and
what the JobSet then does (its failure policy: components/workload/training_job.py). torch's
elastic agent names its ends the same way (WorkerState, RunResult in
torch/distributed/elastic/agent/server/api.py). trainer/README.md's exit-code table is rendered
from OUTCOMES (`markdown_table`; tests/trainer/test_outcome.py keeps the two equal)."""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass


class JobSetAction(enum.StrEnum):
    """What the JobSet does with a pod that exits with an outcome's code (training_job.py's rules)."""

    NONE = "none: the pod succeeded"
    FAIL = "FailJobSet: no restart"
    RESTART_FREE = "RestartJobSetAndIgnoreMaxRestarts: restart, spends nothing"
    RESTART = "RestartJobSet: restart, spends one of `maxRestarts`"


class Outcome(enum.Enum):
    FINISHED = "finished"
    PRINTED_ONLY = "printed_only"
    STOPPED = "stopped"
    STOPPED_BEFORE_START = "stopped_before_start"
    CONTRACT_ERROR = "contract_error"
    TRAINER_CONFIG_ERROR = "trainer_config_error"
    RESTART_BUDGET_SPENT = "restart_budget_spent"
    WRONG_NETWORK = "wrong_network"
    TORCHRUN_NOT_STARTED = "torchrun_not_started"
    RENDEZVOUS_UNREACHABLE = "rendezvous_unreachable"
    NOT_STOPPED = "not_stopped"
    WORKER_FAILED = "worker_failed"


@dataclass(frozen=True)
class Ending:
    code: int
    """The pod's exit code; where `code_from` says so, the usual one of a code passed through."""
    action: JobSetAction
    """What the JobSet does with `code`."""
    meaning: str
    code_from: str = ""
    """Where a code passed through comes from (the exit code is then that one)."""


STOPPED_CODE = 128 + signal.SIGTERM  # what a stopped trainer exits with, whichever signal it got
CONFIG_CODE = 2

OUTCOMES: dict[Outcome, Ending] = {
    Outcome.FINISHED: Ending(0, JobSetAction.NONE, "training finished (after a stop signal: only if the trainer "
                             "wrote `TRAIN_FINISHED_FILE`, also when the signal came in torchrun's exit barrier)"),
    Outcome.PRINTED_ONLY: Ending(0, JobSetAction.NONE, "`--help` or `--dry-run`: printed, nothing started"),
    Outcome.STOPPED: Ending(STOPPED_CODE, JobSetAction.RESTART_FREE, (
        "the workers stopped with their gang after saving (`TRAIN_STOPPED_FILE`), on the pod that got SIGTERM and "
        "on every other pod of the gang; or they exited 0 after a stop signal without declaring training finished "
        "(`TRAIN_FINISHED_FILE`). A stop never reads as success")),
    Outcome.STOPPED_BEFORE_START: Ending(STOPPED_CODE, JobSetAction.RESTART_FREE, (
        "a stop signal before torchrun started (during the rendezvous wait): nothing to save. SIGINT gives 130, "
        "which spends a restart"), code_from="128 + the signal's number"),
    Outcome.CONTRACT_ERROR: Ending(CONFIG_CODE, JobSetAction.FAIL, (
        "bad contract, usage, command or hparams, found before torchrun starts (one line on stderr)")),
    Outcome.TRAINER_CONFIG_ERROR: Ending(CONFIG_CODE, JobSetAction.FAIL, (
        "a trainer reported a config error through `TRAIN_CONFIG_ERROR_FILE` (torchrun itself exits 1 whenever a "
        "worker fails, which would spend a restart); never retried in place")),
    Outcome.RESTART_BUDGET_SPENT: Ending(CONFIG_CODE, JobSetAction.FAIL, (
        "the gang restarted more than `TRAIN_MAX_GANG_RESTARTS` times, disruptions included")),
    Outcome.WRONG_NETWORK: Ending(CONFIG_CODE, JobSetAction.FAIL, "NCCL on another network than EFA on an EFA pool"),
    Outcome.TORCHRUN_NOT_STARTED: Ending(CONFIG_CODE, JobSetAction.FAIL, "torchrun could not be started (the image)"),
    Outcome.RENDEZVOUS_UNREACHABLE: Ending(1, JobSetAction.RESTART, (
        "pod 0's rendezvous store was not reachable within `TRAIN_RDZV_WAIT_S`: pod 0 may come up next time")),
    Outcome.NOT_STOPPED: Ending(1, JobSetAction.RESTART, (
        "a stop signal came and the workers never reported a stop: a hang that the liveness or startup probe "
        "killed, or workers that died first. Exit 143 would pass for a disruption")),
    Outcome.WORKER_FAILED: Ending(1, JobSetAction.RESTART, (
        "a worker failed (past the in-place restarts), or torchrun hung after it did"),
        code_from="torchrun's exit code"),
}


def exit_code(outcome: Outcome, passed: int | None = None) -> int:
    """The pod's exit code for `outcome`; `passed`: the code it passes through (torchrun's, 128+N)."""
    ending = OUTCOMES[outcome]
    return passed if ending.code_from and passed is not None else ending.code


def markdown_table() -> str:
    """trainer/README.md's exit-code table."""
    rows = ["| outcome | exit code | JobSet | when |", "| --- | --- | --- | --- |"]
    for outcome, ending in OUTCOMES.items():
        code = f"`{ending.code}`" + (f" ({ending.code_from})" if ending.code_from else "")
        rows.append(f"| `{outcome.value}` | {code} | {ending.action.value} | {ending.meaning} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
