"""The GitHub OIDC provider and, per environment, the preview and deploy roles CI assumes and
the permissions boundary every role of the environment's stacks carries; for dev, the role the
trainer image job pushes with.

No static keys anywhere: a workflow job exchanges its OIDC token for a one-hour (preview) or
two-hour (deploy) session. The documents themselves are in bootstrap/policies/.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from bootstrap import policies
from bootstrap.config import BootstrapConfig, TeamCi
from bootstrap.policies import teams
from bootstrap.state import StateBackend
from components.facts.regions import arn_partition
from components.identity.policies import bucket_arn

PREVIEW_SESSION_SECONDS = 3600
# A first `pulumi up` of a platform stack (cluster, node groups, add-ons) runs 30-60 minutes;
# credentials that expire mid-update leave the state behind the cloud.
DEPLOY_SESSION_SECONDS = 7200
# The image job asks for configure-aws-credentials' default hour. It calls AWS at its start (the
# stack output, the tag check, `aws ecr get-login-password`); docker then pushes with the ECR
# token that returned, valid 12 hours (ECR API Reference, GetAuthorizationToken).
IMAGE_SESSION_SECONDS = 3600


@dataclass(frozen=True)
class CiIdentityArgs:
    config: BootstrapConfig
    account_id: pulumi.Output[str]
    state: StateBackend


class CiIdentity(pulumi.ComponentResource):
    oidc_provider_arn: pulumi.Output[str]
    preview_roles: dict[str, aws.iam.Role]
    deploy_roles: dict[str, aws.iam.Role]
    image_roles: dict[str, aws.iam.Role]
    """The trainer image role per environment of policies.IMAGE_BUILD_ENVIRONMENTS that is configured."""
    boundaries: dict[str, aws.iam.Policy]
    """Permissions boundary per environment (the stack files' `iamPermissionsBoundary`)."""
    team_roles: dict[tuple[str, str], aws.iam.Role]
    """The deploy role of each (team, environment) of the registry (bootstrap/policies/teams.py)."""

    def __init__(self, name: str, args: CiIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:bootstrap:CiIdentity", name, None, opts)
        self._name, self._args = name, args
        config = args.config
        if config.github.oidc_provider_arn:
            self.oidc_provider_arn = pulumi.Output.from_input(config.github.oidc_provider_arn)
        else:
            # AWS trusts GitHub's certificate through its own root CAs: no thumbprint needed
            # (aws-actions/configure-aws-credentials README, "Configuring IAM to trust GitHub").
            self.oidc_provider_arn = aws.iam.OpenIdConnectProvider(
                f"{name}-github", url=policies.GITHUB_OIDC_URL, client_id_lists=[policies.GITHUB_OIDC_AUDIENCE],
                opts=pulumi.ResourceOptions(parent=self)).arn
        self.preview_roles, self.deploy_roles, self.image_roles, self.boundaries = {}, {}, {}, {}
        for env in config.environments:
            previewed_by = "pull requests and " if env.name in policies.PULL_REQUEST_PREVIEW_ENVIRONMENTS else ""
            # StringLike: the pull request subject is a pattern; the branch subject holds no wildcard.
            self.preview_roles[env.name] = self._role(
                f"{name}-preview-{env.name}", policies.ci_role_name(config.stacks_project, "preview", env.name),
                "StringLike", policies.preview_subjects(config.github, env), env.name, PREVIEW_SESSION_SECONDS,
                self._preview_policy(env.name),
                f"pulumi preview of the {env.name} stacks from {previewed_by}{env.deploy_branch} of {config.github.repository}")
            self.deploy_roles[env.name] = self._role(
                f"{name}-deploy-{env.name}", policies.ci_role_name(config.stacks_project, "deploy", env.name),
                "StringEquals", [policies.deploy_subject(config.github, env)], env.name, DEPLOY_SESSION_SECONDS,
                self._deploy_policy(env.name),
                f"pulumi up of the {env.name} stacks from {env.deploy_branch} through environment {env.github_environment}")
            self._attach_scope(f"{name}-deploy-{env.name}", self.deploy_roles[env.name], env.name)
            if env.name in policies.IMAGE_BUILD_ENVIRONMENTS:
                # A GitHub environment of its own (<env>-image, main only): with the deploy job's
                # environment, the image job's token could assume the deploy role as well.
                self.image_roles[env.name] = self._role(
                    f"{name}-image-{env.name}", policies.ci_role_name(config.stacks_project, "image", env.name),
                    "StringEquals", [policies.image_subject(config.github, env)], env.name, IMAGE_SESSION_SECONDS,
                    self._environment_document(policies.image_policy, env.name),
                    f"push of the trainer image to the {env.name} registry from {env.deploy_branch} "
                    f"through environment {env.image_github_environment}")
            # checkov CKV_AWS_290 ("write access without constraints") flags this policy, and
            # rightly reads its Allow of write actions on `*`: a permissions boundary grants
            # nothing itself, it caps the roles that carry it (IAM User Guide, "Permissions
            # boundaries for IAM entities"); what a role may write, and where, its own policies
            # say, and the boundary's Denies constrain them (bootstrap/policies/boundary.py boundary_policy).
            self.boundaries[env.name] = aws.iam.Policy(
                f"{name}-boundary-{env.name}", name=policies.boundary_policy_name(config.stacks_project, env.name),
                description=f"Permissions boundary of every IAM role the {env.name} stacks create",
                policy=self._environment_document(policies.boundary_policy, env.name),
                tags={"ci-environment": env.name}, opts=pulumi.ResourceOptions(parent=self))
        self.team_roles = {(team.name, env): self._team_role(team, env) for team in config.teams for env in team.environments}
        self.register_outputs({})

    def _team_role(self, team: TeamCi, environment: str) -> aws.iam.Role:
        """The team's deploy role in `environment`: its team boundary is both its policy and its
        permissions boundary, and every role its stacks create must carry it too. Its one inline
        policy, the boundary's copy, holds whom the team gives access entries (its registry
        members): a second one would not bind the roles the team creates."""
        config, state, project = self._args.config, self._args.state, self._args.config.stacks_project
        resource_name = f"{self._name}-team-{team.name}-{environment}"
        document = pulumi.Output.all(self._args.account_id, self._state_bucket_arn(), state.state_key.arn,
                                     state.secrets_keys[environment].arn).apply(
            lambda values: json.dumps(teams.team_boundary_policy(
                config, team.name, environment, account_id=values[0], bucket_arn=values[1], state_key_arn=values[2],
                secrets_key_arn=values[3]), sort_keys=True))
        boundary = aws.iam.Policy(
            f"{resource_name}-boundary", name=teams.team_boundary_policy_name(project, team.name, environment),
            description=f"Permissions boundary of team {team.name} in {environment}: its names and prefixes only",
            policy=document, tags={"ci-environment": environment, "ci-team": team.name},
            opts=pulumi.ResourceOptions(parent=self))
        role = aws.iam.Role(
            resource_name, name=teams.team_deploy_role_name(project, team.name, environment),
            description=f"pulumi up of team-{team.name}-{environment} from {team.repository} through environment {environment}",
            assume_role_policy=self.oidc_provider_arn.apply(
                lambda arn: json.dumps(teams.team_trust_policy(arn, team, environment), sort_keys=True)),
            max_session_duration=DEPLOY_SESSION_SECONDS, permissions_boundary=boundary.arn,
            tags={"ci-environment": environment, "ci-team": team.name}, opts=pulumi.ResourceOptions(parent=self))
        aws.iam.RolePolicy(resource_name, role=role.id, policy=document, opts=pulumi.ResourceOptions(parent=self))
        return role

    def _role(self, resource_name: str, role_name: str, operator: str, subjects: list[str], environment: str,
              session_seconds: int, permissions: pulumi.Output[str], description: str) -> aws.iam.Role:
        role = aws.iam.Role(
            resource_name,
            name=role_name,
            description=description,
            assume_role_policy=self.oidc_provider_arn.apply(
                lambda arn: json.dumps(policies.github_trust_policy(arn, operator, subjects), sort_keys=True)),
            max_session_duration=session_seconds,
            # Not the `environment` tag: the deploy roles may manage roles carrying that tag.
            tags={"ci-environment": environment},
            opts=pulumi.ResourceOptions(parent=self))
        aws.iam.RolePolicy(resource_name, role=role.id, policy=permissions, opts=pulumi.ResourceOptions(parent=self))
        return role

    def _attach_scope(self, resource_name: str, role: aws.iam.Role, environment: str) -> None:
        """The deploy role's managed policies: its project scope (policies.deploy_scope_policy)
        and what it never does (policies.deploy_guard_policy); with them inline, the role's inline
        policies would pass their 10,240 characters."""
        project = self._args.config.stacks_project
        for suffix, name, document, description in (
                ("project-scope", policies.deploy_scope_policy_name(project, environment), policies.deploy_scope_policy,
                 f"Keeps the {environment} deploy role off other projects' resources"),
                ("guard", policies.deploy_guard_policy_name(project, environment), policies.deploy_guard_policy,
                 f"Keeps the {environment} deploy role off other environments, the bootstrap and the CI identity")):
            policy = aws.iam.Policy(
                f"{resource_name}-{suffix}", name=name, description=description,
                policy=self._environment_document(document, environment),
                tags={"ci-environment": environment}, opts=pulumi.ResourceOptions(parent=self))
            aws.iam.RolePolicyAttachment(f"{resource_name}-{suffix}", role=role.name, policy_arn=policy.arn,
                                         opts=pulumi.ResourceOptions(parent=self))

    def _state_bucket_arn(self) -> pulumi.Output[str]:
        partition = arn_partition(self._args.config.region)
        return self._args.state.bucket.bucket.apply(lambda bucket: bucket_arn(bucket, partition))

    def _preview_policy(self, environment: str) -> pulumi.Output[str]:
        state, config = self._args.state, self._args.config
        arns = (self._state_bucket_arn(), state.state_key.arn, state.secrets_keys[environment].arn)
        return pulumi.Output.all(*arns).apply(
            lambda arns: json.dumps(policies.preview_policy(
                config, environment, bucket_arn=arns[0], state_key_arn=arns[1], secrets_key_arn=arns[2]), sort_keys=True))

    def _deploy_policy(self, environment: str) -> pulumi.Output[str]:
        return self._environment_document(policies.deploy_policy, environment)

    def _environment_document(self, document: Callable[..., dict[str, Any]], environment: str) -> pulumi.Output[str]:
        """A document of bootstrap/policies/ that names the account and the bootstrap's resources."""
        state, config = self._args.state, self._args.config
        names = sorted(state.secrets_keys)
        inputs = (self._args.account_id, self._state_bucket_arn(), state.state_key.arn, self.oidc_provider_arn,
                  *(state.secrets_keys[env].arn for env in names))
        return pulumi.Output.all(*inputs).apply(
            lambda values: json.dumps(document(
                config, environment, account_id=values[0], bucket_arn=values[1], state_key_arn=values[2],
                oidc_provider_arn=values[3], secrets_key_arns=dict(zip(names, values[4:], strict=True))), sort_keys=True))
