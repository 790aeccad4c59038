"""Validation of `cluster` and `nodePools`: each rule has its own bad config."""

import pytest
from stack_configs import DELETE, PROJECT, mutate, raw_config

from components.config import ConfigError, load_stack_config

SYSTEM = {"name": "system", "instanceTypes": ["m7i.xlarge"], "capacity": "onDemand", "gpu": False,
          "size": {"min": 1, "desired": 1, "max": 2}}


RESERVATION = "cr-0123456789abcdef0"
# A p5 pool on a targeted On-Demand Capacity Reservation, minus its reservation id.
RESERVED_P5 = {"name": "p5", "instanceTypes": ["p5.48xlarge"], "capacity": "reservation", "gpu": True, "efa": True,
               "availabilityZones": ["use1-az4"], "size": {"min": 0, "desired": 0, "max": 2}}


def gpu_pool(**changes):
    base = {"name": "gpu", "instanceTypes": ["g6.12xlarge", "g5.12xlarge"], "capacity": "spot", "gpu": True,
            "size": {"min": 0, "desired": 0, "max": 2}}
    return {**base, **changes}


def without_jobs(stack):
    """The stack's config minus its training section and team registry, whose jobs and quotas name
    the stack's own pools."""
    return mutate(mutate(raw_config(stack), "training", DELETE), "teams", DELETE)


def errors_for(stack, path, value):
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(without_jobs(stack), path, value), project=PROJECT, stack=stack)
    return raised.value.errors


POOL_CASES = [
    ("unknown-type", gpu_pool(instanceTypes=["g9.mega", "g6.12xlarge"]), "nodePools[1].instanceTypes[0]", "not an instance type"),
    ("near-miss-type", gpu_pool(instanceTypes=["g6.12xlarg", "g5.12xlarge"]), "nodePools[1].instanceTypes[0]", "did you mean 'g6.12xlarge'?"),
    ("type-with-a-space", gpu_pool(instanceTypes=["g6.12xlarge ", "g5.12xlarge"]), "nodePools[1].instanceTypes[0]",
     "has spaces around the instance type (got 'g6.12xlarge '). Fix: write 'g6.12xlarge' without them"),
    ("gpu-pool-of-cpu-type", gpu_pool(instanceTypes=["m7i.xlarge", "m6i.xlarge"]), "nodePools[1].instanceTypes[0]", "has no GPU"),
    ("cpu-pool-of-gpu-type", {**SYSTEM, "name": "cpu2", "instanceTypes": ["g6.xlarge"]}, "nodePools[1].instanceTypes[0]", "has GPUs"),
    ("spot-single-type", gpu_pool(instanceTypes=["g6.12xlarge"]), "nodePools[1].instanceTypes", "at least 2 instance types"),
    ("spot-mixed-gpu-count", gpu_pool(instanceTypes=["g6.12xlarge", "g6.48xlarge"]), "nodePools[1].instanceTypes", "mixes GPU count"),
    ("spot-mixed-gpu-memory", gpu_pool(instanceTypes=["g6.12xlarge", "g6e.12xlarge"]), "nodePools[1].instanceTypes", "mixes GPU count or GPU memory"),
    ("efa-on-non-efa-type", gpu_pool(instanceTypes=["g6.2xlarge", "g5.2xlarge"], efa=True), "nodePools[1].instanceTypes[0]", "does not support EFA"),
    ("efa-across-azs", gpu_pool(capacity="onDemand", instanceTypes=["p5.48xlarge"], efa=True,
                                availabilityZones=["use1-az1", "use1-az2"]), "nodePools[1].availabilityZones", "exactly one AZ"),
    ("min-above-desired", gpu_pool(size={"min": 2, "desired": 1, "max": 3}), "nodePools[1].size", "min <= desired <= max"),
    ("desired-above-max", gpu_pool(size={"min": 0, "desired": 4, "max": 3}), "nodePools[1].size", "min <= desired <= max"),
    ("max-zero", gpu_pool(size={"min": 0, "desired": 0, "max": 0}), "nodePools[1].size.max", "at least 1"),
    ("zone-outside-network", {**SYSTEM, "name": "cpu2", "availabilityZones": ["us-east-1f"]}, "nodePools[1].availabilityZones[0]",
     "neither an AZ ID nor one of the network"),
    ("capacity-block-without-reservation", gpu_pool(capacity="capacityBlock", instanceTypes=["p5.48xlarge"],
                                                    availabilityZones=["use1-az4"]), "nodePools[1].capacityReservationId", "reservation id"),
    ("capacity-typo", gpu_pool(capacity="Spot"), "nodePools[1].capacity", "must be one of onDemand, spot, capacityBlock, reservation"),
    ("bad-pool-name", gpu_pool(name="GPU_Pool"), "nodePools[1].name", "not a valid pool name"),
    ("bad-taint-effect", gpu_pool(taints=[{"key": "a", "value": "b", "effect": "NoScheduleX"}]), "nodePools[1].taints[0].effect", "must be one of"),
    ("bad-label", gpu_pool(labels={"team": "vision team"}), "nodePools[1].labels.team", "not a valid Kubernetes label"),
    ("reserved-label", gpu_pool(labels={"node-role.kubernetes.io/gpu": "true"}), "nodePools[1].labels.node-role.kubernetes.io/gpu", "reserved for Kubernetes"),
    ("platform-label", gpu_pool(labels={"gpu-training/pool": "x"}), "nodePools[1].labels.gpu-training/pool", "platform's own prefix"),
    ("bad-taint-key", gpu_pool(taints=[{"key": "bad key!!", "value": "x", "effect": "NoSchedule"}]), "nodePools[1].taints[0]", "not a valid Kubernetes label or taint"),
    ("pool-key-typo", gpu_pool(instanceType=["g6.12xlarge"]), "nodePools[1].instanceType", "did you mean 'instanceTypes'"),
    ("duplicate-name", {**SYSTEM}, "nodePools", "names two pools the same"),
    # Capacity and zones of GPU pools.
    ("reservation-without-id", RESERVED_P5, "nodePools[1].capacityReservationId", "needs its reservation id"),
    ("reservation-id-malformed", {**RESERVED_P5, "capacityReservationId": "cr-12345"}, "nodePools[1].capacityReservationId",
     "is not a capacity reservation id"),
    ("reservation-id-uppercase", {**RESERVED_P5, "capacityReservationId": "cr-0123456789ABCDEF0"}, "nodePools[1].capacityReservationId",
     "is not a capacity reservation id"),
    ("reservation-of-two-types", gpu_pool(capacity="reservation", capacityReservationId=RESERVATION, availabilityZones=["use1-az4"]),
     "nodePools[1].instanceTypes", "reserves exactly one instance type"),
    ("reservation-id-on-spot-pool", gpu_pool(capacityReservationId=RESERVATION), "nodePools[1].capacityReservationId",
     "only used with capacity: capacityBlock or reservation, not spot"),
    ("reservation-id-on-on-demand-pool", {**RESERVED_P5, "capacity": "onDemand", "capacityReservationId": RESERVATION},
     "nodePools[1].capacityReservationId", "not onDemand"),
    ("reservation-without-zone", {**{k: v for k, v in RESERVED_P5.items() if k != "availabilityZones"}, "efa": False,
                                  "capacityReservationId": RESERVATION},
     "nodePools[1].availabilityZones", "exactly one AZ"),
    ("capacity-block-in-two-zones", {**RESERVED_P5, "capacity": "capacityBlock", "capacityReservationId": RESERVATION,
                                     "availabilityZones": ["use1-az4", "use1-az6"]}, "nodePools[1].availabilityZones", "exactly one AZ"),
    ("az-name-on-efa-pool", {**RESERVED_P5, "capacityReservationId": RESERVATION, "availabilityZones": ["us-east-1a"]},
     "nodePools[1].availabilityZones[0]", "is an AZ name; GPU pools name their zones by AZ ID"),
    ("az-name-on-gpu-pool", gpu_pool(availabilityZones=["us-east-1a", "us-east-1b"]), "nodePools[1].availabilityZones[0]",
     "is an AZ name"),
    ("efa-pool-without-zone", gpu_pool(capacity="onDemand", instanceTypes=["p5.48xlarge"], efa=True), "nodePools[1].availabilityZones",
     "exactly one AZ"),
    ("az-id-of-another-region", {**RESERVED_P5, "capacityReservationId": RESERVATION, "availabilityZones": ["usw2-az1"]},
     "nodePools[1].availabilityZones[0]", "AZ ID of another region than us-east-1"),
    ("az-id-malformed", {**RESERVED_P5, "capacityReservationId": RESERVATION, "availabilityZones": ["use1-azX"]},
     "nodePools[1].availabilityZones[0]", "neither an AZ ID nor one of the network"),
    ("zone-id-twice", gpu_pool(availabilityZones=["use1-az1", "use1-az1"]), "nodePools[1].availabilityZones", "lists a zone twice"),
    ("shutdown-grace-below-nodeadm", gpu_pool(shutdownGracePeriodSeconds=60), "nodePools[1].shutdownGracePeriodSeconds",
     "must be between 150 and 3630"),
    ("shutdown-grace-on-cpu-pool", {**SYSTEM, "name": "cpu2", "shutdownGracePeriodSeconds": 300},
     "nodePools[1].shutdownGracePeriodSeconds", "is set on a CPU pool"),
]


@pytest.mark.parametrize(("pool", "key", "expected"), [c[1:] for c in POOL_CASES], ids=[c[0] for c in POOL_CASES])
def test_bad_pool_is_rejected(pool, key, expected):
    errors = errors_for("dev", "nodePools", [SYSTEM, pool])
    assert any(e.startswith(f"{PROJECT}:{key}") and expected in e for e in errors), errors


@pytest.mark.parametrize("pools", [
    [gpu_pool()],
    [{**SYSTEM, "size": {"min": 0, "desired": 0, "max": 2}}, gpu_pool()],
    # no controller tolerates a pool's own taint: they would never schedule
    [{**SYSTEM, "taints": [{"key": "dedicated", "value": "sys", "effect": "NoSchedule"}]}, gpu_pool()],
    [{**SYSTEM, "taints": [{"key": "dedicated", "value": "sys", "effect": "NoExecute"}]}, gpu_pool()],
], ids=["gpu-only", "cpu-pool-scales-to-zero", "cpu-pool-no-schedule", "cpu-pool-no-execute"])
def test_cluster_needs_a_system_pool(pools):
    errors = errors_for("dev", "nodePools", pools)
    assert any(e.startswith(f"{PROJECT}:nodePools:") and "needs a CPU pool with min >= 1 and no NoSchedule" in e
               for e in errors), errors


def test_a_system_pool_may_prefer_other_pods_away():
    preferring = {**SYSTEM, "taints": [{"key": "dedicated", "value": "sys", "effect": "PreferNoSchedule"}]}
    config = load_stack_config(mutate(without_jobs("dev"), "nodePools", [preferring, gpu_pool()]), project=PROJECT, stack="dev")
    assert config.system_pool.name == "system"


def test_an_efa_pool_does_not_mix_efa_interface_counts():
    """The launch template names one EFA interface per network card of the first type: a
    g6e.12xlarge (1 card) cannot launch from a g6e.24xlarge's template (2)."""
    pool = gpu_pool(instanceTypes=["g6e.24xlarge", "g6e.12xlarge"], capacity="onDemand", efa=True,
                    availabilityZones=["us-east-1a"])
    errors = errors_for("dev", "nodePools", [SYSTEM, pool])
    assert any(e.startswith(f"{PROJECT}:nodePools[1].instanceTypes:") and "mixes EFA interface counts "
               "(g6e.24xlarge=2, g6e.12xlarge=1)" in e for e in errors), errors


CLUSTER_CASES = [
    ("unsupported-version", "dev", "cluster.kubernetesVersion", "1.29", "cluster.kubernetesVersion", "not a Kubernetes minor offered"),
    ("prod-public-endpoint", "prod", "cluster.endpointPublicAccess", True, "cluster.endpointPublicAccess", "must be private"),
    ("public-endpoint-open-to-all", "dev", "cluster.publicAccessCidrs", ["0.0.0.0/0"], "cluster.publicAccessCidrs[0]",
     "internet"),
    ("public-endpoint-from-a-private-range", "dev", "cluster.publicAccessCidrs", ["203.0.113.0/24", "10.0.0.0/8"],
     "cluster.publicAccessCidrs[1]", "private or reserved range"),
    ("public-endpoint-from-loopback", "dev", "cluster.publicAccessCidrs", ["127.0.0.0/8"], "cluster.publicAccessCidrs[0]",
     "private or reserved range"),
    ("public-endpoint-without-allow-list", "dev", "cluster.publicAccessCidrs", DELETE, "cluster.publicAccessCidrs",
     "needs an allow-list"),
    ("public-endpoint-with-empty-allow-list", "dev", "cluster.publicAccessCidrs", [], "cluster.publicAccessCidrs",
     "needs an allow-list"),
    ("no-admin", "dev", "cluster.adminPrincipals", [], "cluster.adminPrincipals", "at least one IAM role"),
    ("admin-not-an-arn", "dev", "cluster.adminPrincipals", ["admin"], "cluster.adminPrincipals[0]", "not an IAM role"),
    ("admin-of-no-partition", "dev", "cluster.adminPrincipals", ["arn:aws-foo:iam::123456789012:role/admin"],
     "cluster.adminPrincipals[0]", "not an IAM role"),
]


@pytest.mark.parametrize(("stack", "path", "value", "key", "expected"), [c[1:] for c in CLUSTER_CASES],
                         ids=[c[0] for c in CLUSTER_CASES])
def test_bad_cluster_config_is_rejected(stack, path, value, key, expected):
    errors = errors_for(stack, path, value)
    assert any(e.startswith(f"{PROJECT}:{key}") and expected in e for e in errors), errors


def test_reserved_efa_pool_keeps_its_zone_id_and_reservation():
    raw = mutate(without_jobs("prod"), "nodePools", [SYSTEM, {**RESERVED_P5, "capacityReservationId": RESERVATION}])
    pool = load_stack_config(raw, project=PROJECT, stack="prod").node_pools[1]
    assert pool.availability_zones == ("use1-az4",)
    assert (pool.capacity_reservation_id, pool.eks_capacity_type, pool.efa_interfaces) == (RESERVATION, "ON_DEMAND", 32)


def test_subnets_must_hold_every_pool_at_its_largest():
    """A /20 over 2 AZs leaves /22 private subnets (1019 usable IPs); 4 g6.48xlarge nodes can take
    258 IPs each (250 pods + 2 warm + 6 ENI addresses) and the 2 system nodes 60 each."""
    big_pool = gpu_pool(instanceTypes=["g6.48xlarge", "g5.48xlarge"], size={"min": 0, "desired": 0, "max": 4})
    raw = mutate(mutate(without_jobs("dev"), "network.vpcCidr", "10.10.0.0/20"), "nodePools", [SYSTEM, big_pool])
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    errors = [e for e in raised.value.errors if "IPs in" in e]
    assert len(errors) == 2  # one per zone: the pools may land in either
    error = errors[0]
    assert error.startswith(f"{PROJECT}:nodePools:")
    assert "can take 1152 IPs in us-east-1a, whose private subnet 10.10.0.0/22 has 1019" in error
    assert "gpu 1032" in error and "Fix: use a larger network.vpcCidr" in error
    smaller = mutate(raw, "nodePools", [SYSTEM, {**big_pool, "size": {"min": 0, "desired": 0, "max": 3}}])
    assert load_stack_config(smaller, project=PROJECT, stack="dev")  # 2 x 60 + 3 x 258 = 894 fits
