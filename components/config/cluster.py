"""The `cluster` section: Kubernetes version, endpoint exposure, who may administer the cluster."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.config.network import LOG_RETENTION_DAYS
from components.config.reader import Section
from components.facts.eks_versions import SUPPORTED_KUBERNETES_VERSIONS

PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")


@dataclass(frozen=True)
class ClusterConfig:
    kubernetes_version: str
    endpoint_public_access: bool
    public_access_cidrs: tuple[str, ...]
    admin_principals: tuple[str, ...]
    read_only_principals: tuple[str, ...]
    log_retention_days: int


def parse_cluster(section: Section, *, environment: str) -> ClusterConfig:
    version = section.string("kubernetesVersion", choices=SUPPORTED_KUBERNETES_VERSIONS)
    public = section.boolean("endpointPublicAccess", False)
    cidrs_key = section.key("publicAccessCidrs")
    cidrs = []
    for index, raw in enumerate(section.items("publicAccessCidrs", [])):
        network = section.network(f"{cidrs_key}[{index}]", raw)
        if network is None:
            continue
        if network.prefixlen < 8:
            section.error(f"{cidrs_key}[{index}]", raw, "would expose the Kubernetes API to (most of) the internet",
                          "list only your office/VPN egress ranges")
        else:
            cidrs.append(str(network))
    if environment == "prod" and public:
        section.error(section.key("endpointPublicAccess"), public, "prod's API endpoint must be private (CIS 5.4.2)",
                      "set endpointPublicAccess: false and reach the API over VPN / peering")
    if public and not cidrs:
        section.error(cidrs_key, [], "a public endpoint needs an allow-list (EKS would default to 0.0.0.0/0)",
                      "list your office/VPN egress CIDRs, or set endpointPublicAccess: false")
    if not public and cidrs:
        section.error(cidrs_key, cidrs, "has no effect while endpointPublicAccess is false",
                      "remove it, or set endpointPublicAccess: true")

    admins = _principals(section, "adminPrincipals", required=True)
    readers = _principals(section, "readOnlyPrincipals", required=False)
    for arn in set(admins) & set(readers):
        section.error(section.key("readOnlyPrincipals"), arn, "is also an admin principal", "list each principal once")
    retention = section.integer("logRetentionDays", 90)
    if retention not in LOG_RETENTION_DAYS:
        section.error(section.key("logRetentionDays"), retention, "is not a CloudWatch Logs retention period",
                      "use e.g. 30, 90, 365")
    section.finish()
    return ClusterConfig(version, public, tuple(cidrs), admins, readers, retention)


def _principals(section: Section, name: str, *, required: bool) -> tuple[str, ...]:
    key = section.key(name)
    values = section.items(name, [])
    if required and not values:
        section.error(key, values, "at least one IAM role must administer the cluster (the creator gets no implicit access)",
                      "list the ARN of the role that runs `pulumi up` and of your platform admins")
    for index, arn in enumerate(values):
        if not isinstance(arn, str) or not PRINCIPAL_ARN.match(arn):
            section.error(f"{key}[{index}]", arn, "is not an IAM role or user ARN",
                          "use arn:aws:iam::<account-id>:role/<name>")
    if len(set(map(str, values))) != len(values):
        section.error(key, values, "lists a principal twice", "list each principal once")
    return tuple(str(v) for v in values)
