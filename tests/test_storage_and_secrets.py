"""Storage, registry, secrets and workload identity of every synthesised platform stack."""

from __future__ import annotations

import json
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import yaml
from crd_schemas import validate_custom_resource
from plan_queries import config_of, inputs_by_name
from stack_configs import PLATFORM_STACKS, ROOT, environment_of, stacks_in_us_east_1

from components.data import training_data
from components.facts.eks_versions import ADDON_VERSIONS
from components.identity.policies import bucket_arn
from components.secrets.sync import ESO_CHART_VERSION
from offline.plan import REDACTED, synthesize, write_plan

ACCOUNT = "123456789012"
BUCKET = "aws:s3/bucket:Bucket"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


def data_buckets(plan) -> dict[str, dict]:
    """The buckets that hold data (not the access-log bucket: tests/test_audit_logging.py)."""
    return {name: b for name, b in inputs_by_name(plan, BUCKET).items() if b["tags"]["purpose"] != "access-logs"}


def manifest(plan, kind, name) -> dict:
    (found,) = [m for m in plan.manifests() if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def statements(document: str) -> list[dict]:
    return json.loads(document)["Statement"]


def role_policy(plan, name) -> list[dict]:
    return statements(inputs_by_name(plan, ROLE_POLICY)[name]["policy"])


def key_arn(resource_name):
    """The mock ARN of the KMS key registered as `resource_name`."""
    return f"arn:aws:mock:us-east-1:{ACCOUNT}:key/{resource_name}"


# --- S3 ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_buckets_have_every_control(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    buckets = data_buckets(plan)
    assert {b["bucket"] for b in buckets.values()} == {f"gpu-training-{stack}-{p}-{ACCOUNT}" for p in ("datasets", "artifacts")}
    keys = inputs_by_name(plan, "aws:kms/key:Key")
    for name, bucket in buckets.items():
        bucket_id = f"{name}-id"

        def controls(type_token, bucket_id=bucket_id):
            (found,) = [r for r in inputs_by_name(plan, type_token).values() if r["bucket"] == bucket_id]
            return found

        assert bucket["forceDestroy"] is False
        assert controls("aws:s3/bucketOwnershipControls:BucketOwnershipControls")["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
        block = controls("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
        assert all(block[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
        (rule,) = controls("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")["rules"]
        default = rule["applyServerSideEncryptionByDefault"]
        assert default["sseAlgorithm"] == "aws:kms" and rule["bucketKeyEnabled"] is True
        assert default["kmsMasterKeyId"] == key_arn("storage-buckets-data-key")
        assert keys["storage-buckets-data-key"]["enableKeyRotation"] is True
        assert controls("aws:s3/bucketVersioning:BucketVersioning")["versioningConfiguration"] == {"status": "Enabled"}

        policy = statements(controls("aws:s3/bucketPolicy:BucketPolicy")["policy"])
        tls = next(s for s in policy if s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}})
        assert tls["Effect"] == "Deny" and tls["Principal"] == "*" and tls["Action"] == "s3:*"
        assert set(tls["Resource"]) == {bucket_arn(bucket["bucket"], "aws"), f"{bucket_arn(bucket['bucket'], 'aws')}/*"}

        rules = {r["id"]: r for r in controls("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")["rules"]}
        assert all(r["status"] == "Enabled" for r in rules.values())
        assert rules["abort-incomplete-multipart-uploads"]["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 7
        noncurrent = rules["expire-noncurrent-versions"]["noncurrentVersionExpiration"]["noncurrentDays"]
        assert noncurrent == config.storage.noncurrent_version_retention_days
        if "artifacts" in name:
            checkpoints = rules["expire-old-checkpoints"]
            assert checkpoints["filter"] == {"prefix": "checkpoints/"}
            assert checkpoints["expiration"]["days"] == config.storage.checkpoint_retention_days
            # Pruned checkpoints (and their replicas from the other regions) are gone within a week.
            assert checkpoints["noncurrentVersionExpiration"]["noncurrentDays"] <= 7
            assert checkpoints["noncurrentVersionExpiration"]["noncurrentDays"] == config.storage.checkpoint_version_retention_days
        else:
            assert "expire-old-checkpoints" not in rules


def test_no_two_platform_stacks_share_a_bucket_or_key_alias(plan_of):
    # not even two regions of one environment (prod, prod-usw2, prod-use2): each replicates into the others' own
    buckets = [b["bucket"] for s in PLATFORM_STACKS for b in inputs_by_name(plan_of(s), BUCKET).values()]
    aliases = [a["name"] for s in PLATFORM_STACKS for a in inputs_by_name(plan_of(s), "aws:kms/alias:Alias").values()]
    assert len(buckets) == len(set(buckets)) == 3 * len(PLATFORM_STACKS) == 15  # datasets, artifacts, access logs
    assert len(aliases) == len(set(aliases))


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_every_customer_key_rotates(stack, plan_of):
    keys = inputs_by_name(plan_of(stack), "aws:kms/key:Key")
    assert {"storage-buckets-data-key", "checkpoints-efs-key", "registry-key", "secrets-key"} <= set(keys)
    assert all(k["enableKeyRotation"] is True for k in keys.values())


# --- EFS ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_efs_for_checkpoints(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    (fs,) = plan.of_type("aws:efs/fileSystem:FileSystem")
    fs_id = f"{fs['name']}-id"
    assert fs["inputs"]["encrypted"] is True and fs["inputs"]["kmsKeyId"] == key_arn("checkpoints-efs-key")
    assert fs["inputs"]["throughputMode"] == "elastic"

    targets = plan.of_type("aws:efs/mountTarget:MountTarget")
    private = {f"network-private-{zone}-id" for zone in config.network.availability_zones}
    assert sorted(t["inputs"]["subnetId"] for t in targets) == sorted(private), "one mount target per private subnet"
    assert all("public" not in t["inputs"]["subnetId"] for t in targets)
    assert all(t["inputs"]["securityGroups"] == ["security-groups-efs-id"] and t["inputs"]["fileSystemId"] == fs_id
               for t in targets)

    # The environment's training workload's; each registered team's is tests/test_team_volumes.py's.
    (access_point,) = [p for p in plan.of_type("aws:efs/accessPoint:AccessPoint") if p["name"] == "checkpoints-efs-ap-training"]
    assert access_point["inputs"]["posixUser"] == {"uid": 1000, "gid": 1000}
    root = access_point["inputs"]["rootDirectory"]
    assert root["path"] == "/workloads/training"
    assert root["creationInfo"] == {"ownerUid": 1000, "ownerGid": 1000, "permissions": "0750"}

    (backup,) = plan.of_type("aws:efs/backupPolicy:BackupPolicy")
    assert backup["inputs"]["backupPolicy"]["status"] == ("ENABLED" if config.storage.efs_backups else "DISABLED")
    assert (backup["inputs"]["backupPolicy"]["status"] == "ENABLED") is (stack == "prod")

    (fs_policy,) = plan.of_type("aws:efs/fileSystemPolicy:FileSystemPolicy")
    policy = statements(fs_policy["inputs"]["policy"])
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in policy)
    granted = {a for s in policy if s["Effect"] == "Allow" for a in s["Action"]}
    assert "elasticfilesystem:ClientRootAccess" not in granted


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_training_volumes(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    namespace = f"training-{environment_of(stack)}"
    addons = inputs_by_name(plan, "aws:eks/addon:Addon")
    versions = ADDON_VERSIONS[config.cluster.kubernetes_version]
    efs_addon = next(a for a in addons.values() if a["addonName"] == "aws-efs-csi-driver")
    s3_addon = next(a for a in addons.values() if a["addonName"] == "aws-mountpoint-s3-csi-driver")
    assert efs_addon["addonVersion"] == versions["aws-efs-csi-driver"]
    assert s3_addon["addonVersion"] == versions["aws-mountpoint-s3-csi-driver"]
    assert efs_addon["podIdentityAssociations"] == [
        {"roleArn": f"arn:aws:mock:us-east-1:{ACCOUNT}:role/workload-roles-efs-csi", "serviceAccount": "efs-csi-controller-sa"}]
    assert "podIdentityAssociations" not in s3_addon, "the S3 driver has no credentials of its own"

    storage_class = manifest(plan, "StorageClass", "efs-static")
    assert storage_class["provisioner"] == "efs.csi.aws.com" and "parameters" not in storage_class
    if config.storage.lustre is not None:
        return  # the volumes come from FSx for Lustre: tests/test_lustre.py

    checkpoints_pv = manifest(plan, "PersistentVolume", f"checkpoints-{namespace}")["spec"]
    assert checkpoints_pv["csi"]["driver"] == "efs.csi.aws.com"
    assert checkpoints_pv["csi"]["volumeHandle"] == "checkpoints-efs-fs-id::checkpoints-efs-ap-training-id"
    assert checkpoints_pv["claimRef"] == {"namespace": namespace, "name": "checkpoints"}
    assert checkpoints_pv["persistentVolumeReclaimPolicy"] == "Retain"
    assert checkpoints_pv["accessModes"] == ["ReadWriteMany"] and checkpoints_pv["storageClassName"] == "efs-static"
    checkpoints_pvc = manifest(plan, "PersistentVolumeClaim", "checkpoints")
    assert checkpoints_pvc["metadata"]["namespace"] == namespace
    assert checkpoints_pvc["spec"]["volumeName"] == f"checkpoints-{namespace}"

    datasets_pv = manifest(plan, "PersistentVolume", f"datasets-{namespace}")["spec"]
    assert datasets_pv["csi"]["driver"] == "s3.csi.aws.com"
    assert datasets_pv["csi"]["volumeAttributes"] == {
        "bucketName": f"gpu-training-{stack}-datasets-{ACCOUNT}", "authenticationSource": "pod", "stsRegion": "us-east-1"}
    assert "read-only" in datasets_pv["mountOptions"] and "region us-east-1" in datasets_pv["mountOptions"]
    assert datasets_pv["accessModes"] == ["ReadOnlyMany"] and datasets_pv["claimRef"]["namespace"] == namespace
    assert manifest(plan, "PersistentVolumeClaim", "datasets")["spec"]["volumeName"] == f"datasets-{namespace}"

    mounts = {m["mountPath"]: m for m in training_data.volume_mounts()}
    assert mounts["/workspace/checkpoints"]["readOnly"] is False and mounts["/workspace/data"]["readOnly"] is True
    claims = {v["persistentVolumeClaim"]["claimName"] for v in training_data.pod_volumes()}
    assert claims == {"checkpoints", "datasets"}


CHECKPOINTS_MOUNT = {"name": "checkpoints", "mountPath": "/workspace/checkpoints"}


@pytest.mark.parametrize(("sub_path", "read_only", "expected"), [
    (None, False, CHECKPOINTS_MOUNT),
    ("checkpoints", False, {**CHECKPOINTS_MOUNT, "subPath": "checkpoints"}),
    ("checkpoints", True, {**CHECKPOINTS_MOUNT, "readOnly": True, "subPath": "checkpoints"}),
])
def test_system_pods_see_the_trainers_checkpoint_directory(sub_path, read_only, expected):
    """The cleanup and the viewer mount the directory the trainer mounts (Lustre's sub-path) and
    nothing above it; only the viewer's mount and claim are read-only."""
    assert training_data.checkpoints_mount(sub_path, read_only=read_only) == expected
    trainer = next(m for m in training_data.volume_mounts(sub_path) if m["name"] == "checkpoints")
    assert trainer.get("subPath") == expected.get("subPath")
    claim = training_data.checkpoints_claim(read_only=read_only)["persistentVolumeClaim"]
    assert claim["claimName"] == "checkpoints" and claim.get("readOnly", False) is read_only


@pytest.mark.parametrize("fs_group", [True, False])
def test_pods_run_as_the_images_user(fs_group):
    context = training_data.pod_security_context(fs_group=fs_group)
    assert (context["runAsUser"], context["runAsGroup"]) == (training_data.RUN_AS_USER, training_data.RUN_AS_GROUP)
    assert context["runAsNonRoot"] is True and context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context.get("fsGroup") == (training_data.RUN_AS_GROUP if fs_group else None)
    container = training_data.container_security_context()
    assert container["capabilities"] == {"drop": ["ALL"]} and not container["allowPrivilegeEscalation"]


# --- ECR ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_trainer_repository(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    (repository,) = plan.of_type("aws:ecr/repository:Repository")
    inputs = repository["inputs"]
    assert inputs["name"] == f"gpu-training-{stack}/trainer"
    assert inputs["imageTagMutability"] == "IMMUTABLE" and inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert inputs["encryptionConfigurations"] == [{"encryptionType": "KMS", "kmsKey": key_arn("registry-key")}]
    (lifecycle,) = plan.of_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")
    rules = sorted(json.loads(lifecycle["inputs"]["policy"])["rules"], key=lambda r: r["rulePriority"])
    assert rules[0]["selection"]["tagStatus"] == "untagged" and rules[0]["action"] == {"type": "expire"}
    assert rules[-1]["selection"] == {"tagStatus": "any", "countType": "imageCountMoreThan",
                                      "countNumber": config.registry.keep_images}
    assert plan.outputs["trainerRepositoryUrl"] == f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/gpu-training-{stack}/trainer"


# --- secrets -----------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_secrets_manager_holds_each_secret_redacted(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    secrets = inputs_by_name(plan, "aws:secretsmanager/secret:Secret")
    assert {s["name"] for s in secrets.values()} == {f"gpu-training/{stack}/{n}" for n in config.secrets.names}
    assert all(s["kmsKeyId"] == key_arn("secrets-key") for s in secrets.values())
    versions = plan.of_type("aws:secretsmanager/secretVersion:SecretVersion")
    assert len(versions) == len(config.secrets.names)
    assert all(v["inputs"]["secretString"] == REDACTED for v in versions)


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_external_secrets_syncs_into_training_secrets(stack, plan_of):
    plan, config = plan_of(stack), config_of(stack)
    namespace = f"training-{environment_of(stack)}"
    release = inputs_by_name(plan, "kubernetes:helm.sh/v3:Release")["secrets-sync-operator"]
    assert (release["chart"], release["version"]) == ("external-secrets", ESO_CHART_VERSION)
    crd_release = (ROOT / "schemas" / "crds" / "README.md").read_text()
    assert f"v{ESO_CHART_VERSION}" in crd_release, "the chart and the CRD schemas we validate against must match"
    values = release["values"]
    assert values["installCRDs"] is True and values["serviceAccount"]["name"] == "external-secrets"
    assert not values["processClusterStore"] and not values["processClusterExternalSecret"] and not values["processPushSecret"]
    # Neither namespace editors nor namespace admins may create stores that use the operator's role.
    assert values["rbac"]["aggregateToEdit"] is False and values["rbac"]["aggregateToAdmin"] is False

    store = manifest(plan, "SecretStore", "aws-secrets-manager")
    assert store["metadata"]["namespace"] == namespace
    assert store["spec"]["provider"]["aws"] == {"service": "SecretsManager", "region": "us-east-1"}
    external = manifest(plan, "ExternalSecret", training_data.SECRET_NAME)
    assert external["metadata"]["namespace"] == namespace
    assert external["spec"]["target"]["name"] == "training-secrets"
    assert external["spec"]["secretStoreRef"] == {"name": "aws-secrets-manager", "kind": "SecretStore"}
    assert {d["secretKey"]: d["remoteRef"]["key"] for d in external["spec"]["data"]} == {
        name: f"gpu-training/{stack}/{name}" for name in config.secrets.names}
    for custom in (store, external):
        assert validate_custom_resource(custom) == [], custom["kind"]

    env = training_data.secret_env(config.secrets.names)
    assert {e["name"] for e in env} == {"WANDB_API_KEY", "HF_TOKEN"}
    assert all(e["valueFrom"]["secretKeyRef"]["name"] == "training-secrets" for e in env)


# --- workload identity -------------------------------------------------------------------------

@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_pod_identity_bindings(stack, plan_of):
    plan = plan_of(stack)
    namespace = f"training-{environment_of(stack)}"
    account = manifest(plan, "ServiceAccount", "trainer")
    assert account["metadata"]["namespace"] == namespace and account["automountServiceAccountToken"] is False
    associations = {(a["namespace"], a["serviceAccount"]): a for a in inputs_by_name(plan, ASSOCIATION).values()}
    role = f"arn:aws:mock:us-east-1:{ACCOUNT}:role/workload-roles-"
    assert associations[(namespace, "trainer")]["roleArn"] == f"{role}trainer"
    assert associations[("external-secrets", "external-secrets")]["roleArn"] == f"{role}secrets-sync"
    assert all(a["clusterName"] == f"gpu-training-{stack}" for a in associations.values())

    roles = inputs_by_name(plan, ROLE)
    expected = {"trainer": (namespace, "trainer"), "secrets-sync": ("external-secrets", "external-secrets"),
                "efs-csi": ("kube-system", "efs-csi-controller-sa")}
    for role_name, (ns, service_account) in expected.items():
        (trust,) = statements(roles[f"workload-roles-{role_name}"]["assumeRolePolicy"])
        assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert trust["Condition"]["StringEquals"] == {
            "aws:SourceAccount": ACCOUNT, "aws:RequestTag/eks-cluster-name": f"gpu-training-{stack}",
            "aws:RequestTag/kubernetes-namespace": ns, "aws:RequestTag/kubernetes-service-account": service_account}


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_trainer_reaches_only_its_own_data(stack, plan_of):
    plan = plan_of(stack)
    datasets, artifacts = (bucket_arn(f"gpu-training-{stack}-{p}-{ACCOUNT}", "aws") for p in ("datasets", "artifacts"))
    allowed = {s["Sid"]: s for s in role_policy(plan, "workload-roles-trainer-access")}
    assert all(s["Effect"] == "Allow" for s in allowed.values())
    assert allowed["ReadDatasets"]["Action"] == ["s3:GetObject"] and allowed["ReadDatasets"]["Resource"] == [f"{datasets}/*"]
    assert allowed["ReadWriteCheckpoints"]["Resource"] == [f"{artifacts}/checkpoints/*"]
    assert allowed["WriteModels"]["Resource"] == [f"{artifacts}/models/*"]
    assert "s3:DeleteObject" not in allowed["WriteModels"]["Action"], "published models are never deleted by training"
    assert allowed["ListOwnArtifacts"]["Condition"] == {"StringLike": {"s3:prefix": ["checkpoints/*", "models/*"]}}
    s3_resources = {r for s in allowed.values() if s["Action"][0].startswith("s3:") for r in s["Resource"]}
    assert all(r.startswith((datasets, artifacts)) for r in s3_resources)
    assert allowed["UseDataKeyThroughS3"]["Resource"] == [key_arn("storage-buckets-data-key")]
    assert allowed["DecryptOwnSecrets"]["Resource"] == [key_arn("secrets-key")]
    assert allowed["ReadOwnSecrets"]["Resource"] == sorted(
        f"arn:aws:mock:us-east-1:{ACCOUNT}:secret/secrets-{name}" for name in config_of(stack).secrets.names)
    assert "DecryptExternalDatasets" not in allowed


def test_non_prod_roles_can_never_reach_prod_data(plan_of):
    """Explicit Deny on dev and staging roles; every prod bucket falls under it, no own bucket does."""
    prod_buckets = [bucket_arn(b["bucket"], "aws") for b in inputs_by_name(plan_of("prod"), BUCKET).values()]
    for stack in ("dev", "staging"):
        plan = plan_of(stack)
        own_buckets = [bucket_arn(b["bucket"], "aws") for b in inputs_by_name(plan, BUCKET).values()]
        for role in ("trainer", "secrets-sync", "efs-csi"):
            denies = {s["Sid"]: s for s in role_policy(plan, f"workload-roles-{role}-deny-prod-data")}
            assert all(s["Effect"] == "Deny" for s in denies.values())
            patterns = denies["DenyProdBuckets"]["Resource"]
            for arn in prod_buckets:
                assert any(fnmatchcase(arn, p) for p in patterns) and any(fnmatchcase(f"{arn}/x", p) for p in patterns)
            assert not any(fnmatchcase(arn, p) for arn in own_buckets for p in patterns)
            tagged = denies["DenyProdTaggedResources"]
            assert tagged["Condition"] == {"StringEquals": {"aws:ResourceTag/environment": "prod"}}
            assert {"kms:*", "secretsmanager:*", "elasticfilesystem:*"} <= set(tagged["Action"])
    prod_policies = inputs_by_name(plan_of("prod"), ROLE_POLICY)
    assert not any(name.endswith("-deny-prod-data") for name in prod_policies)


def test_existing_datasets_bucket_replaces_our_own():
    plan = synthesize("dev", overrides={"storage": {"datasetsBucket": "acme-dev-datasets"}})
    assert {b["bucket"] for b in data_buckets(plan).values()} == {f"gpu-training-dev-artifacts-{ACCOUNT}"}
    allowed = {s["Sid"]: s for s in role_policy(plan, "workload-roles-trainer-access")}
    assert allowed["ReadDatasets"]["Resource"] == ["arn:aws:s3:::acme-dev-datasets/*"]
    external = allowed["DecryptExternalDatasets"]
    assert external["Condition"]["StringLike"]["kms:EncryptionContext:aws:s3:arn"] == [
        "arn:aws:s3:::acme-dev-datasets", "arn:aws:s3:::acme-dev-datasets/*"]
    pv = manifest(plan, "PersistentVolume", "datasets-training-dev")
    assert pv["spec"]["csi"]["volumeAttributes"]["bucketName"] == "acme-dev-datasets"
    assert plan.outputs["datasetsBucket"] == "acme-dev-datasets"


# --- no secret value anywhere ------------------------------------------------------------------

PLANTED = {"wandb-api-key": "planted-wandb-7c1e9f0a", "hf-token": "planted-hf-3b8d2e6c"}


def _written_text(out: Path) -> str:
    return "\n".join(path.read_text() for path in sorted(out.rglob("*")) if path.is_file())


def test_planted_secret_values_never_appear_in_plan_files(tmp_path):
    plan = synthesize("dev", secret_overrides={"secrets": PLANTED})
    write_plan(plan, tmp_path)
    written = _written_text(tmp_path)
    assert written.count(REDACTED) >= len(PLANTED)
    for value in PLANTED.values():
        assert value not in written
        assert value not in json.dumps(plan.resources) and value not in json.dumps(plan.outputs, default=str)
    names = {s["inputs"]["name"] for s in plan.of_type("aws:secretsmanager/secret:Secret")}
    assert names == {f"gpu-training/dev/{n}" for n in PLANTED}, "the planted secrets were used"


def test_planted_secret_values_never_appear_in_cli_output(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plan.py"), "--stack", "staging", "--out", str(out),
         "--secret", f"secrets={json.dumps(PLANTED)}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    seen = result.stdout + result.stderr + _written_text(out)
    assert not any(value in seen for value in PLANTED.values())
    manifests = [yaml.safe_load(p.read_text()) for p in (out / "manifests").glob("*.yaml")]
    assert any(m["kind"] == "ExternalSecret" for m in manifests)


def test_a_secret_error_through_the_cli_shows_no_value(tmp_path):
    planted = {"wandb-api-key": {"oops": PLANTED["wandb-api-key"]}}
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plan.py"), "--stack", "dev", "--out", str(tmp_path / "out"),
         "--secret", f"secrets={json.dumps(planted)}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 2
    assert "gpu-training:secrets.wandb-api-key" in result.stderr and "Traceback" not in result.stderr
    assert PLANTED["wandb-api-key"] not in result.stdout + result.stderr


def test_plain_text_secrets_in_a_stack_file_stop_the_plan(tmp_path):
    """The engine's secret marking reaches the config model: a value not set with --secret is refused."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "plan.py"), "--stack", "dev", "--out", str(tmp_path / "out"),
         "--set", f"secrets={json.dumps(PLANTED)}"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 2 and "gpu-training:secrets.wandb-api-key: is stored in plain text" in result.stderr
    assert not any(value in result.stdout + result.stderr for value in PLANTED.values())


@pytest.mark.parametrize("stack", stacks_in_us_east_1(PLATFORM_STACKS))
def test_operator_namespace_is_restricted_and_denies_by_default(stack, plan_of):
    plan = plan_of(stack)
    labels = manifest(plan, "Namespace", "external-secrets")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = {m["metadata"]["name"]: m["spec"] for m in plan.manifests()
                if m["kind"] == "NetworkPolicy" and m["metadata"]["namespace"] == "external-secrets"}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    (webhook_ingress,) = policies["allow-webhook-ingress"]["ingress"]
    assert webhook_ingress == {"ports": [{"protocol": "TCP", "port": 10250}]}
