"""The AWS provider every stack creates its AWS resources with."""

from __future__ import annotations

import pulumi_aws as aws

from components.common.tags import default_tags
from components.config import StackConfig, TeamStackConfig


def aws_provider(config: StackConfig | TeamStackConfig, *, region: str | None = None,
                 resource_name: str = "aws") -> aws.Provider:
    """The stack's AWS provider (default providers are disabled in every stack file); with
    `region`, a further one for that region (a team's tenancy on a MultiKueue worker), tagged alike."""
    return aws.Provider(
        resource_name,
        region=region or config.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=default_tags(config)),
    )
