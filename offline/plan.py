#!/usr/bin/env python3
# Over 600 lines: the mock runtime (mocks, recording monitor), the plan files it writes and its CLI, around one Plan.
"""Offline plan: run the real program under Pulumi's mock runtime and write what it would create.

No Pulumi CLI, no provider plugins, no network, no credentials. Usage:

    python scripts/plan.py --stack dev [--out build/dev] [--stack-file FILE]
                           [--set KEY=VALUE ...] [--secret KEY=VALUE ...]
    python scripts/plan.py --stack dev --stack prod ...   # several stacks, one process
    python scripts/plan.py --all                          # every stack in stacks/
    python scripts/plan.py --all --project . --project bootstrap   # and the bootstrap's (make plans)
    python scripts/plan.py --project bootstrap --stack bootstrap   # the bootstrap program
    python scripts/plan.py --stack prod --today 2027-02-01  # judge versions as of that day

Writes <out>/resources.json (every registered resource: type, name, urn, custom, parent, provider,
inputs as the engine receives them, secrets as "[secret]", whole numbers as integers, the URNs
each input depends on, retainOnDelete and aliases (the URNs a renamed resource had) where set),
<out>/outputs.json (the stack outputs,
redacted the same way) and <out>/manifests/ (one YAML file per Kubernetes object), and prints a
summary. The files are deterministic: the same commit writes the same bytes, whether a stack is
planned alone or with others. Warnings of the config (e.g. the end of EKS standard support
approaching) are printed in the summary, as `pulumi up` shows them. Invalid configuration and bad
arguments exit 2 with every error listed and no traceback, and leave no files behind (a plan
directory is written beside its place and swapped in). The tests import `synthesize` from here:
one synthesiser, not two.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import faulthandler
import functools
import gc
import json
import logging
import os
import runpy
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent

import pulumi  # noqa: E402
from pulumi.runtime import mocks as pulumi_mocks  # noqa: E402
from pulumi.runtime.stack import Stack  # noqa: E402

from components.config import (  # noqa: E402
    ConfigError,
    ConfigProblem,
    StackConfig,
    TeamStackConfig,
    decode_raw_config,
    load_stack_config,
)
from components.config.multikueue import MANAGER, stack_name_prefix  # noqa: E402
from components.config.placeholders import Placeholder, find_placeholders, offline_report, placeholder_secrets  # noqa: E402
from components.config.platform_contract import (  # noqa: E402
    CONTRACT_OUTPUT,
    contract_parameter_name,
    contract_parameter_value,
    platform_of_contract,
    read_contract,
)
from components.config.stack import platform_stack_errors, stack_kind  # noqa: E402
from components.config.stack_file import STACK_NAME, project_file, read_stack_file, stack_config  # noqa: E402
from components.config.strict_yaml import YamlError, load_json_text, path_for_message  # noqa: E402
from components.facts.cost_model import plan_cost  # noqa: E402
from components.facts.prices import UnpricedRegionError  # noqa: E402
from components.facts.regions import DNS_SUFFIXES, arn_partition  # noqa: E402
from components.workload.worker_tenant import worker_cluster_provider_name  # noqa: E402
from offline.architecture import mermaid  # noqa: E402
from offline.cli_errors import ArgumentParser, UsageError, fail, replace_atomically  # noqa: E402
from offline.job_goodput import summary_lines  # noqa: E402
from offline.mock_shortcuts import no_source_positions  # noqa: E402
from offline.pool_summary import pool_lines  # noqa: E402

REDACTED = "[secret]"
# The marker Pulumi's RPC layer puts on secret values (sdk/python/lib/pulumi/runtime/rpc.py).
SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"
MOCK_ACCOUNT_ID = "123456789012"
# This offline account's AZ names of us-east-1's AZ IDs. Every account maps them differently
# (that is why GPU pools name zones by ID); this stable shuffle only lets plans resolve them.
MOCK_ZONE_NAMES = {"use1-az1": "us-east-1c", "use1-az2": "us-east-1d", "use1-az3": "us-east-1e",
                   "use1-az4": "us-east-1a", "use1-az5": "us-east-1f", "use1-az6": "us-east-1b"}
# A program that awaits an output nobody resolves hangs the mock engine forever (and pytest's
# timeout cannot stop it: pulumi/pulumi#7888). Past this, dump every thread's stack and exit.
SYNTH_TIMEOUT_SECONDS = 300
# Resource types that are not Kubernetes objects of their own.
NON_MANIFEST_K8S_TYPES = ("kubernetes:helm.sh/", "kubernetes:yaml")
# libyaml's emitter when PyYAML was built with it (4-6x faster on manifests); same output.
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


# Set (YYYY-MM-DD), the day every plan judges EKS support on when --today is not given: the tests
# pin it so that their outcome never depends on the wall clock.
TODAY_VARIABLE = "PLAN_TODAY"
# Manifests read best in the usual kubectl order; everything below the top level is sorted.
MANIFEST_KEY_ORDER = ("apiVersion", "kind", "metadata")


def resource_sort_key(record: dict[str, Any]) -> tuple[str, str, str]:
    """Registration order depends on when outputs resolve; this order does not."""
    return record["type"], record["parent"] or "", record["name"]


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


def canonical_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The engine hands inputs over as a protobuf Struct, whose key order is arbitrary."""
    ordered = _sorted_keys(manifest)
    first = {k: ordered[k] for k in MANIFEST_KEY_ORDER if k in ordered}
    return {**first, **{k: v for k, v in ordered.items() if k not in first}}


ResourceKey = tuple[str, str]
"""(type, name): unique within a stack (every child's name starts with its parent's)."""


@dataclass
class Plan:
    stack: str
    resources: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    parents: dict[ResourceKey, ResourceKey | None] = field(default_factory=dict)
    dependencies: dict[ResourceKey, frozenset[ResourceKey]] = field(default_factory=dict)
    """What each resource waits for (explicit depends_on and the outputs it reads), as the
    engine was told; the architecture view is drawn from it."""
    warnings: list[str] = field(default_factory=list)
    """What the program logged as warnings (pulumi.log.warn), in order."""
    placeholders: tuple[Placeholder, ...] = ()
    """The example values still in the stack's config (components/config/placeholders.py): the
    plan takes them, a real deploy refuses them. main() lists them once, on stderr."""
    other_clusters: dict[str, str] = field(default_factory=dict)
    """Kubernetes provider name -> the stack it reaches, for the objects made on another stack's
    cluster (a team's tenancy on each MultiKueue worker): their files are named after that stack."""

    def of_type(self, type_token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_token]

    def manifest_records(self) -> list[dict[str, Any]]:
        return [r for r in self.resources
                if r["type"].startswith("kubernetes:") and not r["type"].startswith(NON_MANIFEST_K8S_TYPES)]

    def manifests(self) -> list[dict[str, Any]]:
        return [r["inputs"] for r in self.manifest_records()]

    def manifests_on(self, cluster: str | None) -> list[dict[str, Any]]:
        """The objects made on one cluster: a stack of `other_clusters`, or None for the stack's own (its platform's)."""
        return [r["inputs"] for r in self.manifest_records() if self.other_clusters.get(r["provider"]) == cluster]


# --- the mock engine --------------------------------------------------------------------------

def redact(value: Any) -> Any:
    """Replace secret values by "[secret]" and integral floats by ints, recursively."""
    if isinstance(value, dict):
        if SECRET_SIGNATURE in value:
            return REDACTED
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def _urn_key(urn: str) -> ResourceKey:
    return urn.split("::")[2].split("$")[-1], _urn_name(urn)


def engine_urn(urn: str) -> str:
    """The URN the engine gives: the mock monitor puts the root stack's type in front of the type
    of a top-level resource; the engine leaves it out (pulumi sdk/go/common/resource/urn/urn.go)."""
    return urn.replace("::pulumi:pulumi:Stack$", "::", 1)


def _computed_state(type_token: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs only AWS computes that the program reads; stable stand-ins."""
    if type_token == "aws:eks/cluster:Cluster":
        return {"endpoint": f"https://{name}.offline.eks.amazonaws.com", "certificateAuthority": {"data": "b2ZmbGluZS1jYQ=="}}
    if type_token == "aws:eks/nodeGroup:NodeGroup":
        asg = f"eks-{inputs.get('nodeGroupName', name)}-00000000-0000-0000-0000-000000000000"
        return {"resources": [{"autoscalingGroups": [{"name": asg}]}]}
    if type_token == "aws:ec2/launchTemplate:LaunchTemplate":
        return {"latestVersion": 1}
    if type_token == "aws:kms/key:Key":  # aliases and grants name the key by it
        return {"keyId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"kms-key/{name}"))}
    if type_token == "aws:fsx/lustreFileSystem:LustreFileSystem":  # the CSI volumes mount <dnsName>@tcp:/<mountName>
        return {"dnsName": f"{name}-id.fsx.offline.amazonaws.com", "mountName": "offline1"}
    return {}


def _availability_zone(region: str, zone_id: str) -> dict:
    """getAvailabilityZone by ID, as AWS answers it, from the offline account's mapping."""
    number = int(zone_id.rsplit("-az", 1)[1])
    name = MOCK_ZONE_NAMES.get(zone_id) or f"{region}{'abcdefghijklmnopqrstuvwxyz'[(number - 1) % 26]}"
    return {"name": name, "zoneId": zone_id, "region": region, "id": name, "state": "available",
            "nameSuffix": name.removeprefix(region), "zoneType": "availability-zone", "groupName": region,
            "networkBorderGroup": region, "optInStatus": "opt-in-not-required"}


# Every invoke the programs make, answered as AWS would (region, invoke arguments -> result).
# The CI preview role must be allowed what each one calls: tests/test_bootstrap.py checks every
# token here against bootstrap/policies/actions.py PROGRAM_INVOKES.
GET_PARAMETER = "aws:ssm/getParameter:getParameter"
"""A team stack reads its platform's contract (and each worker's) with it: answered by _Mocks from
the platforms' plans, never from INVOKE_ANSWERS."""
INVOKE_ANSWERS: dict[str, Callable[[str, dict[str, Any]], dict]] = {
    "aws:index/getCallerIdentity:getCallerIdentity": lambda region, args: {
        "accountId": MOCK_ACCOUNT_ID, "arn": f"arn:{arn_partition(region)}:iam::{MOCK_ACCOUNT_ID}:user/offline-plan",
        "userId": "offline-plan", "id": MOCK_ACCOUNT_ID},
    # dnsSuffix as botocore's data/partitions.json gives it per partition (the rotation CronJob's hosts).
    "aws:index/getPartition:getPartition": lambda region, args: {
        "partition": arn_partition(region), "dnsSuffix": DNS_SUFFIXES[arn_partition(region)], "id": arn_partition(region)},
    "aws:index/getAvailabilityZone:getAvailabilityZone": lambda region, args: _availability_zone(region, args["zoneId"]),
    # MultiKueue's peering lookups (components/network/peering.py), answered as in an environment
    # whose stacks are all deployed: the other side exists (a first deploy finds nothing: the
    # stack then plans without that half and warns; tests/test_multikueue.py plans that too).
    "aws:ec2/getVpcs:getVpcs": lambda region, args: _vpcs(args.get("region") or region, args),
    "aws:ec2/getVpcPeeringConnections:getVpcPeeringConnections": lambda region, args: _peerings(region, args),
}


@functools.lru_cache(maxsize=4)
def _planned_vpcs(stacks_dir: Path, project: str) -> frozenset[tuple[str, str, str]]:
    """(region, Name tag, CIDR) of every platform stack's VPC in this checkout: what DescribeVpcs
    finds once they are deployed. The lookups are answered from it, so a lookup in the wrong
    region, by the wrong name or CIDR finds nothing offline, as it would in AWS."""
    found = set()
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        team, environment = stack_kind(stack)
        if team or not environment:
            continue
        try:
            config = read_stack_file(path)
        except ConfigError:
            continue
        region, network = config.get(f"{project}:region", "us-east-1"), config.get(f"{project}:network")
        cidr = network.get("vpcCidr") if isinstance(network, dict) else None
        if isinstance(region, str) and isinstance(cidr, str):
            found.add((region, stack_name_prefix(project, stack), cidr))
    return frozenset(found)


def _checkout_vpcs() -> frozenset[tuple[str, str, str]]:
    return _planned_vpcs(ROOT / "stacks", project_file(ROOT)["name"])


def _vpcs(region: str, args: dict[str, Any]) -> dict[str, Any]:
    name, cidr = _filter(args, "tag:Name"), _filter(args, "cidr-block-association.cidr-block")
    return {"ids": [_mock_id("vpc", name)] if (region, name, cidr) in _checkout_vpcs() else [], "id": region}


def _peerings(region: str, args: dict[str, Any]) -> dict[str, Any]:
    """The active peering the manager made, as its worker finds it in its own region: the requester
    one of the checkout's VPCs, the accepter this region's."""
    requester, accepter = _filter(args, "requester-vpc-info.cidr-block"), _filter(args, "accepter-vpc-info.cidr-block")
    vpcs = _checkout_vpcs()
    found = any(c == requester for _, _, c in vpcs) and any(r == region and c == accepter for r, _, c in vpcs)
    return {"ids": [_mock_id("pcx", requester, accepter)] if found else [], "id": region}


def _filter(args: dict[str, Any], name: str) -> str:
    """The one value of an EC2 lookup's filter `name`."""
    (value,) = next(f["values"] for f in args["filters"] if f["name"] == name)
    return str(value)


def _mock_id(kind: str, *parts: str) -> str:
    """A stable fake EC2 id made of what names the resource: vpc-gpu-training-prod-usw2, pcx-10-30-0-0-16-10-31-0-0-16."""
    return "-".join([kind, *(part.replace(".", "-").replace("/", "-") for part in parts)])


class _Mocks(pulumi.runtime.Mocks):
    """Answers as AWS would, with stable fake identifiers; unknown invokes fail loudly."""

    def __init__(self, region: str, stack_outputs: dict[str, dict[str, Any]] | None = None):
        self.region = region
        self.stack_outputs = stack_outputs or {}
        """Contract parameter name (/<project>/<stack>/platform-contract) -> the outputs of that
        platform stack's own offline plan, whose `platformContract` the parameter holds."""
        self.provider_regions: dict[str, str] = {}
        """Each explicit AWS provider's region, by resource name: a parameter is read in its stack's region."""
        self.inputs: dict[ResourceKey, dict[str, Any]] = {}
        """Each resource's inputs as the mock monitor deserialised them, until the recording
        monitor takes them: one deserialisation per resource, not two. The mock monitor drops
        unknown values; with preview=False every output resolves, so there are none."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.inputs[(args.typ, args.name)] = args.inputs
        state = dict(args.inputs)
        kind = args.typ.split(":")[-1].lower()
        state.setdefault("arn", f"arn:{arn_partition(self.region)}:mock:{self.region}:{MOCK_ACCOUNT_ID}:{kind}/{args.name}")
        state.setdefault("name", args.name)
        state.update(_computed_state(args.typ, args.name, args.inputs))
        if args.typ == "pulumi:providers:aws":
            self.provider_regions[args.name] = str(args.inputs.get("region") or self.region)
        if args.typ == "aws:ecr/repository:Repository":  # scripts/build-image reads this as trainerRepositoryUrl
            state["repositoryUrl"] = f"{MOCK_ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{args.inputs['name']}"
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        if args.token == GET_PARAMETER:
            return self._contract_parameter(str(args.args.get("name")), self._call_region(args))
        return self._invoke_result(args), []  # (outputs, no check failures)

    def _call_region(self, args: pulumi.runtime.MockCallArgs) -> str:
        """The region of the provider an invoke went through (a reference `<urn>::<id>`; the URN ends in its name)."""
        if not args.provider:
            return self.region
        return self.provider_regions[args.provider.split("::")[-2]]

    def _contract_parameter(self, name: str, region: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """A platform contract's parameter, as the platform's plan publishes it (platform._publish_contract),
        and no failure; SSM's ParameterNotFound where those outputs have no contract (a platform deployed
        before it published one). One the plan does not know, or one read in another region than its
        stack's, fails loudly."""
        if name not in self.stack_outputs:
            raise NotImplementedError(f"offline plan has no SSM parameter {name} (it plans "
                                      f"{', '.join(sorted(self.stack_outputs)) or 'none'}): add its stack to "
                                      "referenced_stack_outputs in offline/plan.py")
        outputs = self.stack_outputs[name]
        if outputs.get("region") != region:
            raise NotImplementedError(f"SSM parameter {name} is in {outputs.get('region')}, read in {region}: "
                                      "GetParameter would not find it there")
        if outputs.get(CONTRACT_OUTPUT) is None:
            return {}, [("name", f"reading SSM Parameter ({name}): ParameterNotFound: ")]
        value = contract_parameter_value(outputs[CONTRACT_OUTPUT], stack=name.split("/")[-2])
        return {"name": name, "id": name, "type": "String", "version": 1, "withDecryption": True,
                "arn": f"arn:{arn_partition(region)}:ssm:{region}:{MOCK_ACCOUNT_ID}:parameter{name}",
                "value": value, "insecureValue": value}, []

    def _invoke_result(self, args: pulumi.runtime.MockCallArgs) -> dict:
        answer = INVOKE_ANSWERS.get(args.token)
        if answer is None:
            raise NotImplementedError(f"offline plan has no mock for invoke {args.token}; add one to INVOKE_ANSWERS in "
                                      "offline/plan.py (and its IAM actions to PROGRAM_INVOKES in bootstrap/policies/actions.py)")
        return answer(self.region, args.args)


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """MockMonitor that also records the parent and provider of each resource."""

    def __init__(self, mocks: _Mocks):
        super().__init__(mocks)
        self.plan_mocks = mocks  # MockMonitor keeps it as `self.mocks`, typed as any Mocks
        self.records: list[dict[str, Any]] = []
        self.parents: dict[ResourceKey, ResourceKey | None] = {}
        self.dependencies: dict[ResourceKey, frozenset[ResourceKey]] = {}

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            inputs = self.plan_mocks.inputs.pop((request.type, request.name))
            parent_type = request.parent.split("::")[2].split("$")[-1] if request.parent else ""
            top_level = parent_type == "pulumi:pulumi:Stack" or not request.parent
            record = {
                "type": request.type,
                "name": request.name,
                "urn": engine_urn(response.urn),
                "custom": request.custom,
                "parent": None if top_level else _urn_name(request.parent),
                "provider": request.provider.split("::")[-2] if request.provider else None,
                "inputs": redact(inputs),
                # Which resources each input came from, as the engine records them (the policy
                # pack relates a bucket to its encryption, a rule to its security group, by these).
                "propertyDependencies": {key: sorted(engine_urn(u) for u in deps.urns)
                                         for key, deps in request.propertyDependencies.items() if deps.urns},
            }
            if request.retainOnDelete:  # `pulumi destroy` leaves it in place: reviewers should see that
                record["retainOnDelete"] = True
            # A component renamed with an alias is moved by the engine, not replaced. (Provider
            # resources carry the provider's own type renames, pulumi-aws's BucketV2 -> Bucket: not ours.)
            if not request.custom and (aliases := self._alias_urns(request)):
                record["aliases"] = aliases
            self.records.append(record)
            key = (request.type, request.name)
            self.parents[key] = None if top_level else _urn_key(request.parent)
            self.dependencies[key] = frozenset(_urn_key(urn) for urn in request.dependencies)
        return response

    def _alias_urns(self, request) -> list[str]:
        """The URNs a resource's own aliases name, as the engine resolves them (its children's
        inherited aliases are the engine's to derive, and their keys in the plan do not change)."""
        urns: set[str] = set()
        for alias in request.aliases:
            if not alias.HasField("spec"):
                urns.add(engine_urn(alias.urn))
                continue
            spec = alias.spec
            parent = "" if spec.noParent else spec.parentUrn or request.parent
            urns.add(engine_urn(self.make_urn(parent, spec.type or request.type, spec.name or request.name)))
        return sorted(urns)


class _WarningRecorder(logging.Handler):
    """Keeps what the program logs at WARNING and above (the mock engine logs through `logging`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def synthesize(stack: str, stack_file: Path | None = None, *, overrides: dict[str, Any] | None = None,
               secret_overrides: dict[str, Any] | None = None, project_dir: Path = ROOT,
               today: date | None = None, platform_outputs: dict[str, Any] | None = None) -> Plan:
    """Run <project_dir>/__main__.py for `stack` under mocks. Raises ConfigError on invalid configuration.

    `today` (None: $PLAN_TODAY if set, else the current date) is the day the EKS support
    calendar is read for. A team stack's read of its platform's contract reads `platform_outputs`,
    by default the outputs of its platform stack's own plan (so both read one contract, as
    deployed); those of a manager's workers read each worker's own plan."""
    if today is None and os.environ.get(TODAY_VARIABLE):
        try:
            today = date.fromisoformat(os.environ[TODAY_VARIABLE])
        except ValueError:
            shown_date = path_for_message(repr(os.environ[TODAY_VARIABLE]))[:40]
            raise ConfigError([ConfigProblem(TODAY_VARIABLE, f"{shown_date} is not a date",
                                             "set it as YYYY-MM-DD, or unset it to judge as of today")]) from None
    project, config, secret_keys = stack_config(stack, stack_file, overrides=overrides,
                                                secret_overrides=secret_overrides, project_dir=project_dir)
    region = str(config.get(f"{project}:region", "us-east-1"))
    team, environment = stack_kind(stack)
    references: dict[str, dict[str, Any]] = {}
    workers: list[str] = []
    if team and environment:
        if platform_outputs is None:
            platform_outputs = platform_plan_outputs(environment, project_dir, today)
        workers = worker_stacks(platform_outputs)
        references = referenced_stack_outputs(project, environment, platform_outputs, project_dir, today)
    mocks = _Mocks(region, references)
    monitor = _RecordingMonitor(mocks)
    recorder = _WarningRecorder()
    engine_log = logging.getLogger(f"gpu-training.plan.{stack}")
    engine_log.handlers[:] = [recorder]
    engine_log.propagate = False

    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.reset_options(project=project, stack=stack)
    pulumi.runtime.set_all_config(config, secret_keys)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor,
                             organization="organization", logger=engine_log)

    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def run_program():
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__", init_globals={"PLAN_TODAY": today})
        root = pulumi.runtime.get_root_resource()
        assert isinstance(root, Stack), "the mock runtime always has a root stack"
        exported = dict(root.outputs)

        async def resolve_outputs() -> None:
            for key, value in exported.items():
                output = pulumi.Output.from_input(value)
                # A value that contains any secret is secret as a whole.
                outputs[key] = REDACTED if await output.is_secret() else redact(await output.future())

        return asyncio.ensure_future(resolve_outputs())

    faulthandler.dump_traceback_later(SYNTH_TIMEOUT_SECONDS, exit=True)
    # The program allocates many small objects and frees few: the cyclic collector would only
    # rescan them (a third of a prod plan's time). Reference counting still frees garbage.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with no_source_positions():
            run_program()
    finally:
        if collecting:
            gc.enable()
        faulthandler.cancel_dump_traceback_later()
    if not team and stack_file is None and not overrides and not secret_overrides:
        _PLATFORM_OUTPUTS_MADE[(stack, project_dir, today)] = copy.deepcopy(outputs)
    return Plan(stack=stack, resources=sorted(monitor.records, key=resource_sort_key), outputs=outputs,
                parents=monitor.parents, dependencies=monitor.dependencies, warnings=recorder.messages,
                other_clusters={worker_cluster_provider_name(worker): worker for worker in workers},
                placeholders=stack_placeholders(stack, stack_file, project_dir, config, secret_keys,
                                                overridden={*(overrides or {}), *(secret_overrides or {})}))


def stack_placeholders(stack: str, stack_file: Path | None, project_dir: Path, config: dict[str, str],
                       secret_keys: list[str], *, overridden: set[str]) -> tuple[Placeholder, ...]:
    """The example values of a stack as planned: those in its config (overrides included), and the
    placeholder `secure:` texts of its stack file that no --set or --secret replaced."""
    project_settings = project_file(project_dir)
    project = project_settings["name"]
    path = stack_file or project_dir / project_settings.get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"
    replaced = {key if ":" in key else f"{project}:{key}" for key in overridden}
    secrets = [found for found in placeholder_secrets(read_stack_file(path), project=project)
               if not any(found.key == key or found.key.startswith((f"{key}.", f"{key}[")) for key in replaced)]
    return find_placeholders(decode_raw_config(config), project=project, secret_keys=secret_keys) + tuple(secrets)


def job_lines(stack: str, stack_file: Path | None, overrides: dict[str, Any], secret_overrides: dict[str, Any],
              project_dir: Path, today: date | None) -> list[str]:
    """The plan summary's line per training job: its checkpoint interval and goodput estimate
    (offline/job_goodput.py), from the config this plan read."""
    if project_dir != ROOT:  # the bootstrap runs no training
        return []
    _, engine_config, _ = stack_config(stack, stack_file, overrides=overrides, secret_overrides=secret_overrides,
                                       project_dir=project_dir)
    return summary_lines(planned_config(stack, raw=decode_raw_config(engine_config), project_dir=project_dir,
                                        today=today))


def planned_config(stack: str, *, raw: dict[str, Any] | None = None, project_dir: Path = ROOT,
                   today: date | None = None) -> StackConfig | TeamStackConfig:
    """A stack's config as its plan reads it: a team stack's judged against the contract its
    platform stack's plan exports. `raw`: this decoded config instead of the stack file's (secret
    values stay placeholders: none is used)."""
    project = project_file(project_dir)["name"]
    if raw is None:
        _, engine_config, _ = stack_config(stack, project_dir=project_dir)
        raw = decode_raw_config(engine_config)
    team, environment = stack_kind(stack)
    platform = None
    if team and environment:
        contract = read_contract(platform_plan_outputs(environment, project_dir, today).get(CONTRACT_OUTPUT),
                                 reference=f"organization/{project}/{environment}", project=project)
        platform = platform_of_contract(contract, project=project, environment=environment, today=today)
    return load_stack_config(raw, project=project, stack=stack, today=today, platform=platform)


def referenced_stack_outputs(project: str, environment: str, platform_outputs: dict[str, Any], project_dir: Path,
                             today: date | None) -> dict[str, dict[str, Any]]:
    """Whose contract a team stack reads, by the name of the SSM parameter it reads it from: its
    platform's outputs, and where that platform is a MultiKueue manager, each worker's own plan
    outputs (made before the team's program runs: one mock engine at a time)."""
    return {contract_parameter_name(project, environment): platform_outputs,
            **{contract_parameter_name(project, worker): platform_plan_outputs(worker, project_dir, today)
               for worker in worker_stacks(platform_outputs)}}


def worker_stacks(platform_outputs: dict[str, Any]) -> list[str]:
    """The worker stacks of a platform that is a MultiKueue manager (its output multiKueue), else none."""
    multikueue = platform_outputs.get("multiKueue") or {}
    return list(multikueue.get("workers", [])) if multikueue.get("role") == MANAGER else []


def platform_plan_outputs(environment: str, project_dir: Path, today: date | None) -> dict[str, Any]:
    """The outputs of a platform stack's offline plan (an environment's, or a worker's such as
    prod-usw2): whose contract its team stacks read (a copy: the plan is made once per
    process). Its problems name the platform's stack file."""
    try:
        made = _PLATFORM_OUTPUTS_MADE.get((environment, project_dir, today))
        return copy.deepcopy(made if made is not None else _platform_plan_outputs(environment, project_dir, today))
    except ConfigError as error:
        raise ConfigError(platform_stack_errors(environment, error.problems)) from None


_PLATFORM_OUTPUTS_MADE: dict[tuple[str, Path, date | None], dict[str, Any]] = {}
"""The outputs of each platform plan this process made as its stack file stands (no overrides):
what a team stack of that environment reads, instead of planning its platform a second time
(`make plans` plans prod once, not twice)."""


def forget_platform_plans() -> None:
    """Plan the platforms again when a team stack asks (a test that changes a platform's file)."""
    _PLATFORM_OUTPUTS_MADE.clear()
    _platform_plan_outputs.cache_clear()


@functools.lru_cache(maxsize=8)
def _platform_plan_outputs(environment: str, project_dir: Path, today: date | None) -> dict[str, Any]:
    return synthesize(environment, project_dir=project_dir, today=today).outputs


# --- output -----------------------------------------------------------------------------------

def manifest_filename(manifest: dict[str, Any], cluster: str | None = None) -> str:
    """kind-namespace-name.yaml; `<stack>--kind-namespace-name.yaml` for an object on another stack's cluster."""
    metadata = manifest.get("metadata") or {}
    parts = [manifest.get("kind", "object"), metadata.get("namespace") or "cluster", metadata.get("name", "unnamed")]
    return (f"{cluster}--" if cluster else "") + "-".join(str(p).lower() for p in parts) + ".yaml"


# What a plan directory holds; --out refuses a directory holding anything else (it is replaced).
PLAN_ENTRIES = {"resources.json", "outputs.json", "architecture.md", "manifests"}


def write_plan(plan: Plan, out_dir: Path) -> None:
    """Write the plan beside `out_dir` and swap it in; UsageError for an --out that is not a plan's."""
    if out_dir.is_symlink() or (out_dir.exists() and (not out_dir.is_dir() or not set(os.listdir(out_dir)) <= PLAN_ENTRIES)):
        raise UsageError(f"{path_for_message(out_dir)} exists and is not a plan directory (it would be replaced). "
                         "Fix: name a new or empty directory, or an earlier plan's")
    replace_atomically(out_dir, lambda staging: _write_files(plan, staging), directory=True)


def _write_files(plan: Plan, out_dir: Path) -> None:
    manifests_dir = out_dir / "manifests"
    manifests_dir.mkdir()
    (out_dir / "resources.json").write_text(json.dumps(plan.resources, indent=2, sort_keys=True) + "\n")
    (out_dir / "outputs.json").write_text(json.dumps(plan.outputs, indent=2, sort_keys=True) + "\n")
    (out_dir / "architecture.md").write_text(mermaid(plan.stack, plan.resources, plan.parents, plan.dependencies))
    written: dict[str, str] = {}
    for record in plan.manifest_records():
        manifest = record["inputs"]
        name = manifest_filename(manifest, plan.other_clusters.get(record["provider"]))
        # kind-namespace-name is unique within one API group: two groups' kinds of one name would
        # overwrite each other silently.
        if name in written:
            raise RuntimeError(f"two manifests would both be written to manifests/{name} "
                               f"({written[name]} and {manifest.get('apiVersion')}): give manifest_filename the group")
        written[name] = str(manifest.get("apiVersion"))
        (manifests_dir / name).write_text(manifest_yaml(manifest))


def manifest_yaml(manifest: dict[str, Any]) -> str:
    """One manifest as the plan writes it to manifests/ (and the job command prints it)."""
    return yaml.dump(canonical_manifest(manifest), Dumper=YAML_DUMPER, sort_keys=False)


def summary(plan: Plan, out_dir: Path) -> str:
    by_name = {r["name"]: r for r in plan.resources}
    top_of: dict[str, str] = {}

    def component(record: dict[str, Any]) -> str:
        # Names are unique per type only: a child may share its parent's name. Stop at a repeat.
        start, seen = record["name"], {record["name"]}
        while record["parent"] and record["parent"] in by_name and record["parent"] not in seen:
            if record["parent"] in top_of:
                return top_of.setdefault(start, top_of[record["parent"]])
            record = by_name[record["parent"]]
            seen.add(record["name"])
        return top_of.setdefault(start, record["name"])

    lines = [f"stack {plan.stack}: {len(plan.resources)} resources, {len(plan.manifests())} Kubernetes manifests -> {out_dir}"]
    lines += [f"  warning: {warning}" for warning in plan.warnings]
    types_per_component: dict[str, Counter[str]] = {}
    for record in plan.resources:
        types_per_component.setdefault(component(record), Counter())[record["type"]] += 1
    for name, types in sorted(types_per_component.items()):
        detail = ", ".join(f"{t.split(':')[-1]} x{n}" for t, n in sorted(types.items()))
        lines.append(f"  {name:<24} {sum(types.values()):>4}  {detail}")
    return "\n".join(lines)


def _pairs(items: list[str], flag: str) -> dict[str, Any]:
    """KEY=VALUE arguments; a VALUE starting with [ or { is JSON. A --secret's value is never shown."""
    secret = flag == "--secret"
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            shown = "value not shown" if secret else f"got {path_for_message(repr(item))}"
            raise UsageError(f"{flag} expects KEY=VALUE with a key ({shown})")
        if key in result:
            raise UsageError(f"{flag} sets {path_for_message(key)} twice. Fix: set it once")
        try:
            result[key] = load_json_text(value, source=f"{flag} {path_for_message(key)}") if value[:1] in ("[", "{") else value
        except YamlError as problem:
            raise UsageError(f"{flag} {path_for_message(key)}: the value is not valid JSON (value not shown). Fix: correct it"
                             if secret else str(problem)) from None
    return result


def calendar_day(text: str) -> date:
    """--today's value; argparse reports the ValueError's text as the error."""
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{path_for_message(repr(text))[:40]} is not a date. Fix: write it as YYYY-MM-DD, "
                                         "e.g. 2027-02-01") from None


def all_stacks(project_dir: Path = ROOT) -> list[str]:
    stack_dir = project_dir / (project_file(project_dir).get("stackConfigDir") or ".")
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stack_dir.glob("Pulumi.*.yaml"))



def cost_line(resources: list[dict[str, Any]]) -> str:
    """The plan summary's cost line; a region without a price table is said so there (make cost
    refuses such a stack), it does not fail the plan."""
    try:
        return plan_cost(resources).summary_line()
    except UnpricedRegionError as error:
        return f"cost: not priced: {error}"

def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="plan.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", action="append", default=[], help="a stack to plan; repeat for several")
    parser.add_argument("--all", action="store_true", help="plan every stack of the project")
    parser.add_argument("--project", type=Path, action="append",
                        help="directory of the Pulumi project (default: the repository root; bootstrap for the "
                             "bootstrap); repeat with --all to plan several projects in one process")
    parser.add_argument("--out", type=Path, help="output directory of a single stack (default <build-dir>/<stack>)")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build", help="where <stack>/ directories go")
    parser.add_argument("--stack-file", type=Path, help="read this file instead of stacks/Pulumi.<stack>.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--secret", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--today", type=calendar_day, metavar="YYYY-MM-DD",
                        help="judge Kubernetes versions against EKS's calendar as of this day (default: today)")
    args = parser.parse_args(argv)
    project_dirs = [p.resolve() for p in args.project or [ROOT]]
    for given, project_dir in zip(args.project or [ROOT], project_dirs, strict=True):
        if not (project_dir / "Pulumi.yaml").is_file():
            parser.error(f"--project {path_for_message(given)}: no Pulumi.yaml there")
    if args.all and args.stack:
        parser.error("--all plans every stack; leave out --stack")
    if len(project_dirs) > 1 and not args.all:
        parser.error("several --project take --all")
    planned = [(project_dirs[0], s) for s in args.stack]
    for given, project_dir in zip(args.project or [ROOT], project_dirs, strict=True):
        try:
            planned += [(project_dir, s) for s in all_stacks(project_dir)] if args.all else []
        except ConfigError as error:
            print(f"project {path_for_message(given)}: {error}", file=sys.stderr)
            return 2
    stacks = [s for _, s in planned]
    if not stacks:
        parser.error("name a stack with --stack, or --all")
    if len(stacks) > 1 and (args.out or args.stack_file):
        parser.error("--out and --stack-file take one stack")
    for stack in stacks:
        if not STACK_NAME.fullmatch(stack):
            parser.error(f"--stack {path_for_message(repr(stack))[:120]} is not a Pulumi stack name "
                         "(1 to 100 letters, digits, '-', '_' or '.')")
    if len(set(stacks)) != len(stacks):
        parser.error("a stack is named twice")
    try:
        overrides, secret_overrides = _pairs(args.set, "--set"), _pairs(args.secret, "--secret")
    except UsageError as error:
        return fail(parser.prog, str(error))
    failed = False
    for project_dir, stack in planned:
        out_dir = args.out or args.build_dir / stack
        try:
            plan = synthesize(stack, args.stack_file, overrides=overrides, secret_overrides=secret_overrides,
                              project_dir=project_dir, today=args.today)
        except ConfigError as error:
            print(f"stack {stack}: {error}", file=sys.stderr)
            failed = True
            continue
        try:
            write_plan(plan, out_dir)
        except UsageError as error:
            fail(parser.prog, f"--out {error}")
            failed = True
            continue
        except OSError as error:
            fail(parser.prog, f"cannot write {path_for_message(out_dir)}: {error.strerror or error}")
            failed = True
            continue
        jobs = job_lines(stack, args.stack_file, overrides, secret_overrides, project_dir, args.today)
        say("\n  ".join([summary(plan, out_dir), cost_line(plan.resources), *pool_lines(plan.resources), *jobs]))
        if plan.placeholders and not os.environ.get(QUIET_PLACEHOLDERS):  # one block per stack, after its summary
            print(offline_report(stack, plan.placeholders), file=sys.stderr, flush=True)
    return 2 if failed else 0


# plan-diff keeps a failing stack's stderr for the PR comment: the example-value lists of the
# stacks that planned would push the error out of it. An environment variable, not a flag, so
# plan-diff can set it for a base tree whose plan.py predates it.
QUIET_PLACEHOLDERS = "PLAN_QUIET_PLACEHOLDERS"


def say(text: str) -> None:
    """Print a summary. A reader that stops reading (`plan.py --all | head`) does not stop the
    plan: its files are the result, so the rest of the output goes to /dev/null instead."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def exit_now(code: int) -> None:
    """Exit without tearing down the interpreter: the provider SDKs' modules take about a second
    to finalise and nothing is left to clean up once the files are flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # The whole run, not only synthesis: re-enabled after it, the collector would scan the plan's
    # objects once at the first write (0.15 s of a prod plan) and free nothing; exit_now ends the
    # process without a teardown anyway.
    gc.disable()
    exit_now(main())
