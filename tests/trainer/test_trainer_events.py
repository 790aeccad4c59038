"""launcher.events: where the TensorBoard event files go, and who writes them."""

from __future__ import annotations

import pytest
from launcher import events


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "/workspace/checkpoints/tensorboard"),
    ({"TRAIN_CHECKPOINT_DIR": "/workspace/checkpoints/job-a"}, "/workspace/checkpoints/job-a/tensorboard"),
    ({"TRAIN_CHECKPOINT_DIR": "  "}, "/workspace/checkpoints/tensorboard"),
    ({"TRAIN_CHECKPOINT_DIR": "/ck", "TRAIN_TENSORBOARD_DIR": "/tb/run"}, "/tb/run"),
    ({"TRAIN_CHECKPOINT_DIR": "/ck", "TRAIN_TENSORBOARD_DIR": ""}, "/ck/tensorboard"),
    ({"TRAIN_CHECKPOINT_DIR": "/ck", "TRAIN_TENSORBOARD_DIR": "off"}, None),
    ({"TRAIN_CHECKPOINT_DIR": "/ck", "TRAIN_TENSORBOARD_DIR": "OFF"}, None),
])
def test_tensorboard_dir(env, expected):
    assert events.tensorboard_dir(env) == expected


def test_only_rank_0_writes(tmp_path):
    for rank in (1, 3):
        events.ScalarWriter(rank, str(tmp_path / f"rank{rank}")).scalars(1, {"train/loss": 1.0})
        assert not (tmp_path / f"rank{rank}").exists()
    writer = events.ScalarWriter(0, str(tmp_path / "rank0"))
    writer.scalars(1, {"train/loss": 1.0, "train/samples_per_s": None})
    writer.close()
    assert list((tmp_path / "rank0").glob("events.out.tfevents.*"))


def test_off_writes_nothing(tmp_path):
    writer = events.ScalarWriter(0, env={"TRAIN_CHECKPOINT_DIR": str(tmp_path), "TRAIN_TENSORBOARD_DIR": "off"})
    writer.scalars(1, {"train/loss": 1.0})
    assert not list(tmp_path.iterdir())


def test_hf_tensorboard_callback_is_pointed_at_the_event_directory(monkeypatch, tmp_path):
    from launcher.integrations import transformers as hf

    class TensorBoardCallback:  # HF's class, by name: its constructor read TENSORBOARD_LOGGING_DIR
        def __init__(self, logging_dir=None):
            self.logging_dir = logging_dir

    monkeypatch.setenv("TRAIN_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.delenv("TRAIN_TENSORBOARD_DIR", raising=False)
    unset, chosen, other = TensorBoardCallback(), TensorBoardCallback("/mine"), object()
    hf.point_tensorboard([unset, chosen, other])
    assert (unset.logging_dir, chosen.logging_dir) == (str(tmp_path / "tensorboard" / "transformers"), "/mine")
    monkeypatch.setenv("TRAIN_TENSORBOARD_DIR", "off")
    off = TensorBoardCallback()
    hf.point_tensorboard([off])
    assert off.logging_dir is None


@pytest.mark.parametrize(("tensorboard_dir", "expected"), [(None, "tensorboard"), ("off", None)])
def test_lightning_gets_a_tensorboard_logger_there(monkeypatch, tmp_path, tensorboard_dir, expected):
    from launcher.integrations import lightning

    monkeypatch.setenv("TRAIN_CHECKPOINT_DIR", str(tmp_path))
    if tensorboard_dir is None:
        monkeypatch.delenv("TRAIN_TENSORBOARD_DIR", raising=False)
    else:
        monkeypatch.setenv("TRAIN_TENSORBOARD_DIR", tensorboard_dir)
    kwargs = lightning.tensorboard_logger()
    if expected is None:
        assert kwargs == {}
    else:
        assert kwargs["logger"].save_dir == str(tmp_path / expected) and kwargs["logger"].name == "lightning"


def test_accelerate_project_dir(monkeypatch, tmp_path):
    from launcher.integrations import accelerate

    monkeypatch.setenv("TRAIN_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("TRAIN_TENSORBOARD_DIR", str(tmp_path / "tb"))
    assert accelerate.tensorboard_project_dir() == str(tmp_path / "tb" / "accelerate")
    monkeypatch.setenv("TRAIN_TENSORBOARD_DIR", "off")
    assert accelerate.tensorboard_project_dir() is None
