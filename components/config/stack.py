# Over 600 lines: the stack's config objects and the checks across sections, which need all of them at once.
"""The whole stack configuration, parsed once into frozen objects before any resource exists.

`load_stack_config` is the only reader of raw config. Everything downstream receives these
typed objects; nothing else calls `pulumi.Config`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from pulumi.runtime import config as runtime_config

from components.config.budget import BudgetConfig, parse_budget
from components.config.cluster import ClusterConfig, parse_cluster
from components.config.environment_agreement import check_multikueue_agreement, check_region_of_its_own
from components.config.fabric import FabricConfig, parse_fabric
from components.config.keys import PLATFORM_ONLY_KEYS
from components.config.lustre_sizing import check_lustre_size
from components.config.lustre_zone import place_lustre
from components.config.multikueue import MANAGER, MultiKueueConfig, api_peer_cidrs, parse_multikueue, stack_name_prefix
from components.config.network import NetworkConfig, parse_network
from components.config.node_pools import (
    NodePoolConfig,
    check_subnet_ip_budget,
    failed_pool_names,
    parse_node_pools,
    pin_release_versions,
    release_ended_blocks,
)
from components.config.observability import ObservabilityConfig, parse_observability
from components.config.permissions_boundary import KEY as PERMISSIONS_BOUNDARY_KEY
from components.config.permissions_boundary import parse_permissions_boundary, team_boundary_arn
from components.config.placeholders import parse_allow
from components.config.reader import (
    SECRET,
    ConfigError,
    ConfigProblem,
    ErrorLog,
    Section,
    did_you_mean,
    own_keys,
    refuse_plain_keys_set_as_secrets,
    shown,
)
from components.config.registry import RegistryConfig, parse_registry
from components.config.scale_down import ScaleDownConfig, parse_scale_down
from components.config.secrets import SecretsConfig, declared_names, parse_secrets
from components.config.service_quotas import (
    ServiceQuotas,
    check_node_pool_quotas,
    check_rules_times_groups_per_interface,
    check_security_group_rules,
    parse_service_quotas,
    security_group_rules,
)
from components.config.sibling_stacks import (
    STACKS_DIR,
    manager_workers,
    overlapping_vpc_cidrs,
    sibling_vpc_cidrs,
    stack_vpc_cidr,
)
from components.config.stack_names import ENVIRONMENTS, MAX_TEAM_NAME, stack_kind, team_name_prefix, team_namespace
from components.config.storage import StorageConfig, parse_storage
from components.config.team_members import parse_members
from components.config.teams import TEAMS_KEY, TeamQueueConfig, parse_teams, team_queue
from components.config.training import (
    CUDA_FORMAT_FIX,
    IMAGE_BY_DIGEST,
    TrainingConfig,
    check_borrowed_has_a_lender,
    cuda_format_problem,
    image_fix,
    parse_training,
)
from components.config.viewer import ViewerConfig, parse_viewer
from components.facts.cuda import DEFAULT_IMAGE_CUDA
from components.facts.eks_versions import AL2023_NVIDIA_RELEASE
from components.facts.regions import REGIONS_AS_OF, ZONES

# An AWS tag value (`cost-center` on every resource) may hold up to 256 letters, digits, spaces and
# _ . : / = + - @; we take the ASCII ones and ask for a letter or digit first (an empty or blank
# cost center bills nobody). ASCII on purpose, though the value is a tag only (no Kubernetes label):
# which Unicode letters a service's tag pattern takes differs from service to service, and the
# provider's default tags land on all of them. The messages say "ASCII letters" (`ml-plätform`).
# Nor a space last: `ml-platform ` would be a cost center of its own in Cost Explorer.
COST_CENTER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 ._:/=+@-]{0,254}[A-Za-z0-9._:/=+@-])?")
REGION_FIX = "use a region name like us-east-1, or add the new region's row to that table"
COST_CENTER_FIX = ("start with an ASCII letter or digit; then ASCII letters, digits, spaces and . _ : / = + - @, "
                   "no space at the end")
# <organization>/<project>/<stack>, each part a Pulumi name.
STACK_REFERENCE = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
# Config keys of other namespaces that this program knowingly accepts.
FOREIGN_KEYS = ("pulumi:disable-default-providers", "pulumi:tags")
# The keys the program reads as secrets: components/config/secrets.py wraps each entry in
# pulumi.Output.secret. Nothing else is read with get_secret/require_secret or kept secret, so a
# secret anywhere else would be planned and deployed in plain text.
SECRET_KEYS = ("secrets",)
SECRET_KEYS_FIX = ("set it without --secret (a `secure:` value: `pulumi config rm`, then `pulumi config set` without "
                   "--secret); only the entries of {project}:secrets may be secret, set with "
                   "`pulumi config set --path --secret 'secrets.<name>' <value>`")


@dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    environment: str
    team: str | None
    region: str
    cost_center: str
    network: NetworkConfig
    fabric: FabricConfig
    cluster: ClusterConfig
    node_pools: tuple[NodePoolConfig, ...]
    storage: StorageConfig
    registry: RegistryConfig
    secrets: SecretsConfig
    training: TrainingConfig
    observability: ObservabilityConfig
    budget: BudgetConfig | None = None
    scale_down: ScaleDownConfig = field(default_factory=ScaleDownConfig)
    iam_permissions_boundary: str | None = None
    """ARN of the managed policy every IAM role of the stack carries as permissions boundary."""
    service_quotas: ServiceQuotas = field(default_factory=ServiceQuotas)
    load_warnings: tuple[str, ...] = ()
    """What the load could not judge and says so (a sibling stack file it could not read)."""
    allow_placeholders: bool = False
    """`placeholders.allow` (dev only): a real deploy warns about example values instead of refusing them."""
    viewer: ViewerConfig = field(default_factory=ViewerConfig)
    """How the namespaces' TensorBoard is reached (its load balancer)."""
    multikueue: MultiKueueConfig | None = None
    """`multiKueue`: this cluster's part in the environment's one queue over several regions."""
    teams: tuple[TeamQueueConfig, ...] = ()
    """`teams`: the environment's teams, whose ClusterQueues this platform stack makes (config/teams.py)."""

    @property
    def name_prefix(self) -> str:
        """Prefix of every physical name: two environments, or one environment's stacks in two
        regions (IAM names are global), can never collide."""
        return stack_name_prefix(self.project, self.stack)

    @property
    def cluster_name(self) -> str:
        return self.name_prefix

    @property
    def training_namespace(self) -> str:
        return f"training-{self.environment}"

    @property
    def system_pool(self) -> NodePoolConfig:
        """The pool for CoreDNS and controllers: the first that can host them (never scales to zero, no
        NoSchedule or NoExecute taint)."""
        return next(p for p in self.node_pools if p.hosts_system_pods)

    @property
    def warnings(self) -> tuple[str, ...]:
        """What is valid but due soon (e.g. the end of standard support). The model only
        collects them: __main__.py hands them to the engine (`pulumi up` shows them), and the
        offline plan prints them in its summary."""
        return self.cluster.warnings + self.load_warnings


@dataclass(frozen=True)
class TeamStackConfig:
    """A team stack: only team-scoped things, on the cluster of its environment's platform stack."""

    project: str
    stack: str
    environment: str
    team: str
    region: str
    cost_center: str
    platform_stack: str
    """The platform stack, e.g. organization/gpu-training/prod: its last part names the contract
    parameter the team stack reads (platform_contract.contract_parameter_name)."""
    platform: StackConfig | None
    """The deployed platform stack's config, from its contract (platform_contract.py): the pools
    and fabric the jobs were validated against. None before the contract was read."""
    secrets: SecretsConfig
    training: TrainingConfig
    budget: BudgetConfig | None = None
    iam_permissions_boundary: str | None = None
    """The platform stack's: the same deploy role creates both stacks' roles."""
    allow_placeholders: bool = False
    """`placeholders.allow` (dev only), as a platform stack's."""
    members: tuple[str, ...] = ()
    """`members`: IAM role ARNs with access to the team's namespace only."""

    @property
    def judged_platform(self) -> StackConfig:
        """`platform`, for code that only runs once the contract was read (the team's resources,
        the offline tools): an error, not a None, where it was not."""
        if self.platform is None:
            raise ValueError(f"team stack {self.stack}: its config was not judged against its platform's contract")
        return self.platform

    @property
    def name_prefix(self) -> str:
        return team_name_prefix(self.project, self.team, self.environment)

    @property
    def training_namespace(self) -> str:
        return team_namespace(self.team)

    @property
    def warnings(self) -> tuple[str, ...]:
        """The platform's cluster warnings (the team's jobs run on its cluster), and the team's jobs'."""
        if self.platform is None:
            return ()
        return tuple(f"platform stack '{self.environment}': {warning}" for warning in self.platform.cluster.warnings)


def read_engine_config() -> dict[str, str]:
    """Every config value of the running stack as the engine passes it (structured ones as JSON text)."""
    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}


def read_raw_config() -> dict[str, Any]:
    """Every config value of the running stack, structured values decoded from their JSON form."""
    return decode_raw_config(read_engine_config())


def decode_raw_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The engine passes structured values as JSON text; decode them, leave plain strings be."""
    return {key: _decode(value) for key, value in raw.items()}


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON after all (or absurdly deep): a plain string
            return value
    return value


def read_secret_keys(raw: Mapping[str, Any]) -> set[str]:
    """The keys of `raw` the engine marks secret (set with `pulumi config set --secret`), and the
    paths the offline plan marks in a value that mixes secret and plain leaves, at any depth
    (`key.name`, `key.jobs[0].env.NAME`: stack_file.py's paths): a `secure:` deep inside a plain
    key must be refused as one at the top, or its value reaches manifests in plain text."""
    return {path for key, value in raw.items() for path in _paths(key, value) if runtime_config.is_config_secret(path)}


def _paths(path: str, value: Any) -> list[str]:
    """`path` and the path of everything inside `value`, as `pulumi config set --path` writes them."""
    if isinstance(value, Mapping):
        return [path, *(inner for name, item in value.items() for inner in _paths(f"{path}.{name}", item))]
    if isinstance(value, list):
        return [path, *(inner for index, item in enumerate(value) for inner in _paths(f"{path}[{index}]", item))]
    return [path]


def current_date() -> date:
    """The day EKS's support calendar is read for when the caller names none (UTC)."""
    return datetime.now(UTC).date()


def load_stack_config(raw: Mapping[str, Any], *, project: str, stack: str, secret_keys: Collection[str] | None = None,
                      today: date | None = None, platform: StackConfig | None = None,
                      sibling_stacks_dir: Path | None = STACKS_DIR) -> StackConfig | TeamStackConfig:
    """Parse and validate fully-qualified config (`project:key` -> decoded value).

    `secret_keys` (None: unknown) lets the model reject secrets stored in plain text.
    `today` (None: the current UTC date) is the day EKS's support calendar is read for.
    `platform`: a team stack's platform, read from its contract (platform_contract.py); without
    it a team stack is checked as far as it can be alone, and its `platform` is None.
    `sibling_stacks_dir`: where the other environments' stack files are, whose VPC CIDRs a
    platform stack's must not overlap (None: not compared, e.g. a deployed platform's contract).
    Raises ConfigError listing every problem found.
    """
    today = today or current_date()
    errors, own = own_keys(raw, project=project, secret_keys=secret_keys or ())
    # Secret values must never reach Section's generic messages (they print the value): the
    # secrets parser reads its key itself.
    raw_secrets = own.pop("secrets", None)
    prefix = f"{project}:"
    _check_foreign_keys(raw, prefix, errors)
    refuse_plain_keys_set_as_secrets(errors, project=project, readable=SECRET_KEYS, also=FOREIGN_KEYS,
                                     fix=SECRET_KEYS_FIX.format(project=project))
    root = Section(errors, project, own, separator=":")
    team, implied_env = _team_and_environment(stack, errors)
    environment = root.string("environment")
    if environment and environment != implied_env:
        root.error(root.key("environment"), environment,
                   f"differs from the stack name '{stack}', which implies '{implied_env}'",
                   f"set environment: {implied_env}, or select the stack you meant")
    region, cost_center = region_and_cost_center(root)
    # Environment rules follow the stack name: a prod stack gets prod rules even when its
    # `environment` key is wrong (that mismatch is reported above).
    if team:
        return _load_team(root, errors, raw_secrets, secret_keys, project=project, stack=stack, team=team,
                          environment=implied_env, region=region, cost_center=cost_center, platform=platform)
    return _load_platform(root, raw, raw_secrets, secret_keys, project=project, stack=stack, environment_key=environment,
                          environment=implied_env, region=region, cost_center=cost_center, today=today,
                          sibling_stacks_dir=sibling_stacks_dir)


def _team_and_environment(stack: str, errors: ErrorLog) -> tuple[str | None, str]:
    """(team, environment) the stack name implies; ConfigError (alone: nothing else can be judged
    without knowing the kind of stack) for a name of no known form."""
    team, environment = stack_kind(stack)
    if environment is None:
        raise ConfigError([ConfigProblem(
            f"stack '{stack}'", "unknown stack name", "name platform stacks dev, staging or prod (in a further region: "
            "<env>-<site>, e.g. prod-usw2) and team stacks team-<team>-<env> with a lowercase team name "
            "(e.g. team-vision-prod).")])
    if team and len(team) > MAX_TEAM_NAME:
        errors.append(ConfigProblem(f"stack '{stack}'", f"team name '{team}' is longer than {MAX_TEAM_NAME} characters "
                                    "(it becomes part of IAM role names)", "use a shorter team name."))
    return team, environment


def _load_platform(root: Section, raw: Mapping[str, Any], raw_secrets: Any, secret_keys: Collection[str] | None, *,
                   project: str, stack: str, environment_key: str, environment: str, region: str, cost_center: str,
                   today: date, sibling_stacks_dir: Path | None) -> StackConfig:
    """A platform stack's config; `environment_key` is its `environment` as read ("" if it failed),
    `environment` the one its name implies, whose rules apply."""
    network_section = root.section("network")
    network = parse_network(network_section, region=region, environment=environment)
    load_warnings = _check_distinct_vpc_cidr(network_section, network, project=project, stack=stack,
                                             stacks_dir=sibling_stacks_dir)
    fabric = parse_fabric(root.section("fabric"))
    cluster = parse_cluster(root.section("cluster"), environment=environment, today=today)
    raw_pools = root.items("nodePools")
    # Pools are checked against the network's zones only when those passed.
    network_zones = network.availability_zones if network_section.ok("availabilityZones") and region else None
    node_pools = parse_node_pools(root, raw_pools, network_zones=network_zones, region=region)
    node_pools, block_warnings = release_ended_blocks(node_pools, today=today)
    node_pools, release_warnings = pin_release_versions(
        root, node_pools, kubernetes_version=cluster.kubernetes_version, today=today,
        pinned=AL2023_NVIDIA_RELEASE.get(cluster.kubernetes_version)) if root.ok("cluster") else (node_pools, [])
    load_warnings = (*load_warnings, *block_warnings, *release_warnings)
    if network_section.ok("vpcCidr", "availabilityZones"):
        check_subnet_ip_budget(root, node_pools, network.subnets)
    storage = parse_storage(root.section("storage"), environment=environment, availability_zones=network_zones or (),
                            region=region)
    registry = parse_registry(root.section("registry"))
    secrets = parse_secrets(root.errors, root.key("secrets"), raw_secrets, secret_keys=secret_keys)
    training = _platform_training(root, raw_pools, node_pools, storage, raw_secrets, environment=environment)
    teams = parse_teams(root, pools=node_pools, invalid_pools=_unjudged_pools(root, raw_pools, node_pools),
                        platform_training=training, platform_quota_ok=root.ok("training.gpuQuota", "training.gpuQuotaBorrowed"))
    _check_platform_lenders(root, training, teams, judged=_unjudged_pools(root, raw_pools, node_pools) is not None)
    storage = place_lustre(root, storage, pools=node_pools, jobs=training.jobs, network_zones=network_zones or ())
    if root.ok("storage", "nodePools", "training.gpuQuota"):
        check_lustre_size(root, storage, training, node_pools)
    observability = parse_observability(root.section("observability"), environment=environment)
    budget = parse_budget(root.section("budget"), environment=environment)
    scale_down = parse_scale_down(root.section("scaleDown"))
    boundary = parse_permissions_boundary(root, project=project, environment=environment)
    allow_placeholders = parse_allow(root, environment=environment)
    _check_cleanup_image(root, training.cleanup_image, environment=environment, team=False)
    multikueue = parse_multikueue(root.section("multiKueue"), stack=stack, environment=environment,
                                  region_problem=region_problem)
    multikueue = _with_peer_cidrs(root, multikueue, project=project, stack=stack, stacks_dir=sibling_stacks_dir)
    check_region_of_its_own(root, region, project=project, stack=stack, environment=environment,
                            stacks_dir=sibling_stacks_dir)
    check_multikueue_agreement(root, multikueue, project=project, stack=stack, region=region,
                               stacks_dir=sibling_stacks_dir)
    if multikueue is not None and cluster.endpoint_public_access and root.ok("multiKueue"):
        # The peering carries the manager's calls to a worker's private endpoint, whose name resolves
        # to private addresses only while public access is off (EKS User Guide, "Cluster API server
        # endpoint"); with it on, the name resolves to public addresses and the calls leave by NAT.
        root.error(f"{root.key('cluster')}.endpointPublicAccess", True,
                   "is on in a MultiKueue stack: the manager reaches each worker's API over the VPC peering, "
                   "which only a private endpoint answers on",
                   "set cluster.endpointPublicAccess: false (reach the API over VPN or peering)")
    viewer = parse_viewer(root.section("viewer"), region=region)
    quotas = parse_service_quotas(root.section("serviceQuotas"))
    _check_service_quotas(root, quotas, network, fabric, raw_pools, node_pools, lustre=storage.lustre is not None,
                          viewer=viewer, multikueue=multikueue)
    root.finish()
    if root.errors:
        raise ConfigError(root.errors.without_secret_values(raw, also=raw_secrets))
    return StackConfig(project=project, stack=stack, environment=environment_key, team=None, region=region,
                       cost_center=cost_center, network=network, fabric=fabric, cluster=cluster, node_pools=node_pools,
                       storage=storage, registry=registry, secrets=secrets, training=training,
                       observability=observability, budget=budget, scale_down=scale_down,
                       iam_permissions_boundary=boundary, service_quotas=quotas, load_warnings=load_warnings,
                       allow_placeholders=allow_placeholders, multikueue=multikueue, viewer=viewer, teams=teams)


def _with_peer_cidrs(root: Section, multikueue: MultiKueueConfig | None, *, project: str, stack: str,
                     stacks_dir: Path | None) -> MultiKueueConfig | None:
    """The VPC CIDRs of the stacks this one is peered with (a manager's workers, a worker's
    manager), read from their stack files as their names are derived (no StackReference): the
    peering's routes and the worker's API ingress need them before anything is created."""
    if multikueue is None or stacks_dir is None or not root.ok("multiKueue"):
        return multikueue

    def cidr(key: str, stack: str) -> str:
        found, reason = stack_vpc_cidr(stacks_dir, project=project, stack=stack)
        if found is None:
            root.error(key, stack, f"names a stack whose VPC CIDR cannot be read ({reason}): the VPC peering "
                       "to it routes that range", f"add stacks/Pulumi.{stack}.yaml with network.vpcCidr, or fix it")
            return ""
        return str(found)

    if multikueue.role == MANAGER:
        return replace(multikueue, workers=tuple(
            replace(w, vpc_cidr=cidr(f"{project}:multiKueue.workers[{index}].stack", w.stack))
            for index, w in enumerate(multikueue.workers)))
    manager = str(multikueue.manager)
    return replace(multikueue, manager_vpc_cidr=cidr(f"{project}:multiKueue.manager", manager),
                   sibling_workers=_fellow_workers(root, stacks_dir, project=project, stack=stack, manager=manager))


def _fellow_workers(root: Section, stacks_dir: Path, *, project: str, stack: str, manager: str) -> tuple[tuple[str, str], ...]:
    """The other workers the manager's file lists; a worker it does not list is refused: the
    manager would never dispatch to it, nor replicate its datasets there."""
    workers, reason = manager_workers(stacks_dir, project=project, manager=manager)
    if workers is None or stack not in {name for name, _ in workers}:
        why = reason or f"its multiKueue.workers does not list '{stack}'"
        root.error(f"{project}:multiKueue.manager", manager, f"names a manager that does not dispatch here ({why})",
                   f"add {{stack: {stack}, region: <this region>, gpus: <training.gpuQuota total>}} to "
                   f"multiKueue.workers in stacks/Pulumi.{manager}.yaml")
        return ()
    return tuple((name, region) for name, region in workers if name != stack)


def _check_distinct_vpc_cidr(section: Section, network: NetworkConfig, *, project: str, stack: str,
                             stacks_dir: Path | None) -> tuple[str, ...]:
    """The VPC CIDR against the other environments' stack files (sibling_stacks.py); the warnings
    for files skipped."""
    if stacks_dir is None or not section.ok("vpcCidr"):
        return ()
    siblings, skipped = sibling_vpc_cidrs(stacks_dir, project=project, stack=stack, environments=ENVIRONMENTS)
    for sibling in overlapping_vpc_cidrs(network.vpc_cidr, siblings):
        section.error(section.key("vpcCidr"), str(network.vpc_cidr),
                      f"overlaps the VPC CIDR {sibling.cidr} of stack '{sibling.stack}' ({sibling.file}): environments "
                      "keep distinct ranges, or their VPCs can never be peered",
                      "pick a range that overlaps no other environment's, e.g. the next free 10.x.0.0/16")
    return tuple(skipped)


def _check_service_quotas(root: Section, quotas: ServiceQuotas, network: NetworkConfig, fabric: FabricConfig,
                          raw_pools: list[Any], node_pools: tuple[NodePoolConfig, ...], *, lustre: bool,
                          viewer: ViewerConfig, multikueue: MultiKueueConfig | None) -> None:
    """What the config drives against the account's quotas (service_quotas.py), on the parts that passed."""
    if not root.ok("serviceQuotas"):
        return
    check_node_pool_quotas(root, raw_pools, node_pools, quotas)
    check_rules_times_groups_per_interface(root, node_pools, quotas.security_group_rules)
    # Of network, the count reads only monitoringIngress: a problem elsewhere in it (an overlapping
    # vpcCidr) must not hide an over-quota group until the next run.
    if root.ok("fabric", "nodePools") and not root.errors.reported(f"{root.key('network')}.monitoringIngress"):
        check_security_group_rules(root, security_group_rules(network, fabric, node_pools, lustre=lustre, viewer=viewer,
                                                              api_peer_cidrs=api_peer_cidrs(multikueue)),
                                   quotas.security_group_rules)


def _platform_training(root: Section, raw_pools: list[Any], node_pools: tuple[NodePoolConfig, ...],
                       storage: StorageConfig, raw_secrets: Any, *, environment: str) -> TrainingConfig:
    """A platform stack's `training`, its jobs judged against the pools and storage that passed."""
    return parse_training(root.section("training"), pools=node_pools, secret_names=declared_names(raw_secrets),
                          trainer_image=_trainer_image(root, environment=environment, team=False),
                          trainer_image_cuda=_trainer_image_cuda(root),
                          invalid_pools=_unjudged_pools(root, raw_pools, node_pools),
                          storage=storage if root.ok("storage") else None, environment=environment)


def _check_platform_lenders(root: Section, training: TrainingConfig, teams: tuple[TeamQueueConfig, ...], *,
                            judged: bool) -> None:
    """The platform's own borrowed pools need a lender in its cohort: a team of its registry owning
    some of the pool (the teams' own borrowed pools are judged in config/teams.py)."""
    if judged and root.ok("training.gpuQuotaBorrowed", TEAMS_KEY):
        check_borrowed_has_a_lender(Section(root.errors, root.key("training"), root.data.get("training") or {}),
                                    training.borrowed_pools, [(f"team {row.name}", row.owned_gpu_quota) for row in teams])


def _unjudged_pools(root: Section, raw_pools: list[Any], node_pools: tuple[NodePoolConfig, ...]) -> frozenset[str] | None:
    """Pools that failed are reported already; with no readable list, no reference can be judged."""
    return failed_pool_names(raw_pools, node_pools) if isinstance(root.data.get("nodePools"), list) else None


def _load_team(root: Section, errors: ErrorLog, raw_secrets: Any, secret_keys: Collection[str] | None, *,
               project: str, stack: str, team: str, environment: str, region: str, cost_center: str,
               platform: StackConfig | None) -> TeamStackConfig:
    """Without `platform` (not read yet), every check the platform is not needed for."""
    for key in PLATFORM_ONLY_KEYS:
        if root.has(key):
            errors.append(ConfigProblem(root.key(key), f"belongs to the platform stack '{environment}'; a team stack "
                                        "creates no network, cluster, node pool or bucket",
                                        f"remove it (or change stacks/Pulumi.{environment}.yaml)."))
    root.ignore(*PLATFORM_ONLY_KEYS)  # reported just above, not as unknown keys
    reference = root.string("platformStack", f"organization/{project}/{environment}",
                            check=lambda v: None if STACK_REFERENCE.fullmatch(v) else "is not a stack reference",
                            fix=f"use <organization>/<project>/<stack>, e.g. organization/{project}/{environment}")
    if reference and reference.rsplit("/", 1)[-1] != environment:
        root.error(root.key("platformStack"), reference,
                   f"a {environment} team stack must use the {environment} platform (its cluster and data)",
                   f"use organization/{project}/{environment}")
    elif reference and reference.split("/")[1] != project:
        # Another project's platform publishes another contract: its pools, quotas and storage
        # are not what this program validates jobs against.
        root.error(root.key("platformStack"), reference,
                   f"names the project {reference.split('/')[1]}, but this program reads the platform contract of "
                   f"its own project, {project}",
                   f"use <organization>/{project}/{environment}")
    if platform is not None and region and region != platform.region:
        root.error(root.key("region"), region, f"differs from the platform's region {platform.region}",
                   f"set region: {platform.region}")

    secrets = parse_secrets(errors, root.key("secrets"), raw_secrets, secret_keys=secret_keys)
    platform_quota = _team_quota(root, team, environment=environment, platform=platform)
    training = parse_training(root.section("training"), pools=platform.node_pools if platform else (),
                              secret_names=declared_names(raw_secrets),
                              trainer_image=_trainer_image(root, environment=environment, team=True),
                              trainer_image_cuda=_trainer_image_cuda(root),
                              invalid_pools=frozenset() if platform else None,
                              storage=platform.storage if platform else None, team=True,
                              environment=environment, platform_quota=platform_quota)
    budget = parse_budget(root.section("budget"), environment=environment)
    boundary = parse_permissions_boundary(root, project=project, environment=environment, team=team)
    if platform is not None:
        _check_cleanup_image(root, training.cleanup_image or platform.training.cleanup_image, environment=environment,
                             team=True)
        boundary = _team_stack_boundary(root, boundary, platform, project=project, environment=environment, team=team)
    allow_placeholders = parse_allow(root, environment=environment)
    members = parse_members(root, region=region, platform_principals=_cluster_principals(platform))
    root.finish()
    if errors:
        raise ConfigError(errors.without_secret_values({root.key(k): v for k, v in root.data.items()}, also=raw_secrets))
    return TeamStackConfig(project=project, stack=stack, environment=environment, team=team, region=region,
                           cost_center=cost_center, platform_stack=reference, platform=platform,
                           secrets=secrets, training=training, budget=budget,
                           iam_permissions_boundary=boundary if platform else None,
                           allow_placeholders=allow_placeholders, members=members)


def _team_stack_boundary(root: Section, boundary: str | None, platform: StackConfig, *, project: str,
                         environment: str, team: str) -> str | None:
    """The boundary of the team stack's roles: the platform's (the environment's deploy role creates
    both stacks' roles), or the team's own beside it (its team deploy role creates roles only with
    that one: bootstrap/policies/teams.py). Unset: the platform's."""
    ours = platform.iam_permissions_boundary
    if not boundary or not root.ok(PERMISSIONS_BOUNDARY_KEY) or boundary == ours:
        return ours
    team_arn = team_boundary_arn(ours, project=project, environment=environment, team=team) if ours else None
    if boundary == team_arn:
        return boundary
    root.error(root.key(PERMISSIONS_BOUNDARY_KEY), boundary,
               f"is neither the platform stack's boundary ({ours or 'none'}) nor team {team}'s beside it",
               f"use {team_arn} (deploying with the team's deploy role) or remove it (the platform's)"
               if team_arn else "remove it; the team stack takes the platform's")
    return ours


def _cluster_principals(platform: StackConfig | None) -> dict[str, str]:
    """The principals the platform's cluster already has an access entry for (none before the contract was read)."""
    if platform is None:
        return {}
    return {**{arn: "cluster.readOnlyPrincipals" for arn in platform.cluster.read_only_principals},
            **{arn: "cluster.adminPrincipals" for arn in platform.cluster.admin_principals}}


def _team_quota(root: Section, team: str, *, environment: str,
                platform: StackConfig | None) -> tuple[dict[str, int], frozenset[str], str] | None:
    """The team's quota: its row of the platform's `teams` (config/teams.py), which the platform
    validated and summed with every other queue's; None before the contract was read. A team stack
    sets none of its own: the platform makes the team's ClusterQueue."""
    row_hint = f"{TEAMS_KEY}: [{{name: {team}, gpuQuota: {{<pool>: <GPUs>}}}}] in stacks/Pulumi.{environment}.yaml"
    for key in ("gpuQuota", "gpuQuotaBorrowed"):
        training = root.data.get("training")
        if isinstance(training, Mapping) and key in training:
            root.error(f"{root.key('training')}.{key}", training[key],
                       f"belongs to the platform stack '{environment}': it makes the team's ClusterQueue from its "
                       f"registry of teams", f"remove it here and set it in the team's row: {row_hint}")
    if platform is None:
        return None
    row = team_queue(platform.teams, team)
    where = f"the platform's {TEAMS_KEY}[name={team}]"
    if row is None:
        root.error(f"platform stack '{environment}' {TEAMS_KEY}", team,
                   f"lists no team {team}: the platform makes each team's ClusterQueue (its GPU quota) from this "
                   "registry, and the team's jobs are judged against it",
                   f"add the team's row, {row_hint}, and deploy the platform stack first")
        return {}, frozenset(), where
    return row.gpu_quota, row.borrowed_pools, f"{where}.gpuQuota"


def platform_stack_errors(environment: str, problems: Iterable[ConfigProblem]) -> list[ConfigProblem]:
    """The problems of a platform stack read on behalf of a team stack, each naming the stack and its file
    (and so about no key of the team stack)."""
    where = f"platform stack '{environment}' (stacks/Pulumi.{environment}.yaml)"
    return [replace(problem, where=f"{where}: {problem.where}" if problem.where else where) for problem in problems]


def _check_cleanup_image(root: Section, image: str, *, environment: str, team: bool) -> None:
    if not IMAGE_BY_DIGEST.fullmatch(image):
        root.error(root.key("trainerImage"), image or None,
                   "the checkpoint cleanup CronJob runs on the trainer image, which must be pinned by digest",
                   image_fix(environment, team=team))


def region_and_cost_center(root: Section) -> tuple[str, str]:
    """`region` and `costCenter`, read alike by the program's stacks and the bootstrap's."""
    return (root.string("region", check=region_problem, fix=REGION_FIX),
            root.string("costCenter", check=cost_center_problem, fix=COST_CENTER_FIX))


def region_problem(region: str) -> str | None:
    return None if region in ZONES else f"is not an AWS region of components/facts/regions.py (as of {REGIONS_AS_OF})"


def cost_center_problem(cost_center: str) -> str | None:
    return None if COST_CENTER.fullmatch(cost_center) else \
        "is not usable as the AWS tag value `cost-center` (1 to 256 characters)"


def _trainer_image(root: Section, *, environment: str, team: bool) -> str | None:
    """The stack's default trainer image ("" for none); None when it failed (reported here once)."""
    image = root.optional_string("trainerImage", check=lambda v: None if not v or IMAGE_BY_DIGEST.fullmatch(v) else
                                 "must be an image pinned by digest (repo@sha256:<64 hex>)",
                                 fix=image_fix(environment, team=team))
    return (image or "") if root.ok("trainerImage") else None


def _trainer_image_cuda(root: Section) -> str | None:
    """The stack's `trainerImageCuda` (default: the project's own image; Pulumi.yaml's "" stands for
    unset, as for every top-level string); None when it failed."""
    cuda = root.optional_string("trainerImageCuda", check=lambda v: None if not v else cuda_format_problem(v),
                                fix=CUDA_FORMAT_FIX)
    return (cuda or DEFAULT_IMAGE_CUDA) if root.ok("trainerImageCuda") else None


def _check_foreign_keys(raw: Mapping[str, Any], prefix: str, errors: ErrorLog) -> None:
    providers_off = raw.get("pulumi:disable-default-providers")
    if not isinstance(providers_off, list) or "*" not in providers_off:
        key = "pulumi:disable-default-providers"
        errors.append(ConfigProblem(
            key, 'must list "*"', f'add `{key}: ["*"]` to the stack file so no resource can land on an ambient AWS '
            "account or kubeconfig.", value=SECRET if errors.hides(key) else shown(providers_off)))
    for key in sorted(raw):
        if key.startswith(prefix) or key in FOREIGN_KEYS:
            continue
        if key.startswith(("aws:", "kubernetes:")):
            errors.append(ConfigProblem(
                key, "is not read: every resource uses an explicit provider built from this program's own config",
                f"remove it (set {prefix}region for the AWS region)."))
        else:
            known = [k[len(prefix):] for k in raw if k.startswith(prefix)]
            errors.append(ConfigProblem(key, "unknown key",
                                        f"remove it or use {prefix}<key>; {did_you_mean(key.split(':')[-1], known)}"))
