"""The stacks the tests read, and how a test reads and changes a stack's config (imported by name:
pytest puts tests/ on the path; a conftest.py keeps only fixtures and hooks)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from components.config import decode_raw_config
from components.config.stack_file import stack_config

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gpu-training"
ENVIRONMENT_STACKS = ("dev", "staging", "prod")
"""The environments' own stacks (one each: the bootstrap's CI roles, keys and boundaries)."""
PLATFORM_STACKS = (*ENVIRONMENT_STACKS, "prod-usw2", "prod-use2")
# Stacks whose Kubernetes manifests are validated and scanned.
TEAM_STACKS = ("team-vision-prod",)
MANIFEST_STACKS = PLATFORM_STACKS + TEAM_STACKS
DELETE = object()


def raw_config(stack: str) -> dict[str, Any]:
    """The decoded config of a stack file, as `load_stack_config` receives it (a copy of its own:
    a test may change it)."""
    stamp = _files_stamp(stack)
    if stamp is None:  # no such file: stack_config says so, as a ConfigError
        _, config, _ = stack_config(stack)
        return decode_raw_config(config)
    return copy.deepcopy(_raw_config_as_filed(stack, stamp))


def _files_stamp(stack: str) -> tuple[tuple[int, int], ...] | None:
    """(mtime, size) of Pulumi.yaml and the stack file: a test that writes either reads it again."""
    try:
        return tuple((status.st_mtime_ns, status.st_size)
                     for status in ((ROOT / "Pulumi.yaml").stat(), (ROOT / "stacks" / f"Pulumi.{stack}.yaml").stat()))
    except FileNotFoundError:
        return None


# The tables of cases read the same few stack files hundreds of times, and each reading parses
# them with the strict reader in pure Python (about 0.08 s): once per file as it stands is enough.
@functools.lru_cache(maxsize=64)
def _raw_config_as_filed(stack: str, stamp: tuple[tuple[int, int], ...]) -> dict[str, Any]:
    del stamp  # the cache's key only
    _, config, _ = stack_config(stack)
    return decode_raw_config(config)


def mutate(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy of `raw` with `project:key.sub.sub` set to `value` (or removed with DELETE)."""
    result = copy.deepcopy(raw)
    top, *rest = path.split(".")
    key = top if ":" in top else f"{PROJECT}:{top}"
    if not rest:
        if value is DELETE:
            result.pop(key, None)
        else:
            result[key] = value
        return result
    node = result.setdefault(key, {})
    for part in rest[:-1]:
        node = node.setdefault(part, {})
    if value is DELETE:
        node.pop(rest[-1], None)
    else:
        node[rest[-1]] = value
    return result


def environment_of(stack: str) -> str:
    """The environment of a stack: prod-usw2 and team-vision-prod are prod's."""
    from components.config.stack import stack_kind
    return str(stack_kind(stack)[1])


def region_of(stack: str) -> str:
    return str(raw_config(stack)[f"{PROJECT}:region"])


def stacks_in_us_east_1(stacks: tuple[str, ...]) -> list[str]:
    """The stacks whose expected mock ARNs and endpoints a test spells in us-east-1 (prod-usw2's
    data, network and identity: tests/test_multikueue.py and the region-aware tests)."""
    return [stack for stack in stacks if region_of(stack) == "us-east-1"]


def bootstrap_knows(monkeypatch: Any, tmp_path: Path, *teams: str) -> None:
    """Plans in this test read a copy of the checkout whose bootstrap also gives `teams` deploy roles
    in every environment (the onboarding order: the bootstrap's registry first, docs/team-stacks.md)."""
    import shutil

    import yaml

    from components.config import bootstrap_registry
    checkout = tmp_path / "checkout-with-teams"
    shutil.copytree(ROOT / "stacks", checkout / "stacks")
    (checkout / "bootstrap").mkdir()
    shutil.copy(ROOT / "bootstrap" / "Pulumi.yaml", checkout / "bootstrap" / "Pulumi.yaml")
    document = yaml.safe_load((ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text())
    registry = document["config"]["gpu-training-bootstrap:teams"]
    registry.update({team: {"repository": f"example-org/{team}"} for team in teams})
    (checkout / "bootstrap" / "Pulumi.bootstrap.yaml").write_text(yaml.safe_dump(document))
    monkeypatch.setattr(bootstrap_registry, "CHECKOUT_STACKS_DIR", checkout / "stacks")
