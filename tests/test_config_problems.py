"""Config problems are records: whether a key passed is asked of their keys, never of their text.

The report renders each record as one line, `<key>: <rule> (got <value>). Fix: <fix>`; a secret's
value is never in it.
"""

from __future__ import annotations

import pytest
from stack_configs import PROJECT, mutate, raw_config

from components.config import ConfigError, ConfigProblem, load_stack_config
from components.config.reader import SECRET, ErrorLog, Section, is_within, refuse_plain_keys_set_as_secrets
from components.config.stack import platform_stack_errors


class Reworded(ConfigProblem):
    """A problem whose line does not start with its key: only the key may decide what it is about."""

    def __str__(self) -> str:
        return "reworded: a line that names no key at its start"


@pytest.mark.parametrize(("key", "outer", "within"), [
    ("p:a", "p:a", True),
    ("p:a.b", "p:a", True),             # a mapping's key
    ("p:a[0]", "p:a", True),            # a list's item
    ("p:a[0].b", "p:a[0]", True),
    ("p:a", "p", True),                 # below the project
    ("p:a.bc", "p:a.b", False),         # a sibling that shares a prefix
    ("p:ab", "p:a", False),
    ("p:a", "p:a.b", False),            # the outer key is not inside the inner one
    ("q:a", "p", False),
])
def test_a_key_lies_within_another_only_at_a_separator(key, outer, within):
    assert is_within(key, outer) is within
    assert ConfigProblem(key, "rule").is_about(outer) is within


@pytest.mark.parametrize("problem", [
    ConfigProblem(f"{PROJECT}:a.b", "must be a string", "quote it", value="1"),
    Reworded(f"{PROJECT}:a.b", "must be a string", "quote it", value="1"),
])
def test_a_section_fails_by_the_keys_of_its_problems_whatever_their_text(problem):
    log = ErrorLog()
    root = Section(log, PROJECT, {"a": {"b": 1, "bc": 2}, "z": 3}, separator=":")
    section = root.section("a")
    log.append(problem)
    assert not section.ok("b") and section.failed and root.failed
    assert section.ok("bc") and root.ok("z")


def test_a_problem_on_a_sibling_key_does_not_fail_the_key_it_shares_a_prefix_with():
    log = ErrorLog()
    section = Section(log, PROJECT, {"b": 1, "bc": 2}, separator=":")
    log.append(Reworded(f"{PROJECT}:bc", "is wrong"))
    assert section.ok("b") and not section.ok("bc")


def test_a_problem_named_after_another_stack_fails_no_key_of_this_one():
    """A team stack reports its platform's problems: they are about the platform's keys, not the team's."""
    log = ErrorLog()
    root = Section(log, PROJECT, {"training": {}}, separator=":")
    log.extend(platform_stack_errors("dev", [ConfigProblem(f"{PROJECT}:training.jobs[0]", "is wrong", "fix it")]))
    (problem,) = log
    assert root.ok("training") and not root.failed and not log.reported(f"{PROJECT}:training")
    assert str(problem) == (f"platform stack 'dev' (stacks/Pulumi.dev.yaml): {PROJECT}:training.jobs[0]: is wrong. "
                            "Fix: fix it")


def test_nothing_more_is_said_inside_an_unusable_key_but_its_siblings_are_judged():
    log = ErrorLog()
    root = Section(log, PROJECT, {"b": "not a number", "bc": 2}, separator=":")
    root.integer("b")
    root.error(f"{PROJECT}:b.inner", "x", "is wrong inside", "fix it")  # repeats the same mistake
    root.error(f"{PROJECT}:bc", 2, "is wrong", "fix it")
    assert [problem.key for problem in log] == [f"{PROJECT}:b", f"{PROJECT}:bc"]


@pytest.mark.parametrize(("problem", "line"), [
    (ConfigProblem("p:a", "must be a string", "quote the value", value="1"), "p:a: must be a string (got 1). Fix: quote the value"),
    (ConfigProblem("p:a", "is stored in plain text", "rotate it", value=SECRET),
     "p:a: is stored in plain text (value not shown). Fix: rotate it"),
    (ConfigProblem("p:a", "unknown key", "remove it"), "p:a: unknown key. Fix: remove it"),
    (ConfigProblem("platform stack 'dev'", "could not be read"), "platform stack 'dev': could not be read"),
    (ConfigProblem("p:a", "is a path", "pass JSON", where="--set"), "--set: p:a: is a path. Fix: pass JSON"),
])
def test_the_report_renders_each_record_as_one_line(problem, line):
    error = ConfigError([problem])
    assert error.errors == [line] and error.problems == (problem,)
    assert str(error) == f"1 configuration error; nothing was created:\n  - {line}"


def test_a_secret_keys_value_is_never_shown():
    log = ErrorLog({f"{PROJECT}:token"})
    root = Section(log, PROJECT, {"token": 5}, separator=":")
    root.string("token")
    (problem,) = log
    assert problem.value == SECRET and "(value not shown)" in str(problem) and "5" not in str(problem)


@pytest.mark.parametrize(("problem", "expected"), [
    # In the rule, the fix, or the value shown: the text of the secret is replaced wherever it is.
    (ConfigProblem(f"{PROJECT}:pool", "names hunter2-secret", "use another"),
     f"{PROJECT}:pool: names [secret]. Fix: use another"),
    (ConfigProblem(f"{PROJECT}:pool", "is wrong", "rename hunter2-secret"), f"{PROJECT}:pool: is wrong. Fix: rename [secret]"),
    (ConfigProblem(f"{PROJECT}:pool", "is wrong", "fix it", value="'gpu-hunter2-secret'"),
     f"{PROJECT}:pool: is wrong (got 'gpu-[secret]'). Fix: fix it"),
    # A secret that straddles the rule and the value shown is caught in the line as a whole.
    (ConfigProblem(f"{PROJECT}:pool", "ends in abcd", "fix it", value="'efgh'"),
     f"{PROJECT}:pool: ends in [secret]'). Fix: fix it"),
])
def test_a_secrets_text_is_replaced_by_secret_in_every_part_of_a_line(problem, expected):
    log = ErrorLog({f"{PROJECT}:token"})
    log.append(problem)
    (redacted,) = log.without_secret_values({f"{PROJECT}:token": "hunter2-secret"}, also=["abcd (got 'efgh"])
    assert str(redacted) == expected


def test_a_refused_secret_is_reported_once_and_nothing_else_is_said_of_its_value():
    log = ErrorLog({f"{PROJECT}:region"})
    root = Section(log, PROJECT, {"region": "us-east-1x"}, separator=":")
    refuse_plain_keys_set_as_secrets(log, project=PROJECT, readable=(), fix="set it without --secret")
    root.string("region", check=lambda _: "is not a region", fix="use a region")
    (refusal,) = log.without_secret_values({f"{PROJECT}:region": "us-east-1x"})
    assert refusal.key == f"{PROJECT}:region" and refusal.value == SECRET and "set as a secret" in refusal.rule


def test_a_loaded_stacks_problems_carry_their_key_rule_fix_and_value():
    with pytest.raises(ConfigError) as raised:
        load_stack_config(mutate(raw_config("dev"), "costCenter", "-bad"), project=PROJECT, stack="dev")
    (problem,) = [p for p in raised.value.problems if p.key == f"{PROJECT}:costCenter"]
    assert problem.value == "'-bad'" and "tag value" in problem.rule and problem.fix.startswith("start with")
    assert str(problem) in raised.value.errors
