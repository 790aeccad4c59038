"""GPU pools boot a pinned EKS-optimized AMI release, of the cluster's minor, rolled monthly."""

from __future__ import annotations

import datetime

import pytest
from stack_configs import PROJECT, raw_config
from test_fabric_and_capacity import prod_pools_with

from components.config import ConfigError, StackConfig, load_stack_config
from components.config.node_pools import RELEASE_MAX_AGE_DAYS, pin_release_versions
from components.config.reader import ErrorLog, Section
from components.facts.eks_versions import AL2023_NVIDIA_RELEASE, EKS_CALENDAR

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
PIN_DAY = datetime.date(2026, 9, 3)  # the pin's build date


def load(pools=None, today=PIN_DAY) -> StackConfig:
    raw = raw_config("prod") if pools is None else {**raw_config("prod"), f"{PROJECT}:nodePools": pools}
    config = load_stack_config(raw, project=PROJECT, stack="prod", today=today)
    assert isinstance(config, StackConfig)
    return config


def test_every_pinned_release_is_of_its_own_minor_and_a_known_one():
    for minor, release in AL2023_NVIDIA_RELEASE.items():
        assert minor in EKS_CALENDAR and release.startswith(f"{minor}.")


@pytest.mark.parametrize("stack", ["prod", "prod-usw2", "dev"])
def test_every_gpu_node_group_boots_the_pinned_release(stack, plan_of):
    plan = plan_of(stack)
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    assert isinstance(config, StackConfig)
    groups = {g["inputs"]["nodeGroupName"].rsplit("-", 1)[0]: g["inputs"] for g in plan.of_type(NODE_GROUP)}
    pin = AL2023_NVIDIA_RELEASE[config.cluster.kubernetes_version]
    for pool in config.node_pools:
        (group,) = [g for g in plan.of_type(NODE_GROUP) if g["inputs"]["nodeGroupName"].endswith(f"-{pool.name}")]
        assert group["inputs"].get("releaseVersion") == (pin if pool.gpu else None), (pool.name, groups)


def test_a_pools_own_release_wins():
    pools = prod_pools_with("gpu-spot", releaseVersion="1.36.2-20260818")
    by_name = {p.name: p.release_version for p in load(pools).node_pools}
    assert by_name["gpu-spot"] == "1.36.2-20260818" and by_name["p5-efa"] == AL2023_NVIDIA_RELEASE["1.36"]


@pytest.mark.parametrize(("pool", "value", "expected"), [
    ("gpu-spot", "v20260903", "is not an AMI release version"),
    ("gpu-spot", "1.36-20260903", "is not an AMI release version"),       # the patch version is part of it
    ("gpu-spot", "1.36.3-20261340", "is not an AMI release version"),     # no such day
    ("gpu-spot", "1.35.9-20260903", "is a release of Kubernetes 1.35, the cluster runs 1.36"),
    ("system", "1.36.3-20260903", "is only read on GPU pools"),
])
def test_a_bad_release_is_refused_with_its_key_and_fix(pool, value, expected):
    pools = prod_pools_with(pool, releaseVersion=value)
    index = next(i for i, p in enumerate(pools) if p["name"] == pool)
    with pytest.raises(ConfigError) as raised:
        load(pools)
    (error,) = [e for e in raised.value.errors if "releaseVersion" in e]
    assert error.startswith(f"{PROJECT}:nodePools[{index}].releaseVersion: ") and expected in error and "Fix: " in error


@pytest.mark.parametrize(("today", "warned"), [
    (PIN_DAY, False),
    (PIN_DAY + datetime.timedelta(days=RELEASE_MAX_AGE_DAYS), False),
    (PIN_DAY + datetime.timedelta(days=RELEASE_MAX_AGE_DAYS + 1), True),   # a month and more: roll it
])
def test_a_stale_release_is_a_warning_to_roll_it(today, warned):
    warnings = [w for w in load(today=today).warnings if "releaseVersion" in w]
    assert bool(warnings) == warned
    assert all("roll it" in w for w in warnings)


def test_a_minor_without_a_verified_pin_plans_none_and_says_so():
    pools = load().node_pools
    section = Section(ErrorLog(), "", {})
    unpinned = [p.__class__(**{**p.__dict__, "release_version": None}) for p in pools]
    judged, warnings = pin_release_versions(section, tuple(unpinned), kubernetes_version="1.35", pinned=None,
                                            today=PIN_DAY)
    assert all(p.release_version is None for p in judged)
    assert len(warnings) == sum(p.gpu for p in pools) and all("unset" in w for w in warnings)
