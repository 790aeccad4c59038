"""The bootstrap's names: roles, policies, keys, the state bucket and the DIY backend's object
layout, the environment's sites and stacks. Stable: they become ARNs the workflows and stack files name."""

from __future__ import annotations

from typing import Literal

from bootstrap.config import BootstrapConfig, EnvironmentCi
from components.facts.regions import arn_partition

# Organisation segment of every DIY-backend stack reference and lock path (pulumi/pulumi
# pkg/backend/diy/store.go: "org-name must always be organization").
DIY_ORGANIZATION = "organization"

def in_partition(config: BootstrapConfig, *arns_without_partition: str) -> list[str]:
    """`arn:<partition of the bootstrap's region>:` + each."""
    partition = arn_partition(config.region)
    return [f"arn:{partition}:{arn}" for arn in arns_without_partition]


def cluster_name(stacks_project: str, environment: str) -> str:
    """The environment's EKS cluster (components/config/stack.py, StackConfig.cluster_name)."""
    return f"{stacks_project}-{environment}"


# --- names (stable: they become ARNs the workflows and stack files name) -----------------------

CiJob = Literal["preview", "deploy", "image"]


def ci_role_name(stacks_project: str, job: CiJob, environment: str) -> str:
    return f"{stacks_project}-ci-{job}-{environment}"


def trainer_repository_name(stacks_project: str, environment: str) -> str:
    """The environment's trainer repository: components/data/registry.py names it
    `<name_prefix>/trainer`, the platform stack's name_prefix being `<project>-<environment>`
    (components/config/stack.py; tests/test_bootstrap.py checks the plans agree)."""
    return f"{stacks_project}-{environment}/trainer"


def ci_role_pattern(stacks_project: str) -> str:
    return f"{stacks_project}-ci-*"


def deploy_scope_policy_name(stacks_project: str, environment: str) -> str:
    """The managed policy that keeps the deploy role to the project (`deploy_scope_policy`)."""
    return f"{ci_role_name(stacks_project, 'deploy', environment)}-project-scope"


def deploy_guard_policy_name(stacks_project: str, environment: str) -> str:
    """The managed policy of what the deploy role never does (`deploy_guard_policy`)."""
    return f"{ci_role_name(stacks_project, 'deploy', environment)}-guard"


def boundary_policy_name(stacks_project: str, environment: str) -> str:
    """The managed policy every role of the environment's stacks carries as permissions boundary."""
    return f"{stacks_project}-boundary-{environment}"


def boundary_policy_arn(stacks_project: str, environment: str, account_id: str, partition: str) -> str:
    """What the stack files set as `iamPermissionsBoundary`."""
    return f"arn:{partition}:iam::{account_id}:policy/{boundary_policy_name(stacks_project, environment)}"


def state_bucket_name(stacks_project: str, account_id: str) -> str:
    """Globally unique through the account id; never matches `<project>-<env>-*` (the stacks' buckets)."""
    return f"{stacks_project}-pulumi-state-{account_id}"


def state_log_bucket_name(stacks_project: str, account_id: str) -> str:
    """The state bucket's access-log bucket: never matches `<project>-<env>-*` either."""
    return f"{stacks_project}-pulumi-state-logs-{account_id}"


def state_key_alias(stacks_project: str) -> str:
    return f"alias/{stacks_project}-pulumi-state"


def secrets_key_alias(stacks_project: str, environment: str) -> str:
    return f"alias/{stacks_project}-pulumi-secrets-{environment}"


def backend_url(bucket: str, region: str) -> str:
    """What `pulumi login` takes (DIY backend on S3)."""
    return f"s3://{bucket}?region={region}"


def secrets_provider_url(stacks_project: str, environment: str, region: str) -> str:
    """What `pulumi stack init --secrets-provider` takes for a stack of `environment`."""
    return f"awskms://{secrets_key_alias(stacks_project, environment)}?region={region}"


# The encryption context of a team stack's data key: {"stack": "team-<team>-<env>"}. Pulumi's
# awskms provider is gocloud.dev's, whose URL takes `context_<key>=<value>` parameters and sends
# them as the EncryptionContext of both Encrypt and Decrypt (google/go-cloud#3149, PR #3154;
# documented for Pulumi by pulumi/pulumi-hugo#2106). One key only: with two, Pulumi 3.208 sent the
# first value for both (pulumi/pulumi#21068, open).
SECRETS_CONTEXT_KEY = "stack"


def team_secrets_provider_url(provider_url: str, stack: str) -> str:
    """A team stack's `--secrets-provider`: its environment's (`provider_url`) with the stack as
    its encryption context, the only one the team deploy role may decrypt under (teams.py)."""
    return f"{provider_url}{'&' if '?' in provider_url else '?'}context_{SECRETS_CONTEXT_KEY}={stack}"


def environment_ci(config: BootstrapConfig, environment: str) -> EnvironmentCi:
    """The environment's entry in the bootstrap's config (its defaults where it has none)."""
    return next((env for env in config.environments if env.name == environment),
                EnvironmentCi(name=environment, deploy_branch="main", github_environment=environment))


def environment_sites(config: BootstrapConfig, environment: str) -> list[tuple[str, str]]:
    """(name prefix, region) of each platform stack of the environment: its own stack in the
    bootstrap's region (<project>-<env>), then its regional stacks (<project>-<env>-<site>, the
    stacks' name_prefix and cluster name: components/config/stack.py)."""
    own = cluster_name(config.stacks_project, environment)
    return [(own, config.region),
            *((f"{own}-{site}", region) for site, region in environment_ci(config, environment).sites)]


def environment_regions(config: BootstrapConfig, environment: str) -> list[str]:
    """The regions the environment's platform stacks use, the bootstrap's first."""
    return list(dict.fromkeys(region for _, region in environment_sites(config, environment)))


def environment_stacks(config: BootstrapConfig, environment: str) -> tuple[str, ...]:
    """The platform stacks of an environment (its own, then its regional ones) and the pattern of
    its team stacks."""
    return (*environment_ci(config, environment).platform_stacks, f"team-*-{environment}")


# --- the DIY backend's object layout (pulumi/pulumi pkg/backend/diy/store.go, lock.go) ----------

def stack_checkpoint_prefix(project: str, stack: str) -> str:
    """The key every variant of the stack's state file starts with. The backend finds which
    variant exists by listing the bucket with exactly this prefix (stackPath in
    pkg/backend/diy/state.go), before it reads it."""
    return f".pulumi/stacks/{project}/{stack}.json"


def stack_checkpoints(bucket_arn: str, project: str, stack: str) -> list[str]:
    """The stack's state file: <stack>.json, .json.gz, .json.zst and their .bak copies."""
    return [f"{bucket_arn}/{stack_checkpoint_prefix(project, stack)}*"]


def stack_objects(bucket_arn: str, project: str, stack: str) -> list[str]:
    """Everything `pulumi up` writes for one stack: state, history, backups, journal, lock."""
    return [
        *stack_checkpoints(bucket_arn, project, stack),
        *(f"{bucket_arn}/.pulumi/{kind}/{project}/{stack}/*" for kind in ("history", "backups", "journal")),
        f"{bucket_arn}/.pulumi/locks/{DIY_ORGANIZATION}/{project}/{stack}/*",
    ]


def state_metadata(bucket_arn: str) -> str:
    return f"{bucket_arn}/.pulumi/meta.yaml"
