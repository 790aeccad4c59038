"""Goodput before a run: the fraction of a job's GPU time spent on new steps (pure, table-tested).

A job of `gpus` GPUs on `nodes` nodes checkpoints every `interval_s` seconds. Faults arrive as
independent Poisson processes, one per class, each with its own cost to get back to training:

- node loss (a hardware fault; on a spot pool also a reclaim): the node is replaced and the gang
  recreated: NODE_REPLACEMENT_S + POD_RECREATE_S + the gang's restart;
- process crash (a software fault; the node stays): with in-place restarts the workers restart in
  the running pods (the measured in-place restart), else JobSet recreates every pod of the gang.

Each fault also redoes the steps since the last checkpoint. With total rate L and the restart cost
R averaged over the classes by rate, the expected wall time of one interval of new steps is

    E = (exp(L * interval) - 1) * (1 / L + R)

(the number of faults before an interval completes is geometric with mean exp(L * interval) - 1;
each costs its restart plus the time it ran, whose mean is 1/L - interval / (exp(L * interval) - 1)).
Goodput = interval / E. Daly (2006, "A higher order estimate of the optimum checkpoint interval for
restart dumps") writes the same expected run time with exp(L * R) for 1 + L * R, counting faults
during a restart too; the two agree while restarts are short against the MTBF. For L * interval
small it is 1 - L * (R + interval / 2), the first-order "restart plus half an interval" per fault;
that form goes wrong (even negative) when the interval nears the job's mean time between faults,
where a fault usually strikes before the interval's checkpoint is reached.

The checkpoint's own stall is left out: the launcher saves asynchronously, and the loop stops only
for the copy to host memory (docs/testing.md: "loop blocked / host memory copy" about 1.04x a copy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_DAY = 86_400

# Fault rates per GPU per day, from the one public per-class count at scale: Meta's Llama 3 405B
# pre-training, 16,384 H100 GPUs, 54 days, 419 unexpected interruptions, of which 54 "Software Bug"
# (Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, section 3.3.4, Table 5).
# The other 365 (faulty GPU 148, HBM3 72, network switch/cable 35, host maintenance 32, ...) are
# counted here as node losses: the estimate assumes none of them restarts in place.
LLAMA3_GPUS, LLAMA3_DAYS, LLAMA3_UNEXPECTED, LLAMA3_SOFTWARE = 16_384, 54, 419, 54
PROCESS_CRASH_PER_GPU_DAY = LLAMA3_SOFTWARE / (LLAMA3_GPUS * LLAMA3_DAYS)
NODE_FAULT_PER_GPU_DAY = (LLAMA3_UNEXPECTED - LLAMA3_SOFTWARE) / (LLAMA3_GPUS * LLAMA3_DAYS)

# Spot reclaims per node per month. The AWS Spot Instance Advisor gives, per instance type and
# region, the "rate at which Spot has reclaimed capacity during the trailing month" in bands
# "< 5%, 5-10%, 10-15%, 15-20% and >20%" (spot-advisor-data.json). The bands change monthly and are
# not in this repository: ASSUMPTION, the top band's lower edge. Check the advisor for your type.
SPOT_RECLAIM_PER_NODE_MONTH = 0.20
DAYS_PER_MONTH = 30

# Restart costs, seconds. Measured on the localhost 2-pod gang (bench/recovery_bench.py,
# docs/testing.md "Recovery", 2026-12-06, medians of 3 pairs): a worker crash restarted in place
# 13.1 s to the next step; the full restart (both launchers started again, as JobSet's recreate
# does) 20.7 s. A cluster adds to these what localhost has not (NCCL communicators, EFA).
IN_PLACE_RESTART_S = 13.1
GANG_RESTART_S = 20.7
# ASSUMPTION, unmeasured: JobSet deleting the gang's pods and Kubernetes scheduling and starting
# them again on nodes that already hold the image. No source gives a figure; measure it on the
# first cluster (the pods' deletion to their containers' start in `kubectl get events`).
POD_RECREATE_S = 60.0
# The stack's own estimate for a p5 to boot, join and pull the training image (docs/cost.md,
# prod's scaleDown.unneededMinutes; docs/gpu-fabric-and-capacity.md): about 10 minutes, unmeasured.
NODE_REPLACEMENT_S = 600.0


@dataclass(frozen=True)
class FaultClass:
    name: str
    per_day: float
    """Expected faults of this class per day of the whole job."""
    restart_s: float
    """Seconds from the fault to the next trained step, redone steps not included."""


@dataclass(frozen=True)
class Goodput:
    interval_s: float
    classes: tuple[FaultClass, ...]
    goodput: float
    """Fraction of the job's GPU time spent on new steps."""

    @property
    def faults_per_day(self) -> float:
        return sum(c.per_day for c in self.classes)

    def lost_per_fault_s(self, fault: FaultClass) -> float:
        """First-order time lost per fault: its restart plus half an interval of redone steps."""
        return fault.restart_s + self.interval_s / 2


def fault_classes(*, gpus: int, nodes: int, spot: bool, in_place: bool) -> tuple[FaultClass, ...]:
    """The job's fault classes at the sourced rates above."""
    if gpus <= 0 or nodes <= 0:
        raise ValueError(f"gpus and nodes must be positive, got {gpus} and {nodes}")
    node_loss_s = NODE_REPLACEMENT_S + POD_RECREATE_S + GANG_RESTART_S
    classes = [
        FaultClass("node fault", NODE_FAULT_PER_GPU_DAY * gpus, node_loss_s),
        FaultClass("process crash", PROCESS_CRASH_PER_GPU_DAY * gpus,
                   IN_PLACE_RESTART_S if in_place else POD_RECREATE_S + GANG_RESTART_S),
    ]
    if spot:
        classes.insert(0, FaultClass("spot reclaim", SPOT_RECLAIM_PER_NODE_MONTH / DAYS_PER_MONTH * nodes,
                                     node_loss_s))
    return tuple(classes)


def goodput(interval_s: float, classes: tuple[FaultClass, ...]) -> Goodput:
    """Goodput of a job checkpointing every `interval_s` seconds under `classes` (module docstring)."""
    if not math.isfinite(interval_s) or interval_s <= 0:
        raise ValueError(f"interval_s must be positive, got {interval_s!r}")
    rate = sum(c.per_day for c in classes) / SECONDS_PER_DAY
    if rate <= 0:
        return Goodput(interval_s, classes, 1.0)
    restart = sum(c.per_day * c.restart_s for c in classes) / SECONDS_PER_DAY / rate
    expected = math.expm1(rate * interval_s) * (1 / rate + restart)
    return Goodput(interval_s, classes, interval_s / expected)
