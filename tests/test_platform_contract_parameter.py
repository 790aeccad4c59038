"""The platform contract as an SSM parameter: what a team stack reads instead of its platform's
state (components/config/platform_contract.py says why), and how the offline plan answers it."""

import base64
import json
from random import Random

import pytest

import offline.plan as plan_module
from components.config import ConfigError
from components.config.platform_contract import (
    CONTRACT_OUTPUT,
    CONTRACT_PARAMETER_MAX_BYTES,
    TEAM_ACCESS_POINTS,
    contract_parameter_name,
    contract_parameter_value,
    decoded_contract_parameter,
)
from offline.plan import GET_PARAMETER, synthesize

PLATFORM_STACKS = ("dev", "staging", "prod", "prod-usw2", "prod-use2")
TEAM_STACK = "team-vision-prod"
MARGIN = 0.8
"""A fifth of the Advanced tier's 8 KB is kept free for growth."""
TEAMS_A_PLATFORM_HOLDS = 50


@pytest.mark.parametrize("stack", PLATFORM_STACKS)
def test_every_platform_publishes_its_contract_output_as_its_parameter(plan_of, stack):
    plan = plan_of(stack)
    (parameter,) = plan.of_type("aws:ssm/parameter:Parameter")
    inputs = parameter["inputs"]
    assert inputs["name"] == contract_parameter_name("gpu-training", stack) == f"/gpu-training/{stack}/platform-contract"
    assert (inputs["type"], inputs["tier"], parameter["provider"]) == ("String", "Advanced", "aws")
    assert "value" not in inputs, "insecureValue: the provider marks `value` secret, and the contract holds none"
    assert json.loads(inputs["insecureValue"]) == plan.outputs[CONTRACT_OUTPUT], "one that fits stays plain JSON"
    size = len(inputs["insecureValue"].encode())
    assert size <= MARGIN * CONTRACT_PARAMETER_MAX_BYTES, f"{stack}'s contract is {size} bytes of the tier's 8,192"


def test_a_real_clusters_contract_with_fifty_teams_fits_the_parameter(plan_of):
    """What the offline plan cannot show: a real kubeconfig carries the cluster's certificate
    authority (about 1.5 KB of base64, which does not compress) and a longer endpoint, and each
    registered team adds its registry row and its access point. Plain JSON would pass 8 KB at
    about ten teams; compressed, fifty fit (platform_contract.CONTRACT_ENCODING)."""
    contract = json.loads(json.dumps(plan_of("prod").outputs[CONTRACT_OUTPUT]))
    resources, random = contract["resources"], Random(0)
    kubeconfig = json.loads(resources["kubeconfig"])
    kubeconfig["clusters"][0]["cluster"] = {
        "server": f"https://{random.randbytes(16).hex().upper()}.gr7.us-east-1.eks.amazonaws.com",
        "certificate-authority-data": base64.b64encode(random.randbytes(1100)).decode()}
    resources["kubeconfig"] = json.dumps(kubeconfig)
    teams = [f"team{n:02d}-research" for n in range(TEAMS_A_PLATFORM_HOLDS)]
    contract["config"]["gpu-training:teams"] = json.dumps(
        [{"name": team, "gpuQuota": {"gpu-spot": 16, "gpu-reserved": 8}, "gpuQuotaBorrowed": {"gpu-spot": 8}}
         for team in teams])
    resources[TEAM_ACCESS_POINTS] = {team: {
        "id": f"fsap-{random.randbytes(9).hex()[:17]}",
        "arn": f"arn:aws:elasticfilesystem:us-east-1:111122223333:access-point/fsap-{random.randbytes(9).hex()[:17]}"}
        for team in teams}
    plain = len(json.dumps(contract, sort_keys=True, separators=(",", ":")))
    value = contract_parameter_value(contract, stack="prod")
    assert plain > 2 * CONTRACT_PARAMETER_MAX_BYTES  # what the parameter could not hold as JSON
    assert len(value.encode()) <= MARGIN * CONTRACT_PARAMETER_MAX_BYTES, len(value)
    assert decoded_contract_parameter(value) == contract


@pytest.mark.parametrize("value", ["", "not json", "gzip+base64:not base64!", "gzip+base64:" + base64.b64encode(b"plain").decode()])
def test_a_parameter_that_does_not_hold_a_contract_comes_back_as_its_text(value):
    """read_contract refuses the text, naming the fix (deploy the platform from this commit)."""
    assert decoded_contract_parameter(value) == value


def test_a_contract_too_large_for_the_parameter_is_refused_before_it_exists():
    with pytest.raises(ConfigError) as raised:
        contract_parameter_value({"version": 1, "config": {"k": base64.b64encode(Random(0).randbytes(
            CONTRACT_PARAMETER_MAX_BYTES)).decode()}}, stack="prod")
    assert "more than the 8192 an Advanced SSM parameter holds" in str(raised.value)


def test_the_team_stack_reads_each_contract_in_its_stacks_region(monkeypatch, plan_of):
    """The platform's parameter with the team's provider, each worker's with the provider of the
    worker's region (its tenancy there uses it too): the mock fails a read in another region."""
    reads: list[tuple[str, str]] = []
    real = plan_module._Mocks._call_region

    def recorded(self, args):
        region = real(self, args)
        if args.token == GET_PARAMETER:
            reads.append((args.args["name"], region))
        return region

    monkeypatch.setattr(plan_module._Mocks, "_call_region", recorded)
    synthesize(TEAM_STACK, platform_outputs=plan_of("prod").outputs)
    assert sorted(reads) == sorted((contract_parameter_name("gpu-training", stack), plan_of(stack).outputs["region"])
                                   for stack in ("prod", "prod-usw2", "prod-use2"))
    assert len({region for _, region in reads}) == 3


@pytest.mark.parametrize("wording", ["ParameterNotFound: ", "couldn't find resource"])
def test_a_platform_without_its_parameter_is_a_config_error_naming_the_fix(monkeypatch, plan_of, wording):
    """GetParameter answers ParameterNotFound (a platform deployed before it published there): the
    team stack says to deploy the platform first, not the invoke's traceback."""
    def not_found(self, args):
        if args.token == GET_PARAMETER and args.args["name"].endswith("/prod-usw2/platform-contract"):
            return {}, [("name", f"reading SSM Parameter ({args.args['name']}): {wording}")]
        return real(self, args)

    real = plan_module._Mocks.call
    monkeypatch.setattr(plan_module._Mocks, "call", not_found)
    with pytest.raises(ConfigError) as raised:
        synthesize(TEAM_STACK, platform_outputs=plan_of("prod").outputs)
    (error,) = raised.value.errors
    assert "SSM parameter /gpu-training/prod-usw2/platform-contract: does not exist in us-west-2" in error
    assert "deploy the platform stack from this commit first (pulumi up --stack prod-usw2)" in error


def test_an_unknown_parameter_fails_the_offline_plan_loudly(plan_of):
    mocks = plan_module._Mocks("us-east-1", {contract_parameter_name("gpu-training", "prod"): plan_of("prod").outputs})
    with pytest.raises(NotImplementedError, match="no SSM parameter /gpu-training/staging/platform-contract"):
        mocks._contract_parameter("/gpu-training/staging/platform-contract", "us-east-1")
    with pytest.raises(NotImplementedError, match="is in us-east-1, read in us-west-2"):
        mocks._contract_parameter("/gpu-training/prod/platform-contract", "us-west-2")


def test_a_contract_that_holds_a_secret_is_refused_before_the_parameter_exists(monkeypatch):
    """Team stacks read the parameter in plain text: a secret that reached the contract (here the
    cluster's name, made secret) stops the platform's run instead of being published."""
    import pulumi

    import components.platform as platform_module

    real = platform_module._outputs

    def with_a_secret(*args, **kwargs):
        outputs = real(*args, **kwargs)
        return {**outputs, "clusterName": pulumi.Output.secret(outputs["clusterName"])}

    monkeypatch.setattr(platform_module, "_outputs", with_a_secret)
    with pytest.raises(ConfigError) as raised:
        synthesize("dev")
    (error,) = raised.value.errors
    assert error.startswith("platform stack 'dev': output platformContract: holds a secret"), error
