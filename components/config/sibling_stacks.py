"""What a platform stack must not share with the other environments' stack files in this checkout.

Each environment has its own VPC, and their ranges stay distinct so they can be peered (or
reached over one Transit Gateway) later: AWS refuses a peering connection between VPCs whose
CIDR blocks overlap (Amazon VPC Peering Guide, "VPC peering limitations":
https://docs.aws.amazon.com/vpc/latest/peering/vpc-peering-basics.html#vpc-peering-limitations).
The same holds for the stacks of one environment in several regions (stacks/Pulumi.<env>-<site>.yaml,
e.g. prod-usw2): the MultiKueue manager reaches each worker's private API endpoint over peering or
a Transit Gateway, which needs distinct ranges too. The program runs in the checkout, so a
platform stack reads the other platform stacks' files beside its own, strictly; one it cannot read, or whose vpcCidr is not
a CIDR, is skipped with a warning (its own plan reports why), never a traceback.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from components.config.reader import ConfigError
from components.config.stack_file import REPO_ROOT, read_stack_file, shown_path
from components.config.stack_names import REGIONAL_STACK

STACKS_DIR = REPO_ROOT / "stacks"
"""Pulumi.yaml's stackConfigDir: where the environment stacks' files are."""


@dataclass(frozen=True)
class SiblingCidr:
    stack: str
    file: str
    """The file as messages name it (stacks/Pulumi.prod.yaml)."""
    cidr: ipaddress.IPv4Network


def sibling_vpc_cidrs(stacks_dir: Path, *, project: str, stack: str,
                      environments: tuple[str, ...]) -> tuple[list[SiblingCidr], list[str]]:
    """(the VPC CIDRs of the other environments' stack files in `stacks_dir`, warnings for those skipped).
    A missing file is no environment of this checkout and says nothing."""
    found, skipped = [], []
    for environment in platform_stacks(stacks_dir, environments):
        path = stacks_dir / f"Pulumi.{environment}.yaml"
        if environment == stack or not path.is_file():
            continue
        cidr, reason = stack_vpc_cidr(stacks_dir, project=project, stack=environment)
        if cidr is not None:
            found.append(SiblingCidr(environment, shown_path(path), cidr))
        else:
            skipped.append(f"network.vpcCidr not compared with stack '{environment}' ({shown_path(path)}): {reason}; "
                           "plan that stack to see why")
    return found, skipped


def platform_stacks(stacks_dir: Path, environments: tuple[str, ...]) -> list[str]:
    """Every platform stack of `environments` with a file in `stacks_dir`: the environments'
    own and their regional siblings (<env>-<site>, e.g. prod-usw2)."""
    regional = sorted(path.name.removeprefix("Pulumi.").removesuffix(".yaml")
                      for environment in environments for path in stacks_dir.glob(f"Pulumi.{environment}-*.yaml"))
    return [*environments, *(name for name in regional if REGIONAL_STACK.fullmatch(name))]


def stack_vpc_cidr(stacks_dir: Path, *, project: str, stack: str) -> tuple[ipaddress.IPv4Network | None, str]:
    """One platform stack's network.vpcCidr from its file beside this one, or None and why not."""
    text, why_not = _nested_value(stacks_dir, stack, project, "network", "vpcCidr")
    if not isinstance(text, str):
        return None, why_not or "it sets no network.vpcCidr as text"
    try:
        return ipaddress.IPv4Network(text, strict=True), ""
    except ValueError:
        return None, "its network.vpcCidr is not a CIDR"


def manager_workers(stacks_dir: Path, *, project: str, manager: str) -> tuple[list[tuple[str, str]] | None, str]:
    """The (stack, region) of each worker a manager's stack file lists under multiKueue.workers, or
    None and why not. Read as loosely as the CIDR: the manager's own plan judges its entries."""
    workers, why_not = _nested_value(stacks_dir, manager, project, "multiKueue", "workers")
    if not isinstance(workers, list):
        return None, why_not or "it lists no multiKueue.workers"
    return [(str(w["stack"]), str(w.get("region", ""))) for w in workers
            if isinstance(w, Mapping) and isinstance(w.get("stack"), str)], ""


def overlapping_vpc_cidrs(cidr: ipaddress.IPv4Network, siblings: list[SiblingCidr]) -> list[SiblingCidr]:
    return [sibling for sibling in siblings if sibling.cidr.overlaps(cidr)]


@dataclass(frozen=True)
class SiblingStack:
    """What another platform stack's file states that this stack must agree with, read as loosely
    as the CIDR: its own plan judges its values, so a value of the wrong type reads as None."""
    stack: str
    file: str
    """The file as messages name it (stacks/Pulumi.prod-usw2.yaml)."""
    region: str | None
    manager_region: str | None
    """multiKueue.managerRegion, on a worker."""
    gpu_quota: int | None
    """The total of training.gpuQuota (pool -> GPUs), None unless every value is a whole number."""


def sibling_stack(stacks_dir: Path, *, project: str, stack: str) -> SiblingStack | None:
    """Another platform stack's file beside this one; None when there is none or it cannot be read
    (the VPC CIDR checks above say so where it matters)."""
    config, _ = _stack_file(stacks_dir, stack)
    if config is None:
        return None
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    region, multikueue, training = (_value(config, project, key) for key in ("region", "multiKueue", "training"))
    manager_region = multikueue.get("managerRegion") if isinstance(multikueue, Mapping) else None
    quota = training.get("gpuQuota") if isinstance(training, Mapping) else None
    whole = isinstance(quota, Mapping) and all(isinstance(v, int) and not isinstance(v, bool) for v in quota.values())
    return SiblingStack(stack=stack, file=shown_path(path), region=region if isinstance(region, str) else None,
                        manager_region=manager_region if isinstance(manager_region, str) else None,
                        gpu_quota=sum(quota.values()) if whole and isinstance(quota, Mapping) else None)


def _stack_file(stacks_dir: Path, stack: str) -> tuple[Mapping[str, object] | None, str]:
    """A stack's file beside this one, read, or None and why not."""
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        return None, f"there is no stack file {shown_path(path)}"
    stat = path.stat()
    return _read_stack_file(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=64)
def _read_stack_file(path: Path, _mtime_ns: int, _size: int) -> tuple[Mapping[str, object] | None, str]:
    """Cached per version of the file (mtime and size): the tests load hundreds of configs."""
    try:
        return read_stack_file(path), ""
    except ConfigError as error:
        return None, f"the file cannot be read ({error.problems[0].rule})"


def _value(config: Mapping[str, object], project: str, key: str) -> object:
    """A key as the stack file holds it: namespaced by the project or not."""
    return config.get(f"{project}:{key}", config.get(key))


def _nested_value(stacks_dir: Path, stack: str, project: str, section: str, key: str) -> tuple[object, str]:
    """`section.key` of a stack's file beside this one (None where the section is no mapping or
    lacks the key), or None and why the file cannot be read."""
    config, why_not = _stack_file(stacks_dir, stack)
    if config is None:
        return None, why_not
    values = _value(config, project, section)
    return (values.get(key) if isinstance(values, Mapping) else None), ""
