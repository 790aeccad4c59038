"""The AWS provider every stack creates its AWS resources with."""

from __future__ import annotations

import pulumi_aws as aws

from components.common.tags import default_tags
from components.config import StackConfig, TeamStackConfig


def aws_provider(config: StackConfig | TeamStackConfig) -> aws.Provider:
    """The only AWS provider: default providers are disabled in every stack file."""
    return aws.Provider(
        "aws",
        region=config.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=default_tags(config)),
    )
