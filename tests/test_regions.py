"""The zone table (components/facts/regions.py) agrees with EC2's own list (as shipped in moto); a Region's
ARN partition is the one botocore puts it in."""

import json
from pathlib import Path

import botocore
import pytest
from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

from components.facts.regions import ARN_PARTITIONS, DNS_SUFFIXES, ZONES, arn_partition, availability_zone_ids, availability_zones
from components.facts.zones import zone_id_prefix

EC2_ZONES = {region: [z for z in zones if z.zone_type == "availability-zone"]
             for region, zones in RegionsAndZonesBackend.zones.items()}


def test_every_zone_ec2_lists_is_in_the_table():
    missing = {region: sorted({z.name for z in zones} - set(availability_zones(region)))
               for region, zones in EC2_ZONES.items()}
    assert not {region: names for region, names in missing.items() if names}, "add them to components/facts/regions.py"


def test_the_zone_ids_are_ec2s():
    for region, zones in EC2_ZONES.items():
        assert set(availability_zone_ids(region)) == {z.zone_id for z in zones}, region


def test_every_region_of_the_table_exists_and_its_id_prefix_is_derived_alike():
    assert set(ZONES) <= set(EC2_ZONES), sorted(set(ZONES) - set(EC2_ZONES))
    assert {region: zone_id_prefix(region) for region in ZONES} == {region: z.id_prefix for region, z in ZONES.items()}


def test_zone_names_and_ids():
    assert availability_zones("us-west-1") == ("us-west-1a", "us-west-1b", "us-west-1c")
    assert availability_zone_ids("us-west-1") == ("usw1-az1", "usw1-az3")
    assert "us-east-1g" not in availability_zones("us-east-1")
    assert availability_zones("mars-north-1") == availability_zone_ids("mars-north-1") == ()


def test_the_arn_partitions_are_botocores():
    partitions = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())["partitions"]
    assert sorted(p["id"] for p in partitions) == sorted(ARN_PARTITIONS)


@pytest.mark.parametrize(("region", "partition"), [
    ("us-east-1", "aws"), ("eu-west-1", "aws"), ("il-central-1", "aws"),
    ("us-gov-west-1", "aws-us-gov"), ("us-gov-east-1", "aws-us-gov"),
    ("cn-north-1", "aws-cn"), ("cn-northwest-1", "aws-cn"),
    ("us-iso-east-1", "aws-iso"), ("us-isob-east-1", "aws-iso-b"), ("us-isof-south-1", "aws-iso-f"),
    ("eu-isoe-west-1", "aws-iso-e"), ("eusc-de-east-1", "aws-eusc"),
])
def test_a_regions_arn_partition(region, partition):
    assert arn_partition(region) == partition


def test_the_dns_suffixes_are_botocores():
    partitions = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())["partitions"]
    assert {p["id"]: p["outputs"]["dnsSuffix"] for p in partitions} == DNS_SUFFIXES
    assert DNS_SUFFIXES["aws-cn"] == "amazonaws.com.cn"


def test_every_region_botocore_knows_is_in_the_partition_botocore_puts_it_in():
    partitions = json.loads((Path(botocore.__file__).parent / "data" / "partitions.json").read_text())["partitions"]
    regions = {region: p["id"] for p in partitions for region in p["regions"] if not region.endswith("-global")}
    assert len(regions) > 30, "botocore lists no regions: the test would pass on nothing"
    assert {region: arn_partition(region) for region in regions} == regions
