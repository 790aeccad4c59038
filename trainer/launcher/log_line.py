"""One JSON log line: the format every launcher and trainer line shares (the step lines of
launcher.progress, the event lines of launcher.events, the launcher's own). A module of its own so
that both can write lines without importing each other.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# Every line names its job (the workload's TRAIN_JOB_ID): the platform's CloudWatch metric
# filters take their `Job` dimension from it (components/observability/training_metrics.py).
JOB_ID_VAR = "TRAIN_JOB_ID"


def log(event: str, stream=None, **fields) -> None:
    """Write one JSON log line (keys: ts, event, job when TRAIN_JOB_ID is set, then the fields)."""
    record = {"ts": round(time.time(), 3), "event": event}
    job = os.environ.get(JOB_ID_VAR)
    if job:
        record["job"] = job
    record.update({k: _clean(v) for k, v in fields.items()})
    line = json.dumps(record, default=str, separators=(",", ":"))
    out = stream if stream is not None else sys.stdout
    out.write(line + "\n")
    out.flush()
