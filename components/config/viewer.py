"""The `viewer` section: how the per-namespace TensorBoard is reached through the load balancer.

One internal Application Load Balancer per environment (an IngressGroup of the AWS Load Balancer
Controller), one path per namespace (`/<namespace>/`). Who may reach it: the CIDRs of
`network.monitoringIngress.cidrs` (the network layer's only outside-facing sources), else the
VPC's own range (reached over SSM port forwarding, a VPN or a peered VPC). TLS when a certificate
is configured: HTTPS on 443 and HTTP 80 only to redirect to it. Internet-facing only when the
stack says so, and then only with TLS.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from components.config.network import MonitoringIngress
from components.config.reader import Section

# ACM certificate ARNs: arn:<partition>:acm:<region>:<12-digit account>:certificate/<uuid>
# (ACM API Reference, "CertificateDetail": CertificateArn; the AWS General Reference's ARN formats).
CERTIFICATE_ARN = re.compile(r"arn:aws(-us-gov|-cn)?:acm:[a-z]{2}(-gov)?-[a-z]+-\d:\d{12}:certificate/[0-9a-f-]{36}")
HTTP_PORT, HTTPS_PORT = 80, 443
# TensorBoard's own default port (`tensorboard --help`: --port, default 6006): the viewer pods'
# port, the one the nodes open to the load balancer's group only (components/network).
VIEWER_PORT = 6006


# The security group of the load balancer, found by the controller by its Name tag (the
# `security-groups` annotation takes IDs or Name tags): team stacks name it without a new output.
def alb_security_group_name(name_prefix: str) -> str:
    return f"{name_prefix}-viewer-alb"


@dataclass(frozen=True)
class ViewerConfig:
    internet_facing: bool = False
    certificate_arn: str | None = None

    @property
    def listen_ports(self) -> tuple[int, ...]:
        """The ALB's listener ports: HTTPS (and HTTP only to redirect to it) with a certificate."""
        return (HTTP_PORT, HTTPS_PORT) if self.certificate_arn else (HTTP_PORT,)


def inbound_cidrs(monitoring: MonitoringIngress, vpc_cidr: ipaddress.IPv4Network) -> tuple[ipaddress.IPv4Network, ...]:
    """Who may reach the viewer's load balancer: the monitoring CIDRs, else the VPC itself."""
    return monitoring.cidrs or (vpc_cidr,)


def parse_viewer(section: Section, *, region: str) -> ViewerConfig:
    internet_facing = section.boolean("internetFacing")
    certificate = section.optional_string(
        "certificateArn", check=lambda arn: None if CERTIFICATE_ARN.fullmatch(arn) else "is not an ACM certificate ARN",
        fix="give the ARN of an ACM certificate, like arn:aws:acm:us-east-1:123456789012:certificate/"
            "0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f")
    if certificate and region and f":acm:{region}:" not in certificate:
        section.error(section.key("certificateArn"), certificate, f"is not in the stack's region {region}",
                      "an ALB takes a certificate of its own region only: request or import one there")
    if internet_facing and not certificate:
        section.error(section.key("internetFacing"), True, "an internet-facing viewer without TLS would send "
                      "run data in clear text", "set viewer.certificateArn too, or leave internetFacing false")
    section.finish()
    return ViewerConfig(internet_facing=internet_facing, certificate_arn=certificate or None)
