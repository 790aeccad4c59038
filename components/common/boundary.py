"""Every IAM role of a stack carries the stack's permissions boundary (`iamPermissionsBoundary`).

Set once for the whole stack by a stack transformation rather than at each `aws.iam.Role`: the
CI deploy role may create no role without the boundary (bootstrap/policies/deploy.py), so a role that
missed it would fail the deploy; here no role can miss it, including roles added later.
tests/test_bootstrap.py checks every role of every plan.
"""

from __future__ import annotations

import pulumi

ROLE_TYPE = "aws:iam/role:Role"


def bound_roles(boundary_arn: str) -> pulumi.ResourceTransformation:
    """A transformation giving every `aws.iam.Role` this permissions boundary."""

    def transform(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if args.type_ != ROLE_TYPE:
            return None
        own = args.props.get("permissions_boundary")
        if own is not None and own != boundary_arn:
            raise ValueError(f"role {args.name} sets permissions boundary {own}; the stack's is {boundary_arn}: "
                             "remove it from the role")
        return pulumi.ResourceTransformationResult(props={**args.props, "permissions_boundary": boundary_arn},
                                                   opts=args.opts)

    return transform


def apply_permissions_boundary(boundary_arn: str | None) -> None:
    """Register the transformation for the rest of the program (nothing when no boundary is set)."""
    if boundary_arn:
        pulumi.runtime.register_stack_transformation(bound_roles(boundary_arn))
