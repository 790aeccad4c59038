import ipaddress

import pytest

from components.facts.cidr_plan import CidrPlanError, plan_subnets

net = ipaddress.IPv4Network


@pytest.mark.parametrize(
    ("vpc", "zones", "private", "public"),
    [
        ("10.0.0.0/16", 2, ["10.0.0.0/18", "10.0.64.0/18"], ["10.0.192.0/19", "10.0.224.0/19"]),
        ("10.0.0.0/16", 3, ["10.0.0.0/18", "10.0.64.0/18", "10.0.128.0/18"],
         ["10.0.192.0/20", "10.0.208.0/20", "10.0.224.0/20"]),
        ("10.0.0.0/16", 4, ["10.0.0.0/19", "10.0.32.0/19", "10.0.64.0/19", "10.0.96.0/19"],
         ["10.0.224.0/21", "10.0.232.0/21", "10.0.240.0/21", "10.0.248.0/21"]),
        ("172.16.0.0/20", 2, ["172.16.0.0/22", "172.16.4.0/22"], ["172.16.12.0/23", "172.16.14.0/23"]),
        ("192.168.0.0/17", 3, ["192.168.0.0/19", "192.168.32.0/19", "192.168.64.0/19"],
         ["192.168.96.0/21", "192.168.104.0/21", "192.168.112.0/21"]),
    ],
)
def test_plan_subnets(vpc, zones, private, public):
    azs = tuple(f"us-east-1{c}" for c in "abcdef"[:zones])
    plan = plan_subnets(net(vpc), azs)
    assert [p.availability_zone for p in plan] == list(azs)
    assert [str(p.private) for p in plan] == private
    assert [str(p.public) for p in plan] == public


@pytest.mark.parametrize(("vpc", "zones"), [("10.0.0.0/16", 2), ("10.0.0.0/16", 3), ("10.8.0.0/18", 6), ("10.0.0.0/20", 3)])
def test_subnets_are_disjoint_inside_the_vpc_and_private_ones_dominate(vpc, zones):
    plan = plan_subnets(net(vpc), tuple(f"z{i}" for i in range(zones)))
    blocks = [p.private for p in plan] + [p.public for p in plan]
    assert all(b.subnet_of(net(vpc)) for b in blocks)
    assert all(not a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1:])
    # Pods take their IPs from private subnets: each must be larger than any public one.
    assert min(p.private.num_addresses for p in plan) > max(p.public.num_addresses for p in plan)


@pytest.mark.parametrize(
    ("vpc", "zones", "message"),
    [
        ("10.0.0.0/8", 2, "larger than AWS allows"),
        ("8.8.0.0/16", 2, "not inside an RFC 1918"),
        ("10.0.0.0/22", 2, "too few pod IPs"),
        ("10.0.0.0/20", 4, "too few pod IPs"),
        ("10.0.0.0/16", 0, "at least one availability zone"),
    ],
)
def test_plan_subnets_rejects(vpc, zones, message):
    with pytest.raises(CidrPlanError, match=message):
        plan_subnets(net(vpc), tuple(f"z{i}" for i in range(zones)))
