#!/usr/bin/env python3
"""The SDK floor of an offline plan: N trivial resources through the same mock runtime.

    python -m bench.plan_floor N [--imports FILE] [--typed MODULE.CLASS]   # from the repository root
    python -m bench.plan_floor --replay build/prod/resources.json [--imports FILE]

What `scripts/plan.py` cannot go below: interpreter start, the Pulumi SDK, one mock engine and
N resource registrations. With --imports it first imports every module named in FILE (one per
line): the provider SDK modules the real program loads, so the difference to the real plan is
the program's own work. With --typed the N resources are of that provider SDK class, each with
only a tag (e.g. pulumi_aws.ec2.SecurityGroup): the SDK's own work for a typed resource (an
Output per output property, typed translation of its outputs), which no real program avoids.
With --replay the floor is a plan's own resources: every resource of a plan's resources.json
registered again through the provider SDK class of its type (CustomResource for the CRD kinds,
ComponentResource for the components), with the inputs, parents and providers the plan recorded,
as plain values: the SDK's work for exactly those resources with their real inputs, with none
of the program's (config, components, Outputs between resources). Exits like plan.py does (no
interpreter teardown).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.rpc

from offline.mock_shortcuts import no_source_positions  # what plan.py skips, the floor skips


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        return {}, []


class Thing(pulumi.CustomResource):
    def __init__(self, name: str, index: int):
        super().__init__("bench:index:Thing", name, {"index": index, "tags": {"stack": "bench"}, "items": ["a", "b"]})


def _class_of_type() -> dict[str, tuple[str, str]]:
    """Type token -> (module, class) of every resource of the provider SDKs imported so far: the
    table each SDK registers for the engine to rebuild its resources by type."""
    found = {}
    for modules in pulumi.runtime.rpc._RESOURCE_MODULES.values():  # pyright: ignore[reportPrivateUsage]
        for module in modules:
            info = getattr(module, "mod_info", None) or {}
            found.update({token: (info["fqn"], name) for token, name in info.get("classes", {}).items()})
    return found


def _json_value(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def replayer(records: list[dict[str, Any]]) -> Callable[[], list[pulumi.Resource]]:
    """The program that registers `records` (resources.json of offline/plan.py) again, parents first."""
    classes = _class_of_type()
    by_name = {record["name"]: record for record in records if not record["custom"] or record["type"].startswith("pulumi:")}

    def make(record: dict[str, Any], made: dict[str, pulumi.Resource]) -> pulumi.Resource:
        token, name, inputs = record["type"], record["name"], record["inputs"]
        parent = made[record["parent"]] if record.get("parent") else None
        provider = made[record["provider"]] if record.get("provider") and record["custom"] else None
        assert provider is None or isinstance(provider, pulumi.ProviderResource)
        opts = pulumi.ResourceOptions(parent=parent, provider=provider)
        if not record["custom"]:
            component = pulumi.ComponentResource(token, name, None, opts)
            component.register_outputs({})
            return component
        if token.startswith("pulumi:providers:"):
            # The AWS provider class sends every input that is not text as JSON text: give those
            # back as values (the Kubernetes provider's kubeconfig is text already).
            package_name = token.rsplit(":", 1)[1]
            decode = _json_value if package_name == "aws" else (lambda value: value)
            return importlib.import_module(f"pulumi_{package_name}").Provider(
                name, opts=pulumi.ResourceOptions(parent=parent), **{_snake(k): decode(v) for k, v in inputs.items()})
        if token not in classes and token.startswith("kubernetes:"):
            # (the module, not the package: importing the module shadows the package's class)
            from pulumi_kubernetes.apiextensions.CustomResource import CustomResource
            fields = {("api_version" if key == "apiVersion" else key): value for key, value in inputs.items()}
            return CustomResource(name, opts=opts, **fields)
        module, class_name = classes[token]
        return getattr(importlib.import_module(module), class_name)(name, opts=opts, **{_snake(k): v for k, v in inputs.items()})

    def program() -> list[pulumi.Resource]:
        made: dict[str, pulumi.Resource] = {}

        def ensure(name: str) -> None:
            if name not in made:
                record = by_name[name]
                for needed in (record.get("parent"), record.get("provider")):
                    if needed:
                        ensure(needed)
                made[name] = make(record, made)

        for name in by_name:
            ensure(name)
        resources = list(made.values())
        for record in records:
            if record["custom"] and not record["type"].startswith("pulumi:"):
                for needed in (record.get("parent"), record.get("provider")):
                    if needed:
                        ensure(needed)
                resources.append(make(record, made))
        return resources

    return program


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("count", type=int, nargs="?", help="how many resources to register")
    parser.add_argument("--replay", type=Path, metavar="RESOURCES_JSON",
                        help="register the resources of a plan's resources.json instead")
    parser.add_argument("--imports", type=Path, help="a file naming the modules to import first, one per line")
    parser.add_argument("--typed", metavar="MODULE.CLASS", help="register provider SDK resources of this class")
    args = parser.parse_args()
    count = args.count
    if (count is None) == (args.replay is None):
        parser.error("give a count or --replay, not both")
    gc.disable()  # before the imports, as plan.py runs them: with the collector on they cost ~0.3 s more
    try:
        for module in args.imports.read_text().split() if args.imports else []:
            importlib.import_module(module)
        found = None
        if args.typed:
            module, _, class_name = args.typed.rpartition(".")
            found = getattr(importlib.import_module(module), class_name)
    except (OSError, ImportError, AttributeError, ValueError) as error:
        parser.error(str(error))
    if found is not None and not (isinstance(found, type) and issubclass(found, pulumi.CustomResource)):
        parser.error(f"--typed {args.typed} is not a provider SDK resource class")
    resource_class: Any = found  # a provider class: its constructor takes the resource's own inputs
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(_Mocks(), project="bench", stack="floor", preview=False)

    replay = replayer(json.loads(args.replay.read_text())) if args.replay else None

    @pulumi.runtime.test
    def program():
        if replay is not None:
            things = replay()
        elif resource_class is not None:
            things = [resource_class(f"thing-{i}", tags={"stack": "bench"}) for i in range(count)]
        else:
            things = [Thing(f"thing-{i}", i) for i in range(count)]
        return pulumi.Output.all(*[t.urn for t in things])

    with no_source_positions():
        program()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
