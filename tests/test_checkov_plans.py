"""checkov's AWS checks over every plan (tests/checkov_plan.py): each finding is one of the
deliberate exceptions below, each justified beside its resource and in docs/upgrading-and-pins.md
("Security checks we deliberately do not meet"). A new finding fails here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from checkov_plan import terraform_plan
from stack_configs import PLATFORM_STACKS, ROOT

# check -> Terraform resource names (their Pulumi names, `-` as `_`) that may fail it.
JUSTIFIED = {
    # Cross-region replication and event notifications: no bucket (state/logging: bootstrap/state.py;
    # data: components/data/buckets.py, access_logs.py).
    "CKV_AWS_144": {"state_bucket", "state_access_logs", "storage_buckets_datasets", "storage_buckets_artifacts",
                    "storage_buckets_access_logs"},
    "CKV2_AWS_62": {"state_bucket", "state_access_logs", "storage_buckets_datasets", "storage_buckets_artifacts",
                    "storage_buckets_access_logs"},
    # Log delivery writes SSE-S3 only (components/data/access_logs.py).
    "CKV_AWS_145": {"state_access_logs", "storage_buckets_access_logs"},
    # A boundary grants nothing (bootstrap/ci_identity.py). The Load Balancer Controller's policy is
    # its published one, verbatim, under the boundary (components/cluster/load_balancer_controller.py).
    "CKV_AWS_290": {"ci_boundary_dev", "ci_boundary_staging", "ci_boundary_prod", "load_balancer_controller_policy"},
    "CKV_AWS_355": {"load_balancer_controller_policy"},
    # Retention chosen per group (components/observability/monitoring.py, network/vpc.py, cluster/control_plane.py).
    "CKV_AWS_338": {"cluster_control_plane_logs", "network_flow_logs", "observability_logs_application",
                    "observability_logs_dataplane", "observability_logs_host", "observability_logs_performance"},
    # checkov's version list ends before the pinned minor; dev's allow-listed public endpoint
    # (components/cluster/control_plane.py).
    "CKV_AWS_339": {"cluster_eks"},
    "CKV_AWS_39": {"cluster_eks"},
    "CKV_AWS_38": {"cluster_eks"},
    # Third-party API tokens (components/secrets/store.py).
    "CKV2_AWS_57": {"secrets_hf_token", "secrets_wandb_api_key", "team_secrets_wandb_api_key"},
    # The runners it is for are launched outside the stacks (components/network/ci_runner.py); the
    # viewer's ALB is the Load Balancer Controller's, outside the plan (components/network/security_groups.py).
    "CKV2_AWS_5": {"ci_runner_group", "security_groups_viewer_alb"},
    # A private route table with a peering route may hold no 0.0.0.0/0 route at all, whatever its
    # target: ours goes to the NAT gateway, the peering route names the peer's range alone
    # (components/network/vpc.py, MultiKueue's manager and worker).
    # The platform contract is a String parameter, not a SecureString: it holds no secret (a
    # contract with one is refused), and team deploy roles read it without any KMS grant
    # (components/platform.py _publish_contract).
    "CKV2_AWS_34": {"platform_contract"},
    "CKV2_AWS_44": {f"network_private_rt_{zone}" for zone in (
        "us_east_1a", "us_east_1b", "us_east_1c", "us_west_2a", "us_west_2b", "us_west_2c",
        "us_east_2a", "us_east_2b", "us_east_2c")},
}


SCANNED = ("bootstrap", *PLATFORM_STACKS, "team-vision-prod")


def checkov_findings(tmp_path, plans: dict[str, list[dict]]) -> dict[str, list[tuple[str, str]]]:
    """{stack: [(check id, resource name)]} of each failed check, from one checkov run over every
    plan (its start-up, about 12 s, is most of a run: once, not once per stack)."""
    checkov = os.environ.get("CHECKOV") or str(ROOT / ".venv-checkov" / "bin" / "checkov")
    if not os.path.exists(checkov):
        pytest.fail("checkov is not installed: run `make test` (it builds .venv-checkov)")
    files = []
    for stack, records in plans.items():
        (tmp_path / f"{stack}.json").write_text(json.dumps(terraform_plan(records)))
        files += ["-f", str(tmp_path / f"{stack}.json")]
    result = subprocess.run([checkov, *files, "--framework", "terraform_plan", "--skip-download",
                             "--compact", "--output", "json"], capture_output=True, text=True, timeout=600)
    report = json.loads(result.stdout)
    report = report[0] if isinstance(report, list) else report
    assert report["summary"]["parsing_errors"] == 0
    # Passed checks are listed too (no --quiet), so a plan checkov read nothing of is seen.
    checked = {Path(c["file_path"]).stem for c in report["results"]["passed_checks"] + report["results"]["failed_checks"]}
    assert checked == set(plans), f"checkov checked nothing in {sorted(set(plans) - checked)}"
    findings: dict[str, list[tuple[str, str]]] = {stack: [] for stack in plans}
    for failed in report["results"]["failed_checks"]:
        findings[Path(failed["file_path"]).stem].append((failed["check_id"], failed["resource"].split(".", 1)[1]))
    return findings


def test_every_checkov_finding_on_every_plan_is_a_justified_exception(tmp_path, plan_of):
    findings = checkov_findings(tmp_path, {stack: plan_of(stack).resources for stack in SCANNED})
    unjustified = {stack: sorted(f for f in found if f[1] not in JUSTIFIED.get(f[0], set()))
                   for stack, found in findings.items()}
    assert not any(unjustified.values()), \
        f"fix these, or justify them beside the resource and in JUSTIFIED: { {s: f for s, f in unjustified.items() if f} }"
