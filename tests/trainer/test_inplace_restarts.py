"""In-place restarts (launcher.inplace, PET_MAX_RESTARTS): the fault matrix's in-place cases
on a 2-node localhost gang of the plain integration (tests/trainer/byot/plain_train.py), two
launchers, one worker each, gloo on CPU.

- a crashed worker (SIGKILL: no hook runs) restarts both pods' workers inside the running
  launchers; the run completes with the same losses as an uninterrupted one;
- crashes past the budget fail the pod (exit 1, what the JobSet failure policy recreates on), the
  other pod ends within the restart wait, and the recreate resumes from the newest checkpoint;
- what must not change with restarts on: a stop is 143 on both pods and starts no round; a config
  error is exit 2 and starts no round; a frozen peer fails the other pod within the collective
  timeout plus the restart wait (and not a stop, not a success).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from launcher import checkpoint, inplace, main, supervisor
from launcher import outcome as outcome_table
from test_bring_your_own_trainer import COLLECTIVE_TIMEOUT_S, STEPS, gang_of, newest_complete
from trainer_testlib import descendants, requires_torch

pytestmark = requires_torch
__all__ = ["gang_of"]  # the fixture, shared with the bring-your-own-trainer matrix


def _workers(pod) -> list[int]:
    """The pod's training workers: the children of its torchrun (the launcher's one child)."""
    torchruns = supervisor.children_of(pod.proc.pid, running=True)
    return [w for t in torchruns for w in supervisor.children_of(t, running=True)]


def _crash_worker(pod) -> None:
    deadline = time.monotonic() + 30
    while not (pids := _workers(pod)):
        assert time.monotonic() < deadline, pod.stderr_tail()
        time.sleep(0.05)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _committed_a_checkpoint(job, timeout: float = 120) -> None:
    """Wait until the gang has committed a complete checkpoint."""
    deadline = time.monotonic() + timeout
    while checkpoint.latest_complete(str(job.tmp / "checkpoints")) is None:
        assert time.monotonic() < deadline, "no complete checkpoint within the timeout"
        time.sleep(0.2)


def _stepped_after_restart(job, timeout: float = 120) -> int:
    """Until a worker of a restarted round trained a step (a loss line after `workers_restarted` in
    the same pod's output); that step."""
    deadline = time.monotonic() + timeout
    while True:
        for pod in job.pods:
            events = pod.events()
            starts = [i for i, e in enumerate(events) if e.get("event") == "workers_restarted"]
            later = [e["step"] for e in events[starts[-1]:] if e.get("event") == "test_loss"] if starts else []
            if later:
                return later[0]
        assert time.monotonic() < deadline and all(p.proc.poll() is None for p in job.pods), \
            "\n".join(p.stderr_tail(15) for p in job.pods)
        time.sleep(0.05)


def test_the_plan_of_restarts_reads_from_the_environment():
    assert inplace.from_env({}) is None
    assert inplace.from_env({"PET_MAX_RESTARTS": "0"}) is None
    assert inplace.from_env({"PET_MAX_RESTARTS": "3"}) == inplace.InPlace(3, inplace.DEFAULT_RESTART_WAIT_S)
    assert inplace.from_env({"PET_MAX_RESTARTS": "100"}).restarts == 100  # torchrun sets no upper bound
    assert inplace.from_env({"PET_MAX_RESTARTS": "1", "TRAIN_INPLACE_RESTART_WAIT_S": "45"}).restart_wait_s == 45
    for bad in ("-1", "x"):  # torchrun would exit 1 on these (an AssertionError, a ValueError): a restart spent
        with pytest.raises(inplace.InPlaceError, match=f"PET_MAX_RESTARTS must be a whole number >= 0, got '?{bad}'?"):
            inplace.from_env({"PET_MAX_RESTARTS": bad})
    with pytest.raises(inplace.InPlaceError, match="TRAIN_INPLACE_RESTARTS is now torchrun's own PET_MAX_RESTARTS: "
                                                   "set PET_MAX_RESTARTS='2' instead"):
        inplace.from_env({"TRAIN_INPLACE_RESTARTS": "2"})


def test_torchrun_reads_the_restart_rounds_itself_and_a_bad_value_exits_2(tmp_path):
    from launcher import contract

    c = contract.from_env({"TRAIN_JOB_ID": "j"})
    assert "--max-restarts" not in main.torchrun_command(c, ["train.py"])  # a flag would override PET_MAX_RESTARTS
    env = {"TRAIN_JOB_ID": "j", "PET_MAX_RESTARTS": "many", "PATH": os.environ["PATH"]}
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "launcher", "--", "train.py"], env={**env, "PYTHONPATH": str(
        main.worker_site.PACKAGE_PARENT)}, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == "launcher: error: PET_MAX_RESTARTS must be a whole number >= 0, got 'many'"


def test_a_round_is_a_new_set_of_workers_and_clears_the_failed_file(monkeypatch, tmp_path):
    now, running = [0.0], [[]]
    monkeypatch.setattr(supervisor, "children_of", lambda pid, running=False, r=running: list(r[0]))
    # Workers of pid < 20 started before any report file the test writes, the others after it.
    monkeypatch.setattr(supervisor, "started_at", lambda pid: 0.0 if pid < 20 else float("inf"))
    failed = tmp_path / "worker-failed"
    watch = supervisor.WorkerWatch(1, str(failed), clock=lambda: now[0], exit_grace_s=30)
    for t, pids in ((0.0, [11]), (1.0, [11, 12]), (2.0, [12])):  # started one by one, ended one by one
        now[0], running[0] = t, pids
        assert not watch.torchrun_outlived_its_workers()
    assert watch.rounds == 0
    failed.touch()
    now[0], running[0] = 3.0, []
    assert not watch.torchrun_outlived_its_workers()
    now[0], running[0] = 5.5, [21, 22]
    assert not watch.torchrun_outlived_its_workers()
    assert (watch.rounds, watch.round_gap_s, failed.exists()) == (1, 2.5, False)
    failed.touch()
    running[0] = []
    for t, outlived in ((6.0, False), (35.0, False), (36.0, True)):  # no new round within the wait
        now[0] = t
        assert watch.torchrun_outlived_its_workers() is outlived
    now[0], running[0] = 37.0, [13]  # a round whose worker failed before the look that first sees it:
    assert not watch.torchrun_outlived_its_workers()
    assert (watch.rounds, failed.exists()) == (2, True)  # its failure file is its own, and kept


def _supervisor(monkeypatch, tmp_path, running):
    """A Supervisor with in-place restarts over a stand-in torchrun whose workers are `running[0]`."""
    now = [0.0]
    monkeypatch.setattr(supervisor, "children_of", lambda pid, running=False, r=running: list(r[0]))
    # Workers of pid < 20 started before any report file the test writes, the others after it.
    monkeypatch.setattr(supervisor, "started_at", lambda pid: 0.0 if pid < 20 else float("inf"))
    env = {"TRAIN_STOPPED_FILE": str(tmp_path / "stopped"), "TRAIN_CONFIG_ERROR_FILE": str(tmp_path / "config-error")}
    stop = supervisor.StopRequest(clock=lambda: now[0])
    sup = supervisor.Supervisor(["torchrun"], env, stop, grace_s=60.0, restart_wait_s=30.0)
    stop.on_signal = None
    sup.proc = type("Proc", (), {"pid": -1, "returncode": None})()  # pyright: ignore[reportAttributeAccessIssue]
    ends = []
    sup._kill = lambda end, workers=None: ends.append((end, workers))  # pyright: ignore[reportAttributeAccessIssue]
    watch = supervisor.WorkerWatch(-1, str(tmp_path / "worker-failed"), clock=lambda: now[0], exit_grace_s=30.0)
    return sup, watch, now, ends


def _look(sup, watch, now, at: float) -> None:
    now[0] = at
    sup._check(watch)


@pytest.mark.parametrize("report", ["stopped", "config-error"])
def test_a_stop_or_a_config_error_ends_torchrun_once_the_workers_are_gone(monkeypatch, tmp_path, report):
    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, running)
    _look(sup, watch, now, 0.0)
    (tmp_path / report).write_text("{}")  # written before the worker exits: it still runs
    _look(sup, watch, now, 1.0)
    assert ends == []
    running[0] = []
    _look(sup, watch, now, 2.0)
    assert ends == [(supervisor.TorchrunEnd.NOT_RESTARTED, [])]


def test_a_round_that_started_despite_a_report_is_ended_with_its_workers(monkeypatch, tmp_path):
    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, running)
    _look(sup, watch, now, 0.0)
    (tmp_path / "config-error").write_text("bad lr\n")
    _look(sup, watch, now, 1.0)
    running[0] = [21]  # torchrun's next round came before a look saw the workers gone
    _look(sup, watch, now, 2.0)
    assert ends == [(supervisor.TorchrunEnd.NOT_RESTARTED, [21])]


@pytest.mark.parametrize("report", ["stopped", "config-error"])
def test_a_report_and_a_new_round_between_two_looks_end_that_round(monkeypatch, tmp_path, report):
    """The first look after the report already sees the next round: its workers started after the
    report was written, so the round is an earlier round's retry, never one to train on."""
    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, running)
    _look(sup, watch, now, 0.0)
    written = tmp_path / report
    written.write_text("{}")
    os.utime(written, (1000.0, 1000.0))
    monkeypatch.setattr(supervisor, "started_at", lambda pid: 1000.5)  # the new worker, after the report
    running[0] = [21]
    _look(sup, watch, now, 1.0)
    assert ends == [(supervisor.TorchrunEnd.NOT_RESTARTED, [21])]


def test_a_report_written_by_the_running_round_lets_its_workers_end(monkeypatch, tmp_path):
    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, running)
    monkeypatch.setattr(supervisor, "started_at", lambda pid: 1000.0)
    _look(sup, watch, now, 0.0)
    written = tmp_path / "config-error"
    written.write_text("bad lr\n")
    os.utime(written, (1000.5, 1000.5))
    _look(sup, watch, now, 1.0)
    assert ends == []


def test_a_process_start_time_is_read_from_proc_to_the_clock_tick():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        started = supervisor.started_at(child.pid)
        assert started is not None and abs(started - time.time()) < 2.0
        assert supervisor.started_at(os.getpid()) < started  # this process is older
    finally:
        child.kill()
        child.wait()
    assert supervisor.started_at(2**22 + 7) is None  # no such process


def test_a_round_after_a_stop_signal_is_ended_and_a_plain_failure_is_restarted(monkeypatch, tmp_path):
    import signal as signals

    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, running)
    _look(sup, watch, now, 0.0)
    running[0] = [21]  # a worker failed and reported nothing else: a round, left to torchrun
    _look(sup, watch, now, 1.0)
    assert (watch.rounds, ends) == (1, [])
    sup.stop_request.request(signals.SIGTERM)
    running[0] = [31]  # its workers died without a stop, and torchrun restarted them
    _look(sup, watch, now, 2.0)
    assert ends == [(supervisor.TorchrunEnd.NOT_RESTARTED, [31])]
    assert supervisor.TORCHRUN_RC[supervisor.TorchrunEnd.NOT_RESTARTED] == 1  # never a success
    outcome, _ = main.classify(1, signalled=True, config_errors=[], stopped=None, finished=False)
    assert outcome_table.exit_code(outcome, 1) == 1


def test_a_round_seen_only_after_the_stop_signal_but_started_before_it_stops_on_its_own(monkeypatch, tmp_path):
    """The signal reached the new round's workers (forwarded to torchrun's children as they were):
    killing them would lose their stop save and end the pod as not stopped."""
    import signal as signals

    running = [[11]]
    sup, watch, now, ends = _supervisor(monkeypatch, tmp_path, running)
    forwarded = []
    monkeypatch.setattr(supervisor.os, "kill", lambda pid, signum: forwarded.append(pid))
    sup.stop_request.on_signal = sup._forward
    _look(sup, watch, now, 0.0)
    running[0] = [21, 22]  # the next round, started between two looks
    sup.stop_request.request(signals.SIGTERM)
    assert forwarded == [21, 22]
    _look(sup, watch, now, 0.5)
    assert (watch.rounds, ends) == (1, [])  # seen now, and left to save and stop
    (tmp_path / "stopped").write_text("{}")
    running[0] = []
    _look(sup, watch, now, 1.0)
    assert ends == [(supervisor.TorchrunEnd.NOT_RESTARTED, [])]  # the stop is the pod's end: 143


@pytest.mark.parametrize("restart_count, written, reported", [
    ("0", ["config-error"], None),  # the first round: the launcher's own files are checked by it
    ("1", [], None),
    ("1", ["config-error"], "a config error"),
    ("2", ["stopped"], "a stop with the gang"),
    ("1", ["stopped", "config-error"], "a config error"),
])
def test_a_restart_rounds_worker_sees_what_an_earlier_round_reported(tmp_path, restart_count, written, reported):
    env = {"TORCHELASTIC_RESTART_COUNT": restart_count, "TRAIN_CONFIG_ERROR_FILE": str(tmp_path / "config-error"),
           "TRAIN_STOPPED_FILE": str(tmp_path / "stopped")}
    for name in written:
        (tmp_path / name).write_text("{}")
    assert inplace.reported_before(env) == reported


def test_a_restart_round_after_a_config_error_does_not_run_the_trainer(tmp_path):
    """torchrun may start the next round before the launcher's next look: that round's workers end
    at their start, so the trainer neither reports the error again nor trains."""
    (tmp_path / "config-error").write_text("TypeError: bad lr\n")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": main.worker_site.python_path(main.worker_site.PACKAGE_PARENT),
           "LOCAL_RANK": "0", "RANK": "0", "TRAIN_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
           "TORCHELASTIC_RESTART_COUNT": "1", "TRAIN_CONFIG_ERROR_FILE": str(tmp_path / "config-error")}
    run = subprocess.run([sys.executable, "-c", "print('trained')"], env=env, capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout) == (1, ""), run.stderr
    assert run.stderr == "launcher: restart round 1 not run: an earlier round reported a config error\n"
    env["TORCHELASTIC_RESTART_COUNT"] = "0"  # the first round runs whatever files there are
    assert subprocess.run([sys.executable, "-c", "print('trained')"], env=env, capture_output=True, text=True,
                          timeout=60).stdout == "trained\n"


def test_a_crashed_worker_restarts_the_gang_in_place(gang_of, measurements):
    whole = gang_of("whole", "plain", {"steps": STEPS})
    whole.start()
    assert whole.wait() == [0, 0]
    baseline = whole.losses()

    job = gang_of("crash", "plain", {"steps": STEPS, "step_delay_s": 0.1}, PET_MAX_RESTARTS="2")
    job.start()
    job.at_step(6)
    crashed_at = max(job.losses())
    fault = time.monotonic()
    _crash_worker(job.pods[1])
    _stepped_after_restart(job)
    measurements.record("in place: worker crash to the next step (plain, 2 pods)", time.monotonic() - fault, "s")
    assert job.wait() == [0, 0]
    for pod in job.pods:  # both pods' workers restarted; neither launcher did
        assert [e["round"] for e in pod.of("workers_restarted")] == [1], pod.stderr_tail()
        assert len(pod.of("launcher_start")) == 1
    resumed = [e for p in job.pods for e in p.of("checkpoint_resumed")]
    saved = {e["step"] for p in job.pods for e in p.of("checkpoint_saved")}
    # A step's loss line comes before its save: at `crashed_at` the save of newest_at(crashed_at - 1) was
    # committed; the crash, a moment later under load, may come after a newer one.
    assert resumed and resumed[0]["step"] in saved and resumed[0]["step"] >= newest_at(crashed_at - 1), (resumed, saved)
    final = job.losses()
    assert max(final) == STEPS
    for step, loss in final.items():
        assert loss == pytest.approx(baseline[step], rel=1e-5, abs=1e-6), f"step {step}"


def newest_at(step: int, every: int = 4) -> int:
    """The newest checkpoint step at or before `step` with TRAIN_CHECKPOINT_EVERY_STEPS=every."""
    return step - step % every


def test_crashes_past_the_budget_fall_back_to_a_recreate(gang_of):
    job = gang_of("budget", "plain", {"steps": STEPS, "step_delay_s": 0.1}, PET_MAX_RESTARTS="1")
    job.start()
    job.at_step(5)
    _crash_worker(job.pods[1])
    _stepped_after_restart(job)
    _committed_a_checkpoint(job)  # what the recreate resumes from (a fast round may not have saved one yet)
    _crash_worker(job.pods[1])
    failed = time.monotonic()
    rcs = job.wait(inplace.DEFAULT_RESTART_WAIT_S + 60)
    assert rcs[1] == 1, job.pods[1].stderr_tail()  # past its budget: torchrun's failure, as without restarts
    assert rcs[0] not in (0, 2, 143), job.pods[0].stderr_tail()
    assert time.monotonic() - failed < inplace.DEFAULT_RESTART_WAIT_S + 30
    committed = newest_complete(job.tmp / "checkpoints").step
    job.start()  # JobSet's recreate: new launchers resume from the newest checkpoint
    assert job.wait() == [0, 0]
    assert job.resumed()["step"] == committed


def test_a_stop_is_still_a_stop_on_every_pod_and_starts_no_round(gang_of):
    job = gang_of("stop", "plain", {"steps": 1000, "step_delay_s": 0.1}, PET_MAX_RESTARTS="2")
    job.start()
    job.at_step(4)
    job.signal_pod(1, signal.SIGTERM)
    assert job.wait(90) == [143, 143], "\n".join(p.stderr_tail(15) for p in job.pods)
    assert not [e for p in job.pods for e in p.of("workers_restarted")]


def test_a_config_error_exits_2_and_is_not_retried_in_place(gang_of):
    job = gang_of("config", "plain", {"steps": 10, "lr": "3e-4"}, PET_NNODES="1", PET_MAX_RESTARTS="3")
    job.start(pods=1)
    assert job.wait(90) == [2]
    pod = job.pods[0]
    # torchrun may start a round before the launcher reads the worker's error file (a race the
    # machine's load decides: a forked round fails again within 0.5 s); that round's worker ends at
    # its start (launcher.inplace.reported_before), so the error is reported once, never twice.
    assert len(pod.of("worker_error")) == 1, pod.stderr_tail()


def test_a_frozen_peer_still_fails_the_gang(gang_of, measurements):
    job = gang_of("frozen", "plain", {"steps": 1000, "step_delay_s": 0.05}, PET_MAX_RESTARTS="2")
    job.start()
    job.at_step(3)
    for pid in [job.pods[1].proc.pid, *descendants(job.pods[1].proc.pid)]:
        os.kill(pid, signal.SIGSTOP)
    frozen = time.monotonic()
    bound = COLLECTIVE_TIMEOUT_S + inplace.DEFAULT_RESTART_WAIT_S + 20
    rc = job.pods[0].wait(bound)
    assert rc not in (0, 143), job.pods[0].stderr_tail()
    measurements.record("in place: frozen peer failed the other after", time.monotonic() - frozen, "s")
