"""The bootstrap's IAM documents against IAM's size quotas, at config time (issue 41).

A boundary or deploy policy is rendered from the config's names: every character of
`stacksProject`, of a team's name and of each site's cluster lands in it several times over, so a
long name can push a document past its quota, and IAM would refuse it halfway through the first
`pulumi up` (LimitExceeded), with the roles created before it already there. The quotas (IAM User
Guide, "IAM and AWS STS quotas", https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html):
"Managed policy size: You cannot exceed 6,144 characters", "Role policy size: You cannot exceed
10,240 characters" (a role's inline policies together); "IAM doesn't count white space when
calculating the size of a policy against these limits".

The documents are rendered here with ARNs of the length the real ones have (a 12-digit account,
KMS key ids of 36 characters), before any resource exists: `refuse_oversized_policies`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, get_args

from bootstrap.config import BootstrapConfig, TeamCi
from bootstrap.policies.boundary import boundary_policy
from bootstrap.policies.ci_roles import image_policy, preview_policy
from bootstrap.policies.deploy import deploy_guard_policy, deploy_policy, deploy_scope_policy
from bootstrap.policies.names import (
    CiJob,
    boundary_policy_name,
    ci_role_name,
    deploy_guard_policy_name,
    deploy_scope_policy_name,
    state_bucket_name,
    state_log_bucket_name,
)
from bootstrap.policies.teams import (
    team_boundary_policy,
    team_boundary_policy_name,
    team_deploy_role_name,
)
from bootstrap.policies.trust import IMAGE_BUILD_ENVIRONMENTS
from components.config.reader import ConfigError, ConfigProblem, shown
from components.facts.regions import arn_partition

MANAGED_POLICY_CHARACTERS = 6144
"""IAM User Guide, "IAM and AWS STS quotas": managed policy size."""
ROLE_INLINE_CHARACTERS = 10240
"""IAM User Guide, "IAM and AWS STS quotas": role policy size, a role's inline policies together."""
QUOTAS_SOURCE = 'IAM User Guide, "IAM and AWS STS quotas"'

# Stand-ins as long as the real values: an account id has 12 digits; a KMS key id is a UUID (36
# characters; a multi-Region key's, mrk- and 32 hex digits, is as long): KMS Developer Guide, "Key ARN".
ACCOUNT_STAND_IN = "000000000000"
KEY_ID_STAND_IN = "00000000-0000-0000-0000-000000000000"


def iam_size(document: dict[str, Any]) -> int:
    """A document's size as IAM counts it: no white space outside its strings."""
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False))


def _stand_in_arns(config: BootstrapConfig) -> dict[str, Any]:
    """The keyword arguments every bootstrap document takes, with ARNs of their real length."""
    partition = arn_partition(config.region)

    def key() -> str:
        return f"arn:{partition}:kms:{config.region}:{ACCOUNT_STAND_IN}:key/{KEY_ID_STAND_IN}"

    oidc = config.github.oidc_provider_arn or \
        f"arn:{partition}:iam::{ACCOUNT_STAND_IN}:oidc-provider/token.actions.githubusercontent.com"
    return {"account_id": ACCOUNT_STAND_IN,
            "bucket_arn": f"arn:{partition}:s3:::{state_bucket_name(config.stacks_project, ACCOUNT_STAND_IN)}",
            "state_key_arn": key(), "oidc_provider_arn": oidc,
            "secrets_key_arns": {env.name: key() for env in config.environments}}


def _environment_documents(config: BootstrapConfig, environment: str) -> Iterator[tuple[str, int, int]]:
    """(what, size, quota) of each document of one environment's CI roles and boundary."""
    project, arns = config.stacks_project, _stand_in_arns(config)
    managed: tuple[tuple[str, Callable[..., dict[str, Any]]], ...] = (
        (f"policy {boundary_policy_name(project, environment)}", boundary_policy),
        (f"policy {deploy_scope_policy_name(project, environment)}", deploy_scope_policy),
        (f"policy {deploy_guard_policy_name(project, environment)}", deploy_guard_policy))
    for what, document in managed:
        yield what, iam_size(document(config, environment, **arns)), MANAGED_POLICY_CHARACTERS
    # Each CI role holds one inline policy (bootstrap/ci_identity.py CiIdentity._role).
    yield (f"inline policy of {ci_role_name(project, 'deploy', environment)}",
           iam_size(deploy_policy(config, environment, **arns)), ROLE_INLINE_CHARACTERS)
    preview = preview_policy(config, environment, bucket_arn=arns["bucket_arn"], state_key_arn=arns["state_key_arn"],
                             secrets_key_arn=arns["secrets_key_arns"][environment])
    yield f"inline policy of {ci_role_name(project, 'preview', environment)}", iam_size(preview), ROLE_INLINE_CHARACTERS
    if environment in IMAGE_BUILD_ENVIRONMENTS:
        yield (f"inline policy of {ci_role_name(project, 'image', environment)}",
               iam_size(image_policy(config, environment, **arns)), ROLE_INLINE_CHARACTERS)


def policy_size_problems(config: BootstrapConfig) -> list[ConfigProblem]:
    """Every bootstrap document the config would render past its IAM quota, keyed by the names that
    grow it: a team's boundary by the team, an environment's documents by its readBuckets when it
    has some, else its sites (each adds its cluster's names), else by `stacksProject`."""
    key, problems = f"{config.project}:", []
    project_fix = (f"shorten stacksProject '{config.stacks_project}' (it is every name's prefix: rename the main "
                   "Pulumi.yaml's project with it)")
    for env in config.environments:
        for what, size, quota in _environment_documents(config, env.name):
            if size <= quota:
                continue
            rule = f"renders {what} at {size} characters, over the {quota:,} IAM holds ({QUOTAS_SOURCE})"
            if env.read_buckets:
                problems.append(ConfigProblem(
                    f"{key}environments.{env.name}.readBuckets", rule,
                    f"remove readBuckets (each adds its bucket and its objects to the boundary): copy the datasets into "
                    f"a bucket of the environment's names, {config.stacks_project}-{env.name}-*, or {project_fix}",
                    shown(list(env.read_buckets))))
            elif env.sites:
                problems.append(ConfigProblem(f"{key}environments.{env.name}.sites", rule,
                                              f"move a site to an environment of its own, or {project_fix}",
                                              shown({site: region for site, region in env.sites})))
            else:
                problems.append(ConfigProblem(f"{key}stacksProject", rule, project_fix, shown(config.stacks_project)))
    for team in config.teams:
        problems += _team_problems(config, team, project_fix)
    return problems


def team_boundary_size(config: BootstrapConfig, team: TeamCi, environment: str) -> int:
    """A team boundary's size, with ARNs of their real length. The team deploy role's one inline
    policy is the boundary's copy (bootstrap/ci_identity.py _team_role), so within the 6,144 of a
    managed policy it is within the 10,240 of a role's inline policies too."""
    arns = _stand_in_arns(config)
    return iam_size(team_boundary_policy(config, team.name, environment, account_id=arns["account_id"],
                                         bucket_arn=arns["bucket_arn"], state_key_arn=arns["state_key_arn"],
                                         secrets_key_arn=arns["secrets_key_arns"][environment]))


def _without_members(config: BootstrapConfig, team: TeamCi) -> BootstrapConfig:
    return replace(config, teams=tuple(replace(row, members=()) if row.name == team.name else row for row in config.teams))


def _team_problems(config: BootstrapConfig, team: TeamCi, project_fix: str) -> list[ConfigProblem]:
    """A team boundary past a managed policy's quota: keyed by its members when the boundary fits
    without them (each adds its ARN to TeamMembersEntries, bootstrap/policies/teams.py), else by
    the team's name, which every one of its names holds."""
    key = f"{config.project}:teams.{team.name}"
    for environment in team.environments:
        size = team_boundary_size(config, team, environment)
        if size <= MANAGED_POLICY_CHARACTERS:
            continue
        name = team_boundary_policy_name(config.stacks_project, team.name, environment)
        rule = f"renders team boundary {name} at {size} characters, over the {MANAGED_POLICY_CHARACTERS:,} IAM holds in " \
               f"a managed policy ({QUOTAS_SOURCE})"
        bare = team_boundary_size(_without_members(config, team), team, environment)
        if team.members and bare <= MANAGED_POLICY_CHARACTERS:
            return [ConfigProblem(
                f"{key}.members", f"{rule}; its {len(team.members)} members add {size - bare} characters, "
                f"{MANAGED_POLICY_CHARACTERS - bare} fit",
                "list fewer roles or roles of shorter names and paths: one role the team's people share (an IAM "
                "Identity Center permission set of the team, say) rather than one per person",
                shown(list(team.members)))]
        return [ConfigProblem(
            key, rule, f"use a shorter team name (its stacks team-<team>-<env> and its row in the platform stacks' "
            f"teams with it), or {project_fix}", shown(team.name))]
    return []


ROLE_NAME_CHARACTERS = 64
"""IAM User Guide, "IAM and AWS STS quotas": role name, 64 characters."""
BUCKET_NAME_CHARACTERS = 63
"""S3 User Guide, "General purpose bucket naming rules": 3 to 63 characters; lowercase letters,
numbers, dots and hyphens."""


def name_length_problems(config: BootstrapConfig) -> list[ConfigProblem]:
    """The bootstrap's role and bucket names that IAM or S3 would refuse, keyed by the name that
    grows them: `stacksProject` (every name's prefix), or a team's name for its deploy roles."""
    key, project = f"{config.project}:", config.stacks_project
    longest_bucket = state_log_bucket_name(project, ACCOUNT_STAND_IN)
    longest_role = max((ci_role_name(project, job, env.name) for env in config.environments
                        for job in get_args(CiJob)), key=len, default="")
    problems = []
    if len(longest_bucket) > BUCKET_NAME_CHARACTERS or len(longest_role) > ROLE_NAME_CHARACTERS \
            or project != project.lower() or "_" in project:
        room = BUCKET_NAME_CHARACTERS - len(longest_bucket) + len(project)
        problems.append(ConfigProblem(
            f"{key}stacksProject", f"names the state log bucket {longest_bucket} ({len(longest_bucket)} characters) and "
            f"the role {longest_role} ({len(longest_role)}); S3 holds bucket names of lowercase letters, digits, dots and "
            f"'-' up to {BUCKET_NAME_CHARACTERS} characters, IAM role names up to {ROLE_NAME_CHARACTERS}",
            f"use a project name of lowercase letters, digits and '-', at most {room} characters (rename the main "
            "Pulumi.yaml's project with it)", shown(project)))
    for team in config.teams:
        role = max((team_deploy_role_name(project, team.name, env) for env in team.environments), key=len, default="")
        if len(role) > ROLE_NAME_CHARACTERS:
            problems.append(ConfigProblem(
                f"{key}teams.{team.name}", f"names the deploy role {role} ({len(role)} characters), over the "
                f"{ROLE_NAME_CHARACTERS} IAM holds in a role name ({QUOTAS_SOURCE})",
                "use a shorter team name (its stacks team-<team>-<env> and its row in the platform stacks' teams "
                "with it), or a shorter stacksProject", shown(team.name)))
    return problems


def refuse_oversized_policies(config: BootstrapConfig) -> None:
    """Before any resource: a ConfigError naming each name or document IAM or S3 would refuse for its size."""
    problems = name_length_problems(config) or policy_size_problems(config)
    if problems:
        raise ConfigError(problems)
