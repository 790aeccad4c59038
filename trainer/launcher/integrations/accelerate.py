"""A Hugging Face Accelerate training loop. Two lines:

    from launcher.integrations.accelerate import Run
    for step in Run(accelerator).steps(total_steps):   # was: range(total_steps)
        ...

Create it after `accelerator.prepare(...)`: resume loads the newest verified checkpoint with
`accelerator.load_state` (model, optimizer, scheduler, RNG states: every registered object).
Checkpoints are `accelerator.save_state` directories, `checkpoint_N/` under TRAIN_CHECKPOINT_DIR,
committed with per-file digests once every rank's save returned (launcher.framework_checkpoint).
Data order is the loop's: a loop that derives its batches from `step` resumes exactly.

TensorBoard: the Accelerator is made before `Run`, so the trainer passes the directory itself:
`Accelerator(log_with="tensorboard", project_dir=tensorboard_project_dir())` writes
`accelerator.log(...)` values where the namespace's viewer looks (launcher.events).
"""

from __future__ import annotations

import os
from typing import Any

from .. import events
from ._loop import StepLoop


def tensorboard_project_dir() -> str | None:
    """`project_dir` of an Accelerator that logs with TensorBoard: `accelerate/` in the job's event
    directory (None when the workload turned event files off)."""
    directory = events.tensorboard_dir()
    return None if directory is None else os.path.join(directory, "accelerate")


class Run(StepLoop):
    def __init__(self, accelerator: Any):
        super().__init__()
        self.accelerator = accelerator
        if accelerator.project_configuration.automatic_checkpoint_naming:
            # save_state would ignore the directory it is given and write project_dir/checkpoints
            self.worker.config_error("ProjectConfiguration(automatic_checkpoint_naming=True) writes checkpoints where "
                                     "the launcher cannot commit them: leave it False (the launcher names them)")
        self.start_step = self._restore()

    def _restore(self) -> int:
        info = self.worker.select_resume("accelerate")
        if info is None:
            return 0
        self.accelerator.load_state(info.path)
        return info.step

    def _save(self, step: int, *, wait: bool) -> None:
        w = self.worker
        path = os.path.join(w.checkpoint_dir, f"checkpoint_{step}")
        w.fresh_checkpoint_dir(path, step)
        self.accelerator.save_state(path)
        w.commit(path, step, framework="accelerate")
