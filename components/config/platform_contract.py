"""The platform contract: everything a team stack may know of its environment's platform stack.

A team stack runs its jobs on the pools, fabric, cluster and storage of a platform stack that
was deployed, perhaps from another commit. So it reads those facts from one place only: the
deployed platform's contract, never the platform's stack file in the team's checkout, which may
describe a platform that does not exist. The platform publishes it twice, with one value: as its
`platformContract` output, and as an SSM parameter (contract_parameter_name), which is what a
team stack reads. Not through a StackReference: the DIY backend opens the referenced stack's secrets
manager to read any output (pulumi/pulumi: the DIY backend's GetStackOutputs ->
pkg/resource/stack/deployment.go DeserializeStackOutputs), which for awskms decrypts the stack's
data key at once, so a team deploy role could read its platform only if its boundary let it
decrypt every secret of the platform's state (pulumi/pulumi#11109; #21436 open, its fix #21461
closed unmerged; the catch of pulumi/pulumi#19533 covers per-value decryption only). The
parameter needs `ssm:GetParameter` on one name, which carries no secret.

The contract carries the platform stack's own configuration as the engine handed it to the
platform program (every value as text, secrets by name only), which the team's checkout parses
with its own config model, so a team stack validates its jobs against the values the platform
was built with; and the resources the team stack attaches to (cluster, buckets, file system,
keys, roles, alert topic). It is versioned:
a reader accepts only the version it was written for, and says which side to deploy.

The offline plan answers a team stack's read with the contract its platform stack's own plan exports.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from components.config.multikueue import MANAGER, WORKER, WorkerCluster
from components.config.reader import ConfigError, ConfigProblem
from components.config.stack import StackConfig, TeamStackConfig, decode_raw_config, load_stack_config
from components.config.teams import team_queue

CONTRACT_OUTPUT = "platformContract"
"""The platform stack's output a team stack reads."""
JUDGED_AGAINST_DEPLOYED_PLATFORM = "the deployed platform stack (its platformContract)"
"""How a team stack's report names the problems found once its platform's contract was read:
scripts/deploy-environment defers such a team preview until the platform's own `up` has run."""
CONTRACT_PARAMETER_TIER = "Advanced"
"""A Standard parameter holds 4 KB, an Advanced one 8 KB (AWS Systems Manager User Guide, "Managing
parameter tiers")."""
CONTRACT_PARAMETER_MAX_BYTES = 8192
"""The most an Advanced parameter's value holds (ibid.)."""
CONTRACT_ENCODING = "gzip+base64:"
"""How the parameter holds a contract whose JSON would not fit it. Plain, a real contract outgrows
8 KB at about ten teams: the offline plans' contracts are 3.9 to 5.0 KB, a real cluster's kubeconfig
adds about 1.5 KB of certificate authority, and each registered team about 200 bytes (its registry
row and its access point). Compressed, the repeated keys and ARNs shrink: fifty teams fit with a
fifth of the parameter to spare (tests/test_platform_contract_parameter.py). A contract that fits
stays plain JSON, which previews diff key by key; `aws ssm get-parameter --name <name> --query
Parameter.Value --output text | cut -d: -f2 | base64 -d | gunzip` reads a compressed one."""
CONTRACT_VERSION = 1
"""Raise it when a reader of the previous version would misread the contract (a key renamed,
a meaning changed); adding a resource is not such a change."""

SECRET_NOT_PUBLISHED = "(not published)"
"""The value the contract gives each of the platform's secrets: their names are facts, their values are not."""
CONTRACT_RESOURCES = ("clusterName", "kubeconfig", "datasetsBucket", "artifactsBucket", "checkpointFileSystemId",
                      "dataKeyArn", "secretsSyncRoleArn", "alertTopicArn")
"""The platform's resources a team stack attaches to (the kubeconfig holds no credential: it runs
`aws eks get-token` as whoever deploys)."""
TEAM_ACCESS_POINTS = "teamCheckpointAccessPoints"
"""The platform's resource of each team of its registry: the EFS access point of its checkpoints
(team -> {"id", "arn"}), which the platform makes with the team's PersistentVolumes
(workload/team_volumes.py). A team stack reads its own: a platform that does not publish it was
deployed before it made them, and the team stack, which no longer makes its volumes, waits for it."""


@dataclass(frozen=True)
class PublishedAccessPoint:
    """A team's checkpoints access point, as its platform publishes it."""

    id: str
    arn: str


@dataclass(frozen=True)
class PlatformContract:
    """A contract that passed `read_contract`: the platform's config, and its resources' ids."""

    config: dict[str, Any]
    """Fully-qualified config of the platform stack, decoded as `load_stack_config` reads it."""
    resources: dict[str, str]
    """CONTRACT_RESOURCES -> the deployed resource's name, id or ARN."""
    team_access_points: dict[str, PublishedAccessPoint] = field(default_factory=dict)
    """TEAM_ACCESS_POINTS: team -> its checkpoints access point on the platform's file system."""

    def access_point_of(self, team: str, *, where: str, deploy: str) -> PublishedAccessPoint:
        """Team `team`'s access point, or a ConfigError that says to deploy the platform first."""
        point = self.team_access_points.get(team)
        if point is None:
            raise ConfigError([ConfigProblem(
                f"output {CONTRACT_OUTPUT}.resources.{TEAM_ACCESS_POINTS}",
                f"has no access point of team {team}: the platform makes the team's checkpoints access point and "
                "volumes from its registry of teams", deploy, where=where)])
        return point


def published_config(engine_config: Mapping[str, str], secret_keys: Collection[str], *, project: str) -> dict[str, str]:
    """What the contract carries of a platform stack's config: every key as the engine passes it
    (text), the secrets by name only (the platform's jobs name them), and no other key that holds
    a secret."""
    secrets_key = f"{project}:secrets"
    secret_roots = {_top_key(key) for key in secret_keys} - {secrets_key}
    published = {key: value for key, value in sorted(engine_config.items())
                 if key not in secret_roots and key != secrets_key}
    secrets = decode_raw_config({secrets_key: engine_config.get(secrets_key)})[secrets_key]
    if isinstance(secrets, Mapping):
        published[secrets_key] = json.dumps({name: SECRET_NOT_PUBLISHED for name in secrets}, sort_keys=True)
    return published


def _top_key(path: str) -> str:
    """`project:key` of a config path (`project:key.inner[0]`); the project's name may hold dots."""
    namespace, colon, rest = path.partition(":")
    return namespace + colon + re.split(r"[.\[]", rest, maxsplit=1)[0]


def contract_parameter_name(project: str, stack: str) -> str:
    """The SSM parameter the platform stack `stack` publishes its contract in, in its own region."""
    return f"/{project}/{stack}/platform-contract"


def contract_parameter_value(contract: Mapping[str, Any], *, stack: str) -> str:
    """The parameter's value: the `platformContract` output as JSON, compressed where it would not
    fit (CONTRACT_ENCODING; gzip without a timestamp, so an unchanged contract is an unchanged
    value), or a ConfigError where even that would not fit an Advanced parameter."""
    value = json.dumps(contract, sort_keys=True, separators=(",", ":"))
    if len(value.encode()) > CONTRACT_PARAMETER_MAX_BYTES:
        value = CONTRACT_ENCODING + base64.b64encode(gzip.compress(value.encode(), mtime=0)).decode()
    size = len(value.encode())
    if size > CONTRACT_PARAMETER_MAX_BYTES:
        raise ConfigError([ConfigProblem(
            f"output {CONTRACT_OUTPUT}", f"is {size} bytes as JSON, more than the {CONTRACT_PARAMETER_MAX_BYTES} an "
            f"{CONTRACT_PARAMETER_TIER} SSM parameter holds", "publish fewer of the platform's config keys or resources "
            "in the contract (components/config/platform_contract.py)", where=f"platform stack '{stack}'")])
    return value


def decoded_contract_parameter(value: str) -> Any:
    """The contract a parameter holds (plain JSON, or contract_parameter_value's compressed form),
    or the text as it is where it is neither, which read_contract then refuses naming the fix."""
    try:
        if value.startswith(CONTRACT_ENCODING):
            return json.loads(gzip.decompress(base64.b64decode(value.removeprefix(CONTRACT_ENCODING), validate=True)))
        return json.loads(value)
    except (ValueError, OSError, EOFError):  # binascii.Error and JSONDecodeError are ValueErrors
        return value


def missing_contract_parameter(name: str, *, region: str, reference: str) -> ConfigError:
    """What a team stack says where the platform stack `reference` (or a worker) has not published
    its contract yet: worded as read_contract's problems, which the same deploy fixes."""
    stack = reference.rsplit("/", 1)[-1]
    return ConfigError([ConfigProblem(
        f"SSM parameter {name}", f"does not exist in {region} (the platform was deployed before it published its "
        "contract there, or not at all)", f"deploy the platform stack from this commit first (pulumi up --stack {stack}), "
        "then this team stack", where=f"platform stack {reference}")], judged_against=JUDGED_AGAINST_DEPLOYED_PLATFORM)


def read_contract(value: Any, *, reference: str, project: str) -> PlatformContract:
    """The contract read from the platform stack `reference`, or a ConfigError that says what to deploy."""
    where = f"platform stack {reference}"
    deploy_platform = (f"deploy the platform stack from this commit first (pulumi up --stack "
                       f"{reference.rsplit('/', 1)[-1]}), then this team stack")

    def problem(rule: str, fix: str = deploy_platform, key: str = CONTRACT_OUTPUT) -> ConfigProblem:
        return ConfigProblem(f"output {key}", rule, fix, where=where)

    if value is None:
        raise ConfigError([problem("is missing (the platform was deployed before team stacks read a contract)")])
    # A StackReference handed numbers over as floats (protobuf), JSON as ints; any other version is not ours.
    raw_version = value.get("version") if isinstance(value, Mapping) else None
    if isinstance(raw_version, bool) or not isinstance(raw_version, int | float) or not float(raw_version).is_integer():
        raise ConfigError([problem("is not a platform contract", f"check platformStack names a {project} platform stack")])
    version = int(raw_version)
    if version < CONTRACT_VERSION:
        raise ConfigError([problem(f"version {version}, this program reads version {CONTRACT_VERSION}")])
    if version > CONTRACT_VERSION:
        raise ConfigError([problem(f"version {version}, this program reads version {CONTRACT_VERSION}: the platform "
                                   "was deployed from a newer commit", "update this checkout to that commit")])
    config, resources = value.get("config"), value.get("resources")
    problems = [problem("is missing or not a map", key=f"{CONTRACT_OUTPUT}.{name}")
                for name, part in (("config", config), ("resources", resources)) if not isinstance(part, Mapping)]
    if isinstance(resources, Mapping):
        problems += [problem("is missing", key=f"{CONTRACT_OUTPUT}.resources.{name}") for name in CONTRACT_RESOURCES
                     if not isinstance(resources.get(name), str)]
        if _access_points(resources.get(TEAM_ACCESS_POINTS)) is None:
            problems.append(problem("is missing or not a map of team -> {id, arn}",
                                    key=f"{CONTRACT_OUTPUT}.resources.{TEAM_ACCESS_POINTS}"))
    if problems:
        raise ConfigError(problems)
    assert isinstance(config, Mapping) and isinstance(resources, Mapping)
    return PlatformContract(config=decode_raw_config(config),
                            resources={name: str(resources[name]) for name in CONTRACT_RESOURCES},
                            team_access_points=_access_points(resources[TEAM_ACCESS_POINTS]) or {})


def _access_points(value: Any) -> dict[str, PublishedAccessPoint] | None:
    """TEAM_ACCESS_POINTS as published, or None where it is not a map of team -> {id, arn} (text)."""
    if not isinstance(value, Mapping):
        return None
    points = {}
    for team, point in value.items():
        if not isinstance(point, Mapping) or not all(isinstance(point.get(part), str) for part in ("id", "arn")):
            return None
        points[str(team)] = PublishedAccessPoint(id=point["id"], arn=point["arn"])
    return points


def platform_of_contract(contract: PlatformContract, *, project: str, environment: str,
                         today: date | None = None) -> StackConfig:
    """The platform stack's config as deployed, parsed by this checkout's config model. A problem
    there means the two differ (the platform was deployed from another commit, whose keys or
    values this checkout does not know): each names its source and both ways to make them agree."""
    where = f"platform stack '{environment}' (its deployed {CONTRACT_OUTPUT})"
    agree = (f"deploy the platform stack from this commit (pulumi up --stack {environment}), or update this checkout "
             "to the commit the platform was deployed from")
    try:
        # Not compared with this checkout's other stack files: the platform as deployed is judged, and
        # its VPC range is its own stack's concern, not the team's.
        loaded = load_stack_config(contract.config, project=project, stack=environment, today=today,
                                   sibling_stacks_dir=None)
    except ConfigError as error:
        raise ConfigError([replace(problem, where=f"{where}: {problem.where}" if problem.where else where,
                                   fix=f"{problem.fix.rstrip('.')}; or {agree}" if problem.fix else agree)
                           for problem in error.problems]) from None
    if not isinstance(loaded, StackConfig):
        raise ConfigError([ConfigProblem(f"stack '{environment}'", "is not a platform stack", where=where)])
    return loaded


def worker_stack_reference(project: str, worker_stack: str) -> str:
    """The StackReference name of a manager's worker stack (DIY backend: organization/<project>/<stack>)."""
    return f"organization/{project}/{worker_stack}"


def workers_of(platform: StackConfig) -> tuple[WorkerCluster, ...]:
    """The worker clusters a team's tenancy reaches too: those of a MultiKueue manager, else none."""
    multikueue = platform.multikueue
    return multikueue.workers if multikueue is not None and multikueue.role == MANAGER else ()


def worker_problems(team: TeamStackConfig, worker: WorkerCluster, platform: StackConfig) -> list[ConfigProblem]:
    """What keeps the team's tenancy off a worker, judged on the worker's deployed contract: the
    worker must be the manager's (MultiKueue dispatches there) in the region the manager lists, and
    its registry of teams must list the team (the worker's platform makes the team's ClusterQueue there)."""
    where = f"worker stack '{worker.stack}' (its deployed {CONTRACT_OUTPUT})"
    deploy = f"deploy {worker.stack} from this commit (pulumi up --stack {worker.stack}), then this team stack"
    problems = []
    multikueue = platform.multikueue
    if multikueue is None or multikueue.role != WORKER or multikueue.manager != team.judged_platform.stack:
        problems.append(ConfigProblem(
            f"{team.project}:multiKueue", f"is not a MultiKueue worker of '{team.judged_platform.stack}'",
            f"{deploy}; or drop it from {team.judged_platform.stack}'s multiKueue.workers", where=where))
    if platform.region != worker.region:
        problems.append(ConfigProblem(
            f"{team.project}:region", f"is {platform.region}, the manager lists {worker.region}",
            f"make {team.judged_platform.stack}'s multiKueue.workers[].region the worker's region", where=where))
    # The worker's platform makes the team's ClusterQueue there from its own registry of teams, which
    # it validated against its pools and summed with its own queue (config/teams.py), and the team's
    # namespace, quota and limits (workload/team_tenancy.py).
    if team_queue(platform.teams, team.team) is None:
        problems.append(ConfigProblem(
            f"{team.project}:teams", f"lists no team {team.team} on worker stack '{worker.stack}': its platform makes "
            "the team's namespace and ClusterQueue in that region, onto which the team's LocalQueue any-region points",
            f"add {{name: {team.team}, gpuQuota: {{<pool>: <GPUs>}}}} to teams in stacks/Pulumi.{worker.stack}.yaml, "
            f"then {deploy}", where=where))
    return problems
