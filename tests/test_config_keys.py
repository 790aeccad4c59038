"""The key table (components/config/keys.py) against what the parsers read, Pulumi.yaml and the
errors doc: one description of every key, held to the code that reads it."""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from stack_configs import MANIFEST_STACKS, PROJECT, raw_config

import components.config.stack as stack_module
from components.config import ConfigError
from components.config.key_docs import description, rendered_errors_doc, rendered_pulumi_yaml
from components.config.keys import (
    BY_PATH,
    KEYS,
    LIST,
    MAP,
    PLATFORM,
    PLATFORM_ONLY_KEYS,
    REQUIRED,
    TEAM,
    UNSET,
    Derived,
    maximum_of,
    stacks_of,
)
from components.config.reader import _MISSING, INT32_MAX, INT32_MIN, ErrorLog, KeyTableError, Section
from components.config.stack_file import project_file

ROOT = Path(__file__).resolve().parent.parent
ERRORS_DOC = ROOT / "docs" / "configuration-errors.md"


@dataclass
class Reads:
    """What the parsers asked of the config: each key (as the table spells it) with the kinds of
    stack it was read for, the defaults the parser gave it and the choices it accepted."""

    kinds: dict[str, set[str]] = field(default_factory=dict)
    defaults: dict[str, list[Any]] = field(default_factory=dict)
    choices: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)


def table_path(key: str) -> str:
    """`gpu-training:nodePools[2].labels.tier` -> `nodePools[].labels`: list items as `[]`, the
    entries of a map (names the user chooses) as the map."""
    path = re.sub(r"\[\d+\]", "[]", key.removeprefix(f"{PROJECT}:"))
    return next((k.path for k in KEYS if k.type == MAP and path.startswith(f"{k.path}.")), path)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Reads, Callable[[dict[str, Any], str], None]]]:
    """A loader that records every key the parsers look for (read, or asked about with `has`). A
    team stack loads its platform stack too: only the outer load's keys are the team's."""
    reads = Reads()
    depth: list[str] = []
    get, has, string = Section._get, Section.has, Section.string  # pyright: ignore[reportPrivateUsage]
    parse_secrets, load = stack_module.parse_secrets, stack_module.load_stack_config

    def note(key: str) -> str:
        path = table_path(key)
        if len(depth) == 1:
            reads.kinds.setdefault(path, set()).add(depth[0])
        return path

    def recording_get(self: Section, name: str, default: Any) -> Any:
        path = note(self.key(name))
        if len(depth) == 1 and default is not _MISSING:
            reads.defaults.setdefault(path, []).append(default)
        return get(self, name, default)

    def recording_has(self: Section, name: str) -> bool:
        note(self.key(name))
        return has(self, name)

    def recording_string(self: Section, name: str, *args: Any, choices: tuple[str, ...] = (), **kwargs: Any) -> str:
        if choices:
            reads.choices.setdefault(table_path(self.key(name)), set()).add(tuple(choices))
        return string(self, name, *args, choices=choices, **kwargs)

    def recording_parse_secrets(errors: list[str], key: str, raw: Any, **kwargs: Any) -> Any:
        note(key)  # read whole, outside any Section: a secret's value must not reach Section's messages
        return parse_secrets(errors, key, raw, **kwargs)

    def recording_load(raw: Any, *, stack: str, **kwargs: Any) -> Any:
        depth.append(TEAM if stack.startswith("team-") else PLATFORM)
        try:
            return load(raw, stack=stack, **kwargs)
        finally:
            depth.pop()

    monkeypatch.setattr(Section, "_get", recording_get)
    monkeypatch.setattr(Section, "has", recording_has)
    monkeypatch.setattr(Section, "string", recording_string)
    monkeypatch.setattr(stack_module, "parse_secrets", recording_parse_secrets)
    monkeypatch.setattr(stack_module, "load_stack_config", recording_load)

    def run(raw: dict[str, Any], stack: str) -> None:
        stack_module.load_stack_config(raw, project=PROJECT, stack=stack)

    yield reads, run


def with_tainted_pool(stack: str) -> dict[str, Any]:
    """The stack with a taint on its last pool: the only keys no stack file sets are a taint's."""
    raw = copy.deepcopy(raw_config(stack))
    raw[f"{PROJECT}:nodePools"][-1]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    return raw


def with_the_platforms_boundary(team_stack: str, platform_stack: str) -> dict[str, Any]:
    """The team stack naming its platform's permissions boundary, which team stacks may repeat (no stack file does)."""
    key = f"{PROJECT}:iamPermissionsBoundary"
    return {**raw_config(team_stack), key: raw_config(platform_stack)[key]}


def read_by_every_stack(run: Callable[[dict[str, Any], str], None]) -> None:
    """Every stack file, and the keys only some stacks set on a stack that does not."""
    for stack in MANIFEST_STACKS:
        run(raw_config(stack), stack)
    run(with_tainted_pool("dev"), "dev")
    run(with_the_platforms_boundary("team-vision-prod", "prod"), "team-vision-prod")


def test_the_parsers_read_exactly_the_keys_of_the_table(recorded):
    reads, run = recorded
    read_by_every_stack(run)
    assert sorted(set(reads.kinds) - set(BY_PATH)) == [], "read by a parser, missing from components/config/keys.py"
    assert sorted(set(BY_PATH) - set(reads.kinds)) == [], "in components/config/keys.py, read by no parser"


def test_each_key_is_read_by_the_kinds_of_stack_the_table_names(recorded):
    reads, run = recorded
    read_by_every_stack(run)
    wrong = {key.path: (sorted(stacks_of(key)), sorted(reads.kinds.get(key.path, set()))) for key in KEYS
             if reads.kinds.get(key.path, set()) - stacks_of(key) - ({TEAM} if key.top in PLATFORM_ONLY_KEYS else set())
             or stacks_of(key) - reads.kinds.get(key.path, set())}
    # A team stack asks after the platform-only keys only to refuse them (test below).
    assert wrong == {}, "key: (table's stacks, stacks whose parser reads it)"


def test_the_closed_values_are_the_parsers_choices(recorded):
    reads, run = recorded
    read_by_every_stack(run)
    assert {path: {key.allowed} for path, key in BY_PATH.items() if key.allowed and path in reads.choices} == reads.choices
    # The one closed string not checked with `choices` (a rejected type has its own message).
    from components.config.storage import LUSTRE_DEPLOYMENT_TYPES
    assert BY_PATH["storage.lustre.deploymentType"].allowed == tuple(LUSTRE_DEPLOYMENT_TYPES)
    assert BY_PATH["environment"].allowed == stack_module.ENVIRONMENTS


def test_a_literal_default_is_the_parsers_default(recorded):
    reads, run = recorded
    read_by_every_stack(run)
    literal = {key.path: key.default for key in KEYS
               if not (key.default is REQUIRED or key.default is UNSET or isinstance(key.default, Derived))}
    wrong = {path: (literal[path], defaults) for path, defaults in reads.defaults.items()
             if path in literal and any(default != literal[path] for default in defaults)}
    assert wrong == {}, "key: (table's default, the defaults its parser used)"
    assert sorted(path for path in literal if path not in reads.defaults) == [], "a default no parser uses"
    defaulted = [key.path for key in KEYS if key.default is REQUIRED and key.path in reads.defaults]
    assert defaulted == [], "required in the table, given a default by its parser"
    unset = {key.path: reads.defaults[key.path] for key in KEYS if key.default is UNSET and key.path in reads.defaults}
    assert {path: defaults for path, defaults in unset.items() if set(defaults) != {None}} == {}, "unset: read as None"


@pytest.mark.parametrize("key", PLATFORM_ONLY_KEYS)
def test_a_team_stack_is_refused_each_platform_key(key):
    raw = {**raw_config("team-vision-prod"), f"{PROJECT}:{key}": {}}
    with pytest.raises(ConfigError) as refused:
        stack_module.load_stack_config(raw, project=PROJECT, stack="team-vision-prod")
    assert any(error.startswith(f"{PROJECT}:{key}: belongs to the platform stack 'prod'") for error in refused.value.errors)


@pytest.mark.parametrize("key", [key.path for key in KEYS if key.stacks == frozenset({TEAM})])
def test_a_platform_stack_is_refused_each_team_key(key):
    raw = {**raw_config("dev"), f"{PROJECT}:{key}": f"organization/{PROJECT}/dev"}
    with pytest.raises(ConfigError) as refused:
        stack_module.load_stack_config(raw, project=PROJECT, stack="dev")
    assert any(error.startswith(f"{PROJECT}:{key}: unknown key") for error in refused.value.errors)


def test_pulumi_yaml_is_rendered_from_the_table():
    current = (ROOT / "Pulumi.yaml").read_text()
    assert rendered_pulumi_yaml(current) == current, "run scripts/config_docs.py --write"
    config = project_file()["config"]
    tops = [key for key in KEYS if key.stacks is not None]
    assert list(config) == [key.path for key in tops]
    # As the engine reads it: the folded text is the table's, word for word.
    assert {key.path: description(key) for key in tops} == {name: spec["description"] for name, spec in config.items()}


def test_the_errors_doc_key_table_is_rendered_from_the_table():
    current = ERRORS_DOC.read_text()
    assert rendered_errors_doc(current) == current, "run scripts/config_docs.py --write"


def test_the_errors_doc_names_only_keys_of_the_table():
    """The hand-written API-limits table names keys too: each must be one the program reads."""
    limits = ERRORS_DOC.read_text().split("### API limits")[1].split("\n## ")[0]
    named = {name for row in limits.splitlines() if row.startswith("| ") for name in re.findall(r"`([^`]+)`", row.split(" | ")[-1])}
    keys = {name for name in named if not name.startswith("--") and "<" not in name}
    assert keys and keys <= set(BY_PATH), sorted(keys - set(BY_PATH))


def test_the_doc_checker_sees_a_stale_table():
    stale = ERRORS_DOC.read_text().replace("| `region` | string |", "| `region` | integer |")
    assert rendered_errors_doc(stale) != stale
    pulumi_yaml = (ROOT / "Pulumi.yaml").read_text().replace("type: string", "type: integer", 1)
    assert rendered_pulumi_yaml(pulumi_yaml) != pulumi_yaml


# --- Each key's default, bounds and closed values live only in its row ---------------------------

CONFIG_PACKAGE = ROOT / "components" / "config"
GETTERS = frozenset({"string", "optional_string", "integer", "check_integer", "boolean", "items", "mapping", "section",
                     "choice", "string_list", "string_map"})
ROW_FACTS = ("minimum", "maximum", "choices")
"""Keywords a parser never passes: the row's bounds and closed values (the getter reads them from the row)."""
PARSER_MODULES = sorted(path.name for path in CONFIG_PACKAGE.glob("*.py")
                        if path.name not in ("reader.py", "keys.py", "key_docs.py"))


def literal_default(key: Any) -> bool:
    return not (key.default is REQUIRED or key.default is UNSET or isinstance(key.default, Derived))


def rows_named(name: str) -> list[Any]:
    """The rows a key read by its last name may be (`logRetentionDays`: cluster's and observability's)."""
    return [key for key in KEYS if key.path.replace("[]", "").rsplit(".", 1)[-1] == name]


def restated(expression: ast.expr, module_constants: set[str]) -> bool:
    """Whether a default is written out (a literal, a display of them, a module constant) rather than
    computed: what a parser would write to restate its row."""
    if isinstance(expression, ast.Constant):
        return expression.value is not None
    if isinstance(expression, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
        return True
    if isinstance(expression, ast.Name):
        return expression.id in module_constants or expression.id.isupper()
    if isinstance(expression, ast.Attribute):  # a module's constant, or a class's default (`Config.days`)
        return expression.attr.isupper() or (isinstance(expression.value, ast.Name) and expression.value.id[:1].isupper())
    return False


def restatements(source: str) -> list[str]:
    """Each getter call of a parser module that passes a bound or closed set, or a default its key's row holds
    (or a default at all where every row of that name holds one or is required)."""
    tree = ast.parse(source)
    constants = {target.id for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, line = node.func.attr, f"line {node.lineno}"
        if method == "get" and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "data" \
                and len(node.args) > 1 and restated(node.args[1], constants):
            found.append(f"{line}: .data.get(...) with a default, past the row")
        if method not in GETTERS:
            continue
        found += [f"{line}: {method}(..., {keyword.arg}=...)" for keyword in node.keywords if keyword.arg in ROW_FACTS]
        name = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        default = next((keyword.value for keyword in node.keywords if keyword.arg == "default"),
                       node.args[1] if len(node.args) > 1 and method not in ("check_integer", "choice") else
                       node.args[2] if len(node.args) > 2 and method == "choice" else None)
        if not isinstance(name, str) or default is None or (isinstance(default, ast.Constant) and default.value is None):
            continue
        rows = rows_named(name)
        computed_allowed = any(not literal_default(key) and key.default is not REQUIRED for key in rows)
        held = [key.path for key in rows if literal_default(key) or key.default is REQUIRED]
        if held and (not computed_allowed or restated(default, constants)):
            found.append(f"{line}: {method}({name!r}, {ast.unparse(default)}) restates the row of {', '.join(held)}")
    return found


@pytest.mark.parametrize("module", PARSER_MODULES)
def test_no_parser_restates_a_default_bound_or_choice_its_row_holds(module):
    """Static, so it sees every branch: the loads below see only the branches the stack files reach."""
    assert restatements((CONFIG_PACKAGE / module).read_text()) == [], (
        "read the key's default, bounds and choices from its row in components/config/keys.py: the getter does")


@pytest.mark.parametrize("source, expected", [
    ('section.integer("gpuIdlePercent", 20)', "restates the row of observability.gpuIdlePercent"),
    ('section.integer("gpuIdlePercent", DEFAULT)', "restates the row"),
    ('section.integer("gpuIdlePercent", minimum=1, maximum=99)', "minimum="),
    ('s.check_integer(key, raw, minimum=1)', "minimum="),
    ('s.string("checkpointWriters", choices=("rank0", "allRanks"))', "choices="),
    ('section.section("fabric", {})', "restates the row of fabric"),
    ('s.string("name", "job")', "restates the row of"),
    ('s.data.get("keepImages", 30)', ".data.get"),
])
def test_the_restatement_finder_sees(source, expected):
    assert any(expected in found for found in restatements(f"DEFAULT = 20\n{source}\n"))


@pytest.mark.parametrize("source", [
    'size.integer("min", maximum)',  # Derived: size.max on a reservation pool
    'size.integer("min", 0)',  # Derived: a placeholder after the missing key was reported
    's.integer("cpu", None)',  # optional: read only when set
    's.integer(pool_name)',  # a map's entry: the map's row bounds it
])
def test_the_restatement_finder_passes_a_computed_default(source):
    assert restatements(source) == []


def section_of(path: str) -> tuple[Section, str]:
    """An empty section holding the key at `path` (a list's item: its first), and the key's name in it."""
    concrete = path.replace("[]", "[0]")
    parent, _, name = concrete.rpartition(".")
    if not parent:
        return Section(ErrorLog(), PROJECT, {}, separator=":"), name
    return Section(ErrorLog(), f"{PROJECT}:{parent}", {}), name


def read(section: Section, key: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    getter = {"integer": section.integer, "string": section.string, "boolean": section.boolean, "list": section.items,
              "map": section.mapping, "mapping": section.section}[key.type]
    value = getter(name, *args, **kwargs)
    return value.data if isinstance(value, Section) else value


@pytest.mark.parametrize("key", [key for key in KEYS if literal_default(key)], ids=lambda key: key.path)
def test_a_getter_gives_the_rows_default_and_refuses_one_restated(key):
    section, name = section_of(key.path)
    assert read(section, key, name) == key.default and section.errors == []
    with pytest.raises(KeyTableError, match=re.escape(key.path)):
        read(section, key, name, copy.deepcopy(key.default))


@pytest.mark.parametrize("key", [key for key in KEYS if key.minimum is not None or key.maximum is not None],
                         ids=lambda key: key.path)
def test_a_getter_bounds_a_value_by_its_row_and_refuses_bounds_restated(key):
    low = (key.minimum if key.minimum is not None else INT32_MIN) - 1
    high = (key.maximum if key.maximum is not None else INT32_MAX) + 1
    bounds = f"between {key.minimum} and {key.maximum}" if key.maximum is not None else f"at least {key.minimum}"
    for outside, rule in ((low, f"must be {bounds}"), (key.minimum if key.minimum is not None else 0, None),
                          (high, f"must be {bounds}" if key.maximum is not None else
                           f"must be at most {INT32_MAX}: the Kubernetes and AWS APIs store it as a 32-bit integer")):
        section, name = section_of(key.path)
        item = (f"{section.key(name)}[0]" if key.type == LIST else f"{section.key(name)}.gpu-spot" if key.type == MAP
                else section.key(name))
        section.check_integer(item, outside)
        assert [problem.rule for problem in section.errors] == ([rule] if rule else []), outside
    with pytest.raises(KeyTableError, match=re.escape(key.path)):
        section.check_integer(item, key.minimum or 1, minimum=key.minimum, maximum=key.maximum)


@pytest.mark.parametrize("key", [key for key in KEYS if key.allowed], ids=lambda key: key.path)
def test_a_string_is_judged_by_its_rows_closed_values(key):
    section, name = section_of(key.path)
    section.data = {name: "no-such-value"}
    own_messages = key.path == "storage.lustre.deploymentType"  # its parser says why a type is refused
    section.string(name, parser_judges_choices=own_messages)
    if not own_messages:
        assert [problem.rule for problem in section.errors] == [f"must be one of {', '.join(key.allowed)}"]
    with pytest.raises(KeyTableError, match=re.escape(key.path)):
        section.string(name, choices=(*reversed(key.allowed), "other"))


def test_the_node_shutdown_grace_covers_the_longest_job_grace():
    """The shutdown grace's bound, written out in its row, is a job's longest grace plus what nodeadm keeps."""
    from components.config.node_pools import SHUTDOWN_GRACE_CRITICAL_PODS_S
    assert (maximum_of("nodePools[].shutdownGracePeriodSeconds")
            == maximum_of("training.jobs[].terminationGracePeriodSeconds") + SHUTDOWN_GRACE_CRITICAL_PODS_S)
