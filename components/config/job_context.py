"""The job context: what an ad-hoc job is judged against, as the team stack was deployed.

A team stack writes it into a ConfigMap of its namespace (components/workload/job_context.py), so
the job command (job_command/) judges a job against the deployed platform and team stack, not the
user's checkout, with namespace-scoped rights only (`get` on that one ConfigMap) and no access to
Pulumi state. It holds only non-secret values, by construction:

- the platform contract's config as the team stack read it (platform_contract.py
  `published_config`: the platform's secrets by name only);
- the team stack's own config, published the same way (its secrets by name only);
- the names of the stack's own jobs (an ad-hoc job may not take one).

The command parses both configs with its checkout's config model, exactly as the team stack does
with its contract; so a job meets the same rules either way. It is versioned like the contract: a
reader accepts only the version it was written for, and says which side to update.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from components.config.platform_contract import PlatformContract, published_config
from components.config.reader import ConfigError, ConfigProblem
from components.config.stack import decode_raw_config

JOB_CONTEXT_CONFIG_MAP = "gpu-training-job-context"
"""The ConfigMap's name in the team's namespace."""
JOB_CONTEXT_VERSION = 1
"""Raise it when a reader of the previous version would misread the data (a key renamed, a
meaning changed); the config inside is versioned by the keys the config model knows."""
KEYS = ("version", "stack", "platform", "team", "stackJobs")
"""The ConfigMap's data keys: every value is text (a ConfigMap's data is a string map)."""


@dataclass(frozen=True)
class JobContext:
    """A job context that passed `read_job_context`."""

    stack: str
    """The team stack that wrote it."""
    platform: PlatformContract
    """The platform's published config as the team stack read it (its resources are not carried:
    a job needs none of them)."""
    team: dict[str, Any]
    """The team stack's published config, decoded as `load_stack_config` reads it."""
    stack_jobs: tuple[str, ...]
    """The names of the team stack's own jobs."""


def job_context_data(*, stack: str, platform_config: Mapping[str, str], team_engine_config: Mapping[str, str],
                     team_secret_keys: Collection[str], project: str, stack_jobs: Collection[str]) -> dict[str, str]:
    """The ConfigMap's data: `platform_config` is the contract's (already published), the team's
    config is published here (its secret values left out, as the platform's are)."""
    team = published_config(team_engine_config, team_secret_keys, project=project)
    return {"version": str(JOB_CONTEXT_VERSION), "stack": stack,
            "platform": json.dumps(dict(platform_config), sort_keys=True),
            "team": json.dumps(team, sort_keys=True), "stackJobs": json.dumps(sorted(stack_jobs))}


def read_job_context(data: Mapping[str, Any] | None, *, stack: str, namespace: str) -> JobContext:
    """The job context of ConfigMap data `data` (None: no such ConfigMap), or a ConfigError that says
    what to deploy or update."""
    where = f"ConfigMap {JOB_CONTEXT_CONFIG_MAP} of namespace {namespace}"
    deploy = f"deploy team stack {stack} from this commit (pulumi up --stack {stack}), or run with --job-context offline"

    def problem(key: str, rule: str, fix: str = deploy) -> ConfigProblem:
        return ConfigProblem(key, rule, fix, where=where)

    if data is None:
        raise ConfigError([problem("(the ConfigMap)", "is missing (the team stack was deployed before it wrote one)")])
    version = str(data.get("version", ""))
    if version != str(JOB_CONTEXT_VERSION):
        newer = version.isdigit() and int(version) > JOB_CONTEXT_VERSION
        fix = "update this checkout to the commit the team stack was deployed from" if newer else deploy
        raise ConfigError([problem("version", f"is {version or 'missing'}, this command reads version "
                                              f"{JOB_CONTEXT_VERSION}", fix)])
    if data.get("stack") != stack:
        raise ConfigError([problem("stack", f"is {data.get('stack')!r}, not {stack}", "check --stack")])
    parts: dict[str, Any] = {}
    problems = []
    for key, kind in (("platform", dict), ("team", dict), ("stackJobs", list)):
        try:
            parts[key] = json.loads(str(data.get(key, "")))
        except ValueError:
            parts[key] = None
        if not isinstance(parts[key], kind):
            problems.append(problem(key, f"is missing or not a JSON {'map' if kind is dict else 'list'}"))
    if problems:
        raise ConfigError(problems)
    return JobContext(stack=stack, platform=PlatformContract(config=decode_raw_config(parts["platform"]), resources={}),
                      team=decode_raw_config(parts["team"]), stack_jobs=tuple(str(name) for name in parts["stackJobs"]))
