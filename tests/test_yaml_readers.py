"""Our YAML reader (PyYAML, YAML 1.1) against the Pulumi CLI's (go-yaml v3, YAML 1.2).

Whatever the loader accepts must be what the CLI reads, value for value and type for type: the
offline plan shows the loader's reading, `pulumi up` deploys the CLI's. The CLI's scalar resolver
is ported as strict_yaml.go_yaml_plain_scalar; it is held here to go-yaml's own expectations,
and the loader to the port, over generated scalars, every file of the repository and (in
tests/test_config_fuzz.py) every mutated stack file the fuzzer gets accepted.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stack_configs import PROJECT, ROOT
from yaml_readers import go_document, same_data

from components.config import ConfigError, decode_raw_config, load_stack_config
from components.config.keys import expected_type
from components.config.reader import REFUSED_MARK, ConfigProblem, ErrorLog, Section, refused_problems, refused_value
from components.config.stack_file import stack_config
from components.config.strict_yaml import YamlError, go_yaml_plain_scalar, load_yaml_text, parse_yaml_text
from offline.plan import synthesize

# (plain scalar, kind, value) as go-yaml v3.0.1 resolves it into an interface{}: the cases of its
# decode_test.go (unmarshalTests, lines 44-200, 590-600 and 662-733 at that tag) ...
GO_YAML_DECODE_TESTS = [
    ("hi", "str", "hi"), ("true", "bool", True), ("10", "int", 10), ("0b10", "int", 2), ("0xA", "int", 10),
    ("4294967296", "int", 4294967296), ("0.1", "float", 0.1), (".1", "float", 0.1), (".Inf", "float", math.inf),
    ("-.Inf", "float", -math.inf), ("-10", "int", -10), ("-.1", "float", -0.1), ("6.8523e+5", "float", 6.8523e5),
    ("685.230_15e+03", "float", 685.23015e3), ("685_230.15", "float", 685230.15), ("-.inf", "float", -math.inf),
    ("True", "bool", True), ("FALSE", "bool", False), ("685230", "int", 685230), ("+685_230", "int", 685230),
    ("02472256", "int", 685230), ("-02472256", "int", -685230), ("0o2472256", "int", 685230),
    ("-0o2472256", "int", -685230), ("0x_0A_74_AE", "int", 685230), ("0b1010_0111_0100_1010_1110", "int", 685230),
    ("-0b101010", "int", -42), ("-0b1" + "0" * 63, "int", -(2**63)), ("", "null", None), ("~", "null", None),
    ("null", "null", None), ("-b_c", "str", "-b_c"), ("+b_c", "str", "+b_c"),
    ("50cent_of_dollar", "str", "50cent_of_dollar"), ("9223372036854775807", "int", 2**63 - 1),
    ("18446744073709551615", "int", 2**64 - 1),
    ("2015-02-24T18:19:39Z", "timestamp", "2015-02-24T18:19:39Z"), ("2015-01-01", "timestamp", "2015-01-01"),
    ("2015-02-24T18:19:39.12Z", "timestamp", "2015-02-24T18:19:39.12Z"),
    ("2015-2-3T3:4:5Z", "timestamp", "2015-2-3T3:4:5Z"), ("2015-02-24t18:19:39Z", "timestamp", "2015-02-24t18:19:39Z"),
    ("2015-02-24 18:19:39", "timestamp", "2015-02-24 18:19:39"),
]
# ... and what its resolve.go implies: YAML 1.1's yes/on/y are text in v3 (no resolveMap entry),
# yamlStyleFloat takes an exponent without a dot or sign and a dot without digits before it,
# strconv's range errors leave text (or, past uint64, a float), time.Parse checks the day.
GO_YAML_RESOLVE_GO = [
    ("yes", "str", "yes"), ("on", "str", "on"), ("y", "str", "y"), ("No", "str", "No"),
    ("1.5e3", "float", 1500.0), ("1e3", "float", 1000.0), ("+.5", "float", 0.5), ("-.5e1", "float", -5.0),
    ("08", "float", 8.0), ("1e400", "str", "1e400"), ("18446744073709551616", "float", 2.0**64),
    ("-9223372036854775809", "float", -(2.0**63)), ("2015-02-30", "str", "2015-02-30"), ("2024-1-1", "timestamp", "2024-1-1"),
    ("0000-1-1", "timestamp", "0000-1-1"), ("2024-2-29", "timestamp", "2024-2-29"), ("2023-2-29", "str", "2023-2-29"),
    ("2024-01-01T25:00:00Z", "str", "2024-01-01T25:00:00Z"),
    ("<<", "str", "<<"), ("0x", "str", "0x"), (".", "str", "."), ("._5", "str", "._5"), ("1:30", "str", "1:30"),
]


@pytest.mark.parametrize(("scalar", "kind", "value"), GO_YAML_DECODE_TESTS + GO_YAML_RESOLVE_GO)
def test_the_go_yaml_port_resolves_as_go_yaml_v3(scalar, kind, value):
    found_kind, found = go_yaml_plain_scalar(scalar)
    assert found_kind == kind
    assert found == value or (isinstance(value, float) and math.isnan(value) and math.isnan(found))


# The review's cases and their kin: text to PyYAML, something else to the CLI; refused, and
# accepted once quoted.
@pytest.mark.parametrize(("scalar", "cli_reads"), [
    ("1.5e3", "float 1500.0"), ("+.5", "float 0.5"), ("-.5", "float -0.5"), ("1e3", "float 1000.0"),
    ("08", "float 8.0"), ("0o17", "int 15"), ("2024-1-1", "a date or time"), ("2015-2-3T3:4:5Z", "a date or time"),
    ("99999999999999999999", "float 1e+20"),
])
def test_a_scalar_the_cli_reads_otherwise_is_refused_until_quoted(scalar, cli_reads):
    with pytest.raises(YamlError) as refused:
        load_yaml_text(f"env:\n  LR: {scalar}\n", source="Pulumi.dev.yaml")
    message = str(refused.value)
    assert message.startswith("Pulumi.dev.yaml: line 2, column 7: ") and f"the Pulumi CLI (go-yaml, YAML 1.2) reads it as {cli_reads}" in message
    assert "Fix: quote it" in message
    assert load_yaml_text(f"env:\n  LR: '{scalar}'\n", source="t") == {"env": {"LR": scalar}}


def test_a_job_env_of_1_5e3_is_refused_and_quoted_plans_as_the_pod_gets_it(tmp_path):
    """The review's case through the stack file: unquoted, the plan showed "1.5e3" where `pulumi up`
    deployed 1500; now it is refused naming the file, line and key, and quoted it is text to both.
    The stack file reader hands the refusal on (never the value), and the program reports it."""
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
    assert text.count("env: {NCCL_DEBUG: INFO}") == 1
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text.replace("env: {NCCL_DEBUG: INFO}", "env: {NCCL_DEBUG: INFO, LR: 1.5e3}"))
    with pytest.raises(ConfigError) as refused:
        synthesize("dev", path)
    (message,) = refused.value.errors
    assert message.startswith(f"{path}: line {dev_line('env: {NCCL_DEBUG: INFO}')}, column ") and "gpu-training:training.jobs[0].env.LR: " in message
    assert '"1.5e3" is ambiguous: the Pulumi CLI (go-yaml, YAML 1.2) reads it as float 1500.0' in message
    assert message.endswith('Fix: quote it: "1.5e3"'), message  # an env value is text
    path.write_text(text.replace("env: {NCCL_DEBUG: INFO}", "env: {NCCL_DEBUG: INFO, LR: '1.5e3'}"))
    jobset = next(m for m in synthesize("dev", path).manifests() if m["kind"] == "JobSet")
    container = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "LR", "value": "1.5e3"} in container["env"]


# Plain scalars shaped like numbers, dates and YAML 1.1 words: where the readers part.
NUMBERISH = st.text(alphabet="0123456789+-._eExXoObB:Tt Zn", min_size=1, max_size=12).filter(lambda s: s == s.strip())
WORDS = st.sampled_from(["yes", "No", "on", "OFF", "y", "~", "null", "Null", "true", "True", "tRue", ".inf", "+.INF",
                         ".NaN", "<<", "2024-1-1", "2024-01-01", "2024-2-30", "12:30:00", "1_000", "0x1F", "0o17"])


@settings(max_examples=400, derandomize=True, deadline=None)
@given(scalar=NUMBERISH | WORDS)
def test_whatever_the_loader_accepts_the_cli_reads_the_same(scalar):
    text = f"a: {scalar}\n{scalar}: b\nl: [{scalar}]\n"
    try:
        ours = load_yaml_text(text, source="t")
    except YamlError:
        return  # refused: no difference can reach a plan
    assert same_data(ours, go_document(text)), (scalar, ours, go_document(text))


def test_every_yaml_file_of_the_repository_reads_the_same_in_both():
    files = [p for pattern in ("stacks/*.yaml", "Pulumi.yaml", "bootstrap/Pulumi*.yaml", "trainer/**/*.yaml")
             for p in sorted(ROOT.glob(pattern))]
    assert len(files) >= 6
    for path in files:
        text = path.read_text()
        assert same_data(load_yaml_text(text, source=str(path)), go_document(text)), path


# --- problems collected in one run -------------------------------------------------------------

DEV_TEXT = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
DEV_FILE = "Pulumi.dev.yaml"


def edited_dev(*edits: tuple[str, str]) -> str:
    text = DEV_TEXT
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def file_errors(tmp_path: Path, text: str, stack: str = "dev", **options: Any) -> list[str]:
    """The errors of one run over `text` as a stack file: the stack file reader's, then the schema's."""
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        _, raw, secret_keys = stack_config(stack, path, **options)
        load_stack_config(decode_raw_config(raw), project=PROJECT, stack=stack, secret_keys=secret_keys)
    return [error.replace(f"{tmp_path}/", "") for error in raised.value.errors]


def dev_line(fragment: str) -> int:
    """The line of the dev stack file that holds `fragment`: lines below the top move as the file grows."""
    lines = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text().splitlines()
    (number,) = [index for index, line in enumerate(lines, 1) if fragment in line]
    return number


def at(line: int, column: int, key: str, rule: str) -> str:
    return f"{DEV_FILE}: line {line}, column {column}: {PROJECT}:{key}: {rule}"


DATE = "it is a date or time to some YAML readers and text to others"
CLI_READS = "the Pulumi CLI (go-yaml, YAML 1.2) reads it as"

# (edits of the dev stack file, every error of one run in order): the YAML reader's first, in the
# order of the file, each fix for the type its key takes; then the schema's.
MULTI_PROBLEM_FILES = {
    "date-1e3-bad-value": (
        [("costCenter: ml-platform-dev", "costCenter: 2024-01-01"), ("flowLogRetentionDays: 30", "flowLogRetentionDays: 1e3"),
         ("size: {min: 0, desired: 0, max: 4}", "size: {min: 0, desired: 0, max: -1}")],
        [at(10, 28, "costCenter", f'"2024-01-01" is ambiguous: {DATE}. Fix: quote it: "2024-01-01"'),
         at(19, 27, "network.flowLogRetentionDays", f'"1e3" is ambiguous: {CLI_READS} float 1000.0, this reader as str '
            "'1e3', so the plan and the deployment would differ. Fix: write it as a plain decimal number: 1000"),
         f"{PROJECT}:nodePools[1].size.max: must be at least 1 (got -1). Fix: choose a value at least 1"]),
    "boolean-list-item-map-entry": (
        [("endpointPublicAccess: true", "endpointPublicAccess: yes"),
         ("[us-east-1a, us-east-1b]", "[us-east-1a, 2024-1-1]"), ("gpuQuota: {gpu-spot: 4}", "gpuQuota: {gpu-spot: 0x4}"),
         ("keepImages: 20 ", "keepImages: 0 ")],
        [at(17, 37, "network.availabilityZones[1]", f'"2024-1-1" is ambiguous: {CLI_READS} a date or time, this reader as '
            "str '2024-1-1', so the plan and the deployment would differ. Fix: quote it: \"2024-1-1\""),
         at(32, 27, "cluster.endpointPublicAccess", '"yes" is ambiguous: it is true/false to some YAML readers and text to '
            "others. Fix: write true, without quotes"),
         at(dev_line("gpuQuota: {gpu-spot: 4}"), 26, "training.gpuQuota.gpu-spot", "\"0x4\" is ambiguous: readers disagree on octal, hex, binary, '_' and "
            "base-60 numbers. Fix: write it as a plain decimal number: 4"),
         f"{PROJECT}:registry.keepImages: must be between 1 and 1000 (got 0). Fix: keep at least the images running "
         "workloads pin, e.g. 30"]),
    "repeated-key-tag-list-mapping": (
        [("  gpu-training:costCenter: ml-platform-dev\n", "  gpu-training:costCenter: a\n  gpu-training:costCenter: b\n"),
         ("availabilityZones: [us-east-1a, us-east-1b]", "availabilityZones: 2024-01-01"),
         ("endpointPublicAccess: true", "endpointPublicAccess: !!binary dHJ1ZQ=="),
         ("keepImages: 20 ", "keepImages: '20' ")],
        [at(11, 3, "costCenter", 'key "gpu-training:costCenter" appears twice (first on line 10); YAML readers keep only '
            "one of them. Fix: remove or merge one"),
         at(18, 24, "network.availabilityZones", f'"2024-01-01" is ambiguous: {DATE}. Fix: the key takes a list: write it '
            "as [a, b] (quote an item that looks like a date or a number)"),
         at(33, 27, "cluster.endpointPublicAccess", 'the tag "tag:yaml.org,2002:binary" is not allowed: only plain data '
            "(text, numbers, true/false, null, lists, mappings). Fix: remove the tag"),
         f"{PROJECT}:registry.keepImages: must be a whole number (got '20'). Fix: remove the quotes: write 20, not \"20\""]),
}


@pytest.mark.parametrize("case", MULTI_PROBLEM_FILES)
def test_one_run_reports_the_yaml_problems_and_the_schema_problems(tmp_path, case):
    """A date, a 1e3 and a bad value were reported one per run (the date, then the 1e3, then the
    value), each YAML one told to "quote it" whatever its key takes."""
    edits, expected = MULTI_PROBLEM_FILES[case]
    assert file_errors(tmp_path, edited_dev(*edits)) == expected


# One refused value each: the reader's line is the run's only error (its stand-in is judged by no
# rule: not the region's zones, not the pool a job names, not a secret's plain-text check).
SINGLE_REFUSALS = [
    ("costCenter: ml-platform-dev", "costCenter: 2024-01-01", "costCenter"),
    ("gpu-training:region: us-east-1", "gpu-training:region: 2024-01-01", "region"),
    ("gpu-training:environment: dev", "gpu-training:environment: 2024-01-01", "environment"),
    ("    - name: gpu-spot ", "    - name: 2024-01-01 ", "nodePools[1].name"),
    ("size: {min: 0, desired: 0, max: 4}", "size: {min: 0, desired: 0, max: 1e3}", "nodePools[1].size.max"),
    ("size: {min: 0, desired: 0, max: 4}", "size: 2024-01-01", "nodePools[1].size"),
    ("gpuQuota: {gpu-spot: 4}", "gpuQuota: {gpu-spot: 4e0}", "training.gpuQuota.gpu-spot"),
    ("        nodes: 2", "        nodes: 2e0", "training.jobs[0].nodes"),
    ("env: {NCCL_DEBUG: INFO}", "env: {NCCL_DEBUG: on}", "training.jobs[0].env.NCCL_DEBUG"),
    ("    hf-token: {secure: placeholder-set-with-pulumi-config-set-secret}", "    hf-token: 2024-01-01", "secrets.hf-token"),
    ("    hf-token: {secure: placeholder-set-with-pulumi-config-set-secret}",
     "    hf-token: {secure: 2024-01-01}", "secrets.hf-token"),
]


@pytest.mark.parametrize(("old", "new", "key"), SINGLE_REFUSALS, ids=[case[2] for case in SINGLE_REFUSALS])
def test_a_refused_value_is_reported_once(tmp_path, old, new, key):
    (error,) = file_errors(tmp_path, edited_dev((old, new)))
    assert error.startswith(f"{DEV_FILE}: line ") and f": {PROJECT}:{key}: " in error, error
    assert "refused by the stack file reader" not in error, error


def test_a_refused_secret_is_never_shown_nor_to_be_quoted(tmp_path):
    (error,) = file_errors(tmp_path, edited_dev(("    hf-token: {secure: placeholder-set-with-pulumi-config-set-secret}",
                                                 "    hf-token: 0x5ec7e7")))
    assert f"{PROJECT}:secrets.hf-token: a value of the secrets map (value not shown) is ambiguous" in error, error
    assert "5ec7e7" not in error and "quote" not in error and "pulumi config set --path --secret" in error, error


def test_a_refused_value_replaced_by_set_is_still_reported(tmp_path):
    """`--set costCenter=x` hides the file's value from the program, not the file's mistake."""
    errors = file_errors(tmp_path, edited_dev(("costCenter: ml-platform-dev", "costCenter: 2024-01-01"),
                                              ("flowLogRetentionDays: 30", "flowLogRetentionDays: 1e3")),
                         overrides={"costCenter": "ml"})
    assert [e.split(": ", 3)[2] for e in errors] == [f"{PROJECT}:costCenter", f"{PROJECT}:network.flowLogRetentionDays"]


def test_a_problem_outside_config_stops_at_the_file(tmp_path):
    errors = file_errors(tmp_path, "secretsprovider: 2024-01-01\n" + edited_dev(("costCenter: ml-platform-dev",
                                                                                 "costCenter: 2024-01-01")))
    assert [e.split(": ")[1] for e in errors] == ["line 1, column 18", "line 11, column 28"], errors


def test_the_bootstrap_reports_its_file_and_schema_problems_together(tmp_path):
    from bootstrap.config import load_bootstrap_config
    text = (ROOT / "bootstrap" / "Pulumi.bootstrap.yaml").read_text()
    for old, new in (("costCenter: ml-platform\n", "costCenter: 2024-01-01\n"), ("versionRetentionDays: 90 ", "versionRetentionDays: 0 ")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    project_dir = tmp_path / "bootstrap"
    project_dir.mkdir()
    (project_dir / "Pulumi.yaml").write_bytes((ROOT / "bootstrap" / "Pulumi.yaml").read_bytes())
    (project_dir / "Pulumi.bootstrap.yaml").write_text(text)
    project, raw, secret_keys = stack_config("bootstrap", project_dir=project_dir)
    with pytest.raises(ConfigError) as raised:
        load_bootstrap_config(decode_raw_config(raw), project=project, stack="bootstrap", secret_keys=secret_keys)
    first, second = raised.value.errors
    assert f"Pulumi.bootstrap.yaml: line 7, column 38: {project}:costCenter: \"2024-01-01\" is ambiguous" in first, first
    assert first.endswith("Fix: quote it if you mean text"), first  # no key table for the bootstrap's keys
    assert second.startswith(f"{project}:state.versionRetentionDays: must be between 1 and 3650 (got 0)"), second


def test_other_readers_get_every_problem_in_one_error():
    with pytest.raises(YamlError) as raised:
        load_yaml_text("a: 1e3\nb: yes\nb: 2\nc: !!binary eA==\n", source="h.yaml")
    assert [m.split(": ")[1] for m in raised.value.messages] == [
        "line 1, column 4", "line 2, column 4", "line 3, column 1", "line 4, column 4"]
    assert all(m.startswith("h.yaml: ") and m.count(". Fix: ") == 1 for m in raised.value.messages)


@pytest.mark.parametrize("text", ["a: [[[[", "a: &x [*x]", "a: 1\n---\nb: 2\n", "1: x\n", "yes: x\n"])
def test_what_leaves_nothing_to_read_on_still_stops(text):
    with pytest.raises(YamlError) as raised:
        parse_yaml_text(text, source="s.yaml")
    assert len(raised.value.messages) == 1 and raised.value.messages[0].startswith("s.yaml: ")


# (written, key takes, fix): an ambiguous plain scalar's fix is the one for its key's type.
FIXES = [
    ("2024-01-01", "string", 'quote it: "2024-01-01"'),
    ("2024-01-01", "integer", "write a whole number in plain decimal digits"),
    ("2024-01-01", None, "quote it if you mean text"),
    ("1e3", "integer", "write it as a plain decimal number: 1000"),
    ("1_000", "integer", "write it as a plain decimal number: 1000"),
    ("0x1F", "integer", "write it as a plain decimal number: 31"),
    ("5e-1", "integer", "write a whole number in plain decimal digits"),
    ("017", "integer", "write it as a plain decimal number without the leading 0 (readers disagree on what one means)"),
    ("017", None, "quote it if you mean text, or write the number without the leading 0"),
    ("1e3", None, "quote it if you mean text, or write it as a plain decimal number (1000) if you mean the number"),
    ("15e-4", None, "quote it if you mean text, or write it as a plain decimal number (0.0015) if you mean the number"),
    ("1e3", "string", 'quote it: "1e3"'),
    ("yes", "boolean", "write true, without quotes"),
    ("Off", "boolean", "write false, without quotes"),
    ("2024-01-01", "boolean", "write true or false, without quotes"),
    ("on", None, "quote it if you mean text, or write true or false"),
    ("2024-01-01", "list", "the key takes a list: write it as [a, b] (quote an item that looks like a date or a number)"),
    ("2024-01-01", "mapping", "the key takes `name: value` lines, indented below it"),
    ("2024-01-01", "map", "the key takes `name: value` lines, indented below it"),
]


@pytest.mark.parametrize(("written", "expected", "fix"), FIXES)
def test_the_fix_fits_the_type_the_key_takes(written, expected, fix):
    (problem,) = parse_yaml_text(f"k: {written}\n", source="t").problems
    assert problem.fix_for(expected) == fix


@pytest.mark.parametrize("expected", ["string", "integer", "boolean", "list", None])
def test_a_secrets_fix_is_always_to_encrypt_it(expected):
    (problem,) = parse_yaml_text("secrets: {token: 2024-01-01}\n", source="t").problems
    assert problem.fix_for(expected).startswith("set it with `pulumi config set --path --secret")


@pytest.mark.parametrize(("path", "kind"), [
    ("costCenter", "string"), ("registry.keepImages", "integer"), ("nodePools[3].size.max", "integer"),
    ("nodePools[0]", "mapping"), ("nodePools[0].taints[1]", "mapping"), ("network.availabilityZones[1]", "string"),
    ("fabric.rendezvousPorts[0]", "integer"), ("budget.actualPercent[2]", "integer"), ("training.gpuQuota.p5", "integer"),
    ("nodePools[0].labels.example.com/tier", "string"), ("training.jobs[0].env.LR", "string"),
    ("cluster.endpointPublicAccess", "boolean"), ("network", "mapping"), ("secrets", "map"), ("tags.costCenter", None),
    ("costCenter.x", None),
])
def test_the_key_table_says_what_each_path_takes(path, kind):
    assert expected_type(path) == kind


def test_a_stand_in_holds_its_problems_and_nothing_else_is_one():
    problems = [ConfigProblem("p:a", "is odd", "fix it", where="f: line 1, column 2"),
                ConfigProblem("p:a", "is odder", "", value="'x'")]
    assert refused_problems(refused_value(problems)) == tuple(problems)
    for value in ["plain", "", None, 3, [refused_value(problems)], REFUSED_MARK, f"{REFUSED_MARK}[] :refused>",
                  f"{REFUSED_MARK}[{{\"key\": 1}}] :refused>", refused_value(problems)[:-1]]:
        assert refused_problems(value) == (), value


@pytest.mark.parametrize(("getter", "value", "fix"), [
    ("integer", "100", 'remove the quotes: write 100, not "100"'),
    ("integer", " 7 ", 'remove the quotes: write 7, not " 7 "'),
    ("integer", 100.0, "write 100, without the decimal point"),
    ("integer", "1e3", "choose one from 1 to 1000"),
    ("integer", "ten", "choose one from 1 to 1000"),
    ("boolean", "true", 'remove the quotes: write true, not "true"'),
    ("boolean", "False", 'remove the quotes: write false, not "False"'),
    ("boolean", "yes", "write true or false without quotes"),
])
def test_a_quoted_value_is_told_to_lose_its_quotes_before_any_range(getter, value, fix):
    """`keepImages: "100"` was told the range (1 to 1000), which 100 is in."""
    log = ErrorLog()
    section = Section(log, PROJECT, {"k": value}, separator=":")
    if getter == "integer":
        section.integer("k", minimum=1, maximum=1000, fix="choose one from 1 to 1000")
    else:
        section.boolean("k")
    (problem,) = log
    assert problem.fix == fix


def test_a_quoted_number_of_a_secret_is_not_echoed_in_the_fix():
    log = ErrorLog({f"{PROJECT}:k"})
    Section(log, PROJECT, {"k": "4711"}, separator=":").integer("k")
    (problem,) = log
    assert problem.fix == "remove the quotes" and "4711" not in str(problem)


def test_keep_images_quoted_through_the_stack_file(tmp_path):
    (error,) = file_errors(tmp_path, edited_dev(("keepImages: 20 ", 'keepImages: "100" ')))
    assert error == f'{PROJECT}:registry.keepImages: must be a whole number (got \'100\'). Fix: remove the quotes: write 100, not "100"'
