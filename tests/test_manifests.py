"""Every rendered Kubernetes manifest is valid and passes the security checks.

- built-in kinds: kubernetes-validate --strict for the cluster's Kubernetes minor version;
- custom resources (JobSet, Kueue, External Secrets): their CRD schemas in shared/schemas/crds;
- checkov (kubernetes framework) over all manifests, with each JobSet's pod template also
  scanned as a Job so the training pods are checked too; skips are justified in place.
"""

from __future__ import annotations

import json
import os
import subprocess

import kubernetes_validate
import pulumi
import pytest
import yaml
from crd_schemas import CRD_GROUPS, validate_custom_resource
from plan_queries import kubernetes_minor
from stack_configs import MANIFEST_STACKS, PROJECT, ROOT, raw_config

from components.common.manifests import built_in_object


def is_custom(manifest: dict) -> bool:
    return manifest["apiVersion"].split("/")[0] in CRD_GROUPS


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_builtin_kinds_validate_strictly(stack, plan_of):
    version = f"{kubernetes_minor(stack)}.0"
    manifests = [m for m in plan_of(stack).manifests() if not is_custom(m)]
    assert manifests
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_custom_resources_match_their_crd_schemas(stack, plan_of):
    custom = [m for m in plan_of(stack).manifests() if is_custom(m)]
    # (a team stack makes no ClusterQueue: its platform does)
    assert {m["kind"] for m in custom} >= {"JobSet", "LocalQueue", "ExternalSecret", "SecretStore",
                                           *(() if stack.startswith("team-") else ("ClusterQueue",))}
    for manifest in custom:
        assert validate_custom_resource(manifest) == [], f"{manifest['kind']}/{manifest['metadata']['name']}"


def pod_templates_as_jobs(manifest: dict) -> list[dict]:
    """checkov does not know JobSet: hand it each replicated Job with the JobSet's annotations."""
    jobs = []
    for replicated in manifest["spec"]["replicatedJobs"]:
        metadata = {**manifest["metadata"], "name": f"{manifest['metadata']['name']}-{replicated['name']}"}
        jobs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": replicated["template"]["spec"]})
    return jobs


def test_checkov_passes_on_all_manifests(tmp_path, plan_of):
    checkov = os.environ.get("CHECKOV") or str(ROOT / ".venv-checkov" / "bin" / "checkov")
    if not os.path.exists(checkov):
        pytest.fail("checkov is not installed: run `make test` (it builds .venv-checkov)")
    count = 0
    for stack in MANIFEST_STACKS:
        for manifest in plan_of(stack).manifests():
            documents = pod_templates_as_jobs(manifest) if manifest["kind"] == "JobSet" else [manifest]
            for document in documents:
                count += 1
                (tmp_path / f"{stack}-{count:04d}.yaml").write_text(yaml.safe_dump(document))
    result = subprocess.run(
        [checkov, "-d", str(tmp_path), "--framework", "kubernetes", "--skip-download", "--compact", "--output", "json"],
        capture_output=True, text=True, timeout=600,
    )
    report = json.loads(result.stdout or "{}")
    reports = report if isinstance(report, list) else [report]
    failed = [f"{c['check_id']} {c['resource']} ({c['file_path']})"
              for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    skipped = [c for r in reports for c in r.get("results", {}).get("skipped_checks", [])]
    passed = sum(r.get("summary", {}).get("passed", 0) for r in reports)
    print(f"\ncheckov: {passed} passed, {len(failed)} failed, {len(skipped)} skipped over {count} manifests")
    assert result.returncode == 0 and not failed, "\n".join(failed) or result.stderr[-2000:]
    assert passed > 0
    # Each job skips exactly the accepted deviations, each with its reason; the root ones (23: root,
    # 25: an added capability) are the Lustre checkpoint directory Job's (workload/checkpoint_directory.py).
    assert {c["check_id"] for c in skipped} == {"CKV_K8S_35", "CKV_K8S_40", "CKV_K8S_11", "CKV_K8S_23", "CKV_K8S_25"}
    assert {c["check_id"] for c in skipped if "checkpoint-directory" in c["resource"]} == {"CKV_K8S_23", "CKV_K8S_25",
                                                                                          "CKV_K8S_40"}
    assert all(c["check_result"].get("suppress_comment") for c in skipped), "every skip carries its reason"


@pytest.mark.parametrize("stack", MANIFEST_STACKS)
def test_every_namespace_we_create_denies_by_default(stack, plan_of):
    """CIS EKS 4.3: a NetworkPolicy in every namespace; ours start from deny-all."""
    manifests = plan_of(stack).manifests()
    # A registered team's namespace is made by its platform and denied by the team stack's own
    # policies (components/workload/team_tenancy.py): judged here in the team's plan, by its queue.
    teams = {f"team-{row['name']}" for row in raw_config(stack).get(f"{PROJECT}:teams", [])}
    namespaces = {m["metadata"]["name"] for m in manifests if m["kind"] == "Namespace"} - teams
    namespaces |= {m["metadata"]["namespace"] for m in manifests if m["kind"] == "LocalQueue"
                   and m["metadata"]["namespace"].startswith("team-")}
    denying = {m["metadata"]["namespace"] for m in manifests if m["kind"] == "NetworkPolicy"
               and m["metadata"]["name"] == "default-deny"
               and m["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
    assert namespaces and namespaces <= denying, namespaces - denying


def test_a_built_in_kind_without_its_typed_resource_stops_the_plan_naming_the_table():
    """CONTRIBUTING.md, "Add a Kubernetes object": the error says where the kind goes."""
    with pytest.raises(KeyError, match=r"Deployment: add its typed resource to BUILT_IN_KINDS"):
        built_in_object("x", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}, pulumi.ResourceOptions())
