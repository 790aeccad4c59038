"""The bootstrap's stack YAML -> frozen, validated config, in the style of components/config/.

Every mistake is collected and reported at once (key, value received, fix), before any resource
exists. Nothing else in bootstrap/ reads raw config.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from components.config.placeholders import find_placeholders, refuse_or_warn
from components.config.platform_names import reserved_team_name_problem
from components.config.reader import ConfigError, ConfigProblem, Section, own_keys, refuse_plain_keys_set_as_secrets, shown
from components.config.stack import REGION_FIX, region_and_cost_center, region_problem
from components.config.stack_names import ENVIRONMENTS, MAX_TEAM_NAME, REGIONAL_STACK, TEAM_NAME
from components.config.storage import bucket_name_problem
from components.config.team_members import ROLE_ARN
from components.facts.regions import ARN_PARTITION, arn_partition

# GitHub's own limits: owners (users and organisations) are 1-39 alphanumerics or single
# hyphens, repository names 1-100 of [A-Za-z0-9._-].
GITHUB_REPOSITORY = re.compile(r"(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38})/(?P<name>[A-Za-z0-9._-]{1,100})")
# A branch name as `git check-ref-format --branch` accepts it, minus what would break an IAM
# condition: no wildcard (`*`, `?`) and no `:` (GitHub writes a `:` in a claim as %3A).
BRANCH = re.compile(r"(?!/)(?!.*//)(?!.*\.\.)(?!.*@\{)(?!.*\.lock\Z)[^\s~^:?*\[\\]+(?<![/.])")
# GitHub environment names: up to 255 characters, none of them a `:` or a wildcard here.
GITHUB_ENVIRONMENT = re.compile(r"[^\s:*?]{1,255}")
PULUMI_PROJECT = re.compile(r"[A-Za-z0-9_.-]{1,100}")
OIDC_PROVIDER_ARN = re.compile(r"arn:" + ARN_PARTITION + r":iam::\d{12}:oidc-provider/token\.actions\.githubusercontent\.com")

# How the repository's OIDC tokens spell their `sub` claim (docs.github.com, "OpenID Connect
# reference", github/docs@051718f2 content/actions/reference/security/oidc.md):
# - "default": repo:OWNER/REPO:pull_request for pull requests, repo:OWNER/REPO:environment:ENV for
#   a job that names an environment (the branch is not in the claim; the environment's
#   deployment-branch rule on GitHub is what keeps other branches out);
# - "repo-context-ref": the repository's subject template set to ["repo", "context", "ref"], so a
#   deploy token reads repo:OWNER/REPO:environment:ENV:ref:refs/heads/BRANCH and AWS itself checks
#   both the environment and the branch.
SUBJECT_CLAIMS = ("default", "repo-context-ref")


@dataclass(frozen=True)
class GithubConfig:
    repository: str
    """OWNER/REPO whose workflows may assume the CI roles."""
    subject_claims: str
    owner_id: int | None
    """Numeric owner id, for repositories on GitHub's immutable subject format (created after
    2026-07-15, or opted in): the claim then reads repo:OWNER@OWNER-ID/REPO@REPO-ID:..."""
    repository_id: int | None
    oidc_provider_arn: str | None
    """An existing GitHub OIDC provider of the account (an account holds one per URL); None creates it."""

    @property
    def subject_repository(self) -> str:
        """The repository as the `sub` claim spells it."""
        if self.owner_id is None or self.repository_id is None:
            return self.repository
        owner, name = self.repository.split("/", 1)
        return f"{owner}@{self.owner_id}/{name}@{self.repository_id}"


def image_environment(github_environment: str) -> str:
    """The GitHub environment of a stage's trainer image job, beside its deploy job's."""
    return f"{github_environment}-image"


@dataclass(frozen=True)
class EnvironmentCi:
    name: str
    """dev | staging | prod: the platform stack and the team stacks team-<team>-<name>."""
    deploy_branch: str
    """The protected branch deploys come from (only with subjectClaims repo-context-ref is it in the claim)."""
    github_environment: str
    """The GitHub environment of the deploy job (prod: the one with required reviewers)."""
    read_buckets: tuple[str, ...] = ()
    """Existing buckets outside the project's names that the environment's roles may read (a
    stack's `storage.datasetsBucket`): the permissions boundary denies every other such bucket."""
    sites: tuple[tuple[str, str], ...] = ()
    """The environment's platform stacks in further regions, as (site, region): stack
    `<name>-<site>` (e.g. prod-usw2, components/config/sibling_stacks.py REGIONAL_STACK) in that
    region. Its CI roles cover these stacks' state, regions and names too."""

    @property
    def platform_stacks(self) -> tuple[str, ...]:
        """The environment's own platform stack, then its regional siblings."""
        return (self.name, *(f"{self.name}-{site}" for site, _ in self.sites))

    @property
    def image_github_environment(self) -> str:
        """The GitHub environment of the trainer image job: one of its own, so that the image job's
        token never carries the deploy job's subject (and cannot assume the deploy role)."""
        return image_environment(self.github_environment)


@dataclass(frozen=True)
class TeamCi:
    """A team of the registry (`teams.<name>`): its team stacks (team-<name>-<env>) deploy with a
    deploy role of their own per environment, trusted by the team's repository."""
    name: str
    repository: str
    """OWNER/REPO whose workflows deploy the team's stacks (GitHub's `sub` claim, default format)."""
    environments: tuple[str, ...]
    """The environments the team has stacks in: one team deploy role each."""
    members: tuple[str, ...] = ()
    """The IAM roles (ARNs, as IAM shows them) the team's deploy role may give EKS access entries:
    its team stacks' `members` are among them (the team boundary's TeamMembersEntries,
    bootstrap/policies/teams.py _members_entries)."""


@dataclass(frozen=True)
class BootstrapConfig:
    project: str
    stack: str
    region: str
    cost_center: str
    stacks_project: str
    """The Pulumi project whose stacks keep their state here (gpu-training)."""
    github: GithubConfig
    environments: tuple[EnvironmentCi, ...]
    state_version_retention_days: int
    """Old versions of a state file stay this long (a bad `pulumi up` can be rolled back from them)."""
    state_access_log_retention_days: int = 365
    """The state bucket's server access logs (who read or wrote which stack's state) stay this long."""
    activate_cost_allocation_tags: bool = True
    """Activate the tag keys the stacks' budgets count by, account-wide (docs/cost.md)."""
    teams: tuple[TeamCi, ...] = ()
    """The registry of teams (`teams`): a team deploy role and boundary per team and environment."""


def _optional_id(section: Section, name: str) -> int | None:
    if not section.has(name):
        section.ignore(name)
        return None
    return section.integer(name, minimum=1, fix="copy the numeric id GitHub shows for it (gh api repos/OWNER/REPO)")


def _parse_github(section: Section) -> GithubConfig:
    repository = section.string("repository", check=lambda v: None if GITHUB_REPOSITORY.fullmatch(v) else "is not OWNER/REPO",
                                fix="write the repository as it appears in its URL, e.g. example-org/gpu-training")
    subject_claims = section.string("subjectClaims", "repo-context-ref", choices=SUBJECT_CLAIMS)
    ids = section.section("immutableIds", {})
    owner_id, repository_id = _optional_id(ids, "owner"), _optional_id(ids, "repository")
    if (owner_id is None) != (repository_id is None) and ids.ok("owner", "repository"):
        section.error(ids.path, ids.data, "needs both the owner and the repository id",
                      "set immutableIds: {owner: <id>, repository: <id>}, or leave immutableIds out")
    ids.finish()
    provider = section.optional_string(
        "oidcProviderArn", check=lambda v: None if OIDC_PROVIDER_ARN.fullmatch(v) else "is not the ARN of a GitHub OIDC provider",
        fix="use arn:<partition>:iam::<account>:oidc-provider/token.actions.githubusercontent.com, or leave it out to create one")
    section.finish()
    return GithubConfig(repository=repository, subject_claims=subject_claims, owner_id=owner_id,
                        repository_id=repository_id, oidc_provider_arn=provider)


def _environment_clash(github_environment: str, earlier: list[EnvironmentCi]) -> str | None:
    """How a stage's GitHub environment (or its image job's, <environment>-image) is also an earlier
    stage's, or None. Each deploy and image role trusts the jobs of one GitHub environment: two
    stages sharing one would let the less protected stage's jobs (e.g. dev, no required reviewers)
    assume the other's roles. GitHub environment names are not case-sensitive (GitHub Docs,
    "Managing environments")."""
    image = image_environment(github_environment)
    for stage in earlier:
        if stage.github_environment.casefold() == github_environment.casefold():
            return f"is also {stage.name}'s GitHub environment"
        if stage.image_github_environment.casefold() == github_environment.casefold():
            return f"is {stage.name}'s image job environment"
        if stage.github_environment.casefold() == image.casefold():
            return f"makes {image}, {stage.name}'s GitHub environment, this stage's image job environment"
    return None


def _parse_sites(entry: Section, environment: str) -> tuple[tuple[str, str], ...]:
    """`sites: {usw2: us-west-2}`: the environment's regional platform stacks (<env>-<site>) and
    their regions, each site a name REGIONAL_STACK accepts."""
    sites = entry.section("sites", {})
    found = []
    for site in sorted(sites.data, key=str):
        if not REGIONAL_STACK.fullmatch(f"{environment}-{site}"):
            sites.ignore(site)
            sites.error(sites.key(site), site, "is not a site label (2-8 lowercase letters and digits, a letter first)",
                        "use the suffix of the stack's name, e.g. usw2 for stack prod-usw2")
            continue
        found.append((str(site), sites.string(site, check=region_problem, fix=REGION_FIX)))
    sites.finish()
    return tuple(found)


def _parse_environments(root: Section) -> tuple[EnvironmentCi, ...]:
    value = root.data.get("environments")
    section = root.section("environments", null_entries=True)  # `dev:` alone: the stage with its defaults
    if isinstance(value, Mapping) and not value:
        section.error(section.path, value, "names no environment", "list at least one of dev, staging, prod")
    environments = []
    for name in sorted(section.data, key=lambda n: ENVIRONMENTS.index(n) if n in ENVIRONMENTS else len(ENVIRONMENTS)):
        section.ignore(name)
        if name not in ENVIRONMENTS:
            section.error(section.key(name), name, f"is not an environment ({', '.join(ENVIRONMENTS)})",
                          "use the environment names of the platform stacks")
            continue
        entry = Section(section.errors, section.key(name), section.data[name] if section.data[name] is not None else {})
        branch = entry.string("deployBranch", "main",
                              check=lambda v: None if BRANCH.fullmatch(v) else "is not a plain branch name",
                              fix="name one branch, without wildcards or colons, e.g. main")
        github_environment = entry.string(
            "githubEnvironment", name,
            check=lambda v: None if GITHUB_ENVIRONMENT.fullmatch(v) else "is not a usable environment name",
            fix="use the GitHub environment's name, without spaces, colons or wildcards")
        clash = _environment_clash(github_environment, environments)
        if clash is not None and entry.ok("githubEnvironment"):
            entry.error(entry.key("githubEnvironment"), github_environment,
                        f"{clash}: their jobs could assume each other's roles",
                        "give every stage a GitHub environment of its own (by default, one named after the stage), "
                        "not ending in -image")
        read_buckets = entry.string_list("readBuckets", [])
        for index, bucket in enumerate(read_buckets):
            # A literal name: the boundary writes it into ARN patterns, where `*` or `?` would
            # reach every bucket it matches (bootstrap/policies/boundary.py relies on it).
            problem = bucket_name_problem(bucket)
            if problem is not None:
                entry.error(f"{entry.key('readBuckets')}[{index}]", bucket, problem,
                            "write the bucket's exact name, as S3 lists it (no wildcards)")
        sites = _parse_sites(entry, name)
        entry.finish()
        environments.append(EnvironmentCi(name=name, deploy_branch=branch, github_environment=github_environment,
                                          read_buckets=tuple(read_buckets), sites=sites))
    return tuple(environments)


def _name_overlap(team: str, earlier: list[TeamCi]) -> str | None:
    """How one team's names would contain another's: a team's IAM names are
    <project>-<env>-<team>-*, so team `vision` would reach `vision-x`'s (issue 41)."""
    for other in earlier:
        shorter, longer = sorted((team, other.name), key=len)
        if longer.startswith(f"{shorter}-"):
            return f"overlaps team '{other.name}': <project>-<env>-{shorter}-* names would include {longer}'s"
    return None


MEMBERS_FIX = ("write the role's ARN as IAM shows it (aws iam get-role --role-name NAME --query Role.Arn), "
               "e.g. arn:aws:iam::111122223333:role/vision-researchers")


def _role_name(arn: str) -> str:
    """The role's name, its path aside, case folded: IAM keeps one role per name in an account,
    whatever its path, and names are not distinguished by case (IAM User Guide, "IAM identifiers":
    "role names are not distinguished by case")."""
    return arn.rsplit("/", 1)[1].casefold()


def _account(arn: str) -> str:
    return arn.split(":")[4]


def _member_problem(arn: str, *, partition: str, project: str) -> tuple[str, str] | None:
    """(why `arn` cannot be a member, the fix), or None. The team deploy role's policy writes each member
    verbatim into an ARN condition and an access entry's ARN, where `*`, `?` and `${...}` would
    match other roles (IAM User Guide, "IAM JSON policy elements: Condition operators": ARN
    operators take wildcards, ArnEquals too): ROLE_ARN admits none of them."""
    match = ROLE_ARN.fullmatch(arn)
    if match is None:
        return "is not an IAM role ARN (arn:<partition>:iam::<account>:role/[<path>/]<name>, no wildcards)", MEMBERS_FIX
    if match["partition"] != partition:
        return f"is in the partition {match['partition']}, but the bootstrap's region is in {partition}", MEMBERS_FIX
    # Case folded: `GPU-Training-ci-deploy-prod` names the deploy role too.
    if any(part.casefold().startswith(f"{project}-".casefold()) for part in (arn.split(":role/", 1)[1], _role_name(arn))):
        return (f"is one of the project's roles ({project}-*: deploy, node and trainer roles), not people's",
                "remove it: list the roles the team's people assume")
    return None


@dataclass(frozen=True)
class _MemberRules:
    """What each member is judged against: the bootstrap's partition and project, and the account
    of its OIDC provider when the config names one."""
    partition: str
    project: str
    provider_account: str | None


def _parse_members(entry: Section, rules: _MemberRules, earlier: list[TeamCi]) -> tuple[str, ...]:
    """`teams.<team>.members`: the roles the team's deploy role may give access entries. Each a
    role of one account (the bootstrap's: every member and the OIDC provider name the same), not
    the project's, listed once, and under one team only: EKS holds one access entry per principal
    and cluster, so two teams listing one role would both expect its entry."""
    members = entry.string_list("members", [])
    seen: dict[str, str] = {}
    others = {_role_name(arn): team.name for team in earlier for arn in team.members}
    accounts = {_account(arn) for team in earlier for arn in team.members}
    if rules.provider_account:
        accounts.add(rules.provider_account)
    for index, arn in enumerate(members):
        key = f"{entry.key('members')}[{index}]"
        problem = _member_problem(arn, partition=rules.partition, project=rules.project)
        name = _role_name(arn) if problem is None else ""
        if problem is None and name in seen:
            problem = (f"names the role of {seen[name]} again (IAM role names are not case-sensitive, nor is a "
                       "path part of one)", "list each role once")
        if problem is None and name in others:
            problem = (f"is also team {others[name]}'s member: EKS holds one access entry per role and cluster, "
                       "so one team's entry would refuse the other's", "list each role under one team only")
        if problem is None and accounts and _account(arn) not in accounts:
            problem = (f"is in account {_account(arn)}, but the other members (and github.oidcProviderArn, if set) are in "
                       f"{', '.join(sorted(accounts))}: a team deploy role gives access entries to its own account's "
                       "roles only", f"use a role of the bootstrap's account; {MEMBERS_FIX}")
        if problem is not None:
            entry.error(key, arn, *problem)
            continue
        seen[name] = arn
        accounts.add(_account(arn))
    return tuple(members)


def _repository_clash(repository: str, platform_repository: str, earlier: list[TeamCi]) -> str | None:
    """How a team's repository would let another's deploy jobs assume its roles: its deploy roles
    trust repo:<repository>:environment:<stage> (teams.py team_subject), so two teams of one
    repository trust the same jobs, and `team: nlp` in vision's workflow would deploy as nlp; the
    platform's repository already deploys the platform. GitHub's owner and repository names are not
    case-sensitive (one repository, however a claim spells it), so compared case folded."""
    if repository.casefold() == platform_repository.casefold():
        return "is the platform's own repository (github.repository): its deploy jobs would assume the team's role"
    for other in earlier:
        if repository.casefold() == other.repository.casefold():
            return (f"is team {other.name}'s repository too: either team's deploy jobs would assume the other's "
                    "role (the same trust subject)")
    return None


def _parse_teams(root: Section, environments: tuple[EnvironmentCi, ...], rules: _MemberRules,
                 platform_repository: str) -> tuple[TeamCi, ...]:
    """`teams: {vision: {repository: OWNER/REPO, members: [ROLE-ARN]}}`: the registry of teams.
    Each gets a deploy role per environment (`environments`, by default every configured one)."""
    section = root.section("teams", {})
    configured = [env.name for env in environments]
    teams: list[TeamCi] = []
    for name in sorted(section.data, key=str):
        section.ignore(name)
        if not isinstance(name, str) or not TEAM_NAME.fullmatch(name) or len(name) > MAX_TEAM_NAME:
            section.error(section.key(name), name, f"is not a team name (lowercase letters, digits and dashes, "
                          f"no dash first or last, at most {MAX_TEAM_NAME} characters)", "use the team of its stacks' "
                          "names, team-<team>-<env>")
            continue
        entry = Section(section.errors, section.key(name), section.data[name] if section.data[name] is not None else {})
        repository = entry.string("repository",
                                  check=lambda v: None if GITHUB_REPOSITORY.fullmatch(v) else "is not OWNER/REPO",
                                  fix="write the team's repository as it appears in its URL, e.g. example-org/vision")
        clash = _repository_clash(repository, platform_repository, teams) if repository else None
        if clash:
            entry.error(entry.key("repository"), repository, clash,
                        "give each team a repository of its own, not the platform's")
        team_envs = entry.string_list("environments", configured)
        for env in team_envs:
            if env not in configured:
                entry.error(entry.key("environments"), env, "is not an environment of this bootstrap",
                            f"use one of {', '.join(configured)}")
        # No deploy branch of its own: the trust admits the team repository's GitHub environment of
        # the stage (teams.py team_subject), whose deployment-branch rule is the branch control.
        members = _parse_members(entry, rules, teams)
        entry.finish()
        sites = {site for environment in environments for site, _ in environment.sites}
        reserved = reserved_team_name_problem(name, sites=sites)
        if reserved:
            section.error(section.key(name), name, reserved, "rename the team (its stacks team-<team>-<env> and its row "
                          "in the platform stacks' teams)")
        overlap = _name_overlap(name, teams)
        if overlap:
            section.error(section.key(name), name, overlap, "rename one team so that neither name starts with the other's "
                          "followed by a dash")
        teams.append(TeamCi(name=name, repository=repository, environments=tuple(e for e in team_envs if e in configured),
                            members=members))
    section.finish()
    return tuple(teams)


def load_bootstrap_config(raw: Mapping[str, Any], *, project: str, stack: str,
                          secret_keys: Collection[str] = ()) -> BootstrapConfig:
    """Parse fully-qualified config (`project:key` -> decoded value); raise ConfigError listing every
    problem, never showing the value of a key in `secret_keys`."""
    errors, own = own_keys(raw, project=project, secret_keys=secret_keys)
    prefix = f"{project}:"
    for key in sorted(raw):
        if not key.startswith(prefix) and key != "pulumi:disable-default-providers":
            errors.append(ConfigProblem(key, "unknown key for the bootstrap", f"remove it, or write it as {prefix}<key>."))
    refuse_plain_keys_set_as_secrets(errors, project=project, readable=(), also=("pulumi:disable-default-providers",),
                                     fix="set it without --secret (a `secure:` value: `pulumi config rm`, then "
                                     "`pulumi config set` without --secret): the bootstrap reads no secrets")
    root = Section(errors, project, own, separator=":")
    region, cost_center = region_and_cost_center(root)
    stacks_project = root.string("stacksProject",
                                 check=lambda v: None if PULUMI_PROJECT.fullmatch(v) else "is not a Pulumi project name",
                                 fix="use the `name:` of the main Pulumi.yaml, e.g. gpu-training")
    github = _parse_github(root.section("github"))
    environments = _parse_environments(root)
    provider = github.oidc_provider_arn
    teams = _parse_teams(root, environments, _MemberRules(
        partition=arn_partition(region) if region_problem(region) is None else "aws", project=stacks_project,
        provider_account=_account(provider) if provider else None), github.repository)
    state = root.section("state", {})
    retention = state.integer("versionRetentionDays", 90, minimum=1, maximum=3650)
    log_retention = state.integer("accessLogRetentionDays", 365, minimum=1, maximum=3650)
    state.finish()
    # An object, not a top-level boolean: the engine hands top-level values to the program as strings.
    cost_tags = root.section("costAllocationTags", {})
    activate_tags = cost_tags.boolean("activate", True)
    cost_tags.finish()
    root.finish()
    if errors:
        raise ConfigError(errors.without_secret_values(raw))
    return BootstrapConfig(project=project, stack=stack, region=region, cost_center=cost_center,
                           stacks_project=stacks_project, github=github, environments=environments,
                           state_version_retention_days=retention, state_access_log_retention_days=log_retention,
                           activate_cost_allocation_tags=activate_tags, teams=teams)


def refuse_members_of_other_accounts(config: BootstrapConfig, account_id: str) -> None:
    """Before a real `pulumi up`/`preview` of the bootstrap, once the caller's account is known: a
    ConfigError for each team member of another account. The config alone cannot tell (it holds
    the account only in github.oidcProviderArn, if at all), and the team boundary gives access
    entries to the deploy role's own account's roles only, so such a member's entry would be
    refused at the team stack's `pulumi up`, after its other resources."""
    problems = [ConfigProblem(f"{config.project}:teams.{team.name}.members[{index}]",
                              f"is a role of account {_account(arn)}, but the bootstrap deploys to account {account_id}",
                              f"use a role of account {account_id}; {MEMBERS_FIX}", shown(arn))
                for team in config.teams for index, arn in enumerate(team.members) if _account(arn) != account_id]
    if problems:
        raise ConfigError(problems)


def refuse_placeholders(raw: Mapping[str, Any], *, project: str, stack: str, secret_keys: Collection[str] = ()) -> None:
    """Before a real `pulumi up`/`preview` of the bootstrap: a ConfigError naming every example value
    (the GitHub repository, an example account in `github.oidcProviderArn`). No opt-out, unlike a
    dev stack: the bootstrap's values become the trust policies of real CI roles, account-wide."""
    refuse_or_warn(find_placeholders(raw, project=project, secret_keys=secret_keys), stack=stack, allowed=False)
