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

from components.config.keys import integer_default_of
from components.config.reader import Section

# The Cluster Autoscaler's defaults (their source beside the rows).
DEFAULT_UNNEEDED_MINUTES = integer_default_of("scaleDown.unneededMinutes")
DEFAULT_DELAY_AFTER_ADD_MINUTES = integer_default_of("scaleDown.delayAfterAddMinutes")


@dataclass(frozen=True)
class ScaleDownConfig:
    unneeded_minutes: int = DEFAULT_UNNEEDED_MINUTES
    delay_after_add_minutes: int = DEFAULT_DELAY_AFTER_ADD_MINUTES


def parse_scale_down(section: Section) -> ScaleDownConfig:
    unneeded = section.integer("unneededMinutes", fix=_fix(section, "unneededMinutes"))
    delay = section.integer("delayAfterAddMinutes", fix=_fix(section, "delayAfterAddMinutes"))
    section.finish()
    return ScaleDownConfig(unneeded, delay)


def _fix(section: Section, name: str) -> str:
    row = section.row(name)
    assert row is not None
    return f"write whole minutes between {row.minimum} and {row.maximum}"
