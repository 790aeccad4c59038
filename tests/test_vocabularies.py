"""The closed vocabularies: the model holds their members; what leaves it is plain text.

YAML's safe dumper refuses subclasses of str, and a manifest or output must not depend on how a
serialiser treats an enum: labels, tags, tolerations and stack outputs carry `str` values only.
"""

from __future__ import annotations

import pytest
import yaml
from stack_configs import PLATFORM_STACKS, PROJECT, raw_config

from components.cluster.pool_scheduling import node_labels, node_taints, node_template_tags
from components.config import AmiType, Capacity, NatLayout, StackConfig, TaintEffect, load_stack_config
from components.workload.verify_outputs import pool_outputs


def platform(stack: str) -> StackConfig:
    config = load_stack_config(raw_config(stack), project=PROJECT, stack=stack)
    assert isinstance(config, StackConfig)
    return config


def plain_texts(value: object) -> bool:
    """Whether every text inside `value` is exactly a str (no subclass)."""
    if isinstance(value, dict):
        return all(plain_texts(k) and plain_texts(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(plain_texts(item) for item in value)
    return not isinstance(value, str) or type(value) is str


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_the_model_holds_members_of_the_vocabularies(stack):
    config = platform(stack)
    assert isinstance(config.network.nat_gateways, NatLayout)
    for pool in config.node_pools:
        assert isinstance(pool.capacity, Capacity) and isinstance(pool.ami_type, AmiType)
        assert all(isinstance(taint.effect, TaintEffect) for taint in node_taints(pool))


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_what_leaves_the_model_is_plain_text(stack):
    pools = platform(stack).node_pools
    for pool in pools:
        assert plain_texts(node_labels(pool)) and plain_texts(node_template_tags(pool))
    outputs = pool_outputs(pools)
    assert plain_texts(outputs)
    yaml.safe_dump(outputs)  # raises on a str subclass


@pytest.mark.parametrize(("vocabulary", "spellings"), [
    (Capacity, ["onDemand", "spot", "capacityBlock", "reservation"]),
    (TaintEffect, ["NoSchedule", "NoExecute", "PreferNoSchedule"]),
    (NatLayout, ["single", "perAz"]),
])
def test_a_vocabulary_is_the_stack_files_spellings_in_the_order_messages_list_them(vocabulary, spellings):
    assert list(vocabulary) == spellings
