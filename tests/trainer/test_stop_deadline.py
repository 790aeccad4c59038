"""After a stop signal the launcher ends within the pod's grace period (issue 44, item 3): a worker
that exits 0 on SIGTERM (as Lightning's does) while its peer on the other pod runs on leaves
torchrun in its exit barrier, which waits up to 300 s for the other agents; the kubelet's SIGKILL
would come first. Two launchers on localhost, one process each, a few seconds."""

from __future__ import annotations

import signal
import time

from trainer_testlib import requires_torch

pytestmark = requires_torch

GRACE_S = 15  # contract.STOP_MARGIN_S (5) below it: the launcher ends about 10 s after the signal, time
# enough for the worker's exit on a loaded 2-core machine

EXITS_0_ON_SIGTERM = """\
import json, os, signal, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
stop = []
signal.signal(signal.SIGTERM, lambda s, f: stop.append(s))
print(json.dumps({"event": "test_ready"}), flush=True)
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    if stop and os.environ["POD"] == "0":
        sys.exit(0)
    time.sleep(0.05)
"""


def test_a_worker_that_finishes_first_never_holds_its_pod_past_the_grace_period(trainer_env, launch, tmp_path):
    script = tmp_path / "script.py"
    script.write_text(EXITS_0_ON_SIGTERM)
    env = trainer_env(PET_NNODES="2", PET_NPROC_PER_NODE="1", TRAIN_TERMINATION_GRACE_S=str(GRACE_S))
    pods = [launch({**env, "POD": str(pod), "TRAIN_HEARTBEAT_FILE": str(tmp_path / f"pod{pod}" / "heartbeat")},
                   command=[str(script)]) for pod in (0, 1)]
    for pod in pods:
        pod.wait_for(lambda events: any(e["event"] == "test_ready" for e in events), 90, "the gang")
    signalled = time.monotonic()
    pods[0].proc.send_signal(signal.SIGTERM)
    rc = pods[0].wait(GRACE_S + 30)
    took = time.monotonic() - signalled
    assert took < GRACE_S, f"pod 0 took {took:.1f} s after SIGTERM; its grace period is {GRACE_S} s"
    assert rc == 143, pods[0].stderr_tail()  # exit 0 after a stop, training unfinished: a stop
    assert pods[0].of("workers_exited"), "the wait after the workers' exit is said aloud"
    (deadline,) = pods[0].of("stop_deadline")
    assert deadline["end"] == "barrier_at_stop_deadline"
    assert pods[1].proc.poll() is None  # the peer ran on


def test_a_grace_period_the_launcher_cannot_end_within_is_a_contract_error():
    import pytest
    from launcher import contract

    base = {"TRAIN_JOB_ID": "j"}
    assert contract.from_env(base).termination_grace_s is None  # unstated: only the exit barrier is bounded
    assert contract.from_env({**base, "TRAIN_TERMINATION_GRACE_S": "270"}).termination_grace_s == 270
    with pytest.raises(contract.ContractError, match="TRAIN_TERMINATION_GRACE_S must be more than"):
        contract.from_env({**base, "TRAIN_TERMINATION_GRACE_S": "5"})


def _supervisor(monkeypatch, tmp_path, grace_s, running):
    """A Supervisor of a stand-in torchrun whose workers are `running[0]`, with a settable clock."""
    from launcher import supervisor

    now = [0.0]
    monkeypatch.setattr(supervisor, "children_of", lambda pid, running=False, workers=running: list(workers[0]))
    stop = supervisor.StopRequest(clock=lambda: now[0])
    sup = supervisor.Supervisor(["torchrun"], {}, stop, grace_s=grace_s)
    stop.on_signal = None  # nothing to forward to: the stand-in has no process
    sup.proc = type("Proc", (), {"pid": -1, "returncode": None})()  # pyright: ignore[reportAttributeAccessIssue]
    ends = []
    sup._kill = lambda end, workers=None: ends.append(end)  # pyright: ignore[reportAttributeAccessIssue]
    watch = supervisor.WorkerWatch(-1, str(tmp_path / "worker-failed"), clock=lambda: now[0])
    return sup, watch, now, ends


def test_the_stop_deadline_cuts_workers_only_with_a_stated_grace(monkeypatch, tmp_path):
    import signal as signals

    from launcher.supervisor import TorchrunEnd

    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, None, running)
    sup._check(watch)  # the workers started
    sup.stop_request.request(signals.SIGTERM)
    now[0] = 60.0
    sup._check(watch)
    assert ends == [], "no grace stated: workers still at work are the kubelet's to end"
    running[0] = []
    now[0] = 61.0
    sup._check(watch)
    assert ends == [TorchrunEnd.BARRIER_AT_STOP_DEADLINE]  # the exit barrier, past 30 - 5 s

    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, 60.0, running)
    sup._check(watch)
    sup.stop_request.request(signals.SIGTERM)
    now[0] = 54.0
    sup._check(watch)
    assert ends == []
    now[0] = 55.0
    sup._check(watch)
    assert ends == [TorchrunEnd.WORKERS_AT_STOP_DEADLINE]
