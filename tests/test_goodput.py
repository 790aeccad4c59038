import math
import random

import pytest

from components.config import StackConfig
from components.facts import goodput as g
from components.facts.goodput import FaultClass, fault_classes, goodput

DAY = g.SECONDS_PER_DAY


def simulated_goodput(interval_s: float, classes: tuple[FaultClass, ...], intervals: int, seed: int) -> float:
    """Run `intervals` intervals of new steps under Poisson faults; a fault loses what ran since the
    last checkpoint and costs its class's restart."""
    rng = random.Random(seed)
    rates = [c.per_day / DAY for c in classes]
    total_rate, wall = sum(rates), 0.0
    for _ in range(intervals):
        while True:
            arrival = rng.expovariate(total_rate)
            if arrival >= interval_s:
                wall += interval_s
                break
            fault = rng.choices(classes, weights=rates)[0]
            wall += arrival + fault.restart_s
    return intervals * interval_s / wall


@pytest.mark.parametrize(("interval_s", "mtbf_s", "restart_s"), [
    (1800, 6 * 3600, 60),       # interval well inside the MTBF
    (4 * 3600, 2 * 3600, 600),  # interval twice the MTBF: most intervals are hit before their checkpoint
    (600, 900, 13.1),
])
def test_matches_a_simulation_of_poisson_faults(interval_s, mtbf_s, restart_s):
    classes = (FaultClass("a", DAY / mtbf_s * 0.7, restart_s), FaultClass("b", DAY / mtbf_s * 0.3, restart_s * 3))
    simulated = simulated_goodput(interval_s, classes, intervals=20_000, seed=7)
    assert goodput(interval_s, classes).goodput == pytest.approx(simulated, rel=0.03)


def test_interval_longer_than_the_mtbf_is_not_the_first_order_figure():
    # 4 h interval, one fault every 2 h, 10 min restart: "restart + half an interval" per fault
    # predicts 1 - 0.5/h * (1/6 h + 2 h) < 0; the job still makes progress, slowly.
    fault = FaultClass("node fault", 12, 600)
    naive = 1 - fault.per_day / DAY * (fault.restart_s + 4 * 3600 / 2)
    estimate = goodput(4 * 3600, (fault,))
    assert naive < 0
    assert 0 < estimate.goodput < 0.3
    assert estimate.goodput == pytest.approx(4 / ((math.exp(2) - 1) * (2 + 1 / 6)))


def test_first_order_when_faults_are_rare():
    classes = (FaultClass("x", 0.5, 600), FaultClass("y", 0.1, 13.1))
    estimate = goodput(1200, classes)
    lost_per_day = sum(c.per_day * estimate.lost_per_fault_s(c) for c in classes)
    assert estimate.goodput == pytest.approx(1 - lost_per_day / DAY, abs=1e-4)


def test_no_faults_is_all_goodput():
    assert goodput(600, ()).goodput == 1.0


def test_a_spot_pool_adds_reclaims_per_node():
    on_demand = fault_classes(gpus=16, nodes=2, spot=False, in_place=True)
    spot = fault_classes(gpus=16, nodes=2, spot=True, in_place=True)
    assert [c.name for c in on_demand] == ["node fault", "process crash"]
    (reclaim,) = [c for c in spot if c.name == "spot reclaim"]
    assert reclaim.per_day == pytest.approx(2 * 0.20 / 30)
    assert goodput(1800, spot).goodput < goodput(1800, on_demand).goodput


def test_rates_scale_with_the_gang_and_follow_the_llama3_counts():
    one, many = (fault_classes(gpus=n, nodes=n // 8, spot=False, in_place=True) for n in (8, 128))
    assert [m.per_day for m in many] == pytest.approx([16 * o.per_day for o in one])
    # 419 unexpected interruptions in 54 days on 16,384 GPUs: about 7.8 a day.
    whole = fault_classes(gpus=16_384, nodes=2048, spot=False, in_place=True)
    assert sum(c.per_day for c in whole) == pytest.approx(419 / 54)


def test_in_place_restarts_cut_only_the_process_crash_cost():
    in_place, recreate = (fault_classes(gpus=16, nodes=2, spot=False, in_place=flag) for flag in (True, False))
    assert in_place[0] == recreate[0]
    assert in_place[1].restart_s == g.IN_PLACE_RESTART_S < recreate[1].restart_s


@pytest.mark.parametrize("interval_s", [0, -5, math.inf, math.nan])
def test_bad_interval(interval_s):
    with pytest.raises(ValueError, match="interval_s"):
        goodput(interval_s, ())


@pytest.mark.parametrize(("stack", "spot"), [("dev", True), ("prod", False)])
def test_a_stacks_jobs_use_their_pools_capacity_and_the_interval_they_will_run_with(stack, spot):
    from components.observability.training_metrics import planned_checkpoint_interval_seconds
    from offline.cost import load_config
    from offline.job_goodput import job_goodputs, summary_lines

    config = load_config(stack)
    assert isinstance(config, StackConfig)
    pools = {pool.name: pool for pool in config.node_pools}
    (job, estimate), *_ = job_goodputs(config)
    assert estimate.interval_s == planned_checkpoint_interval_seconds(job, pools[job.pool], config.storage, team=False)
    assert ("spot reclaim" in [c.name for c in estimate.classes]) is spot
    assert f"goodput {estimate.goodput:.2%}" in summary_lines(config)[0]
