"""The offline plan and the tools built on it, as importable modules (no credentials, no Pulumi CLI).

- `plan`: run a Pulumi program under the mock runtime and write what it would create
  (`synthesize`, the one synthesiser the tests use too); `architecture` draws its component
  view, `mock_shortcuts` skips SDK work only a real engine reads.
- `plan_diff`: what a change does to every stack's plan, between two refs.
- `cost`: a stack's cost from its plan; `policy_config`: the policy pack's per-stack config.
- `cli_errors`: the bad-input contract every command line here keeps (exit 2, one line per error).
- `project_venv`: a script started by a python without the project's packages re-runs under .venv.
- `generated_files`, `doc_figures`: the parts of files rendered from code, and their --write/--check.

The commands are `scripts/plan.py`, `scripts/plan-diff`, `scripts/cost.py` and
`scripts/policy_config.py`; each only makes the repository root importable and calls `main`.
"""
