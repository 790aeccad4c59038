"""Validation of `training`: a job must fit one node, its pool and its queue's quota."""

import pytest
from stack_configs import PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config

DIGEST = "111122223333.dkr.ecr.us-east-1.amazonaws.com/gpu-training-dev/trainer@sha256:" + "0" * 64


def job(**changes):
    return {"name": "ddp", "pool": "gpu-spot", "nodes": 2, "gpusPerNode": 1, **changes}


def errors_for(training, stack="dev"):
    raw = mutate(raw_config(stack), "training", training)
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack=stack)
    return raised.value.errors


CASES = [
    ("too-many-gpus-per-pod", {"gpuQuota": {"gpu-spot": 8}, "jobs": [job(gpusPerNode=2)]}, "jobs[0].gpusPerNode", "exceeds the 1 GPUs of one"),
    ("over-quota", {"gpuQuota": {"gpu-spot": 1}, "jobs": [job()]}, "jobs[0].nodes", "would never be admitted"),
    ("no-quota-for-pool", {"jobs": [job()]}, "jobs[0].nodes", "quota on gpu-spot is 0"),
    ("more-nodes-than-pool", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(nodes=5)]}, "jobs[0].nodes", "exceeds pool gpu-spot's size.max"),
    ("quota-above-capacity", {"gpuQuota": {"gpu-spot": 99}}, "gpuQuota.gpu-spot", "exceeds the pool's capacity"),
    ("quota-on-cpu-pool", {"gpuQuota": {"system": 1}}, "gpuQuota.system", "not a GPU pool"),
    ("job-on-cpu-pool", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(pool="system")]}, "jobs[0].pool", "not a GPU pool"),
    ("undeclared-secret", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(secrets=["db-password"])]}, "jobs[0].secrets", "not declared"),
    ("bad-job-name", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(name="My_Job")]}, "jobs[0].name", "not a valid job name"),
    ("image-by-tag", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(image="trainer:latest")]}, "jobs[0].image", "pinned by digest"),
    ("missing-hyperparameters", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(hyperparameters="nope.yaml")]},
     "jobs[0].hyperparameters", "not a file in this repository"),
    ("hyperparameters-outside-repo", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(hyperparameters="../../etc/passwd")]},
     "jobs[0].hyperparameters", "not a file in this repository"),
    ("cpu-above-node", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(cpu=64)]}, "jobs[0].cpu", "exceeds this job's share"),
    ("shm-above-memory", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(memoryGiB=8, sharedMemoryGiB=3)]},
     "jobs[0].sharedMemoryGiB", "must be at most a quarter of the pod's memory (8 GiB)"),
    ("shm-above-default-memory", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(sharedMemoryGiB=7)]},
     "jobs[0].sharedMemoryGiB", "must be at most a quarter of the pod's memory (27 GiB)"),
    ("too-many-loader-workers", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(loaderWorkersPerGpu=65)]},
     "jobs[0].loaderWorkersPerGpu", "must be between 0 and 64"),
    # dev's gpu-spot is spot: EC2 terminates the node 120 s after the notice; 20 s go to the drain.
    ("spot-grace-above-the-notice", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(terminationGracePeriodSeconds=120)]},
     "jobs[0].terminationGracePeriodSeconds", "is killed after at most 100 s"),
    ("env-overrides-contract", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(env={"TRAIN_NNODES": "9"})]}, "jobs[0].env.TRAIN_NNODES", "TRAIN_* contract"),
    ("duplicate-job", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(), job()]}, "jobs", "names two jobs the same"),
    ("job-key-typo", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(gpuPerNode=1)]}, "jobs[0].gpuPerNode", "did you mean 'gpusPerNode'"),
    ("disruption-restarts-negative", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(maxDisruptionRestarts=-1)]},
     "jobs[0].maxDisruptionRestarts", "must be between 0 and 1000"),
    ("disruption-restarts-unbounded", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(maxDisruptionRestarts=100000)]},
     "jobs[0].maxDisruptionRestarts", "must be between 0 and 1000"),
    # g6.2xlarge: 8 vCPU - 90m kube-reserved - 770m of DaemonSets - the 2 vCPU margin leaves 5.14.
    ("cpu-into-the-daemons-room", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(cpu=6)]}, "jobs[0].cpu",
     "exceeds this job's share of a g6.2xlarge node (5.14 vCPU)"),
]


@pytest.mark.parametrize(("training", "key", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_job_is_rejected(training, key, expected):
    errors = errors_for(training)
    assert any(e.startswith(f"{PROJECT}:training.{key}") and expected in e for e in errors), errors


def test_efa_pool_is_used_by_whole_nodes():
    errors = errors_for({"gpuQuota": {"p5-efa": 16}, "jobs": [job(pool="p5-efa", gpusPerNode=4)]}, stack="prod")
    assert any("training.jobs[0].gpusPerNode" in e and "whole nodes" in e for e in errors), errors


def test_jobs_without_a_pinned_image_are_rejected():
    raw = mutate(mutate(raw_config("dev"), "trainerImage", ""), "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job()]})
    with pytest.raises(ConfigError, match=r"training.jobs\[0\].image: must be an image pinned by digest"):
        load_stack_config(raw, project=PROJECT, stack="dev")


def test_a_valid_job_parses():
    raw = mutate(raw_config("dev"), "training", {"gpuQuota": {"gpu-spot": 4},
                                                 "jobs": [job(image=DIGEST, cpu=4, ttlSecondsAfterFinished=3600)]})
    config = load_stack_config(raw, project=PROJECT, stack="dev")
    (parsed,) = config.training.jobs
    assert (parsed.total_gpus, parsed.cpu, parsed.image, parsed.ttl_seconds_after_finished) == (2, 4, DIGEST, 3600)


@pytest.mark.parametrize(("nodes", "zones", "warned"), [
    (2, ["use1-az4", "use1-az6"], True),  # the gang may straddle the two AZs
    (1, ["use1-az4", "use1-az6"], False),  # one node is in one AZ
    (2, ["use1-az4"], False),  # the pool keeps the gang in one AZ
])
def test_a_gang_over_several_azs_is_warned_about(nodes, zones, warned):
    raw = mutate(raw_config("dev"), "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(nodes=nodes, image=DIGEST)]})
    pools = [dict(pool, availabilityZones=zones) if pool["name"] == "gpu-spot" else pool for pool in raw[f"{PROJECT}:nodePools"]]
    config = load_stack_config(mutate(raw, "nodePools", pools), project=PROJECT, stack="dev")
    zone_warnings = [w for w in config.warnings if w.startswith("training job ddp: ")]
    assert bool(zone_warnings) is warned, config.warnings
    if warned:
        assert "spans 2 AZs" in zone_warnings[0] and "give the pool one AZ" in zone_warnings[0]
