"""Names and IAM documents of the bootstrap: pure functions of the config, tested as data.

Least privilege, written down (docs/delivery.md repeats it for readers):

- preview role: lists the state bucket, reads the state files of its environment's stacks,
  decrypts their config secrets, and makes the reads the program's invokes make
  (PROGRAM_INVOKES). `pulumi preview` takes no lock in the DIY backend. No write. Pull requests
  may assume dev's only (PULL_REQUEST_PREVIEW_ENVIRONMENTS); every environment's is assumed from
  its deploy branch, before `pulumi up`.
- deploy role (protected branch + GitHub environment): writes the state files of its
  environment's stacks only; manages the services the stacks use in its region; never touches
  anything tagged with another environment, nor (for the services in PROJECT_SCOPED_RESOURCES)
  anything without the project's tag, nor log groups and alarms outside its environment's names
  (NAME_SCOPED_SERVICES), nor Auto Scaling groups but its cluster's; never shares a snapshot or an
  image (NEVER_ACTIONS), and peers only its environment's own VPCs, in its regions and account
  (PEERING_ACTIONS: a MultiKueue manager with its workers). The project scope
  (`deploy_scope_policy`) and what it never does (`deploy_guard_policy`) are managed policies of
  their own beside the inline one. IAM: it creates roles, and changes their policies
  or trust, only with its environment's permissions boundary on them (`boundary_policy`), attaches only the
  AWS managed policies the stacks attach, and can neither set nor remove a boundary.
- neither role can change the bootstrap: the state bucket's settings, the bootstrap's own state,
  the KMS keys (beyond using them), the OIDC provider, the CI roles and the boundaries are denied
  explicitly.
- image role (IMAGE_BUILD_ENVIRONMENTS, protected branch + a GitHub environment of its own,
  `<env>-image`, which the deploy role does not trust): main.yml's trainer image job,
  `scripts/build-image <env>` on a GitHub-hosted runner. It
  reads the one state file that holds the registry's URL and pushes to that registry; no other
  state, no config secrets, no write to the state, no IAM, no cluster.

The roles' trust follows GitHub's `sub` claim (see bootstrap/config.py, SUBJECT_CLAIMS).

One module per concern: names.py (every name the bootstrap gives), actions.py (what the roles do),
scope.py (what is the project's and the environment's), trust.py (who assumes the CI roles),
ci_roles.py (preview and image roles), boundary.py, deploy.py (the deploy role), keys.py (key
policies), teams.py (the team deploy roles). This package re-exports what the bootstrap program and the
tests use, so `from bootstrap
import policies` reads as one module.
"""

from __future__ import annotations

from bootstrap.policies.actions import (
    ATTACHABLE_MANAGED_POLICIES,
    BOUNDARY_ACTIONS,
    IMAGE_PUSH_ACTIONS,
    MANAGED_SERVICES,
    PROGRAM_INVOKES,
    services_linked_to,
)
from bootstrap.policies.boundary import ACTION_FAMILIES, boundary_allow_list, boundary_policy
from bootstrap.policies.ci_roles import image_policy, preview_policy
from bootstrap.policies.deploy import NO_READS_OF_VERB, deploy_guard_policy, deploy_policy, deploy_scope_policy
from bootstrap.policies.keys import secrets_key_policy, state_key_policy
from bootstrap.policies.names import (
    backend_url,
    boundary_policy_name,
    ci_role_name,
    deploy_guard_policy_name,
    deploy_scope_policy_name,
    environment_regions,
    environment_stacks,
    secrets_key_alias,
    secrets_provider_url,
    state_bucket_name,
    state_key_alias,
    state_log_bucket_name,
    team_secrets_provider_url,
    trainer_repository_name,
)
from bootstrap.policies.scope import ENVIRONMENT_TAG, PROJECT_TAG, TAGGING_ACTIONS
from bootstrap.policies.trust import (
    GITHUB_OIDC_AUDIENCE,
    GITHUB_OIDC_URL,
    IMAGE_BUILD_ENVIRONMENTS,
    PULL_REQUEST_PREVIEW_ENVIRONMENTS,
    deploy_subject,
    github_trust_policy,
    image_subject,
    preview_subjects,
)

__all__ = [
    "ACTION_FAMILIES", "ATTACHABLE_MANAGED_POLICIES", "BOUNDARY_ACTIONS", "ENVIRONMENT_TAG", "GITHUB_OIDC_AUDIENCE",
    "GITHUB_OIDC_URL", "IMAGE_BUILD_ENVIRONMENTS", "IMAGE_PUSH_ACTIONS", "MANAGED_SERVICES", "NO_READS_OF_VERB",
    "PROGRAM_INVOKES", "PROJECT_TAG", "PULL_REQUEST_PREVIEW_ENVIRONMENTS", "TAGGING_ACTIONS", "backend_url",
    "boundary_allow_list", "boundary_policy", "boundary_policy_name", "ci_role_name", "deploy_guard_policy",
    "deploy_guard_policy_name", "deploy_policy", "deploy_scope_policy",
    "deploy_scope_policy_name", "deploy_subject", "environment_regions", "environment_stacks",
    "github_trust_policy", "image_policy", "image_subject", "preview_policy", "preview_subjects",
    "secrets_key_alias", "secrets_key_policy", "secrets_provider_url",
    "services_linked_to", "state_bucket_name", "state_key_alias", "state_key_policy", "state_log_bucket_name",
    "team_secrets_provider_url", "trainer_repository_name",
]
