"""The `multiKueue` section: one job queue over an environment's clusters in several regions.

    gpu-training:multiKueue:          # the manager (prod)
      role: manager
      workers:
        - stack: prod-usw2            # a platform stack of the same environment (its own region)
          region: us-west-2
          gpus: 32                    # the most GPUs the manager dispatches to it at once
    gpu-training:multiKueue:          # each worker (prod-usw2)
      role: worker
      manager: prod
      managerRegion: us-east-1

Kueue's MultiKueue (kueue v0.19.2 site/content/en/docs/concepts/multikueue.md): the manager's
ClusterQueue, with a MultiKueue AdmissionCheck, reserves quota, then creates the Workload in every
worker and keeps the job where it is admitted first. The manager cannot be a worker for itself
("We do not currently support running the manager cluster as one of the workers for itself",
same page, Limitations): its own GPUs keep their local queue, and the workers are further stacks.

Names across stacks are deterministic (no StackReference): a stack's cluster is named by its name
prefix (stack.py), and the manager's dispatcher role is `<manager prefix>-multikueue`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from components.config.keys import BY_PATH, maximum_of, minimum_of
from components.config.reader import Section
from components.config.sibling_stacks import REGIONAL_STACK

MANAGER, WORKER = BY_PATH["multiKueue.role"].allowed
# MultiKueueConfig.spec.clusters: MinItems=1, MaxItems=20 (kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go).
MAX_WORKERS = 20
WORKER_GPUS = "multiKueue.workers[].gpus"
DISPATCHER_ROLE_SUFFIX = "multikueue"


@dataclass(frozen=True)
class WorkerCluster:
    stack: str
    region: str
    gpus: int
    """The manager's quota for it: the ClusterQueue's total is the sum over the workers (Kueue
    docs: "the quota in the manager cluster should equal the total quota available in all worker clusters")."""
    vpc_cidr: str = ""
    """Its stack file's network.vpcCidr (the manager routes it over the peering); "" when the
    config was loaded without the stack files beside it (then no peering is planned)."""


@dataclass(frozen=True)
class MultiKueueConfig:
    role: str
    workers: tuple[WorkerCluster, ...] = ()
    """The manager's workers, in the order MultiKueue prefers them."""
    manager: str | None = None
    """A worker's manager stack."""
    manager_region: str = ""
    """A worker's manager's region (its checkpoints replicate there)."""
    manager_vpc_cidr: str = ""
    """A worker's manager's network.vpcCidr, from its stack file: routed over the peering and let
    into the worker's API on 443 ("" as WorkerCluster.vpc_cidr)."""
    sibling_workers: tuple[tuple[str, str], ...] = ()
    """A worker's fellow workers (stack, region), from its manager's stack file: its checkpoints
    replicate to each of them as well as to the manager, since S3 does not replicate a replica again."""

    @property
    def total_gpus(self) -> int:
        return sum(worker.gpus for worker in self.workers)


def stack_name_prefix(project: str, stack: str) -> str:
    """The name prefix (and cluster name) of a platform stack of this checkout, from its name alone
    (this stack's too: stack.py's StackConfig.name_prefix)."""
    regional = REGIONAL_STACK.fullmatch(stack)
    return f"{project}-{regional['env']}-{regional['site']}" if regional else f"{project}-{stack}"


def dispatcher_role_name(project: str, manager_stack: str) -> str:
    """The IAM role the manager's credential rotation runs as; each worker's access entry names it."""
    return f"{stack_name_prefix(project, manager_stack)}-{DISPATCHER_ROLE_SUFFIX}"


def peering_name(project: str, manager_stack: str, worker_stack: str) -> str:
    """The Name tag of the VPC peering manager <-> worker, on both sides: the manager creates it
    (and accepts it in the worker's region), the worker finds it by this name for its routes."""
    return f"{stack_name_prefix(project, manager_stack)}-to-{worker_stack}"


def api_peer_cidrs(config: MultiKueueConfig | None) -> tuple[str, ...]:
    """The peered ranges this stack's Kubernetes API admits (443): a worker's manager's VPC, whose
    rotation CronJob and Kueue call it; nothing on a manager or a stack without multiKueue."""
    if config is None or config.role != WORKER or not config.manager_vpc_cidr:
        return ()
    return (config.manager_vpc_cidr,)


def environment_of(stack: str) -> str:
    regional = REGIONAL_STACK.fullmatch(stack)
    return regional["env"] if regional else stack


def parse_multikueue(section: Section, *, stack: str, environment: str,
                     region_problem: Callable[[str], str | None]) -> MultiKueueConfig | None:
    """None when the section is absent: the stack is a cluster of its own, as before."""
    if not section.data and not section.failed:
        return None
    role = section.string("role")
    same_environment = f"name a platform stack of environment '{environment}' other than '{stack}' (e.g. {environment}-usw2)"

    def other_stack_problem(name: str) -> str | None:
        if name == stack:
            return "is this stack itself (Kueue: the manager cannot be a worker for itself)"
        if environment_of(name) != environment or not (name == environment or REGIONAL_STACK.fullmatch(name)):
            return f"is not a platform stack of environment '{environment}'"
        return None

    if role == WORKER:
        manager = section.string("manager", check=other_stack_problem, fix=same_environment)
        manager_region = section.string("managerRegion", check=region_problem, fix="use a region name like us-east-1")
        section.finish()
        return MultiKueueConfig(role=role, manager=manager or None, manager_region=manager_region)
    workers = []
    raw_workers = section.items("workers")
    if role == MANAGER and not raw_workers and section.ok("workers"):
        section.error(section.key("workers"), raw_workers, "is empty: a manager dispatches to at least one worker",
                      "list the worker stacks ({stack, region, gpus}), or drop multiKueue")
    if len(raw_workers) > MAX_WORKERS:
        section.error(section.key("workers"), f"{len(raw_workers)} workers",
                      f"has more than {MAX_WORKERS} (MultiKueueConfig.spec.clusters MaxItems)", "split the environment")
    seen: set[str] = set()
    for index, raw in enumerate(raw_workers):
        item = Section(section.errors, f"{section.key('workers')}[{index}]", raw)
        name = item.string("stack", check=other_stack_problem, fix=same_environment)
        if name and name in seen:
            item.error(item.key("stack"), name, "is listed twice", "list each worker stack once")
        seen.add(name)
        region = item.string("region", check=region_problem, fix="use a region name like us-west-2")
        gpus = item.integer("gpus", fix=f"the worker's own training.gpuQuota total, {minimum_of(WORKER_GPUS)} to "
                            f"{maximum_of(WORKER_GPUS)}")
        item.finish()
        workers.append(WorkerCluster(stack=name, region=region, gpus=gpus))
    section.finish()
    return MultiKueueConfig(role=role, workers=tuple(workers))
