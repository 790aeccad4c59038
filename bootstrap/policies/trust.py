"""Who may assume the CI roles: GitHub's OIDC tokens, by the `sub` claim of the run (see
bootstrap/config.py, SUBJECT_CLAIMS)."""

from __future__ import annotations

from typing import Any

from bootstrap.config import EnvironmentCi, GithubConfig

GITHUB_OIDC_URL = "https://token.actions.githubusercontent.com"
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"
# The audience aws-actions/configure-aws-credentials asks for by default (its README, v6.2.3).
GITHUB_OIDC_AUDIENCE = "sts.amazonaws.com"
# Environments whose preview role a pull request may assume. A pull_request run uses the pull
# request's own workflow file, so anyone who can push a branch can run code with that role and
# read what it reads (its stacks' config secrets): staging and prod are previewed from the deploy
# branch only, behind review (docs/delivery.md, "How previews get credentials").
PULL_REQUEST_PREVIEW_ENVIRONMENTS = ("dev",)
# Environments whose trainer image CI builds and pushes: main.yml's `image` job, into dev's
# registry only. Staging and prod get an image copied into their registries by digest and pinned
# in a reviewed pull request (docs/delivery.md, "A new trainer"), by no CI role.
IMAGE_BUILD_ENVIRONMENTS = ("dev",)
# --- trust -------------------------------------------------------------------------------------

def pull_request_subject(github: GithubConfig) -> str:
    """The `sub` of a pull request's token (a pattern: the pull request's number varies)."""
    repository = github.subject_repository
    if github.subject_claims == "repo-context-ref":
        # The ref of a pull_request run is refs/pull/<number>/merge; the wildcard stands for the
        # number only (GitHub writes any `:` inside a claim value as %3A).
        return f"repo:{repository}:pull_request:ref:refs/pull/*/merge"
    return f"repo:{repository}:pull_request"


def branch_subject(github: GithubConfig, branch: str) -> str:
    """The `sub` of a job without environment in a run on `branch` (a push, or a workflow it calls)."""
    subject = f"repo:{github.subject_repository}:ref:refs/heads/{branch}"
    if github.subject_claims == "repo-context-ref":
        subject += f":ref:refs/heads/{branch}"   # the `context` claim, then the `ref` claim
    return subject


def preview_subjects(github: GithubConfig, environment: EnvironmentCi) -> list[str]:
    """Who may preview an environment: runs on its deploy branch (reviewed code, before each
    `pulumi up`), and pull requests only where PULL_REQUEST_PREVIEW_ENVIRONMENTS allows it."""
    subjects = [branch_subject(github, environment.deploy_branch)]
    if environment.name in PULL_REQUEST_PREVIEW_ENVIRONMENTS:
        subjects.insert(0, pull_request_subject(github))
    return subjects


def environment_subject(github: GithubConfig, github_environment: str, branch: str) -> str:
    """The `sub` of a job in a GitHub environment (and, with the ref template, on the branch)."""
    subject = f"repo:{github.subject_repository}:environment:{github_environment}"
    if github.subject_claims == "repo-context-ref":
        subject += f":ref:refs/heads/{branch}"
    return subject


def deploy_subject(github: GithubConfig, environment: EnvironmentCi) -> str:
    """The `sub` of a deploy job: its stage's GitHub environment, on the deploy branch."""
    return environment_subject(github, environment.github_environment, environment.deploy_branch)


def image_subject(github: GithubConfig, environment: EnvironmentCi) -> str:
    """The `sub` of the trainer image job: its own GitHub environment, on the deploy branch."""
    return environment_subject(github, environment.image_github_environment, environment.deploy_branch)


def github_trust_policy(provider_arn: str, operator: str, subjects: list[str]) -> dict[str, Any]:
    """Only tokens of the GitHub OIDC provider, for AWS, with one of these subjects."""
    conditions: dict[str, dict[str, Any]] = {"StringEquals": {f"{GITHUB_OIDC_HOST}:aud": GITHUB_OIDC_AUDIENCE}}
    conditions.setdefault(operator, {})[f"{GITHUB_OIDC_HOST}:sub"] = subjects[0] if len(subjects) == 1 else subjects
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "GitHubActionsOidc",
        "Effect": "Allow",
        "Principal": {"Federated": provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": conditions,
    }]}
