"""A plain torchrun training loop (DDP or a single process). Two lines:

    from launcher.integrations.plain import Run
    for step in Run(model=model, optimizer=optimizer).steps(total_steps):   # was: range(total_steps)
        ...

Resume: the model, optimizer (and `scheduler`, `extra` state) and rank 0's CPU RNG state (set on
every rank; CUDA RNG states are not saved) from the newest verified checkpoint, in the launcher's
own format (launcher.checkpoint: written in the
background, only the copy to host memory stops the loop; replicated DDP state is written by
rank 0). Data order is the loop's: a loop that derives its batches from `step` resumes exactly.
With the memory tier on (TRAIN_MEMORY_CHECKPOINT_DIR, launcher.memory_tier), each node also keeps a
copy in the pod's memory at the short interval, and resumes from it when it is newer and verified.
"""

from __future__ import annotations

from typing import Any

from .. import checkpoint, framework_checkpoint, memory_tier
from ..collective import checkpoint_collective
from ._loop import StepLoop


class Run(StepLoop):
    def __init__(self, *, model: Any, optimizer: Any, scheduler: Any = None, extra: dict | None = None):
        super().__init__()
        self.model, self.optimizer, self.scheduler, self.extra = model, optimizer, scheduler, extra or {}
        w = self.worker
        w.ranks()  # every rank creates the stop-flag group first, then the checkpoint group
        self._checkpointer = checkpoint.AsyncCheckpointer(
            w.checkpoint_dir, rank=w.rank, world_size=w.world_size, keep=w.keep,
            collective=checkpoint_collective(w.world_size, w.collective_timeout_s))
        self._memory = memory_tier.MemoryCopies(w.memory, writes=w.local_rank == 0) if w.memory else None
        self.start_step = self._restore()
        prepare = getattr(self._checkpointer, "prepare", None)
        if prepare is not None:
            prepare(self._state(self.start_step))  # the first save blocks no longer than later ones
        if self._memory is not None:
            self._memory.prepare(self._state(self.start_step))

    def _state(self, step: int) -> dict:
        import torch

        state = {"step": step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "rng": torch.get_rng_state(), "extra": self.extra}
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        return state

    def _restore(self) -> int:
        import torch

        info = self.worker.select_memory_resume()  # the memory tier's copy, when newer and verified
        if info is None:
            info = self.worker.select_resume(framework_checkpoint.LAUNCHER)
        self.worker.forget_memory_copies_after(info.step if info else -1)
        if info is None:
            return 0
        state = checkpoint.load(info.path, rank=0, verify=False)  # select() verified every file
        self.model.load_state_dict(state["model"])
        checkpoint.load_optimizer_state(self.optimizer, state["optimizer"])  # not views of the loaded buffer
        if self.scheduler is not None and "scheduler" in state:
            self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        self.extra.update(state.get("extra") or {})
        return int(state["step"])

    def _save(self, step: int, *, wait: bool) -> None:
        self._checkpointer.poll()  # raises if the previous save failed
        self._checkpointer.save(step, self._state(step))
        if wait:
            self._checkpointer.wait()

    def _save_in_memory(self, step: int) -> float:
        return self._memory.save(step, self._state(step)) if self._memory is not None else 0.0

    def _settle(self) -> None:
        self._checkpointer.close()  # the save in flight, then the background prune
        if self._memory is not None:
            self._memory.close()
