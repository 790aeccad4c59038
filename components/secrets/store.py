"""AWS Secrets Manager: the source of truth for the environment's training secrets.

`pulumi config set --path --secret 'secrets.<name>' <value>` -> one Secrets Manager secret per
name, `<project>/<environment>/<name>`, encrypted with the environment's secrets key. The value
arrives as a secret Output from the config model and stays secret in state and plan output.
External Secrets (sync.py) copies them into the training namespace.

Rotation (FSBP SecretsManager.1) is not configured: these are third-party API tokens (W&B,
Hugging Face) that AWS cannot rotate; rotate them at the issuer and `pulumi config set` again.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common.kms import customer_key
from components.config.secrets import SecretsConfig

# Days a deleted secret can still be restored; prod gets the maximum.
RECOVERY_WINDOW_DAYS = {"prod": 30}
DEFAULT_RECOVERY_WINDOW_DAYS = 7


def secret_name(project: str, environment: str, name: str, team: str | None = None) -> str:
    """`<project>/<environment>/[teams/<team>/]<name>`: the environment is a path part, so IAM can match it."""
    return f"{project}/{environment}/teams/{team}/{name}" if team else f"{project}/{environment}/{name}"


@dataclass(frozen=True)
class TrainingSecretsArgs:
    config: SecretsConfig
    """The secrets to create (their values are set later, with pulumi config set --secret)."""
    project: str
    """First part of every secret name (<project>/<environment>/...)."""
    environment: str
    """Second part of every secret name, and how long a deleted secret can be recovered."""
    name_prefix: str
    """Names the secrets key's alias and description."""
    account_id: pulumi.Input[str]
    """The account the secrets key trusts."""
    team: str | None = None
    """A team stack's team: its secrets go under <project>/<environment>/teams/<team>/."""


class TrainingSecrets(pulumi.ComponentResource):
    key: aws.kms.Key
    secrets: dict[str, aws.secretsmanager.Secret]
    """Secret name (the config key) -> its Secrets Manager secret."""

    def __init__(self, name: str, args: TrainingSecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:secrets:TrainingSecrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.key = customer_key(f"{name}-key", alias=f"{args.name_prefix}-secrets",
                                description=f"{args.name_prefix}: Secrets Manager training secrets",
                                account_id=args.account_id, parent=self)
        self.secrets = {}
        for entry in args.config.entries:
            # checkov CKV2_AWS_57 (automatic rotation) is unmet on purpose: these are third-party API
            # tokens (Hugging Face, W&B) that only their issuer can rotate; a new value is set with
            # `pulumi config set --secret` and reaches the pods through External Secrets.
            secret = aws.secretsmanager.Secret(
                f"{name}-{entry.name}",
                name=secret_name(args.project, args.environment, entry.name, args.team),
                description=f"Training secret {entry.name} ({args.environment}); set with pulumi config set --secret",
                kms_key_id=self.key.arn,
                recovery_window_in_days=RECOVERY_WINDOW_DAYS.get(args.environment, DEFAULT_RECOVERY_WINDOW_DAYS),
                opts=child,
            )
            aws.secretsmanager.SecretVersion(
                f"{name}-{entry.name}",
                secret_id=secret.id,
                secret_string=pulumi.Output.secret(entry.value),
                opts=child,
            )
            self.secrets[entry.name] = secret
        self.register_outputs({"secretNames": sorted(self.secrets)})
