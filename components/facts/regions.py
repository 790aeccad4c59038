"""AWS Regions and their Availability Zones, names and IDs, as of REGIONS_AS_OF.

Source: AWS, "AWS Availability Zones" (docs.aws.amazon.com/global-infrastructure/latest/regions/
aws-availability-zones.html): every Region with its AZ IDs. tests/test_regions.py checks each row
against the DescribeAvailabilityZones data moto ships, so a typo here cannot go unnoticed.

AZ IDs (use1-az4) name the same physical zone in every account. Zone names do not: in the oldest
Regions AWS maps the letters to physical zones per account, and accounts do not all see the same
letters (us-west-1 shows a+b to some accounts and b+c to others, older ap-northeast-1 accounts
still have 1b), so a row lists every letter some account can have. A zone outside its row
(us-east-1g, use1-az9) can never exist; one inside it may still be missing from a given account,
which only `aws ec2 describe-availability-zones` can tell.

A new Region or zone: add it here.
"""

from __future__ import annotations

from typing import NamedTuple

REGIONS_AS_OF = "2026-11"
# The ARN partitions (botocore 1.44.8 data/partitions.json, ids; tests/test_regions.py checks them
# against the botocore installed): an ARN of any other partition names nothing.
ARN_PARTITIONS = ("aws", "aws-cn", "aws-eusc", "aws-iso", "aws-iso-b", "aws-iso-e", "aws-iso-f", "aws-us-gov")
ARN_PARTITION = "(?:" + "|".join(sorted(ARN_PARTITIONS, key=len, reverse=True)) + ")"
"""A regular expression of one partition, for ARN patterns."""
# Each partition's DNS suffix (botocore 1.44.8 data/partitions.json, outputs.dnsSuffix; tests/test_regions.py
# checks it against the botocore installed): what aws.get_partition answers as dnsSuffix, the offline plan's mock too.
DNS_SUFFIXES = {"aws": "amazonaws.com", "aws-cn": "amazonaws.com.cn", "aws-eusc": "amazonaws.eu",
                "aws-iso": "c2s.ic.gov", "aws-iso-b": "sc2s.sgov.gov", "aws-iso-e": "cloud.adc-e.uk",
                "aws-iso-f": "csp.hci.ic.gov", "aws-us-gov": "amazonaws.com"}
# How a Region's name tells its partition (botocore partitions.json, regionRegex): every other
# Region (us-east-1, eu-west-1, ...) is in "aws".
_PARTITION_OF_REGION_PREFIX = {"cn-": "aws-cn", "eusc-": "aws-eusc", "us-iso-": "aws-iso", "us-isob-": "aws-iso-b",
                               "eu-isoe-": "aws-iso-e", "us-isof-": "aws-iso-f", "us-gov-": "aws-us-gov"}


def arn_partition(region: str) -> str:
    """The partition ARNs of `region` name: arn:aws-us-gov:... in us-gov-west-1, arn:aws:... in us-east-1."""
    return next((partition for prefix, partition in _PARTITION_OF_REGION_PREFIX.items() if region.startswith(prefix)),
                "aws")


class Zones(NamedTuple):
    letters: str
    """zone name letters some account can have: us-east-1 + a ... f"""
    id_prefix: str
    id_numbers: str
    """AZ ID numbers: use1 + -az + 1 ... 6"""


ZONES: dict[str, Zones] = {
    "af-south-1": Zones("abc", "afs1", "123"),
    "ap-east-1": Zones("abc", "ape1", "123"),
    "ap-east-2": Zones("abc", "ape2", "123"),
    "ap-northeast-1": Zones("abcd", "apne1", "124"),
    "ap-northeast-2": Zones("abcd", "apne2", "1234"),
    "ap-northeast-3": Zones("abc", "apne3", "123"),
    "ap-south-1": Zones("abc", "aps1", "123"),
    "ap-south-2": Zones("abc", "aps2", "123"),
    "ap-southeast-1": Zones("abc", "apse1", "123"),
    "ap-southeast-2": Zones("abc", "apse2", "123"),
    "ap-southeast-3": Zones("abc", "apse3", "123"),
    "ap-southeast-4": Zones("abc", "apse4", "123"),
    "ap-southeast-5": Zones("abc", "apse5", "123"),
    "ap-southeast-6": Zones("abc", "apse6", "123"),
    "ap-southeast-7": Zones("abc", "apse7", "123"),
    "ca-central-1": Zones("abd", "cac1", "124"),
    "ca-west-1": Zones("abc", "caw1", "123"),
    "cn-north-1": Zones("ab", "cnn1", "12"),
    "cn-northwest-1": Zones("abc", "cnnw1", "123"),
    "eu-central-1": Zones("abc", "euc1", "123"),
    "eu-central-2": Zones("abc", "euc2", "123"),
    "eu-north-1": Zones("abc", "eun1", "123"),
    "eu-south-1": Zones("abc", "eus1", "123"),
    "eu-south-2": Zones("abc", "eus2", "123"),
    "eu-west-1": Zones("abc", "euw1", "123"),
    "eu-west-2": Zones("abc", "euw2", "123"),
    "eu-west-3": Zones("abc", "euw3", "123"),
    "il-central-1": Zones("abc", "ilc1", "123"),
    "me-central-1": Zones("abc", "mec1", "123"),
    "me-south-1": Zones("abc", "mes1", "123"),
    "mx-central-1": Zones("abc", "mxc1", "123"),
    "sa-east-1": Zones("abc", "sae1", "123"),
    "us-east-1": Zones("abcdef", "use1", "123456"),
    "us-east-2": Zones("abc", "use2", "123"),
    "us-gov-east-1": Zones("abc", "usge1", "123"),
    "us-gov-west-1": Zones("abc", "usgw1", "123"),
    "us-west-1": Zones("abc", "usw1", "13"),
    "us-west-2": Zones("abcd", "usw2", "1234"),
}


def availability_zones(region: str) -> tuple[str, ...]:
    """Every zone name some account can have in `region`; () for a Region not in the table."""
    zones = ZONES.get(region)
    return tuple(f"{region}{letter}" for letter in zones.letters) if zones else ()


def availability_zone_ids(region: str) -> tuple[str, ...]:
    """The AZ IDs of `region`; () for a Region not in the table."""
    zones = ZONES.get(region)
    return tuple(f"{zones.id_prefix}-az{number}" for number in zones.id_numbers) if zones else ()
