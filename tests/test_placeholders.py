"""The placeholder guard (components/config/placeholders.py): which values it recognises, that the
offline plan lists them once and still plans, that a real deploy refuses them before any resource
exists (a dev stack may allow them), and that docs/first-deploy.md lists every one of them."""

from __future__ import annotations

import re

import pytest
from stack_configs import PROJECT, ROOT, mutate, raw_config

from components.config import ConfigError, decode_raw_config, load_stack_config
from components.config import placeholders as guard
from components.config.placeholders import BOOTSTRAP_KEYS, PLACEHOLDERS, find_placeholders, placeholder_secrets
from components.config.stack_file import project_file, read_stack_file, stack_config
from offline.plan import all_stacks, synthesize
from offline.plan import main as plan_main

BOOTSTRAP = ROOT / "bootstrap"
FIRST_DEPLOY = ROOT / "docs" / "first-deploy.md"
KINDS = {kind.name: kind for kind in PLACEHOLDERS}
ZERO = "0" * 64
REAL_DIGEST = "3f" * 32


def kinds_of(text: str) -> set[str]:
    """The kinds a config value is recognised as (a placeholder secret is found in the stack file only)."""
    return {kind.name for kind in PLACEHOLDERS if not kind.secret_file_only and kind.matches(text)}


@pytest.mark.parametrize(("text", "kind"), [
    ("arn:aws:iam::111122223333:role/ml-platform-admin", "aws-example-account"),
    ("arn:aws:iam::123456789012:policy/boundary", "aws-example-account"),
    ("444455556666", "aws-example-account"),
    (f"111122223333.dkr.ecr.us-east-1.amazonaws.com/t@sha256:{REAL_DIGEST}", "aws-example-account"),
    (f"1234.dkr.ecr.us-east-1.amazonaws.com/trainer@sha256:{ZERO}", "zero-image-digest"),
    ("ml-oncall@example.com", "example-email"),
    ("Ops@Alerts.Example.ORG", "example-email"),
    ("someone@mail.test", "example-email"),
    ("a@b.invalid", "example-email"),
    ("+14155550100", "fictional-phone-number"),
    ("+1 212 555 0199", "fictional-phone-number"),
    ("+447700900123", "fictional-phone-number"),
    ("198.51.100.0/24", "documentation-network"),
    ("192.0.2.10/32", "documentation-network"),
    ("203.0.113.0/25", "documentation-network"),
    ("2001:db8::/48", "documentation-network"),
    ("cr-0123456789abcdef0", "example-resource-id"),
    ("i-1234567890abcdef0", "example-resource-id"),
    ("cr-1234abcd56EXAMPLE", "example-resource-id"),
    ("example-org/gpu-training", "example-github-repository"),
    ("OWNER/REPO", "example-github-repository"),
    ("octo-org/octo-repo", "example-github-repository"),
])
def test_each_kind_of_example_value_is_recognised(text, kind):
    assert kinds_of(text) == {kind}


@pytest.mark.parametrize("text", [
    "arn:aws:iam::210987654321:role/ml-platform-admin",
    "1111222233334",                                   # 13 digits: no account
    f"210987654321.dkr.ecr.us-east-1.amazonaws.com/gpu-training-dev/trainer@sha256:{REAL_DIGEST}",
    "ml-oncall@acme.io",
    "ml-oncall@example.co.uk",
    "ml-oncall@examples.com",
    "example.com/tier",                                # a label key, no address
    "+14155552671",
    "+1555010012",
    "10.100.0.0/24",
    "203.0.114.0/24",
    "198.51.101.0/24",
    "198.51.0.0/16",                                   # a routed range around a documentation block
    "0.0.0.0/0",
    "cr-0a1b2c3d4e5f67890",
    "sg-0f1e2d3c4b5a69788",
    "acme/gpu-training",
    "example-ddp",                                     # the reference trainer's job name
    "organization/gpu-training/prod",                  # the DIY backend's organization, not an example
    "use1-az4",
    "placeholder-set-with-pulumi-config-set-secret",   # outside a `secure:` value, just text
])
def test_real_looking_values_are_not_flagged(text):
    assert not kinds_of(text)


def test_findings_name_the_key_and_the_kind_never_a_value_and_skip_secrets():
    raw = {f"{PROJECT}:trainerImage": f"r.example/t@sha256:{ZERO}",
           f"{PROJECT}:cluster": {"adminPrincipals": ["arn:aws:iam::210987654321:role/a",
                                                      "arn:aws:iam::111122223333:role/b"]},
           f"{PROJECT}:secrets": {"token": "ml-oncall@example.com 111122223333"},
           f"{PROJECT}:training": {"jobs": [{"env": {"CANARY": "111122223333-canary"}}]},
           "other:key": "ml-oncall@example.com"}
    found = find_placeholders(raw, project=PROJECT, secret_keys={f"{PROJECT}:training.jobs[0].env.CANARY"})
    assert [(f.key, f.kind.name) for f in found] == [
        (f"{PROJECT}:cluster.adminPrincipals[1]", "aws-example-account"),
        (f"{PROJECT}:trainerImage", "zero-image-digest"),
    ]
    text = guard.offline_report("dev", found)
    assert "canary" not in text and "role/b" not in text and ZERO not in text


def test_example_looking_text_in_free_form_values_is_the_users_own():
    """Only the keys the table names carry example values: a job's env may well name a Hugging Face
    repository `example/llama` or an id with 123456789012 in it, and a real deploy must take it."""
    raw = {f"{PROJECT}:training": {"jobs": [{"name": "example-ddp", "image": f"r/t@sha256:{ZERO}",
                                             "env": {"HF_REPO": "example/llama", "RUN": "123456789012",
                                                     "CONTACT": "ml@example.com"}}]},
           f"{PROJECT}:tags": {"owner": "owner/team"}}
    assert [(f.key, f.kind.name) for f in find_placeholders(raw, project=PROJECT)] == [
        (f"{PROJECT}:training.jobs[0].image", "zero-image-digest")]


def test_placeholder_secrets_are_found_in_the_stack_file_only():
    values = {"secrets": {"a": {"secure": "placeholder-set-with-pulumi-config-set-secret"},
                          "b": {"secure": "v1:AAAA:BBBB"}},
              f"{PROJECT}:training": {"jobs": [{"env": {"X": {"secure": "PLACEHOLDER"}}}]}}
    assert [f.key for f in placeholder_secrets(values, project=PROJECT)] == [
        f"{PROJECT}:secrets.a", f"{PROJECT}:training.jobs[0].env.X"]
    # The decoded config never shows a placeholder secret: only the file's `secure:` text does.
    assert not find_placeholders({f"{PROJECT}:secrets": {"a": "placeholder"}}, project=PROJECT)


# --- the repository's stack files and the checklist -------------------------------------------------

def repository_findings() -> list[tuple[str, str, str]]:
    """(stack file, key as the table spells it, kind) of every example value in the repository."""
    rows = []
    for project_dir, prefix in ((ROOT, ""), (BOOTSTRAP, "bootstrap:")):
        project = project_file(project_dir)["name"]
        for stack in all_stacks(project_dir):
            _, config, secret_keys = stack_config(stack, project_dir=project_dir)
            path = project_dir / project_file(project_dir).get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"
            found = (*find_placeholders(decode_raw_config(config), project=project, secret_keys=secret_keys),
                     *placeholder_secrets(read_stack_file(path), project=project))
            rows += [(path.name, prefix + table_key(f.key, project), f.kind.name) for f in found]
    return rows


def table_key(path: str, project: str) -> str:
    key = guard.table_key(path, project)
    return "secrets.<name>" if key.startswith("secrets.") else key


def test_the_repository_stacks_hold_every_kind_where_the_table_says():
    rows = repository_findings()
    assert {kind for _, _, kind in rows} == set(KINDS), "a kind the stack files no longer carry: drop it or test it"
    misplaced = [(file, key, kind) for file, key, kind in rows if key not in KINDS[kind].keys]
    assert not misplaced, f"add these keys to the kind's `keys` in placeholders.py: {misplaced}"


def checklist() -> list[tuple[set[str], str]]:
    """(keys, kind) of each row of docs/first-deploy.md's checklist table: | # | key | kind | ... |."""
    text = FIRST_DEPLOY.read_text()
    section = text[text.index("## The values to replace"):].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if re.match(r"\| *\d+ *\|", line)]
    # The page spells a bootstrap key as its config has it (`gpu-training-bootstrap:github...`);
    # placeholders.py marks the same keys `bootstrap:`.
    bootstrap = f"{project_file(BOOTSTRAP)['name']}:"
    return [({key.replace(bootstrap, BOOTSTRAP_KEYS, 1) if key.startswith(bootstrap) else key
              for key in re.findall(r"`([^`]+)`", cells[2])}, cells[3].strip().strip("`")) for cells in rows]


def test_the_checklist_spells_bootstrap_keys_as_the_bootstrap_config_has_them():
    """`pulumi config set` in bootstrap/ takes `gpu-training-bootstrap:github.repository`; a key
    spelled `bootstrap:...` names no config of any project."""
    text = FIRST_DEPLOY.read_text()
    section = text[text.index("## The values to replace"):].split("\n## ", 1)[0]
    keys = re.findall(r"`([\w-]+:[\w.\[\]]+)`", section)
    assert not [key for key in keys if key.startswith(BOOTSTRAP_KEYS)], keys
    bootstrap_file = (BOOTSTRAP / "Pulumi.bootstrap.yaml").read_text()
    project = project_file(BOOTSTRAP)["name"]
    named = [key for key in keys if key.startswith(f"{project}:")]
    assert len(named) >= 2, keys
    for key in named:
        top, _, nested = key.removeprefix(f"{project}:").partition(".")
        assert f"{project}:{top}:" in bootstrap_file and f"{nested}:" in bootstrap_file, key


def test_the_first_deploy_checklist_lists_every_kind_and_key_in_the_table_order():
    rows = checklist()
    assert rows, "docs/first-deploy.md has no checklist table"
    unknown = [kind for _, kind in rows if kind not in KINDS]
    assert not unknown, f"checklist rows name kinds placeholders.py lacks: {unknown}"
    missing = [(key, kind.name) for kind in PLACEHOLDERS for key in kind.keys
               if not any(key in keys and name == kind.name for keys, name in rows)]
    assert not missing, f"docs/first-deploy.md: no checklist row for {missing}"
    order = [next(i for i, (_, name) in enumerate(rows) if name == kind.name) for kind in PLACEHOLDERS]
    assert order == sorted(order), "the checklist must replace the kinds in PLACEHOLDERS' order"


# --- the offline plan warns, a real deploy refuses ---------------------------------------------------

def test_the_offline_plan_lists_them_once_per_stack_and_still_plans(tmp_path, capfd):
    assert plan_main(["--stack", "dev", "--build-dir", str(tmp_path)]) == 0
    captured = capfd.readouterr()
    assert captured.err.count("example values to replace before a real deploy") == 1, captured.err
    block = captured.err
    for key in ("gpu-training:iamPermissionsBoundary", "gpu-training:cluster.adminPrincipals[2]",
                "gpu-training:cluster.publicAccessCidrs[0]", "gpu-training:observability.alertEmails[0]",
                "gpu-training:secrets.hf-token", "gpu-training:trainerImage"):
        assert key in block
    assert "placeholders: {allow: true}" in block
    assert "example values" not in captured.out  # the summary (and build/) are unchanged
    assert (tmp_path / "dev" / "resources.json").is_file()


@pytest.fixture
def for_real(monkeypatch):
    """The program as `pulumi up` runs it: __main__.py asks the guard whether it runs under mocks."""
    monkeypatch.setattr(guard, "deploys_for_real", lambda: True)


def test_a_real_deploy_refuses_every_example_value_before_any_resource(for_real):
    with pytest.raises(ConfigError) as refused:
        synthesize("prod")
    keys = {problem.key for problem in refused.value.problems}
    assert {"gpu-training:iamPermissionsBoundary", "gpu-training:nodePools[1].capacityReservationId",
            "gpu-training:observability.alertEmails[0]", "gpu-training:observability.alertSms[0]",
            "gpu-training:trainerImage"} <= keys
    report = str(refused.value)
    assert "nothing was created" in report and "docs/first-deploy.md" in report
    assert "+14155550100" not in report and "ml-oncall@example.com" not in report
    assert "allow: true" not in report  # prod has no opt-out


def test_a_real_deploy_of_a_team_stack_and_of_the_bootstrap_refuses_them(for_real):
    with pytest.raises(ConfigError) as team:
        synthesize("team-vision-prod", platform_outputs=synthesize_offline_outputs())
    assert {p.key for p in team.value.problems} == {"gpu-training:trainerImage", "gpu-training:members[0]",
                                                    "gpu-training:iamPermissionsBoundary"}
    with pytest.raises(ConfigError) as bootstrap:
        synthesize("bootstrap", project_dir=BOOTSTRAP)
    assert [p.key for p in bootstrap.value.problems] == [
        "gpu-training-bootstrap:github.repository", "gpu-training-bootstrap:teams.vision.repository",
        "gpu-training-bootstrap:teams.vision.members[0]"]


def synthesize_offline_outputs():
    """prod's outputs, and its MultiKueue workers' (whose contract parameters the team stack reads), as
    the deployed platforms give them: planned outside the real-deploy mode, whose placeholder refusal
    is the platform stacks' own to test. The workers' are cached for the team's synthesis that follows."""
    from offline.plan import platform_plan_outputs, worker_stacks
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(guard, "deploys_for_real", lambda: False)
        outputs = platform_plan_outputs("prod", ROOT, None)
        for worker in worker_stacks(outputs):
            platform_plan_outputs(worker, ROOT, None)
        return outputs


def test_a_dev_stack_that_allows_them_deploys_with_one_warning(for_real):
    plan = synthesize("dev", overrides={f"{PROJECT}:placeholders": {"allow": True}})
    warnings = [w for w in plan.warnings if "example values (placeholders.allow)" in w]
    assert len(warnings) == 1 and "gpu-training:trainerImage" in warnings[0]
    assert plan.resources


@pytest.mark.parametrize("stack", ["staging", "prod", "team-vision-prod"])
def test_only_dev_may_allow_them(stack):
    raw = mutate(raw_config(stack), "placeholders", {"allow": True})
    with pytest.raises(ConfigError) as refused:
        load_stack_config(raw, project=PROJECT, stack=stack)
    assert any(p.key == f"{PROJECT}:placeholders.allow" and "only a dev stack" in p.rule for p in refused.value.problems)


def test_dev_may_allow_them_and_the_key_is_checked():
    config = load_stack_config(mutate(raw_config("dev"), "placeholders", {"allow": True}), project=PROJECT, stack="dev")
    assert config.allow_placeholders
    assert not load_stack_config(raw_config("dev"), project=PROJECT, stack="dev").allow_placeholders
    with pytest.raises(ConfigError) as refused:
        load_stack_config(mutate(raw_config("dev"), "placeholders", {"allow": "yes", "all": True}),
                          project=PROJECT, stack="dev")
    assert {p.key for p in refused.value.problems} == {f"{PROJECT}:placeholders.allow", f"{PROJECT}:placeholders.all"}


def test_the_guard_knows_the_mock_engine_from_a_real_one(monkeypatch, plan_of):
    plan_of("dev")  # the offline plan installed its mock monitor
    assert not guard.deploys_for_real()
    monkeypatch.setattr(guard.settings, "get_monitor", lambda: object())  # the engine's gRPC stub
    assert guard.deploys_for_real()
    monkeypatch.setattr(guard.settings, "get_monitor", lambda: None)  # no engine at all: refuse
    assert guard.deploys_for_real()


def test_the_table_cites_a_fix_and_a_reason_for_every_kind():
    for kind in PLACEHOLDERS:
        assert kind.why and kind.fix and kind.keys and kind.what, kind.name
    assert len(KINDS) == len(PLACEHOLDERS), "two kinds share a name"


def test_the_first_deploy_page_states_the_pulumi_cli_the_workflows_pin():
    pins = {m for workflow in (ROOT / ".github" / "workflows").glob("*.yml")
            for m in re.findall(r"PULUMI_VERSION: *([0-9.]+)", workflow.read_text())}
    assert len(pins) == 1, f"the workflows pin several Pulumi CLIs: {pins}"
    (version,) = pins
    assert f"Pulumi CLI | {version}" in FIRST_DEPLOY.read_text().replace("the Pulumi CLI", "Pulumi CLI")
    assert f"Pulumi CLI {version}" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize(("stack", "advice", "never"), [
    ("prod", "run scripts/build-image prod", None),
    ("team-vision-prod", "scripts/build-image --repository <trainerRepositoryUrl of stack prod>",
     "scripts/build-image team-vision-prod"),
])
def test_the_image_fix_fits_the_stack_kind(stack, advice, never):
    """A team stack has no image repository: `scripts/build-image <team stack>` refuses it."""
    kind = next(kind for kind in PLACEHOLDERS if kind.name == "zero-image-digest")
    fix = guard.fix_for(kind, stack)
    assert advice in fix
    assert never is None or never not in fix
