"""Validation of `cluster` and `nodePools`: each rule has its own bad config."""

import pytest
from conftest import DELETE, PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config

SYSTEM = {"name": "system", "instanceTypes": ["m7i.xlarge"], "capacity": "onDemand", "gpu": False,
          "size": {"min": 1, "desired": 1, "max": 2}}


def gpu_pool(**changes):
    base = {"name": "gpu", "instanceTypes": ["g6.12xlarge", "g5.12xlarge"], "capacity": "spot", "gpu": True,
            "size": {"min": 0, "desired": 0, "max": 2}}
    return {**base, **changes}


def without_jobs(stack):
    """The stack's config minus its training section, whose jobs name the stack's own pools."""
    return mutate(raw_config(stack), "training", DELETE)


def errors_for(stack, path, value):
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(without_jobs(stack), path, value), project=PROJECT, stack=stack)
    return raised.value.errors


POOL_CASES = [
    ("unknown-type", gpu_pool(instanceTypes=["g9.mega", "g6.12xlarge"]), "nodePools[1].instanceTypes[0]", "not an instance type"),
    ("gpu-pool-of-cpu-type", gpu_pool(instanceTypes=["m7i.xlarge", "m6i.xlarge"]), "nodePools[1].instanceTypes[0]", "has no GPU"),
    ("cpu-pool-of-gpu-type", {**SYSTEM, "name": "cpu2", "instanceTypes": ["g6.xlarge"]}, "nodePools[1].instanceTypes[0]", "has GPUs"),
    ("spot-single-type", gpu_pool(instanceTypes=["g6.12xlarge"]), "nodePools[1].instanceTypes", "at least 2 instance types"),
    ("spot-mixed-gpu-count", gpu_pool(instanceTypes=["g6.12xlarge", "g6.48xlarge"]), "nodePools[1].instanceTypes", "mixes GPU count"),
    ("spot-mixed-gpu-memory", gpu_pool(instanceTypes=["g6.12xlarge", "g6e.12xlarge"]), "nodePools[1].instanceTypes", "mixes GPU count or GPU memory"),
    ("efa-on-non-efa-type", gpu_pool(instanceTypes=["g6.2xlarge", "g5.2xlarge"], efa=True), "nodePools[1].instanceTypes[0]", "does not support EFA"),
    ("efa-across-azs", gpu_pool(capacity="onDemand", instanceTypes=["p5.48xlarge"], efa=True,
                                availabilityZones=["us-east-1a", "us-east-1b"]), "nodePools[1].availabilityZones", "one AZ"),
    ("min-above-desired", gpu_pool(size={"min": 2, "desired": 1, "max": 3}), "nodePools[1].size", "min <= desired <= max"),
    ("desired-above-max", gpu_pool(size={"min": 0, "desired": 4, "max": 3}), "nodePools[1].size", "min <= desired <= max"),
    ("max-zero", gpu_pool(size={"min": 0, "desired": 0, "max": 0}), "nodePools[1].size.max", "at least 1"),
    ("zone-outside-network", gpu_pool(availabilityZones=["us-east-1f"]), "nodePools[1].availabilityZones", "not one of the network"),
    ("capacity-block-without-reservation", gpu_pool(capacity="capacityBlock", instanceTypes=["p5.48xlarge"],
                                                    availabilityZones=["us-east-1a"]), "nodePools[1].capacityReservationId", "reservation id"),
    ("capacity-typo", gpu_pool(capacity="Spot"), "nodePools[1].capacity", "must be one of onDemand, spot, capacityBlock"),
    ("bad-pool-name", gpu_pool(name="GPU_Pool"), "nodePools[1].name", "not a valid pool name"),
    ("bad-taint-effect", gpu_pool(taints=[{"key": "a", "value": "b", "effect": "NoScheduleX"}]), "nodePools[1].taints[0].effect", "must be one of"),
    ("bad-label", gpu_pool(labels={"team": "vision team"}), "nodePools[1].labels.team", "not a valid Kubernetes label"),
    ("reserved-label", gpu_pool(labels={"node-role.kubernetes.io/gpu": "true"}), "nodePools[1].labels.node-role.kubernetes.io/gpu", "reserved for Kubernetes"),
    ("platform-label", gpu_pool(labels={"gpu-training/pool": "x"}), "nodePools[1].labels.gpu-training/pool", "platform's own prefix"),
    ("bad-taint-key", gpu_pool(taints=[{"key": "bad key!!", "value": "x", "effect": "NoSchedule"}]), "nodePools[1].taints[0]", "not a valid Kubernetes label or taint"),
    ("pool-key-typo", gpu_pool(instanceType=["g6.12xlarge"]), "nodePools[1].instanceType", "did you mean 'instanceTypes'"),
    ("duplicate-name", {**SYSTEM}, "nodePools", "names two pools the same"),
]


@pytest.mark.parametrize(("pool", "key", "expected"), [c[1:] for c in POOL_CASES], ids=[c[0] for c in POOL_CASES])
def test_bad_pool_is_rejected(pool, key, expected):
    errors = errors_for("dev", "nodePools", [SYSTEM, pool])
    assert any(e.startswith(f"{PROJECT}:{key}") and expected in e for e in errors), errors


def test_cluster_needs_a_system_pool():
    errors = errors_for("dev", "nodePools", [gpu_pool()])
    assert any(e.startswith(f"{PROJECT}:nodePools:") and "needs a CPU pool with min >= 1" in e for e in errors), errors


CLUSTER_CASES = [
    ("unsupported-version", "dev", "cluster.kubernetesVersion", "1.29", "cluster.kubernetesVersion", "must be one of"),
    ("prod-public-endpoint", "prod", "cluster.endpointPublicAccess", True, "cluster.endpointPublicAccess", "must be private"),
    ("public-endpoint-open-to-all", "dev", "cluster.publicAccessCidrs", ["0.0.0.0/0"], "cluster.publicAccessCidrs[0]",
     "internet"),
    ("public-endpoint-without-allow-list", "dev", "cluster.publicAccessCidrs", DELETE, "cluster.publicAccessCidrs",
     "needs an allow-list"),
    ("public-endpoint-with-empty-allow-list", "dev", "cluster.publicAccessCidrs", [], "cluster.publicAccessCidrs",
     "needs an allow-list"),
    ("no-admin", "dev", "cluster.adminPrincipals", [], "cluster.adminPrincipals", "at least one IAM role"),
    ("admin-not-an-arn", "dev", "cluster.adminPrincipals", ["admin"], "cluster.adminPrincipals[0]", "not an IAM role"),
]


@pytest.mark.parametrize(("stack", "path", "value", "key", "expected"), [c[1:] for c in CLUSTER_CASES],
                         ids=[c[0] for c in CLUSTER_CASES])
def test_bad_cluster_config_is_rejected(stack, path, value, key, expected):
    errors = errors_for(stack, path, value)
    assert any(e.startswith(f"{PROJECT}:{key}") and expected in e for e in errors), errors


def test_efa_pool_defaults_to_one_zone():
    raw = mutate(without_jobs("prod"), "nodePools", [SYSTEM, gpu_pool(capacity="onDemand", instanceTypes=["p5.48xlarge"], efa=True)])
    config = load_stack_config(raw, project=PROJECT, stack="prod")
    assert config.node_pools[1].availability_zones == ("us-east-1a",)
    assert config.node_pools[1].efa_interfaces == 32
