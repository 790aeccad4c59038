"""Entry point of the bootstrap (`pulumi up` in bootstrap/): state bucket, keys, CI identity."""

import sys
from pathlib import Path

# Pulumi puts only this directory on sys.path; the bootstrap reuses the main project's config
# reader and IAM helpers from the repository root.
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pulumi  # noqa: E402
import pulumi_aws as aws  # noqa: E402

from bootstrap import policies  # noqa: E402
from bootstrap.billing import CostAllocationTags  # noqa: E402
from bootstrap.ci_identity import CiIdentity, CiIdentityArgs  # noqa: E402
from bootstrap.config import load_bootstrap_config, refuse_members_of_other_accounts, refuse_placeholders  # noqa: E402
from bootstrap.policies.deploy import peering_gaps  # noqa: E402
from bootstrap.policies.sizes import refuse_oversized_policies  # noqa: E402
from bootstrap.state import StateBackend, StateBackendArgs  # noqa: E402
from components.config import read_raw_config, read_secret_keys  # noqa: E402
from components.config.placeholders import deploys_for_real  # noqa: E402

raw_config = read_raw_config()
secret_keys = read_secret_keys(raw_config)
config = load_bootstrap_config(raw_config, project=pulumi.get_project(), stack=pulumi.get_stack(), secret_keys=secret_keys)
refuse_oversized_policies(config)  # IAM's size quotas, before the first resource (issue 41)
for peering_gap in peering_gaps(config):
    pulumi.log.warn(peering_gap)
if deploys_for_real():  # the offline plan lists them instead (offline/plan.py)
    refuse_placeholders(raw_config, project=config.project, stack=config.stack, secret_keys=secret_keys)
provider = aws.Provider("aws", region=config.region, default_tags=aws.ProviderDefaultTagsArgs(tags={
    "project": config.project, "stack": config.stack, "cost-center": config.cost_center, "managed-by": "pulumi"}))
on_aws = pulumi.ResourceOptions(provider=provider)
account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(provider=provider)).account_id
if deploys_for_real() and any(team.members for team in config.teams):
    # The account, before any resource: a plain invoke returns its value (the offline plan's
    # mocked account is not the stack file's example one, and placeholders are listed there instead).
    refuse_members_of_other_accounts(
        config, aws.get_caller_identity(opts=pulumi.InvokeOptions(provider=provider)).account_id)

state = StateBackend("state", StateBackendArgs(config=config, account_id=account_id), opts=on_aws)
identity = CiIdentity("ci", CiIdentityArgs(config=config, account_id=account_id, state=state), opts=on_aws)
if config.activate_cost_allocation_tags:
    CostAllocationTags("cost-allocation-tags", opts=on_aws)

backend = state.bucket.bucket.apply(lambda bucket: policies.backend_url(bucket, config.region))
pulumi.export("backendUrl", backend)
pulumi.export("secretsProviders", {
    env.name: policies.secrets_provider_url(config.stacks_project, env.name, config.region) for env in config.environments})
pulumi.export("previewRoleArns", {env: role.arn for env, role in identity.preview_roles.items()})
pulumi.export("deployRoleArns", {env: role.arn for env, role in identity.deploy_roles.items()})
pulumi.export("imageRoleArns", {env: role.arn for env, role in identity.image_roles.items()})
# Each team's deploy role per environment (docs/team-stacks.md, "A team's deploy identity").
# Each team stack's `--secrets-provider`: its environment's key, the stack as encryption context.
pulumi.export("teamSecretsProviders", {
    f"team-{team.name}-{env}": policies.team_secrets_provider_url(
        policies.secrets_provider_url(config.stacks_project, env, config.region), f"team-{team.name}-{env}")
    for team in config.teams for env in team.environments})
pulumi.export("teamDeployRoleArns", {f"team-{team}-{env}": role.arn for (team, env), role in identity.team_roles.items()})
# Each platform stack file's `gpu-training:iamPermissionsBoundary`.
pulumi.export("permissionsBoundaryArns", {env: policy.arn for env, policy in identity.boundaries.items()})
# The repository variables the workflows read (docs/delivery.md, "First-time setup").
pulumi.export("githubVariables", {"AWS_ACCOUNT_ID": account_id, "AWS_REGION": config.region, "PULUMI_BACKEND_URL": backend})
