"""The preview and image roles' documents, and the statements the deploy role shares with them."""

from __future__ import annotations

from typing import Any

from bootstrap.config import BootstrapConfig
from bootstrap.policies.actions import IMAGE_PUSH_ACTIONS, PROGRAM_INVOKES
from bootstrap.policies.names import (
    environment_ci,
    environment_stacks,
    stack_checkpoint_prefix,
    stack_checkpoints,
    state_metadata,
    trainer_repository_name,
)
from components.config.platform_contract import contract_parameter_name
from components.facts.regions import arn_partition


def via_s3(region: str) -> dict[str, Any]:
    return {"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}}


def program_invokes_statement() -> dict[str, Any]:
    """The reads the program's invokes make (PROGRAM_INVOKES): preview and deploy both run it."""
    actions = sorted({action for actions in PROGRAM_INVOKES.values() for action in actions})
    return {"Sid": "RunProgramInvokes", "Effect": "Allow", "Action": actions, "Resource": ["*"]}


def contract_parameters(config: BootstrapConfig, environment: str, account_id: str) -> list[str]:
    """The SSM parameter each platform stack of the environment publishes its contract in, in its
    region (components/platform.py _publish_contract): what its team stacks read."""
    partition, ci = arn_partition(config.region), environment_ci(config, environment)
    regions = [config.region, *(region for _, region in ci.sites)]
    return [f"arn:{partition}:ssm:{region}:{account_id}:parameter{contract_parameter_name(config.stacks_project, stack)}"
            for stack, region in zip(ci.platform_stacks, regions, strict=True)]


def preview_policy(config: BootstrapConfig, environment: str, *, bucket_arn: str, state_key_arn: str,
                   secrets_key_arn: str) -> dict[str, Any]:
    project = config.stacks_project
    checkpoints = [arn for stack in environment_stacks(config, environment)
                   for arn in stack_checkpoints(bucket_arn, project, stack)]
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListState", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn]},
        {"Sid": "ReadStateOfEnvironment", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [state_metadata(bucket_arn), *checkpoints]},
        {"Sid": "ReadStateThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [state_key_arn],
         "Condition": via_s3(config.region)},
        {"Sid": "DecryptStackSecrets", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [secrets_key_arn]},
        program_invokes_statement(),
        # A team stack's preview reads its platforms' contracts (components/team.py published_contract).
        {"Sid": "ReadPlatformContracts", "Effect": "Allow", "Action": ["ssm:GetParameter"],
         "Resource": contract_parameters(config, environment, state_key_arn.split(":")[4])},
    ]}


def image_policy(config: BootstrapConfig, environment: str, *, account_id: str, bucket_arn: str, state_key_arn: str,
                 **_: Any) -> dict[str, Any]:
    """What `scripts/build-image <environment>` does in main.yml's `image` job, and nothing more.

    `pulumi stack output trainerRepositoryUrl --stack <environment>` (DIY backend, pulumi/pulumi
    pkg/backend/diy and pkg/cmd/pulumi/stack/stack_output.go): reads `.pulumi/meta.yaml`, lists the
    bucket with the platform stack's state file name as prefix to find its variant, then reads
    it. Without --show-secrets the CLI deserialises the outputs with a provider that blinds every
    secret instead of decrypting it (BlindingProvider, pulumi/pulumi#23820, in the pinned CLI), so
    the role gets no use of the environment's secrets key, and no team stack's state. The login
    also lists `.pulumi/stacks/` for legacy stack files; that listing is refused here, and the CLI
    skips its warning when the listing fails (main.yml turns the check off besides).
    Then ECR: a login token (GetAuthorizationToken has no resource type: AWS requires Resource
    "*"; docker's requests with the token are still authorized as this role, by the statement
    below) and IMAGE_PUSH_ACTIONS on the environment's trainer repository only."""
    project, region, partition = config.stacks_project, config.region, arn_partition(config.region)
    repository = f"arn:{partition}:ecr:{region}:{account_id}:repository/{trainer_repository_name(project, environment)}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "FindStateOfPlatformStack", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [bucket_arn],
         "Condition": {"StringEquals": {"s3:prefix": stack_checkpoint_prefix(project, environment)}}},
        {"Sid": "ReadStateOfPlatformStack", "Effect": "Allow", "Action": ["s3:GetObject"],
         "Resource": [state_metadata(bucket_arn), *stack_checkpoints(bucket_arn, project, environment)]},
        {"Sid": "ReadStateThroughS3", "Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [state_key_arn],
         "Condition": via_s3(region)},
        {"Sid": "LogInToRegistry", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
        {"Sid": "PushTrainerImage", "Effect": "Allow", "Action": list(IMAGE_PUSH_ACTIONS), "Resource": [repository]},
    ]}
