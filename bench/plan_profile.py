#!/usr/bin/env python3
"""Where a plan's synthesis spends its time: cProfile's own time, summed by where the code lives.

    python -m bench.plan_profile [--stack prod]      # from the repository root

Profiles the second synthesis of the stack in one process: the imports (which `make bench`
measures against the floor on their own) and the SDK's per-type caches are warm. The shares say
what a faster plan would have to change: the program (components/, __main__.py), the plan's
harness (offline/), or the Pulumi SDK and what it runs on (typed inputs and outputs, RPC
serialisation, asyncio), which a real `pulumi up` runs too.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import sys
from collections import Counter
from pathlib import Path

from offline import plan

ROOT = Path(__file__).resolve().parent.parent

# First match wins: (label, fragment of the code's file name).
PLACES = (
    ("the program: components/, __main__.py", (f"{ROOT}/components/", f"{ROOT}/__main__.py")),
    ("the plan's harness: offline/", (f"{ROOT}/offline/",)),
    ("Pulumi SDK: pulumi/", ("/site-packages/pulumi/",)),
    ("provider SDKs: pulumi_aws, pulumi_kubernetes", ("/site-packages/pulumi_aws/", "/site-packages/pulumi_kubernetes/")),
    ("PyYAML (reading the stack files)", ("/site-packages/yaml/",)),
    ("asyncio (the SDK's event loop)", ("/asyncio/", "selectors.py")),
    ("typing (the SDK's type hints)", ("/typing.py",)),
    ("other libraries the SDK uses (protobuf, grpc, ...)", ("/site-packages/",)),
)


def place(filename: str) -> str:
    for label, fragments in PLACES:
        if any(fragment in filename for fragment in fragments):
            return label
    return "the rest of the standard library"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", default="prod")
    args = parser.parse_args()
    gc.disable()  # as plan.py runs
    plan.synthesize(args.stack)
    profile = cProfile.Profile()
    profile.enable()
    plan.synthesize(args.stack)
    profile.disable()
    own_time: Counter[str] = Counter()
    for (filename, _, _), (_, _, total_time, _, callers) in pstats.Stats(profile).stats.items():  # pyright: ignore[reportAttributeAccessIssue]
        if filename == "~":  # a builtin (isinstance, epoll's wait): its time goes to where it was called from
            for (caller_file, _, _), (_, _, time_for_caller, _) in callers.items():
                own_time[place(caller_file)] += time_for_caller
        else:
            own_time[place(filename)] += total_time
    total = sum(own_time.values())
    print(f"{args.stack} synthesis under cProfile: {total:.2f} s (profiling slows it; read the shares)")
    for label, seconds in own_time.most_common():
        print(f"  {seconds / total:6.1%}  {label}")
    sys.stdout.flush()
    os._exit(0)  # as plan.py exits: no teardown of the provider SDKs


if __name__ == "__main__":
    sys.exit(main())
