"""Each training job's checkpoint interval and goodput estimate, for `make cost` and the plan summary.

The interval is the one the job will use (its checkpointIntervalSeconds, else the launcher's Young
interval at the planning MTBF the workload passes it: components/observability/training_metrics.py);
the goodput is components/facts/goodput.py's estimate at the sourced fault rates of the job's pool
(spot or not), with in-place restarts as the plan sets them (components/workload/training_job.py).
How it is computed: docs/cost.md "Goodput before a run".
"""

from __future__ import annotations

from components.config import Capacity, StackConfig, TeamStackConfig
from components.config.training import JobConfig
from components.facts import goodput as facts
from components.observability.training_metrics import planned_checkpoint_interval_seconds
from components.workload.training_job import INPLACE_RESTARTS


def job_goodputs(config: StackConfig | TeamStackConfig) -> list[tuple[JobConfig, facts.Goodput]]:
    team = isinstance(config, TeamStackConfig)
    platform = config.judged_platform if isinstance(config, TeamStackConfig) else config
    pools = {pool.name: pool for pool in platform.node_pools}
    found = []
    for job in config.training.jobs:
        pool = pools[job.pool]
        interval = planned_checkpoint_interval_seconds(job, pool, platform.storage, team=team)
        classes = facts.fault_classes(gpus=job.total_gpus, nodes=job.nodes, spot=pool.capacity == Capacity.SPOT,
                                      in_place=INPLACE_RESTARTS > 0)
        found.append((job, facts.goodput(interval, classes)))
    return found


def goodput_line(job: JobConfig, estimate: facts.Goodput) -> str:
    """One line: the job, its interval, faults a day and time lost per fault by class, and goodput."""
    faults = "; ".join(f"{c.name} {c.per_day:.2g}/day, {estimate.lost_per_fault_s(c) / 60:.0f} min each"
                       for c in estimate.classes)
    return (f"job {job.name:<20} {job.total_gpus} GPUs on {job.pool}: checkpoint every {estimate.interval_s:,.0f} s; "
            f"{faults}; goodput {estimate.goodput:.2%}")


def goodput_lines(config: StackConfig | TeamStackConfig) -> list[str]:
    return [goodput_line(job, estimate) for job, estimate in job_goodputs(config)]


ASSUMPTIONS = (f"assumed, unmeasured: a node replacement {facts.NODE_REPLACEMENT_S:.0f} s, a pod recreate "
               f"{facts.POD_RECREATE_S:.0f} s, spot reclaims {facts.SPOT_RECLAIM_PER_NODE_MONTH:.0%} of nodes a month; "
               f"restarts measured on localhost: in place {facts.IN_PLACE_RESTART_S} s, gang {facts.GANG_RESTART_S} s; "
               "rates: Llama 3 (arXiv:2407.21783, Table 5). How: docs/cost.md#goodput-before-a-run")


def summary_lines(config: StackConfig | TeamStackConfig) -> list[str]:
    """The plan summary's short line per job (`make cost` has the classes)."""
    return [f"job {job.name:<20} {job.total_gpus} GPUs on {job.pool}: checkpoint every {estimate.interval_s:,.0f} s; "
            f"{estimate.faults_per_day:.2g} faults/day; goodput {estimate.goodput:.2%} (by fault class: make cost)"
            for job, estimate in job_goodputs(config)]
