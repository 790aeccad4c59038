"""The config model: valid stacks parse; each kind of bad input is rejected, naming the key."""

import pytest
from stack_configs import DELETE, PLATFORM_STACKS, PROJECT, environment_of, mutate, raw_config

from components.config import ConfigError, load_stack_config


def load(raw, stack="dev"):
    return load_stack_config(raw, project=PROJECT, stack=stack)


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_platform_stack_is_valid(stack):
    config = load(raw_config(stack), stack)
    assert config.environment == environment_of(stack)
    assert config.team is None
    assert len(config.network.subnets) == len(config.network.availability_zones)


def test_environment_shapes():
    dev, prod = load(raw_config("dev"), "dev"), load(raw_config("prod"), "prod")
    assert len(dev.network.availability_zones) == 2 and not dev.network.nat_per_az
    assert len(prod.network.availability_zones) == 3 and prod.network.nat_per_az


# (case id, stack, key path to change, new value, text the error must contain besides the key)
INVALID = [
    ("service-cidr-overlaps-vpc", "dev", "network.kubernetesServiceCidr", "10.10.0.0/16", "overlaps the VPC CIDR"),
    ("public-vpc-cidr", "dev", "network.vpcCidr", "8.8.0.0/16", "not a private"),
    ("malformed-cidr", "dev", "network.vpcCidr", "10.10.0.0/33", "not a valid IPv4 CIDR"),
    ("cidr-host-bits", "dev", "network.vpcCidr", "10.10.0.1/16", "not a valid IPv4 CIDR"),
    ("vpc-too-small", "dev", "network.vpcCidr", "10.10.0.0/23", "too few pod IPs"),
    ("one-az", "dev", "network.availabilityZones", ["us-east-1a"], "at least 2 availability zones"),
    ("prod-two-azs", "prod", "network.availabilityZones", ["us-east-1a", "us-east-1b"], "at least 3 availability zones"),
    ("az-of-other-region", "dev", "network.availabilityZones", ["us-east-1a", "eu-west-1b"], "not an availability zone"),
    ("duplicate-az", "dev", "network.availabilityZones", ["us-east-1a", "us-east-1a"], "lists a zone twice"),
    ("prod-single-nat", "prod", "network.natGateways", "single", "one NAT gateway"),
    ("nat-layout-typo", "dev", "network.natGateways", "perAZ", "must be one of single, perAz"),
    ("retention-not-cloudwatch", "dev", "network.flowLogRetentionDays", 31, "retention period"),
    ("nccl-range-reversed", "dev", "fabric.ncclPortRange", {"first": 52000, "last": 50000}, "at least 1024 ports"),
    ("nccl-range-too-small", "dev", "fabric.ncclPortRange", {"first": 50000, "last": 50100}, "at least 1024 ports"),
    ("nccl-port-out-of-range", "dev", "fabric.ncclPortRange", {"first": 65000, "last": 70000}, "between 1024 and 65535"),
    ("rendezvous-inside-nccl", "dev", "fabric.rendezvousPorts", [50500], "inside ncclPortRange"),
    ("rendezvous-privileged", "dev", "fabric.rendezvousPorts", [80], "between 1024 and 65535"),
    ("rendezvous-quoted", "dev", "fabric.rendezvousPorts", ["29400"], "whole number"),
    ("rendezvous-empty", "dev", "fabric.rendezvousPorts", [], "at least one port"),
    ("env-differs-from-stack", "prod", "environment", "dev", "differs from the stack name"),
    ("env-unknown", "dev", "environment", "qa", "must be one of dev, staging, prod"),
    ("internet-monitoring", "dev", "network.monitoringIngress", {"cidrs": ["0.0.0.0/0"], "ports": [9400]}, "whole internet"),
    ("public-monitoring", "dev", "network.monitoringIngress", {"cidrs": ["52.0.0.0/8"], "ports": [9400]}, "not a private range"),
    ("ssh-monitoring", "dev", "network.monitoringIngress", {"cidrs": ["10.100.0.0/24"], "ports": [22]}, "administration port"),
    ("monitoring-duplicate-port", "dev", "network.monitoringIngress", {"cidrs": ["10.100.0.0/24"], "ports": [9400, 9400]}, "lists a CIDR or port twice"),
    ("monitoring-without-ports", "dev", "network.monitoringIngress", {"cidrs": ["10.100.0.0/24"]}, "needs both cidrs and ports"),
    ("cidr-without-length", "dev", "network.vpcCidr", "10.10.0.0", "has no prefix length"),
    ("typo-in-section", "dev", "network.vpcCIDR", "10.10.0.0/16", "did you mean 'vpcCidr'"),
    ("typo-top-level", "dev", "netwrok", {}, "did you mean 'network'"),
    ("missing-network", "dev", "network", DELETE, "required key is missing"),
    ("bad-region", "dev", "region", "us-east", "not an AWS region"),
    ("aws-region-ignored", "dev", "aws:region", "us-east-1", "is not read"),
    ("default-providers-on", "dev", "pulumi:disable-default-providers", DELETE, "must list \"*\""),
    ("section-not-mapping", "dev", "fabric", ["29400"], "must be a mapping"),
]


@pytest.mark.parametrize(("stack", "path", "value", "expected"), [case[1:] for case in INVALID],
                         ids=[case[0] for case in INVALID])
def test_invalid_config_is_rejected_naming_the_key(stack, path, value, expected):
    with pytest.raises(ConfigError) as raised:
        load(mutate(raw_config(stack), path, value), stack)
    top, *rest = path.split(".")
    shown_key = (top if ":" in top else f"{PROJECT}:{top}") + "".join(f".{p}" for p in rest)
    matching = [e for e in raised.value.errors if expected in e]
    assert matching, f"no error mentions {expected!r}: {raised.value.errors}"
    # The message names the key (or, for a section-wide rule, the section holding it) and a fix.
    assert any(e.startswith(shown_key.rsplit(".", 1)[0]) for e in matching), matching
    assert all("Fix:" in e for e in raised.value.errors)


def test_unknown_stack_name():
    with pytest.raises(ConfigError, match="stack 'qa': unknown stack name"):
        load(raw_config("dev"), "qa")


def test_all_errors_are_reported_together():
    raw = mutate(raw_config("prod"), "network.vpcCidr", "8.8.0.0/16")
    raw = mutate(raw, "network.natGateways", "single")
    raw = mutate(raw, "fabric.rendezvousPorts", [80])
    raw = mutate(raw, "environment", "staging")
    with pytest.raises(ConfigError) as raised:
        load(raw, "prod")
    assert len(raised.value.errors) == 4, raised.value.errors
    assert str(raised.value).startswith("4 configuration errors; nothing was created:")


@pytest.mark.parametrize(("path", "value", "wanted", "never"), [
    # a rejected value stood in as a placeholder, and rules over several values reported it
    ("fabric.ncclPortRange", {"first": "50000", "last": 51999}, "fabric.ncclPortRange.first: must be a whole number",
     "inside ncclPortRange"),
    ("fabric.ncclPortRange", {"first": "50000", "last": "51999"}, "fabric.ncclPortRange.last: must be a whole number",
     "at least 1024 ports"),
    ("fabric.rendezvousPorts", ["x", "y"], "fabric.rendezvousPorts[1]: must be a whole number", "lists a port twice"),
    ("network.monitoringIngress", {"cidrs": ["10.100.0.0/24"], "ports": ["a", "b"]},
     "network.monitoringIngress.ports[1]: must be a whole number", "lists a CIDR or port twice"),
    ("training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [None, []]}, "training.jobs[1]: must be a mapping",
     "names two jobs the same"),
])
def test_a_rejected_value_is_not_judged_again_as_its_placeholder(path, value, wanted, never):
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config("dev"), path, value), project=PROJECT, stack="dev")
    errors = raised.value.errors
    assert any(e.startswith(f"{PROJECT}:{wanted}") for e in errors), errors
    assert not [e for e in errors if never in e], errors


def test_a_rejected_taint_repeats_no_pair():
    pools = raw_config("dev")[f"{PROJECT}:nodePools"]
    pools[1]["taints"] = ["dedicated", "dedicated"]  # not mappings: every field reads as a placeholder
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config("dev"), "nodePools", pools), project=PROJECT, stack="dev")
    assert not [e for e in raised.value.errors if "repeats a key and effect" in e], raised.value.errors


@pytest.mark.parametrize("name", ["", None, "GPU_SPOT"])
def test_a_pool_whose_name_failed_leaves_the_references_to_it_unjudged(name):
    """Renaming gpu-spot wrongly also reported every job and quota naming it, with the fix
    "use one of (no GPU pools)"."""
    pools = raw_config("dev")[f"{PROJECT}:nodePools"]
    pools[1]["name"] = name
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config("dev"), "nodePools", pools), project=PROJECT, stack="dev")
    errors = raised.value.errors
    assert [e for e in errors if e.startswith(f"{PROJECT}:nodePools[1].name: ")], errors
    assert not [e for e in errors if "is not a GPU pool" in e], errors


def test_a_failed_pool_leaves_the_other_references_judged():
    """Any pool error once switched off every pool reference check: a typo'd job pool went unreported."""
    pools = raw_config("dev")[f"{PROJECT}:nodePools"]
    pools[0]["instanceTypes"] = ["m7i.bogus"]
    raw = mutate(mutate(raw_config("dev"), "nodePools", pools), "training",
                 {"gpuQuota": {"gpu-spot": 4}, "jobs": [{"name": "ddp", "pool": "gpu-spto", "nodes": 1, "gpusPerNode": 1}]})
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    errors = raised.value.errors
    assert any(e.startswith(f"{PROJECT}:nodePools[0].instanceTypes[0]: ") for e in errors), errors
    assert any(e.startswith(f"{PROJECT}:training.jobs[0].pool: is not a GPU pool") for e in errors), errors


def test_a_pool_name_given_twice_leaves_its_references_unjudged():
    """A duplicate gpu-spot (GPU, then CPU) also gave "jobs[0].pool: ... use one of (no GPU pools)"."""
    pools = raw_config("dev")[f"{PROJECT}:nodePools"]
    pools.append({**pools[0], "name": "gpu-spot"})
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config("dev"), "nodePools", pools), project=PROJECT, stack="dev")
    errors = raised.value.errors
    assert any("names two pools the same" in e for e in errors), errors
    assert not [e for e in errors if "is not a GPU pool" in e], errors
