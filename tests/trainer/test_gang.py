"""The gang bounds: restarts (failures and disruptions together) and the rendezvous wait."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from launcher import gang
from trainer_testlib import TRAINER_DIR


@pytest.mark.parametrize(("environ", "attempt"), [
    ({}, None),                                                                   # outside a JobSet
    ({"TRAIN_RESTART_ATTEMPT": "0", "TRAIN_MAX_GANG_RESTARTS": "23"}, 0),
    ({"TRAIN_RESTART_ATTEMPT": "23", "TRAIN_MAX_GANG_RESTARTS": "23"}, 23),      # the last allowed
])
def test_restarts_within_the_budget_start(environ, attempt):
    assert gang.check_restart_budget(environ) == attempt


@pytest.mark.parametrize(("environ", "message"), [
    ({"TRAIN_RESTART_ATTEMPT": "24", "TRAIN_MAX_GANG_RESTARTS": "23"}, "restarted 24 times, more than TRAIN_MAX_GANG_RESTARTS=23"),
    ({"TRAIN_RESTART_ATTEMPT": "x", "TRAIN_MAX_GANG_RESTARTS": "3"}, "TRAIN_RESTART_ATTEMPT must be a whole number"),
    ({"TRAIN_RESTART_ATTEMPT": "1", "TRAIN_MAX_GANG_RESTARTS": "-1"}, "TRAIN_MAX_GANG_RESTARTS must be >= 0"),
])
def test_a_gang_past_its_budget_may_not_start(environ, message):
    with pytest.raises(gang.GangError, match=message):
        gang.check_restart_budget(environ)


def test_launcher_exits_2_past_the_restart_budget(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAIN_")}
    env.update({"PYTHONPATH": str(TRAINER_DIR), "TRAIN_JOB_ID": "j", "TRAIN_RESTART_ATTEMPT": "4",
                "TRAIN_MAX_GANG_RESTARTS": "3"})
    run = subprocess.run([sys.executable, "-m", "launcher", "--", "-m", "example_trainer.train"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.startswith("launcher: error: the gang has restarted 4 times") and "Traceback" not in run.stderr


@pytest.mark.parametrize(("rdzv_host", "hostname", "is_host"), [
    ("pretrain-p5-node-0-0.pretrain-p5", "pretrain-p5-node-0-0", True),     # pod 0 of the JobSet
    ("pretrain-p5-node-0-0.pretrain-p5", "pretrain-p5-node-0-1", False),
    ("pretrain-p5-node-0-0.pretrain-p5", "pretrain-p5-node-0-0.pretrain-p5.training-prod.svc.cluster.local", True),
    ("pretrain-p5-node-0-0", "pretrain-p5-node-0-0", True),
    ("localhost", "anything", None),                                          # torch decides without DNS
    ("10.0.0.5", "anything", None),
    ("fd00::1", "anything", None),
])
def test_pod_0_hosts_the_store_by_its_own_name(rdzv_host, hostname, is_host):
    assert gang.hosts_rendezvous(rdzv_host, hostname) is is_host


def test_the_role_goes_into_torchrun_after_the_rendezvous_id():
    cmd = ["python", "-m", "torch.distributed.run", "--rdzv-id", "job", "--max-restarts", "0", "-m", "train"]
    assert gang.with_rendezvous_role(cmd, True) == [
        "python", "-m", "torch.distributed.run", "--rdzv-id", "job", "--rdzv-conf", "is_host=1",
        "--max-restarts", "0", "-m", "train"]
    assert "is_host=0" in gang.with_rendezvous_role(cmd, False)
    assert gang.with_rendezvous_role(cmd, None) == cmd


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_peers_wait_until_pod_0_resolves_and_listens():
    clock = FakeClock()
    outcomes = iter([socket.gaierror(-2, "Name or service not known"), socket.gaierror(-2, "Name or service not known"),
                     ConnectionRefusedError(111, "Connection refused"), "connected"])

    def connect(_address, _timeout):
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return None

    assert gang.wait_for_rendezvous("pod-0.job", 29400, 900, connect=connect, clock=clock, sleep=clock.sleep) == 6.0


def test_peers_give_up_after_the_bound_naming_the_reason():
    clock = FakeClock()

    def connect(_address, _timeout):
        raise socket.gaierror(-2, "Name or service not known")

    with pytest.raises(gang.GangError, match=r"pod-0.job:29400 was not reachable within 30 s \(gaierror"):
        gang.wait_for_rendezvous("pod-0.job", 29400, 30, connect=connect, clock=clock, sleep=clock.sleep)
    assert clock.now == 30


def test_a_real_listener_is_found():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert gang.wait_for_rendezvous("127.0.0.1", server.getsockname()[1], 5) < 5
