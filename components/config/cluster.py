"""The `cluster` section: Kubernetes version and upgrade policy, endpoint exposure, who may
administer the cluster.

The Kubernetes minor is judged against EKS's dated support calendar (facts/eks_versions.py) as
of `today`: see `version_support`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import date

from components.config.keys import BY_PATH
from components.config.network import LOG_RETENTION_DAYS
from components.config.reader import Section
from components.facts.eks_versions import EKS_CALENDAR, SUPPORTED_KUBERNETES_VERSIONS, KubernetesRelease, next_minor
from components.facts.regions import ARN_PARTITION

# IAM names are ASCII: without re.ASCII, \w would also take any Unicode letter.
PRINCIPAL_ARN = re.compile(r"arn:" + ARN_PARTITION + r":iam::\d{12}:(role|user)/[\w+=,.@/-]{1,576}", re.ASCII)
# EKS's cluster upgrade policy (UpgradePolicy.supportType): what happens when the minor leaves
# standard support. STANDARD: EKS upgrades the control plane to the next minor itself.
# EXTENDED: the cluster stays, billed at the extended-support rate, for 12 more months.
UPGRADE_POLICIES = BY_PATH["cluster.upgradePolicy"].allowed
# Sources no request over the internet comes from (RFC 1918, shared CGNAT space RFC 6598, this
# network, loopback, link-local, multicast, reserved: IANA's special-purpose registry). The
# documentation ranges stay allowed: the stack files use them as placeholders.
UNROUTABLE_SOURCES = tuple(ipaddress.IPv4Network(cidr) for cidr in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16",
    "224.0.0.0/4", "240.0.0.0/4"))
# EKS announces the end of standard support at least 60 days ahead (EKS version FAQ); the plan
# warns from then on, so an upgrade is planned before the date, not discovered after it.
WARNING_WINDOW_DAYS = 60
# The control plane's audit log is the cluster's audit trail: prod keeps it a year at least.
PROD_MIN_AUDIT_RETENTION_DAYS = 365
# Amazon EKS service quotas (https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html):
# "Public endpoint access CIDR ranges per cluster", 40, not adjustable.
MAX_PUBLIC_ACCESS_CIDRS = 40
UPGRADE_GUIDE = "docs/upgrading-and-pins.md"


@dataclass(frozen=True)
class ClusterConfig:
    kubernetes_version: str
    endpoint_public_access: bool
    public_access_cidrs: tuple[str, ...]
    admin_principals: tuple[str, ...]
    read_only_principals: tuple[str, ...]
    log_retention_days: int
    upgrade_policy: str = "STANDARD"
    warnings: tuple[str, ...] = ()
    """Not errors, but due soon (e.g. the end of standard support): shown by `pulumi up` and the plan."""


@dataclass(frozen=True)
class VersionSupport:
    """What the calendar says about running a minor on a given day: a problem that rejects the
    config (with its fix), or a warning, or neither."""

    problem: str | None = None
    fix: str | None = None
    warning: str | None = None


def version_support(release: KubernetesRelease, *, today: date, environment: str, upgrade_policy: str) -> VersionSupport:
    """Judge `release` on `today` for a stack of `environment` with `upgrade_policy`.

    - before its EKS release date, or from its end of extended support on: rejected (EKS then
      upgrades the control plane itself; the next `pulumi up` would ask for a downgrade);
    - from its end of standard support on: rejected in prod (prod runs standard-support minors
      only) and under STANDARD (EKS upgrades such a cluster itself); a warning under EXTENDED;
    - within WARNING_WINDOW_DAYS before the end of standard support: a warning.
    """
    minor, upgrade_to = release.minor, next_minor(release.minor)
    standard_end, extended_end = release.end_of_standard_support, release.end_of_extended_support
    guide = f"upgrade to {upgrade_to} ({UPGRADE_GUIDE})"
    if today < release.eks_release:
        return VersionSupport(f"is not released on EKS before {release.eks_release}",
                              f"use {SUPPORTED_KUBERNETES_VERSIONS[0]} or another minor already released")
    if today >= extended_end:
        return VersionSupport(f"reached the end of EKS extended support on {extended_end}: EKS upgrades the control "
                              "plane itself, and a `pulumi up` still asking for it would attempt a downgrade", guide)
    if today >= standard_end:
        if environment == "prod":
            return VersionSupport(f"left EKS standard support on {standard_end}; prod runs only minors in standard "
                                  "support", guide)
        if upgrade_policy == "STANDARD":
            return VersionSupport(f"left EKS standard support on {standard_end}; with upgradePolicy STANDARD EKS "
                                  f"upgrades the control plane to {upgrade_to} itself and the next `pulumi up` would "
                                  "attempt a downgrade",
                                  f"{guide}, or set upgradePolicy: EXTENDED to stay until {extended_end} at the "
                                  "extended-support price")
        return VersionSupport(warning=f"Kubernetes {minor} is in EKS extended support since {standard_end} (billed at "
                                      f"the extended-support rate) and is upgraded by EKS on {extended_end}: {guide}")
    days_left = (standard_end - today).days
    if days_left <= WARNING_WINDOW_DAYS:
        then = {
            "prod": "after that date this prod stack is rejected until it is upgraded",
            "STANDARD": f"EKS then upgrades the control plane to {upgrade_to} itself (upgradePolicy STANDARD)",
            "EXTENDED": "the control plane is then billed at the extended-support rate (upgradePolicy EXTENDED)",
        }["prod" if environment == "prod" else upgrade_policy]
        return VersionSupport(warning=f"EKS standard support for Kubernetes {minor} ends on {standard_end}, in "
                                      f"{days_left} day{'s' if days_left != 1 else ''}; {then}: {guide}")
    return VersionSupport()


def parse_cluster(section: Section, *, environment: str, today: date) -> ClusterConfig:
    version_key = section.key("kubernetesVersion")
    version = section.string("kubernetesVersion",
                             fix='quote it, e.g. kubernetesVersion: "1.36" (YAML reads 1.30 as the number 1.3)')
    policy = _upgrade_policy(section)
    warnings: list[str] = []
    release = EKS_CALENDAR.get(version)
    if section.ok("kubernetesVersion") and release is None:  # "" too: no minor is empty
        section.error(version_key, version,
                      f"is not a Kubernetes minor offered here; supported: {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} "
                      "(minors in EKS standard support with a complete pin set in components/facts/eks_versions.py)",
                      f"use one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}, e.g. {SUPPORTED_KUBERNETES_VERSIONS[-1]} "
                      "for a new cluster")
    elif release is not None and policy in UPGRADE_POLICIES:
        support = version_support(release, today=today, environment=environment, upgrade_policy=policy)
        if support.problem:
            section.error(version_key, version, support.problem, support.fix or "")
        if support.warning:
            warnings.append(f"{version_key}: {support.warning}")
    public = section.boolean("endpointPublicAccess")
    cidrs_key = section.key("publicAccessCidrs")
    cidrs = []
    for index, raw in enumerate(section.items("publicAccessCidrs")):
        network = section.network(f"{cidrs_key}[{index}]", raw)
        if network is None:
            continue
        if network.prefixlen < 8:
            section.error(f"{cidrs_key}[{index}]", raw, "would expose the Kubernetes API to (most of) the internet",
                          "list only your office/VPN egress ranges")
        elif any(network.overlaps(unroutable) for unroutable in UNROUTABLE_SOURCES):
            # The public endpoint is reached over the internet: a private, loopback or link-local
            # source never matches, and traffic from the VPC uses the private endpoint.
            section.error(f"{cidrs_key}[{index}]", raw, "is a private or reserved range, which never reaches the public "
                          "endpoint", "list the public egress ranges of your office or VPN (from inside the VPC, "
                          "the private endpoint is used)")
        else:
            cidrs.append(str(network))
    if environment == "prod" and public:
        section.error(section.key("endpointPublicAccess"), public, "prod's API endpoint must be private (CIS 5.4.2)",
                      "set endpointPublicAccess: false and reach the API over VPN / peering")
    if public and not cidrs and section.ok("publicAccessCidrs"):
        section.error(cidrs_key, [], "a public endpoint needs an allow-list (EKS would default to 0.0.0.0/0)",
                      "list your office/VPN egress CIDRs, or set endpointPublicAccess: false")
    raw_cidrs = section.data.get("publicAccessCidrs")
    if isinstance(raw_cidrs, list) and len(raw_cidrs) > MAX_PUBLIC_ACCESS_CIDRS:
        section.error(cidrs_key, len(raw_cidrs), f"lists {len(raw_cidrs)} ranges; EKS takes at most "
                      f"{MAX_PUBLIC_ACCESS_CIDRS} per cluster (a quota AWS does not raise)",
                      "merge ranges into wider ones, or reach the API over VPN / peering instead")
    if not public and cidrs and section.ok("endpointPublicAccess"):
        section.error(cidrs_key, cidrs, "has no effect while endpointPublicAccess is false",
                      "remove it, or set endpointPublicAccess: true")

    admins = _principals(section, "adminPrincipals", required=True)
    readers = _principals(section, "readOnlyPrincipals", required=False)
    for arn in set(admins) & set(readers):
        section.error(section.key("readOnlyPrincipals"), arn, "is also an admin principal", "list each principal once")
    retention = section.integer("logRetentionDays")
    if retention not in LOG_RETENTION_DAYS:
        section.error(section.key("logRetentionDays"), retention, "is not a CloudWatch Logs retention period",
                      "use e.g. 30, 90, 365")
    elif environment == "prod" and retention < PROD_MIN_AUDIT_RETENTION_DAYS:
        section.error(section.key("logRetentionDays"), retention,
                      f"the control plane's audit log must stay at least {PROD_MIN_AUDIT_RETENTION_DAYS} days in prod",
                      f"set logRetentionDays: {PROD_MIN_AUDIT_RETENTION_DAYS} or more")
    section.finish()
    return ClusterConfig(version, public, tuple(cidrs), admins, readers, retention, policy or "STANDARD", tuple(warnings))


def _upgrade_policy(section: Section) -> str:
    """Required: what EKS does at the end of standard support is a decision, not a default."""
    if not section.has("upgradePolicy"):
        section.ignore("upgradePolicy")
        section.error(section.key("upgradePolicy"), None, "is required: it decides what EKS does when the minor leaves "
                      "standard support",
                      "set upgradePolicy: STANDARD (EKS upgrades the control plane itself) or EXTENDED (the cluster "
                      "stays 12 more months at the extended-support price), with the reason in a comment")
        return ""
    return section.string("upgradePolicy")


def _principals(section: Section, name: str, *, required: bool) -> tuple[str, ...]:
    key = section.key(name)
    values = section.items(name)
    if required and not values:
        section.error(key, values, "at least one IAM role must administer the cluster (the creator gets no implicit access)",
                      "list the ARN of the role that runs `pulumi up` and of your platform admins")
    for index, arn in enumerate(values):
        if not isinstance(arn, str) or not PRINCIPAL_ARN.fullmatch(arn):
            section.error(f"{key}[{index}]", arn, "is not an IAM role or user ARN",
                          "use arn:aws:iam::<account-id>:role/<name>")
    if len(set(map(str, values))) != len(values):
        section.error(key, values, "lists a principal twice", "list each principal once")
    return tuple(str(v) for v in values)
