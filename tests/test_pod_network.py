"""EFA interface layout, the IPs a node takes, and AZ IDs (pure facts)."""

import pytest

from components.facts.instance_types import INSTANCE_TYPES
from components.facts.pod_network import efa_interfaces, node_ip_addresses, usable_ips
from components.facts.zones import is_zone_id, zone_id_prefix


@pytest.mark.parametrize("name", sorted(n for n, t in INSTANCE_TYPES.items() if t.has_efa))
def test_one_efa_device_per_card_and_only_the_primary_carries_an_ip(name):
    instance = INSTANCE_TYPES[name]
    interfaces = efa_interfaces(instance)
    primary, *rest = interfaces
    assert (primary.network_card, primary.device_index, primary.interface_type) == (0, 0, "interface")
    assert all(i.interface_type == "efa-only" and not i.carries_ip for i in rest)
    assert sorted(i.network_card for i in rest) == list(range(instance.efa_interfaces))
    assert len({(i.network_card, i.device_index) for i in interfaces}) == len(interfaces)
    # The primary card holds two interfaces: the type must allow that many on it.
    assert instance.enis >= 2


def test_p5_layout_is_one_ena_and_32_efa_devices():
    interfaces = efa_interfaces(INSTANCE_TYPES["p5.48xlarge"])
    assert len(interfaces) == 33 and sum(i.interface_type == "efa-only" for i in interfaces) == 32
    assert efa_interfaces(INSTANCE_TYPES["g6.2xlarge"]) == ()


# (type, efa, IPs a node can take): pod slots + warm IPs (capped by the ENIs), plus ENI addresses.
@pytest.mark.parametrize(("name", "efa", "ips"), [
    ("p5.48xlarge", True, 100),      # 98 pod IPs on 2 ENIs + 2 ENI addresses; efa-only devices take none
    ("g6.48xlarge", False, 258),     # 250 pods (MNG cap) + 2 warm on 6 ENIs
    ("g5.xlarge", False, 60),        # 56 pod IPs on 4 ENIs of 15
    ("m7i.2xlarge", False, 60),
])
def test_ips_per_node(name, efa, ips):
    assert node_ip_addresses(INSTANCE_TYPES[name], efa=efa) == ips


def test_usable_ips_of_a_subnet():
    assert (usable_ips(22), usable_ips(18)) == (1019, 16379)


@pytest.mark.parametrize(("region", "prefix"), [
    ("us-east-1", "use1"), ("us-west-2", "usw2"), ("eu-central-1", "euc1"), ("ap-northeast-1", "apne1"),
    ("ap-southeast-2", "apse2"), ("us-gov-west-1", "usgw1"), ("ca-central-1", "cac1"), ("xx-middle-1", None),
])
def test_az_id_prefix_of_a_region(region, prefix):
    assert zone_id_prefix(region) == prefix


@pytest.mark.parametrize(("zone", "is_id"), [("use1-az4", True), ("apne1-az1", True), ("us-east-1a", False), ("use1-azX", False)])
def test_az_ids_are_told_from_names(zone, is_id):
    assert is_zone_id(zone) is is_id
