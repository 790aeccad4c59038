#!/usr/bin/env python3
"""Offline plan speed against the SDK floor, as ratios (median of N runs, min beside it).

    python -m bench.plan_bench [--repeat 5]      # from the repository root, as the other benches

Each figure is the wall time of a fresh process, as `make plan` / `make plans` pay it:
- prod plan:        scripts/plan.py --stack prod
- all plans:        what `make plans` runs: every stack of both projects (stacks/ and the
                    bootstrap), one process
- floor:            bench/plan_floor.py with as many trivial resources as the prod plan has
- floor + imports:  the same, after importing every provider SDK module the real plan loads
- typed floor:      floor + imports, the resources being provider SDK resources with one tag
                    each: the SDK's own work for a typed resource, which no real program avoids
Goals: all plans <= 2x prod plan; prod plan <= 1.1x floor + imports.
Then bench/plan_profile.py: where a prod synthesis spends its time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
# The typed floor's resources: a type every platform stack has, with no required inputs. The choice
# matters: 295 Buckets, with more output properties, cost twice as much (bench/plan_floor.py --typed).
TYPED_FLOOR_CLASS = "pulumi_aws.ec2.SecurityGroup"

LOADED_MODULES = """
import sys
from offline import plan
plan.synthesize("prod")
print("\\n".join(m for m in sys.modules if m.startswith(("pulumi_aws", "pulumi_kubernetes"))))
"""
# The program above imports the package offline/ from the repository root.
WITH_ROOT_ON_PATH = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def timed(commands: list[list[str]]) -> float:
    start = time.perf_counter()
    for command in commands:
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        modules = subprocess.run([PY, "-c", LOADED_MODULES], check=True, capture_output=True, text=True, cwd=ROOT,
                                 env=WITH_ROOT_ON_PATH).stdout
        (work / "modules.txt").write_text(modules)
        subprocess.run([PY, "scripts/plan.py", "--stack", "prod", "--out", str(work / "prod")], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        count = len(json.loads((work / "prod" / "resources.json").read_text()))
        commands = {
            "prod plan": [[PY, "scripts/plan.py", "--stack", "prod", "--out", str(work / "prod")]],
            # What `make plans` runs: the platform project's stacks and the bootstrap project's.
            "all plans": [[PY, "scripts/plan.py", "--all", "--project", ".", "--project", "bootstrap",
                           "--build-dir", str(work / "all")]],
            "floor": [[PY, "-m", "bench.plan_floor", str(count)]],
            "floor + imports": [[PY, "-m", "bench.plan_floor", str(count), "--imports", str(work / "modules.txt")]],
            "typed floor": [[PY, "-m", "bench.plan_floor", str(count), "--imports", str(work / "modules.txt"),
                             "--typed", TYPED_FLOOR_CLASS]],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, command in commands.items():  # interleaved: drift hits every figure alike
                times[name].append(timed(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"offline plan ({count} resources in prod; {args.repeat} runs each, seconds)")
    for name, values in times.items():
        print(f"  {name:<18} median {median[name]:6.2f}   min {min(values):6.2f}")
    print("ratios (median)")
    print(f"  all plans / prod plan          {median['all plans'] / median['prod plan']:5.2f}x   (goal <= 2.0)")
    print(f"  prod plan / floor + imports    {median['prod plan'] / median['floor + imports']:5.2f}x   (goal <= 1.1)")
    print(f"  prod plan / floor              {median['prod plan'] / median['floor']:5.2f}x")
    print(f"  prod plan / typed floor        {median['prod plan'] / median['typed floor']:5.2f}x   "
          f"({TYPED_FLOOR_CLASS.rsplit('.', 1)[-1]}s with a tag, not the untyped floor's trivial resources)")
    sys.stdout.flush()
    # What the gap to the floor is made of: the program's own code, or the SDK's work per resource.
    subprocess.run([PY, "-m", "bench.plan_profile", "--stack", "prod"], check=True, cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
