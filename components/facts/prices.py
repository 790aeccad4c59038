"""What AWS charges for the things a stack creates: one dated table per region, the only place to update.

USD, list prices (no Savings Plans, no Enterprise discounts, no free tier), one `RegionPrices`
per region in `TABLES`. A stack is priced from the table of its own region; a region without a
table is refused (`UnpricedRegionError`), never priced from another region's figures. Every price
names its source and the date of that source's data. Where no source was found for a region the
price is None, never guessed or copied from another region: the cost model then shows the line
as "not priced" and leaves it out of every total (see each table's `gaps` and `GAPS`).

To update: change the figure, its `source` and `as_of`, then `REVIEWED_ON`; run
`make cost STACK=prod` and `.venv/bin/python -m pytest tests/test_cost_model.py`, which then
fails on every line item the change moves: update the hand-computed figures there, so the review
shows each changed dollar amount. EC2 on-demand prices are one table with a column per region.
The us-east-1 column comes from the AWS Pricing API as mirrored by the Karpenter AWS provider (a
generated file, refreshed by its bot): copy the rows of the instance types in
components/facts/instance_types.py from the newest `pkg/providers/pricing/zz_generated.pricing_aws.go`.
That file holds us-east-1 only; other regions' columns come from SkyPilot's catalog of the AWS Price
List (skypilot-org/skypilot-catalog `catalogs/v8/aws/vms.csv`, column Price, the rows of the region).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date

from components.facts.eks_versions import EKS_CALENDAR

# Data moved from one US Region to another is charged by the Region it leaves, at a rate that
# depends on the pair; S3 Cross-Region Replication is billed at that rate too. The AWS EC2 pricing
# page lists it under "Data Transfer OUT From Amazon EC2 To another AWS Region"; the figures here
# from the rate matrix at https://www.redresscompliance.com/aws-inter-region-transfer-costs-multiregion.html
# ("Traffic between US East (N. Virginia) and US East (Ohio) is the cheapest inter-region path at
# $0.01 per GB in each direction"; "us east 1 to us west 2 | $0.02 per GB"; "All other US-to-US
# region pairs - US East to US West (Oregon)... are priced at $0.02 per GB per direction").
_REDRESS_MATRIX = "redresscompliance.com AWS inter-region rate matrix"
# The day this table was last reviewed as a whole; the cost model judges "past standard support"
# on this day unless told another, so the same commit always prints the same figures.
REVIEWED_ON = date(2026, 11, 30)
# AWS's own convention for a month of hourly charges (its NAT gateway and EBS examples use 730 h).
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str
    source: str
    as_of: str
    """Date of the source's data (or of the page when it carries no date)."""


INTER_REGION_TRANSFER: dict[str, Price] = {
    "us-west-2": Price(0.02, "GB sent to us-west-2", f"{_REDRESS_MATRIX} (us-east-1 to us-west-2)", "2026-11"),
    "us-east-2": Price(0.01, "GB sent to us-east-2", f"{_REDRESS_MATRIX} (US East (N. Virginia) - US East (Ohio))",
                       "2026-11"),
}


# --- EC2 on-demand instances: a column per region ---------------------------------------------------

# The us-east-1 column (US_EAST_1):
EC2_ON_DEMAND_SOURCE = ("aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go "
                        "(AWS Pricing API data, us-east-1), commit 6fc13b52; same figures at commit 031e72b6 "
                        "(data of 2026-01-19)")
EC2_ON_DEMAND_AS_OF = "2026-07-20"
# The us-west-2 column (US_WEST_2), read for us-west-2 itself, not the us-east-1 figure carried over:
# skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv at commit 00148f2a (SkyPilot's bot fetches the
# AWS Price List; column Price, rows Region=us-west-2). The file carries no date; its us-east-1 rows
# for every type below equal the Karpenter figures of 2026-07-20 of the us-east-1 column, and it
# already lists p6-b300.48xlarge. p5e.48xlarge has an empty Price there too (capacity blocks only).
US_WEST_2_EC2_SOURCE = ("skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv (AWS Price List, Region us-west-2), "
                        "commit 00148f2a")
SKYPILOT_CATALOG_AS_OF = "undated file; its us-east-1 rows equal Karpenter's 2026-07-20 data"
# $/instance-hour, Linux, on-demand: (us-east-1, us-west-2). p5e.48xlarge has no on-demand price (AWS
# sells it only as capacity blocks): it is deliberately absent.
EC2_ON_DEMAND_HOURLY: dict[str, tuple[float, float]] = {
    "p4d.24xlarge": (21.957642, 21.95764),
    "p4de.24xlarge": (27.447050, 27.44705),
    "p5.48xlarge": (55.040000, 55.04),
    "p5en.48xlarge": (63.296000, 63.296),
    "p6-b200.48xlarge": (113.932800, 113.9328),
    "g5.xlarge": (1.006000, 1.006),
    "g5.2xlarge": (1.212000, 1.212),
    "g5.12xlarge": (5.672000, 5.672),
    "g5.48xlarge": (16.288000, 16.288),
    "g6.xlarge": (0.804800, 0.8048),
    "g6.2xlarge": (0.977600, 0.9776),
    "g6.12xlarge": (4.601600, 4.6016),
    "g6.48xlarge": (13.350400, 13.3504),
    "g6e.xlarge": (1.861000, 1.861),
    "g6e.2xlarge": (2.242080, 2.24208),
    "g6e.12xlarge": (10.492640, 10.49264),
    "g6e.24xlarge": (15.065590, 15.06559),
    "g6e.48xlarge": (30.131180, 30.13118),
    "m6i.large": (0.096000, 0.096),
    "m6i.xlarge": (0.192000, 0.192),
    "m6i.2xlarge": (0.384000, 0.384),
    "m7i.xlarge": (0.201600, 0.2016),
    "m7i.2xlarge": (0.403200, 0.4032),
    "c6i.2xlarge": (0.340000, 0.34),
}


# --- us-east-1 (US East, N. Virginia): the figures of US_EAST_1 below ---------------------------------

# --- EC2 instances ------------------------------------------------------------------------------

# Spot: AWS bills the current spot price, and without a maximum price (EKS managed node groups set
# none) never more than the on-demand price ("If you leave this field empty, the default value is
# 100% of the On-Demand price", AWS Batch API reference, ComputeResource.bidPercentage). No
# authoritative typical GPU spot discount was found, so spot pools are costed at that ceiling and
# labelled as an upper bound.
SPOT_CEILING_SOURCE = "AWS Batch API reference, ComputeResource.bidPercentage (default 100% of On-Demand)"

# Capacity blocks: prepaid for the whole block, used or not. Only one us-east-1 figure was found,
# from a copy of aws.amazon.com/ec2/capacityblocks/pricing that announced its next update for
# 2025-01-01: stale, and labelled so wherever it is shown.
CAPACITY_BLOCK_HOURLY: dict[str, Price] = {
    "p5.48xlarge": Price(39.33, "instance-hour", "aws.amazon.com/ec2/capacityblocks/pricing (copy; STALE)",
                         "2024-12"),
}

# --- services -------------------------------------------------------------------------------------

NAT_GATEWAY_HOUR = Price(0.045, "NAT gateway-hour", "aws.amazon.com/vpc/pricing example (us-east-2, as transcribed "
                         "by api-evangelist); us-east-1 the same per basavytix.com, rajesh.medampudi.com", "2026-09-20")
NAT_GATEWAY_GB = Price(0.045, "GB processed", "same as NAT_GATEWAY_HOUR", "2026-09-20")
PUBLIC_IPV4_HOUR = Price(0.005, "public IPv4-hour (the NAT gateways' Elastic IPs)",
                         "AWS public IPv4 charge from 2024-02-01 (boto3 EC2 docs); rate from trailofbits/algo#14644, "
                         "LeanerCloud/aws-ipv4-cost-viewer ($3.65/month)", "2024-02-01")
INTERFACE_ENDPOINT_AZ_HOUR = Price(0.01, "interface endpoint per AZ-hour",
                                   "aws.amazon.com/privatelink/pricing (copy); awsnegotiations.com, knbrlo.com",
                                   "2026-05-07")
EKS_CLUSTER_HOUR = Price(0.10, "cluster-hour in standard support",
                         "AWS Containers blog, Amazon EKS extended support pricing", "2024-04-01")
EKS_EXTENDED_CLUSTER_HOUR = Price(0.60, "cluster-hour in extended support",
                                  "AWS Containers blog, Amazon EKS extended support pricing", "2024-04-01")
EFS_STANDARD_GB_MONTH = Price(0.30, "GB-month, EFS Standard (Regional)", "aws.amazon.com/efs/pricing", "2023-11")
EFS_IA_GB_MONTH = Price(0.016, "GB-month, EFS Infrequent Access",
                        "blog.gslin.org quoting aws.amazon.com/efs/pricing (3rd party)", "2023-11")
FSX_LUSTRE_P2_125_GB_MONTH = Price(0.145, "GB-month, FSx for Lustre PERSISTENT_2 at 125 MB/s/TiB",
                                   "c3x.dev (3rd party)", "2026")
EBS_GP3_GB_MONTH = Price(0.08, "GB-month, EBS gp3 (3000 IOPS, 125 MB/s included)",
                         "menuvis1-blip.github.io Amazon EBS notes (3rd party)", "2026-02-24")
# Between AZs of one region: $0.01/GB out of one AZ and $0.01/GB into the other, so a GB moved
# across costs $0.02 (aws.amazon.com/ec2/pricing/on-demand "Data Transfer within the same AWS
# Region"; duckbillgroup.com "AWS cross-AZ data transfer costs more than AWS says", measured).
CROSS_AZ_GB = Price(0.02, "GB moved between AZs ($0.01/GB each direction, both billed)",
                    "aws.amazon.com/ec2/pricing/on-demand (copy: courseiva.com, duckbillgroup.com)", "2026")
KMS_KEY_MONTH = Price(1.00, "customer managed key-month (first year; each of the first two rotations "
                      "adds $1/month)", "aws.amazon.com/kms/pricing", "2024-05")
SECRET_MONTH = Price(0.40, "secret-month", "api-evangelist transcription of aws.amazon.com/secrets-manager/pricing",
                     "2026-09-20")
LOGS_INGEST_GB = Price(0.50, "GB ingested into CloudWatch Logs (standard class)",
                       "factualminds.com CloudWatch pricing (3rd party)", "2026-06-13")
ALARM_MONTH = Price(0.10, "standard-resolution alarm metric-month", "c3x.dev (3rd party); aws.amazon.com/cloudwatch/pricing "
                    "(10 alarms free per account, not deducted)", "2026")

# What a stack is billed for that no region's table can price (no source found; a region adds its
# own in RegionPrices.gaps). The cost model prints these under every breakdown so nobody reads its
# totals as the whole bill.
GAPS = (
    "p5e.48xlarge on-demand (AWS sells it as capacity blocks only) and capacity blocks other than p5.48xlarge",
    "FSx for Lustre PERSISTENT_2 at 250/500/1000 MB/s/TiB",
    "CloudWatch Container Insights (enhanced observability is billed per observation) and log storage",
    "S3 and ECR storage and requests, EFS reads/writes and Infrequent Access tiering, AWS Backup",
    "data transfer: cross-AZ other than to FSx for Lustre, internet egress, interface endpoint data",
    "SNS SMS messages, AWS Budgets beyond the free ones",
    "the viewer's Application Load Balancer (the AWS Load Balancer Controller creates it from the Ingresses, outside the plan)",
    "CloudWatch dashboards beyond the free ones, the custom metrics the training-log metric filters publish (per job and metric)",
)

# End of EKS standard support per Kubernetes minor (after it: extended support, 6x the hourly
# price, unless the cluster's upgrade policy is STANDARD, which makes EKS upgrade it instead): the
# offered minors' calendar rows (eks_versions.EKS_CALENDAR, sourced there), and 1.33, no longer
# offered, from the calendar in the EKS user guide (docs.aws.amazon.com/eks/latest/userguide/
# kubernetes-versions.html; 1.33 row "July 29, 2026").
EKS_STANDARD_SUPPORT_END: dict[str, date] = {
    "1.33": date(2026, 7, 29),
    **{minor: release.end_of_standard_support for minor, release in EKS_CALENDAR.items()},
}


# --- one table per region ---------------------------------------------------------------------------

class UnpricedRegionError(ValueError):
    """A plan in a region `TABLES` has no table for (or a plan with no region at all)."""


@dataclass(frozen=True)
class RegionPrices:
    """Every price the cost model uses, for one region. None: no source was found for this region,
    so the item is "not priced" there (the us-east-1 figure is never borrowed)."""

    region: str
    ec2_on_demand_hourly: Mapping[str, float]
    ec2_on_demand_source: str
    ec2_on_demand_as_of: str
    capacity_block_hourly: Mapping[str, Price]
    nat_gateway_hour: Price | None
    nat_gateway_gb: Price | None
    public_ipv4_hour: Price | None
    interface_endpoint_az_hour: Price | None
    eks_cluster_hour: Price | None
    eks_extended_cluster_hour: Price | None
    efs_standard_gb_month: Price | None
    efs_ia_gb_month: Price | None
    fsx_lustre_p2_125_gb_month: Price | None
    ebs_gp3_gb_month: Price | None
    cross_az_gb: Price | None
    kms_key_month: Price | None
    secret_month: Price | None
    logs_ingest_gb: Price | None
    alarm_month: Price | None
    inter_region_transfer: Mapping[str, Price]
    """Data sent from this region to each region named (billed by the source); a region not named
    has no source for that pair here, so what goes there is "not priced"."""
    gaps: tuple[str, ...] = field(default=())
    """What this region's table cannot price, beyond what no region can (`GAPS`)."""

    def service_prices(self) -> tuple[tuple[str, Price | None], ...]:
        return (
            ("NAT gateway", self.nat_gateway_hour),
            ("NAT data processing", self.nat_gateway_gb),
            ("public IPv4 address", self.public_ipv4_hour),
            ("interface VPC endpoint", self.interface_endpoint_az_hour),
            ("EKS control plane", self.eks_cluster_hour),
            ("EKS control plane, extended support", self.eks_extended_cluster_hour),
            ("EFS Standard", self.efs_standard_gb_month),
            ("EFS Infrequent Access", self.efs_ia_gb_month),
            ("FSx for Lustre PERSISTENT_2-125", self.fsx_lustre_p2_125_gb_month),
            ("EBS gp3", self.ebs_gp3_gb_month),
            ("KMS key", self.kms_key_month),
            ("Secrets Manager secret", self.secret_month),
            ("CloudWatch Logs ingestion", self.logs_ingest_gb),
            ("CloudWatch alarm", self.alarm_month),
            ("cross-AZ data transfer", self.cross_az_gb),
            *((f"data transfer out to {region}", price) for region, price in self.inter_region_transfer.items()),
        )

    @property
    def all_gaps(self) -> tuple[str, ...]:
        return (*self.gaps, *GAPS)


US_EAST_1 = RegionPrices(
    region="us-east-1",
    ec2_on_demand_hourly={instance_type: east for instance_type, (east, _) in EC2_ON_DEMAND_HOURLY.items()},
    ec2_on_demand_source=EC2_ON_DEMAND_SOURCE,
    ec2_on_demand_as_of=EC2_ON_DEMAND_AS_OF,
    capacity_block_hourly=CAPACITY_BLOCK_HOURLY,
    nat_gateway_hour=NAT_GATEWAY_HOUR,
    nat_gateway_gb=NAT_GATEWAY_GB,
    public_ipv4_hour=PUBLIC_IPV4_HOUR,
    interface_endpoint_az_hour=INTERFACE_ENDPOINT_AZ_HOUR,
    eks_cluster_hour=EKS_CLUSTER_HOUR,
    eks_extended_cluster_hour=EKS_EXTENDED_CLUSTER_HOUR,
    efs_standard_gb_month=EFS_STANDARD_GB_MONTH,
    efs_ia_gb_month=EFS_IA_GB_MONTH,
    fsx_lustre_p2_125_gb_month=FSX_LUSTRE_P2_125_GB_MONTH,
    ebs_gp3_gb_month=EBS_GP3_GB_MONTH,
    cross_az_gb=CROSS_AZ_GB,
    kms_key_month=KMS_KEY_MONTH,
    secret_month=SECRET_MONTH,
    logs_ingest_gb=LOGS_INGEST_GB,
    alarm_month=ALARM_MONTH,
    inter_region_transfer=INTER_REGION_TRANSFER,
)


# --- us-west-2 (US West, Oregon) --------------------------------------------------------------------
# Each figure below was read for us-west-2 itself; none is the us-east-1 figure carried over. Where
# two regions show the same figure, a us-west-2 source says so.

# A public EKS lab cost guide ("Keep the practice below your $20 allowance"): "Rates below use US West
# (Oregon), us-west-2, checked against AWS's public regional price lists on October 4, 2026", read from
# the Price List offer files .../offers/v1.0/aws/{AmazonEKS,AmazonEC2,AmazonVPC}/current/us-west-2/.
_OREGON_PRICE_LISTS = "AWS Price List offer files for us-west-2, as read by a public EKS lab cost guide"
_OREGON_PRICE_LISTS_AS_OF = "2026-10-04"
# A public HyperPod/E2B comparison guide, section "Pricing and instance specifications (us-west-2,
# on-demand)", quoting the AWS Pricing API (usage type USW2-VpcEndpoint-Hours) and the AWS pages.
_OREGON_HYPERPOD_GUIDE = "public HyperPod comparison guide, 'Pricing (us-west-2, on-demand)', AWS Pricing API"
US_WEST_2 = RegionPrices(
    region="us-west-2",
    ec2_on_demand_hourly={instance_type: west for instance_type, (_, west) in EC2_ON_DEMAND_HOURLY.items()},
    ec2_on_demand_source=US_WEST_2_EC2_SOURCE,
    ec2_on_demand_as_of=SKYPILOT_CATALOG_AS_OF,
    # The capacity-block page copy (see CAPACITY_BLOCK_HOURLY) lists p5.48xlarge for US East only.
    capacity_block_hourly={},
    nat_gateway_hour=Price(0.045, "NAT gateway-hour", f"{_OREGON_PRICE_LISTS} (USW2-NatGateway-Hours); same in the "
                           "HyperPod guide (2026-10-01)", _OREGON_PRICE_LISTS_AS_OF),
    # A public cost note (CDO04, NAT Gateway vs VPC Endpoint) quoting the AWS Pricing API for AmazonEC2,
    # location US West (Oregon): USW2-NatGateway-Bytes $0.045/GB; cloudpipelines.pages.dev's 2026 NAT
    # pricing guide lists US West (Oregon) at ~$0.045/GB too.
    nat_gateway_gb=Price(0.045, "GB processed", "AWS Pricing API, US West (Oregon), USW2-NatGateway-Bytes, as quoted "
                         "by a public cost note; cloudpipelines.pages.dev NAT pricing 2026", "2026"),
    # The same lab guide ($0.005/address-hour in us-west-2); the charge is "in all AWS regions"
    # (techpartner.news quoting AWS on the 2024-02-01 public IPv4 charge).
    public_ipv4_hour=Price(0.005, "public IPv4-hour (the NAT gateways' Elastic IPs)",
                           f"{_OREGON_PRICE_LISTS} (AmazonVPC); techpartner.news: charged in all AWS regions",
                           _OREGON_PRICE_LISTS_AS_OF),
    interface_endpoint_az_hour=Price(0.01, "interface endpoint per AZ-hour",
                                     f"{_OREGON_HYPERPOD_GUIDE} (USW2-VpcEndpoint-Hours)", "2026-10-06"),
    eks_cluster_hour=Price(0.10, "cluster-hour in standard support", f"{_OREGON_PRICE_LISTS} (AmazonEKS); "
                           "HyperPod guide (2026-10-06)", _OREGON_PRICE_LISTS_AS_OF),
    eks_extended_cluster_hour=Price(0.60, "cluster-hour in extended support", f"{_OREGON_PRICE_LISTS} (AmazonEKS); "
                                    "HyperPod guide (2026-10-06)", _OREGON_PRICE_LISTS_AS_OF),
    efs_standard_gb_month=None,
    efs_ia_gb_month=None,
    fsx_lustre_p2_125_gb_month=None,
    ebs_gp3_gb_month=Price(0.08, "GB-month, EBS gp3 (3000 IOPS, 125 MB/s included)",
                           f"{_OREGON_PRICE_LISTS} (USW2-EBS:VolumeUsage.gp3)", _OREGON_PRICE_LISTS_AS_OF),
    # A us-west-2 Cost Explorer breakdown, published as an example: "USW2-DataTransfer-Regional-Bytes
    # $0.010 per GB - regional data transfer" (billed out of one AZ and into the other, as in us-east-1).
    cross_az_gb=Price(0.02, "GB moved between AZs ($0.01/GB each direction, both billed)",
                      "AWS price description of USW2-DataTransfer-Regional-Bytes in a published us-west-2 bill "
                      "breakdown (undated)", "2026-12-02 (read; source undated)"),
    kms_key_month=None,
    secret_month=Price(0.40, "secret-month", _OREGON_HYPERPOD_GUIDE, "2026-10-06"),
    # The same bill breakdown: "USW2-DataProcessing-Bytes $0.50 per GB - custom log data ingested".
    logs_ingest_gb=Price(0.50, "GB ingested into CloudWatch Logs (standard class)",
                         "AWS price description of USW2-DataProcessing-Bytes in a published us-west-2 bill "
                         "breakdown (undated)", "2026-12-02 (read; source undated)"),
    alarm_month=None,
    # A published note on AWS data-transfer usage types, "examples from real billing":
    # "USW2-USE1-AWS-Out-Bytes - us-west-2 -> us-east-1 ($0.02/GB)".
    # No us-west-2 -> us-east-2 rate was found: data sent there is not priced.
    inter_region_transfer={
        "us-east-1": Price(0.02, "GB sent to us-east-1", "USW2-USE1-AWS-Out-Bytes rate in a published note on "
                           "AWS data-transfer usage types (undated)", "2026-12-02 (read; source undated)"),
    },
    gaps=(
        "us-west-2: no source found for KMS keys, EFS (Standard and Infrequent Access), FSx for Lustre, "
        "CloudWatch alarms, or p5.48xlarge capacity blocks",
    ),
)

# --- us-east-2 (US East, Ohio) ------------------------------------------------------------------------
# Each figure below was read for us-east-2 itself (a source naming US East (Ohio) or its usage-type
# prefix USE2-, or saying the price is the same in every region); none is carried over from us-east-1.

# The same SkyPilot catalog file and commit as us-west-2, rows Region=us-east-2 (use2-az1..az3, one
# price per type). p4de.24xlarge has no us-east-2 row (the catalog lists it in us-east-1 and
# us-west-2 among US regions): it is absent, and named in the gaps.
US_EAST_2_EC2_SOURCE = ("skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv (AWS Price List, Region us-east-2), "
                        "commit 00148f2a")
# Row for row the catalog's us-west-2 prices, which it lists equal for every type both regions have.
US_EAST_2_EC2_ON_DEMAND_HOURLY: dict[str, float] = {
    instance_type: west for instance_type, (_, west) in EC2_ON_DEMAND_HOURLY.items() if instance_type != "p4de.24xlarge"}
# A public project's cost notes: "Every rate below was read from the AWS Price List API on
# 2026-08-11 against us-east-2 (Ohio)" (NAT gateway "$0.045/h ... + $0.045/GB processed", public
# IPv4 "$0.005/h", CloudWatch Logs ingestion "$0.50 / GB ... USE2-DataProcessing-Bytes").
_OHIO_PRICE_LIST = "AWS Price List API for us-east-2, as read by a public project's cost notes"
_OHIO_PRICE_LIST_AS_OF = "2026-08-11"
US_EAST_2 = RegionPrices(
    region="us-east-2",
    ec2_on_demand_hourly=US_EAST_2_EC2_ON_DEMAND_HOURLY,
    ec2_on_demand_source=US_EAST_2_EC2_SOURCE,
    ec2_on_demand_as_of=SKYPILOT_CATALOG_AS_OF,
    # The capacity-block page copy of CAPACITY_BLOCK_HOURLY has a row "p5.48xlarge US East (Ohio)
    # $39.33 USD $4.916 USD 8 x H100"; stale in the same way.
    capacity_block_hourly={
        "p5.48xlarge": Price(39.33, "instance-hour", "aws.amazon.com/ec2/capacityblocks/pricing (copy; STALE), "
                             "row US East (Ohio)", "2024-12"),
    },
    # Also rajesh.medampudi.com: "In us-east-1 (N. Virginia) and us-east-2 (Ohio) this is $0.045
    # per NAT Gateway-hour"; cloudburn.io: "$32.40 hourly + $4.50 data processing" for 100 GB in
    # US East Ohio.
    nat_gateway_hour=Price(0.045, "NAT gateway-hour", f"{_OHIO_PRICE_LIST}; rajesh.medampudi.com, cloudburn.io",
                           _OHIO_PRICE_LIST_AS_OF),
    nat_gateway_gb=Price(0.045, "GB processed", f"{_OHIO_PRICE_LIST}; hub.pointfive.co ('$0.045/GB in US East Ohio')",
                         _OHIO_PRICE_LIST_AS_OF),
    public_ipv4_hour=Price(0.005, "public IPv4-hour (the NAT gateways' Elastic IPs)",
                           f"{_OHIO_PRICE_LIST}; haufe-akademie.de ('All AWS regions are affected')",
                           _OHIO_PRICE_LIST_AS_OF),
    interface_endpoint_az_hour=None,
    # Only a learner's notes ("Region: us-east-2 (Ohio)", "$0.10 per hour x 730 hours"); the extended
    # support price found names no region.
    eks_cluster_hour=Price(0.10, "cluster-hour in standard support", "a public learner's EKS cost notes for "
                           "us-east-2 (weak; undated)", "2026-12-03 (read; source undated)"),
    eks_extended_cluster_hour=None,
    efs_standard_gb_month=None,
    efs_ia_gb_month=None,
    fsx_lustre_p2_125_gb_month=None,
    # opencost/opencost's AWS provider test embeds a Price List answer for usagetype
    # USE2-EBS:VolumeUsage.gp3: "$0.08 per GB-month of General Purpose (gp3) provisioned storage -
    # US East (Ohio)" (effectiveDate 2023-03-01).
    ebs_gp3_gb_month=Price(0.08, "GB-month, EBS gp3 (3000 IOPS, 125 MB/s included)",
                           "AWS Price List answer for USE2-EBS:VolumeUsage.gp3 in opencost/opencost's AWS provider test",
                           "2023-03-01"),
    # bitsand.cloud: "$0.01/GB in each direction. This pricing is the same in all regions."
    cross_az_gb=Price(0.02, "GB moved between AZs ($0.01/GB each direction, both billed)",
                      "bitsand.cloud 'Slashing data transfer costs' (same in all regions; undated)",
                      "2026-12-03 (read; source undated)"),
    # The same learner's notes: "$1/month per key" (weak).
    kms_key_month=Price(1.00, "customer managed key-month", "a public learner's cost notes for us-east-2 (weak; undated)",
                        "2026-12-03 (read; source undated)"),
    secret_month=None,
    logs_ingest_gb=Price(0.50, "GB ingested into CloudWatch Logs (standard class)",
                         f"{_OHIO_PRICE_LIST} (USE2-DataProcessing-Bytes)", _OHIO_PRICE_LIST_AS_OF),
    alarm_month=None,
    inter_region_transfer={
        "us-east-1": Price(0.01, "GB sent to us-east-1", f"{_REDRESS_MATRIX} (US East (N. Virginia) - US East (Ohio))",
                           "2026-11"),
        "us-west-2": Price(0.02, "GB sent to us-west-2", f"{_REDRESS_MATRIX} (US East to US West (Oregon))", "2026-11"),
    },
    gaps=(
        "us-east-2: no source found for interface endpoints, EKS extended support, EFS (Standard and Infrequent "
        "Access), FSx for Lustre, Secrets Manager or CloudWatch alarms",
        "us-east-2: p4de.24xlarge (no us-east-2 row in the SkyPilot catalog: not offered there)",
    ),
)

TABLES: dict[str, RegionPrices] = {table.region: table for table in (US_EAST_1, US_WEST_2, US_EAST_2)}


def region_prices(region: str) -> RegionPrices:
    """The price table of `region`; UnpricedRegionError when there is none (no silent fallback)."""
    table = TABLES.get(region)
    if table is None:
        known = ", ".join(TABLES)
        raise UnpricedRegionError(
            f"region {region or '(none: the plan has no aws provider)'} has no price table in "
            f"components/facts/prices.py (tables: {known}). Fix: add a RegionPrices for it, each figure with its "
            "source and date, or plan the stack in a priced region")
    return table
