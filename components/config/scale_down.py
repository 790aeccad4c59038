"""The `scaleDown` section: when the Cluster Autoscaler gives an idle node back.

    gpu-training:scaleDown:
      unneededMinutes: 10          # a node without pods that need it goes after this long
      delayAfterAddMinutes: 10     # no scale-down for this long after any scale-up

An idle GPU node is billed until it goes: each idle stretch of a p5.48xlarge costs
unneededMinutes x $55.04/60 (docs/cost.md has the table). Too short, and a gang that restarts
after a spot reclaim, or the next job in the queue, waits for fresh nodes to boot and pull the
image, which is billed too. The platform's default keeps the autoscaler's own (10 and 10).
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config.reader import Section

# The Cluster Autoscaler's defaults (FAQ: scale-down-unneeded-time 10m, scale-down-delay-after-add 10m).
DEFAULT_UNNEEDED_MINUTES = 10
DEFAULT_DELAY_AFTER_ADD_MINUTES = 10
MAX_MINUTES = 24 * 60


@dataclass(frozen=True)
class ScaleDownConfig:
    unneeded_minutes: int = DEFAULT_UNNEEDED_MINUTES
    delay_after_add_minutes: int = DEFAULT_DELAY_AFTER_ADD_MINUTES


def parse_scale_down(section: Section) -> ScaleDownConfig:
    fix = f"write whole minutes between 1 and {MAX_MINUTES}"
    unneeded = section.integer("unneededMinutes", DEFAULT_UNNEEDED_MINUTES, minimum=1, maximum=MAX_MINUTES, fix=fix)
    delay = section.integer("delayAfterAddMinutes", DEFAULT_DELAY_AFTER_ADD_MINUTES, minimum=1, maximum=MAX_MINUTES,
                            fix=fix)
    section.finish()
    return ScaleDownConfig(unneeded, delay)
