"""What AWS charges for the things a stack creates: one dated table, the only place to update.

Region us-east-1, USD, list prices (no Savings Plans, no Enterprise discounts, no free tier).
Every price names its source and the date of that source's data. Where no source was found the
price is absent, never guessed: the cost model then shows the line as "not priced" and leaves
it out of every total (see `GAPS`).

To update: change the figure, its `source` and `as_of`, then `REVIEWED_ON`; run
`make cost STACK=prod` and `.venv/bin/python -m pytest tests/test_cost_model.py`, which then
fails on every line item the change moves: update the hand-computed figures there, so the review
shows each changed dollar amount. EC2 on-demand prices come from the AWS Pricing API as mirrored
by the Karpenter AWS provider (a generated file, refreshed by its bot): copy the rows of the
instance types in components/facts/instance_types.py from the newest
`pkg/providers/pricing/zz_generated.pricing_aws.go`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

REGION = "us-east-1"
# Data moved from one US Region to another (us-east-1 <-> us-west-2), charged by the source Region;
# S3 Cross-Region Replication is billed at this rate too. The AWS EC2 pricing page lists it under
# "Data Transfer OUT From Amazon EC2 To another AWS Region"; the figure here from the rate matrix at
# https://www.redresscompliance.com/aws-inter-region-transfer-costs-multiregion.html ("us east 1 to
# us west 2 | $0.02 per GB"). us-east-1 <-> us-east-2 is $0.01 on the same page: not used here.
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


INTER_REGION_TRANSFER = Price(0.02, "GB", "redresscompliance.com AWS inter-region rate matrix (us-east-1 to us-west-2)",
                              "2026-11")


# --- EC2 instances ------------------------------------------------------------------------------

EC2_ON_DEMAND_SOURCE = ("aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go "
                        "(AWS Pricing API data, us-east-1), commit 6fc13b52; same figures at commit 031e72b6 "
                        "(data of 2026-01-19)")
EC2_ON_DEMAND_AS_OF = "2026-07-20"
# $/instance-hour, Linux, on-demand. p5e.48xlarge has no on-demand price (AWS sells it only as
# capacity blocks): it is deliberately absent.
EC2_ON_DEMAND_HOURLY: dict[str, float] = {
    "p4d.24xlarge": 21.957642,
    "p4de.24xlarge": 27.447050,
    "p5.48xlarge": 55.040000,
    "p5en.48xlarge": 63.296000,
    "p6-b200.48xlarge": 113.932800,
    "g5.xlarge": 1.006000,
    "g5.2xlarge": 1.212000,
    "g5.12xlarge": 5.672000,
    "g5.48xlarge": 16.288000,
    "g6.xlarge": 0.804800,
    "g6.2xlarge": 0.977600,
    "g6.12xlarge": 4.601600,
    "g6.48xlarge": 13.350400,
    "g6e.xlarge": 1.861000,
    "g6e.2xlarge": 2.242080,
    "g6e.12xlarge": 10.492640,
    "g6e.24xlarge": 15.065590,
    "g6e.48xlarge": 30.131180,
    "m6i.large": 0.096000,
    "m6i.xlarge": 0.192000,
    "m6i.2xlarge": 0.384000,
    "m7i.xlarge": 0.201600,
    "m7i.2xlarge": 0.403200,
    "c6i.2xlarge": 0.340000,
}

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

SERVICE_PRICES: tuple[tuple[str, Price], ...] = (
    ("NAT gateway", NAT_GATEWAY_HOUR),
    ("NAT data processing", NAT_GATEWAY_GB),
    ("public IPv4 address", PUBLIC_IPV4_HOUR),
    ("interface VPC endpoint", INTERFACE_ENDPOINT_AZ_HOUR),
    ("EKS control plane", EKS_CLUSTER_HOUR),
    ("EKS control plane, extended support", EKS_EXTENDED_CLUSTER_HOUR),
    ("EFS Standard", EFS_STANDARD_GB_MONTH),
    ("EFS Infrequent Access", EFS_IA_GB_MONTH),
    ("FSx for Lustre PERSISTENT_2-125", FSX_LUSTRE_P2_125_GB_MONTH),
    ("EBS gp3", EBS_GP3_GB_MONTH),
    ("KMS key", KMS_KEY_MONTH),
    ("Secrets Manager secret", SECRET_MONTH),
    ("CloudWatch Logs ingestion", LOGS_INGEST_GB),
    ("CloudWatch alarm", ALARM_MONTH),
    ("cross-AZ data transfer", CROSS_AZ_GB),
)

# What a stack is billed for that this table cannot price (no source found). The cost model
# prints these under every breakdown so nobody reads its totals as the whole bill.
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
# price, unless the cluster's upgrade policy is STANDARD, which makes EKS upgrade it instead).
# Sources: the calendar in the EKS user guide (docs.aws.amazon.com/eks/latest/userguide/
# kubernetes-versions.html; 1.33 row "July 29, 2026") and endoflife.date/amazon-eks (its bot reads
# that AWS table; 1.34-1.36 rows as of 2026-07-08).
EKS_STANDARD_SUPPORT_END: dict[str, date] = {
    "1.33": date(2026, 7, 29),
    "1.34": date(2026, 12, 2),
    "1.35": date(2027, 3, 27),
    "1.36": date(2027, 8, 2),
}
