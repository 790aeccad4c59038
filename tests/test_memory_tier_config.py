"""`training.jobs[].memoryCheckpointSeconds` (components/config/memory_tier.py): the memory checkpoint
tier's interval, sized against the pod's memory limit, and the emptyDir and contract it gives the
JobSet's pod (trainer/launcher/memory_tier.py reads them)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml
from stack_configs import PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config, memory_tier
from components.workload.training_job import trainer_pod_spec


def _dev(**job_keys):
    raw = raw_config("dev")
    training = yaml.safe_load(yaml.safe_dump(raw[f"{PROJECT}:training"]))
    training["jobs"][0].update(job_keys)
    return load_stack_config(mutate(raw, "training", training), project=PROJECT, stack="dev")


def _errors(**job_keys) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        _dev(**job_keys)
    return [e for e in raised.value.errors if "memoryCheckpointSeconds" in e]


def _pod(config):
    job = config.training.jobs[0]
    pool = next(p for p in config.node_pools if p.name == job.pool)
    return trainer_pod_spec(job, pool, config.fabric, hyperparameters_config_map="hp", checkpoints_sub_path=None,
                            stack="dev")


def test_the_tier_gets_an_emptydir_in_memory_sized_for_its_copies_and_the_contract():
    config = _dev(memoryCheckpointSeconds=30, checkpointGiB=2, checkpointIntervalSeconds=600)
    assert config.training.jobs[0].memory_checkpoint_seconds == 30
    spec = _pod(config)
    (volume,) = [v for v in spec["volumes"] if v["name"] == memory_tier.VOLUME]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{memory_tier.MEMORY_TIER_COPIES * 2}Gi"}
    container = spec["containers"][0]
    assert {"name": memory_tier.VOLUME, "mountPath": memory_tier.MOUNT_PATH} in container["volumeMounts"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TRAIN_MEMORY_CHECKPOINT_DIR"] == memory_tier.MOUNT_PATH
    assert env["TRAIN_MEMORY_CHECKPOINT_INTERVAL_S"] == "30"
    assert env["TRAIN_CHECKPOINT_INTERVAL_S"] == "600"


def test_without_the_key_the_pod_is_as_before():
    spec = _pod(_dev())
    assert memory_tier.VOLUME not in {v["name"] for v in spec["volumes"]}
    assert not any(e["name"].startswith("TRAIN_MEMORY_") for e in spec["containers"][0]["env"])


def test_a_tier_that_cannot_fit_the_pods_memory_names_the_sizes_and_the_fix():
    # dev's example-ddp: one GPU of a g6.2xlarge, a 27 GiB pod with 4 GiB of /dev/shm: half is 13.5 GiB.
    assert _dev(memoryCheckpointSeconds=30, checkpointGiB=3, checkpointIntervalSeconds=600)  # 2 x 3 + 3 + 4 = 13 GiB fits
    (error,) = _errors(memoryCheckpointSeconds=30, checkpointGiB=4, checkpointIntervalSeconds=600)  # 2 x 4 + 4 + 4 = 16 GiB does not
    assert "training.jobs[0].memoryCheckpointSeconds" in error and "30" in error
    assert "2 copies of checkpointGiB 4 in memory (8 GiB)" in error and "= 16 GiB" in error
    assert "raise memoryGiB to at least 32" in error and "a checkpoint of at most 3 GiB fits" in error


def test_the_tier_needs_a_checkpoint_size_and_an_interval_below_the_durable_one():
    (size, durable) = _errors(memoryCheckpointSeconds=30)
    assert "set checkpointGiB" in size
    assert "without checkpointIntervalSeconds the trainer chooses it" in durable and "set checkpointIntervalSeconds" in durable
    (error,) = _errors(memoryCheckpointSeconds=600, checkpointGiB=1, checkpointIntervalSeconds=600)
    assert "not shorter than the durable interval (checkpointIntervalSeconds: 600)" in error and "below 600" in error
    for bad in (0, 4, "often"):
        assert _errors(memoryCheckpointSeconds=bad, checkpointGiB=1, checkpointIntervalSeconds=600), bad


def test_the_platform_sizes_as_many_copies_as_the_launcher_holds():
    trainer = Path(__file__).resolve().parents[1] / "trainer"
    sys.path.insert(0, str(trainer))
    try:
        spec = importlib.util.find_spec("launcher.memory_tier")
        assert spec is not None
        from launcher import memory_tier as launcher_tier
    finally:
        sys.path.remove(str(trainer))
    assert launcher_tier.COPIES_WRITTEN == memory_tier.MEMORY_TIER_COPIES
