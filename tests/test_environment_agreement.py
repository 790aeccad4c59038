"""A platform stack against its environment's other stack files (components/config/environment_agreement.py):
MultiKueue regions and GPUs on both sides, and no two stacks of an environment in one region."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from stack_configs import PROJECT, mutate, raw_config

from components.config import ConfigError
from components.config.stack import load_stack_config

QUOTA = {"p5-efa": 16, "gpu-spot": 16}
WORKERS = [{"stack": "prod-usw2", "region": "us-west-2", "gpus": 32}, {"stack": "prod-use2", "region": "us-east-2", "gpus": 32}]
# prod's stack files as they agree today, reduced to what the rules read.
FILES: dict[str, dict[str, Any]] = {
    "prod": {"region": "us-east-1", "network": {"vpcCidr": "10.30.0.0/16"},
             "multiKueue": {"role": "manager", "workers": WORKERS}},
    "prod-usw2": {"region": "us-west-2", "network": {"vpcCidr": "10.31.0.0/16"}, "training": {"gpuQuota": QUOTA},
                  "multiKueue": {"role": "worker", "manager": "prod", "managerRegion": "us-east-1"}},
    "prod-use2": {"region": "us-east-2", "network": {"vpcCidr": "10.32.0.0/16"}, "training": {"gpuQuota": QUOTA},
                  "multiKueue": {"role": "worker", "manager": "prod", "managerRegion": "us-east-1"}},
}


def write_files(folder: Path, changes: dict[str, dict[str, Any]]) -> None:
    for stack, config in FILES.items():
        config = {**config, **changes.get(stack, {})}
        document = {"config": {f"{PROJECT}:{key}": value for key, value in config.items()}}
        (folder / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))


def problems_of(stack: str, raw: dict[str, Any], folder: Path) -> list[Any]:
    try:
        load_stack_config(raw, project=PROJECT, stack=stack, sibling_stacks_dir=folder)
    except ConfigError as error:
        return list(error.problems)
    return []


CASES = [
    # (stack loaded, its config change (key, value) or None, changes to the other files, key refused, words of the fix)
    ("prod", None, {"prod-usw2": {"region": "us-west-1"}}, "multiKueue.workers[0].region", "set region: us-west-1"),
    ("prod", ("multiKueue.workers", [WORKERS[0], {**WORKERS[1], "region": "us-west-2"}]), {},
     "multiKueue.workers[1].region", "set region: us-east-2"),
    ("prod", None, {"prod-use2": {"training": {"gpuQuota": {"p5-efa": 8}}}}, "multiKueue.workers[1].gpus", "set gpus: 8"),
    ("prod", ("multiKueue.workers", [{**WORKERS[0], "gpus": 48}, WORKERS[1]]), {}, "multiKueue.workers[0].gpus",
     "set gpus: 32"),
    ("prod-usw2", None, {"prod": {"region": "us-east-2"}}, "multiKueue.managerRegion", "set managerRegion: us-east-2"),
    ("prod-usw2", ("multiKueue.managerRegion", "us-west-2"), {}, "multiKueue.managerRegion", "set managerRegion: us-east-1"),
    ("prod-usw2", None, {"prod": {"multiKueue": {"role": "manager", "workers": [{**WORKERS[0], "region": "us-west-1"}, WORKERS[1]]}}},
     "region", "set region: us-west-1, or the worker's region in"),
    # Secrets Manager names are per environment, not per stack: the later stack of a region is refused.
    ("prod-use2", None, {"prod": {"region": "us-east-2"}}, "region", "they use us-east-2, us-west-2"),
    ("prod-usw2", ("region", "us-east-1"), {}, "region", "or drop stacks/Pulumi.prod-usw2.yaml"),
]


@pytest.mark.parametrize(("stack", "change", "files", "key", "fix"), CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_a_stack_that_disagrees_with_its_environments_files_is_refused(tmp_path, stack, change, files, key, fix):
    write_files(tmp_path, files)
    raw = raw_config(stack) if change is None else mutate(raw_config(stack), *change)
    found = [p for p in problems_of(stack, raw, tmp_path) if p.key == f"{PROJECT}:{key}"]
    matching = [p for p in found if fix in p.fix]
    assert len(matching) == 1, found
    assert matching[0].value is not None and matching[0].rule


@pytest.mark.parametrize("stack", FILES)
def test_the_environments_files_as_they_agree_refuse_nothing(tmp_path, stack):
    write_files(tmp_path, {})
    assert problems_of(stack, raw_config(stack), tmp_path) == []


def test_the_first_stack_of_a_region_is_not_the_one_refused(tmp_path):
    """prod comes first in its environment's order: a regional file that copies its region is refused
    in its own plan, not in prod's."""
    write_files(tmp_path, {"prod-use2": {"region": "us-east-1"}})
    assert [p for p in problems_of("prod", raw_config("prod"), tmp_path) if p.key == f"{PROJECT}:region"] == []


def test_a_sibling_file_without_the_values_is_not_compared(tmp_path):
    for stack, config in FILES.items():  # a CIDR only, as a first draft of a regional stack might have
        (tmp_path / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": {f"{PROJECT}:network": config["network"]}}))
    assert problems_of("prod", raw_config("prod"), tmp_path) == []
