"""Audit trail and encryption at rest of the logs: every log group under the environment's logs
key with a stated retention, S3 server access logs of both data buckets into their own bucket,
and every KMS key with an explicit policy and an alias that names it."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase

import pytest
from plan_queries import config_of, inputs_by_name
from stack_configs import DELETE, MANIFEST_STACKS, PLATFORM_STACKS, PROJECT, mutate, raw_config, stacks_in_us_east_1

from components.common.kms import logs_key_policy
from components.config import ConfigError, load_stack_config
from components.config.network import LOG_RETENTION_DAYS

ACCOUNT = "123456789012"
REGION = "us-east-1"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
BUCKET = "aws:s3/bucket:Bucket"
KEY = "aws:kms/key:Key"
ALIAS = "aws:kms/alias:Alias"


def statements(document: str) -> list[dict]:
    return json.loads(document)["Statement"]


def log_group_arn(name: str) -> str:
    return f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}"


# --- log groups -----------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_every_log_group_is_encrypted_with_the_environments_logs_key(stack, plan_of):
    plan = plan_of(stack)
    groups = inputs_by_name(plan, LOG_GROUP)
    assert {g["name"] for g in groups.values()} == {
        f"/aws/vpc/gpu-training-{stack}/flow-logs", f"/aws/eks/gpu-training-{stack}/cluster",
        *(f"/aws/containerinsights/gpu-training-{stack}/{kind}" for kind in ("application", "dataplane", "host", "performance")),
    }
    keys = inputs_by_name(plan, KEY)
    assert all(g["kmsKeyId"].endswith(":key/logs-key") for g in groups.values()), groups
    # The key admits CloudWatch Logs of this region for exactly these groups.
    (service,) = [s for s in statements(keys["logs-key"]["policy"]) if "Service" in s["Principal"]]
    assert service["Principal"] == {"Service": f"logs.{REGION}.amazonaws.com"} and service["Effect"] == "Allow"
    pattern = service["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert all(fnmatchcase(log_group_arn(g["name"]), pattern) for g in groups.values())


@pytest.mark.parametrize(("name", "admitted"), [
    ("/aws/eks/gpu-training-prod/cluster", True),
    ("/aws/vpc/gpu-training-prod/flow-logs", True),
    ("/aws/containerinsights/gpu-training-prod/host", True),
    ("/aws/eks/gpu-training-dev/cluster", False),            # another environment
    ("/aws/eks/gpu-training-prod-vision/cluster", False),     # a team's prefix
    ("/aws/lambda/some-function", False),
])
def test_the_logs_key_admits_only_this_environments_groups(name, admitted):
    (service,) = [s for s in statements(logs_key_policy(ACCOUNT, "aws", region=REGION, name_prefix="gpu-training-prod"))
                  if "Service" in s["Principal"]]
    pattern = service["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert fnmatchcase(log_group_arn(name), pattern) is admitted
    assert not fnmatchcase(f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:{name}", pattern)
    assert set(service["Action"]) == {"kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"}


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_each_log_group_keeps_its_chosen_retention(stack, plan_of):
    config = config_of(stack)
    retention = {g["name"]: g["retentionInDays"] for g in inputs_by_name(plan_of(stack), LOG_GROUP).values()}
    assert set(retention.values()) <= set(LOG_RETENTION_DAYS)
    prefix = f"gpu-training-{stack}"
    assert retention[f"/aws/eks/{prefix}/cluster"] == config.cluster.log_retention_days
    assert retention[f"/aws/vpc/{prefix}/flow-logs"] == config.network.flow_log_retention_days
    insights = config.observability.log_group_retention_days
    assert {kind: retention[f"/aws/containerinsights/{prefix}/{kind}"] for kind in insights} == insights
    assert insights["performance"] <= 30
    if stack == "prod":
        # Audit-relevant: the API audit log, and node logs with authpriv (/var/log/secure).
        for name in (f"/aws/eks/{prefix}/cluster", f"/aws/containerinsights/{prefix}/host",
                     f"/aws/containerinsights/{prefix}/dataplane"):
            assert retention[name] >= 365, name


AUDIT_RETENTION_CASES = [
    ("control-plane", "cluster.logRetentionDays", 90, "audit log must stay at least 365 days"),
    ("node-logs", "observability.nodeLogRetentionDays", 180, "prod keeps them at least 365 days"),
    ("access-logs", "storage.accessLogRetentionDays", 90, "prod keeps them at least 365 days"),
]


@pytest.mark.parametrize(("path", "value", "expected"), [c[1:] for c in AUDIT_RETENTION_CASES],
                         ids=[c[0] for c in AUDIT_RETENTION_CASES])
def test_prod_keeps_audit_logs_a_year(path, value, expected):
    section, key = path.split(".")
    raw = raw_config("prod")
    raw = mutate(raw, section, {**raw[f"{PROJECT}:{section}"], key: value})
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="prod")
    assert any(e.startswith(f"{PROJECT}:{path}") and expected in e for e in raised.value.errors), raised.value.errors
    # Non-prod may choose less.
    staging = raw_config("staging")
    staging = mutate(staging, section, {**staging.get(f"{PROJECT}:{section}", {}), key: value})
    assert load_stack_config(staging, project=PROJECT, stack="staging")


def test_node_log_retention_must_be_a_cloudwatch_period():
    raw = mutate(raw_config("dev"), "observability.nodeLogRetentionDays", 100)
    with pytest.raises(ConfigError) as raised:
        load_stack_config(raw, project=PROJECT, stack="dev")
    assert any("nodeLogRetentionDays: is not a CloudWatch Logs retention period" in e for e in raised.value.errors)


# --- S3 server access logs ------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_both_data_buckets_log_access_into_the_access_log_bucket(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    buckets = inputs_by_name(plan, BUCKET)
    (log_name,) = [name for name, b in buckets.items() if b["tags"]["purpose"] == "access-logs"]
    log_bucket = buckets[log_name]["bucket"]
    assert log_bucket == f"gpu-training-{stack}-access-logs-{ACCOUNT}"
    data = {name: b for name, b in buckets.items() if name != log_name}
    assert {b["tags"]["purpose"] for b in data.values()} == {"datasets", "artifacts"}
    logging = {r["bucket"]: r for r in inputs_by_name(plan, "aws:s3/bucketLogging:BucketLogging").values()}
    assert set(logging) == {f"{name}-id" for name in data}, "every data bucket, and not the log bucket itself"
    for name, bucket in data.items():
        target = logging[f"{name}-id"]
        assert target["targetBucket"] == f"{log_name}-id"
        assert target["targetPrefix"] == f"{bucket['tags']['purpose']}/"
        assert target["targetObjectKeyFormat"] == {"partitionedPrefix": {"partitionDateSource": "EventTime"}}

    def control(type_token):
        (found,) = [r for r in inputs_by_name(plan, type_token).values() if r["bucket"] == f"{log_name}-id"]
        return found

    # SSE-S3: log delivery cannot write into an SSE-KMS bucket.
    (rule,) = control("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}
    assert control("aws:s3/bucketOwnershipControls:BucketOwnershipControls")["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
    block = control("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    policy = {s["Sid"]: s for s in statements(control("aws:s3/bucketPolicy:BucketPolicy")["policy"])}
    assert {"DenyInsecureTransport", "DenyOutdatedTls"} <= set(policy)
    delivery = policy["S3ServerAccessLogDelivery"]
    assert delivery["Principal"] == {"Service": "logging.s3.amazonaws.com"} and delivery["Action"] == "s3:PutObject"
    assert delivery["Resource"] == [f"arn:aws:s3:::{log_bucket}/{b['tags']['purpose']}/*" for b in
                                    sorted(data.values(), key=lambda b: b["tags"]["purpose"] != "datasets")]
    assert delivery["Condition"] == {
        "ArnLike": {"aws:SourceArn": [f"arn:aws:s3:::gpu-training-{stack}-{p}-{ACCOUNT}" for p in ("datasets", "artifacts")]},
        "StringEquals": {"aws:SourceAccount": ACCOUNT},
    }
    rules = {r["id"]: r for r in control("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")["rules"]}
    assert rules["expire-access-logs"]["expiration"]["days"] == config.storage.access_log_retention_days
    assert {"expire-noncurrent-versions", "abort-incomplete-multipart-uploads"} <= set(rules)


def test_an_existing_datasets_bucket_is_not_ours_to_log(plan_of):
    from offline.plan import synthesize
    plan = synthesize("dev", overrides={"storage": {"datasetsBucket": "acme-dev-datasets"}})
    (logging,) = inputs_by_name(plan, "aws:s3/bucketLogging:BucketLogging").values()
    assert logging["targetPrefix"] == "artifacts/"
    (policy,) = [p for n, p in inputs_by_name(plan, "aws:s3/bucketPolicy:BucketPolicy").items() if "access-logs" in n]
    delivery = next(s for s in statements(policy["policy"]) if s.get("Sid") == "S3ServerAccessLogDelivery")
    assert delivery["Condition"]["ArnLike"]["aws:SourceArn"] == [f"arn:aws:s3:::gpu-training-dev-artifacts-{ACCOUNT}"]


# --- KMS keys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_key_has_an_explicit_policy_and_an_alias_that_names_it(stack, plan_of):
    plan = plan_of(stack)
    keys, aliases = inputs_by_name(plan, KEY), inputs_by_name(plan, ALIAS)
    assert keys, "every stack encrypts something"
    for name, key in keys.items():
        root = next(s for s in statements(key["policy"]) if s["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"})
        assert root["Effect"] == "Allow" and key["enableKeyRotation"] is True, name
        # customer_key names the alias like the key; the alias's target is the key's id.
        assert name in aliases, f"key {name} has no alias"
    assert set(aliases) == set(keys)
    targets = [a.get("targetKeyId") for a in aliases.values()]
    assert all(isinstance(t, str) and re.fullmatch(r"[0-9a-f-]{36}", t) for t in targets), "an alias without a target"
    assert len(set(targets)) == len(targets)
    assert all(a["name"].startswith("alias/gpu-training-") for a in aliases.values())


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_the_cluster_secrets_key_is_made_like_the_others(stack, plan_of):
    plan = plan_of(stack)
    key = inputs_by_name(plan, KEY)["cluster-secrets-key"]
    assert key["deletionWindowInDays"] == 30 and key["enableKeyRotation"] is True
    assert inputs_by_name(plan, ALIAS)["cluster-secrets-key"]["name"] == f"alias/gpu-training-{stack}-eks-secrets"
    (cluster,) = plan.of_type("aws:eks/cluster:Cluster")
    assert cluster["inputs"]["encryptionConfig"]["provider"]["keyArn"].endswith(":key/cluster-secrets-key")


def test_removing_retention_keys_falls_back_to_audit_safe_defaults_in_prod():
    raw = raw_config("prod")
    raw = mutate(raw, "observability.nodeLogRetentionDays", DELETE)
    raw = mutate(raw, "storage.accessLogRetentionDays", DELETE)
    config = load_stack_config(raw, project=PROJECT, stack="prod")
    assert config.observability.node_log_retention_days == 365 and config.storage.access_log_retention_days == 365
