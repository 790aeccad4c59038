"""Kubernetes minors: the dated EKS calendar drives validation, every offered minor has a complete
pin set, the stacks run the newest one, and what follows the cluster's minor follows it."""

from __future__ import annotations

import re
from datetime import date

import kubernetes_validate
import pytest
from crd_schemas import CRD_GROUPS
from stack_configs import DELETE, MANIFEST_STACKS, PLATFORM_STACKS, PROJECT, ROOT, mutate, raw_config

from components.cluster.autoscaler import CHART_VERSION
from components.config import ConfigError, load_stack_config
from components.config.cluster import WARNING_WINDOW_DAYS, version_support
from components.facts.eks_versions import (
    ADDON_EVIDENCE,
    ADDON_VERSIONS,
    AWS_TABLE,
    CLUSTER_AUTOSCALER_IMAGE_TAGS,
    EKS_CALENDAR,
    SUPPORTED_KUBERNETES_VERSIONS,
    next_minor,
    pin_evidence,
)
from offline.plan import planned_config, summary, synthesize

NEWEST = SUPPORTED_KUBERNETES_VERSIONS[-1]
VERSION_KEY = f"{PROJECT}:cluster.kubernetesVersion"
ADDON = "aws:eks/addon:Addon"


def load(stack, raw=None, *, today):
    return load_stack_config(raw if raw is not None else raw_config(stack), project=PROJECT, stack=stack, today=today)


def errors_for(stack, raw, *, today):
    with pytest.raises(ConfigError) as raised:
        load(stack, raw, today=today)
    return raised.value.errors


def with_cluster(stack, **changes):
    """The stack's config with `cluster.<key>` changed (DELETE removes it), other keys kept."""
    raw = raw_config(stack)
    for key, value in changes.items():
        raw = mutate(raw, f"cluster.{key}", value)
    return raw


# --- the calendar -------------------------------------------------------------------------------

@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_calendar_rows_follow_the_eks_policy(minor):
    """14 months of standard support from the EKS release, then 12 of extended support."""
    release = EKS_CALENDAR[minor]
    standard, extended = release.end_of_standard_support, release.end_of_extended_support
    months = (standard.year - release.eks_release.year) * 12 + standard.month - release.eks_release.month
    assert months == 14, f"{minor}: {release.eks_release} -> {standard}"
    assert extended == standard.replace(year=standard.year + 1)


def test_offered_minors_are_consecutive_and_sorted():
    numbers = [int(minor.split(".")[1]) for minor in SUPPORTED_KUBERNETES_VERSIONS]
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert next_minor("1.36") == "1.37"


# --- complete pin sets --------------------------------------------------------------------------

def missing_pins(minor: str, installed_addons: set[str], addon_versions: dict, autoscaler_tags: dict) -> list[str]:
    """What a minor lacks to be offered: a build of every add-on the plans install, an autoscaler of
    the same minor, a kube-proxy of the same minor."""
    pins = addon_versions.get(minor, {})
    missing = [f"{minor}: no build of {name}" for name in sorted(installed_addons - set(pins))]
    if not autoscaler_tags.get(minor, "").startswith(f"v{minor}."):
        missing.append(f"{minor}: no Cluster Autoscaler {minor}.x")
    if not pins.get("kube-proxy", "").startswith(f"v{minor}."):
        missing.append(f"{minor}: no kube-proxy {minor}.x")
    return missing


@pytest.fixture(scope="module")
def installed_addons(plan_of) -> set[str]:
    """Every EKS managed add-on any stack installs."""
    return {a["inputs"]["addonName"] for stack in MANIFEST_STACKS for a in plan_of(stack).of_type(ADDON)}


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_supported_minor_has_a_complete_pin_set(minor, installed_addons):
    assert len(installed_addons) >= 8
    assert missing_pins(minor, installed_addons, ADDON_VERSIONS, CLUSTER_AUTOSCALER_IMAGE_TAGS) == []
    assert set(ADDON_VERSIONS[minor]) == installed_addons, "a pin nothing installs is a pin nobody checks"
    assert all(re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", build) for build in ADDON_VERSIONS[minor].values())


@pytest.mark.parametrize(("case", "addon_versions", "autoscaler_tags", "expected"), [
    ("complete", {"1.40": {"kube-proxy": "v1.40.0-eksbuild.1", "coredns": "v1"}}, {"1.40": "v1.40.2"}, []),
    ("addon-missing", {"1.40": {"kube-proxy": "v1.40.0-eksbuild.1"}}, {"1.40": "v1.40.2"}, ["1.40: no build of coredns"]),
    ("autoscaler-missing", {"1.40": {"kube-proxy": "v1.40.0-eksbuild.1", "coredns": "v1"}}, {}, ["1.40: no Cluster Autoscaler 1.40.x"]),
    ("autoscaler-of-another-minor", {"1.40": {"kube-proxy": "v1.40.0-eksbuild.1", "coredns": "v1"}}, {"1.40": "v1.39.0"},
     ["1.40: no Cluster Autoscaler 1.40.x"]),
    ("kube-proxy-of-another-minor", {"1.40": {"kube-proxy": "v1.39.0-eksbuild.1", "coredns": "v1"}}, {"1.40": "v1.40.2"},
     ["1.40: no kube-proxy 1.40.x"]),
    ("minor-missing", {}, {}, ["1.40: no build of coredns", "1.40: no build of kube-proxy",
                               "1.40: no Cluster Autoscaler 1.40.x", "1.40: no kube-proxy 1.40.x"]),
])
def test_the_pin_set_check_finds_what_is_missing(case, addon_versions, autoscaler_tags, expected):
    assert missing_pins("1.40", {"kube-proxy", "coredns"}, addon_versions, autoscaler_tags) == expected


def test_node_monitoring_agent_builds_accept_dcgm_tolerations():
    """`dcgmAgent.tolerations` entered the add-on's configuration schema in v1.6.0."""
    for minor in SUPPORTED_KUBERNETES_VERSIONS:
        major, feature = map(int, ADDON_VERSIONS[minor]["eks-node-monitoring-agent"][1:].split(".")[:2])
        assert (major, feature) >= (1, 6), minor


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_every_addon_pin_has_its_published_evidence(minor):
    """A bump of a build needs its row in ADDON_EVIDENCE (the published compatibility it rests on)."""
    missing = [f"{addon} {build}" for addon, build in ADDON_VERSIONS[minor].items() if pin_evidence(addon, minor) is None]
    assert not missing, f"{minor}: no evidence row for {missing}"


def test_evidence_rows_name_only_pinned_builds():
    """A stale row (its build no longer pinned for a minor it names) would vouch for nothing."""
    stale = [f"{addon} {row.build} on {minor}" for addon, rows in ADDON_EVIDENCE.items() for row in rows
             for minor in row.minors if ADDON_VERSIONS.get(minor, {}).get(addon) != row.build]
    assert not stale, stale


def test_kube_proxy_and_coredns_rest_on_the_aws_tables():
    """The two add-ons whose per-minor tables the EKS user guide publishes and the crawl covers."""
    kinds = {(addon, evidence.kind if (evidence := pin_evidence(addon, minor)) else None)
             for minor in SUPPORTED_KUBERNETES_VERSIONS for addon in ("kube-proxy", "coredns")}
    assert kinds == {("kube-proxy", AWS_TABLE), ("coredns", AWS_TABLE)}


def test_the_upgrade_doc_lists_every_pin_of_the_newest_minor_with_its_evidence():
    doc = (ROOT / "docs" / "upgrading-and-pins.md").read_text()
    for addon, build in ADDON_VERSIONS[NEWEST].items():
        evidence = pin_evidence(addon, NEWEST)
        assert evidence is not None and f"| {addon} | `{build}` | {evidence.kind} |" in doc, addon


# --- validation against the calendar ------------------------------------------------------------

SUPPORT_CASES = [
    # (id, minor, today, environment, policy, problem, warning)
    ("in-support", "1.36", date(2026, 11, 30), "prod", "EXTENDED", None, None),
    ("outside-window", "1.34", date(2026, 10, 2), "dev", "STANDARD", None, None),
    ("window-starts", "1.34", date(2026, 10, 3), "dev", "STANDARD", None, "in 60 days; EKS then upgrades the control plane to 1.35"),
    ("two-days-left", "1.34", date(2026, 11, 30), "staging", "STANDARD", None, "ends on 2026-12-02, in 2 days"),
    ("last-day-prod", "1.34", date(2026, 12, 1), "prod", "EXTENDED", None, "in 1 day; after that date this prod stack is rejected"),
    ("window-extended-policy", "1.35", date(2027, 3, 1), "dev", "EXTENDED", None, "billed at the extended-support rate"),
    ("prod-past-standard", "1.34", date(2026, 12, 2), "prod", "EXTENDED", "prod runs only minors in standard support", None),
    ("prod-past-standard-standard-policy", "1.34", date(2027, 1, 15), "prod", "STANDARD", "prod runs only minors", None),
    ("dev-past-standard-standard-policy", "1.34", date(2026, 12, 2), "dev", "STANDARD",
     "with upgradePolicy STANDARD EKS upgrades the control plane to 1.35 itself", None),
    ("dev-past-standard-extended-policy", "1.34", date(2027, 6, 1), "dev", "EXTENDED", None,
     "is in EKS extended support since 2026-12-02"),
    ("past-extended", "1.34", date(2027, 12, 2), "dev", "EXTENDED", "end of EKS extended support on 2027-12-02", None),
    ("not-yet-released", "1.36", date(2026, 5, 1), "dev", "STANDARD", "not released on EKS before 2026-06-02", None),
]


@pytest.mark.parametrize(("minor", "today", "environment", "policy", "problem", "warning"),
                         [c[1:] for c in SUPPORT_CASES], ids=[c[0] for c in SUPPORT_CASES])
def test_version_support_follows_the_calendar(minor, today, environment, policy, problem, warning):
    verdict = version_support(EKS_CALENDAR[minor], today=today, environment=environment, upgrade_policy=policy)
    if problem:
        assert verdict.problem and problem in verdict.problem and verdict.fix and verdict.warning is None
        assert f"upgrade to {next_minor(minor)}" in verdict.fix or "released" in verdict.problem
    else:
        assert verdict.problem is None
    if warning:
        assert verdict.warning and warning in verdict.warning and "docs/upgrading-and-pins.md" in verdict.warning
    else:
        assert verdict.warning is None


def test_the_warning_window_is_sixty_days():
    assert WARNING_WINDOW_DAYS == 60


@pytest.mark.parametrize("version", ["1.29", "1.33", "1.37", "2.0", "1.36.1", "latest"])
def test_an_unknown_minor_is_rejected_with_the_supported_list(version):
    errors = errors_for("dev", with_cluster("dev", kubernetesVersion=version), today=date(2026, 11, 30))
    (error,) = [e for e in errors if e.startswith(VERSION_KEY)]
    assert f"supported: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}" in error and repr(version) in error


def test_an_unquoted_minor_is_rejected_with_how_to_quote_it():
    errors = errors_for("dev", with_cluster("dev", kubernetesVersion=1.3), today=date(2026, 11, 30))
    assert any(e.startswith(VERSION_KEY) and 'quote it, e.g. kubernetesVersion: "1.36"' in e for e in errors), errors


def test_prod_past_standard_support_is_rejected_before_anything_exists():
    raw = with_cluster("prod", kubernetesVersion="1.34")
    errors = errors_for("prod", raw, today=date(2026, 12, 2))
    assert any(e.startswith(VERSION_KEY) and "left EKS standard support on 2026-12-02" in e and "upgrade to 1.35" in e
               for e in errors), errors
    # The same plan with the prod stack's minor of today passes.
    assert load("prod", today=date(2026, 12, 2)).cluster.kubernetes_version == NEWEST


def test_non_prod_may_stay_past_standard_support_only_under_extended():
    today = date(2027, 1, 10)
    errors = errors_for("dev", with_cluster("dev", kubernetesVersion="1.34"), today=today)
    assert any("upgradePolicy STANDARD" in e for e in errors), errors
    config = load("dev", with_cluster("dev", kubernetesVersion="1.34", upgradePolicy="EXTENDED"), today=today)
    (warning,) = config.cluster.warnings
    assert warning.startswith(VERSION_KEY) and "extended support since 2026-12-02" in warning


def not_release(warnings) -> list[str]:
    return [w for w in warnings if "releaseVersion" not in w]


def test_the_warning_reaches_the_config_and_team_stacks():
    today = date(2026, 11, 30)
    # (The GPU pools' AMI release has warnings of its own: test_release_version.py.)
    assert not_release(load("prod", today=today).warnings) == []
    config = load("staging", with_cluster("staging", kubernetesVersion="1.34"), today=today)
    (warning,) = not_release(config.warnings)
    assert "ends on 2026-12-02, in 2 days" in warning
    # A team stack's: from its platform's contract, as its plan reads it.
    team = planned_config("team-vision-prod", today=date(2027, 6, 10))
    (team_warning,) = [w for w in team.warnings if w.startswith("platform stack ")]
    assert team_warning in synthesize("team-vision-prod", today=date(2027, 6, 10)).warnings
    assert team_warning.startswith("platform stack 'prod': ") and "1.36 ends on 2027-08-02, in 53 days" in team_warning


def test_the_plan_summary_prints_the_warning(tmp_path):
    plan = synthesize("prod", today=date(2027, 6, 10))
    (warning,) = not_release(plan.warnings)
    assert "EKS standard support for Kubernetes 1.36 ends on 2027-08-02, in 53 days" in warning
    text = summary(plan, tmp_path)
    assert f"  warning: {warning}" in text.splitlines()
    assert not [w for w in synthesize("team-vision-prod", today=date(2026, 11, 30)).warnings if "Kubernetes" in w]


@pytest.mark.parametrize(("value", "expected"), [
    (DELETE, "upgradePolicy: is required"),
    ("standard", "must be one of STANDARD, EXTENDED"),
    ("NONE", "must be one of STANDARD, EXTENDED"),
])
def test_the_upgrade_policy_is_a_deliberate_choice(value, expected):
    errors = errors_for("dev", with_cluster("dev", upgradePolicy=value), today=date(2026, 11, 30))
    assert any(e.startswith(f"{PROJECT}:cluster.") and expected in e for e in errors), errors


# --- the stacks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_stacks_run_the_newest_minor_with_a_stated_upgrade_policy(stack, plan_of):
    config = load(stack, today=date(2026, 11, 30))
    assert config.cluster.kubernetes_version == NEWEST
    (cluster,) = plan_of(stack).of_type("aws:eks/cluster:Cluster")
    assert cluster["inputs"]["upgradePolicy"] == {"supportType": config.cluster.upgrade_policy}
    lines = (ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("upgradePolicy:"))
    assert lines[at - 1].strip().startswith("#"), "the stack file says why it chose its upgrade policy"


def test_prod_never_gets_an_unplanned_control_plane_upgrade():
    assert load("prod", today=date(2026, 11, 30)).cluster.upgrade_policy == "EXTENDED"


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_what_follows_the_clusters_minor_follows_it(stack, plan_of):
    plan = plan_of(stack)
    (cluster,) = plan.of_type("aws:eks/cluster:Cluster")
    minor = cluster["inputs"]["version"]
    # Node groups roll after the control plane (docs/upgrading-and-pins.md).
    node_groups = plan.of_type("aws:eks/nodeGroup:NodeGroup")
    assert node_groups and all(group["inputs"]["version"] == minor for group in node_groups)
    pinned = dict(ADDON_VERSIONS[minor])
    if not plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"):  # installed only with storage.lustre
        pinned.pop("aws-fsx-csi-driver")
    assert {a["inputs"]["addonName"]: a["inputs"]["addonVersion"] for a in plan.of_type(ADDON)} == pinned
    (autoscaler,) = [r["inputs"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")
                     if r["inputs"]["chart"] == "cluster-autoscaler"]
    assert autoscaler["version"] == CHART_VERSION == "9.59.0"
    assert autoscaler["values"]["image"]["tag"] == CLUSTER_AUTOSCALER_IMAGE_TAGS[minor]


def _release(text: str) -> tuple[int, ...]:
    """"v1.23.1-eksbuild.1" -> (1, 23, 1); "0.20.0" -> (0, 20, 0)."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text)
    assert match, text
    return tuple(int(part) for part in match.groups())


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_the_planned_device_plugin_and_vpc_cni_are_not_the_stale_pins(stack, plan_of):
    """#27 item 7 on the synthesised plans. Reference review 2 found the NVIDIA device plugin at
    chart 0.18.0 (NVIDIA/k8s-device-plugin v0.20.0 released 2026-08-19) and vpc-cni at v1.22.4
    (v1.23.0 released): the plans install at least those newer releases."""
    plan = plan_of(stack)
    releases = {r["inputs"]["chart"]: r["inputs"]["version"] for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    addons = {a["inputs"]["addonName"]: a["inputs"]["addonVersion"] for a in plan.of_type(ADDON)}
    assert _release(releases["nvidia-device-plugin"]) >= (0, 20, 0), releases["nvidia-device-plugin"]
    assert _release(addons["vpc-cni"]) >= (1, 23, 0), addons["vpc-cni"]


@pytest.mark.parametrize("minor", SUPPORTED_KUBERNETES_VERSIONS)
def test_manifests_are_valid_on_every_offered_minor(minor, plan_of):
    """A stack can move to any offered minor (or roll back one) without a manifest change."""
    manifests = [m for m in plan_of("prod").manifests() if m["apiVersion"].split("/")[0] not in CRD_GROUPS]
    assert len(manifests) > 15
    for manifest in manifests:
        kubernetes_validate.validate(manifest, f"{minor}.0", strict=True)
