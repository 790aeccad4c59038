"""`storage.checkpointCleanup`: when a finished job's checkpoints leave the shared file system.

    gpu-training:storage:
      checkpointCleanup:
        afterDays: 30      # a finished job's directory untouched this long is removed
        dryRun: true       # only log what would go; set false once the log reads right

A nightly CronJob in each training namespace (components/workload/checkpoint_cleanup.py) removes
/workspace/checkpoints/<stack>/<job> when no unfinished JobSet of that name exists in the namespace and
nothing in the directory changed for `afterDays`. A new stack starts in dry-run: it logs its
choices and removes nothing until this says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config.keys import boolean_default_of, integer_default_of, maximum_of, minimum_of
from components.config.reader import Section

AFTER_DAYS = "storage.checkpointCleanup.afterDays"


@dataclass(frozen=True)
class CheckpointCleanupConfig:
    after_days: int = integer_default_of(AFTER_DAYS)
    dry_run: bool = boolean_default_of("storage.checkpointCleanup.dryRun")


def parse_checkpoint_cleanup(section: Section) -> CheckpointCleanupConfig:
    after_days = section.integer("afterDays", fix=f"write whole days between {minimum_of(AFTER_DAYS)} and "
                                 f"{maximum_of(AFTER_DAYS)}")
    dry_run = section.boolean("dryRun")
    section.finish()
    return CheckpointCleanupConfig(after_days, dry_run)
