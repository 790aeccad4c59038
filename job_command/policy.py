"""The policy pack's verdict on an ad-hoc job, before anything reaches the cluster.

The pack (policy/) judges what a stack would create; so the job is planned as what it would be
in its team stack, one more entry of training.jobs (offline/plan.py `synthesize`, the plan CI
checks), and the pack's rules run over that plan exactly as `make policy` runs them
(policy/check_plans.py, in the pack's own environment policy/venv: pulumi-policy needs another
protobuf than the program). A mandatory violation refuses the job.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from job_command.jobfile import stack_with_job
from offline.plan import ROOT, synthesize

POLICY_PYTHON = ROOT / "policy" / "venv" / "bin" / "python"
CHECK_PLANS = ROOT / "policy" / "check_plans.py"
# check_plans.py's exit codes: 0 none mandatory, 1 a mandatory violation, 2 an unreadable plan.
BLOCKED = 1


class PolicyUnavailableError(Exception):
    """The pack's environment is missing: nothing can be judged, so nothing is submitted."""


@dataclass(frozen=True)
class PolicyVerdict:
    refused: bool
    report: str
    """check_plans.py's lines: every violation with its level, policy and resource."""


def plan_with_job(stack: str, job: dict[str, Any]) -> list[dict[str, Any]]:
    """The team stack's plan records (resources.json) with `job` added to its training.jobs."""
    combined = stack_with_job(stack, job)
    return synthesize(stack, overrides={f"{combined.project}:training": combined.training}).resources


def pack_verdict(stack: str, job: dict[str, Any]) -> PolicyVerdict:
    """Run the pack over the plan of `stack` with `job` added (PolicyUnavailableError without policy/venv)."""
    if not POLICY_PYTHON.is_file():
        raise PolicyUnavailableError(f"the policy pack's environment {POLICY_PYTHON.relative_to(ROOT)} is missing. "
                                     "Fix: make policy-venv")
    records = plan_with_job(stack, job)
    with tempfile.TemporaryDirectory(prefix="gpu-training-job-") as directory:
        plan_dir = Path(directory) / stack
        plan_dir.mkdir()
        (plan_dir / "resources.json").write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
        result = subprocess.run([str(POLICY_PYTHON), str(CHECK_PLANS), str(plan_dir)], capture_output=True, text=True,
                                check=False, cwd=ROOT / "policy", timeout=300)
    report = (result.stdout + result.stderr).replace(str(plan_dir), f"plan of {stack} with the job").strip()
    if result.returncode not in (0, BLOCKED):
        raise PolicyUnavailableError(f"the policy pack could not read the plan: {report}")
    return PolicyVerdict(result.returncode == BLOCKED, report)
