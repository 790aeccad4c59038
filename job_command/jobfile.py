"""A job file: one `training.jobs[]` entry of a team stack, judged as that stack would judge it.

The file holds exactly the keys of a stack job (components/config/keys.py, docs/configuration.md).
It is added to the team stack's own `training.jobs` and the whole stack is loaded again by the
config model, against its platform's contract: so an ad-hoc job meets every rule a stack job meets
(pool, quota, image, secrets, grace on spot, ...), with no second implementation. Its problems are
reported against the file's keys. The team stack and the contract come from one of two places:
the job context the deployed team stack wrote into its namespace (live,
components/config/job_context.py), or the user's checkout: the stack file and its platform's
offline plan (offline/plan.py `planned_config`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from components.config import ConfigError, ConfigProblem, TeamStackConfig
from components.config.job_context import JobContext
from components.config.platform_contract import platform_of_contract
from components.config.stack import decode_raw_config, load_stack_config, stack_kind
from components.config.stack_file import project_file, stack_config
from components.config.strict_yaml import MAX_FILE_BYTES, YamlError, path_for_message, read_yaml_file
from components.config.training import JobConfig
from offline.plan import planned_config

# What parse_training reports when two jobs share a name (key `<project>:training.jobs`).
SAME_NAME_RULE = "names two jobs the same"


@dataclass(frozen=True)
class TeamJob:
    """A job that passed its team stack's rules: the stack (judged against its platform) and the job."""

    team: TeamStackConfig
    job: JobConfig


def read_job_file(path: Path) -> dict[str, Any]:
    """The job file's mapping; ConfigError (about the file) when it is not one readable YAML mapping."""
    shown = path_for_message(path)
    try:
        data, _ = read_yaml_file(path, source=shown, max_bytes=MAX_FILE_BYTES)
    except YamlError as error:
        raise ConfigError([ConfigProblem(shown, message) for message in error.messages]) from None
    if not isinstance(data, dict):
        raise ConfigError([ConfigProblem(shown, "must hold one job: a YAML mapping of the keys of a training.jobs entry",
                                         "write it as `name: ...`, `pool: ...` lines (see docs/run-your-first-job.md)")])
    return data


@dataclass(frozen=True)
class StackWithJob:
    """A team stack's decoded config with one more entry in training.jobs."""

    project: str
    raw: dict[str, Any]
    """`project:key` -> decoded value, as `planned_config` and `synthesize` take it."""
    index: int
    """The job's index in training.jobs."""
    stack_jobs: list[Any]
    """The stack's own entries."""

    @property
    def training(self) -> dict[str, Any]:
        return self.raw[f"{self.project}:training"]


def stack_with_job(stack: str, job: dict[str, Any], *, team_config: dict[str, Any] | None = None) -> StackWithJob:
    """`team_config`: the team stack's decoded config as deployed (a job context's); None: its stack file's."""
    project = project_file()["name"]
    if team_config is None:
        _, engine_config, _ = stack_config(stack)
        team_config = decode_raw_config(engine_config)
    raw = dict(team_config)
    training = copy.deepcopy(raw.get(f"{project}:training") or {})
    stack_jobs = list(training.get("jobs") or [])
    training["jobs"] = [*stack_jobs, job]
    raw[f"{project}:training"] = training
    return StackWithJob(project, raw, len(stack_jobs), stack_jobs)


def load_team_job(stack: str, job_file: Path, *, context: JobContext | None = None) -> TeamJob:
    """The job of `job_file` judged as an entry of team stack `stack`'s training.jobs (operate.namespace_of
    refused any other stack first), against the deployed `context` (None: the checkout's offline plan);
    ConfigError listing every problem (the file's keys named as `<file>: <key>`) otherwise."""
    job = read_job_file(job_file)
    combined = stack_with_job(stack, job, team_config=context.team if context else None)
    shown = path_for_message(job_file)
    stack_jobs = context.stack_jobs if context else [entry.get("name") for entry in combined.stack_jobs
                                                      if isinstance(entry, dict)]
    collision = _collision(job, stack_jobs, stack, shown)
    try:
        config = planned_config(stack, raw=combined.raw) if context is None \
            else _judged_live(stack, combined, context)
    except ConfigError as error:
        job_key = f"{combined.project}:training.jobs[{combined.index}]"
        raise ConfigError([*collision, *_about_the_file(error.problems, job_key, shown, combined.project,
                                                        drop_same_name=bool(collision))]) from None
    if collision:
        raise ConfigError(collision)
    assert isinstance(config, TeamStackConfig)
    return TeamJob(config, config.training.jobs[combined.index])


def _judged_live(stack: str, combined: StackWithJob, context: JobContext) -> TeamStackConfig:
    """The team stack with the job, judged against the platform as the deployed team stack read it:
    what components/team.py does with its contract, here with the context's copy of it."""
    _, environment = stack_kind(stack)
    platform = platform_of_contract(context.platform, project=combined.project, environment=environment or "")
    config = load_stack_config(combined.raw, project=combined.project, stack=stack, platform=platform)
    assert isinstance(config, TeamStackConfig)
    return config


def _collision(job: dict[str, Any], stack_jobs: Sequence[Any], stack: str, shown: str) -> list[ConfigProblem]:
    """An ad-hoc job may not take a stack job's name: it would replace that JobSet, and share its
    checkpoints (/workspace/checkpoints/<stack>/<job>) and alarms."""
    name = job.get("name")
    if not isinstance(name, str) or name not in stack_jobs:
        return []
    return [ConfigProblem("name", f"is the name of a job of stack {stack} (its training.jobs): the two would replace "
                          "each other and share one checkpoint directory", "give the ad-hoc job another name",
                          value=name, where=shown)]


def _about_the_file(problems: tuple[ConfigProblem, ...], job_key: str, shown: str, project: str, *,
                    drop_same_name: bool) -> list[ConfigProblem]:
    """The problems with the job's keys named as the file's (`<file>: pool`), the stack's own as they are."""
    result = []
    for problem in problems:
        if drop_same_name and problem.key == f"{project}:training.jobs" and problem.rule == SAME_NAME_RULE:
            continue  # said above, in the job file's words
        if problem.is_about(job_key):
            inner = problem.key[len(job_key):].lstrip(".") or "(the job)"
            problem = replace(problem, key=inner, where=shown)
        result.append(problem)
    return result
