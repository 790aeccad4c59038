#!/usr/bin/env python3
"""The policy pack's configuration for one stack, from the stack's own config.

    .venv/bin/python scripts/policy_config.py STACK [--output FILE]

`pulumi preview`/`up` take it with --policy-pack-config (scripts/deploy-environment, the pull
request's preview job). Without it, `cidr-ingress-private-and-scoped` checks only that CIDR
sources are private: its `allowedCidrs` list is what holds a stack to the sources it declares.
That list is the stack's VPC (its interface endpoints admit HTTPS from it) and the collectors of
`network.monitoringIngress.cidrs` (the only CIDRs node ports are opened to); a team stack takes
its platform stack's network. A team stack whose platform reads an existing datasets bucket
(storage.datasetsBucket) gets it as `team-iam-scope`'s `sharedReadBuckets`: the pack lets its
roles read that bucket, and only read it. Exits 2 on a stack whose config does not load, like the planner.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from components.config import ConfigError, StackConfig, TeamStackConfig  # noqa: E402
from offline.cli_errors import ArgumentParser, fail  # noqa: E402

# The policy and its option (policy/gpu_training_policy/network.py, cidr_ingress_private_and_scoped).
CIDR_POLICY = "cidr-ingress-private-and-scoped"
ALLOWED_CIDRS = "allowedCidrs"
# (policy/gpu_training_policy/governance.py team_iam_scope: what a team's roles may read besides
# the environment's datasets bucket; the pack asks an IAM evaluator what they reach.)
TEAM_IAM_POLICY = "team-iam-scope"
SHARED_READ_BUCKETS = "sharedReadBuckets"


def allowed_cidrs(config: StackConfig | TeamStackConfig) -> list[str]:
    """Every CIDR a security group of the stack may admit: the VPC, then the collectors."""
    network = (config.judged_platform if isinstance(config, TeamStackConfig) else config).network
    return [str(network.vpc_cidr), *(str(cidr) for cidr in network.monitoring_ingress.cidrs)]


def shared_read_buckets(config: StackConfig | TeamStackConfig) -> list[str]:
    """The buckets every team of a team stack's platform may read besides the environment's own
    datasets bucket: the existing one the platform reads instead (storage.datasetsBucket)."""
    if not isinstance(config, TeamStackConfig):
        return []
    existing = config.judged_platform.storage.datasets_bucket
    return [str(existing)] if existing else []


def policy_config(config: StackConfig | TeamStackConfig) -> dict[str, Any]:
    """The --policy-pack-config document: policy name -> its options."""
    document: dict[str, Any] = {CIDR_POLICY: {ALLOWED_CIDRS: allowed_cidrs(config)}}
    if shared := shared_read_buckets(config):
        document[TEAM_IAM_POLICY] = {SHARED_READ_BUCKETS: shared}
    return document


def load_config(stack: str) -> StackConfig | TeamStackConfig:
    """The stack's config as its plan reads it (a team stack's on its platform plan's contract)."""
    from offline.plan import planned_config  # it imports the Pulumi SDK

    return planned_config(stack)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="policy_config.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("stack", help="a stack of stacks/ (dev, staging, prod, team-<team>-<env>)")
    parser.add_argument("--output", type=Path, help="write here instead of standard output")
    args = parser.parse_args(argv)
    try:
        document = json.dumps(policy_config(load_config(args.stack)), indent=2) + "\n"
    except ConfigError as error:
        return fail(parser.prog, f"stack {args.stack}: {error}")
    if args.output:
        args.output.write_text(document)
    else:
        sys.stdout.write(document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
