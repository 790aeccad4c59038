"""The parts of the kind end-to-end job (.github/workflows/pull-request.yml `job-e2e`) that run
here: the tenancy it applies (offline/kind_tenancy.py) is valid against the Kubernetes schemas of
kind's node (kindest/node v1.36.4) and the vendored CRDs, keeps the planned objects as planned,
leaves nothing out silently, and gives the team member exactly the rights the docs list; the job
file it submits passes the command's dry run. The workflow itself has not run: no Docker here."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from crd_schemas import CRD_GROUPS, validate_custom_resource
from stack_configs import ROOT

from offline.kind_tenancy import KEPT, LEFT_OUT, TEAM_MEMBER, kind_tenancy, planned_manifests
from offline.plan import write_plan

TEAM, PLATFORM = "team-vision-prod", "prod"
# The node image the workflow pins (kind v0.33.0's release notes list it).
KIND_KUBERNETES = "1.36.0"
WORKFLOW = ROOT / ".github" / "workflows" / "pull-request.yml"


@pytest.fixture(scope="module")
def plans(plan_of, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("plans")
    for stack in (TEAM, PLATFORM):
        write_plan(plan_of(stack), root / stack)
    return root / TEAM, root / PLATFORM


def test_every_object_applied_on_kind_is_valid(plans):
    kept, _ = kind_tenancy(*plans)
    assert {m["kind"] for m in kept} >= {"Namespace", "ClusterQueue", "LocalQueue", "ResourceFlavor", "ConfigMap",
                                         "Role", "RoleBinding", "PersistentVolumeClaim"}
    for manifest in kept:
        if manifest["apiVersion"].split("/")[0] in CRD_GROUPS:
            assert validate_custom_resource(manifest) == [], manifest["metadata"]["name"]
        else:
            kubernetes_validate.validate(manifest, KIND_KUBERNETES, strict=True)


def test_the_plans_objects_are_applied_as_planned_but_the_queues_admission_checks(plans):
    kept, left_out = kind_tenancy(*plans)
    planned = {(m["kind"], m["metadata"]["name"]): m for m in planned_manifests(plans[0])}
    for manifest in kept:
        original = planned.get((manifest["kind"], manifest["metadata"]["name"]))
        if original is None or manifest["kind"] == "PersistentVolumeClaim":
            continue  # a platform flavor, a stand-in claim, or the team member's rights
        if manifest["kind"] == "ClusterQueue":
            assert "admissionChecksStrategy" in original["spec"] and "admissionChecksStrategy" not in manifest["spec"]
            original = {**original, "spec": {k: v for k, v in original["spec"].items() if k != "admissionChecksStrategy"}}
        assert manifest == original
    # Every planned object is either applied or named with its reason.
    named = {line.split(":")[0] for line in left_out}
    applied = {f"{m['kind']}/{m['metadata']['name']}" for m in kept}
    assert {f"{kind}/{name}" for kind, name in planned} <= named | applied
    assert "ConfigMap/gpu-training-job-context" in applied and "JobSet/vision-finetune" in named


def test_every_kind_the_team_plans_is_kept_or_left_out_with_its_reason(plans):
    """A kind new to the team's plan must be placed on purpose (CONTRIBUTING.md, "Add a Kubernetes
    object"): without this it would be left out of the kind job silently, with a generic reason."""
    planned = {m["kind"] for m in planned_manifests(plans[0])}
    unplaced = sorted(planned - set(KEPT) - set(LEFT_OUT))
    assert not unplaced, (f"kinds the team plans that offline/kind_tenancy.py neither keeps nor leaves out: {unplaced}. "
                          "Fix: add each to KEPT (applied on kind, in apply order) or to LEFT_OUT with why")


def test_the_queue_finds_its_flavors_and_the_namespace_comes_first(plans):
    kept, _ = kind_tenancy(*plans)
    assert kept[0]["kind"] == "Namespace"
    flavors = {m["metadata"]["name"] for m in kept if m["kind"] == "ResourceFlavor"}
    queue = next(m for m in kept if m["kind"] == "ClusterQueue")
    assert {f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]} == flavors
    assert [m["kind"] for m in kept].index("ResourceFlavor") < [m["kind"] for m in kept].index("ClusterQueue")
    assert set(KEPT) >= {m["kind"] for m in kept[:-2]}  # the stand-in claims last


def _docs_rbac_rows() -> set[tuple[str, str, str]]:
    """(resource, group, verb) of docs/run-your-first-job.md's table of what the command needs."""
    text = (ROOT / "docs" / "run-your-first-job.md").read_text()
    rows = set()
    for match in re.finditer(r"^\| `([\w/]+)` \(([\w.-]+)\) \| ([^|]+)\|", text, flags=re.M):
        resource, group, verbs = match[1], "" if match[2] == "core" else match[2], match[3]
        for verb in re.findall(r"\b(create|get|list|watch|delete|patch|update)\b", verbs.split("(")[0]):
            rows.add((resource, group, verb))
    return rows


def test_the_team_member_gets_exactly_what_the_docs_say_the_command_needs(plans):
    kept, _ = kind_tenancy(*plans)
    (role,) = [m for m in kept if m["kind"] == "Role"]
    assert role["metadata"]["name"] == TEAM_MEMBER  # the planned Role, not a stand-in
    granted = {(resource, group, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    assert granted == _docs_rbac_rows()
    bindings = {m["metadata"]["name"]: m for m in kept if m["kind"] == "RoleBinding"}
    assert {b["roleRef"]["name"] for b in bindings.values()} == {TEAM_MEMBER}
    assert bindings[f"{TEAM_MEMBER}-on-kind"]["subjects"][0]["kind"] == "ServiceAccount"


def test_the_workflows_job_file_passes_the_commands_dry_run(tmp_path, capfd):
    from job_command.cli import main
    from job_command.policy import PolicyVerdict
    from job_command.seams import Seams

    job_step = next(step["run"] for step in yaml.safe_load(WORKFLOW.read_text())["jobs"]["job-e2e"]["steps"]
                    if step.get("id") == "job-file")
    job_text = job_step.split("<<EOF\n", 1)[1].split("\nEOF", 1)[0].replace("${DIGEST}", "sha256:" + "1" * 64)
    path = tmp_path / "job.yaml"
    path.write_text(job_text)
    code = main(["job", "submit", str(path), "--stack", TEAM, "--dry-run"],
                Seams(connect=lambda _: pytest.fail("a dry run connected"),
                      policy=lambda stack, job: PolicyVerdict(False, "not judged here")))
    assert code == 0, capfd.readouterr().err


def test_the_workflow_installs_the_charts_the_platform_pins_on_the_kubernetes_checked_here():
    from components.workload.controllers import JOBSET_VERSION, KUEUE_VERSION

    env = yaml.safe_load(WORKFLOW.read_text())["jobs"]["job-e2e"]["env"]
    assert (env["JOBSET_VERSION"], env["KUEUE_VERSION"]) == (JOBSET_VERSION, KUEUE_VERSION)
    pinned = re.fullmatch(r"kindest/node:v(\d+\.\d+)\.\d+@sha256:[0-9a-f]{64}", env["KIND_NODE_IMAGE"])
    assert pinned and pinned[1] == KIND_KUBERNETES.rsplit(".", 1)[0]
