"""What the job command reaches outside itself (a cluster, the policy pack's environment, the clock):
the CLI builds the real ones, tests pass fakes."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Seams:
    connect: Callable[[argparse.Namespace], Any]
    """args -> a JobCluster (cluster.py) with the caller's credentials."""
    policy: Callable[[str, dict[str, Any]], Any]
    """(stack, job file mapping) -> a PolicyVerdict (policy.py)."""
    now: Callable[[], float] = time.time
