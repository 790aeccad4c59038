"""Tags every AWS resource carries, through the provider's default_tags."""

from __future__ import annotations

from components.config import StackConfig


def default_tags(config: StackConfig) -> dict[str, str]:
    tags = {
        "project": config.project,
        "environment": config.environment,
        "stack": config.stack,
        "cost-center": config.cost_center,
        "managed-by": "pulumi",
    }
    if config.team:
        tags["team"] = config.team
    return tags
