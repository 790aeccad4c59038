"""Config model of storage, registry and secrets: valid stacks parse; bad input names its key;
secret values never appear in an error message or a repr."""

import pytest
from stack_configs import DELETE, PLATFORM_STACKS, PROJECT, environment_of, mutate, raw_config

from components.config import ConfigError, load_stack_config
from components.config.secrets import env_var_name
from components.config.storage import bucket_name, names_prod_data
from components.identity import policies

SECRETS_KEY = f"{PROJECT}:secrets"
KNOWN_SECRET = "s3cr3t-value-that-must-never-be-printed"


def load(raw, stack="dev", **kwargs):
    return load_stack_config(raw, project=PROJECT, stack=stack, **kwargs)


def errors_of(raw, stack="dev", **kwargs) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load(raw, stack, **kwargs)
    return raised.value.errors


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_stack_files_parse(stack):
    config = load(raw_config(stack), stack)
    assert config.secrets.names == ("hf-token", "wandb-api-key")
    assert config.storage.datasets_bucket is None
    assert config.storage.efs_backups is (environment_of(stack) == "prod")
    assert config.registry.keep_images >= 1


def test_prod_keeps_more_than_dev():
    dev, prod = load(raw_config("dev"), "dev"), load(raw_config("prod"), "prod")
    assert prod.storage.checkpoint_retention_days > dev.storage.checkpoint_retention_days
    assert prod.storage.noncurrent_version_retention_days > dev.storage.noncurrent_version_retention_days
    assert prod.registry.keep_images > dev.registry.keep_images


def test_defaults_when_sections_are_left_out():
    raw = raw_config("dev")
    for section in ("storage", "registry", "secrets", "training"):  # training's job names a secret
        raw = mutate(raw, section, DELETE)
    config = load(raw)
    assert (config.storage.checkpoint_retention_days, config.storage.efs_backups, config.registry.keep_images) == (30, False, 30)
    assert config.secrets.entries == ()
    # Without storage.lustre prod's job checkpoints to EFS, too slow for its grace period: drop the job.
    prod = load(mutate(mutate(raw_config("prod"), "storage", DELETE), "training", DELETE), "prod")
    assert prod.storage.efs_backups is True, "prod backs EFS up unless told otherwise (and then refuses)"


# (case id, stack, key path, new value, text the error must contain besides the key)
INVALID = [
    ("checkpoint-days-zero", "dev", "storage.checkpointRetentionDays", 0, "between 1 and 3650"),
    ("checkpoint-days-text", "dev", "storage.checkpointRetentionDays", "30", "whole number"),
    ("noncurrent-days-too-long", "dev", "storage.noncurrentVersionRetentionDays", 5000, "between 1 and 3650"),
    ("checkpoint-versions-kept-weeks", "prod", "storage.checkpointVersionRetentionDays", 30, "between 1 and 7"),
    ("efs-backups-text", "dev", "storage.efsBackups", "yes", "true or false"),
    ("prod-without-backups", "prod", "storage.efsBackups", False, "must be backed up"),
    ("dev-reads-prod-bucket", "dev", "storage.datasetsBucket", "gpu-training-prod-datasets-123456789012", "production data"),
    ("staging-reads-prod-bucket", "staging", "storage.datasetsBucket", "acme-prod", "production data"),
    ("dev-reads-production-bucket", "dev", "storage.datasetsBucket", "ml.production.raw", "production data"),
    ("bucket-uppercase", "dev", "storage.datasetsBucket", "Acme-Data", "not a valid S3 bucket name"),
    ("bucket-too-short", "dev", "storage.datasetsBucket", "ab", "not a valid S3 bucket name"),
    ("bucket-reserved-prefix", "dev", "storage.datasetsBucket", "xn--acme-data", "S3 reserves the prefixes"),
    ("bucket-access-point-alias", "dev", "storage.datasetsBucket", "acme-data-s3alias", "S3 reserves the prefixes"),
    ("bucket-directory-bucket", "dev", "storage.datasetsBucket", "acme-data--x-s3", "S3 reserves the prefixes"),
    ("bucket-ip", "dev", "storage.datasetsBucket", "192.168.1.10", "looks like an IP address"),
    ("bucket-not-text", "dev", "storage.datasetsBucket", 12, "must be a string"),
    ("storage-typo", "dev", "storage.checkpointRetentionDay", 30, "did you mean 'checkpointRetentionDays'"),
    ("keep-images-zero", "dev", "registry.keepImages", 0, "between 1 and 1000"),
    ("registry-typo", "dev", "registry.keepImage", 5, "did you mean 'keepImages'"),
    ("registry-not-mapping", "dev", "registry", [5], "must be a mapping"),
]


@pytest.mark.parametrize(("stack", "path", "value", "expected"), [case[1:] for case in INVALID],
                         ids=[case[0] for case in INVALID])
def test_invalid_config_is_rejected_naming_the_key(stack, path, value, expected):
    errors = errors_of(mutate(raw_config(stack), path, value), stack)
    top, *rest = path.split(".")
    shown_key = f"{PROJECT}:{top}" + "".join(f".{p}" for p in rest)
    matching = [e for e in errors if expected in e]
    assert matching, f"no error mentions {expected!r}: {errors}"
    assert any(e.startswith(shown_key.rsplit(".", 1)[0]) for e in matching), matching
    assert all("Fix:" in e for e in errors)


@pytest.mark.parametrize("bucket", ["acme-dev-datasets", "prodigy-data", "gpu-training-staging-datasets-123456789012",
                                    "reproduction-set"])
def test_non_prod_may_name_a_non_prod_bucket(bucket):
    assert load(mutate(raw_config("dev"), "storage.datasetsBucket", bucket)).storage.datasets_bucket == bucket


def test_prod_may_name_a_prod_bucket():
    config = load(mutate(raw_config("prod"), "storage.datasetsBucket", "acme-prod-datasets"), "prod")
    assert config.storage.datasets_bucket == "acme-prod-datasets"


# (case id, secrets value, text of the error, key it names)
SECRET_CASES = [
    ("declared-without-value", {"wandb-api-key": None}, "declared without a value", "secrets.wandb-api-key"),
    ("empty-value", {"wandb-api-key": ""}, "declared without a value", "secrets.wandb-api-key"),
    ("value-not-text", {"wandb-api-key": {"nested": KNOWN_SECRET}}, "must be a string", "secrets.wandb-api-key"),
    ("list-value", {"wandb-api-key": [KNOWN_SECRET]}, "must be a string", "secrets.wandb-api-key"),
    ("bad-name", {"WANDB_KEY": KNOWN_SECRET}, "not a valid secret name", "secrets.WANDB_KEY"),
    ("name-starting-with-a-digit", {"1-token": KNOWN_SECRET}, "starting with a letter", "secrets.1-token"),
    ("not-a-mapping", KNOWN_SECRET, "must be a mapping", "secrets"),
    ("list-not-mapping", [KNOWN_SECRET], "must be a mapping", "secrets"),
]


@pytest.mark.parametrize(("value", "expected", "key"), [c[1:] for c in SECRET_CASES], ids=[c[0] for c in SECRET_CASES])
def test_secret_errors_name_the_key_never_the_value(value, expected, key):
    errors = errors_of(mutate(raw_config("dev"), "secrets", value))
    matching = [e for e in errors if expected in e]
    assert matching and all(e.startswith(f"{PROJECT}:{key}") and "Fix:" in e for e in matching), errors
    assert not any(KNOWN_SECRET in e for e in errors), "a secret value reached an error message"


def test_other_errors_do_not_print_secret_values():
    raw = mutate(mutate(raw_config("dev"), "secrets", {"wandb-api-key": KNOWN_SECRET}), "storage.efsBackups", "nope")
    errors = errors_of(raw)
    assert errors and not any(KNOWN_SECRET in e for e in errors)


def test_plain_text_secrets_are_rejected_when_the_engine_says_so():
    raw = mutate(raw_config("dev"), "secrets", {"wandb-api-key": KNOWN_SECRET})
    errors = errors_of(raw, secret_keys=set())
    assert any(e.startswith(SECRETS_KEY) and "plain text" in e for e in errors)
    assert not any(KNOWN_SECRET in e for e in errors)
    assert load(raw, secret_keys={SECRETS_KEY}).secrets.names == ("wandb-api-key",)


def test_secret_values_are_secret_outputs_and_hidden_from_repr():
    config = load(mutate(raw_config("dev"), "secrets", {"wandb-api-key": KNOWN_SECRET}))
    (entry,) = config.secrets.entries
    assert KNOWN_SECRET not in repr(config)
    assert entry.env_var == "WANDB_API_KEY"
    assert type(entry.value).__name__ == "Output"


@pytest.mark.parametrize(("name", "is_prod"), [
    ("gpu-training-prod-datasets-123456789012", True), ("acme-prod", True), ("prod-data", True),
    ("ml.production.raw", True), ("PROD-data", True), ("prodigy-data", False), ("gpu-training-dev-x", False),
    ("reproduction", False),
])
def test_names_prod_data(name, is_prod):
    assert names_prod_data(name) is is_prod


def test_prod_bucket_patterns_agree_with_the_config_rule():
    """IAM's deny patterns and the config check must call the same names production data."""
    from fnmatch import fnmatchcase
    patterns = policies.prod_bucket_patterns("aws")
    for name in ("gpu-training-prod-datasets-123456789012", "acme-prod", "prod-data", "ml.production.raw", "prod",
                 "prodigy-data", "gpu-training-dev-datasets-123456789012", "reproduction"):
        denied = any(fnmatchcase(policies.bucket_arn(name, "aws"), p) for p in patterns)
        assert denied is names_prod_data(name), name


def test_bucket_names_are_unique_per_stack_and_valid():
    # S3 names are global and a bucket lives in one region: each platform stack (an environment's
    # other regions too, prod-usw2 and prod-use2) names its own, from its name prefix's qualifier
    names = {bucket_name(PROJECT, stack, purpose, "123456789012") for stack in PLATFORM_STACKS for purpose in ("datasets", "artifacts")}
    assert len(names) == 2 * len(PLATFORM_STACKS) == 10 and all(len(n) <= 63 for n in names)
    with pytest.raises(ValueError, match="not a valid S3 bucket name"):
        bucket_name("Project", "dev", "datasets", "123456789012")


def test_env_var_names():
    assert env_var_name("wandb-api-key") == "WANDB_API_KEY" and env_var_name("hf-token") == "HF_TOKEN"
