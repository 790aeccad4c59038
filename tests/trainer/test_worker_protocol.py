"""The pieces every trainer integration stands on, in one process: the pod's exit code from what
the workers reported, which errors count as config errors, the collective-timeout bound, and the
commit/verify/select protocol over directories a framework wrote."""

from __future__ import annotations

import datetime
import json
import os
import signal

import pytest
from launcher import checkpoint, framework_checkpoint, main, supervisor, worker_hooks
from launcher.framework_checkpoint import Ranks
from launcher.outcome import Outcome, exit_code

STOP = {"step": 12, "signal": signal.SIGTERM}


@pytest.mark.parametrize(("torchrun_rc", "signalled", "config_errors", "stopped", "finished", "outcome", "rc"), [
    (0, False, [], None, False, Outcome.FINISHED, 0),    # a plain script ran to its end: it declares nothing
    (0, False, [], None, True, Outcome.FINISHED, 0),
    (0, True, [], None, True, Outcome.FINISHED, 0),      # finished as the signal came: still a success
    (0, True, [], None, False, Outcome.STOPPED, 143),    # exit 0 after a stop, unfinished (Lightning's SIGTERM path)
    (0, False, [], STOP, False, Outcome.STOPPED, 143),   # exit 0 after a peer's gang stop, unfinished
    (0, False, [], STOP, True, Outcome.FINISHED, 0),
    (1, False, ["lr: bad"], None, False, Outcome.TRAINER_CONFIG_ERROR, 2),
    (1, False, [], STOP, False, Outcome.STOPPED, 143),   # the pod whose workers got no signal, after a gang stop
    (143, True, [], STOP, False, Outcome.STOPPED, 143),
    (1, True, [], None, False, Outcome.NOT_STOPPED, 1),  # a signal and no stop after a save: a hang the probes killed
    (1, True, [], None, True, Outcome.FINISHED, 0),      # finished, then signalled in torchrun's exit barrier
    (1, False, [], None, True, Outcome.WORKER_FAILED, 1),  # finished, then failed (e.g. an upload): the failure shows
    (1, False, ["lr: bad"], STOP, False, Outcome.STOPPED, 143),  # a gang stop outranks what a worker reported
    (-9, False, [], None, False, Outcome.WORKER_FAILED, -9),  # torchrun's own code passes through
    (137, False, [], None, False, Outcome.WORKER_FAILED, 137),
])
def test_the_pod_exit_code(torchrun_rc, signalled, config_errors, stopped, finished, outcome, rc):
    found, _ = main.classify(torchrun_rc, signalled=signalled, config_errors=config_errors, stopped=stopped,
                             finished=finished)
    assert (found, exit_code(found, torchrun_rc)) == (outcome, rc)


@pytest.mark.parametrize(("error", "config"), [
    (TypeError("'<' not supported between instances of 'str' and 'float'"), True),
    (ValueError("Invalid learning rate"), True),
    (KeyError("lr"), True),
    (ModuleNotFoundError("No module named 'peft'"), True),
    (ImportError("libcuda.so.1: cannot open shared object file"), False),  # may load on another node
    (worker_hooks.ConfigError("steps must be > 0"), True),
    (type("MisconfigurationException", (Exception,), {})("bad"), True),
    (OSError(5, "Input/output error"), False),          # a flaky mount: a restart may help
    (FileNotFoundError(2, "No such file"), False),
    (RuntimeError("NCCL error"), False),
    (MemoryError(), False),
    (ConnectionResetError(), False),
])
def test_which_uncaught_errors_no_restart_can_cure(error, config):
    assert worker_hooks.is_config_error(error) is config


def test_init_process_group_timeouts_are_bounded():
    calls = []

    def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1):
        calls.append(timeout)

    bounded = worker_hooks.bounded_init_process_group(init_process_group, 20)
    bounded("gloo")
    bounded("gloo", timeout=datetime.timedelta(seconds=1800))
    bounded("gloo", None, datetime.timedelta(seconds=1800))
    bounded("gloo", timeout=datetime.timedelta(seconds=5))
    assert [t.total_seconds() for t in calls] == [20, 20, 20, 5]


SOLO = Ranks(0, 1, checkpoint.SOLO)


def hf_checkpoint(root, step: int) -> str:
    """A directory as transformers.Trainer writes it (nested files too), committed."""
    path = os.path.join(root, f"checkpoint-{step}")
    os.makedirs(os.path.join(path, "pytorch_model_fsdp_0"))
    for name, size in (("model.safetensors", 4096), ("optimizer.pt", 2048), ("trainer_state.json", 10),
                       ("pytorch_model_fsdp_0/shard.distcp", 100)):
        with open(os.path.join(path, name), "wb") as f:
            f.write(os.urandom(size))
    with open(os.path.join(path, ".tmp-partial"), "wb") as f:  # a hidden temporary is never listed
        f.write(b"x")
    framework_checkpoint.commit(path, step, SOLO, keep=2, framework="transformers")
    return path


def test_a_committed_framework_directory_lists_every_file_with_its_digest(tmp_path):
    path = hf_checkpoint(tmp_path, 7)
    marker = json.loads((tmp_path / "checkpoint-7" / "COMPLETE").read_text())
    assert sorted(marker["files"]) == ["model.safetensors", "optimizer.pt", "pytorch_model_fsdp_0/shard.distcp",
                                       "trainer_state.json"]
    assert all(len(m["xxh3_128"]) == 32 for m in marker["files"].values())
    assert marker["step"] == 7 and marker["framework"] == "transformers"
    assert checkpoint.latest_complete(str(tmp_path)).path == path


def test_selection_skips_damage_and_rejects_a_corrupted_checkpoint(tmp_path):
    old, mid, new = (hf_checkpoint(tmp_path, s) for s in (10, 20, 30))
    assert not os.path.exists(old), "keep=2 prunes the oldest"
    with open(os.path.join(new, "model.safetensors"), "r+b") as f:  # same size, other bytes
        f.seek(100)
        f.write(b"\xff\xfe")
    skipped = []
    info = framework_checkpoint.select(str(tmp_path), new, SOLO, "transformers", on_skip=lambda p, e: skipped.append(p))
    assert info is not None and info.path == mid and skipped == [new]
    assert os.path.exists(os.path.join(new, "COMPLETE.rejected"))
    assert checkpoint.latest_complete(str(tmp_path)).path == mid  # never chosen again


class _PeerFoundDamage:
    """Rank 0's collective of a 2-rank gang whose rank 1 found its share's file damaged."""

    def agree(self, ok: bool) -> bool:
        return False

    def all_gather(self, value):
        return [value, ("model.safetensors: xxh3_128 mismatch", "")]


def test_a_file_another_rank_rejected_is_named_on_rank_0(tmp_path):
    path = hf_checkpoint(tmp_path, 3)
    info = checkpoint.latest_complete(str(tmp_path))
    assert info is not None and info.path == path
    with pytest.raises(checkpoint.CheckpointDigestError, match=r"model.safetensors: xxh3_128 mismatch \(rank 1\)"):
        framework_checkpoint.verify(info, Ranks(0, 2, _PeerFoundDamage()))  # pyright: ignore[reportArgumentType]


def test_a_truncated_file_makes_a_checkpoint_incomplete(tmp_path):
    first, second = hf_checkpoint(tmp_path, 1), hf_checkpoint(tmp_path, 2)
    os.truncate(os.path.join(second, "optimizer.pt"), 100)
    assert checkpoint.latest_complete(str(tmp_path)).path == first
    assert framework_checkpoint.select(str(tmp_path), None, SOLO, "transformers").path == first


def test_an_uncommitted_framework_directory_is_never_selected(tmp_path):
    os.makedirs(tmp_path / "checkpoint-5")
    (tmp_path / "checkpoint-5" / "model.safetensors").write_bytes(b"1234")
    assert framework_checkpoint.select(str(tmp_path), None, SOLO, "transformers") is None


def test_a_read_error_skips_a_checkpoint_without_rejecting_it(tmp_path, monkeypatch):
    first, second = hf_checkpoint(tmp_path, 1), hf_checkpoint(tmp_path, 2)
    real = framework_checkpoint.file_digest

    def flaky(path):
        if path.startswith(second):
            raise OSError(116, "Stale file handle")
        return real(path)

    monkeypatch.setattr(framework_checkpoint, "file_digest", flaky)
    assert framework_checkpoint.select(str(tmp_path), None, SOLO, "transformers").path == first
    assert os.path.exists(os.path.join(second, "COMPLETE")), "a flaky mount must not reject an intact checkpoint"


def test_another_frameworks_checkpoint_is_never_handed_to_this_one(tmp_path):
    hf = hf_checkpoint(tmp_path, 9)
    assert framework_checkpoint.select(str(tmp_path), hf, SOLO, "lightning") is None
    assert framework_checkpoint.select(str(tmp_path), hf, SOLO, "transformers").path == hf


def test_the_resume_path_is_the_frameworks_own(tmp_path):
    path = tmp_path / "step-000000004"
    path.mkdir()
    (path / "model.ckpt").write_bytes(b"ckpt")
    framework_checkpoint.commit(str(path), 4, SOLO, keep=3, framework="lightning", resume="model.ckpt")
    info = framework_checkpoint.select(str(tmp_path), None, SOLO, "lightning")
    assert framework_checkpoint.resume_path(info) == str(path / "model.ckpt")
    with pytest.raises(checkpoint.CheckpointWriteError, match=r"resume path 'last\.ckpt' was not written"):
        framework_checkpoint.commit(str(path), 4, SOLO, keep=3, framework="lightning", resume="last.ckpt")


def test_stdout_stays_json_lines():
    import io

    pipe = io.BytesIO(b'{"event": "step", "step": 1}\n{\'loss\': 0.5, \'epoch\': 0.1}\nEpoch 0: 100%|###|\n[1, 2]\n{"event": "x"}')
    out, err = io.BytesIO(), io.BytesIO()
    main.route_output(pipe, out, err)  # pyright: ignore[reportArgumentType]
    assert out.getvalue() == b'{"event": "step", "step": 1}\n{"event": "x"}'
    assert err.getvalue() == b"{'loss': 0.5, 'epoch': 0.1}\nEpoch 0: 100%|###|\n[1, 2]\n"


def test_the_worker_site_hooks_an_unmodified_process_and_keeps_the_images_own_sitecustomize(tmp_path):
    import subprocess
    import sys

    from launcher import worker_site

    image_site = tmp_path / "image"
    image_site.mkdir()
    (image_site / "sitecustomize.py").write_text("print('image sitecustomize ran')\n")
    script = ("import torch\nm = torch.nn.Linear(2, 1)\no = torch.optim.SGD(m.parameters(), lr=0.1)\n"
              "for _ in range(3):\n    m(torch.ones(1, 2)).sum().backward(); o.step()\n"
              "import torch.distributed as d\nprint(d.init_process_group.__wrapped__.__name__)\n")
    heartbeat = tmp_path / "hb" / "heartbeat"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": worker_site.python_path(str(image_site)), "LOCAL_RANK": "0",
           "RANK": "0", "TRAIN_HEARTBEAT_FILE": str(heartbeat), "TRAIN_LOG_EVERY_STEPS": "3",
           "TRAIN_COLLECTIVE_TIMEOUT_S": "30"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "image sitecustomize ran"
    assert json.loads(lines[1])["event"] == "step" and json.loads(lines[1])["step"] == 3
    assert lines[2] == "init_process_group"  # wrapped by the timeout bound
    assert json.loads(heartbeat.read_text())["step"] >= 1


def test_torchrun_may_outlive_its_workers_only_for_the_grace_period(monkeypatch, tmp_path):
    now = [0.0]
    workers = [[]]
    monkeypatch.setattr(supervisor, "children_of", lambda pid, running=False: workers[0])
    failed = tmp_path / "worker-failed"
    succeeded = main.WorkerWatch(1, str(failed), clock=lambda: now[0])
    workers[0] = [11]
    assert not succeeded.torchrun_outlived_its_workers()
    workers[0] = []
    for t in (1.0, 1.0 + 10 * main.TORCHRUN_EXIT_GRACE_S):  # torchrun in its exit barrier: left alone
        now[0] = t
        assert not succeeded.torchrun_outlived_its_workers()
    failed.touch()
    now[0] = 0.0
    workers[0] = []
    watch = main.WorkerWatch(1, str(failed), clock=lambda: now[0])
    assert not watch.torchrun_outlived_its_workers()  # workers not started yet: never
    now[0] = 100.0
    assert not watch.torchrun_outlived_its_workers()
    workers[0] = [11, 12]
    now[0] = 101.0
    assert not watch.torchrun_outlived_its_workers()
    workers[0] = []
    for t, outlived in ((102.0, False), (102.0 + main.TORCHRUN_EXIT_GRACE_S - 1, False),
                        (102.0 + main.TORCHRUN_EXIT_GRACE_S, True)):
        now[0] = t
        assert watch.torchrun_outlived_its_workers() is outlived
