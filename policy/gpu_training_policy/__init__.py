"""The gpu-training policy pack: what must never happen in a stack (mandatory) and what costs
money for nothing (advisory).

One module per domain; each ends with its POLICIES. To add a policy, write its check in its
domain module under `@resource_rule(severity)` or `@stack_rule(severity)` (rules.py: the function's
name and docstring are the policy's), add it to that module's POLICIES, and add a passing and a
failing case to policy/tests/test_policies.py (a test fails when a policy has no case of either kind).
"""

from __future__ import annotations

from pulumi_policy import Policy

from gpu_training_policy import compute, cost, governance, iam, network, queues, secrets, storage, tenancy

PACK_NAME = "gpu-training"
POLICIES: tuple[Policy, ...] = (
    *network.POLICIES,
    *storage.POLICIES,
    *compute.POLICIES,
    *secrets.POLICIES,
    *governance.POLICIES,
    *iam.POLICIES,
    *tenancy.POLICIES,
    *queues.POLICIES,
    *cost.POLICIES,
)
