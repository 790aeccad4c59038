"""Cost-allocation tags, activated once for the account by the bootstrap.

A tag key counts in AWS Budgets only once it is activated, and activation is account-wide. The
stacks' budgets filter by COST_ALLOCATION_TAG_KEYS. Activating them here, with the administrator
who applies the bootstrap, keeps that account-wide switch out of the CI deploy roles. AWS refuses
to activate a key it has not yet seen in billing data (about 24 hours after the first resource
carries it), and in an AWS Organizations member account altogether: docs/cost.md says when to
rerun, or to switch this off (`costAllocationTags: {activate: false}`) and activate them in
the management account.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.observability.budget import COST_ALLOCATION_TAG_KEYS


class CostAllocationTags(pulumi.ComponentResource):
    tags: list[aws.costexplorer.CostAllocationTag]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:bootstrap:CostAllocationTags", name, None, opts)
        self.tags = [
            aws.costexplorer.CostAllocationTag(
                f"{name}-{key}", tag_key=key, status="Active",
                # Never switched off by a destroy: the stacks' budgets depend on it.
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True))
            for key in COST_ALLOCATION_TAG_KEYS
        ]
        self.register_outputs({})
