"""The ARN partition of the AWS provider, for components that create resources without knowing
their region (where the region is known, components.facts.regions.arn_partition tells it)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def provider_partition(parent: pulumi.Resource) -> pulumi.Output[str]:
    """aws, aws-cn, aws-us-gov...: the partition of the provider `parent`'s children are created with."""
    return aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent)).partition
