"""Kubernetes minors on EKS: their support calendar, and the builds pinned for each.

A minor is offered here only when it is in the calendar below AND has a complete pin set: every
EKS managed add-on the program installs, and the Cluster Autoscaler of the same minor (the
autoscaler's minor must equal the cluster's). tests/test_kubernetes_versions.py fails when a
calendar row lacks a pin, so a minor cannot be half-added.

To add a minor (docs/upgrading-and-pins.md, "Adding a minor"):
1. its calendar row from the EKS release calendar
   (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html);
2. each add-on build from
   `aws eks describe-addon-versions --kubernetes-version <minor> --addon-name <name>`
   (and `describe-addon-configuration` for add-ons we configure);
3. the autoscaler release of that minor (github.com/kubernetes/autoscaler tags
   `cluster-autoscaler-<minor>.<patch>`).

Not offered yet: 1.37. EKS released it on 2026-10-02 (What's New, "Amazon EKS and Amazon EKS
Distro now support Kubernetes version 1.37"), but no add-on build for 1.37 (kube-proxy has one
per minor) and no Cluster Autoscaler 1.37 release could be confirmed from any public source as
of 2026-11-30. 1.33 is left out: its standard support ended on 2026-07-29.

Verdicts beside the pins: "verified" = seen at the source (AWS user guide table, upstream
release tag); "plausible" = public configs of clusters on that minor agree, no AWS listing seen.
Confirm every plausible pin with describe-addon-versions before the first real `pulumi up`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class KubernetesRelease:
    """One row of the EKS Kubernetes release calendar (dates in UTC; a date is the first day of
    the new phase: EKS starts billing extended support at the beginning of end-of-standard day)."""

    minor: str
    eks_release: date
    end_of_standard_support: date
    end_of_extended_support: date


# Source: the EKS user guide's release calendar (awsdocs/amazon-eks-user-guide
# latest/ug/versioning/kubernetes-versions.adoc: 1.34 "October 2, 2025 / December 2, 2026 /
# December 2, 2027"); 1.35 and 1.36 from the same table as tracked by endoflife.date
# (products/amazon-eks.md, scraped from the AWS page) and AWS What's New 2026/01 and 2026/06.
EKS_CALENDAR: dict[str, KubernetesRelease] = {
    release.minor: release for release in (
        KubernetesRelease("1.34", date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
        KubernetesRelease("1.35", date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
        KubernetesRelease("1.36", date(2026, 6, 2), date(2027, 8, 2), date(2028, 8, 2)),
    )
}

# The EKS-optimized AL2023 NVIDIA AMI release the GPU node groups boot, per Kubernetes minor (the
# node group's releaseVersion; unset, a group keeps the AMI it was created with until the next
# minor). Source: awslabs/amazon-eks-ami GitHub release v20260903, "Kubernetes 1.36" table: AMI
# amazon-eks-node-al2023-x86_64-nvidia-1.36-v20260903, release version 1.36.3-20260903, artifacts
# s3://amazon-eks/1.36.3/2026-08-19/ (the newest release readable offline; AWS publishes one about
# weekly). Roll it monthly (docs/upgrading-and-pins.md, "GPU node AMI releases"): the live value is
# the SSM parameter /aws/service/eks/optimized-ami/<minor>/amazon-linux-2023/x86_64/nvidia/recommended/release_version.
# Earlier minors have no verified pin here: their GPU pools plan without one, with a warning.
AL2023_NVIDIA_RELEASE: dict[str, str] = {"1.36": "1.36.3-20260903"}

# Add-on builds that are the same on every minor, so an upgrade of Kubernetes does not also
# change them (and a change of them is its own, separately reviewed step).
SAME_ON_EVERY_MINOR: dict[str, str] = {
    # plausible: the newest build. aws/amazon-vpc-cni-k8s releases: v1.23.0 (2026-07-31) after
    # v1.22.4; an EKS API answer quoted on 2026-09-26 names v1.23.1 the newest vpc-cni for 1.34
    # (default still v1.22.4-eksbuild.3); a public 1.36 cluster report shows v1.23.1-eksbuild.1
    # ACTIVE, 1.34/1.35/1.36 configs pin it. No AWS table for 1.36 was readable offline
    # (ADDON_EVIDENCE).
    "vpc-cni": "v1.23.1-eksbuild.1",
    # plausible: resolved on a live 1.36 cluster; build .2 of the same release verified on 1.34.
    "eks-pod-identity-agent": "v1.3.10-eksbuild.3",
    # plausible-strong: >= v1.6.0 for `dcgmAgent.tolerations` in the add-on schema
    # (charts/configuration.schema.json at tag v1.6.0); v1.7.0 runs nv-hostengine from its own
    # image (DCGM 4.6.1, PR #210). Chart 1.7.0's image tag; created by public plans on 1.35.
    "eks-node-monitoring-agent": "v1.7.0-eksbuild.1",
    # plausible-strong: an auto-updated 1.35 pin file; upstream tag v3.4.1 (2026-07-23).
    "aws-efs-csi-driver": "v3.4.1-eksbuild.1",
    # plausible-strong: on public 1.35 clusters ("Already the newest build", 2026-08-11); upstream
    # tag v2.7.0 (2026-06-11). The earlier pin v2.2.2-eksbuild.1 had no public record at all.
    # Fallback if EKS lacks the build for a minor: the upstream chart aws-mountpoint-s3-csi-driver
    # 2.7.0 from https://awslabs.github.io/mountpoint-s3-csi-driver (docs/INSTALL.md names both
    # routes and recommends the add-on on EKS).
    "aws-mountpoint-s3-csi-driver": "v2.7.0-eksbuild.1",
    # FSx for Lustre CSI (installed only with storage.lustre). Upstream v1.9.0 of 2026-04-20
    # (kubernetes-sigs/aws-fsx-csi-driver@5b22712, chart 1.17.0). Per minor: 1.35 needs
    # v1.9.0-eksbuild.1 (plausible: pinned with 1.35 in a public GPU/EFA stack); 1.34 and 1.36
    # take the same build, assumed, not seen (no public record of a 1.36 build was found).
    "aws-fsx-csi-driver": "v1.9.0-eksbuild.1",
    # plausible-strong on 1.36, plausible on 1.34/1.35: the newest build EKS returned for 1.36 on
    # 2026-09-27 (a public add-on review), what public 1.36 upgrades resolved to. Its schema
    # carries `dcgmExporter` (describe-addon-configuration excerpt of v6.6.0-eksbuild.1).
    "amazon-cloudwatch-observability": "v6.7.0-eksbuild.1",
}

# kube-proxy and CoreDNS: verified, the EKS user guide's managing-kube-proxy and managing-coredns
# tables (the ja_jp crawl, newest: it lists 1.31 to 1.36).
ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.34": {"kube-proxy": "v1.34.6-eksbuild.13", "coredns": "v1.13.2-eksbuild.11", **SAME_ON_EVERY_MINOR},
    "1.35": {"kube-proxy": "v1.35.3-eksbuild.13", "coredns": "v1.14.3-eksbuild.3", **SAME_ON_EVERY_MINOR},
    "1.36": {"kube-proxy": "v1.36.0-eksbuild.14", "coredns": "v1.14.3-eksbuild.3", **SAME_ON_EVERY_MINOR},
}

AWS_TABLE = "aws-table"
"""The EKS user guide's table of the add-on's builds per minor lists it."""
PUBLIC_RECORD = "public-record"
"""No AWS listing was readable offline; public configs or cluster reports of that minor show it."""
ASSUMED = "assumed"
"""Seen on another minor only: assumed to be offered on this one."""


@dataclass(frozen=True)
class AddonEvidence:
    """Where one add-on build was seen, for which minors: the published compatibility behind a pin."""

    build: str
    minors: tuple[str, ...]
    kind: str
    source: str


def seen_then_assumed(build: str, seen_on: tuple[str, ...], where: str, assumed_on: tuple[str, ...],
                      why: str = "the same build on the neighbouring minors") -> tuple[AddonEvidence, AddonEvidence]:
    """A build a public record shows on some minors and that is assumed on the others: its two rows."""
    return AddonEvidence(build, seen_on, PUBLIC_RECORD, where), AddonEvidence(build, assumed_on, ASSUMED, why)


# What the pins above rest on, one row per build and kind of evidence. tests/test_kubernetes_versions.py
# fails when a pin has no row for its minor, so a bump must bring its evidence. What would make
# every row AWS_TABLE: `aws eks describe-addon-versions --kubernetes-version <minor> --addon-name
# <name>` (docs/upgrading-and-pins.md, "Checking a pin against AWS"), which needs an account.
ADDON_EVIDENCE: dict[str, tuple[AddonEvidence, ...]] = {
    "kube-proxy": (
        AddonEvidence("v1.34.6-eksbuild.13", ("1.34",), AWS_TABLE, "EKS user guide managing-kube-proxy (ja_jp crawl, 1.31-1.36)"),
        AddonEvidence("v1.35.3-eksbuild.13", ("1.35",), AWS_TABLE, "EKS user guide managing-kube-proxy (ja_jp crawl, 1.31-1.36)"),
        AddonEvidence("v1.36.0-eksbuild.14", ("1.36",), AWS_TABLE, "EKS user guide managing-kube-proxy (ja_jp crawl, 1.31-1.36)"),
    ),
    "coredns": (
        AddonEvidence("v1.13.2-eksbuild.11", ("1.34",), AWS_TABLE, "EKS user guide managing-coredns (ja_jp crawl, 1.31-1.36)"),
        AddonEvidence("v1.14.3-eksbuild.3", ("1.35", "1.36"), AWS_TABLE,
                      "EKS user guide managing-coredns (ja_jp crawl, 1.31-1.36)"),
    ),
    "vpc-cni": (
        # The managing-vpc-cni table ("latest version per cluster version") is the AWS source; the
        # crawls readable offline stop at 1.33 (v1.20.1-eksbuild.3), so none covers this build.
        AddonEvidence("v1.23.1-eksbuild.1", ("1.34", "1.35", "1.36"), PUBLIC_RECORD,
                      "EKS API answer quoted 2026-09-26 (newest for 1.34); a 1.36 cluster report (ACTIVE); "
                      "1.34/1.35/1.36 Terraform pins"),
    ),
    "eks-pod-identity-agent": seen_then_assumed("v1.3.10-eksbuild.3", ("1.36",), "resolved on a live 1.36 cluster",
                                                ("1.34", "1.35"), "build .2 of v1.3.10 verified on 1.34"),
    "eks-node-monitoring-agent": seen_then_assumed(
        "v1.7.0-eksbuild.1", ("1.35",), "created by public plans on 1.35; chart 1.7.0's image tag", ("1.34", "1.36")),
    "aws-efs-csi-driver": seen_then_assumed("v3.4.1-eksbuild.1", ("1.35",), "an auto-updated 1.35 pin file", ("1.34", "1.36")),
    "aws-mountpoint-s3-csi-driver": seen_then_assumed("v2.7.0-eksbuild.1", ("1.35",), "public 1.35 clusters, 2026-08-11",
                                                      ("1.34", "1.36")),
    "aws-fsx-csi-driver": seen_then_assumed("v1.9.0-eksbuild.1", ("1.35",), "pinned with 1.35 in a public GPU/EFA stack",
                                            ("1.34", "1.36"), "no public record of a 1.34 or 1.36 build found"),
    "amazon-cloudwatch-observability": seen_then_assumed(
        "v6.7.0-eksbuild.1", ("1.36",), "newest EKS returned for 1.36 on 2026-09-27 (a public add-on review)",
        ("1.34", "1.35"), "the same build on the older minors"),
}


def pin_evidence(addon: str, minor: str) -> AddonEvidence | None:
    """The best evidence for the build pinned for `addon` on `minor` (AWS table first), if any."""
    build = ADDON_VERSIONS.get(minor, {}).get(addon)
    rows = [row for row in ADDON_EVIDENCE.get(addon, ()) if row.build == build and minor in row.minors]
    order = (AWS_TABLE, PUBLIC_RECORD, ASSUMED)
    return min(rows, key=lambda row: order.index(row.kind), default=None)


# registry.k8s.io/autoscaling/cluster-autoscaler:<tag>. Verified: kubernetes/autoscaler tags
# cluster-autoscaler-1.34.5, -1.35.2, -1.36.1 (all 2026-07-22, the newest patch of each minor).
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {"1.34": "v1.34.5", "1.35": "v1.35.2", "1.36": "v1.36.1"}

SUPPORTED_KUBERNETES_VERSIONS = tuple(sorted(EKS_CALENDAR, key=lambda minor: tuple(map(int, minor.split(".")))))
"""Every minor this program offers, oldest first: the calendar's rows (the pin tables must cover
each; the table test checks it)."""


def next_minor(minor: str) -> str:
    """The minor an upgrade from `minor` goes to: EKS upgrades one minor at a time."""
    major, number = minor.split(".")
    return f"{major}.{int(number) + 1}"
