#!/usr/bin/env python3
"""Offline plan: run the real program under Pulumi's mock runtime and write what it would create.

No Pulumi CLI, no provider plugins, no network, no credentials. Usage:

    python scripts/plan.py --stack dev [--out build/dev] [--stack-file FILE]
                           [--set KEY=VALUE ...] [--secret KEY=VALUE ...]

Writes <out>/resources.json (every registered resource: type, name, parent, provider, inputs as
the engine receives them, secrets as "[secret]", whole numbers as integers), <out>/outputs.json
(the stack outputs, redacted the same way) and <out>/manifests/ (one YAML file per Kubernetes
object), and prints a summary. Invalid configuration exits 2 with every error listed and no
traceback. The tests import `synthesize` from here: one synthesiser, not two.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import runpy
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pulumi  # noqa: E402
from pulumi.runtime import mocks as pulumi_mocks  # noqa: E402

from components.config import ConfigError  # noqa: E402
from components.config.stack_file import stack_config  # noqa: E402

REDACTED = "[secret]"
# The marker Pulumi's RPC layer puts on secret values (sdk/python/lib/pulumi/runtime/rpc.py).
SECRET_SIGNATURE = "4dabf18193072939515e22adb298388d"
MOCK_ACCOUNT_ID = "123456789012"
# A program that awaits an output nobody resolves hangs the mock engine forever (and pytest's
# timeout cannot stop it: pulumi/pulumi#7888). Past this, dump every thread's stack and exit.
SYNTH_TIMEOUT_SECONDS = 300
# Resource types that are not Kubernetes objects of their own.
NON_MANIFEST_K8S_TYPES = ("kubernetes:helm.sh/", "kubernetes:yaml")


@dataclass
class Plan:
    stack: str
    resources: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_token]

    def manifests(self) -> list[dict[str, Any]]:
        return [
            r["inputs"] for r in self.resources
            if r["type"].startswith("kubernetes:") and not r["type"].startswith(NON_MANIFEST_K8S_TYPES)
        ]


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


def _platform_outputs(reference: str) -> dict[str, Any]:
    """Stand-ins for a platform stack's outputs, as a team stack's StackReference reads them."""
    environment = reference.rsplit("/", 1)[-1]
    prefix = f"gpu-training-{environment}"
    return {
        "clusterName": prefix,
        "kubeconfig": json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": prefix}),
        "datasetsBucket": f"{prefix}-datasets-{MOCK_ACCOUNT_ID}",
        "artifactsBucket": f"{prefix}-artifacts-{MOCK_ACCOUNT_ID}",
        "checkpointFileSystemId": f"fs-{environment}-offline",
        "dataKeyArn": f"arn:aws:kms:us-east-1:{MOCK_ACCOUNT_ID}:key/{environment}-data-offline",
        "secretsSyncRoleArn": f"arn:aws:iam::{MOCK_ACCOUNT_ID}:role/{prefix}-secrets-sync-offline",
    }


def _computed_state(type_token: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs only AWS (or the Pulumi service) computes that the program reads; stable stand-ins."""
    if type_token == "pulumi:pulumi:StackReference":
        return {"outputs": _platform_outputs(inputs["name"])}
    if type_token == "aws:eks/cluster:Cluster":
        return {"endpoint": f"https://{name}.offline.eks.amazonaws.com", "certificateAuthority": {"data": "b2ZmbGluZS1jYQ=="}}
    if type_token == "aws:eks/nodeGroup:NodeGroup":
        asg = f"eks-{inputs.get('nodeGroupName', name)}-00000000-0000-0000-0000-000000000000"
        return {"resources": [{"autoscalingGroups": [{"name": asg}]}]}
    if type_token == "aws:ec2/launchTemplate:LaunchTemplate":
        return {"latestVersion": 1}
    return {}


class _Mocks(pulumi.runtime.Mocks):
    """Answers as AWS would, with stable fake identifiers; unknown invokes fail loudly."""

    def __init__(self, region: str):
        self.region = region

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        state = dict(args.inputs)
        state.setdefault("arn", f"arn:aws:mock:{self.region}:{MOCK_ACCOUNT_ID}:{args.typ.split(':')[-1].lower()}/{args.name}")
        state.setdefault("name", args.name)
        state.update(_computed_state(args.typ, args.name, args.inputs))
        if args.typ == "aws:ecr/repository:Repository":  # scripts/build-image reads this as trainerRepositoryUrl
            state["repositoryUrl"] = f"{MOCK_ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com/{args.inputs['name']}"
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": MOCK_ACCOUNT_ID, "arn": f"arn:aws:iam::{MOCK_ACCOUNT_ID}:user/offline-plan",
                    "userId": "offline-plan", "id": MOCK_ACCOUNT_ID}
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
        raise NotImplementedError(f"offline plan has no mock for invoke {args.token}; add one in scripts/plan.py")


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    """MockMonitor that also records the parent and provider of each resource."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.records: list[dict[str, Any]] = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            from pulumi.runtime import rpc
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            parent_type = request.parent.split("::")[2].split("$")[-1] if request.parent else ""
            self.records.append({
                "type": request.type,
                "name": request.name,
                "parent": None if parent_type == "pulumi:pulumi:Stack" or not request.parent else _urn_name(request.parent),
                "provider": request.provider.split("::")[-2] if request.provider else None,
                "inputs": redact(inputs),
            })
        return response


def synthesize(stack: str, stack_file: Path | None = None, *, overrides: dict[str, Any] | None = None,
               secret_overrides: dict[str, Any] | None = None) -> Plan:
    """Run __main__.py for `stack` under mocks. Raises ConfigError on invalid configuration."""
    project, config, secret_keys = stack_config(stack, stack_file, overrides=overrides,
                                                secret_overrides=secret_overrides)
    region = str(config.get(f"{project}:region", "us-east-1"))
    mocks = _Mocks(region)
    monitor = _RecordingMonitor(mocks)

    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.reset_options(project=project, stack=stack)
    pulumi.runtime.set_all_config(config, secret_keys)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor,
                             organization="organization")

    outputs: dict[str, Any] = {}

    @pulumi.runtime.test
    def run_program():
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        exported = dict(pulumi.runtime.get_root_resource().outputs)

        async def resolve_outputs() -> None:
            for key, value in exported.items():
                output = pulumi.Output.from_input(value)
                # A value that contains any secret is secret as a whole.
                outputs[key] = REDACTED if await output.is_secret() else redact(await output.future())

        return asyncio.ensure_future(resolve_outputs())

    faulthandler.dump_traceback_later(SYNTH_TIMEOUT_SECONDS, exit=True)
    try:
        run_program()
    finally:
        faulthandler.cancel_dump_traceback_later()
    return Plan(stack=stack, resources=monitor.records, outputs=outputs)


# --- output -----------------------------------------------------------------------------------

def manifest_filename(manifest: dict[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    parts = [manifest.get("kind", "object"), metadata.get("namespace") or "cluster", metadata.get("name", "unnamed")]
    return "-".join(str(p).lower() for p in parts) + ".yaml"


def write_plan(plan: Plan, out_dir: Path) -> None:
    manifests_dir = out_dir / "manifests"
    manifests_dir.mkdir(parents=True, exist_ok=True)
    for old in manifests_dir.glob("*.yaml"):
        old.unlink()
    (out_dir / "resources.json").write_text(json.dumps(plan.resources, indent=2, sort_keys=True) + "\n")
    (out_dir / "outputs.json").write_text(json.dumps(plan.outputs, indent=2, sort_keys=True) + "\n")
    for manifest in plan.manifests():
        (manifests_dir / manifest_filename(manifest)).write_text(yaml.safe_dump(manifest, sort_keys=False))


def summary(plan: Plan, out_dir: Path) -> str:
    by_name = {r["name"]: r for r in plan.resources}

    def component(record: dict[str, Any]) -> str:
        # Names are unique per type only: a child may share its parent's name. Stop at a repeat.
        seen = {record["name"]}
        while record["parent"] and record["parent"] in by_name and record["parent"] not in seen:
            record = by_name[record["parent"]]
            seen.add(record["name"])
        return record["name"]

    lines = [f"stack {plan.stack}: {len(plan.resources)} resources, {len(plan.manifests())} Kubernetes manifests -> {out_dir}"]
    per_component = Counter(component(r) for r in plan.resources)
    for name, count in sorted(per_component.items()):
        types = Counter(r["type"] for r in plan.resources if component(r) == name)
        detail = ", ".join(f"{t.split(':')[-1]} x{n}" for t, n in sorted(types.items()))
        lines.append(f"  {name:<24} {count:>4}  {detail}")
    return "\n".join(lines)


def _pairs(items: list[str], flag: str) -> dict[str, Any]:
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"{flag} expects KEY=VALUE, got {item!r}")
        try:
            result[key] = json.loads(value) if value[:1] in "[{" else value
        except json.JSONDecodeError:
            result[key] = value
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--stack-file", type=Path, help="read this file instead of stacks/Pulumi.<stack>.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--secret", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    out_dir = args.out or ROOT / "build" / args.stack
    try:
        plan = synthesize(args.stack, args.stack_file, overrides=_pairs(args.set, "--set"),
                          secret_overrides=_pairs(args.secret, "--secret"))
    except ConfigError as error:
        print(f"stack {args.stack}: {error}", file=sys.stderr)
        return 2
    write_plan(plan, out_dir)
    print(summary(plan, out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
