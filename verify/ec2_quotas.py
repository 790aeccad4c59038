"""The account's EC2 vCPU quotas against what the stack's GPU pools may launch, in its region.

A GPU node the account may not launch shows up nowhere but as a gang that stays Pending: the
autoscaler accepts the scale-up, EC2 refuses the launch (VcpuLimitExceeded / MaxSpotInstanceCountExceeded),
and Kueue waits out `waitForPodsReady` before it requeues the gang, up to five times. New accounts
start with 0 vCPUs of P and G spot (EC2 User Guide, "Spot Instance quotas": "All G and VT Spot
Instance Requests ... 0", "All P5 Spot Instance Requests ... 0"). So `scripts/verify` compares,
per quota, the vCPUs of every pool at `size.max` with the quota the account has in the region:

- on-demand and reservation pools count against "Running On-Demand <class> instances" (a
  targeted On-Demand Capacity Reservation launches ordinary on-demand instances, which that
  quota counts: EC2 User Guide, "On-Demand Instance quotas");
- spot pools against the class's spot quota ("All P5 Spot Instance Requests" where the account
  has it, else "All P Spot Instance Requests"; "All G and VT Spot Instance Requests");
- capacity-block pools are left out: a block is bought with its instances.

Quotas are found by name (Service Quotas ListServiceQuotas, service code `ec2`), not by code: the
spot quotas were split and renamed over time (P4/P3/P2 and P5 apart), and a name that is missing
is reported, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from components.config import NodePoolConfig
from components.config.vocabularies import Capacity
from components.facts.instance_types import INSTANCE_TYPES
from verify.report import CheckResult, Diagnosis, failed, passed, skipped

CHECK = "aws.ec2-vcpu-quotas"
SERVICE_CODE = "ec2"
# On-demand: one quota per instance class (EC2 User Guide, "On-Demand Instance quotas").
ON_DEMAND = {"P": ("Running On-Demand P instances",), "G": ("Running On-Demand G and VT instances",),
             "standard": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",)}
# Spot: the first name the account has (EC2 User Guide, "Spot Instance quotas").
SPOT = {"P5": ("All P5 Spot Instance Requests", "All P Spot Instance Requests"),
        "P": ("All P4, P3 and P2 Spot Instance Requests", "All P Spot Instance Requests"),
        "G": ("All G and VT Spot Instance Requests",),
        "standard": ("All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",)}


def instance_class(instance_type: str) -> str:
    """The quota class of a type: P5 (p5, p5e, p5en), P (other p), G (g and vt), else standard."""
    if instance_type.startswith("p5"):
        return "P5"
    if instance_type.startswith("p"):
        return "P"
    if instance_type.startswith(("g", "vt")):
        return "G"
    return "standard"


@dataclass(frozen=True)
class Demand:
    names: tuple[str, ...]
    """The quota's names, the first the account has counts."""
    vcpus: int
    pools: tuple[str, ...]


def demands(pools: Iterable[NodePoolConfig]) -> list[Demand]:
    """vCPUs each quota must hold for every pool at size.max (the largest type of a mixed pool)."""
    vcpus: dict[tuple[str, ...], int] = defaultdict(int)
    names: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for pool in pools:
        if pool.capacity == Capacity.CAPACITY_BLOCK:
            continue
        klass = instance_class(pool.instance_types[0])
        quota = SPOT[klass] if pool.capacity == Capacity.SPOT else ON_DEMAND["P" if klass == "P5" else klass]
        vcpus[quota] += pool.max_size * max(INSTANCE_TYPES[t].vcpus for t in pool.instance_types)
        names[quota].append(pool.name)
    return [Demand(quota, vcpus[quota], tuple(names[quota])) for quota in vcpus]


def applied_quotas(client: Any) -> dict[str, float]:
    """QuotaName -> value the account has in the client's region (applied, else AWS's default)."""
    found: dict[str, float] = {}
    for listing in ("list_aws_default_service_quotas", "list_service_quotas"):  # applied values win
        for page in client.get_paginator(listing).paginate(ServiceCode=SERVICE_CODE):
            found.update({quota["QuotaName"]: float(quota["Value"]) for quota in page["Quotas"]})
    return found


def check_quotas(pools: Iterable[NodePoolConfig], quotas: Callable[[], Mapping[str, float]], region: str) -> CheckResult:
    wanted = demands(pools)
    if not wanted:
        return skipped(CHECK, "no pool launches on-demand or spot instances")
    try:
        have = quotas()
    except Exception as e:  # botocore: no credentials, access denied, endpoint unreachable
        return failed(CHECK, "cannot read the account's EC2 quotas", Diagnosis(
            f"no Service Quotas read access from here ({type(e).__name__}: {' '.join(str(e).split())[:160]})",
            f"aws service-quotas list-service-quotas --service-code ec2 --region {region}"))
    short, unknown, lines = [], [], []
    for demand in wanted:
        name = next((n for n in demand.names if n in have), None)
        if name is None:
            unknown.append(f"{' / '.join(demand.names)} (pools {', '.join(demand.pools)})")
            continue
        lines.append(f"{name}: {demand.vcpus} vCPUs at size.max of {', '.join(demand.pools)}, quota {have[name]:.0f}")
        if have[name] < demand.vcpus:
            short.append(f"{name}: {have[name]:.0f} < {demand.vcpus} vCPUs ({', '.join(demand.pools)})")
    if short or unknown:
        problems = short + [f"no quota named {u}" for u in unknown]
        return failed(CHECK, f"{len(problems)} EC2 vCPU quota(s) below what the GPU pools may launch in {region}", Diagnosis(
            "EC2 refuses launches past the quota and the gang stays Pending, requeued by Kueue up to five times: "
            "request an increase (a P quota can take days), or lower the pools' size.max",
            f"aws service-quotas list-service-quotas --service-code ec2 --region {region} "
            "--query \"Quotas[?contains(QuotaName, 'P') || contains(QuotaName, 'G and VT')].[QuotaName,Value]\""),
            *problems, *lines)
    return passed(CHECK, f"every EC2 vCPU quota holds the pools at size.max ({len(lines)} quotas)", *lines)
