"""Our YAML reader (PyYAML, YAML 1.1) against the Pulumi CLI's (go-yaml v3, YAML 1.2).

Whatever the loader accepts must be what the CLI reads, value for value and type for type: the
offline plan shows the loader's reading, `pulumi up` deploys the CLI's. The CLI's scalar resolver
is ported as strict_yaml.go_yaml_plain_scalar; it is held here to go-yaml's own expectations,
and the loader to the port, over generated scalars, every file of the repository and (in
tests/test_config_fuzz.py) every mutated stack file the fuzzer gets accepted.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stack_configs import ROOT
from yaml_readers import go_document, same_data

from components.config import ConfigError
from components.config.strict_yaml import YamlError, go_yaml_plain_scalar, load_yaml_text
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
    assert message.startswith(f"{path}: line 103, column ") and "gpu-training:training.jobs[0].env.LR: " in message
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
