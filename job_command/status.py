"""`gpu-training job status NAME`: one job's state, read from the objects the cluster keeps and the
launcher's JSON log lines. Pure: the caller fetches (job_command/cluster.py), this judges and words.

- Kueue's Workload (kueue.x-k8s.io/v1beta2, v0.19.2; labelled kueue.x-k8s.io/job-uid=<JobSet uid>,
  pkg/controller/jobframework/reconciler.go ConstructWorkload): whether the gang has quota
  (condition QuotaReserved), passed its admission checks (status.admissionChecks[]: the gang's
  ProvisioningRequest) and was admitted (condition Admitted); why it waits is the message of the
  first of these that is not true. `spec.active: false` is a stop (condition Evicted, reason
  Deactivated: site/content/en/docs/concepts/workload.md, "Active").
- The JobSet (jobset.x-k8s.io/v1alpha2, v0.12.0): conditions Completed and Failed end it;
  status.restarts counts the gang's restarts.
- The launcher's lines (trainer/launcher/progress.py, log_line.py; read by verify/progress_log.py,
  which scripts/verify uses too): `trainer_start` (steps, start_step), `step` (step, loss,
  steps_per_s), `checkpoint_saved` (step: a checkpoint is announced once committed), `stopped`,
  `training_complete`, and `launcher_start` (restart_attempt). Global rank 0 writes the step lines,
  on whichever pod it runs, so the lines of every pod are read together.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from components.workload.queues import GANG_PROVISIONING
from verify.progress_log import CHECKPOINT_SAVED, STEP, TRAINER_START, Event, current_run, parse_events

LAUNCHER_START = "launcher_start"
# kueue v0.19.2 apis/kueue/v1beta2/workload_types.go: condition types and the Evicted reason of a stop.
QUOTA_RESERVED, ADMITTED, EVICTED = "QuotaReserved", "Admitted", "Evicted"
# CheckState values (same file): Ready passes; Pending, Retry and Rejected hold the gang.
CHECK_READY = "Ready"
CHECK_MEANING = {GANG_PROVISIONING: "the cluster autoscaler brings up all the gang's nodes at once: a ProvisioningRequest"}


class JobState(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"
    NOT_FOUND = "not found"


@dataclass(frozen=True)
class PodLine:
    name: str
    node_index: str
    phase: str
    node: str
    restarts: int
    detail: str = ""
    """The trainer container's waiting or terminated reason (and exit code), where it has one."""


@dataclass(frozen=True)
class Progress:
    step: int | None = None
    total_steps: int | None = None
    steps_per_s: float | None = None
    eta_s: float | None = None
    loss: float | None = None
    checkpoint_step: int | None = None
    checkpoint_age_s: float | None = None
    last_event: str | None = None


@dataclass(frozen=True)
class JobStatus:
    name: str
    state: JobState
    why: tuple[str, ...] = ()
    """Why it waits, stopped or failed: Kueue's and the JobSet's own messages."""
    pods: tuple[PodLine, ...] = ()
    progress: Progress = field(default_factory=Progress)
    restarts: int = 0
    node_hours: float = 0.0
    cost_to_date_usd: float | None = None


def parse_time(text: str | None) -> float | None:
    """An RFC 3339 time of the API (`2026-12-06T16:10:00Z`) as Unix seconds."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _true(obj: dict[str, Any] | None, kind: str) -> bool:
    condition = _condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def classify(jobset: dict[str, Any] | None, workload: dict[str, Any] | None) -> tuple[JobState, tuple[str, ...]]:
    """The job's state and what explains it, from the JobSet and its Workload."""
    if jobset is None:
        return JobState.NOT_FOUND, ()
    for kind, state in (("Completed", JobState.FINISHED), ("Failed", JobState.FAILED)):
        if _true(jobset, kind):
            return state, tuple(filter(None, [_said(_condition(jobset, kind))]))
    if workload is not None and (workload.get("spec") or {}).get("active") is False:
        evicted = _condition(workload, EVICTED)
        return JobState.STOPPED, tuple(filter(None, [_said(evicted) if evicted else "stopped (spec.active: false)"]))
    if workload is None:
        return JobState.WAITING, ("Kueue has not made a Workload for it yet (is the LocalQueue there?)",)
    if _true(workload, ADMITTED):
        return JobState.RUNNING, ()
    return JobState.WAITING, _waiting_reasons(workload)


def _said(condition: dict[str, Any] | None) -> str:
    if not condition:
        return ""
    reason, message = condition.get("reason") or "", condition.get("message") or ""
    return f"{reason}: {message}" if reason and message else reason or message


def _waiting_reasons(workload: dict[str, Any]) -> tuple[str, ...]:
    """Quota first (no check starts before it), then each admission check that has not passed."""
    reasons = []
    if _true(workload, EVICTED):
        reasons.append(f"evicted, requeued: {_said(_condition(workload, EVICTED))}")
    if not _true(workload, QUOTA_RESERVED):
        # Kueue runs the admission checks only once quota is reserved (concepts/admission_check).
        reasons.append(f"quota: {_said(_condition(workload, QUOTA_RESERVED)) or 'not evaluated yet'}")
        return tuple(reasons)
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        if check.get("state") != CHECK_READY:
            what = CHECK_MEANING.get(check.get("name", ""), "")
            reasons.append(f"admission check {check.get('name')}{f' ({what})' if what else ''}: {check.get('state')}"
                           + (f": {check['message']}" if check.get("message") else ""))
    return tuple(reasons) or (f"not admitted: {_said(_condition(workload, ADMITTED)) or 'no reason given yet'}",)


def pod_lines(pods: list[dict[str, Any]]) -> tuple[PodLine, ...]:
    lines = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        labels = pod["metadata"].get("labels") or {}
        status = pod.get("status") or {}
        trainer = next((c for c in status.get("containerStatuses") or [] if c.get("name") == "trainer"), {})
        state = trainer.get("state") or {}
        detail = ""
        if "waiting" in state:
            detail = state["waiting"].get("reason") or ""
        elif "terminated" in state:
            detail = f"{state['terminated'].get('reason') or 'terminated'} (exit {state['terminated'].get('exitCode')})"
        lines.append(PodLine(pod["metadata"]["name"], labels.get("batch.kubernetes.io/job-completion-index", "?"),
                             status.get("phase") or "Unknown", (pod.get("spec") or {}).get("nodeName") or "-",
                             int(trainer.get("restartCount") or 0), detail))
    return tuple(lines)


def node_hours(pods: list[dict[str, Any]], now: float) -> float:
    """One node per pod, from the pod's start to its trainer's end (or now): what the current gang
    ran. Pods of earlier restarts are gone from the API and not counted (a lower bound)."""
    total = 0.0
    for pod in pods:
        status = pod.get("status") or {}
        start = parse_time(status.get("startTime"))
        if start is None:
            continue
        trainer = next((c for c in status.get("containerStatuses") or [] if c.get("name") == "trainer"), {})
        end = parse_time(((trainer.get("state") or {}).get("terminated") or {}).get("finishedAt")) or now
        total += max(0.0, end - start) / 3600
    return total


def progress(events: list[Event], now: float) -> Progress:
    run = current_run(events)
    start = next((e for e in reversed(run) if e.name == TRAINER_START), None)
    steps = [e for e in run if e.name == STEP and isinstance(e.fields.get("step"), int)]
    saves = [e for e in run if e.name == CHECKPOINT_SAVED and isinstance(e.fields.get("step"), int)]
    total = start.fields.get("steps") if start is not None and isinstance(start.fields.get("steps"), int) else None
    last = steps[-1] if steps else None
    step = int(last.fields["step"]) if last else None
    rate = last.fields.get("steps_per_s") if last else None
    rate = float(rate) if isinstance(rate, int | float) and rate > 0 else None
    loss = next((float(e.fields["loss"]) for e in reversed(steps) if isinstance(e.fields.get("loss"), int | float)), None)
    eta = (total - step) / rate if total is not None and step is not None and rate else None
    saved = saves[-1] if saves else None
    age = max(0.0, now - saved.ts) if saved is not None and saved.ts is not None else None
    return Progress(step=step, total_steps=total, steps_per_s=rate, eta_s=None if eta is None else max(0.0, eta),
                    loss=None if loss is None or not math.isfinite(loss) else loss,
                    checkpoint_step=int(saved.fields["step"]) if saved else None, checkpoint_age_s=age,
                    last_event=run[-1].name if run else None)


def restarts(jobset: dict[str, Any] | None, events: list[Event]) -> int:
    """The gang's restarts: the JobSet's count, or the launcher's restart_attempt where that is higher."""
    counted = int(((jobset or {}).get("status") or {}).get("restarts") or 0)
    attempts = [e.fields["restart_attempt"] for e in events
                if e.name == LAUNCHER_START and isinstance(e.fields.get("restart_attempt"), int)]
    return max([counted, *attempts])


def job_status(name: str, *, jobset: dict[str, Any] | None, workload: dict[str, Any] | None,
               pods: list[dict[str, Any]], logs: dict[str, str], now: float,
               node_hourly_usd: float | None) -> JobStatus:
    """`logs`: pod name -> its trainer container's log text (any pods; rank 0's holds the steps)."""
    state, why = classify(jobset, workload)
    events = [event for pod, text in sorted(logs.items()) for event in parse_events(text, pod)]
    hours = node_hours(pods, now)
    return JobStatus(name=name, state=state, why=why, pods=pod_lines(pods), progress=progress(events, now),
                     restarts=restarts(jobset, events), node_hours=hours,
                     cost_to_date_usd=None if node_hourly_usd is None else hours * node_hourly_usd)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def render_text(status: JobStatus) -> str:
    lines = [f"job {status.name}: {status.state}"]
    lines += [f"  why: {reason}" for reason in status.why]
    p = status.progress
    running = status.state is JobState.RUNNING
    if p.step is not None:
        of = f"/{p.total_steps}" if p.total_steps is not None else ""
        rate = f"  {p.steps_per_s:g} steps/s" if p.steps_per_s and running else ""
        eta = f"  ETA {_duration(p.eta_s)}" if running else ""
        loss = f"  loss {p.loss:.4g}" if p.loss is not None else ""
        lines.append(f"  {'step' if running else 'last step'} {p.step}{of}{rate}{eta}{loss}")
    if p.checkpoint_step is not None:
        lines.append(f"  checkpoint: step {p.checkpoint_step}, committed {_duration(p.checkpoint_age_s)} ago")
    elif running:
        lines.append("  checkpoint: none committed in this run yet")
    lines.append(f"  restarts: {status.restarts}")
    cost = "not priced" if status.cost_to_date_usd is None else f"${status.cost_to_date_usd:.2f}"
    lines.append(f"  cost to date: {cost} ({status.node_hours:.2f} node-hours of the current pods)")
    if status.pods:
        lines.append("  pods:")
        lines += [f"    {pod.node_index:>3} {pod.name:<44} {pod.phase:<10} {pod.node:<28} restarts {pod.restarts}"
                  + (f"  {pod.detail}" if pod.detail else "") for pod in status.pods]
    lines += [f"  next: {hint}" for hint in _next_steps(status)]
    return "\n".join(lines)


def _next_steps(status: JobStatus) -> list[str]:
    name = status.name
    if status.state is JobState.STOPPED:
        return ["submit the same job file again (gpu-training job submit FILE --stack STACK): it resumes from its "
                "last checkpoint"]
    if status.state is JobState.FAILED:
        return [f"gpu-training job logs {name} --rank 0", "fix, then submit again: it resumes from its last checkpoint"]
    if status.state is JobState.NOT_FOUND:
        return ["gpu-training job list"]
    if status.state in (JobState.RUNNING, JobState.WAITING):
        return [f"gpu-training job logs {name} --follow", f"gpu-training job stop {name}"]
    return []


def render_json(status: JobStatus) -> str:
    return json.dumps(asdict(status), indent=2, sort_keys=True, default=str)
