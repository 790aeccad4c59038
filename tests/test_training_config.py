"""Validation of `training`: a job must fit one node, its pool and its queue's quota."""

import pytest
import yaml
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
    ("env-overrides-torchrun", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(env={"PET_MAX_RESTARTS": "many"})]}, "jobs[0].env.PET_MAX_RESTARTS", "torchrun's PET_* settings"),
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


@pytest.mark.parametrize(("shutdown_grace", "job_grace", "refused"), [
    (None, 120, False),   # nodeadm's 150 s leaves exactly the default grace
    (None, 121, True),
    (300, 270, False),    # prod's p5 pool and pretrain-p5
    (300, 271, True),
])
def test_a_jobs_grace_fits_its_pools_graceful_node_shutdown(shutdown_grace, job_grace, refused):
    """A node stop, a host shutdown or an auto-repair replacement gives a pod shutdownGracePeriod
    minus the critical pods' 30 s, whatever the pod asks."""
    raw = raw_config("prod")
    pools = raw[f"{PROJECT}:nodePools"]
    index = next(i for i, p in enumerate(pools) if p["name"] == "p5-efa")
    pool = {k: v for k, v in pools[index].items() if k != "shutdownGracePeriodSeconds"}
    if shutdown_grace is not None:
        pool["shutdownGracePeriodSeconds"] = shutdown_grace
    raw = mutate(raw, "nodePools", [*pools[:index], pool, *pools[index + 1:]])
    raw = mutate(raw, "training", {"gpuQuota": {"p5-efa": 16}, "jobs": [
        job(pool="p5-efa", gpusPerNode=8, terminationGracePeriodSeconds=job_grace)]})
    try:
        load_stack_config(raw, project=PROJECT, stack="prod", secret_keys=None)
        errors = []
    except ConfigError as error:
        errors = error.errors
    grace_errors = [e for e in errors if "training.jobs[0].terminationGracePeriodSeconds" in e and "node shutdown" in e]
    assert bool(grace_errors) == refused, errors
    if refused:
        assert f"shutdownGracePeriodSeconds to at least {job_grace + 30}" in grace_errors[0]


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


def with_spot_pool(raw, **changes):
    pools = [dict(pool, **changes) if pool["name"] == "gpu-spot" else pool for pool in raw[f"{PROJECT}:nodePools"]]
    return mutate(raw, "nodePools", pools)


@pytest.mark.parametrize(("nodes", "zones", "refused"), [
    (2, ["use1-az4", "use1-az6"], True),  # the gang may straddle the two AZs
    (1, ["use1-az4", "use1-az6"], False),  # one node is in one AZ
    (2, ["use1-az4"], False),  # the pool keeps the gang in one AZ
])
def test_a_gang_over_several_azs_is_refused(nodes, zones, refused):
    raw = mutate(raw_config("dev"), "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(nodes=nodes, image=DIGEST)]})
    raw = with_spot_pool(raw, availabilityZones=zones)
    if not refused:
        load_stack_config(raw, project=PROJECT, stack="dev")
        return
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    [error] = raised.value.errors
    assert error.startswith(f"{PROJECT}:training.jobs[0].nodes: a gang of 2 nodes on pool gpu-spot, which spans 2 AZs")
    assert "availabilityZones: [<AZ ID>]" in error


@pytest.mark.parametrize(("types", "stack_cuda", "job_cuda", "refused"), [
    (["p6-b200.48xlarge"], None, None, "is below CUDA 12.8, the first release with code for the pool's B200"),
    (["p6-b200.48xlarge"], "12.8", None, None),
    (["p6-b200.48xlarge"], None, "13.0", None),  # the job's own image
    (["g6.2xlarge", "g5.2xlarge"], None, None, None),  # 12.6 covers L4 and A10G
    (["g6.2xlarge"], "13.2", None, None),  # the 580 driver runs every 13.x (minor version compatibility)
    (["g6.2xlarge"], "14.0", None, "needs a newer NVIDIA driver than the EKS NVIDIA AMI's 580 branch"),
    (["g6.2xlarge"], "11.7", None, "is below CUDA 11.8, the first release with code for the pool's L4"),
    (["g6.2xlarge", "g5.2xlarge"], None, "11.1", "is below CUDA 11.8, the first release with code for the pool's L4"),
])
def test_an_image_cuda_is_checked_against_the_pool(types, stack_cuda, job_cuda, refused):
    training = {"gpuQuota": {"gpu-spot": 4}, "jobs": [job(image=DIGEST, nodes=1, **({"imageCuda": job_cuda} if job_cuda else {}))]}
    raw = with_spot_pool(mutate(raw_config("dev"), "training", training), instanceTypes=types, capacity="onDemand")
    if stack_cuda:
        raw = mutate(raw, "trainerImageCuda", stack_cuda)
    if refused is None:
        assert load_stack_config(raw, project=PROJECT, stack="dev").training.jobs[0].image_cuda == (job_cuda or stack_cuda or "12.6")
        return
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    [error] = raised.value.errors
    assert error.startswith(f"{PROJECT}:training.jobs[0].imageCuda: ") and refused in error, error


@pytest.mark.parametrize("value", ["12", "cuda12.6", "12.6.3", " "])
def test_a_cuda_that_is_not_major_minor_is_refused(value):
    raw = mutate(raw_config("dev"), "trainerImageCuda", value)
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    assert any(e.startswith(f"{PROJECT}:trainerImageCuda: ") for e in raised.value.errors), raised.value.errors


def test_a_pool_refused_for_its_own_errors_is_named_not_hidden_behind_no_gpu_pools():
    """dev's one GPU pool has a bad instance type and the job names a pool that does not exist: the
    fix names the refused pool, never "use one of (no GPU pools)"."""
    raw = raw_config("dev")
    pools = [dict(p) for p in raw[f"{PROJECT}:nodePools"]]
    spot = next(p for p in pools if p["name"] == "gpu-spot")
    spot["instanceTypes"] = ["g6.xlarg", *spot["instanceTypes"][1:]]
    training = yaml.safe_load(yaml.safe_dump(raw[f"{PROJECT}:training"]))
    training["jobs"][0]["pool"] = "gpu-spt"
    with pytest.raises(ConfigError) as refused:
        load_stack_config(mutate(mutate(raw, "nodePools", pools), "training", training), project=PROJECT, stack="dev")
    (error,) = [e for e in refused.value.errors if "jobs[0].pool" in e]
    assert "no GPU pools" not in error and "nodePools gpu-spot: refused above, fix it first" in error, error
