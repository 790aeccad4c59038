"""Progress helper (JSON lines, heartbeat), heartbeat-check, shard format, hparams."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time

import pytest
from launcher.progress import Heartbeat, Progress, log
from trainer_testlib import TRAINER_DIR, requires_torch

CHECK = str(TRAINER_DIR / "heartbeat-check.sh")


def _check(args, hb_file):
    env = {**os.environ, "TRAIN_HEARTBEAT_FILE": str(hb_file)}
    return subprocess.run(["sh", CHECK, *args], env=env, capture_output=True, text=True, timeout=10)


@pytest.mark.parametrize(
    ("age_s", "max_age", "rc"),
    [
        (None, "30", 1),  # missing
        (0, "2", 0),
        (0, "30", 0),
        (10, "30", 0),
        (10, "5", 1),
        (100, "60", 1),
    ],
)
def test_heartbeat_check_table(tmp_path, age_s, max_age, rc):
    hb = tmp_path / "heartbeat"
    if age_s is not None:
        hb.write_text("{}")
        t = time.time() - age_s
        os.utime(hb, (t, t))
    p = _check([max_age], hb)
    assert p.returncode == rc, p.stderr
    assert (p.stderr == "") == (rc == 0)


@pytest.mark.parametrize("args", [[], ["x"], ["0"], ["-1"], ["1.5"], ["1", "2"], [""]])
def test_heartbeat_check_usage_errors(tmp_path, args):
    p = _check(args, tmp_path / "hb")
    assert p.returncode == 2 and "usage" in p.stderr


def test_heartbeat_check_is_executable():
    assert os.access(CHECK, os.X_OK)


def test_log_lines_are_single_json_objects():
    buf = io.StringIO()
    log("checkpoint_saved", stream=buf, step=3, duration_s=0.25, loss=float("nan"))
    (line,) = buf.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "checkpoint_saved" and record["step"] == 3 and record["loss"] == "nan"
    assert "ts" in record


def test_progress_logs_on_rank0_and_beats_on_local_rank0(tmp_path):
    hb = tmp_path / "run" / "heartbeat"
    buf = io.StringIO()
    p = Progress(str(hb), rank=0, local_rank=0, log_every=2, heartbeat_min_interval_s=0.0, stream=buf)
    for step in range(1, 5):
        p.step(step, loss=1.0 / step, samples=32)
    records = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [r["step"] for r in records] == [2, 4]
    assert all(r["event"] == "step" and r["samples_per_s"] > 0 and "loss" in r for r in records)
    assert json.loads(hb.read_text())["step"] == 4

    other = io.StringIO()
    hb2 = tmp_path / "other" / "heartbeat"
    q = Progress(str(hb2), rank=3, local_rank=1, stream=other)
    q.step(1, loss=0.5, samples=1)
    q.event("checkpoint_saved", step=1)
    assert other.getvalue() == "" and not hb2.exists()


def test_heartbeat_is_rate_limited(tmp_path):
    hb = Heartbeat(str(tmp_path / "hb"), min_interval_s=60)
    assert hb.beat(1) is True
    assert hb.beat(2) is False
    assert hb.beat(3, force=True) is True
    assert json.loads((tmp_path / "hb").read_text())["step"] == 3
    assert sorted(os.listdir(tmp_path)) == ["hb"]


@requires_torch
def test_shards_round_trip_and_loader_order(tmp_path):
    import torch
    from example_trainer.data import ShardChunks, epoch_order
    from example_trainer.pack_data import ensure_packed, make_data

    params = {"shards": 2, "samples_per_shard": 256, "dim": 8, "classes": 4}
    manifest = ensure_packed(str(tmp_path), params)
    assert [s["name"] for s in manifest["shards"]] == ["shard-00000.bin", "shard-00001.bin"]
    mtime = os.stat(tmp_path / "shard-00000.bin").st_mtime_ns
    ensure_packed(str(tmp_path), params)  # already there: not rewritten
    assert os.stat(tmp_path / "shard-00000.bin").st_mtime_ns == mtime

    ds = ShardChunks(str(tmp_path), batch_size=32)
    assert len(ds) == 16
    full = {**manifest["params"]}
    (x1, y1) = make_data(full)[1]
    x, y = ds[8 + 3]  # shard 1, chunk 3
    assert torch.equal(x, x1[96:128]) and torch.equal(y, y1[96:128])

    a = epoch_order(len(ds), 0, seed=0, rank=0, world_size=2)
    b = epoch_order(len(ds), 0, seed=0, rank=1, world_size=2)
    assert len(a) == len(b) == 8 and not set(a) & set(b)
    assert a == epoch_order(len(ds), 0, seed=0, rank=0, world_size=2)
    assert a != epoch_order(len(ds), 1, seed=0, rank=0, world_size=2)

    # The endless sampler crosses epochs and resumes at any global step.
    import itertools

    from example_trainer.data import ChunkSampler

    full_stream = list(itertools.islice(iter(ChunkSampler(len(ds), 0, 1, 2)), 30))
    assert full_stream[:8] == b and full_stream[8:16] == epoch_order(len(ds), 1, seed=0, rank=1, world_size=2)
    assert list(itertools.islice(iter(ChunkSampler(len(ds), 0, 1, 2, start_step=11)), 19)) == full_stream[11:]

    with open(tmp_path / "shard-00001.bin", "r+b") as f:
        f.truncate(100)
    with pytest.raises(ValueError):
        ShardChunks(str(tmp_path), batch_size=32)


@requires_torch
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("steps: 10\nbogus: 1\n", "unknown keys ['bogus']"),
        ("- a\n- b\n", "must be a mapping"),
        ("steps: 0\n", "steps must be an integer >= 1, got 0"),
        ("data: {colour: red}\n", "unknown data keys ['colour']"),
        ("steps: [\n", "invalid YAML"),
        # Every key the trainer reads: its type and its range.
        ("num_workers: -1\n", "num_workers must be an integer from 0 to 64, got -1"),
        ("num_workers: 1000\n", "num_workers must be an integer from 0 to 64, got 1000"),
        ("num_workers: true\n", "num_workers must be an integer from 0 to 64, got True"),
        ("prefetch_factor: 0\n", "prefetch_factor must be an integer from 1 to 64, got 0"),
        ("prefetch_factor: '4'\n", "prefetch_factor must be an integer from 1 to 64, got '4'"),
        ("prefetch_factor: 2.0\n", "prefetch_factor must be an integer from 1 to 64, got 2.0"),
        ("seed: -3\n", "seed must be an integer from 0 to 4294967295, got -3"),
        ("batch_size: 64.5\n", "batch_size must be an integer >= 1, got 64.5"),
        ("hidden: null\n", "hidden must be an integer >= 1, got None"),
        ("log_every: 0\n", "log_every must be an integer >= 1, got 0"),
        ("lr: 0\n", "lr must be a number > 0, got 0"),
        ("lr: .inf\n", "lr must be a number > 0, got inf"),
        ("lr: 3e-4\n", "got '3e-4' (YAML read it as text: write it unquoted, with a decimal point and a signed exponent"),
        ("weight_decay: -0.1\n", "weight_decay must be a number >= 0, got -0.1"),
        ("pg_timeout_s: 0\n", "pg_timeout_s must be a number > 0 and <= 31536000, got 0"),
        # Past a year, datetime.timedelta in init_process_group would overflow after the nodes are up.
        ("pg_timeout_s: 1.0e+15\n", "pg_timeout_s must be a number > 0 and <= 31536000, got 1000000000000000.0"),
        ("checkpoint_cost_estimate_s: -1\n", "checkpoint_cost_estimate_s must be a number > 0 and <= 31536000, got -1"),
        ("checkpoint_min_interval_s: .nan\n", "checkpoint_min_interval_s must be a number from 0 to 31536000, got nan"),
        # An int too large for a float is judged exactly, not an OverflowError.
        (f"steps: {10**400}\n", None),
        ("device: gpu\n", "device must be one of auto, cpu, cuda, got 'gpu'"),
        ("step_delay_s: -1\n", "step_delay_s must be a number from 0 to 31536000, got -1"),
        ("stall_after_steps: -1\n", "stall_after_steps must be an integer >= 0, got -1"),
        ("data: [1]\n", "data must be a mapping"),
        ("data: {shards: 0}\n", "data.shards must be an integer >= 1, got 0"),
        ("data: {samples_per_shard: '8'}\n", "data.samples_per_shard must be an integer >= 1, got '8'"),
        ("data: {dim: 0}\n", "data.dim must be an integer >= 1, got 0"),
        ("data: {classes: 1}\n", "data.classes must be an integer >= 2, got 1"),
        ("data: {noise: -1}\n", "data.noise must be a number >= 0, got -1"),
        ("data: {seed: 1.5}\n", "data.seed must be an integer from 0 to 4294967295, got 1.5"),
        ("batch_size: 128\ndata: {samples_per_shard: 100}\n",
         "batch_size 128 is larger than data.samples_per_shard 100: lower it, or raise data.samples_per_shard"),
    ],
)
def test_hparams_validation(tmp_path, text, message):
    from example_trainer.hparams import ConfigError, load_hparams

    f = tmp_path / "hp.yaml"
    f.write_text(text)
    if message is None:  # accepted
        load_hparams(str(f))
        return
    with pytest.raises(ConfigError, match="TRAIN_HPARAMS_FILE") as err:
        load_hparams(str(f))
    assert len(err.value.errors) == 1 and message in err.value.errors[0], err.value.errors
    assert err.value.errors[0].startswith(f"TRAIN_HPARAMS_FILE {str(f)!r}: ") and "\n" not in err.value.errors[0]


@requires_torch
def test_hparams_rules_cover_every_key_the_trainer_reads():
    from example_trainer.hparams import DATA_RULES, DEFAULT_PARAMS, HPARAM_DEFAULTS, HPARAM_RULES

    assert set(HPARAM_RULES) == set(HPARAM_DEFAULTS) - {"data"}
    assert set(DATA_RULES) == set(DEFAULT_PARAMS)


@requires_torch
def test_default_hparams_file_is_valid():
    from example_trainer.hparams import load_hparams

    hp = load_hparams(str(TRAINER_DIR / "example_trainer" / "hparams.yaml"))
    assert hp["num_workers"] > 0 and hp["prefetch_factor"] > 0
