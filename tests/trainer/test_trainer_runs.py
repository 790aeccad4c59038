"""End-to-end runs through the launcher: real torchrun, 2 gloo processes on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher import checkpoint, contract
from trainer_testlib import TRAINER_DIR, last_step, requires_torch

pytestmark = requires_torch

HEARTBEAT_CHECK = str(TRAINER_DIR / "heartbeat-check.sh")


def _mean(xs):
    return sum(xs) / len(xs)


def test_two_process_run_trains_and_loss_falls(trainer_env, launch, measurements):
    env = trainer_env({"steps": 150}, TRAIN_CHECKPOINT_EVERY_STEPS=50, TRAIN_CHECKPOINT_KEEP=2)
    run = launch(env, "train")
    rc = run.wait(timeout=120)
    assert rc == 0, run.stderr_tail()
    wall = time.monotonic() - run.started

    steps = run.steps()
    assert [e["step"] for e in steps] == list(range(1, 151))
    for e in steps:
        assert {"event", "step", "loss", "samples_per_s"} <= set(e)
    losses = [e["loss"] for e in steps]
    first, last = _mean(losses[:20]), _mean(losses[-20:])
    assert last < 0.6 * first, f"loss did not fall enough: first-20 mean {first:.3f}, last-20 mean {last:.3f}"

    start = run.of("trainer_start")[0]
    assert start["world_size"] == 2 and start["backend"] == "gloo"
    saved = run.of("checkpoint_saved")
    assert [e["step"] for e in saved] == [50, 100, 150]
    assert all(e["duration_s"] > 0 for e in saved)
    assert run.of("training_complete")[0]["step"] == 150
    assert run.of("launcher_exit")[0]["rc"] == 0
    # Rank 0's launcher kept the run's figures from the lines it routed (launcher/run_status.py),
    # and published them once more as it ended (no pod to annotate here: the line only).
    status = run.of("run_status")[-1]
    assert (status["step"], status["checkpoint_step"], status["restarts"]) == (150, 150, None)
    assert status["steps_per_s"] > 0 and status["eta_s"] is None  # no total steps stated

    # keep=2: the oldest checkpoint was pruned; the rest are complete.
    found = checkpoint.list_checkpoints(env["TRAIN_CHECKPOINT_DIR"])
    assert [(c.step, c.complete) for c in found] == [(150, True), (100, True)]
    # Every rank wrote its share, none funnelled through rank 0; the event counts them all.
    files = found[0].marker["files"]
    assert sorted(files) == ["rank-00000.safetensors", "rank-00001.safetensors"]
    assert all(meta["bytes"] > 0 for meta in files.values())
    assert saved[-1]["bytes"] == sum(meta["bytes"] for meta in files.values()) > saved[-1]["rank0_bytes"]

    measurements.record("2-proc run: loss first-20 mean", first)
    measurements.record("2-proc run: loss last-20 mean", last)
    measurements.record("2-proc run: samples/s (median)", sorted(e["samples_per_s"] for e in steps)[75], "samples/s")
    measurements.record("2-proc run: checkpoint write (max)", max(e["duration_s"] for e in saved), "s")
    measurements.record("2-proc run: wall time incl. startup", wall, "s")


def test_bad_hparams_fail_the_pod_with_exit_2_and_one_line_per_problem(trainer_env, launch):
    """Found by the trainer before any process group exists, reported through
    TRAIN_CONFIG_ERROR_FILE: the launcher exits 2 (a config error fails the JobSet at once)
    instead of torchrun's 1, which would spend a restart."""
    env = trainer_env({"num_workers": -1, "prefetch_factor": "4", "lr": 0})
    run = launch(env, "bad-hparams")
    assert run.wait(timeout=120) == 2, run.stderr_tail()
    (reported,) = run.of("trainer_config_error")
    assert [line.split(": ")[3].split()[0] for line in reported["errors"]] == ["lr", "num_workers", "prefetch_factor"]
    assert all(line.startswith("example_trainer: error: TRAIN_HPARAMS_FILE ") for line in reported["errors"])
    assert run.of("launcher_exit")[0]["rc"] == 2 and run.of("launcher_exit")[0]["torchrun_rc"] == 1
    assert not run.of("trainer_start")
    stderr = run.err_path.read_text()
    # Each rank reports it, but torchrun stops the other ranks as soon as one exits: the second
    # rank may be gone before it prints.
    assert stderr.count("prefetch_factor must be an integer from 1 to 64, got '4'") in (1, 2)


def _read_only(path) -> list[str]:
    """A command prefix under which `path` is read-only, as the datasets volume is in the pod: a
    read-only bind mount in a mount namespace of the command's own (root writes through a mode)."""
    bind = ["sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(path)]
    for unshare in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        if shutil.which("unshare") is None:
            break
        probe = subprocess.run([*unshare, *bind, "sh", "-c", ': > "$0/probe"', str(path)],
                               capture_output=True, text=True, timeout=30)
        if probe.returncode != 0 and "Read-only file system" in probe.stderr:
            return [*unshare, *bind]
    pytest.skip("cannot make a read-only bind mount here (unshare --mount)")


def test_a_read_only_data_dir_without_packed_data_is_a_config_error(trainer_env, launch, tmp_path):
    """The datasets volume is the datasets bucket, mounted read-only: the trainer cannot pack
    there, and says how to pre-pack instead of failing with a traceback (torchrun's 1, a restart
    that cannot help). Packed as it says, the same mount trains."""
    data = tmp_path / "datasets"
    data.mkdir()
    env = trainer_env({"steps": 10}, TRAIN_DATA_DIR=data)
    read_only = _read_only(data)
    run = launch(env, "unpacked", prefix=read_only)
    assert run.wait(timeout=120) == 2, run.stderr_tail()
    (reported,) = run.of("trainer_config_error")
    (line,) = set(reported["errors"])
    assert f"TRAIN_DATA_DIR {str(data)!r} has no MANIFEST.json and is read-only" in line
    assert "python -m example_trainer.pack_data --hparams " in line and "aws s3 sync " in line
    stderr = run.err_path.read_text()  # torchrun's own traceback (ChildFailedError) is always there
    assert "OSError" not in stderr and "Read-only file system" not in stderr
    assert not run.of("trainer_start") and not os.listdir(data)

    packed = subprocess.run([sys.executable, "-m", "example_trainer.pack_data", "--hparams",
                             env["TRAIN_HPARAMS_FILE"], str(data)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert packed.returncode == 0, packed.stderr
    run = launch(env, "prepacked", prefix=read_only)
    assert run.wait(timeout=120) == 0, run.stderr_tail()
    assert run.of("training_complete")[0]["step"] == 10


def test_sigkill_resume_and_corrupt_checkpoints_are_skipped(trainer_env, launch, measurements):
    every = 20
    hp = {"steps": 100000, "step_delay_s": 0.02}
    env = trainer_env(hp, TRAIN_CHECKPOINT_EVERY_STEPS=every, TRAIN_CHECKPOINT_KEEP=3)
    ckdir = env["TRAIN_CHECKPOINT_DIR"]

    # A: crash (SIGKILL to the whole tree) in the middle of a checkpoint interval.
    a = launch(env, "crash")
    saved = a.wait_for(lambda ev: [e for e in ev if e["event"] == "checkpoint_saved" and e["step"] >= 3 * every],
                       90, "a third checkpoint")
    target = saved[0]["step"] + every // 2
    a.wait_for(lambda ev: last_step(ev) >= target, 30, f"step {target}")
    a.kill()
    last_a = last_step(a.events())
    latest = checkpoint.latest_complete(ckdir)
    assert latest is not None

    # B: restart; it resumes from the newest complete checkpoint.
    b = launch(env, "resume")
    resumed = b.wait_for(lambda ev: [e for e in ev if e["event"] == "checkpoint_resumed"], 60, "resume")[0]
    assert resumed["step"] == latest.step
    assert b.of("resume_selected")[0]["path"] == latest.path
    lost = last_a - resumed["step"]
    assert 0 <= lost <= every, f"lost {lost} steps, checkpoint interval is {every}"
    first_b = b.wait_for(lambda ev: [e for e in ev if e["event"] == "step"], 30, "a step after resume")[0]
    assert first_b["step"] == resumed["step"] + 1
    restart_s = time.monotonic() - b.started
    measurements.record("SIGKILL: steps lost (interval 20 steps)", lost, "steps")
    measurements.record("SIGKILL: checkpoint restore (load+verify)", resumed["duration_s"], "s")
    measurements.record("SIGKILL: relaunch to first step", restart_s, "s")

    b.wait_for(lambda ev: [e for e in ev if e["event"] == "checkpoint_saved" and e["step"] >= resumed["step"] + 2 * every],
               60, "two new checkpoints")
    b.kill()

    # Damage: newest truncated, second newest corrupted in place (same size),
    # and a newer marker-less directory as left by a crash mid-save.
    complete = checkpoint.complete_checkpoints(ckdir)
    assert len(complete) >= 3  # TRAIN_CHECKPOINT_KEEP, or one more when the kill came before the prune
    newest, second, third = complete[:3]
    shard = os.path.join(newest.path, checkpoint.shard_name(0))
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) // 2)
    shard2 = os.path.join(second.path, checkpoint.shard_name(0))
    size2 = os.path.getsize(shard2)
    with open(shard2, "r+b") as f:
        f.seek(size2 // 2)
        f.write(b"\xff" * 64)
    assert os.path.getsize(shard2) == size2
    partial = os.path.join(ckdir, checkpoint.step_dir_name(newest.step + every))
    os.makedirs(partial, exist_ok=True)  # the kill may have come during that save
    with open(os.path.join(partial, checkpoint.shard_name(0)), "wb") as f:
        f.write(b"partial")

    # C: the launcher skips the truncated and the marker-less one (cheap size check),
    # the trainer's verified load rejects the corrupted one and falls back to the third.
    env_c = trainer_env({**hp, "steps": third.step + 5}, TRAIN_CHECKPOINT_EVERY_STEPS=every,
                        TRAIN_CHECKPOINT_KEEP=3, TRAIN_RDZV_PORT=env["TRAIN_RDZV_PORT"])
    c = launch(env_c, "fallback")
    assert c.wait(timeout=90) == 0, c.stderr_tail()
    selected = c.of("resume_selected")[0]
    assert selected["path"] == second.path
    assert {s["step"] for s in selected["skipped"]} == {newest.step, newest.step + every}
    skipped = c.of("checkpoint_skipped")
    assert [s["path"] for s in skipped] == [second.path] and "xxh3_128 mismatch" in skipped[0]["reason"]
    resumed_c = c.of("checkpoint_resumed")[0]
    assert resumed_c["step"] == third.step, "must resume from the newest checkpoint that verifies"
    assert c.steps()[0]["step"] == third.step + 1
    assert c.of("training_complete")[0]["step"] == third.step + 5


def test_sigterm_saves_a_checkpoint_before_exit(trainer_env, launch, measurements):
    env = trainer_env({"steps": 100000, "step_delay_s": 0.02}, TRAIN_CHECKPOINT_EVERY_STEPS=100000)
    run = launch(env, "sigterm")
    run.wait_for(lambda ev: last_step(ev) >= 30, 90, "step 30")
    t0 = time.monotonic()
    os.kill(run.proc.pid, signal.SIGTERM)  # as the kubelet does: to the container's PID 1
    rc = run.wait(timeout=30)
    exit_s = time.monotonic() - t0
    assert rc == 143, run.stderr_tail()
    # The launcher's own bound without a stated grace period (the kubelet's SIGKILL comes at 30 s).
    assert exit_s < contract.UNSTATED_GRACE_S - contract.STOP_MARGIN_S, f"took {exit_s:.1f}s to exit after SIGTERM"

    events = run.events()
    final = last_step(events)
    saved = run.of("checkpoint_saved")
    assert [(e["step"], e["reason"]) for e in saved] == [(final, "signal")]
    assert run.of("stopped")[0]["step"] == final
    assert run.of("signal_forwarded")[0]["signal"] == "SIGTERM"
    exit_event = run.of("launcher_exit")[0]
    assert exit_event["rc"] == 143 and exit_event["signal"] == "SIGTERM"
    latest = checkpoint.latest_complete(env["TRAIN_CHECKPOINT_DIR"])
    assert latest is not None and latest.step == final
    assert checkpoint.load(latest.path)["step"] == final

    measurements.record("SIGTERM: signal to exit", exit_s, "s")
    measurements.record("SIGTERM: final checkpoint write", saved[0]["duration_s"], "s")


def test_a_stop_on_one_pod_is_a_stop_on_every_pod(trainer_env, launch, tmp_path):
    """A spot reclaim signals one pod of the gang; every rank stops at the same step and saves.
    torchrun reports any worker's non-zero exit as its own 1, so the pods that got no signal
    must still exit 143: an exit 1 there would make the Job count the reclaim as a failure."""
    env = trainer_env({"steps": 100000, "step_delay_s": 0.02}, PET_NNODES=2, PET_NPROC_PER_NODE=1,
                      TRAIN_CHECKPOINT_EVERY_STEPS=100000)
    pods = [launch({**env, "TRAIN_HEARTBEAT_FILE": str(tmp_path / f"pod{i}" / "heartbeat")}, f"pod{i}")
            for i in range(2)]
    deadline = time.monotonic() + 90
    while last_step(pods[0].events() + pods[1].events()) < 20:
        assert time.monotonic() < deadline, "\n".join(p.stderr_tail() for p in pods)
        assert all(p.proc.poll() is None for p in pods), "\n".join(p.stderr_tail() for p in pods)
        time.sleep(0.05)
    # Global rank 0 (which logs the steps) may be on either pod: signal the other one, so the
    # pod that only learns of the stop through the step's all-reduce is the one that reports it.
    signalled, peer = (pods[0], pods[1]) if pods[1].steps() else (pods[1], pods[0])
    os.kill(signalled.proc.pid, signal.SIGTERM)
    assert signalled.wait(timeout=30) == 143, signalled.stderr_tail()
    assert peer.wait(timeout=30) == 143, peer.stderr_tail()

    (stopped,) = peer.of("stopped")
    assert peer.of("trainer_stopped")[0]["step"] == stopped["step"]
    peer_exit = peer.of("launcher_exit")[0]
    assert (peer_exit["rc"], peer_exit["torchrun_rc"], peer_exit["signal"]) == (143, 1, None)
    assert signalled.of("launcher_exit")[0]["signal"] == "SIGTERM"
    latest = checkpoint.latest_complete(env["TRAIN_CHECKPOINT_DIR"])
    assert latest is not None and latest.step == stopped["step"]


def test_a_checkpoint_slower_than_the_process_group_timeout_still_commits(trainer_env, launch):
    """pg_timeout_s bounds the loop's collectives, so that a hung peer becomes an error. Writing a
    large state to a shared file system can take longer, and the ranks that do not write wait
    for it in the checkpoint group's collectives: by default those must not share that bound."""
    env = trainer_env({"steps": 30, "pg_timeout_s": 4}, TRAIN_CHECKPOINT_EVERY_STEPS=30, SLOW_WRITE_S=8)
    run = launch(env, "slow-save", command=[str(Path(__file__).parent / "slow_checkpoint_writes.py")])
    assert run.wait(timeout=120) == 0, run.stderr_tail()
    (saved,) = run.of("checkpoint_saved")
    assert saved["step"] == 30 and saved["duration_s"] >= 8
    assert checkpoint.latest_complete(env["TRAIN_CHECKPOINT_DIR"]).step == 30


def _check(env, max_age):
    return subprocess.run(
        ["sh", HEARTBEAT_CHECK, str(max_age)], env=env, capture_output=True, text=True, timeout=10
    )


def test_heartbeat_goes_stale_when_the_loop_stalls(trainer_env, launch, measurements):
    env = trainer_env({"steps": 100000, "step_delay_s": 0.05, "stall_after_steps": 40},
                      TRAIN_CHECKPOINT_EVERY_STEPS=100000)
    hb = env["TRAIN_HEARTBEAT_FILE"]
    os.makedirs(os.path.dirname(hb), exist_ok=True)
    with open(hb, "w") as f:
        f.write("left over from an earlier container\n")
    run = launch(env, "stall")
    run.wait_for(lambda ev: [e for e in ev if e["event"] == "launcher_start"], 30, "launcher start")

    run.wait_for(lambda ev: last_step(ev) >= 5, 90, "step 5")
    probe = _check(env, 2)
    assert probe.returncode == 0, probe.stderr
    with open(hb) as f:
        assert '"step"' in f.read(), "the launcher must remove a stale heartbeat before starting"
    m1 = os.stat(hb).st_mtime
    run.wait_for(lambda ev: last_step(ev) >= 25, 30, "step 25")
    m2 = os.stat(hb).st_mtime
    assert m2 > m1, "heartbeat not refreshed while training makes progress"

    run.wait_for(lambda ev: [e for e in ev if e["event"] == "stalling"], 30, "the stall")
    stalled_at = time.monotonic()
    m3 = os.stat(hb).st_mtime
    time.sleep(1.5)
    assert os.stat(hb).st_mtime == m3, "heartbeat refreshed by a stalled loop"
    assert run.proc.poll() is None

    deadline = time.monotonic() + 10
    while True:
        probe = _check(env, 2)
        if probe.returncode == 1:
            break
        assert probe.returncode == 0, probe.stderr
        assert time.monotonic() < deadline, "heartbeat-check 2 still passes 10s into the stall"
        time.sleep(0.25)
    assert "no progress" in probe.stderr
    measurements.record("stall: heartbeat-check 2 failing after", time.monotonic() - stalled_at, "s")
    run.kill()
