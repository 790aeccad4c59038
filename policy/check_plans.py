#!/usr/bin/env python3
"""Run the policy pack over offline plans, as `pulumi preview --policy-pack policy/` would.

    policy/venv/bin/python policy/check_plans.py build/dev build/prod ...

Prints every violation with its level, policy and the resource's URN; exits 1 when a mandatory
policy is violated (advisory ones only print), 2 when a plan cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_training_policy.offline import PlanFormatError, evaluate, load_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("plans", nargs="+", type=Path, help="plan directories (build/<stack>) written by `make plan`")
    args = parser.parse_args(argv)
    blocked = False
    for plan_dir in args.plans:
        try:
            records = load_records(plan_dir)
        except (OSError, ValueError, PlanFormatError) as error:
            print(f"{plan_dir}: {error}", file=sys.stderr)
            return 2
        violations = evaluate(records)
        mandatory = [v for v in violations if v.level == "mandatory"]
        blocked = blocked or bool(mandatory)
        print(f"{plan_dir}: {len(mandatory)} mandatory, {len(violations) - len(mandatory)} advisory")
        for violation in violations:
            print(f"  {violation}")
    return 1 if blocked else 0


if __name__ == "__main__":
    sys.exit(main())
