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
