"""Check results and the report: one line per check, and for a failure its likely cause and the
command that shows it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    # Measured, but nothing to judge it against (an NCCL number without a published reference).
    WARN = "warn"
    # Not run: it depends on a check that failed, or on something the stack does not have.
    SKIP = "skip"


@dataclass(frozen=True)
class Diagnosis:
    cause: str
    """The likely cause, as the check table of docs/verify.md states it."""
    command: str
    """The command that shows it."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    summary: str
    details: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None
    measurements: dict[str, object] = field(default_factory=dict)


def passed(name: str, summary: str, *details: str, **measurements: object) -> CheckResult:
    return CheckResult(name, Status.PASS, summary, details, None, measurements)


def failed(name: str, summary: str, diagnosis: Diagnosis, *details: str, **measurements: object) -> CheckResult:
    return CheckResult(name, Status.FAIL, summary, details, diagnosis, measurements)


def warned(name: str, summary: str, *details: str, **measurements: object) -> CheckResult:
    return CheckResult(name, Status.WARN, summary, details, None, measurements)


def skipped(name: str, summary: str) -> CheckResult:
    return CheckResult(name, Status.SKIP, summary)


def exit_code(results: list[CheckResult]) -> int:
    """0 when nothing failed, 1 when a check failed (warnings and skips do not fail a run)."""
    return 1 if any(r.status is Status.FAIL for r in results) else 0


def render_text(stack: str, results: list[CheckResult]) -> str:
    width = max((len(r.name) for r in results), default=0)
    lines = [f"verify {stack}"]
    for r in results:
        lines.append(f"  {r.status.value.upper():4}  {r.name:<{width}}  {r.summary}")
        lines.extend(f"        {'':<{width}}  - {d}" for d in r.details)
        if r.diagnosis:
            lines.append(f"        {'':<{width}}  likely cause: {r.diagnosis.cause}")
            lines.append(f"        {'':<{width}}  shows it:     {r.diagnosis.command}")
    counts = {s: sum(r.status is s for r in results) for s in Status}
    lines.append(f"{counts[Status.PASS]} passed, {counts[Status.FAIL]} failed, "
                 f"{counts[Status.WARN]} warnings, {counts[Status.SKIP]} skipped")
    return "\n".join(lines) + "\n"


def render_json(stack: str, results: list[CheckResult]) -> str:
    return json.dumps({
        "stack": stack,
        "ok": exit_code(results) == 0,
        "checks": [{**asdict(r), "status": r.status.value} for r in results],
    }, indent=2, default=str) + "\n"
