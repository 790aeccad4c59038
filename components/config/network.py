"""The `network` section: VPC CIDR, AZs, NAT layout, flow logs, who may reach node ports."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from components.config.reader import Section
from components.config.vocabularies import NatLayout
from components.facts.cidr_plan import AzSubnets, CidrPlanError, is_private, plan_subnets
from components.facts.regions import REGIONS_AS_OF, availability_zones

# CloudWatch Logs accepts only these retention periods.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
# Never opened, whatever the config says: nodes are reached through SSM, not SSH/RDP.
ADMIN_PORTS = (22, 3389)


@dataclass(frozen=True)
class MonitoringIngress:
    """Who may reach node metrics / log-collection ports (the network layer's only outside-facing ports)."""

    cidrs: tuple[ipaddress.IPv4Network, ...]
    ports: tuple[int, ...]


@dataclass(frozen=True)
class NetworkConfig:
    vpc_cidr: ipaddress.IPv4Network
    availability_zones: tuple[str, ...]
    subnets: tuple[AzSubnets, ...]
    nat_gateways: NatLayout
    flow_log_retention_days: int
    kubernetes_service_cidr: ipaddress.IPv4Network
    monitoring_ingress: MonitoringIngress

    @property
    def nat_per_az(self) -> bool:
        return self.nat_gateways == NatLayout.PER_AZ


def parse_network(section: Section, *, region: str, environment: str) -> NetworkConfig:
    vpc_key = section.key("vpcCidr")
    vpc_text = section.string("vpcCidr")
    vpc_cidr = section.network(vpc_key, vpc_text) if section.ok("vpcCidr") else None
    if vpc_cidr is not None and not is_private(vpc_cidr):
        section.error(vpc_key, str(vpc_cidr), "is not a private (RFC 1918) range",
                      "use a block inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")

    azs = tuple(_parse_zones(section, region=region, environment=environment))
    subnets: tuple[AzSubnets, ...] = ()
    if vpc_cidr is not None and azs and is_private(vpc_cidr) and section.ok("availabilityZones"):
        try:
            subnets = plan_subnets(vpc_cidr, azs)
        except CidrPlanError as exc:
            section.error(vpc_key, str(vpc_cidr), str(exc), "choose a /16 to /20 private block")

    nat = section.choice("natGateways", NatLayout, NatLayout.PER_AZ if environment == "prod" else NatLayout.SINGLE)
    if environment == "prod" and nat == NatLayout.SINGLE:
        section.error(section.key("natGateways"), nat, "prod must not depend on one NAT gateway in one AZ",
                      "set natGateways: perAz")

    retention = section.integer("flowLogRetentionDays")
    if retention not in LOG_RETENTION_DAYS:
        section.error(section.key("flowLogRetentionDays"), retention, "is not a CloudWatch Logs retention period",
                      f"use one of {', '.join(map(str, LOG_RETENTION_DAYS[:12]))}, ...")

    service_key = section.key("kubernetesServiceCidr")
    service_text = section.string("kubernetesServiceCidr")
    service_cidr = section.network(service_key, service_text) if section.ok("kubernetesServiceCidr") else None
    if service_cidr is not None:
        if not is_private(service_cidr) or not 12 <= service_cidr.prefixlen <= 24:
            section.error(service_key, str(service_cidr), "EKS needs a private block between /12 and /24",
                          "use e.g. 172.20.0.0/16")
        if vpc_cidr is not None and service_cidr.overlaps(vpc_cidr):
            section.error(service_key, str(service_cidr),
                          f"overlaps the VPC CIDR {vpc_cidr}: service IPs would shadow nodes and pods",
                          "choose a block outside the VPC, e.g. 172.20.0.0/16 for a 10.x VPC")

    monitoring = _parse_monitoring(section.section("monitoringIngress"))
    section.finish()
    return NetworkConfig(
        vpc_cidr=vpc_cidr or ipaddress.IPv4Network("10.0.0.0/16"),
        availability_zones=azs,
        subnets=subnets,
        nat_gateways=nat or NatLayout.SINGLE,  # when it failed, reported: this config is never returned
        flow_log_retention_days=retention,
        kubernetes_service_cidr=service_cidr or ipaddress.IPv4Network("172.20.0.0/16"),
        monitoring_ingress=monitoring,
    )


def _parse_zones(section: Section, *, region: str, environment: str) -> list[str]:
    key = section.key("availabilityZones")
    zones = section.items("availabilityZones")
    minimum = 3 if environment == "prod" else 2
    if len(zones) < minimum:
        section.error(key, zones, f"{environment} needs at least {minimum} availability zones",
                      f"list {minimum} or more zones of {region or 'the region'}")
    if len(set(map(str, zones))) != len(zones):
        section.error(key, zones, "lists a zone twice", "list each zone once")
    known = availability_zones(region)
    for index, zone in enumerate(zones):
        if not isinstance(zone, str) or (known and zone not in known):
            section.error(f"{key}[{index}]", zone, f"is not an availability zone of region {region or '(invalid)'} "
                          f"(components/facts/regions.py, as of {REGIONS_AS_OF})", f"use one of {', '.join(known)}"
                          if known else "fix the region first")
    return [str(z) for z in zones]


def _parse_monitoring(section: Section) -> MonitoringIngress:
    raw_cidrs, raw_ports = section.items("cidrs"), section.items("ports")
    if bool(raw_cidrs) != bool(raw_ports):
        section.error(section.path, dict(section.data), "needs both cidrs and ports (or neither)",
                      "list the collector CIDRs and the ports they scrape")
    cidrs = []
    for index, raw in enumerate(raw_cidrs):
        key = f"{section.key('cidrs')}[{index}]"
        network = section.network(key, raw)
        if network is None:
            continue
        if network.prefixlen == 0:
            section.error(key, raw, "would open node ports to the whole internet",
                          "list only the private ranges of your monitoring/log collectors")
        elif not is_private(network):
            section.error(key, raw, "is not a private range; nodes live in private subnets",
                          "list the private CIDRs of your monitoring/log collectors (reach them over VPN/peering)")
        else:
            cidrs.append(network)
    ports = []
    for index, raw in enumerate(raw_ports):
        key = f"{section.key('ports')}[{index}]"
        reported = len(section.errors)
        port = section.check_integer(key, raw)
        if len(section.errors) > reported:
            continue  # its placeholder is no port of the list
        if port in ADMIN_PORTS:
            section.error(key, raw, "is an administration port and is never opened",
                          "reach nodes with SSM Session Manager instead")
        else:
            ports.append(port)
    if len(set(cidrs)) != len(cidrs) or len(set(ports)) != len(ports):
        section.error(section.path, dict(section.data), "lists a CIDR or port twice", "list each once")
    section.finish()
    return MonitoringIngress(cidrs=tuple(cidrs), ports=tuple(ports))
