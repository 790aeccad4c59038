"""The viewer as a person looks at it: the example trainer's loss curve in TensorBoard, in Chromium.

The example trainer runs a few steps on CPU under the launcher (one process, gloo), writing its
event files where the launcher contract puts them (launcher.events: `tensorboard/` in the job's
checkpoint directory). TensorBoard, the version the trainer image pins and the cluster's viewer
runs (components/workload/viewer.py), serves them on a free localhost port with the path prefix
the viewer's Ingress gives it, and headless Chromium from the distribution's packages
(/usr/bin/chromium, installed by `make chromium`, which `make test-scenarios` runs first) loads the scalars
page. The test asserts that the card of the `train/loss` tag is there with a drawn chart, and keeps
a screenshot in build/viewer-browser/.

Under CI=true a missing Chromium fails the test (the project's own setup installs it); elsewhere
it skips, saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTEFACTS = ROOT / "build" / "viewer-browser"
LOSS_TAG = "train/loss"
PATH_PREFIX = "/training"  # as the viewer's Ingress path of the platform's namespace
STEPS = 12
# The flags the brief of this test names: no sandbox (containers, root), no GPU, no network of
# Chromium's own (QUIC, component updates, sync, background fetches), a fresh profile per run.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HPARAMS = {"seed": 0, "steps": STEPS, "batch_size": 64, "lr": 0.003, "hidden": 32, "log_every": 1,
           "num_workers": 1, "prefetch_factor": 2, "pg_timeout_s": 60, "checkpoint_min_interval_s": 0.0,
           "data": {"shards": 2, "samples_per_shard": 1024, "dim": 16, "classes": 4}}


def _chromium_or_skip() -> Path:
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    reason = (f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium package "
              "(apt-get, with sudo when not root); `make test-scenarios` does it first")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """Runs the example trainer under the launcher once; returns the job's checkpoint directory."""
    tmp_path = tmp_path_factory.mktemp("viewer-run")
    hparams = tmp_path / "hparams.yaml"
    hparams.write_text(yaml.safe_dump(HPARAMS))
    checkpoints = tmp_path / "checkpoints" / "browser-job"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "TORCHELASTIC_", "PET_"))}
    env.update({
        "PYTHONPATH": str(ROOT / "trainer"), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
        "TRAIN_JOB_ID": "browser-job", "PET_NPROC_PER_NODE": "1", "TRAIN_RDZV_HOST": "127.0.0.1",
        "TRAIN_RDZV_PORT": str(_free_port()), "TRAIN_CHECKPOINT_DIR": str(checkpoints),
        "TRAIN_DATA_DIR": str(tmp_path / "data"), "TRAIN_HPARAMS_FILE": str(hparams),
        "TRAIN_HEARTBEAT_FILE": str(tmp_path / "run" / "heartbeat"), "TRAIN_CHECKPOINT_EVERY_STEPS": "6",
    })
    done = subprocess.run([sys.executable, "-m", "launcher", "--", "-m", "example_trainer.train"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return checkpoints


def _wait_for(url: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"tensorboard exited with {process.returncode}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"tensorboard did not answer at {url} within {seconds} s")


@pytest.fixture
def tensorboard(tmp_path):
    """Factory: TensorBoard on a free localhost port over `logdir`; stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(logdir: Path) -> str:
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1",
             "--port", str(port), "--path_prefix", PATH_PREFIX, "--load_fast", "false", "--reload_interval", "1"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "tensorboard.log").open("w"),
            start_new_session=True)
        started.append(process)
        base = f"http://127.0.0.1:{port}{PATH_PREFIX}/"
        _wait_for(base, process, 30)
        return base

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)


@pytest.mark.scenario
def test_event_files_sit_next_to_the_checkpoints(trained):
    from launcher import events

    checkpoints = trained
    written = list((checkpoints / events.TENSORBOARD_SUBDIR).glob("events.out.tfevents.*"))
    assert written, f"no event file in {checkpoints / events.TENSORBOARD_SUBDIR}"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(checkpoints / events.TENSORBOARD_SUBDIR))
    accumulator.Reload()
    losses = accumulator.Scalars(LOSS_TAG)
    assert [s.step for s in losses] == list(range(1, STEPS + 1))
    assert all(s.value > 0 for s in losses)
    assert any(p.name.startswith("step-") for p in checkpoints.iterdir()), "the checkpoints are beside them"


@pytest.mark.scenario
def test_loss_curve_renders_in_chromium(tmp_path, trained, tensorboard):
    chromium = _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    checkpoints = trained
    # The viewer's logdir is the namespace's checkpoints root: one run per job.
    base = tensorboard(checkpoints.parent)
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTEFACTS / "loss-curve.png"
    with sync_playwright() as playwright:
        # A fresh profile per run (Playwright passes it as --user-data-dir).
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900})
        try:
            page = browser.new_page()
            page.goto(f"{base}#timeseries&tagFilter={LOSS_TAG}", wait_until="networkidle", timeout=30_000)
            card = page.locator("scalar-card", has_text=LOSS_TAG).first
            card.wait_for(state="visible", timeout=30_000)
            # The line chart draws into a canvas (WebGL or 2D) or, without either, into SVG paths.
            card.locator("line-chart canvas, line-chart svg path").first.wait_for(state="attached", timeout=30_000)
            page.wait_for_timeout(1000)  # the chart's first frame
            box = card.bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 100, box
            card.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshot))
        finally:
            browser.close()
    shutil.copy(tmp_path / "tensorboard.log", ARTEFACTS / "tensorboard.log")
    assert screenshot.stat().st_size > 10_000, "a blank page would be smaller"
