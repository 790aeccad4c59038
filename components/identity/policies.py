"""IAM, key, bucket and file-system policy documents for storage, secrets and workload identity.

Pure functions from ARNs to JSON text (built with components/common/iam.py), so tests parse exactly what
AWS receives. Every Allow names the resources it applies to; the only `*` resources are in key
policies (where `*` means "this key"), and the only `*` principal is FSx's S3 access role,
pinned by its ARN pattern, account, service and bucket (`fsx_datasets_key_statement`).

Isolation of non-prod from prod data is enforced twice: the config model rejects a non-prod stack
that points at a prod bucket, and every non-prod workload role carries `deny_prod_data_policy`,
an explicit Deny. An explicit Deny beats any Allow from any policy attached to the role, now or
later, so it gives the guarantee a permissions boundary would, visibly, in one document.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.common import iam
from components.config.storage import PROD_NAME_WORDS
from components.facts.regions import arn_partition

# Prefixes of the artifacts bucket the trainer may write: checkpoints (rotated, so deletable)
# and published model weights (kept: no delete).
CHECKPOINT_PREFIX = "checkpoints/"
MODEL_PREFIX = "models/"
EKS_PODS_SERVICE = "pods.eks.amazonaws.com"


def bucket_arn(bucket: str, partition: str) -> str:
    return f"arn:{partition}:s3:::{bucket}"


# FSx creates one service-linked role per file system to reach its linked S3 data repositories:
# AWSServiceRoleForFSxS3Access_<file system id> (FSx for Lustre User Guide, "Working with
# server-side encrypted Amazon S3 buckets"; IAM policy FSxDeleteServiceLinkedRoleAccess).
FSX_S3_ACCESS_ROLES = "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"


def fsx_datasets_key_statement(*, account_id: str, region: str, bucket: str, also: Sequence[str] = ()) -> dict:
    """Key policy statement letting FSx for Lustre read (and, for exports, write) the objects of
    `bucket` under an SSE-KMS customer key: the statement the FSx guide prescribes, with the
    file system id left open (the key exists before the file system), so the principal is any
    FSx S3 access role of this account, and only through S3 for this bucket. The bucket uses S3
    Bucket Keys, so the encryption context is the bucket's ARN, not the object's."""
    partition = arn_partition(region)
    return {
        "Sid": "FsxForLustreReadsTheDatasetsBucket",
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"],
        "Resource": "*",
        "Condition": {
            "ArnLike": {"aws:PrincipalArn": f"arn:{partition}:iam::{account_id}:{FSX_S3_ACCESS_ROLES}"},
            "StringEquals": {"kms:CallerAccount": account_id, "kms:ViaService": f"s3.{region}.amazonaws.com"},
            # `also`: the artifacts bucket, where Lustre exports checkpoints (data/replication.py).
            "StringLike": {"kms:EncryptionContext:aws:s3:arn": [bucket_arn(b, partition) for b in (bucket, *also)]
                           if also else bucket_arn(bucket, partition)},
        },
    }


def tls_only_bucket_policy(bucket: str, partition: str) -> str:
    """Deny every request over plain HTTP or TLS < 1.2 (FSBP S3.5), whoever makes it."""
    resources = [bucket_arn(bucket, partition), f"{bucket_arn(bucket, partition)}/*"]
    return iam.policy(
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": resources, "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
        {"Sid": "DenyOutdatedTls", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
         "Resource": resources, "Condition": {"NumericLessThan": {"s3:TlsVersion": "1.2"}}},
    )


def file_system_policy(file_system_arn: str) -> str:
    """EFS: TLS only; clients may mount and write but never act as root (no ClientRootAccess),
    so the access points' POSIX user is the only identity files are written with."""
    return iam.policy(
        {"Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "*",
         "Resource": file_system_arn, "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
        {"Sid": "MountWithoutRoot", "Effect": "Allow", "Principal": {"AWS": "*"},
         "Action": ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"],
         "Resource": file_system_arn},
    )


def workload_trust_policy(account_id: str, *, cluster_name: str | Sequence[str], namespace: str,
                          service_account: str) -> str:
    """EKS Pod Identity may assume the role only for one service account of one namespace of one
    cluster: Pod Identity sets these session tags itself, so a stray association cannot use it.
    Several clusters (a team's trainer on a MultiKueue manager and its workers): that service
    account of that namespace in any of them (a condition key with several values matches any of
    them: IAM User Guide, "Creating a condition with multiple keys or values")."""
    clusters = [cluster_name] if isinstance(cluster_name, str) else list(cluster_name)
    return iam.policy({
        "Sid": "PodIdentityForOneServiceAccount",
        "Effect": "Allow",
        "Principal": {"Service": EKS_PODS_SERVICE},
        "Action": ["sts:AssumeRole", "sts:TagSession"],
        "Condition": {"StringEquals": {
            "aws:SourceAccount": account_id,
            "aws:RequestTag/eks-cluster-name": clusters[0] if len(clusters) == 1 else clusters,
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": service_account,
        }},
    })


def _secret_statements(region: str, secret_arns: Sequence[str], secrets_key_arn: str) -> list[dict]:
    if not secret_arns:
        return []
    return [
        iam.statement(["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"], sorted(secret_arns),
                      sid="ReadOwnSecrets"),
        iam.statement(["kms:Decrypt"], [secrets_key_arn], sid="DecryptOwnSecrets",
                      conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"}}),
    ]


def trainer_policy(*, region: str, account_id: str, datasets_bucket: str, datasets_external: bool,
                   artifacts_bucket: str, data_key_arn: str, secret_arns: Sequence[str], secrets_key_arn: str,
                   artifacts_prefix: str = "") -> str:
    """The training workload: read its datasets, write its checkpoints and models, read its
    secrets, use its own keys through S3 / Secrets Manager only. Nothing else.

    `artifacts_prefix` (e.g. `teams/vision/`) confines a team to its own part of the artifacts bucket.
    """
    partition = arn_partition(region)
    artifacts, datasets = bucket_arn(artifacts_bucket, partition), bucket_arn(datasets_bucket, partition)
    checkpoints, models = f"{artifacts_prefix}{CHECKPOINT_PREFIX}", f"{artifacts_prefix}{MODEL_PREFIX}"
    via_s3 = {"kms:ViaService": f"s3.{region}.amazonaws.com"}
    statements = [
        iam.statement(["s3:ListBucket"], [datasets], sid="ListDatasets"),
        iam.statement(["s3:GetObject"], [f"{datasets}/*"], sid="ReadDatasets"),
        iam.statement(["s3:ListBucket"], [artifacts], sid="ListOwnArtifacts",
                      conditions={"StringLike": {"s3:prefix": [f"{checkpoints}*", f"{models}*"]}}),
        iam.statement(["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
                      [f"{artifacts}/{checkpoints}*"], sid="ReadWriteCheckpoints"),
        iam.statement(["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
                      [f"{artifacts}/{models}*"], sid="WriteModels"),
        iam.statement(["kms:Decrypt", "kms:GenerateDataKey"], [data_key_arn], sid="UseDataKeyThroughS3",
                      conditions={"StringEquals": via_s3}),
    ]
    if datasets_external:
        # An existing datasets bucket may be encrypted with a key of its own: decrypt through S3,
        # for objects of that bucket only (S3 puts the bucket/object ARN in the encryption context).
        statements.append(iam.statement(
            ["kms:Decrypt"], [f"arn:{partition}:kms:{region}:{account_id}:key/*"], sid="DecryptExternalDatasets",
            conditions={"StringEquals": via_s3, "StringLike": {
                "kms:EncryptionContext:aws:s3:arn": [datasets, f"{datasets}/*"]}}))
    statements += _secret_statements(region, secret_arns, secrets_key_arn)
    return iam.policy(*statements)


def secrets_reader_policy(*, region: str, secret_arns: Sequence[str], secrets_key_arn: str) -> str:
    """External Secrets: read exactly this environment's secrets (callers skip it when there are none)."""
    if not secret_arns:
        raise ValueError("a secrets reader policy needs at least one secret")
    return iam.policy(*_secret_statements(region, secret_arns, secrets_key_arn))


def team_trainer_role_name(team_name_prefix: str) -> str:
    """The team's trainer role, `<project>-<env>-<team>-trainer` (the team stack's name prefix):
    under the names the team boundary and the team deploy role cover (bootstrap/policies/teams.py,
    `<project>-<env>-<team>-*`). Shorter than the team's secrets reader's, so it fits where that fits."""
    return f"{team_name_prefix}-trainer"


def team_secrets_reader_role_name(name_prefix: str, team: str) -> str:
    """The role a team stack creates for External Secrets to read that team's secrets."""
    return f"{name_prefix}-team-{team}-secrets"


def assume_team_secret_readers_policy(*, account_id: str, partition: str, name_prefix: str) -> str:
    """External Secrets (platform role) may assume the team secret readers of this environment
    only; each of those trusts this role and reads only its team's secrets."""
    role = team_secrets_reader_role_name(name_prefix, "*")
    return iam.policy(iam.statement(["sts:AssumeRole"], [f"arn:{partition}:iam::{account_id}:role/{role}"],
                                    sid="AssumeTeamSecretReaders"))


def assumed_by_role_trust_policy(role_arn: str | Sequence[str]) -> str:
    """Trust policy: only `role_arn` may assume this role (or only these roles: a team's secrets
    reader, assumed by the External Secrets role of its platform and of each MultiKueue worker)."""
    principal = role_arn if isinstance(role_arn, str) else list(role_arn)
    return iam.policy({"Sid": "AssumedByOneRole", "Effect": "Allow", "Principal": {"AWS": principal},
                       "Action": ["sts:AssumeRole"]})


def efs_csi_policy(*, file_system_arn: str, access_point_arns: Sequence[str]) -> str:
    """EFS CSI controller under static provisioning: it only looks at our file system and access
    points; creating or deleting access points is not allowed (they are made by Pulumi)."""
    return iam.policy(iam.statement(
        ["elasticfilesystem:DescribeAccessPoints", "elasticfilesystem:DescribeFileSystems",
         "elasticfilesystem:DescribeMountTargets"],
        [file_system_arn, *sorted(access_point_arns)], sid="DescribeOwnFileSystem"))


def prod_bucket_patterns(partition: str) -> list[str]:
    """ARN patterns of buckets whose name has a whole `prod`/`production` part (see
    config.storage.names_prod_data), and of their objects."""
    patterns = []
    for word in PROD_NAME_WORDS:
        for name in (word, f"{word}-*", f"*-{word}", f"*-{word}-*", f"{word}.*", f"*.{word}", f"*.{word}.*"):
            patterns += [bucket_arn(name, partition), f"{bucket_arn(name, partition)}/*"]
    return patterns


def deny_prod_data_policy(partition: str) -> str:
    """Attached to every workload role of a non-prod stack: prod data is out of reach even if an
    Allow somewhere would grant it. Names catch prod buckets; the `environment` tag (set on every
    resource by the provider's default tags) catches prod secrets, keys and file systems."""
    prod_tagged = {"StringEquals": {"aws:ResourceTag/environment": "prod"}}
    return iam.policy(
        iam.statement(["s3:*"], prod_bucket_patterns(partition), sid="DenyProdBuckets", effect="Deny"),
        iam.statement(["elasticfilesystem:*", "kms:*", "secretsmanager:*"], ["*"], sid="DenyProdTaggedResources",
                      effect="Deny", conditions=prod_tagged),
        iam.statement(["secretsmanager:*"], [f"arn:{partition}:secretsmanager:*:*:secret:*/prod/*"],
                      sid="DenyProdSecretNames", effect="Deny"),
    )
