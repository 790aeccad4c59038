"""Tags every AWS resource carries, through the provider's default_tags."""

from __future__ import annotations

from components.config import StackConfig, TeamStackConfig


def default_tags(config: StackConfig | TeamStackConfig) -> dict[str, str]:
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
