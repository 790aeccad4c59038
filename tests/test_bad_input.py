"""Bad input, family by family: the examples that once failed badly, and more of each kind.

Each case must end in ConfigError (exit 2 from the CLIs) whose messages name the key or the file
and line, say how to fix it, show no secret and stay small; never in a traceback, and never in a
config that passes only to be refused by AWS or Kubernetes later.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from stack_configs import DELETE, PROJECT, ROOT, mutate, raw_config

from components.config import ConfigError, decode_raw_config, load_stack_config
from components.config.stack_file import stack_config
from offline.plan import main as plan_main

CANARY = "canary-5ecret-value-7a1f"
MAX_REPORT_BYTES = 20_000
JOB = {"name": "ddp", "pool": "gpu-spot", "nodes": 2, "gpusPerNode": 1}
DEV_STACK_TEXT = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()


def refused(raw: dict[str, Any], stack: str = "dev", *, secret_keys: Any = None) -> list[str]:
    """The errors of loading `raw`; fails on success, on any other exception, or on a bad report."""
    return checked(refusal(raw, stack, secret_keys=secret_keys))


def refusal(raw: dict[str, Any], stack: str = "dev", *, secret_keys: Any = None) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack=stack, secret_keys=secret_keys)
    return raised.value


def checked(error: ConfigError) -> list[str]:
    report = str(error)
    assert len(report.encode()) <= MAX_REPORT_BYTES and CANARY not in report, report[:3000]
    assert all(e.count("Fix:") == 1 and "\n" not in e for e in error.errors), error.errors
    return error.errors


def refused_file(tmp_path: Path, text: str | bytes, stack: str = "dev") -> list[str]:
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with pytest.raises(ConfigError) as raised:
        _, raw, secret_keys = stack_config(stack, path)
        load_stack_config(decode_raw_config(raw), project=PROJECT, stack=stack, secret_keys=secret_keys)
    return checked(raised.value)


def with_jobs(raw: dict[str, Any], *jobs: dict[str, Any], quota: int = 4) -> dict[str, Any]:
    return mutate(raw, "training", {"gpuQuota": {"gpu-spot": quota}, "jobs": list(jobs)})


def dev_pools(**gpu_changes: Any) -> list[dict[str, Any]]:
    system, gpu = raw_config("dev")[f"{PROJECT}:nodePools"]
    return [system, {**gpu, **gpu_changes}]


def one(errors: list[str], key: str, text: str) -> None:
    """Exactly one error: about `key`, saying `text` (a second one would be a follow-on)."""
    assert len(errors) == 1 and errors[0].startswith(f"{PROJECT}:{key}") and text in errors[0], errors


# --- 1. a value that failed validation is never used by a later check -----------------------------

FAILED_VALUES = [
    # a one-letter typo in a pool a job and the quota use (once a KeyError)
    ("typo-in-second-type", {"instanceTypes": ["g6.2xlarge", "g5.2xlarg"]}, "nodePools[1].instanceTypes[1]", "not an instance type"),
    ("typo-in-first-type", {"instanceTypes": ["g6.2xlarg", "g5.2xlarge"]}, "nodePools[1].instanceTypes[0]", "not an instance type"),
    ("types-without-brackets", {"instanceTypes": "g6.48xlarge"}, "nodePools[1].instanceTypes", "must be a list"),
    ("no-types", {"instanceTypes": []}, "nodePools[1].instanceTypes", "needs at least one instance type"),
    ("list-inside-the-list", {"instanceTypes": [["g6.2xlarge"], "g5.2xlarge"]}, "nodePools[1].instanceTypes[0]", "not an instance type"),
    ("size-not-a-mapping", {"size": 4}, "nodePools[1].size", "must be a mapping"),
    ("size-quoted", {"size": {"min": 0, "desired": 0, "max": "4"}}, "nodePools[1].size.max", "whole number"),
    ("gpu-quoted", {"gpu": "true"}, "nodePools[1].gpu", "true or false"),
]


@pytest.mark.parametrize(("changes", "key", "expected"), [c[1:] for c in FAILED_VALUES], ids=[c[0] for c in FAILED_VALUES])
def test_a_failed_pool_value_is_reported_once_and_used_by_nothing(changes, key, expected):
    raw = with_jobs(mutate(raw_config("dev"), "nodePools", dev_pools(**changes)), JOB)
    one(refused(raw), key, expected)


def test_failed_values_elsewhere_are_not_judged_again():
    one(refused(mutate(raw_config("dev"), "nodePools", [*dev_pools(), None])), "nodePools[2]", "must be a mapping")
    one(refused(mutate(with_jobs(raw_config("dev"), JOB), "training.gpuQuota", {"gpu-spot": "4"})),
        "training.gpuQuota.gpu-spot", "whole number")
    one(refused(mutate(raw_config("dev"), "region", "us-east")), "region", "not an AWS region")
    one(refused(mutate(raw_config("dev"), "network", DELETE)), "network", "required key is missing")
    one(refused(with_jobs(raw_config("dev"), {**JOB, "nodes": "2"})), "training.jobs[0].nodes", "whole number")


# --- 2. the loader ----------------------------------------------------------------------------------

LOADER_CASES = [
    ("syntax-error", DEV_STACK_TEXT.replace("[us-east-1a, us-east-1b]", "[us-east-1a, us-east-1b"), "line"),
    ("python-tag", DEV_STACK_TEXT.replace("costCenter: ml-platform-dev", "costCenter: !!python/object/apply:os.system ['true']"),
     "is not allowed"),
    ("file-is-a-list", "- config\n", "must be a mapping with a `config:` block"),
    ("config-is-a-list", "config:\n  - a\n", "`config` must be a mapping"),
    ("numeric-key", DEV_STACK_TEXT.replace("  gpu-training:region: us-east-1", "  1: us-east-1"), "is not text"),
    ("unquoted-date", DEV_STACK_TEXT.replace("costCenter: ml-platform-dev", "costCenter: 2024-01-01"), "date or time"),
    ("duplicate-key", DEV_STACK_TEXT.replace("  gpu-training:environment: dev\n",
                                             "  gpu-training:environment: dev\n  gpu-training:environment: prod\n"), "appears twice"),
    ("misspelt-top-level", DEV_STACK_TEXT.replace("config:", "confg:", 1), "did you mean 'config'"),
    ("yes-for-true", DEV_STACK_TEXT.replace("endpointPublicAccess: true", "endpointPublicAccess: yes"), "ambiguous"),
    ("octal", DEV_STACK_TEXT.replace("flowLogRetentionDays: 30", "flowLogRetentionDays: 030"), "ambiguous"),
    ("two-documents", DEV_STACK_TEXT + "---\nconfig: {}\n", "more than one YAML document"),
    ("merge-key", "base: &b {a: 1}\nconfig:\n  <<: *b\n", "merge keys"),
    ("tab-indent", DEV_STACK_TEXT.replace("  gpu-training:region", "\tgpu-training:region"), "line"),
    ("not-utf8", DEV_STACK_TEXT.encode() + b"\xff\xfe", "not UTF-8"),
    ("nul-byte", DEV_STACK_TEXT.replace("ml-platform-dev", "ml\x00dev"), "control character"),
    # One key in two spellings: the Pulumi CLI qualifies `costCenter` as gpu-training:costCenter and
    # keeps one of the two at random (a Go map); this loader kept the later one silently.
    ("key-in-two-spellings", DEV_STACK_TEXT.replace("  gpu-training:costCenter: ml-platform-dev\n",
                                                    "  gpu-training:costCenter: a\n  costCenter: b\n"),
     'gpu-training:costCenter is set twice, as "gpu-training:costCenter" and "costCenter"'),
    ("region-in-two-spellings", DEV_STACK_TEXT.replace("  gpu-training:region: us-east-1\n",
                                                       "  region: us-east-2\n  gpu-training:region: us-east-1\n"),
     'gpu-training:region is set twice, as "region" and "gpu-training:region"'),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in LOADER_CASES], ids=[c[0] for c in LOADER_CASES])
def test_the_loader_refuses_what_yaml_readers_disagree_on(tmp_path, text, expected):
    errors = refused_file(tmp_path, text)
    assert any(expected in e and e.startswith(str(tmp_path)) for e in errors), errors


def hyperparameters_errors(relative: str) -> list[str]:
    return refused(with_jobs(raw_config("dev"), {**JOB, "hyperparameters": relative}))


@pytest.fixture
def repo_scratch():
    """A directory inside the repository (hyperparameters must live there); removed afterwards."""
    (ROOT / "build").mkdir(exist_ok=True)
    # One of its own per test: the parallel tests (pytest-xdist) would empty each other's.
    directory = Path(tempfile.mkdtemp(dir=ROOT / "build", prefix="test-bad-input-"))
    yield directory
    shutil.rmtree(directory)


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("binary.yaml", bytes(range(256)), "not UTF-8"),
    ("huge.yaml", b"a: " + b"x" * (1024 * 1024 + 1) + b"\n", "KiB allowed"),
    ("list.yaml", b"- 1\n- 2\n", "must hold a YAML mapping"),
    ("dates.yaml", b"start: 2024-01-01\n", "date or time"),
    ("duplicates.yaml", b"lr: 0.1\nlr: 0.2\n", "appears twice"),
])
def test_hyperparameters_files_are_read_strictly(repo_scratch, name, content, expected):
    (repo_scratch / name).write_bytes(content)
    one(hyperparameters_errors(f"build/{repo_scratch.name}/{name}"), "training.jobs[0].hyperparameters", expected)


@pytest.mark.parametrize("relative", ["stacks/Pulumi.team-vision-prod.yaml", "Pulumi.yaml", "stacks/Pulumi.dev.yaml",
                                      "trainer/../stacks/Pulumi.prod.yaml", "bootstrap/Pulumi.bootstrap.yaml",
                                      "bootstrap/Pulumi.yaml", "policy/PulumiPolicy.yaml"])
def test_hyperparameters_are_never_a_pulumi_file(relative):
    """A stack file (with its `secure:` ciphertexts) became the job's ConfigMap."""
    one(hyperparameters_errors(relative), "training.jobs[0].hyperparameters", "is a Pulumi project or stack file")


def test_hyperparameters_are_never_an_empty_path():
    """`hyperparameters: ''` planned a ConfigMap with an empty hparams.yaml."""
    one(hyperparameters_errors(""), "training.jobs[0].hyperparameters", "is empty")


def test_hyperparameters_through_a_link_to_a_stack_file(repo_scratch):
    (repo_scratch / "hparams.yaml").symlink_to(ROOT / "stacks" / "Pulumi.dev.yaml")
    one(hyperparameters_errors(f"build/{repo_scratch.name}/hparams.yaml"), "training.jobs[0].hyperparameters",
        "is a Pulumi project or stack file")


def test_the_stacks_directory_is_the_projects():
    from components.config.stack_file import project_file
    from components.config.training import STACKS_DIR
    assert project_file()["stackConfigDir"] == STACKS_DIR


@pytest.mark.parametrize("relative", ["trainer", "x" * 300 + ".yaml", "a\x00b.yaml", "../../etc/passwd", "/etc/hostname"])
def test_hyperparameters_paths_that_are_not_repository_files(relative):
    one(hyperparameters_errors(relative), "training.jobs[0].hyperparameters", "not a file in this repository")


# --- 3. patterns match the whole value ----------------------------------------------------------------

DIGEST = "111122223333.dkr.ecr.us-east-1.amazonaws.com/gpu-training-dev/trainer@sha256:" + "0" * 64
TRAILING_NEWLINE = [
    ("folded-image", "trainerImage", DIGEST + "\n", "trainerImage"),
    ("cost-center", "costCenter", "ml-platform-dev\n", "costCenter"),
    ("region", "region", "us-east-1\n", "region"),
    ("alert-email", "observability.alertEmails", ["ml@example.com\n"], "observability.alertEmails[0]"),
    ("admin-arn", "cluster.adminPrincipals", ["arn:aws:iam::111122223333:role/admin\n"], "cluster.adminPrincipals[0]"),
    ("datasets-bucket", "storage.datasetsBucket", "acme-datasets\n", "storage.datasetsBucket"),
    ("platform-reference", "platformStack", "organization/gpu-training/dev\n", "platformStack"),
]


@pytest.mark.parametrize(("path", "value", "key"), [c[1:] for c in TRAILING_NEWLINE], ids=[c[0] for c in TRAILING_NEWLINE])
def test_a_trailing_newline_never_passes_a_pattern(path, value, key):
    raw = with_jobs(mutate(raw_config("dev"), path, value), JOB) if path == "trainerImage" else mutate(raw_config("dev"), path, value)
    errors = refused(raw)
    assert any(e.startswith(f"{PROJECT}:{key}") for e in errors), errors


@pytest.mark.parametrize(("field", "value"), [("name", "ddp\n"), ("image", DIGEST + "\n"), ("pool", "gpu-spot\n")])
def test_a_trailing_newline_in_a_job(field, value):
    errors = refused(with_jobs(raw_config("dev"), {**JOB, field: value}))
    assert any(e.startswith(f"{PROJECT}:training.jobs[0].{field}") for e in errors), errors


def test_no_pattern_in_the_program_is_anchored_with_dollar():
    """`$` also matches before a trailing newline: every pattern is used with fullmatch instead."""
    offenders = []
    scripts = [p for p in (ROOT / "scripts").iterdir() if p.is_file() and p.read_text().startswith(("#!/usr/bin/env python", '"""'))]
    trainer = [*ROOT.glob("trainer/**/*.py"), *ROOT.glob("bench/*.py")]  # the image's code parses its env too
    for path in [*ROOT.glob("components/**/*.py"), *ROOT.glob("bootstrap/*.py"), *ROOT.glob("offline/*.py"), *scripts, *trainer]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            # (A MULTILINE pattern's ^ and $ are line anchors on purpose: it edits lines of a file.)
            if re.search(r"re\.compile\(r?f?\"\^|re\.compile\(.*\$\"|\.match\(", line) and "re.MULTILINE" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, offenders


# --- 4. free-form values reach the pod as written, or not at all --------------------------------------

FREE_FORM = [
    ("env-true", {"env": {"NCCL_IB_DISABLE": True}}, "training.jobs[0].env.NCCL_IB_DISABLE"),
    ("env-empty", {"env": {"NCCL_DEBUG": None}}, "training.jobs[0].env.NCCL_DEBUG"),
    ("env-decimal", {"env": {"LR": 0.10}}, "training.jobs[0].env.LR"),
    ("env-list", {"env": {"HOSTS": ["a", "b"]}}, "training.jobs[0].env.HOSTS"),
    ("arg-bool", {"args": ["-m", "train", "--resume", False]}, "training.jobs[0].args[3]"),
    ("secret-not-text", {"secrets": [{"name": "x"}]}, "training.jobs[0].secrets[0]"),
]


@pytest.mark.parametrize(("changes", "key"), [c[1:] for c in FREE_FORM], ids=[c[0] for c in FREE_FORM])
def test_free_form_values_must_be_text(changes, key):
    one(refused(with_jobs(raw_config("dev"), {**JOB, **changes})), key, "must be text")


def test_a_label_value_must_be_text():
    one(refused(mutate(raw_config("dev"), "nodePools", dev_pools(labels={"spot": True}))), "nodePools[1].labels.spot",
        "must be text")


def test_whole_numbers_are_written_in_decimal(plan_of):
    raw = with_jobs(raw_config("dev"), {**JOB, "env": {"OMP_NUM_THREADS": 8, "NCCL_DEBUG": "INFO"}})
    (job,) = load_stack_config(raw, project=PROJECT, stack="dev").training.jobs
    assert job.env == {"OMP_NUM_THREADS": "8", "NCCL_DEBUG": "INFO"}


# --- 5. secrets: none in plain text, none echoed ---------------------------------------------------------

def test_one_plain_secret_beside_encrypted_ones_is_refused(tmp_path, capfd):
    text = DEV_STACK_TEXT.replace("    hf-token: {secure: placeholder-set-with-pulumi-config-set-secret}",
                                  f"    hf-token: {CANARY}")
    one(refused_file(tmp_path, text), "secrets.hf-token", "stored in plain text")
    # The same through the program as `make plan` runs it: only the plain entry is named.
    err = plan_error(capfd, "--stack", "dev", "--stack-file", str(tmp_path / "Pulumi.dev.yaml"), "--out", str(tmp_path / "o"))
    assert "secrets.hf-token: is stored in plain text" in err and "wandb-api-key" not in err and CANARY not in err


def test_plain_secrets_are_named_one_by_one(tmp_path):
    text = DEV_STACK_TEXT.replace("{secure: placeholder-set-with-pulumi-config-set-secret}", CANARY)
    errors = refused_file(tmp_path, text)
    assert sorted(e.split(":", 2)[1] for e in errors) == ["secrets.hf-token", "secrets.wandb-api-key"], errors


@pytest.mark.parametrize("ciphertext", ["''", "~", "12345", "[a]", "{a: b}", "'  '"],
                         ids=["empty", "null", "number", "list", "mapping", "blank"])
def test_a_secure_value_must_be_a_ciphertext(tmp_path, ciphertext):
    """`{secure: ''}` and the like were accepted (and planned with an offline placeholder)."""
    text = DEV_STACK_TEXT.replace("    hf-token: {secure: placeholder-set-with-pulumi-config-set-secret}",
                                  f"    hf-token: {{secure: {ciphertext}}}")
    errors = refused_file(tmp_path, text)
    assert len(errors) == 1 and errors[0].startswith(f"{tmp_path}/Pulumi.dev.yaml: {PROJECT}:secrets.hf-token: "), errors
    assert "a non-empty string (value not shown)" in errors[0] and "got " not in errors[0]


SECRET_ON_PLAIN_KEYS = [
    # the audit's examples: planned with exit 0, the canary in plain text in the `cost-center` tag
    # of resources.json and in the manifests' `image:`
    ("cost-center", "dev", "costCenter", "S3CR3TCANARYzq"),
    ("trainer-image", "dev", "trainerImage", DIGEST),
    ("region", "dev", "region", "us-east-1"),
    ("structured", "dev", "observability", json.dumps({"alertEmails": ["ml@example.com"]})),
    ("team-stack", "team-vision-prod", "costCenter", "ml-research"),
    ("foreign-key", "dev", "pulumi:disable-default-providers", '["*"]'),
]


@pytest.mark.parametrize(("stack", "key", "value"), [c[1:] for c in SECRET_ON_PLAIN_KEYS],
                         ids=[c[0] for c in SECRET_ON_PLAIN_KEYS])
def test_a_key_the_program_reads_in_plain_text_cannot_be_secret(capfd, tmp_path, stack, key, value):
    err = plan_error(capfd, "--stack", stack, "--secret", f"{key}={value}", "--out", str(tmp_path / "out"))
    full = key if ":" in key else f"{PROJECT}:{key}"
    assert f"  - {full}: is set as a secret" in err and "(value not shown)" in err, err
    assert f"only the entries of {PROJECT}:secrets may be secret" in err and value not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("line", "replacement", "key"), [
    ("  gpu-training:costCenter: ml-platform-dev", "  gpu-training:costCenter: {secure: AAABBBCCC}", "costCenter"),
    ("  gpu-training:region: us-east-1", "  region: {secure: AAABBBCCC}", "region"),
    ("        env: {NCCL_DEBUG: INFO}", "        env: {NCCL_DEBUG: {secure: AAABBBCCC}}", "training.jobs[0].env.NCCL_DEBUG"),
    ("        secrets: [wandb-api-key]", "        secrets: [{secure: AAABBBCCC}]", "training.jobs[0].secrets[0]"),
])
def test_a_secure_value_on_a_plain_key_is_refused(capfd, tmp_path, line, replacement, key):
    """It was validated as an offline placeholder string, never as the value `pulumi up` would use,
    and the value would reach the manifests in plain text. Through the CLI: the program reads the
    secret keys from the runtime (read_secret_keys), at any depth."""
    assert line in DEV_STACK_TEXT
    errors = refused_file(tmp_path, DEV_STACK_TEXT.replace(line, replacement))
    assert any(e.startswith(f"{PROJECT}:{key}: is set as a secret") for e in errors), errors
    stack_file = tmp_path / "Pulumi.dev.yaml"
    err = plan_error(capfd, "--stack", "dev", "--stack-file", str(stack_file), "--out", str(tmp_path / "out"))
    assert f"  - {PROJECT}:{key}: is set as a secret" in err, err
    assert not (tmp_path / "out").exists()


def test_the_bootstrap_reads_no_secrets(capfd, tmp_path):
    err = plan_error(capfd, "--project", "bootstrap", "--stack", "bootstrap", "--secret", "costCenter=S3CR3TCANARYzq",
                     "--out", str(tmp_path / "out"))
    assert "gpu-training-bootstrap:costCenter: is set as a secret" in err and "the bootstrap reads no secrets" in err, err
    assert "S3CR3TCANARYzq" not in err


@pytest.mark.parametrize(("key", "value"), [
    ("region", CANARY),
    ("costCenter", CANARY + "\n"),
    ("nodePools", [{"name": CANARY}]),
    ("trainerImage", CANARY),
    ("secrets", {CANARY.upper(): "x", "ok-name": 5}),
])
def test_a_value_set_as_a_secret_is_never_shown(key, value):
    raw = with_jobs(mutate(raw_config("dev"), key, value), JOB)
    errors = refused(raw, secret_keys={f"{PROJECT}:{key}", f"{PROJECT}:secrets"})
    assert any(e.startswith(f"{PROJECT}:{key}") for e in errors), errors


def test_a_secret_that_names_something_is_blanked_wherever_it_appears():
    """A pool named by a --secret value would appear in the fix of a job's error: blanked there too,
    while the keys of plain config stay readable even where they contain a secret's text."""
    pools = dev_pools(name=CANARY)
    raw = with_jobs(mutate(raw_config("dev"), "nodePools", pools), {**JOB, "pool": "gpu"})
    errors = refused(raw, secret_keys={f"{PROJECT}:nodePools", f"{PROJECT}:secrets"})
    assert any("[secret]" in e for e in errors), errors
    # `spot` (the secret pools' capacity) is text of the secret, `gpu-spot` a plain quota key.
    assert any(e.startswith(f"{PROJECT}:training.gpuQuota.gpu-spot: ") and "got 'gpu-[secret]'" in e for e in errors), errors


@pytest.mark.parametrize("argument", [CANARY, f"secrets={{{CANARY}", f"={CANARY}", f'secrets={{"a": "{CANARY}", "a": 1}}'])
def test_bad_secret_arguments_are_not_echoed(capfd, argument):
    err = plan_error(capfd, "--stack", "dev", "--secret", argument)
    assert CANARY not in err and len(err.splitlines()) == 1, err


# --- 6. what AWS or Kubernetes would refuse is refused here first ----------------------------------------

API_LIMITS = [
    ("duplicate-env-with-secret", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "secrets": ["wandb-api-key"],
                                                                                       "env": {"WANDB_API_KEY": "x"}}]},
     "training.jobs[0].secrets", "a pod holds each name once"),
    ("secret-shadows-platform-env", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "secrets": ["home"]}]},
     "training.jobs[0].secrets", "which the pod already sets"),
    ("ttl-beyond-int32", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "ttlSecondsAfterFinished": 2**31}]},
     "training.jobs[0].ttlSecondsAfterFinished", "32-bit"),
    ("pool-size-beyond-int32", "nodePools", dev_pools(size={"min": 0, "desired": 0, "max": 2**31}), "nodePools[1].size.max", "32-bit"),
    ("no-pool-zones", "nodePools", dev_pools(availabilityZones=[]), "nodePools[1].availabilityZones", "at least one zone"),
    ("no-network-zones", "network.availabilityZones", [], "network.availabilityZones", "at least 2"),
    ("zone-the-region-lacks", "network.availabilityZones", ["us-east-1a", "us-east-1g"], "network.availabilityZones[1]",
     "not an availability zone of region us-east-1"),
    ("label-key-over-63", "nodePools", dev_pools(labels={"example.com/" + "k" * 60: "v"}), "nodePools[1].labels", "63"),
    ("empty-label-value", "nodePools", dev_pools(labels={"tier": ""}), "nodePools[1].labels.tier", "value is empty"),
    ("taint-key-over-63", "nodePools", dev_pools(taints=[{"key": "t" * 64, "value": "", "effect": "NoSchedule"}]),
     "nodePools[1].taints[0]", "63"),
    ("empty-taint-key", "nodePools", dev_pools(taints=[{"key": "", "effect": "NoSchedule"}]), "nodePools[1].taints[0]",
     "not a valid Kubernetes label or taint key"),
    ("repeated-taint", "nodePools", dev_pools(taints=[{"key": "a", "effect": "NoSchedule"}] * 2), "nodePools[1].taints",
     "repeats a key and effect"),
    ("tag-value-with-parentheses", "costCenter", "ml (platform)", "costCenter", "AWS tag value"),
    ("tag-value-over-256", "costCenter", "c" * 257, "costCenter", "AWS tag value"),
    ("empty-cost-center", "costCenter", "", "costCenter", "AWS tag value"),
    ("blank-cost-center", "costCenter", "   ", "costCenter", "AWS tag value"),
    # a separate cost center in Cost Explorer from "ml-platform"
    ("cost-center-with-a-trailing-space", "costCenter", "ml-platform ", "costCenter", "no space at the end"),
    # a non-ASCII letter: the message said "letters", which ä is
    ("non-ascii-cost-center", "costCenter", "ml-plätform", "costCenter", "then ASCII letters, digits"),
    ("unknown-region", "region", "us-east-9", "region", "not an AWS region"),
    # execve refuses a string over MAX_ARG_STRLEN (E2BIG): the container would never start
    ("env-over-max-arg-strlen", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "env": {"NCCL_DEBUG": "A" * 140_000}}]},
     "training.jobs[0].env.NCCL_DEBUG", "MAX_ARG_STRLEN"),
    ("env-one-byte-over", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "env": {"NCCL_DEBUG": "A" * 131_061}}]},
     "training.jobs[0].env.NCCL_DEBUG", "the environment string 131072 bytes long"),
    ("env-multibyte", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "env": {"NOTE": "é" * 65_534}}]},
     "training.jobs[0].env.NOTE", "MAX_ARG_STRLEN"),
    ("arg-over-max-arg-strlen", "training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "args": ["-m", "x" * 131_072]}]},
     "training.jobs[0].args[1]", "an argument 131072 bytes long"),
]


@pytest.mark.parametrize(("path", "value", "key", "expected"), [c[1:] for c in API_LIMITS], ids=[c[0] for c in API_LIMITS])
def test_what_the_apis_refuse_is_refused_first(path, value, key, expected):
    errors = refused(mutate(raw_config("dev"), path, value))
    assert any(e.startswith(f"{PROJECT}:{key}") and expected in e for e in errors), errors


def test_the_longest_exec_strings_linux_takes_pass():
    """131071 bytes of UTF-8 (NAME=value for an env var), the NUL making MAX_ARG_STRLEN = 131072."""
    job = {**JOB, "env": {"NCCL_DEBUG": "A" * 131_060}, "args": ["-m", "x" * 131_071]}
    (loaded,) = load_stack_config(with_jobs(raw_config("dev"), job), project=PROJECT, stack="dev").training.jobs
    assert len(f"NCCL_DEBUG={loaded.env['NCCL_DEBUG']}") == 131_071 and len(loaded.args[1]) == 131_071


def test_an_az_id_outside_the_network_stops_before_any_resource_exists(capfd, tmp_path):
    """Which zone an AZ ID is, only the account knows: the program asks before creating anything
    (here the offline plan's stand-in account, where use1-az1 is us-east-1c)."""
    pools = json.dumps(dev_pools(availabilityZones=["use1-az1"]))
    err = plan_error(capfd, "--stack", "dev", "--set", f"nodePools={pools}", "--out", str(tmp_path / "out"))
    assert f"{PROJECT}:nodePools[1].availabilityZones: AZ ID use1-az1 is us-east-1c" in err, err
    assert not (tmp_path / "out").exists()


# --- 7. the command-line tools --------------------------------------------------------------------------

def plan_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "plan.py"), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_a_bad_plan_day_is_a_clean_error(capfd, monkeypatch):
    monkeypatch.setenv("PLAN_TODAY", "tomorrow")
    err = plan_error(capfd, "--stack", "dev")
    assert "PLAN_TODAY: 'tomorrow' is not a date" in err


def test_plan_cli_bad_arguments_exit_2_in_one_line():
    """Through a real process: the exit status and stderr a user sees."""
    for args in (["--stack", "x" * 5000], ["--stack", "dev", "--set", "region"], ["--stack"], ["--stak", "dev"]):
        result = plan_cli(*args)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr) < 1000


def plan_error(capfd, *args: str) -> str:
    try:
        code = plan_main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("make", ["directory", "binary", "fifo", "missing", "huge", "unreadable"])
def test_plan_stack_file_that_is_no_yaml_file(tmp_path, capfd, make):
    path = tmp_path / "stack.yaml"
    if make == "directory":
        path.mkdir()
    elif make == "unreadable":  # a "regular file" whose read fails with EIO (was an OSError traceback)
        path.symlink_to("/proc/self/mem")
    elif make == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif make == "fifo":
        import os
        os.mkfifo(path)
    elif make == "huge":
        path.write_bytes(b"config: {}\n" + b"#" * (1024 * 1024 + 1))
    err = plan_error(capfd, "--stack", "dev", "--stack-file", str(path), "--out", str(tmp_path / "out"))
    assert str(path) in err and not (tmp_path / "out").exists(), err


@pytest.mark.parametrize(("args", "expected"), [
    (["--stack", "dev", "--set", "region"], "--set expects KEY=VALUE"),
    (["--stack", "dev", "--set", "=x"], "--set expects KEY=VALUE"),
    (["--stack", "dev", "--set", "fabric={bad json"], "not valid JSON"),
    (["--stack", "dev", "--set", "region=a", "--set", "region=b"], "twice"),
    (["--all", "--stack", "dev"], "--all plans every stack"),
    (["--stack", "dev", "--stack", "dev"], "named twice"),
    (["--stack", "dev\nprod"], "not a Pulumi stack name"),
    (["--stack", "../../etc/passwd"], "not a Pulumi stack name"),
])
def test_plan_bad_arguments(capfd, args, expected):
    err = plan_error(capfd, *args)
    assert expected in err and len(err.splitlines()) == 1, err


def test_plan_unreadable_stack_file_through_a_real_process():
    result = plan_cli("--stack", "dev", "--stack-file", "/proc/self/mem", "--out", "/nonexistent/out")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "/proc/self/mem: cannot be read (Input/output error)" in result.stderr, result.stderr


@pytest.mark.parametrize(("text", "expected"), [
    ("name: [\n", "line 2"),
    ("- a\n", "must be a mapping with `name:`"),
    ("name: x\nstackConfigDir: 5\n", "`stackConfigDir` must be a directory name"),
])
def test_plan_broken_project_file(tmp_path, capfd, text, expected):
    (tmp_path / "Pulumi.yaml").write_text(text)
    for selection in (["--all"], ["--stack", "dev"]):
        err = plan_error(capfd, "--project", str(tmp_path), *selection, "--build-dir", str(tmp_path / "build"))
        assert f"{tmp_path}/Pulumi.yaml: " in err and expected in err, err
    assert not (tmp_path / "build").exists()


@pytest.mark.parametrize("flag", ["--set", "--secret"])
def test_plan_one_key_in_two_spellings_on_the_command_line(capfd, flag):
    err = plan_error(capfd, "--stack", "dev", flag, "region=us-east-2", flag, "gpu-training:region=us-east-1")
    assert f'  - {flag}: gpu-training:region is set twice, as "region" and "gpu-training:region"' in err, err


def test_plan_never_replaces_what_is_not_a_plan(tmp_path, capfd):
    not_a_plan = tmp_path / "notes"
    not_a_plan.mkdir()
    (not_a_plan / "keep.txt").write_text("mine")
    a_file = tmp_path / "file"
    a_file.write_text("mine")
    for out in (not_a_plan, a_file):
        err = plan_error(capfd, "--stack", "team-vision-prod", "--out", str(out))
        assert "is not a plan directory" in err
    assert (not_a_plan / "keep.txt").read_text() == "mine" and a_file.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "notes"], "no partial plan left behind"


def load_script(name: str) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), str(ROOT / "scripts" / name))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def new_team_stack():
    return load_script("new-team-stack")


def new_team_error(new_team_stack, capsys, *args: str) -> str:
    try:
        code = new_team_stack.main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("team", "extra", "expected"), [
    ("t" * 21, [], "(21 characters) must be"),
    ("x" * 300, [], "(300 characters) must be lowercase letters, digits and '-' (starting and ending with a letter or "
     "digit), at most 20"),
    ("vision\nprod", [], "lowercase letters"),
    ("a/../b", [], "lowercase letters"),
    ("Vision", [], "lowercase letters"),
    ("vision", ["--cost-center", ""], "AWS tag value"),
    ("vision", ["--cost-center", "a\nb"], "AWS tag value"),
    ("vision", ["--cost-center", "ml-plätform"], "then ASCII letters, digits"),
])
def test_new_team_stack_bad_arguments_write_nothing(new_team_stack, capsys, tmp_path, team, extra, expected):
    err = new_team_error(new_team_stack, capsys, team, "dev", "--out-dir", str(tmp_path), *extra)
    assert expected in err and len(err.splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == [], "nothing may be written, not even a directory"


def test_new_team_stack_needs_an_existing_out_dir(new_team_stack, capsys, tmp_path):
    err = new_team_error(new_team_stack, capsys, "vision", "dev", "--out-dir", str(tmp_path / "a" / "b"))
    assert "not an existing directory" in err and not (tmp_path / "a").exists()


def test_new_team_stack_quotes_a_cost_center_with_colons(new_team_stack, capsys, tmp_path):
    """`: ` once broke the YAML the template wrote; the value is now written as one quoted scalar."""
    assert "AWS tag value" in new_team_error(new_team_stack, capsys, "vision", "dev", "--out-dir", str(tmp_path),
                                             "--cost-center", "ml: research #1")  # '#' is no tag character
    assert new_team_stack.main(["nlp", "dev", "--out-dir", str(tmp_path), "--cost-center", "ml: research"]) == 0
    _, raw, _ = stack_config("team-nlp-dev", tmp_path / "Pulumi.team-nlp-dev.yaml")
    assert decode_raw_config(raw)[f"{PROJECT}:costCenter"] == "ml: research"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Pulumi.team-nlp-dev.yaml"]


def test_new_team_stack_on_a_platform_without_gpu_pools(new_team_stack, capsys, tmp_path, monkeypatch):
    real = new_team_stack.load_stack_config

    def without_gpu_pools(raw, **kwargs):
        config = real(raw, **kwargs)
        return config if kwargs["stack"].startswith("team-") else \
            __import__("dataclasses").replace(config, node_pools=tuple(p for p in config.node_pools if not p.gpu))

    monkeypatch.setattr(new_team_stack, "load_stack_config", without_gpu_pools)
    err = new_team_error(new_team_stack, capsys, "vision", "dev", "--out-dir", str(tmp_path))
    assert "has no GPU pool" in err and list(tmp_path.iterdir()) == []


def test_new_team_stack_names_a_broken_platform_stack_file(new_team_stack, capsys, tmp_path, monkeypatch):
    """`nodePools` renamed in stacks/Pulumi.prod.yaml: the error named the key but not the file."""
    broken = tmp_path / "Pulumi.prod.yaml"
    broken.write_text((ROOT / "stacks" / "Pulumi.prod.yaml").read_text().replace("gpu-training:nodePools:",
                                                                                  "gpu-training:nodePool:"))
    real = new_team_stack.stack_config
    monkeypatch.setattr(new_team_stack, "stack_config",
                        lambda stack, path=None, **kwargs: real(stack, path or (broken if stack == "prod" else None), **kwargs))
    out = tmp_path / "out"
    out.mkdir()
    err = new_team_error(new_team_stack, capsys, "vision", "prod", "--out-dir", str(out))
    assert "  - platform stack 'prod' (stacks/Pulumi.prod.yaml): gpu-training:nodePools: required key is missing" in err, err
    assert all(line.startswith("  - platform stack 'prod' (stacks/Pulumi.prod.yaml): ")
               for line in err.splitlines()[1:]), err
    assert list(out.iterdir()) == []


def test_new_team_stack_through_a_real_process(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "new-team-stack"), "a/../b", "dev",
                             "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def cost_cli():
    from offline.cost import main
    return main


@pytest.mark.parametrize(("make", "expected"), [
    ("missing", "cannot be read (No such file or directory)"),
    ("directory", "cannot be read (Is a directory)"),
    ("not-json", "is not the JSON scripts/plan.py writes"),
    ("not-utf8", "is not the JSON scripts/plan.py writes"),
    ("not-a-list", "is not a plan's list of resources"),
    ("deep", "is not the JSON scripts/plan.py writes"),
])
def test_cost_plan_dir_without_a_plan(tmp_path, capsys, cost_cli, make, expected):
    """`cost.py --plan-dir` read resources.json with no check: a traceback for each of these."""
    resources = tmp_path / "resources.json"
    contents = {"not-json": b"{bad", "not-utf8": b"\xff\xfe", "not-a-list": b'{"a": 1}', "deep": b"[" * 100_000}
    if make == "directory":
        resources.mkdir()
    elif make in contents:
        resources.write_bytes(contents[make])
    assert cost_cli(["--stack", "dev", "--plan-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cost.py: error: --plan-dir {resources}: {expected}") and "Fix:" in err, err
    assert len(err.splitlines()) == 1


# --- 8. size: however broken the input, the report stays small ------------------------------------------

def test_an_alias_bomb_is_refused_in_one_short_line(tmp_path):
    bomb = "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else 'x, x, x, x, x, x, x, x, x'}]\n"
                   for i in range(9))
    errors = refused_file(tmp_path, DEV_STACK_TEXT + "  gpu-training:bomb:\n" + bomb.replace("  l", "    l"))
    assert len(errors) == 1 and "expands to more than" in errors[0] and len(errors[0]) < 300, errors


def test_ten_thousand_bad_ports_make_a_bounded_report():
    raw = mutate(raw_config("dev"), "fabric.rendezvousPorts", list(range(10_000)))
    error = refusal(raw)
    assert len(checked(error)) > 1000 and "more (fix the ones above" in str(error)


def test_a_huge_value_is_cut_in_the_message():
    errors = refused(mutate(raw_config("dev"), "costCenter", "ml" * 50_000))
    one(errors, "costCenter", "...")
    assert len(errors[0]) < 1000


def test_a_huge_key_from_the_engine_is_cut_in_the_message():
    """`pulumi up` hands over keys our loader never saw: the report is bounded all the same."""
    error = refusal(mutate(raw_config("dev"), "network." + "k" * 50_000, 1))
    checked(error)
    assert all(len(line) < 1100 for line in str(error).splitlines())


def test_deep_nesting_and_big_files_are_refused(tmp_path):
    assert "nests deeper" in refused_file(tmp_path, "config:\n  a: " + "[" * 5000 + "]" * 5000 + "\n")[0]
    assert "KiB" in refused_file(tmp_path, "config: {}\n" + "#" * (2 * 1024 * 1024))[0]
    assert "digits" in refused_file(tmp_path, "config:\n  gpu-training:x: " + "9" * 5000 + "\n")[0]


def test_deep_json_from_the_engine_or_set_is_not_a_traceback(capfd):
    """The engine hands structured values over as JSON text: absurd nesting stays a plain string."""
    raw = dict(raw_config("dev"), **{f"{PROJECT}:fabric": "[" * 100_000})
    one(refused(decode_raw_config(raw)), "fabric", "must be a mapping")
    assert "nests deeper" in plan_error(capfd, "--stack", "dev", "--set", "fabric=" + "[" * 100_000)


def test_the_json_of_an_error_report_is_what_the_cli_prints(tmp_path):
    """One end-to-end run of the worst file above through plan.py: exit 2, bounded, one line per error."""
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(DEV_STACK_TEXT.replace("rendezvousPorts: [29400]", f"rendezvousPorts: {json.dumps(list(range(3000)))}"))
    result = plan_cli("--stack", "dev", "--stack-file", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and len(result.stderr.encode()) <= MAX_REPORT_BYTES
    assert all(line.startswith(("stack dev:", "  - gpu-training:", "  ... and")) for line in result.stderr.splitlines())
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("line", "replacement", "key"), [
    # each was planned with exit 0: the default (30 days, 200 GiB) or no file system at all
    ("    checkpointRetentionDays: 14", "    checkpointRetentionDays:", "storage.checkpointRetentionDays"),
    ("    checkpointRetentionDays: 14", "    checkpointRetentionDays: ~", "storage.checkpointRetentionDays"),
    ("  gpu-training:costCenter: ml-platform-dev", "  gpu-training:costCenter:", "costCenter"),
])
def test_an_empty_value_is_refused_not_read_as_the_default(capfd, tmp_path, line, replacement, key):
    assert line in DEV_STACK_TEXT
    (tmp_path / "Pulumi.dev.yaml").write_text(DEV_STACK_TEXT.replace(line, replacement))
    err = plan_error(capfd, "--stack", "dev", "--stack-file", str(tmp_path / "Pulumi.dev.yaml"), "--out", str(tmp_path / "out"))
    (message,) = [m for m in err.splitlines() if f"{PROJECT}:{key}: " in m]
    assert "is empty (YAML null)" in message and "Fix: give it a value, or remove the key" in message, err
    assert not (tmp_path / "out").exists()


def test_an_empty_section_in_prod_is_refused(tmp_path):
    """`lustre:` with nothing below it planned prod without its Lustre file system."""
    prod = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    emptied, found = re.subn(r"^    lustre:.*\n(?:      .*\n)+", "    lustre:\n", prod, flags=re.M)
    assert found == 1
    errors = refused_file(tmp_path, emptied, stack="prod")
    assert any(e.startswith(f"{PROJECT}:storage.lustre: is empty") for e in errors), errors


@pytest.mark.parametrize(("value", "says"), [
    ("0.10", 'is the YAML decimal 0.1, which reaches the program as the text "0.1"'),
    ("True", 'is the YAML boolean true, which reaches the program as the text "true"'),
])
def test_a_top_level_text_key_keeps_its_written_form(tmp_path, value, says):
    """A top-level value reaches the program as text: a decimal or boolean changes on the way,
    and the cost-center tag would read "0.1" or "true"."""
    errors = refused_file(tmp_path, DEV_STACK_TEXT.replace("  gpu-training:costCenter: ml-platform-dev",
                                                           f"  gpu-training:costCenter: {value}"))
    assert len(errors) == 1 and errors[0].startswith(f"{tmp_path}/Pulumi.dev.yaml: {PROJECT}:costCenter: {says}"), errors


@pytest.mark.parametrize("value", ["482913375501284467120934", "0755123", "0x9f3a77c2e1d04b5a", "On", "2024-05-05T10:00:00Z"])
def test_a_plain_secret_the_yaml_reader_stops_at_is_not_shown(tmp_path, value):
    """The reader stops at an ambiguous scalar before the secrets check runs: it must not quote a
    secret, nor tell the user to quote it and commit it in plain text."""
    text = DEV_STACK_TEXT.replace("    hf-token: {secure: placeholder-set-with-pulumi-config-set-secret}", f"    hf-token: {value}")
    (error,) = refused_file(tmp_path, text)
    assert "a value of the secrets map (value not shown) is ambiguous" in error and value not in error, error
    assert "pulumi config set --path --secret" in error and "quote it" not in error, error


@pytest.mark.parametrize(("job_key", "suggested"), [
    ("memoryGib", "memoryGiB"), ("checkpointGib", "checkpointGiB"),
    ("checkpointIntervalSecs", "checkpointIntervalSeconds"), ("ttlSecondsAfterFinish", "ttlSecondsAfterFinished"),
])
def test_a_misspelt_optional_key_gets_the_right_suggestion(job_key, suggested):
    """Keys looked up before being read were missing from the suggestions: `memoryGib` got
    'sharedMemoryGiB', `checkpointGib` 'checkpointWriters'."""
    errors = refused(with_jobs(raw_config("dev"), {**JOB, job_key: 3}))
    (message,) = [e for e in errors if e.startswith(f"{PROJECT}:training.jobs[0].{job_key}: unknown key")]
    assert message.endswith(f"did you mean '{suggested}'?"), message


def test_an_empty_required_key_is_reported_once(tmp_path):
    prod = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    emptied, found = re.subn(r"^(        checkpointGiB:).*$", r"\1", prod, count=1, flags=re.M)
    assert found == 1
    errors = refused_file(tmp_path, emptied, stack="prod")
    assert [e for e in errors if "checkpointGiB" in e] == [
        f"{PROJECT}:training.jobs[0].checkpointGiB: is empty (YAML null). Fix: give it a value, or remove the key to use "
        "its default"], errors


@pytest.mark.parametrize("key", ["regi\u200bon", "region ", "r\u0435gion"], ids=["zero-width-space", "trailing-space", "cyrillic-e"])
def test_a_key_that_only_looks_known_is_shown_escaped(key):
    raw = {(f"{PROJECT}:{key}" if k == f"{PROJECT}:region" else k): v for k, v in raw_config("dev").items()}
    errors = refused(raw)
    (message,) = [e for e in errors if "unknown key" in e]
    assert f'(spelled {json.dumps(key)}: it holds invisible, space or non-ASCII characters)' in message, message
    assert message.endswith("did you mean 'region'?"), message


def test_a_job_secret_of_lookalike_letters_is_not_a_secret_name():
    """The fix told the user to declare `secrets.wandb-api-key` spelled with a Cyrillic a: itself an invalid name."""
    errors = refused(with_jobs(raw_config("dev"), {**JOB, "secrets": ["w\u0430ndb-api-key"]}))
    (message,) = [e for e in errors if e.startswith(f"{PROJECT}:training.jobs[0].secrets: ")]
    assert "is not a secret name" in message and "pulumi config set" not in message, message


@pytest.mark.parametrize(("flag", "item"), [("--set", "network.vpcCidr=10.0.0.0/16"), ("--secret", "secrets.hf-token=abc"),
                                            ("--set", "nodePools[0].name=x")])
def test_set_takes_whole_keys_not_paths(capfd, tmp_path, flag, item):
    """`--set network.vpcCidr=...` (the style of `pulumi config set --path`) was an unknown key."""
    err = plan_error(capfd, "--stack", "dev", flag, item, "--out", str(tmp_path / "out"))
    assert f"{flag}: {PROJECT}:{item.split('=')[0]}: is a path" in err and "pass the whole value" in err, err
    assert "abc" not in err


@pytest.mark.parametrize(("path", "value", "key", "says"), [
    # each planned with exit 0, or ended in a traceback
    ("cluster.kubernetesVersion", "", "cluster.kubernetesVersion", "is not a Kubernetes minor offered here"),
    ("cluster.publicAccessCidrs", [3325256704], "cluster.publicAccessCidrs[0]", "must be a CIDR written as text"),
    ("network.monitoringIngress", {"cidrs": [174326784], "ports": [9400]}, "network.monitoringIngress.cidrs[0]",
     "must be a CIDR written as text"),
    ("training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "args": ["-m", "a\0b"]}]}, "training.jobs[0].args[1]",
     "holds a NUL character"),
    ("training", {"gpuQuota": {"gpu-spot": 4}, "jobs": [{**JOB, "env": {"NCCL_DEBUG": "IN\0FO"}}]},
     "training.jobs[0].env.NCCL_DEBUG", "holds a NUL character"),
    ("storage.lustre", {"availabilityZone": ""}, "storage.lustre.availabilityZone", "is empty"),
])
def test_values_that_passed_or_crashed_are_refused(path, value, key, says):
    errors = refused(mutate(raw_config("dev"), path, value))
    assert any(e.startswith(f"{PROJECT}:{key}: {says}") for e in errors), errors


@pytest.mark.parametrize(("written", "shown"), [("{a: 1}", "{'a': 1}"), ("[x]", "['x']")], ids=["mapping", "list"])
def test_a_pool_name_that_is_no_string_is_a_configuration_error(capfd, tmp_path, written, shown):
    """`name: {a: 1}` or `name: [x]` on a pool ended in `TypeError: unhashable type`. It is one
    message with the key, the value and the fix, beside the file's other problems; the job that
    names the pool is not judged again (its pool may be the one whose name went wrong)."""
    line = "    - name: gpu-spot                 # 1 GPU per node, scales to zero when no job waits"
    size = "size: {min: 0, desired: 0, max: 4}"
    assert DEV_STACK_TEXT.count(line) == 1 and DEV_STACK_TEXT.count(size) == 1
    text = DEV_STACK_TEXT.replace(line, f"    - name: {written}").replace(size, "size: {min: 0, desired: 0, max: 0}")
    assert sorted(refused_file(tmp_path, text)) == [
        f"{PROJECT}:nodePools[1].name: must be a string (got {shown}). "
        "Fix: use lowercase letters, digits and '-', at most 30 characters",
        f"{PROJECT}:nodePools[1].size.max: must be at least 1 (got 0). Fix: choose a value at least 1",
    ]
    # The same through the program as `make plan` runs it: exit 2, both problems, no traceback.
    err = plan_error(capfd, "--stack", "dev", "--stack-file", str(tmp_path / "Pulumi.dev.yaml"), "--out", str(tmp_path / "out"))
    assert "stack dev: 2 configuration errors; nothing was created:" in err, err
    assert f"  - {PROJECT}:nodePools[1].name: must be a string (got {shown})" in err and "unhashable" not in err, err
    assert not (tmp_path / "out").exists()


def test_an_empty_text_written_in_the_stack_file_is_not_the_default(tmp_path):
    """`iamPermissionsBoundary: ""` planned prod's roles without a boundary (Pulumi.yaml's default "")."""
    prod = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text()
    emptied, found = re.subn(r"^  gpu-training:iamPermissionsBoundary: .*$", '  gpu-training:iamPermissionsBoundary: ""', prod,
                             flags=re.M)
    assert found == 1
    errors = refused_file(tmp_path, emptied, stack="prod")
    assert any(e.endswith(f"{PROJECT}:iamPermissionsBoundary: is empty. Fix: give it a value, or remove the key to use "
                          "its default") for e in errors), errors


def test_an_empty_set_value_is_empty_not_bad_json(capfd, tmp_path):
    err = plan_error(capfd, "--stack", "dev", "--set", "costCenter=", "--out", str(tmp_path / "out"))
    assert f"--set: {PROJECT}:costCenter: is empty" in err and "JSON" not in err, err


@pytest.mark.parametrize(("line", "replacement", "key"), [
    ("        nodes: 2", "        nodes: {secure: AAABBBCCC}", "training.jobs[0].nodes"),
    ("        pool: gpu-spot", "        pool: {secure: AAABBBCCC}", "training.jobs[0].pool"),
])
def test_a_secure_value_on_a_plain_key_is_reported_once(tmp_path, line, replacement, key):
    """A second message judged the placeholder ("must be a whole number"), not the value written."""
    assert line in DEV_STACK_TEXT
    errors = refused_file(tmp_path, DEV_STACK_TEXT.replace(line, replacement, 1))
    assert [e for e in errors if key in e] == [e for e in errors if e.startswith(f"{PROJECT}:{key}: is set as a secret")]
    assert len([e for e in errors if key in e]) == 1, errors


@pytest.mark.parametrize("day", ["2026-13-01", "tomorrow"])
def test_today_that_is_no_date_gets_the_format(capfd, day):
    err = plan_error(capfd, "--stack", "dev", "--today", day)
    assert f"argument --today: '{day}' is not a date. Fix: write it as YYYY-MM-DD" in err, err


def test_the_plan_cli_prints_the_files_problems_and_the_schemas_together(capfd, tmp_path):
    """A date, a 1e3 and a bad value took three runs of `make plan`, one problem each."""
    text = DEV_STACK_TEXT
    for old, new in (("costCenter: ml-platform-dev", "costCenter: 2024-01-01"), ("flowLogRetentionDays: 30", "flowLogRetentionDays: 1e3"),
                     ("size: {min: 0, desired: 0, max: 4}", "size: {min: 0, desired: 0, max: -1}")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    err = plan_error(capfd, "--stack", "dev", "--stack-file", str(path), "--out", str(tmp_path / "out"))
    lines = err.splitlines()
    assert lines[0] == "stack dev: 3 configuration errors; nothing was created:", err
    assert lines[1].startswith(f"  - {path}: line 10, column 28: {PROJECT}:costCenter: ") and lines[1].endswith('Fix: quote it: "2024-01-01"')
    assert lines[2].startswith(f"  - {path}: line 19, column 27: {PROJECT}:network.flowLogRetentionDays: ")
    assert lines[2].endswith("Fix: write it as a plain decimal number: 1000"), lines[2]
    assert lines[3] == f"  - {PROJECT}:nodePools[1].size.max: must be at least 1 (got -1). Fix: choose a value at least 1"
    assert len(lines) == 4 and not (tmp_path / "out").exists()


def test_a_hyperparameters_file_reports_each_of_its_problems(repo_scratch):
    (repo_scratch / "two.yaml").write_bytes(b"lr: 1e-3\nwarmup: yes\n")
    errors = [e for e in hyperparameters_errors(f"build/{repo_scratch.name}/two.yaml") if "hyperparameters" in e]
    assert [e.split("is not usable: ")[1].split(": ")[1] for e in errors] == ["line 1, column 5", "line 2, column 9"], errors
