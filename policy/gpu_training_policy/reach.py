"""A team's tenancy, as the IAM evaluator (evaluator.py) is asked about it: which requests are
outside it, and the witness ARNs that stand for "anything outside" where a document names `*`.

A team stack `team-<team>-<env>` of project <project> owns (components/team.py, components/
secrets/store.py, components/identity/policies.py): the objects under `teams/<team>/` of its
environment's buckets (`<project>-<env>-*`, its regional sites' included), the secrets under
`<project>/<env>/teams/<team>/`, and the roles `<project>-<env>-team-<team>-<word>`, one word:
with a hyphen the name is a longer team's (`...-team-vision-x-secrets` is team vision-x's reader,
not a role `x-secrets` of team vision). It reads its environment's datasets buckets, shared with
every team, and nothing else of them. Everything else (another team's, the platform's, another
environment's or project's) is outside. The team is the stack's (resources.py stack_of), never a tag.

ARNs the offline engine stands in for values known only after a deploy (`arn:aws:mock:`) are
references to the stack's own or its platform's outputs, which team-references-own judges; so is
one key named by its id (KEY).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from gpu_training_policy.resources import Stack

MOCK_ARN = "arn:aws:mock:"
# The datasets buckets of an environment (components/data/buckets.py: <prefix>-datasets-<account>).
DATASETS = "-datasets-"
# What a team may do with its environment's shared datasets (the trainer's ReadDatasets/ListDatasets).
SHARED_READS = frozenset({"s3:getobject", "s3:getobjectversion", "s3:listbucket", "s3:getbucketlocation"})
OTHER_TEAM = "zz-other-team"
# The prefix a request lists in a shared bucket, for ListBucket's s3:prefix condition.
LISTED_PREFIX = f"teams/{OTHER_TEAM}/"
# One key by its id. A key ARN carries no owner: the one a team's document names literally is its
# own key or one its platform's outputs name (the data key, used through S3), and the key's own
# policy says who may use it (components/common/kms.py). A wildcard over keys is judged: through
# S3, for another bucket's objects (CONTEXT), it must not decrypt.
KEY = re.compile(r"key/[0-9a-zA-Z-]+")
# What the question fixes of a request outside the tenancy: another team's listing, another
# bucket's objects decrypted through S3.
CONTEXT = {"s3:prefix": LISTED_PREFIX, "kms:EncryptionContext:aws:s3:arn": "arn:aws:s3:::zz-other-project/x"}


def team_role_pattern(stack: Stack) -> re.Pattern[str]:
    """A team's role names: its prefix and one word (no hyphen: a hyphen makes it a longer team's).
    Two prefixes: the secrets reader's, `<project>-<env>-team-<team>-`, and the team stack's own
    name prefix, `<project>-<env>-<team>-`, which the team boundary covers (its trainer role:
    components/identity/policies.py team_trainer_role_name; bootstrap/policies/teams.py)."""
    own = f"{stack.project}-{stack.environment}-{stack.team}-"
    return re.compile(f"(?:{re.escape(stack.team_name_prefix)}|{re.escape(own)})[a-z0-9]+")


def owns_role_name(stack: Stack, name: str) -> bool:
    return bool(team_role_pattern(stack).fullmatch(name))


def _in_environment(stack: Stack, bucket: str) -> bool:
    return bucket.startswith(f"{stack.project}-{stack.environment}-")


def _s3_outside(stack: Stack, action: str, resource: str, shared: frozenset[str]) -> bool:
    bucket, _, key = resource.partition("/")
    if action.lower() in SHARED_READS and (bucket in shared or (DATASETS in bucket and _in_environment(stack, bucket))):
        return False
    if not _in_environment(stack, bucket):
        return True
    return not key.startswith(stack.team_object_prefix)


def outside_of(stack: Stack, shared_buckets: Iterable[str] = ()) -> Callable[[str, str], bool]:
    """outside(action, arn): whether the request is on something not the team's. `shared_buckets`:
    buckets every team may read besides its environment's datasets (an existing datasets bucket
    the platform reads, storage.datasetsBucket: the policy's `sharedReadBuckets`)."""
    shared = frozenset(shared_buckets)
    def outside(action: str, arn: str) -> bool:
        if arn.startswith(MOCK_ARN):
            return False
        parts = arn.split(":", 5)
        if len(parts) != 6 or parts[0] != "arn":
            return True
        service, resource = parts[2].lower(), parts[5]
        if service == "s3":
            return _s3_outside(stack, action, resource, shared)
        if service == "secretsmanager":
            return not resource.startswith(f"secret:{stack.team_secret_prefix}")
        if service == "iam" and resource.startswith("role/"):
            return not owns_role_name(stack, resource.rsplit("/", 1)[-1])
        return not (service == "kms" and KEY.fullmatch(resource))
    return outside


def generic_of(stack: Stack) -> Callable[[str], Iterable[str]]:
    """ARNs outside the team, per resource service, for statements on `*` or NotResource."""
    project, env, other = stack.project, stack.environment, OTHER_TEAM
    witnesses = {
        "s3": (f"arn:aws:s3:::{project}-{env}-artifacts-000000000000/teams/{other}/x",
               f"arn:aws:s3:::{project}-{env}-artifacts-000000000000", "arn:aws:s3:::zz-other-project/x"),
        "secretsmanager": (f"arn:aws:secretsmanager:us-east-1:000000000000:secret:{project}/{env}/teams/{other}/x",
                           "arn:aws:secretsmanager:us-east-1:000000000000:secret:zz-other-project/x"),
        "iam": (f"arn:aws:iam::000000000000:role/{project}-{env}-team-{other}-secrets",
                "arn:aws:iam::000000000000:role/zz-other-project-admin"),
    }
    return lambda service: witnesses.get(service, (f"arn:aws:{service}:us-east-1:000000000000:zz-other/x",))
