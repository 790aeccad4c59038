"""The memory checkpoint tier (launcher.memory_tier): its settings, its schedule beside the durable one
(a memory copy is never the only copy for longer than one durable interval, also across an in-place
restart), the write bound (two copies at rest, never more with the one being written), the resume
choice (the newest copy every node holds and verified wins; a node that crashed mid-write shares the
one before; a corrupted copy is skipped for the next, then the shared one), and, on the 2-node
localhost gang of the plain integration, a crash recovered in place from the memory copies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from launcher import checkpoint, memory_tier
from launcher.schedule import CheckpointSchedule
from test_bring_your_own_trainer import STEPS, gang_of, newest_complete
from test_inplace_restarts import _stepped_after_restart, _workers
from trainer_testlib import last_step, requires_torch

pytestmark = requires_torch
__all__ = ["gang_of"]  # the fixture


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_settings_read_from_the_environment_and_bad_ones_name_the_variable():
    assert memory_tier.from_env({}) is None
    tier = memory_tier.from_env({memory_tier.DIR_VAR: "/mem", memory_tier.INTERVAL_VAR: "30"})
    assert tier == memory_tier.MemoryTier("/mem", 30.0)
    with pytest.raises(memory_tier.MemoryTierError, match=memory_tier.INTERVAL_VAR + " is unset"):
        memory_tier.from_env({memory_tier.DIR_VAR: "/mem"})
    with pytest.raises(memory_tier.MemoryTierError, match=memory_tier.DIR_VAR + " is unset"):
        memory_tier.from_env({memory_tier.INTERVAL_VAR: "30"})
    for bad in ("0", "-5", "soon", "nan", "inf"):
        with pytest.raises(memory_tier.MemoryTierError, match=f"{memory_tier.INTERVAL_VAR} must be .* got '{bad}'"):
            memory_tier.from_env({memory_tier.DIR_VAR: "/mem", memory_tier.INTERVAL_VAR: bad})


def _run(clock: Clock, durable: CheckpointSchedule, tier: memory_tier.TierSchedule, steps: range,
         saves: list[tuple[str, int, float]]) -> None:
    """Rank 0's boundary decisions over `steps`, one second a step (worker.Worker.boundary)."""
    for step in steps:
        clock.now += 1.0
        if durable.due(step):
            durable.record(step, 0.01)
            saves.append(("durable", step, clock.now))
        elif tier.due(step):
            tier.record(step)
            saves.append(("memory", step, clock.now))


def _longest_only_copy(saves: list[tuple[str, int, float]], end: float) -> float:
    """The longest time the newest checkpoint of any moment was a memory copy with no durable copy
    of that step or a later one."""
    longest, exposed_since = 0.0, None
    for kind, _step, at in [*saves, ("end", 0, end)]:
        if exposed_since is not None and kind != "memory":
            longest = max(longest, at - exposed_since)
            exposed_since = None
        if kind == "memory" and exposed_since is None:
            exposed_since = at
    return longest


def test_memory_saves_come_between_durable_ones_and_never_move_them():
    clock = Clock()
    durable = CheckpointSchedule(mtbf_s=3600, interval_override_s=10, clock=clock)
    tier = memory_tier.TierSchedule(durable, 3)
    saves: list[tuple[str, int, float]] = []
    _run(clock, durable, tier, range(1, 41), saves)
    assert [s for k, s, _ in saves if k == "durable"] == [10, 20, 30, 40]  # as without the tier
    assert [s for k, s, _ in saves if k == "memory"] == [3, 6, 9, 13, 16, 19, 23, 26, 29, 33, 36, 39]
    assert _longest_only_copy(saves, clock.now) <= 10


def test_a_memory_copy_is_never_the_only_copy_for_longer_than_a_durable_interval_across_a_restart():
    """An in-place restart 8 s after the last durable save resumes from a memory copy: the new workers'
    durable schedule goes on from that save (`anchor`), so the copy is persisted 2 s later, not 10."""
    for anchored in (True, False):
        clock = Clock()  # its 1000.0 is 5000.0 on the wall clock the markers use
        durable = CheckpointSchedule(mtbf_s=3600, interval_override_s=10, clock=clock)
        saves: list[tuple[str, int, float]] = []
        _run(clock, durable, memory_tier.TierSchedule(durable, 3), range(1, 18), saves)
        assert [(k, s) for k, s, _ in saves[-3:]] == [("durable", 10), ("memory", 13), ("memory", 16)]
        newest_durable = checkpoint.CheckpointInfo(10, "/shared/step-10", True, "", {"created_unix": 5010.0})
        clock.now += 1  # the crash and the restart round
        restarted = CheckpointSchedule(mtbf_s=3600, interval_override_s=10, clock=clock, start_step=16)
        if anchored:
            memory_tier.anchor(restarted, newest_durable, now_unix=lambda c=clock: 4000.0 + c.now)
        _run(clock, restarted, memory_tier.TierSchedule(restarted, 3), range(17, 40), saves)
        longest = _longest_only_copy(saves, clock.now)
        assert (longest <= 10) == anchored, (anchored, longest, saves)



def test_in_step_mode_the_durable_schedule_goes_on_from_the_newest_durable_step():
    """Durable saves every 8 steps, the last at step 8, a resume from memory at step 13: the next
    durable save is at 16; counted from the resumed step it came at 21, memory the only copy of 13 steps."""
    for anchored in (True, False):
        restarted = CheckpointSchedule(mtbf_s=3600, every_steps=8, start_step=13)
        if anchored:
            memory_tier.anchor(restarted, checkpoint.CheckpointInfo(8, "/shared/step-8", True, "", {"created_unix": 0.0}))
        first_durable = next(step for step in range(14, 40) if restarted.due(step))
        assert first_durable == (16 if anchored else 21), (anchored, first_durable)

def _copies(root: Path, steps: list[int], run_id: str = "") -> None:
    import torch

    for step in steps:
        copies = memory_tier.MemoryCopies(memory_tier.MemoryTier(str(root), 1.0), writes=True)
        copies.save(step, {"step": step, "w": torch.full((64,), float(step))})
        copies.close()


class Gathered:
    """The other ranks' answers to an all-gather, after this rank's."""

    def __init__(self, *others: object):
        self.others = others

    def all_gather(self, value: object) -> list[object]:
        return [value, *self.others]

    def agree(self, ok: bool) -> bool:
        return ok


def test_the_newest_verified_copy_wins_memory_or_shared(tmp_path):
    import torch

    shared, memory = tmp_path / "shared", tmp_path / "memory"
    checkpoint.save(str(shared), 8, {"step": 8, "w": torch.zeros(4)})
    _copies(memory, [3, 6, 12])
    tier = memory_tier.MemoryTier(str(memory), 1.0)
    assert [c.step for c in checkpoint.list_checkpoints(str(memory))] == [12, 6]  # two copies at rest
    chosen = memory_tier.choose(tier, str(shared), Gathered([12]), local_rank=0)
    assert chosen is not None and chosen.path == str(memory / checkpoint.step_dir_name(12))
    assert memory_tier.choose(tier, str(shared), Gathered([]), local_rank=0) is None  # a node without it
    checkpoint.save(str(shared), 16, {"step": 16, "w": torch.zeros(4)})
    assert memory_tier.choose(tier, str(shared), Gathered([]), local_rank=0) is None  # the shared one is newer


def test_a_node_that_failed_while_writing_a_copy_resumes_the_gang_from_the_one_before(tmp_path):
    """This node finished its copy of step 12; the peer's node died while writing its own, so it holds
    6 and a step-12 directory without its marker. Both hold 6: the gang resumes from it, not from the
    shared copy of step 2 (a choice by each node's newest copy alone would find no common step)."""
    import torch

    shared, memory = tmp_path / "shared", tmp_path / "memory"
    checkpoint.save(str(shared), 2, {"step": 2, "w": torch.zeros(4)})
    _copies(memory, [6, 12])
    tier = memory_tier.MemoryTier(str(memory), 1.0)
    chosen = memory_tier.choose(tier, str(shared), Gathered([6]), local_rank=0)
    assert chosen is not None and chosen.step == 6
    assert memory_tier.newest_common([[12, 6], [6], [12, 6]]) == [6]
    assert memory_tier.newest_common([[12, 6], [12, 6]]) == [12, 6]
    assert memory_tier.newest_common([[12], [6]]) == []


def test_the_older_copy_goes_before_the_next_is_written(tmp_path, monkeypatch):
    """The tier never holds more than COPIES_WRITTEN copies, the one being written included: what the
    platform sizes the pod's memory volume for."""
    import torch

    memory = tmp_path / "memory"
    held: list[int] = []
    write = checkpoint.atomic_write_fd

    def counting(path, writer):
        held.append(len(checkpoint.list_checkpoints(str(memory))))
        return write(path, writer)

    monkeypatch.setattr(checkpoint, "atomic_write_fd", counting)
    copies = memory_tier.MemoryCopies(memory_tier.MemoryTier(str(memory), 1.0), writes=True)
    for step in (3, 6, 9, 12):
        copies.save(step, {"step": step, "w": torch.full((64,), float(step))})
    copies.close()
    assert max(held) == memory_tier.COPIES_WRITTEN, held  # each write: its file, then its marker
    assert [c.step for c in checkpoint.complete_checkpoints(str(memory))] == [12, 9]


def test_a_corrupted_memory_copy_is_rejected_and_the_shared_one_chosen(tmp_path):
    import torch

    shared, memory = tmp_path / "shared", tmp_path / "memory"
    checkpoint.save(str(shared), 8, {"step": 8, "w": torch.zeros(4)})
    _copies(memory, [12])
    copy = memory / checkpoint.step_dir_name(12)
    data = copy / checkpoint.shard_name(0)
    raw = bytearray(data.read_bytes())
    raw[-3] ^= 0xFF  # same size: only the digest tells
    data.write_bytes(bytes(raw))
    tier = memory_tier.MemoryTier(str(memory), 1.0)
    skipped: list[str] = []
    peer_looked_only = memory_tier.choose(tier, str(shared), Gathered([12]), local_rank=1)
    assert peer_looked_only is not None  # a peer on the node does not hash: its local rank 0 does
    assert memory_tier.choose(tier, str(shared), Gathered([12]), local_rank=0,
                              on_skip=lambda path, e: skipped.append(f"{path}: {e}")) is None
    assert skipped and "mismatch" in skipped[0]
    assert (copy / checkpoint.REJECTED_MARKER).exists() and not (copy / checkpoint.MARKER).exists()
    assert memory_tier.choose(tier, str(shared), Gathered([]), local_rank=1) is None  # rejected for every rank


class PeerRejectsFirst(Gathered):
    """A peer node's local rank 0 finds the first step it is asked about corrupted."""

    def __init__(self, *others: object):
        super().__init__(*others)
        self.asked = 0

    def agree(self, ok: bool) -> bool:
        self.asked += 1
        return ok and self.asked > 1


def test_a_copy_a_peer_node_rejects_moves_every_rank_to_the_next_common_step(tmp_path, monkeypatch):
    import torch

    shared, memory = tmp_path / "shared", tmp_path / "memory"
    checkpoint.save(str(shared), 2, {"step": 2, "w": torch.zeros(4)})
    _copies(memory, [6, 12])
    tier = memory_tier.MemoryTier(str(memory), 1.0)
    peer = PeerRejectsFirst([12, 6])
    chosen = memory_tier.choose(tier, str(shared), peer, local_rank=1)
    assert (chosen.step if chosen else None, peer.asked) == (6, 2)  # one agreement per step tried, on every rank

    def unreadable(path, meta):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint, "verify_file", unreadable)
    skipped: list[str] = []
    assert memory_tier.choose(tier, str(shared), Gathered([12, 6]), local_rank=0,
                              on_skip=lambda path, e: skipped.append(path)) is None  # skipped, not raised
    assert len(skipped) == 2 and (memory / checkpoint.step_dir_name(12) / checkpoint.MARKER).exists()  # not rejected


def test_a_corrupted_newest_copy_falls_back_to_the_one_before(tmp_path):
    import torch

    shared, memory = tmp_path / "shared", tmp_path / "memory"
    checkpoint.save(str(shared), 2, {"step": 2, "w": torch.zeros(4)})
    _copies(memory, [6, 12])
    data = memory / checkpoint.step_dir_name(12) / checkpoint.shard_name(0)
    raw = bytearray(data.read_bytes())
    raw[-3] ^= 0xFF
    data.write_bytes(bytes(raw))
    chosen = memory_tier.choose(memory_tier.MemoryTier(str(memory), 1.0), str(shared), Gathered([12, 6]), local_rank=0)
    assert chosen is not None and chosen.step == 6


def test_a_resume_from_the_shared_copy_forgets_newer_memory_copies(tmp_path):
    memory = tmp_path / "memory"
    _copies(memory, [12])
    memory_tier.forget_newer(memory_tier.MemoryTier(str(memory), 1.0), 8)
    assert checkpoint.list_checkpoints(str(memory)) == []


# ------------------------------------------------------------------ the localhost gang

MEMORY_INTERVAL_S = "0.25"


def _memory_ahead(job, copies: int = 1) -> int | None:
    """The step of the newest memory copy every pod holds, when every pod holds the same newest
    `copies` and they are newer than the newest durable one, and no save has begun since (a step
    directory without its marker, in either tier)."""
    tiers = [checkpoint.list_checkpoints(str(d)) for d in (job.tmp / "checkpoints", *map(job.memory_dir, (0, 1)))]
    durable, *held = [[c.step for c in listed if c.complete] for listed in tiers]
    newest = {tuple(steps[:copies]) for steps in held}
    if len(newest) != 1 or len(steps := newest.pop()) < copies:
        return None
    if any(not c.complete and c.step > steps[0] for listed in tiers for c in listed):
        return None
    return steps[0] if not durable or steps[-1] > durable[0] else None


def _freeze_with_memory_ahead(job, copies: int = 1) -> tuple[list[int], int]:
    """Both pods' workers stopped (SIGSTOP: no save lands meanwhile) at a moment when both hold the same
    memory copy, newer than the newest durable checkpoint, and no newer save is under way: one the
    writer thread had begun would land on the pod that resumes and not on the crashed one, and the
    pods would hold different copies (memory_tier.choose then takes the shared one). (pids, step)"""
    deadline = time.monotonic() + 120
    while True:
        assert time.monotonic() < deadline, "\n".join(p.stderr_tail(15) for p in job.pods)
        if _memory_ahead(job, copies) is None:
            time.sleep(0.02)
            continue
        pids = [w for pod in job.pods for w in _workers(pod)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)  # the launchers route the lines the workers wrote before the stop
        step = _memory_ahead(job, copies)
        snapshots = [e["step"] for p in job.pods for e in p.of("checkpoint_in_memory") + p.of("checkpoint_saved")]
        if step is not None and max(snapshots, default=0) <= step:  # none taken for a write not begun yet
            return pids, step
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def _crash_pod1_resume_pod0(job, frozen: list[int]) -> None:
    crashed = set(_workers(job.pods[1]))
    for pid in frozen:
        os.kill(pid, signal.SIGKILL if pid in crashed else signal.SIGCONT)


def test_a_crash_recovers_in_place_from_the_memory_copy(gang_of):
    whole = gang_of("whole", "plain", {"steps": STEPS})
    whole.start()
    assert whole.wait() == [0, 0]
    baseline = whole.losses()

    job = gang_of("crash", "plain", {"steps": STEPS, "step_delay_s": 0.1}, PET_MAX_RESTARTS="2",
                  TRAIN_CHECKPOINT_EVERY_STEPS="8", TRAIN_MEMORY_CHECKPOINT_INTERVAL_S=MEMORY_INTERVAL_S)
    job.start()
    job.at_step(3)
    frozen, in_memory = _freeze_with_memory_ahead(job)
    _crash_pod1_resume_pod0(job, frozen)
    _stepped_after_restart(job)
    assert job.wait() == [0, 0]
    resumed = [e for p in job.pods for e in p.of("checkpoint_resumed")]
    assert resumed[0]["tier"] == "memory" and resumed[0]["step"] == in_memory, resumed
    memory_saves = [e["step"] for p in job.pods for e in p.of("checkpoint_in_memory")]
    assert memory_saves, "no memory copy was reported"
    final = job.losses()
    assert max(final) == STEPS
    for step, loss in final.items():
        assert loss == pytest.approx(baseline[step], rel=1e-5, abs=1e-6), f"step {step}"


def test_a_copy_one_node_did_not_finish_falls_back_to_the_one_before_in_place(gang_of):
    """Pod 1 dies while writing its newest copy (its marker never written), pod 0 finished the same
    step: both still hold the copy before it, and the gang resumes from that one, not from the start."""
    job = gang_of("unfinished", "plain", {"steps": STEPS, "step_delay_s": 0.1}, PET_MAX_RESTARTS="2",
                  TRAIN_CHECKPOINT_EVERY_STEPS="1000", TRAIN_MEMORY_CHECKPOINT_INTERVAL_S=MEMORY_INTERVAL_S)
    job.start()
    job.at_step(3)
    frozen, newest = _freeze_with_memory_ahead(job, copies=2)
    before = checkpoint.complete_checkpoints(str(job.memory_dir(1)))[1].step
    (job.memory_dir(1) / checkpoint.step_dir_name(newest) / checkpoint.MARKER).unlink()
    _crash_pod1_resume_pod0(job, frozen)
    _stepped_after_restart(job)
    assert job.wait() == [0, 0]
    resumed = [e for p in job.pods for e in p.of("checkpoint_resumed")]
    assert resumed[0]["tier"] == "memory" and resumed[0]["step"] == before < newest, resumed
    assert max(job.losses()) == STEPS


def test_a_corrupted_memory_copy_is_skipped_for_the_shared_one_in_place(gang_of):
    job = gang_of("corrupt", "plain", {"steps": STEPS, "step_delay_s": 0.1}, PET_MAX_RESTARTS="2",
                  TRAIN_CHECKPOINT_EVERY_STEPS="4", TRAIN_MEMORY_CHECKPOINT_INTERVAL_S=MEMORY_INTERVAL_S)
    job.start()
    job.at_step(5)
    frozen, in_memory = _freeze_with_memory_ahead(job)
    durable = newest_complete(job.tmp / "checkpoints").step
    # Every copy pod 0 holds past the durable step (the newest, and the one before it when it is newer
    # than the durable one too), so that no memory copy is left to fall back to.
    corrupted = [job.memory_dir(0) / checkpoint.step_dir_name(c.step)
                 for c in checkpoint.complete_checkpoints(str(job.memory_dir(0))) if c.step > durable]
    assert corrupted[0].name == checkpoint.step_dir_name(in_memory)
    for copy in corrupted:
        data = copy / checkpoint.shard_name(0)
        raw = bytearray(data.read_bytes())
        raw[-3] ^= 0xFF
        data.write_bytes(bytes(raw))
    _crash_pod1_resume_pod0(job, frozen)
    _stepped_after_restart(job)
    assert job.wait() == [0, 0]
    resumed = [e for p in job.pods for e in p.of("checkpoint_resumed")]
    assert resumed[0].get("tier") != "memory" and resumed[0]["step"] == durable, resumed
    skipped = [e for p in job.pods for e in p.of("checkpoint_skipped") if e.get("tier") == "memory"]
    assert [e["path"] for e in skipped] == [str(copy) for copy in corrupted], skipped  # both pods hold the same steps
    assert not any(copy.exists() for copy in corrupted)  # rejected, then forgotten: the run resumed from an older step


def test_the_example_trainer_recovers_a_crash_in_place_from_its_memory_copy(trainer_env, launch, tmp_path):
    """One pod of two workers (the node's local rank 0 writes and verifies, local rank 1 only looks), a
    durable checkpoint far away: the crash redoes at most the steps since the last memory copy; a stop
    afterwards still saves durably and exits 143."""
    from launcher import supervisor

    memory = tmp_path / "memory"
    env = trainer_env({"steps": 100000, "step_delay_s": 0.02}, TRAIN_CHECKPOINT_EVERY_STEPS=100000,
                      PET_MAX_RESTARTS=2, TRAIN_MEMORY_CHECKPOINT_DIR=memory,
                      TRAIN_MEMORY_CHECKPOINT_INTERVAL_S=MEMORY_INTERVAL_S)
    run = launch(env, "memory")
    def memory_copies(events: list[dict]) -> list[dict] | None:
        found = [e for e in events if e["event"] == "checkpoint_in_memory"]
        return found if len(found) >= 3 else None

    run.wait_for(memory_copies, 120, "three memory copies")
    workers = [w for t in supervisor.children_of(run.proc.pid, running=True)
               for w in supervisor.children_of(t, running=True)]
    assert len(workers) == 2, run.stderr_tail()
    os.kill(workers[1], signal.SIGKILL)
    resumed = run.wait_for(lambda ev: [e for e in ev if e["event"] == "checkpoint_resumed" and e.get("step")], 120,
                           "a resume after the crash")[0]
    assert resumed.get("tier") == "memory" and resumed["path"].startswith(str(memory)), resumed
    # Both rounds' workers write to torchrun's one stdout: what comes before the resume is the crashed round's.
    before = (events := run.events())[:events.index(resumed)]
    copies = [e["step"] for e in before if e["event"] == "checkpoint_in_memory"]
    # The newest copy, or the one before it when the newest was still being written (copies are written
    # in the background): the crash redoes only the steps since the last whole copy.
    assert resumed["step"] in copies[-2:], (resumed, copies[-3:])
    assert last_step(before) >= resumed["step"]
    assert checkpoint.latest_complete(env["TRAIN_CHECKPOINT_DIR"]) is None  # nothing durable yet: memory won
    run.wait_for(lambda ev: last_step(ev[ev.index(resumed):]) >= resumed["step"] + 3, 60, "steps after the resume")
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(timeout=120) == 143, run.stderr_tail()
    stopped = checkpoint.latest_complete(env["TRAIN_CHECKPOINT_DIR"])
    assert stopped is not None and stopped.step > resumed["step"]  # the stop's durable save, as without the tier
