"""The gang bounds: restarts (failures and disruptions together) and the rendezvous wait."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

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


def test_the_rendezvous_conf_goes_into_torchrun_after_the_rendezvous_id():
    cmd = ["python", "-m", "torch.distributed.run", "--rdzv-id", "job", "--max-restarts", "0", "-m", "train"]
    assert gang.with_rendezvous_conf(cmd, True, 1020) == [
        "python", "-m", "torch.distributed.run", "--rdzv-id", "job", "--rdzv-conf", "join_timeout=1020,is_host=1",
        "--max-restarts", "0", "-m", "train"]
    assert "join_timeout=1020,is_host=0" in gang.with_rendezvous_conf(cmd, False, 1020)
    assert "join_timeout=1020" in gang.with_rendezvous_conf(cmd, None, 1020)
    # The launcher's keys win over PET_RDZV_CONF's; the others stay.
    assert "read_timeout=90,join_timeout=1020,is_host=1" in gang.with_rendezvous_conf(
        cmd, True, 1020, "read_timeout=90, join_timeout=60,is_host=0")


@pytest.mark.parametrize(("rdzv_host", "wait_s", "is_host"), [
    ("127.0.0.1", None, None),                       # default TRAIN_RDZV_WAIT_S
    ("gang-node-0-0.gang", "1500", False),
    (socket.gethostname().split(".")[0] + ".gang", "1500", True),  # pod 0, which waits longest
])
def test_torchrun_lets_the_gang_join_as_long_as_the_launcher_lets_pods_arrive(tmp_path, rdzv_host, wait_s, is_host):
    """Pods other than pod 0 may reach the store up to TRAIN_RDZV_WAIT_S after they start;
    torchrun's join timeout (600 s by default) must not give up on them first. Read back as
    torchrun itself reads its command line."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.rendezvous import RendezvousParameters, dynamic_rendezvous
    from torch.distributed.elastic.rendezvous.utils import _parse_rendezvous_config

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "PET_"))}
    env.update({"PYTHONPATH": str(TRAINER_DIR), "TRAIN_JOB_ID": "gang", "PET_NNODES": "2",
                "TRAIN_RDZV_HOST": rdzv_host, "TRAIN_CHECKPOINT_DIR": str(tmp_path / "ck"),
                "PET_RDZV_CONF": "read_timeout=120"})  # replaced by --rdzv-conf: its keys must survive
    if wait_s:
        env["TRAIN_RDZV_WAIT_S"] = wait_s
    p = subprocess.run([sys.executable, "-m", "launcher", "--dry-run", "--", "-m", "example_trainer.train"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    cmd = json.loads(p.stdout)["cmd"]
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    args = torchrun.parse_args(cmd[3:])
    params = RendezvousParameters(args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id, 2, 2,
                                  **_parse_rendezvous_config(args.rdzv_conf))
    join = dynamic_rendezvous._get_timeout(params, "join")
    assert join is not None and join.total_seconds() >= int(wait_s or gang.DEFAULT_RDZV_WAIT_S) + 60
    assert params.get_as_bool("is_host") is is_host
    assert params.get_as_int("read_timeout") == 120


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


def test_peers_stop_waiting_when_asked():
    clock = FakeClock()
    asks = iter([False, False, True])

    def connect(_address, _timeout):
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(gang.StopRequestedError):
        gang.wait_for_rendezvous("pod-0.job", 29400, 900, connect=connect, clock=clock, sleep=clock.sleep,
                                 stop_requested=lambda: next(asks))
    assert clock.now == 4.0


def test_sigterm_during_the_rendezvous_wait_stops_the_launcher(tmp_path):
    """The kubelet's SIGTERM (a reclaim, a deleted gang) can come while a pod waits for pod 0, up to
    TRAIN_RDZV_WAIT_S. The launcher is the container's PID 1, which ignores a signal it has no
    handler for: it must handle SIGTERM from its start, not only once torchrun runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "PET_"))}
    env.update({"PYTHONPATH": str(TRAINER_DIR), "TRAIN_JOB_ID": "gang", "PET_NNODES": "2",
                "TRAIN_RDZV_HOST": "gang-node-0-0.gang.invalid", "TRAIN_RDZV_WAIT_S": "300",
                "TRAIN_CHECKPOINT_DIR": str(tmp_path / "ck"), "TRAIN_HEARTBEAT_FILE": str(tmp_path / "hb" / "heartbeat"),
                "TRAIN_HPARAMS_FILE": str(TRAINER_DIR / "example_trainer" / "hparams.yaml")})
    out = tmp_path / "stdout"
    with open(out, "wb") as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "launcher", "--", "-m", "example_trainer.train"], env=env,
                                stdout=stdout, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b'"resume_selected"' not in out.read_bytes():  # the last event before the wait
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    (exit_event,) = [e for e in events if e["event"] == "launcher_exit"]
    assert exit_event["rc"] == 143 and exit_event["signal"] == "SIGTERM" and exit_event["torchrun_rc"] is None
    assert not [e for e in events if e["event"] in ("rendezvous_reachable", "rendezvous_unreachable")]
