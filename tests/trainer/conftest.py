"""Fixtures for the reference trainer's tests.

- `launcher` and `example_trainer` import in-process: pytest puts trainer/ on the path
  (pyproject.toml, `pythonpath`), as the trainer image's PYTHONPATH does.
- `launch` starts `python -m launcher -- -m example_trainer.train` (real torchrun, gloo,
  2 processes, c10d rendezvous on 127.0.0.1 with a free port) with every directory under
  tmp_path, and kills whatever is left of the process tree when the test ends.
- `measurements` collects figures that `pytest_terminal_summary` prints in a
  "trainer measurements" section at the end of the run.
"""

from __future__ import annotations

import os

import pytest
import yaml
from trainer_testlib import BASE_HPARAMS, TRAINER_DIR, LauncherRun, descendants, free_port, kill_tree

_MEASUREMENTS: list[tuple[str, str, str]] = []


class Measurements:
    def record(self, name: str, value, unit: str = "") -> None:
        if isinstance(value, float):
            value = f"{value:.3f}"
        _MEASUREMENTS.append((name, str(value), unit))


@pytest.fixture(scope="session")
def measurements() -> Measurements:
    return Measurements()


def pytest_configure(config):
    # torch warns once when numpy is absent; the trainer never needs numpy.
    config.addinivalue_line("filterwarnings", "ignore:Failed to initialize NumPy:UserWarning")


def pytest_terminal_summary(terminalreporter):
    if not _MEASUREMENTS:
        return
    terminalreporter.section("trainer measurements")
    width = max(len(name) for name, _, _ in _MEASUREMENTS)
    for name, value, unit in _MEASUREMENTS:
        terminalreporter.write_line(f"{name:<{width}}  {value:>10} {unit}".rstrip())


@pytest.fixture
def trainer_env(tmp_path):
    """Factory: env for one job with all directories under tmp_path."""

    def make(hparams: dict | None = None, **train_vars) -> dict:
        hp = {**BASE_HPARAMS, **(hparams or {})}
        hp_file = tmp_path / "hparams.yaml"
        hp_file.write_text(yaml.safe_dump(hp))
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TRAIN_", "TORCHELASTIC_", "PET_"))
            and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
        }
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TRAINER_DIR), os.environ.get("PYTHONPATH", "")) if p)
        env.update(
            {
                "OMP_NUM_THREADS": "1",
                "PYTHONWARNINGS": "ignore",
                "TRAIN_JOB_ID": f"test-{tmp_path.name}"[:100],
                "PET_NNODES": "1",
                "PET_NPROC_PER_NODE": "2",
                "TRAIN_RDZV_HOST": "127.0.0.1",
                "TRAIN_RDZV_PORT": str(free_port()),
                "TRAIN_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                "TRAIN_DATA_DIR": str(tmp_path / "data"),
                "TRAIN_HPARAMS_FILE": str(hp_file),
                "TRAIN_HEARTBEAT_FILE": str(tmp_path / "run" / "heartbeat"),
                "TRAIN_CHECKPOINT_KEEP": "3",
            }
        )
        env.update({k: str(v) for k, v in train_vars.items()})
        return env

    return make


@pytest.fixture
def launch(tmp_path):
    """Factory: start a LauncherRun; every run is killed (whole tree) at teardown."""
    runs: list[LauncherRun] = []

    def start(env: dict, name: str = "run", command: list[str] | None = None,
              prefix: list[str] | None = None) -> LauncherRun:
        run = LauncherRun(env, tmp_path, f"{name}{len(runs)}", command, prefix)
        runs.append(run)
        return run

    yield start
    for run in runs:
        if run.proc.poll() is None or descendants(run.proc.pid):
            kill_tree(run.proc)
