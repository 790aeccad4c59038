"""verify's EC2 vCPU quota check: which quota each pool draws on, and what it needs at size.max."""

from __future__ import annotations

import pytest
from stack_configs import PROJECT, raw_config
from test_verify_scenarios import ENOUGH_QUOTAS, FakeServiceQuotas

from components.config import StackConfig, load_stack_config
from verify import ec2_quotas as q
from verify.report import Status


@pytest.mark.parametrize(("instance_type", "klass"), [
    ("p5.48xlarge", "P5"), ("p5en.48xlarge", "P5"), ("p4d.24xlarge", "P"), ("g6.48xlarge", "G"), ("g5.48xlarge", "G"),
    ("vt1.24xlarge", "G"), ("m7i.2xlarge", "standard"), ("c7i.4xlarge", "standard"),
])
def test_each_type_draws_on_its_class_quota(instance_type, klass):
    assert q.instance_class(instance_type) == klass


def prod_pools():
    config = load_stack_config(raw_config("prod"), project=PROJECT, stack="prod")
    assert isinstance(config, StackConfig)
    return config.node_pools


def test_prods_pools_need_their_size_max_of_each_quota():
    needs = {d.names[0]: (d.vcpus, d.pools) for d in q.demands(prod_pools())}
    # a reservation launches on-demand instances; spot P5 would look for the P5 name first
    assert needs == {"Running On-Demand P instances": (384, ("p5-efa",)),
                     "All G and VT Spot Instance Requests": (768, ("gpu-spot",)),
                     "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances": (48, ("system",))}


@pytest.mark.parametrize(("applied", "defaults", "status", "named"), [
    (ENOUGH_QUOTAS, {}, Status.PASS, ""),
    ({**ENOUGH_QUOTAS, "All G and VT Spot Instance Requests": 0}, {}, Status.FAIL, "All G and VT Spot Instance Requests: 0 < 768"),
    # a new account: nothing applied, AWS's defaults (0 spot G) are what it has
    ({}, {**ENOUGH_QUOTAS, "All G and VT Spot Instance Requests": 0}, Status.FAIL, "0 < 768"),
    # an applied increase wins over the default
    ({"All G and VT Spot Instance Requests": 800}, {**ENOUGH_QUOTAS, "All G and VT Spot Instance Requests": 0}, Status.PASS, ""),
    ({k: v for k, v in ENOUGH_QUOTAS.items() if "P instances" not in k}, {}, Status.FAIL,
     "no quota named Running On-Demand P instances"),
])
def test_the_check_fails_on_a_short_or_missing_quota(applied, defaults, status, named):
    result = q.check_quotas(prod_pools(), lambda: q.applied_quotas(FakeServiceQuotas(applied, defaults)), "us-east-1")
    assert result.status == status, result
    assert named in " ".join(result.details)


def test_spot_p5_takes_the_p5_quota_where_the_account_has_it():
    import dataclasses

    (p5,) = [p for p in prod_pools() if p.name == "p5-efa"]
    spot = dataclasses.replace(p5, capacity=q.Capacity.SPOT)
    (demand,) = q.demands([spot])
    assert demand.names == ("All P5 Spot Instance Requests", "All P Spot Instance Requests")
    older = q.check_quotas([spot], lambda: {"All P Spot Instance Requests": 384}, "us-east-1")
    assert older.status == Status.PASS, "an account that still has the older single P quota"


def test_an_unreadable_quota_service_fails_with_the_command():
    def refuse():
        raise PermissionError("AccessDenied")
    result = q.check_quotas(prod_pools(), refuse, "us-east-1")
    assert result.status == Status.FAIL and "list-service-quotas" in result.diagnosis.command
