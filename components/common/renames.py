"""Renaming a component's type token without replacing what it made."""

from __future__ import annotations

import pulumi


def renamed_from(previous_type: str, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """`opts` plus an alias to the type token a component was created under, so `pulumi up` moves
    the component and its children to the new URNs instead of deleting and creating them.

    One alias on the component is enough: children inherit their parent's aliases. The Python SDK
    says so where it computes aliases for an engine without alias specs (pulumi/runtime/resource.py,
    `all_aliases`: "add to it any implicit aliases inherited from its parent", one per parent alias,
    via `inherited_child_alias`); an engine with alias specs (what `prepare_aliases` sends when the
    monitor supports them) derives the same child aliases itself from the parent's."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=previous_type)]))
