"""/dev/shm sized from the node's training processes and loader workers; spot jobs' grace within
the 120 s interruption notice (gpu-training#27 item 9), on the synthesised plans."""

import pytest
import yaml
from plan_queries import config_of
from stack_configs import PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.config.stack import StackConfig
from components.config.vocabularies import Capacity
from components.facts.node_sizing import shared_memory_gib

STACKS = ("dev", "staging", "prod", "team-vision-prod")


# (GPUs, workers per GPU, pod memory GiB, /dev/shm GiB): workers x GPUs x 1 GiB, at most a quarter of
# the pod's memory, at least 1 GiB.
@pytest.mark.parametrize(("gpus", "workers", "pod_memory", "shm"), [
    (1, 4, 27, 4),        # g6.2xlarge, the default 4 workers
    (4, 4, 348, 16),      # staging's g6e.12xlarge
    (8, 4, 1897, 32),     # prod's p5.48xlarge
    (8, 16, 400, 100),    # capped: a quarter of 400 GiB
    (1, 8, 12, 3),        # g6.xlarge: 12 GiB pod, quarter = 3
    (1, 0, 27, 1),        # no workers: the floor
])
def test_shared_memory_default(gpus, workers, pod_memory, shm):
    assert shared_memory_gib(gpus=gpus, loader_workers_per_gpu=workers, pod_memory_gib=pod_memory) == shm


def jobsets(plan):
    return {m["metadata"]["name"]: m for m in plan.manifests() if m.get("kind") == "JobSet"}


def pod_spec(jobset):
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("stack", STACKS)
def test_dev_shm_is_sized_from_gpus_and_workers_within_the_pod_memory(stack, plan_of):
    config = config_of(stack)
    specs = jobsets(plan_of(stack))
    assert specs, f"{stack} plans no job"
    for job in config.training.jobs:
        spec = pod_spec(specs[job.name])
        (shm,) = [v for v in spec["volumes"] if v["name"] == "dshm"]
        assert shm["emptyDir"]["medium"] == "Memory"
        size = int(shm["emptyDir"]["sizeLimit"].removesuffix("Gi"))
        memory = int(spec["containers"][0]["resources"]["limits"]["memory"].removesuffix("Gi"))
        assert size == min(job.gpus_per_node * 4, memory // 4)
        assert 4 * size <= memory  # the trainer's processes keep three quarters of the limit that counts /dev/shm
        assert size == job.gpus_per_node * 4  # no stack's default hits the cap: 4, 16, 32, 32 GiB


@pytest.mark.parametrize("stack", STACKS)
def test_spot_jobs_stop_within_the_interruption_notice(stack, plan_of):
    """dev's and team-vision's jobs run on spot: 100 s (120 s notice - 20 s drain); staging's EFA
    pool is on-demand and keeps 120 s, prod's reserved p5 keeps its 270 s."""
    platform = config_of("prod" if stack == "team-vision-prod" else stack)
    assert isinstance(platform, StackConfig)
    capacity = {p.name: p.capacity for p in platform.node_pools}
    graces = {name: pod_spec(m)["terminationGracePeriodSeconds"] for name, m in jobsets(plan_of(stack)).items()}
    for job in config_of(stack).training.jobs:
        grace = graces[job.name]
        if capacity[job.pool] == Capacity.SPOT:
            assert grace <= 100
        else:
            assert grace == job.termination_grace_period_seconds >= 120
    expected = {"dev": {"example-ddp": 100}, "staging": {"example-ddp-efa": 120}, "prod": {"pretrain-p5": 270},
                "team-vision-prod": {"vision-finetune": 100}}
    assert graces == expected[stack]


def test_a_spot_job_whose_final_checkpoint_cannot_fit_the_notice_is_refused():
    raw = raw_config("dev")
    training = yaml.safe_load(yaml.safe_dump(raw[f"{PROJECT}:training"]))
    training["jobs"][0]["checkpointGiB"] = 200
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw, "training", training), project=PROJECT, stack="dev")
    (error,) = [e for e in raised.value.errors if "checkpointGiB" in e]
    assert "cannot be saved when a spot node is reclaimed" in error and "at most 100 s" in error
