"""Trainers as teams bring them (tests/trainer/byot/), each as a 2-node gang on localhost (two
launchers, one process each, gloo on CPU): stops on either pod, resume at the saved step, a killed
pod, a frozen pod, a damaged newest checkpoint, a config error. What must never happen: exit 0
before the last step, a hang longer than the collective timeout + 60 s, a crash loop on a damaged
checkpoint while an intact older one exists, a silent load of a damaged checkpoint.

The framework trainers need requirements-frameworks.txt (make test installs it)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
import yaml
from launcher import checkpoint
from trainer_testlib import LauncherRun, descendants, free_port, kill_tree

BYOT = Path(__file__).resolve().parent / "byot"
COLLECTIVE_TIMEOUT_S = 10
TRAINERS = {
    "plain": ("plain_train.py", None),
    "accelerate": ("accelerate_train.py", "accelerate"),
    "transformers": ("hf_train.py", "transformers"),
    "lightning": ("lightning_train.py", "lightning"),
}


def _needs(module: str | None):
    missing = module is not None and importlib.util.find_spec(module) is None
    return pytest.mark.skipif(missing, reason=f"{module} is not installed (pip install -r requirements-frameworks.txt)")


PARAMS = [pytest.param(name, marks=_needs(module), id=name) for name, (_, module) in TRAINERS.items()]


class Gang:
    """Two launchers of one job (pods 0 and 1), a checkpoint directory they share."""

    def __init__(self, tmp_path: Path, script: str, hparams: dict, **train_vars: str):
        self.tmp, self.script, self.attempt = tmp_path, str(BYOT / script), 0
        self.args: list[str] = []
        (tmp_path / "hparams.yaml").write_text(yaml.safe_dump(hparams))
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("TRAIN_", "TORCHELASTIC_", "PET_")) and k not in (
                        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        self.env.update({
            "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "trainer"), "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore", "TRAIN_JOB_ID": f"byot-{tmp_path.name}"[:60], "PET_NNODES": "2",
            "PET_NPROC_PER_NODE": "1", "TRAIN_RDZV_HOST": "127.0.0.1",
            "TRAIN_CHECKPOINT_DIR": str(tmp_path / "checkpoints"), "TRAIN_DATA_DIR": str(tmp_path / "data"),
            "TRAIN_HPARAMS_FILE": str(tmp_path / "hparams.yaml"), "TRAIN_CHECKPOINT_EVERY_STEPS": "4",
            "TRAIN_CHECKPOINT_KEEP": "3", "TRAIN_COLLECTIVE_TIMEOUT_S": str(COLLECTIVE_TIMEOUT_S),
            "TRAIN_LOG_EVERY_STEPS": "1", **train_vars})
        self.pods: list[LauncherRun] = []

    def start(self, pods: int = 2) -> list[LauncherRun]:
        self.attempt += 1
        port = str(free_port())
        self.pods = []
        for pod in range(pods):
            env = {**self.env, "TRAIN_RDZV_PORT": port, "TRAIN_HEARTBEAT_FILE": str(self.tmp / f"pod{pod}" / "heartbeat"),
                   "TRAIN_RESTART_ATTEMPT": str(self.attempt - 1)}
            if "TRAIN_MEMORY_CHECKPOINT_INTERVAL_S" in env:  # a pod's own emptyDir, empty in a recreated pod
                env["TRAIN_MEMORY_CHECKPOINT_DIR"] = str(self.memory_dir(pod))
            self.pods.append(LauncherRun(env, self.tmp, f"a{self.attempt}-pod{pod}", [self.script, *self.args]))
        return self.pods

    def memory_dir(self, pod: int) -> Path:
        """The memory tier's directory of pod `pod` of the current attempt (launcher.memory_tier)."""
        return self.tmp / f"a{self.attempt}-pod{pod}-memory"

    def wait(self, timeout: float = 240) -> list[int]:
        return [pod.wait(timeout) for pod in self.pods]

    def wait_for_a_config_error(self, timeout: float = 120) -> None:
        """Every pod ends within `timeout`, and the first to end exits 2 (a config error: JobSet's
        failure policy acts on the first failed pod, training_job.py). A later one may exit 1: on
        localhost either pod's torchrun may host the rendezvous store, and a store that ends with
        the first pod fails the other's agent before its worker reaches the check."""
        deadline = time.monotonic() + timeout
        first: list[int] = []  # the codes of the pods seen ended at the first poll that saw any
        while not first and time.monotonic() < deadline:
            first = [rc for p in self.pods if (rc := p.proc.poll()) is not None]
            time.sleep(0.05)
        codes = [p.wait(max(1.0, deadline - time.monotonic())) for p in self.pods]
        assert 2 in first and set(codes) <= {1, 2}, (first, codes, [p.stderr_tail(15) for p in self.pods])

    def losses(self) -> dict[int, float]:
        return {e["step"]: e["loss"] for pod in self.pods for e in pod.of("test_loss")}

    def at_step(self, step: int, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while max((e["step"] for p in self.pods for e in p.of("test_loss")), default=0) < step:
            if any(p.proc.poll() is not None for p in self.pods) or time.monotonic() > deadline:
                pytest.fail(f"no step {step}: rc={[p.proc.poll() for p in self.pods]}\n"
                            + "\n".join(p.stderr_tail(15) for p in self.pods))
            time.sleep(0.05)

    def rank0_pod(self) -> int:
        """Which pod runs global rank 0 (the one whose stdout has the rank-0 lines)."""
        return 0 if self.pods[0].of("test_loss") else 1

    def resumed(self) -> dict:
        events = [e for pod in self.pods for e in pod.of("checkpoint_resumed")]
        return events[0] if events else {}

    def skipped(self) -> list[dict]:
        return [e for pod in self.pods for e in pod.of("checkpoint_skipped")]

    def kill(self) -> None:
        for pod in self.pods:
            if pod.proc.poll() is None or descendants(pod.proc.pid):
                kill_tree(pod.proc)

    def signal_pod(self, pod: int, signum: int) -> None:
        os.kill(self.pods[pod].proc.pid, signum)


def newest_complete(root: Path) -> checkpoint.CheckpointInfo:
    info = checkpoint.latest_complete(str(root))
    assert info is not None, f"no complete checkpoint in {root}"
    return info


def largest_file(info: checkpoint.CheckpointInfo) -> Path:
    name = max(info.marker["files"], key=lambda n: info.marker["files"][n]["bytes"])
    return Path(info.path) / name


@pytest.fixture
def gang_of(tmp_path):
    gangs: list[Gang] = []

    def make(name: str, trainer: str, hparams: dict, **train_vars: str) -> Gang:
        (tmp_path / name).mkdir()
        gang = Gang(tmp_path / name, TRAINERS[trainer][0], hparams, **train_vars)
        gangs.append(gang)
        return gang

    yield make
    for gang in gangs:
        gang.kill()


STEPS = 24


@pytest.mark.parametrize("trainer", PARAMS)
def test_stops_resumes_and_damage_never_end_a_run_early(gang_of, trainer, measurements):
    """One job through a drain of each pod, a corrupted and a truncated newest checkpoint and a
    killed pod, against an uninterrupted run of the same trainer."""
    started = time.monotonic()
    exact = trainer != "lightning"  # Lightning restores the step, not the position in a plain DataLoader's epoch
    baseline = {}
    if exact:
        whole = gang_of("whole", trainer, {"steps": STEPS})
        whole.start()
        assert whole.wait() == [0, 0]
        baseline = whole.losses()
        assert sorted(baseline) == list(range(1, STEPS + 1))

    job = gang_of("job", trainer, {"steps": STEPS, "step_delay_s": 0.1})
    root = job.tmp / "checkpoints"

    # 1. SIGTERM on the pod holding rank 0: both pods stop with the gang (143), after saving.
    job.start()
    job.at_step(5)
    job.signal_pod(job.rank0_pod(), signal.SIGTERM)
    assert job.wait() == [143, 143]
    stopped_at = newest_complete(root).step
    assert 5 <= stopped_at < STEPS

    # 2. The restart resumes at that step; SIGTERM on the other pod stops both again.
    job.start()
    job.at_step(stopped_at + 3)
    assert job.resumed()["step"] == stopped_at
    job.signal_pod(1 - job.rank0_pod(), signal.SIGTERM)
    assert job.wait() == [143, 143]
    second_stop = newest_complete(root).step
    assert second_stop > stopped_at

    # 3. The newest checkpoint corrupted at the same size: skipped and rejected, never loaded.
    damaged = newest_complete(root)
    target = largest_file(damaged)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    job.start()
    job.at_step(second_stop + 1)
    assert job.resumed()["step"] < damaged.step
    assert any(s["path"] == damaged.path for s in job.skipped())
    # 4. ... and a pod killed outright (every process at once, as a node loss): the other notices
    # (no hang) and fails; it never exits 0 or as a stop.
    kill_tree(job.pods[1].proc)
    rc = job.pods[0].wait(COLLECTIVE_TIMEOUT_S + 60)
    assert rc not in (0, 143)

    # 5. The newest checkpoint truncated: the launcher skips it; the run completes from an older one.
    truncated = newest_complete(root)
    target = largest_file(truncated)
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    job.start()
    assert job.wait() == [0, 0]
    assert job.resumed()["step"] < truncated.step

    # Same losses as the uninterrupted run where the framework restores the data order.
    final = job.losses()
    assert max(final) == STEPS
    if exact:
        for step, loss in final.items():
            assert loss == pytest.approx(baseline[step], rel=1e-5, abs=1e-6), f"step {step}"
    measurements.record(f"byot {trainer}: matrix", time.monotonic() - started, "s")


@pytest.mark.parametrize("trainer", PARAMS)
def test_a_frozen_pod_fails_the_gang_within_the_collective_timeout(gang_of, trainer, measurements):
    job = gang_of("frozen", trainer, {"steps": 1000, "step_delay_s": 0.05})
    job.start()
    job.at_step(3)
    frozen = [job.pods[1].proc.pid, *descendants(job.pods[1].proc.pid)]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    rc = job.pods[0].wait(COLLECTIVE_TIMEOUT_S + 60)
    assert rc not in (0, 143), job.pods[0].stderr_tail()
    noticed = time.monotonic() - stopped
    assert noticed < COLLECTIVE_TIMEOUT_S + 60
    measurements.record(f"byot {trainer}: frozen pod failed the other after", noticed, "s")


CONFIG_ERRORS = {  # what each trainer gets wrong, as YAML gives it: `3e-4` is text to PyYAML
    "plain": ({"lr": "3e-4"}, "TypeError"),
    "accelerate": ({"lr": "3e-4"}, "TypeError"),
    "transformers": ({"lr": "3e-4"}, "TrainingArguments.learning_rate must be a number, got '3e-4'"),
    "lightning": ({"lr": "3e-4"}, "TypeError"),
}


@pytest.mark.parametrize("trainer", PARAMS)
def test_a_config_error_fails_the_job_without_spending_a_restart(gang_of, trainer):
    hparams, reported = CONFIG_ERRORS[trainer]
    job = gang_of("config", trainer, {"steps": 10, **hparams}, PET_NNODES="1")  # what a pod does alone
    job.start(pods=1)
    rcs = job.wait()
    assert rcs == [2], rcs
    errors = [line for pod in job.pods for e in pod.of("trainer_config_error") for line in e["errors"]]
    assert any(reported in line for line in errors), errors


@pytest.mark.parametrize(("script", "trainer"), [
    pytest.param("unmodified_train.py", "plain", id="torchrun"),
    pytest.param("hf_unmodified_train.py", "transformers", marks=_needs("transformers"), id="transformers"),
])
def test_an_unmodified_script_gets_liveness_and_a_stop_never_reads_as_finished(gang_of, script, trainer):
    assert not re.search(r"^\s*(from|import) launcher", (BYOT / script).read_text(), re.M), "an unmodified script imports nothing of the launcher"
    job = gang_of("unmodified", trainer, {"steps": 1000, "step_delay_s": 0.1})
    job.script = str(BYOT / script)
    job.start()
    job.at_step(3)
    heartbeats = [Path(job.env["TRAIN_CHECKPOINT_DIR"]).parent / f"pod{pod}" / "heartbeat" for pod in (0, 1)]
    first = [json.loads(hb.read_text())["step"] for hb in heartbeats]
    job.at_step(12)
    later = [json.loads(hb.read_text())["step"] for hb in heartbeats]
    assert all(b > a >= 1 for a, b in zip(first, later, strict=True)), (first, later)
    assert any(e["event"] == "step" for pod in job.pods for e in pod.events())  # rank 0's step lines
    job.signal_pod(0, signal.SIGTERM)
    assert 0 not in job.wait()


# Trainers shaped like the frameworks' upstream examples (issue 44): an argparse CLI, no
# hyperparameters file (TRAIN_HPARAMS_FILE unset), positional `fit`, epoch loops.
UPSTREAM = {
    "torchrun": ("upstream_ddp_train.py", None, ["12", "--step_delay_s", "0.3"]),
    "transformers": ("upstream_hf_train.py", "transformers", [
        "--output_dir", "{checkpoints}", "--max_steps", "24", "--per_device_train_batch_size", "4", "--logging_steps", "1",
        "--save_strategy", "no", "--use_cpu", "--report_to", "none", "--dataloader_num_workers", "0",
        "--disable_tqdm", "true", "--learning_rate", "0.05", "--seed", "0", "--step_delay_s", "0.1"]),
    "lightning": ("upstream_lightning_train.py", "lightning", ["--max_epochs", "3", "--step_delay_s", "0.1"]),
}


@pytest.mark.parametrize("trainer", [pytest.param(name, marks=_needs(module), id=name)
                                     for name, (_, module, _) in UPSTREAM.items()])
def test_an_upstream_shaped_trainer_stops_resumes_and_completes(gang_of, trainer):
    script, _, args = UPSTREAM[trainer]
    job = gang_of("upstream", "plain", {})
    del job.env["TRAIN_HPARAMS_FILE"]  # the trainer reads its command line only
    job.script, job.args = str(BYOT / script), [a.format(checkpoints=job.env["TRAIN_CHECKPOINT_DIR"]) for a in args]
    job.start()
    job.at_step(5)
    job.signal_pod(job.rank0_pod(), signal.SIGTERM)
    assert job.wait() == [143, 143], [p.stderr_tail(15) for p in job.pods]
    stopped_at = newest_complete(job.tmp / "checkpoints").step
    job.start()
    assert job.wait() == [0, 0], [p.stderr_tail(15) for p in job.pods]
    assert job.resumed()["step"] == stopped_at
    assert max(job.losses()) == (12 if trainer == "torchrun" else 24)
    if trainer == "torchrun":  # an epoch loop: one launcher step per epoch, said aloud
        assert any(e["optimizer_steps_per_loop_step"] == 4 for p in job.pods for e in p.of("coarse_loop_steps"))


@_needs("lightning")
def test_a_lightning_gang_not_told_the_node_count_fails_with_the_cause(gang_of):
    job = gang_of("alone", "lightning", {})
    job.script = str(BYOT / "lightning_unmodified_train.py")
    started = time.monotonic()
    job.start()
    job.wait_for_a_config_error()
    errors = [line for pod in job.pods for e in pod.of("trainer_config_error") for line in e["errors"]]
    assert errors and all("Lightning was not told the node count" in line for line in errors), errors
    assert not any("trained alone" in pod.err_path.read_text() for pod in job.pods)
    assert time.monotonic() - started < 120


@_needs("transformers")
def test_an_hf_gang_on_cpu_without_use_cpu_fails_with_the_cause(gang_of):
    """HF's PartialState makes the process group, yet the Trainer trains each worker alone."""
    job = gang_of("hf-alone", "plain", {})
    del job.env["TRAIN_HPARAMS_FILE"]
    _, _, args = UPSTREAM["transformers"]
    job.script = str(BYOT / "upstream_hf_train.py")
    job.args = [a.format(checkpoints=job.env["TRAIN_CHECKPOINT_DIR"]) for a in args if a != "--use_cpu"]
    job.start()
    job.wait_for_a_config_error()
    errors = [line for pod in job.pods for e in pod.of("trainer_config_error") for line in e["errors"]]
    assert errors and all("parallel_mode is 'not_parallel'" in line and "use_cpu=True" in line for line in errors), errors


DOC = Path(__file__).resolve().parents[2] / "docs" / "bring-your-own-trainer.md"


@pytest.mark.parametrize("script", [s for s, _ in TRAINERS.values()])
def test_a_trainer_needs_at_most_three_platform_lines_and_the_doc_shows_them(script):
    lines = (BYOT / script).read_text().splitlines()
    platform = [line.split("# platform")[0].strip() for line in lines if line.rstrip().endswith("# platform")]
    assert 1 <= len(platform) <= 3, platform
    assert not any("launcher" in line for line in lines if not line.rstrip().endswith("# platform")), \
        "every line that names the launcher counts as platform code"
    doc = DOC.read_text()
    assert platform[0] in doc, f"the doc does not show {platform[0]!r}"


def test_the_quick_start_runs_as_the_doc_says(gang_of):
    """The doc's quick start: its train.py (this file, verbatim), two pods, a Ctrl-C, a resume."""
    script = (BYOT / "quickstart_train.py").read_text().split("\n", 1)[1]
    assert script in DOC.read_text(), "the quick start's train.py differs from tests/trainer/byot/quickstart_train.py"
    job = gang_of("quickstart", "plain", {}, TRAIN_CHECKPOINT_EVERY_STEPS="50")
    del job.env["TRAIN_HPARAMS_FILE"]
    job.script, job.args = str(BYOT / "quickstart_train.py"), ["--steps", "40", "--sleep", "0.1"]
    job.start()
    job.pods[0].wait_for(lambda events: any(e["event"] == "step" and e["step"] >= 5 for events_ in
                                            [events, job.pods[1].events()] for e in events_), 90, "step 5")
    job.signal_pod(0, signal.SIGINT)  # Ctrl-C in terminal 1
    assert job.wait() == [143, 143], [p.stderr_tail(15) for p in job.pods]
    saved = newest_complete(job.tmp / "checkpoints").step
    job.start()
    assert job.wait() == [0, 0], [p.stderr_tail(15) for p in job.pods]
    assert job.resumed()["step"] == saved


def test_the_launcher_installs_as_a_package_that_leaves_torch_to_the_image(tmp_path):
    """pip builds the launcher from trainer/ (its pyproject), and the installed copy puts its own
    worker site first on the workers' PYTHONPATH."""
    import shutil
    import subprocess
    import sys

    source = tmp_path / "src"
    trainer_dir = Path(__file__).resolve().parents[2] / "trainer"
    shutil.copytree(trainer_dir / "launcher", source / "launcher", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(trainer_dir / "pyproject.toml", source)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, timeout=300)
    probe = ("import launcher.worker_site as w, launcher.integrations.plain, launcher.main; "
             "print(w.python_path('').split(':')[0])")
    run = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(target), "PATH": os.environ["PATH"]},
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(target / "launcher" / "worker_site")
    assert (target / "launcher" / "worker_site" / "sitecustomize.py").is_file()
