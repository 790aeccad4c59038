"""A dataset with a manifest is complete before the launcher starts any worker on it."""

from __future__ import annotations

import json

import pytest
from launcher import dataset_manifest as dm


def _dataset(tmp_path, files: dict[str, bytes]):
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    return tmp_path


def test_a_dataset_without_a_manifest_is_not_checked(tmp_path):
    assert dm.check(str(_dataset(tmp_path, {"a.bin": b"x"})), {}) is None


def test_the_manifest_written_after_the_files_checks_them_all(tmp_path):
    root = _dataset(tmp_path, {"a.bin": b"xx", "sub/b.bin": b"yyy", ".partial": b"z"})
    dm.write(str(root))
    listed = json.loads((root / dm.MANIFEST_NAME).read_text())["files"]
    assert listed == {"a.bin": {"bytes": 2}, "sub/b.bin": {"bytes": 3}}  # hidden files (uploads in flight) left out
    assert dm.check(str(root), {}) == dm.DatasetCheck(str(root / dm.MANIFEST_NAME), 2, 5)


@pytest.mark.parametrize(("arrived", "expected"), [
    ({"a.bin": b"xx"}, "1 of the 2 files"),                      # one object not replicated yet
    ({"a.bin": b"x", "sub/b.bin": b"yyy"}, "a.bin has 1 bytes, the manifest says 2"),
    ({}, "2 of the 2 files"),
])
def test_a_dataset_still_arriving_is_refused_with_what_is_missing(tmp_path, arrived, expected):
    source = _dataset(tmp_path / "source", {"a.bin": b"xx", "sub/b.bin": b"yyy"})
    dm.write(str(source))
    region = _dataset(tmp_path / "region", {**arrived, dm.MANIFEST_NAME: (source / dm.MANIFEST_NAME).read_bytes()})
    with pytest.raises(dm.DatasetIncompleteError, match="incomplete") as raised:
        dm.check(str(region), {})
    assert expected in str(raised.value) and "replicating" in str(raised.value)


def test_a_named_manifest_must_exist_and_parse(tmp_path):
    with pytest.raises(dm.DatasetIncompleteError, match="does not exist"):
        dm.check(str(tmp_path), {dm.MANIFEST_VAR: "imagenet/manifest.json"})
    (tmp_path / dm.MANIFEST_NAME).write_text("{not json")
    with pytest.raises(dm.DatasetIncompleteError, match="cannot be read as JSON"):
        dm.check(str(tmp_path), {})
    (tmp_path / dm.MANIFEST_NAME).write_text('{"files": {}}')
    with pytest.raises(dm.DatasetIncompleteError, match="lists no files"):
        dm.check(str(tmp_path), {})


def test_the_launcher_refuses_to_start_on_an_incomplete_dataset(tmp_path):
    """Exit 2 (a config error: the gang is not restarted), the missing file named, before torchrun starts."""
    import os
    import subprocess
    import sys

    from trainer_testlib import TRAINER_DIR

    data = _dataset(tmp_path / "data", {"a.bin": b"xx", "b.bin": b"yy"})
    dm.write(str(data))
    (data / "b.bin").unlink()  # not replicated here yet
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAIN_", "PET_"))}
    env.update({"PYTHONPATH": str(TRAINER_DIR), "TRAIN_JOB_ID": "ds", "PET_NNODES": "1", "TRAIN_RDZV_HOST": "127.0.0.1",
                "TRAIN_CHECKPOINT_DIR": str(tmp_path / "ck"), "TRAIN_DATA_DIR": str(data),
                "TRAIN_HEARTBEAT_FILE": str(tmp_path / "hb" / "heartbeat")})
    p = subprocess.run([sys.executable, "-m", "launcher", "--", "-m", "example_trainer.train"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "b.bin is missing" in p.stderr and "replicating" in p.stderr
    assert '"event": "launcher_start"' not in p.stdout  # nothing started
