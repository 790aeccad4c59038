#!/usr/bin/env python3
"""The SDK floor of an offline plan: N trivial resources through the same mock runtime.

    python -m bench.plan_floor N [--imports FILE] [--typed MODULE.CLASS]   # from the repository root

What `scripts/plan.py` cannot go below: interpreter start, the Pulumi SDK, one mock engine and
N resource registrations. With --imports it first imports every module named in FILE (one per
line): the provider SDK modules the real program loads, so the difference to the real plan is
the program's own work. With --typed the N resources are of that provider SDK class, each with
only a tag (e.g. pulumi_aws.ec2.SecurityGroup): the SDK's own work for a typed resource (an
Output per output property, typed translation of its outputs), which no real program avoids.
Exits like plan.py does (no interpreter teardown).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pulumi

from offline.mock_shortcuts import no_source_positions  # what plan.py skips, the floor skips


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        return {}, []


class Thing(pulumi.CustomResource):
    def __init__(self, name: str, index: int):
        super().__init__("bench:index:Thing", name, {"index": index, "tags": {"stack": "bench"}, "items": ["a", "b"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("count", type=int, help="how many resources to register")
    parser.add_argument("--imports", type=Path, help="a file naming the modules to import first, one per line")
    parser.add_argument("--typed", metavar="MODULE.CLASS", help="register provider SDK resources of this class")
    args = parser.parse_args()
    count = args.count
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

    @pulumi.runtime.test
    def program():
        if resource_class is not None:
            things = [resource_class(f"thing-{i}", tags={"stack": "bench"}) for i in range(count)]
        else:
            things = [Thing(f"thing-{i}", i) for i in range(count)]
        return pulumi.Output.all(*[t.id for t in things])

    with no_source_positions():
        program()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
