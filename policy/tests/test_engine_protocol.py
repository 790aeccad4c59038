"""The pack started the way the engine starts it (`python -u -m pulumi.policy <engine> policy/`,
pulumi's language host for policy packs), asked over gRPC what the engine asks: its policies,
then Analyze per resource and AnalyzeStack. Its verdicts on real plans must be the offline
runner's, so the runner the other tests use is a faithful stand-in for a preview."""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from conftest import POLICY_DIR, plan_records
from google.protobuf import empty_pb2, json_format, struct_pb2
from gpu_training_policy import PACK_NAME, POLICIES
from gpu_training_policy.offline import evaluate
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from records import find, resource, with_changes

START_TIMEOUT_SECONDS = 60
LEVELS = {analyzer_pb2.ADVISORY: "advisory", analyzer_pb2.MANDATORY: "mandatory"}


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    # The engine address is only used to log through the engine; nothing here logs.
    process = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(POLICY_DIR)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_SECONDS)
        port = process.stdout.readline().decode().strip() if ready else ""
        if not port.isdigit():
            process.kill()
            pytest.fail(f"the pack did not start: {process.stderr.read().decode()[-2000:]}", pytrace=False)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.kill()
        process.wait()


def _struct(values: dict[str, Any]) -> struct_pb2.Struct:
    return json_format.ParseDict(values, struct_pb2.Struct())


def _provider(record: dict[str, Any], providers: dict[str, dict[str, Any]]) -> analyzer_pb2.AnalyzerProviderResource | None:
    if not record["provider"]:
        return None
    p = providers[record["provider"]]
    return analyzer_pb2.AnalyzerProviderResource(type=p["type"], properties=_struct(p["inputs"]), urn=p["urn"], name=p["name"])


def _verdicts(stub: analyzer_pb2_grpc.AnalyzerStub, records: list[dict[str, Any]]) -> set[tuple[str, str, str | None]]:
    """(level, policy, urn) of every diagnostic, as the engine would collect them."""
    providers = {r["name"]: r for r in records if r["type"].startswith("pulumi:providers:")}
    verdicts: set[tuple[str, str, str | None]] = set()
    for record in records:
        response = stub.Analyze(analyzer_pb2.AnalyzeRequest(
            type=record["type"], properties=_struct(record["inputs"]), urn=record["urn"], name=record["name"],
            options=analyzer_pb2.AnalyzerResourceOptions(), provider=_provider(record, providers)))
        verdicts |= {(LEVELS[d.enforcementLevel], d.policyName, d.urn or record["urn"]) for d in response.diagnostics}
    response = stub.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=[analyzer_pb2.AnalyzerResource(
        type=r["type"], properties=_struct(r["inputs"]), urn=r["urn"], name=r["name"], provider=_provider(r, providers),
        options=analyzer_pb2.AnalyzerResourceOptions(),
        propertyDependencies={k: analyzer_pb2.AnalyzerPropertyDependencies(urns=v) for k, v in r["propertyDependencies"].items()},
    ) for r in records]))
    return verdicts | {(LEVELS[d.enforcementLevel], d.policyName, d.urn or None) for d in response.diagnostics}


def test_the_pack_describes_its_policies(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())

    assert info.name == PACK_NAME
    assert [(p.name, LEVELS[p.enforcementLevel]) for p in info.policies] == [
        (p.name, str(p.enforcement_level.value)) for p in POLICIES if p.enforcement_level]
    schema = next(p.configSchema for p in info.policies if p.name == "cidr-ingress-private-and-scoped")
    assert json_format.MessageToDict(schema.properties)["allowedCidrs"]["type"] == "array"


def test_the_engine_path_and_the_offline_runner_agree(analyzer):
    prod = plan_records("prod")
    fabric = find(prod, "aws:ec2/securityGroup:SecurityGroup", "security-groups-efa-fabric")
    bad_rule = resource("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "fabric-from-anywhere", {
        "securityGroupId": "security-groups-efa-fabric-id", "cidrIpv4": "0.0.0.0/0", "ipProtocol": "-1"},
        stack="prod", depends={"securityGroupId": [fabric]})
    bad_prod = with_changes(prod, add=(bad_rule,))

    for records in (prod, plan_records("team-vision-prod"), bad_prod):
        offline = {(v.level, v.policy, v.urn) for v in evaluate(records)}
        assert _verdicts(analyzer, records) == offline
    assert ("mandatory", "fabric-admits-only-itself", bad_rule["urn"]) in offline
