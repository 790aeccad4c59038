"""A fuzzer of our own: Hypothesis mutates every stack file the way people get YAML wrong and
feeds it to the same reader and config model `make plan` and `pulumi up` use.

Mutations, anywhere in the file: deleted keys and items, values of another type, numbers out of
range, Unicode and control characters, long strings, unknown and misspelt keys at every level,
repeated items, and in the text itself repeated keys, ambiguous scalars (dates, yes/no, octal),
tags, alias bombs, tabs, cut-off files, extra documents and bytes that are not UTF-8; some
examples also set a key with `--secret` to a canary value. Every file the reader accepts is read
again as the Pulumi CLI reads it (tests/yaml_readers.py, go-yaml v3's resolver) and must mean the
same, value for value.

The property: either the stack is refused with ConfigError (exit 2 from the CLI) whose every
message names a key of this config (or a missing key directly inside one, or the file and line)
and a fix, shows no secret and stays under 20 KB; or it loads, and then its plan satisfies the
APIs' limits (tests/api_limits.py, over resources.json and the manifests) and AWS's own API
models (tests/aws_api_model.py, over resources.json). Anything else (a traceback) fails.

`make test` runs FUZZ_EXAMPLES (default 80) examples per stack, derandomised so CI is stable.
The nightly profile (FUZZ_PROFILE=nightly) draws fresh examples every run, keeps failures in
.hypothesis/ and takes as many as FUZZ_EXAMPLES says; see docs/configuration-errors.md.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Any

import aws_api_model
import pytest
import yaml
from api_limits import violations
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from stack_configs import MANIFEST_STACKS, PROJECT, ROOT, region_of
from yaml_readers import go_document, same_data

from bootstrap.config import load_bootstrap_config
from components.config import ConfigError, decode_raw_config, load_stack_config
from components.config.stack_file import project_file, stack_config
from components.config.strict_yaml import load_yaml_text, parse_yaml_text, path_for_message
from components.facts.regions import availability_zone_ids, availability_zones
from offline.plan import synthesize

NIGHTLY = os.environ.get("FUZZ_PROFILE") == "nightly"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000" if NIGHTLY else "80"))
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=not NIGHTLY,
    database=DirectoryBasedExampleDatabase(str(ROOT / ".hypothesis")) if NIGHTLY else None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_REPORT_BYTES = 20_000
TYPE_FLIPS: list[Any] = ["text", "", 0, -1, 1.5, True, False, None, [], {}, ["x"], {"x": 1}, [[1]], [{"a": []}]]
NUMBERS = [-1, 0, 1, 63, 64, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, 10**30]
LONG_LENGTHS = [64, 101, 257, 5000, 100_000]
AMBIGUOUS = ["2024-01-01", "2024-01-01T10:00:00Z", "yes", "no", "on", "off", "0x1F", "017", "1_000", "1:30", ".inf",
             ".nan", "1e3", "1.5e3", "+.5", "-.5", "08", "2024-1-1", "2015-2-3T3:4:5Z", "99999999999999999999", "=", "~", "", "!!python/object/apply:os.system ['true']", "!!binary aGk=", "!custom x",
             "*undefined", "&anchor", "'unterminated", "[1, 2", "{a: 1", "@x", "`x`", "%x", "|", ">", "- x", "? x"]
ALIAS_BOMB = ("bomb:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
              "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
              "  e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n")
# A missing key is named under the nearest key that exists (`...jobs[0].image: ...`) or under a
# key the project documents (Pulumi.yaml) or requires (`pulumi:disable-default-providers`).
MISSING_PATH = re.compile(r"((\.[A-Za-z][A-Za-z0-9]*)|(\[[0-9]+\]))*: ")
BOOTSTRAP = ROOT / "bootstrap"
# Every stack file of both projects: the stacks of stacks/ and the bootstrap's.
FUZZED = [*((stack, ROOT) for stack in MANIFEST_STACKS), ("bootstrap", BOOTSTRAP)]
# The stacks whose 80 examples take 25 s or more of one core (2026-12-07, `pytest --durations` on 2
# loaded cores, scaled to the suite's 431 s unloaded: dev 57 s, prod 45, prod-usw2 28, prod-use2 27;
# staging 18, bootstrap 17, team-vision-prod 7) are scenarios (tests/conftest.py): the same
# examples, derandomised as here, run in `make test-scenarios`, which CI runs after `make test`.
SCENARIO_FUZZED = frozenset({"dev", "prod", "prod-usw2", "prod-use2"})
FUZZED_PARAMS = [pytest.param(stack, project_dir, id=stack,
                              marks=[pytest.mark.scenario] if stack in SCENARIO_FUZZED else [])
                 for stack, project_dir in FUZZED]


@functools.cache
def _project(project_dir: Path) -> tuple[str, tuple[str, ...]]:
    """(project name, the config keys it documents in Pulumi.yaml plus the one it requires)."""
    project = project_file(project_dir)
    keys = [*(f"{project['name']}:{key}" for key in project["config"]), "pulumi:disable-default-providers"]
    return project["name"], tuple(sorted(keys, key=len, reverse=True))


@functools.cache
def _stack_document(stack: str, project_dir: Path) -> dict[str, Any]:
    directory = project_dir / project_file(project_dir).get("stackConfigDir", ".")
    return load_yaml_text((directory / f"Pulumi.{stack}.yaml").read_text(), source=stack)


# --- mutations of the parsed document ---------------------------------------------------------

def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found.append((*prefix, key))
        found += _paths(child, (*prefix, key))
    return found


def _parent(document: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        document = document[part]
    return document


def _misspelt(data: st.DataObject, key: str) -> str:
    position = data.draw(st.integers(0, max(len(key) - 1, 0)))
    edit = data.draw(st.sampled_from(["drop", "double", "case", "swap", "insert"]))
    if not key:
        return "x"
    if edit == "drop":
        return key[:position] + key[position + 1:]
    if edit == "double":
        return key[:position] + key[position] + key[position:]
    if edit == "case":
        return key[:position] + key[position].swapcase() + key[position + 1:]
    if edit == "swap" and position + 1 < len(key):
        return key[:position] + key[position + 1] + key[position] + key[position + 2:]
    return key[:position] + data.draw(st.characters(codec="utf-8", exclude_categories=["Cs"])) + key[position:]


# Values near the limits (on both sides) for the fields that reach AWS or Kubernetes as they are:
# these mutations often leave the stack valid, so the plan itself is held to the APIs' limits.
NAMES = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,44}[a-z0-9])?", fullmatch=True)
LABEL_KEYS = st.from_regex(r"([a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\.[a-z]{2,6})?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,66}[A-Za-z0-9])?",
                           fullmatch=True)
LABEL_VALUES = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,64}[A-Za-z0-9])?)?", fullmatch=True)
ENV_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,24}", fullmatch=True) | st.text(max_size=6)
TEXT = st.text(max_size=40) | st.integers(-(2**40), 2**40)
INTEGERS = st.sampled_from(NUMBERS) | st.integers(-3, 70) | st.integers(0, 2**33)
TAG_TEXT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ._:/=+@-]{0,40}", fullmatch=True) | \
    st.text(st.characters(categories=("L", "N", "Zs")) | st.sampled_from(list("_.:/=+-@()#")), max_size=20) | \
    st.integers(254, 258).map(lambda length: "c" * length)
# Zone names and AZ IDs of the stacks' region, and a few that do not exist there.
ZONES = st.sampled_from([*availability_zones("us-east-1"), *availability_zone_ids("us-east-1"), "us-east-1g", "use1-az9",
                         "usw2-az1", "us-west-2a"])
BOUNDARIES = st.sampled_from(["", "arn:aws:iam::111122223333:policy/gpu-training-boundary-dev",
                              "arn:aws:iam::111122223333:policy/gpu-training-boundary-prod",
                              "arn:aws:iam::aws:policy/PowerUserAccess", "arn:aws:iam::1:policy/x", "boundary"])
TAINTS = st.lists(st.fixed_dictionaries({"key": LABEL_KEYS, "value": LABEL_VALUES,
                                         "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule", "Never"])}),
                  max_size=3)


def _edge_targets(config: dict[str, Any], project: str) -> list[tuple[dict[str, Any], str, st.SearchStrategy[Any]]]:
    targets: list[tuple[dict[str, Any], str, st.SearchStrategy[Any]]] = [
        (config, f"{project}:costCenter", TAG_TEXT), (config, f"{project}:iamPermissionsBoundary", BOUNDARIES)]
    pools = config.get(f"{project}:nodePools")
    for pool in pools if isinstance(pools, list) else ():
        if isinstance(pool, dict):
            targets += [(pool, "labels", st.dictionaries(LABEL_KEYS, LABEL_VALUES | TEXT, max_size=3)), (pool, "taints", TAINTS),
                        (pool, "availabilityZones", st.lists(ZONES, max_size=3)),
                        (pool, "rootVolumeGiB", INTEGERS), (pool, "name", NAMES),
                        (pool, "size", st.fixed_dictionaries({"min": st.integers(0, 2), "desired": st.integers(0, 3),
                                                              "max": INTEGERS}))]
    training = config.get(f"{project}:training")
    jobs = training.get("jobs") if isinstance(training, dict) else None
    for job in jobs if isinstance(jobs, list) else ():
        if isinstance(job, dict):
            targets += [(job, "env", st.dictionaries(ENV_NAMES, TEXT, max_size=3)), (job, "args", st.lists(TEXT, max_size=4)),
                        (job, "name", NAMES), (job, "ttlSecondsAfterFinished", INTEGERS),
                        (job, "checkpointIntervalSeconds", INTEGERS), (job, "maxRestarts", INTEGERS),
                        (job, "sharedMemoryGiB", INTEGERS), (job, "secrets", st.lists(NAMES, max_size=2)),
                        (job, "checkpointGiB", INTEGERS), (job, "terminationGracePeriodSeconds", INTEGERS),
                        (job, "checkpointWriters", st.sampled_from(["rank0", "allRanks", "all", "", 1]))]
    storage = config.get(f"{project}:storage")
    lustre = storage.get("lustre") if isinstance(storage, dict) else None
    if isinstance(lustre, dict):  # names, IDs and zones away from the EFA pool: refused by the config or the program
        targets.append((lustre, "availabilityZone", ZONES))
    observability = config.get(f"{project}:observability")
    if isinstance(observability, dict):
        targets.append((observability, "alertEmails", st.lists(st.emails(), min_size=1, max_size=2)))
    return targets


def _mutate(data: st.DataObject, document: dict[str, Any], project: str) -> str:
    """Apply one mutation somewhere in the `config:` block; returns its name (for statistics)."""
    config = document["config"]
    paths = _paths(config)
    kind = data.draw(st.sampled_from(["edge"] * 6 + ["delete", "flip", "number", "unicode", "long", "unknown", "misspelt",
                                                     "repeat"]))
    if kind == "edge" or not paths:
        parent, key, values = data.draw(st.sampled_from(_edge_targets(config, project)))
        parent[key] = data.draw(values)
        return f"edge {key.split(':')[-1]}"
    path = data.draw(st.sampled_from(paths))
    parent, last = _parent(config, path), path[-1]
    if kind == "delete":
        del parent[last]
    elif kind == "flip":
        parent[last] = _deep_copy(data.draw(st.sampled_from(TYPE_FLIPS)))  # the table's own lists stay as they are
    elif kind == "number":
        numbers = [p for p in paths if isinstance(_parent(config, p)[p[-1]], int)]
        if numbers:
            path = data.draw(st.sampled_from(numbers))
            parent, last = _parent(config, path), path[-1]
        parent[last] = data.draw(st.sampled_from(NUMBERS))
    elif kind == "unicode":
        original = parent[last] if isinstance(parent[last], str) else ""
        addition = data.draw(st.text(max_size=12))
        parent[last] = data.draw(st.sampled_from([addition, original + addition, original + "\n", " " + original]))
    elif kind == "long":
        parent[last] = "x" * data.draw(st.sampled_from(LONG_LENGTHS))
    elif kind in ("unknown", "misspelt"):
        mappings = [()] + [p for p in paths if isinstance(_parent(config, p)[p[-1]], dict)]
        where = data.draw(st.sampled_from(mappings))
        mapping = config if not where else _parent(config, where)[where[-1]]
        if kind == "misspelt" and mapping:
            key = data.draw(st.sampled_from(sorted(mapping)))
            mapping[_misspelt(data, key)] = mapping.pop(key)
        else:
            mapping[data.draw(st.sampled_from(["extra", "gpu-training:extra", "aws:region", "Name", "nodepools"]) |
                              st.text(min_size=1, max_size=10))] = _deep_copy(data.draw(st.sampled_from(TYPE_FLIPS)))
    else:
        lists = [p for p in paths if isinstance(_parent(config, p)[p[-1]], list) and _parent(config, p)[p[-1]]]
        if lists:
            where = data.draw(st.sampled_from(lists))
            items = _parent(config, where)[where[-1]]
            items.append(_deep_copy(items[data.draw(st.integers(0, len(items) - 1))]))
    return kind


def _mutate_text(data: st.DataObject, text: str) -> tuple[bytes, str]:
    """Mistakes only the text can make: repeated keys, ambiguous scalars, tags, broken syntax."""
    lines = text.splitlines(keepends=True)
    kind = data.draw(st.sampled_from(["repeat-line", "scalar", "bomb", "tab", "cut", "document", "bytes"]))
    index = data.draw(st.integers(0, len(lines) - 1))
    if kind == "repeat-line":
        lines.insert(index, lines[index])
    elif kind == "scalar":
        keyed = [i for i, line in enumerate(lines) if ": " in line] or [index]
        index = data.draw(st.sampled_from(keyed))
        head = lines[index].split(": ", 1)[0]
        lines[index] = f"{head}: {data.draw(st.sampled_from(AMBIGUOUS))}\n"
    elif kind == "bomb":
        lines.append(ALIAS_BOMB)
    elif kind == "tab":
        lines[index] = "\t" + lines[index].lstrip(" ")
    elif kind == "cut":
        return "".join(lines)[: data.draw(st.integers(0, len(text)))].encode(), kind
    elif kind == "document":
        lines.append("---\nconfig: {}\n")
    else:
        return "".join(lines).encode()[:index * 10] + data.draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\xc3("])) + \
            "".join(lines).encode()[index * 10:], kind
    return "".join(lines).encode(), kind


def _secret_override(data: st.DataObject, document: dict[str, Any], project: str, canary: str) -> dict[str, Any]:
    """`--secret KEY=VALUE` with a canary inside, where the KEY's value had text (or anywhere)."""
    config = document["config"]
    own = sorted(k.split(":", 1)[1] for k in config if isinstance(k, str) and k.startswith(f"{project}:"))
    key = data.draw(st.sampled_from([*own, "region", "secrets", "costCenter"]))
    value = config.get(f"{project}:{key}")
    texts = [p for p in _paths(value) if isinstance(_parent(value, p)[p[-1]], str)] if value is not None else []
    if not texts or data.draw(st.booleans()):
        return {key: canary}
    path = data.draw(st.sampled_from(texts))
    _parent(value, path)[path[-1]] = canary
    return {key: value}


# --- the oracle -------------------------------------------------------------------------------

def _key_paths(raw: dict[str, Any]) -> set[str]:
    found = set()

    def walk(value: Any, path: str) -> None:
        found.add(path)
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, f"{path}.{key}")
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, f"{path}[{index}]")

    for key, value in raw.items():
        walk(value, key)
    return found


def names_a_key(message: str, paths: set[str], stack: str, documented: tuple[str, ...]) -> bool:
    """The message starts with a key of the config, or a missing key inside one or inside a key
    the project documents."""
    if message.startswith(f"stack '{stack}'"):
        return True
    known = [*paths, *documented]
    best = max((p for p in known if message.startswith(p) and message[len(p):len(p) + 1] in (":", ".", "[")),
               key=len, default=None)
    return best is not None and MISSING_PATH.match(message, len(best)) is not None


def check_refusal(error: ConfigError, *, stack: str, paths: set[str] | None, file_shown: str, canaries: list[str],
                  documented: tuple[str, ...] = ()) -> None:
    report = f"stack {stack}: {error}"  # what plan.py prints
    assert len(report.encode()) <= MAX_REPORT_BYTES, f"report of {len(report.encode())} bytes"
    assert "Traceback" not in report
    for canary in canaries:
        assert canary not in report, f"secret value in the report: {report[:2000]}"
    for message in error.errors:
        assert message.count("Fix:") == 1, message  # one fix per message
        if paths is None:  # the file itself could not be read
            assert message.startswith(file_shown), message
        elif file_shown and message.startswith(f"{file_shown}: line "):  # a value the YAML reader refused, by its key
            assert names_a_key(message.split(": ", 2)[2], paths, stack, documented), message[:500]
        else:
            assert names_a_key(message, paths, stack, documented), message[:500]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize(("stack", "project_dir"), FUZZED_PARAMS)
@FUZZ_SETTINGS
@given(data=st.data())
def test_mutated_stack_files_are_refused_cleanly_or_plan_within_api_limits(stack, project_dir, scratch, data):
    project, documented = _project(project_dir)
    document = _deep_copy(_stack_document(stack, project_dir))
    for _ in range(data.draw(st.sampled_from([1, 1, 1, 1, 1, 2, 3]))):
        event(f"mutation: {_mutate(data, document, project)}")
    text = yaml.safe_dump(document, allow_unicode=True, sort_keys=False, width=1_000_000)
    content = text.encode()
    if data.draw(st.integers(0, 5)) == 0:
        content, kind = _mutate_text(data, text)
        event(f"text mutation: {kind}")
    canary = f"canary-{data.draw(st.integers(0, 2**32)):08x}"
    secrets = _secret_override(data, document, project, canary) if data.draw(st.integers(0, 5)) == 0 else {}
    path = scratch / f"Pulumi.{stack}.yaml"
    path.write_bytes(content)

    try:
        _, raw, secret_keys = stack_config(stack, path, secret_overrides=secrets, project_dir=project_dir)
    except ConfigError as error:
        event("outcome: file refused")
        event(f"file: {error.errors[0].split(': ', 2)[-1][:50]}")
        check_refusal(error, stack=stack, paths=None, file_shown=path_for_message(path), canaries=[canary])
        return
    # Differential: an accepted file means to our reader exactly what it means to the Pulumi CLI's
    # (a file with refused values is refused by the loader below, naming them).
    accepted = content.decode()
    read = parse_yaml_text(accepted, source=stack)
    assert read.problems or same_data(read.data, go_document(accepted)), "the readers differ"
    decoded = decode_raw_config(raw)
    try:
        if project_dir == BOOTSTRAP:
            load_bootstrap_config(decoded, project=project, stack=stack, secret_keys=secret_keys)
        else:
            load_stack_config(decoded, project=project, stack=stack, secret_keys=secret_keys)
    except ConfigError as error:
        event("outcome: config refused")
        check_refusal(error, stack=stack, paths=_key_paths(decoded), file_shown=path_for_message(path), canaries=[canary],
                      documented=documented)
        assert not read.problems or len(error.errors) >= len(read.problems), "a refused value went unreported"
        return
    assert not read.problems, "a file with refused values was accepted"
    try:
        # The program still refuses, before any resource exists, what only the account can tell
        # (the offline plan's stand-in account, here): an AZ ID outside the network, say.
        plan = synthesize(stack, path, secret_overrides=secrets, project_dir=project_dir)
    except ConfigError as error:
        event("outcome: refused by the program")
        check_refusal(error, stack=stack, paths=_key_paths(decoded), file_shown="", canaries=[canary], documented=documented)
        return
    event("outcome: planned")
    assert violations(plan, decoded[f"{project}:region"]) == []
    assert aws_api_model.check(plan.resources).problems == []  # AWS's own API models (tests/aws_api_rows.py)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def test_the_oracle_finds_what_the_apis_refuse(plan_of):
    """The oracle is not vacuous: a plan edited to break each kind of limit is caught."""
    import copy

    plan = copy.deepcopy(plan_of("dev"))
    group = next(r for r in plan.resources if r["type"] == "aws:eks/nodeGroup:NodeGroup")
    group["inputs"]["labels"]["x" * 64] = "v"
    group["inputs"]["scalingConfig"]["maxSize"] = 2**31
    subnet = next(r for r in plan.resources if r["type"] == "aws:ec2/subnet:Subnet")
    subnet["inputs"]["availabilityZone"] = "us-east-1z"
    provider = next(r for r in plan.resources if r["type"] == "pulumi:providers:aws")
    provider["inputs"]["defaultTags"] = '{"tags": {"cost-center": "a\\nb"}}'
    jobset = next(m for m in plan.manifests() if m["kind"] == "JobSet")
    container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append(dict(container["env"][0]))
    container["args"] = [*container.get("args", []), "a" * 131072]
    found = "\n".join(violations(plan, "us-east-1"))
    for expected in ("EKS label", "outside int32", "us-east-1z", "characters AWS refuses", "appears twice",
                     "over MAX_ARG_STRLEN"):
        assert expected in found, (expected, found)


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_stack_plans_within_api_limits(stack, plan_of):
    assert violations(plan_of(stack), region_of(stack)) == []


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_the_config_model_knows_every_env_var_the_pod_sets(stack, plan_of):
    """A secret may not arrive under a name the workload sets itself (training.platform_sets)."""
    from components.config.training import platform_sets

    config = load_stack_config(decode_raw_config(stack_config(stack)[1]), project=PROJECT, stack=stack)
    own = {name for job in config.training.jobs for name in job.env}
    for jobset in (m for m in plan_of(stack).manifests() if m["kind"] == "JobSet"):
        container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        unknown = {e["name"] for e in container["env"] if "secretKeyRef" not in str(e)} - own
        assert all(platform_sets(name) for name in unknown), sorted(n for n in unknown if not platform_sets(n))
