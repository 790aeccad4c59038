#!/usr/bin/env python3
"""The SDK floor of an offline plan: N trivial resources through the same mock runtime.

    python bench/plan_floor.py N [--imports FILE]

What `scripts/plan.py` cannot go below: interpreter start, the Pulumi SDK, one mock engine and
N resource registrations. With --imports it first imports every module named in FILE (one per
line): the provider SDK modules the real program loads, so the difference to the real plan is
the program's own work. Exits like plan.py does (no interpreter teardown).
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import sys
from pathlib import Path

import pulumi


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        return {}, []


class Thing(pulumi.CustomResource):
    def __init__(self, name: str, index: int):
        super().__init__("bench:index:Thing", name, {"index": index, "tags": {"stack": "bench"}, "items": ["a", "b"]})


def main() -> None:
    count = int(sys.argv[1])
    gc.disable()  # before the imports, as plan.py runs them: with the collector on they cost ~0.3 s more
    if "--imports" in sys.argv:
        for module in Path(sys.argv[sys.argv.index("--imports") + 1]).read_text().split():
            importlib.import_module(module)
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(_Mocks(), project="bench", stack="floor", preview=False)

    @pulumi.runtime.test
    def program():
        things = [Thing(f"thing-{i}", i) for i in range(count)]
        return pulumi.Output.all(*[t.id for t in things])

    program()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
