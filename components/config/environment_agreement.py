"""What a platform stack must agree on with its environment's other stack files (sibling_stacks.py
reads them), checked before any resource exists, like the VPC CIDRs in stack.py:

- a MultiKueue manager's `workers[].region` is the worker stack's own `region` (checked in both
  plans), and a worker's `managerRegion` its manager's: the manager creates and accepts the VPC
  peering in the region it names, and a worker replicates its checkpoints and looks up the peering there;
- a manager's `workers[].gpus` fits the worker's own `training.gpuQuota` total: the manager's
  ClusterQueue quota is the sum over its workers (Kueue: "the quota in the manager cluster should
  equal the total quota available in all worker clusters"), and quota a worker does not have
  admits jobs on the manager that wait on the worker;
- no two platform stacks of one environment share a region: both would create the Secrets Manager
  secrets `<project>/<env>/<name>` (components/secrets/store.py secret_name, unique per account and
  region), and the second stack's `pulumi up` fails with ResourceExistsException. The later stack
  in the environment's order (its own stack first, then <env>-<site> by name) is refused.

A sibling file that cannot be read, or states no such value, is not compared (its own plan says why).
"""

from __future__ import annotations

from pathlib import Path

from components.config.multikueue import MANAGER, MultiKueueConfig
from components.config.reader import Section
from components.config.sibling_stacks import manager_workers, platform_stacks, sibling_stack


def check_multikueue_agreement(root: Section, multikueue: MultiKueueConfig | None, *, project: str, stack: str,
                               region: str, stacks_dir: Path | None) -> None:
    """A manager's workers' regions and GPUs, a worker's manager's region, against their files."""
    if multikueue is None or stacks_dir is None or not root.ok("multiKueue"):
        return
    if multikueue.role != MANAGER:
        _check_worker(root, multikueue, project=project, stack=stack, region=region, stacks_dir=stacks_dir)
        return
    key = root.key("multiKueue")
    for index, worker in enumerate(multikueue.workers):
        sibling = sibling_stack(stacks_dir, project=project, stack=worker.stack)
        if sibling is None:
            continue
        if sibling.region and worker.region != sibling.region:
            root.error(f"{key}.workers[{index}].region", worker.region,
                       f"is not the region of stack '{worker.stack}' ({sibling.file} sets region: {sibling.region}): "
                       "the manager would request and accept the VPC peering in a region the worker is not in",
                       f"set region: {sibling.region}")
        if sibling.gpu_quota is not None and worker.gpus > sibling.gpu_quota:
            root.error(f"{key}.workers[{index}].gpus", worker.gpus,
                       f"is more than stack '{worker.stack}' has: its training.gpuQuota totals {sibling.gpu_quota} "
                       f"GPUs ({sibling.file}); the manager would admit jobs that then wait on the worker",
                       f"set gpus: {sibling.gpu_quota} (or raise training.gpuQuota in {sibling.file} first)")


def _check_worker(root: Section, multikueue: MultiKueueConfig, *, project: str, stack: str, region: str,
                  stacks_dir: Path) -> None:
    """managerRegion against the manager's file, and this stack's region against the manager's list
    of it (a worker that moved is refused in its own plan too, not only in the manager's)."""
    manager = sibling_stack(stacks_dir, project=project, stack=str(multikueue.manager))
    if manager is None:
        return
    if manager.region and multikueue.manager_region != manager.region:
        root.error(f"{root.key('multiKueue')}.managerRegion", multikueue.manager_region,
                   f"is not the region of its manager '{manager.stack}' ({manager.file} sets region: "
                   f"{manager.region}): checkpoints would replicate to, and the VPC peering be looked up in, "
                   "a region the manager is not in", f"set managerRegion: {manager.region}")
    listed, _ = manager_workers(stacks_dir, project=project, manager=manager.stack)
    for index, (name, listed_region) in enumerate(listed or []):
        if name == stack and listed_region and region and root.ok("region") and listed_region != region:
            root.error(root.key("region"), region,
                       f"is not the region its manager '{manager.stack}' lists for it ({manager.file}: "
                       f"multiKueue.workers[{index}].region: {listed_region}): the manager would peer with it there",
                       f"set region: {listed_region}, or the worker's region in {manager.file} to {region}")


def check_region_of_its_own(root: Section, region: str, *, project: str, stack: str, environment: str,
                            stacks_dir: Path | None) -> None:
    """The region against the environment's stacks before this one in its order (see above)."""
    if stacks_dir is None or not region or not root.ok("region"):
        return
    order = platform_stacks(stacks_dir, (environment,))
    before = order[:order.index(stack)] if stack in order else order
    siblings = [s for s in (sibling_stack(stacks_dir, project=project, stack=name) for name in order if name != stack) if s]
    for sibling in (s for s in siblings if s.stack in before and s.region == region):
        used = sorted({s.region for s in siblings if s.region})
        root.error(root.key("region"), region,
                   f"is the region of stack '{sibling.stack}' ({sibling.file}) of the same environment: both would "
                   f"create the Secrets Manager secrets {project}/{environment}/<name> in {region}, and the second "
                   "`pulumi up` fails (ResourceExistsException)",
                   f"set region to one no other {environment} stack uses (they use {', '.join(used)}), or drop "
                   f"stacks/Pulumi.{stack}.yaml")
        return
