"""When to checkpoint: Young's first-order optimum and a small scheduler.

Young (1974): with checkpoint cost C (seconds the job stands still to write
one) and mean time between interruptions M of the whole job (node MTBF /
nodes), the interval that minimises expected lost work plus overhead is

    tau = sqrt(2 * C * M)

(valid for C << M; Daly 2006 refines it). Example: C = 120 s, M = 75 min
gives ~1039 s, about 17 minutes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def young_interval(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """tau = sqrt(2 C M); both arguments must be positive and finite."""
    for name, v in (("checkpoint_cost_s", checkpoint_cost_s), ("mtbf_s", mtbf_s)):
        if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    return math.sqrt(2.0 * checkpoint_cost_s * mtbf_s)


def checkpoint_interval(
    checkpoint_cost_s: float,
    mtbf_s: float,
    override_s: float | None = None,
    min_s: float = 0.0,
    max_s: float = math.inf,
) -> float:
    """The interval to use: the override if given, else Young's tau clamped
    to [min_s, max_s]."""
    if override_s is not None:
        if not math.isfinite(override_s) or override_s <= 0:
            raise ValueError(f"override_s must be positive, got {override_s!r}")
        return float(override_s)
    if min_s > max_s:
        raise ValueError("min_s must be <= max_s")
    return min(max(young_interval(checkpoint_cost_s, mtbf_s), min_s), max_s)


class CheckpointSchedule:
    """Decides whether a checkpoint is due.

    Step mode (`every_steps`) wins over time mode. In time mode the interval
    is the override or Young's tau from the measured checkpoint cost (the
    first estimate is `initial_cost_s`; each measured save updates it with an
    exponential moving average).
    """

    def __init__(
        self,
        *,
        mtbf_s: float,
        interval_override_s: float | None = None,
        every_steps: int | None = None,
        initial_cost_s: float = 30.0,
        min_interval_s: float = 0.0,
        start_step: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.mtbf_s = mtbf_s
        self.interval_override_s = interval_override_s
        self.every_steps = every_steps
        self.cost_s = float(initial_cost_s)
        self.min_interval_s = min_interval_s
        self.clock = clock
        self.last_step = start_step
        self.last_time = clock()
        self.measured = False

    @property
    def interval_s(self) -> float:
        return checkpoint_interval(
            self.cost_s, self.mtbf_s, self.interval_override_s, self.min_interval_s
        )

    def due(self, step: int) -> bool:
        if step <= self.last_step:
            return False
        if self.every_steps is not None:
            return step - self.last_step >= self.every_steps
        return self.clock() - self.last_time >= self.interval_s

    def record(self, step: int, cost_s: float) -> None:
        cost_s = max(float(cost_s), 1e-3)
        self.cost_s = cost_s if not self.measured else 0.5 * self.cost_s + 0.5 * cost_s
        self.measured = True
        self.last_step = step
        self.last_time = self.clock()
