"""ECR repository for the trainer image (pushed by scripts/build-image, pinned by digest).

Immutable tags (FSBP ECR.2: a tag is one commit forever), scan on push (ECR.1), KMS encryption
with the environment's own key, and a lifecycle policy (ECR.3) that expires untagged images
after a day and keeps the newest `registry.keepImages`. build-image pushes one plain image
manifest per build (no attestation index), so no tagged image depends on an untagged one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.common.kms import customer_key
from components.common.renames import renamed_from
from components.config.registry import RegistryConfig

UNTAGGED_EXPIRY_DAYS = 1


def lifecycle_policy(keep_images: int) -> str:
    """ECR evaluates rules by priority; the `any` rule must come last (highest number)."""
    return json.dumps({"rules": [
        {"rulePriority": 1, "description": f"Expire untagged images after {UNTAGGED_EXPIRY_DAYS} day",
         "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days",
                       "countNumber": UNTAGGED_EXPIRY_DAYS},
         "action": {"type": "expire"}},
        {"rulePriority": 2, "description": f"Keep the newest {keep_images} images",
         "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": keep_images},
         "action": {"type": "expire"}},
    ]}, sort_keys=True)


@dataclass(frozen=True)
class TrainerRegistryArgs:
    config: RegistryConfig
    """How many images the lifecycle policy keeps (the rollback depth)."""
    name_prefix: str
    """Names the repository and its key alias."""
    account_id: pulumi.Input[str]
    """The account the repository's key trusts."""


class TrainerRegistry(pulumi.ComponentResource):
    repository: aws.ecr.Repository
    repository_url: pulumi.Output[str]

    def __init__(self, name: str, args: TrainerRegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:data:TrainerRegistry", name, None,
                         renamed_from("gpu-training:registry:TrainerRegistry", opts))
        child = pulumi.ResourceOptions(parent=self)
        key = customer_key(f"{name}-key", alias=f"{args.name_prefix}-registry",
                           description=f"{args.name_prefix}: ECR images", account_id=args.account_id, parent=self)
        self.repository = aws.ecr.Repository(
            f"{name}-trainer",
            # Registries are per account and region: the environment in the name keeps dev and prod apart.
            name=f"{args.name_prefix}/trainer",
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS", kms_key=key.arn)],
            force_delete=False,  # `pulumi destroy` must not delete images running workloads pin
            opts=child,
        )
        aws.ecr.LifecyclePolicy(f"{name}-trainer", repository=self.repository.name,
                                policy=lifecycle_policy(args.config.keep_images), opts=child)
        self.repository_url = self.repository.repository_url
        self.register_outputs({"repositoryUrl": self.repository_url})
