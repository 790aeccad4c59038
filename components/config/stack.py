"""The whole stack configuration, parsed once into frozen objects before any resource exists.

`load_stack_config` is the only reader of raw config. Everything downstream receives these
typed objects; nothing else calls `pulumi.Config`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi.runtime import config as runtime_config

from components.config.cluster import ClusterConfig, parse_cluster
from components.config.fabric import FabricConfig, parse_fabric
from components.config.network import NetworkConfig, parse_network
from components.config.node_pools import NodePoolConfig, parse_node_pools
from components.config.reader import ConfigError, Section, did_you_mean
from components.config.registry import RegistryConfig, parse_registry
from components.config.secrets import SecretsConfig, parse_secrets
from components.config.storage import StorageConfig, parse_storage
from components.config.training import TrainingConfig, parse_training

ENVIRONMENTS = ("dev", "staging", "prod")
TEAM_STACK = re.compile(r"^team-(?P<team>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-(?P<env>dev|staging|prod)$")
REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
COST_CENTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:/=+@-]{0,254}$")
# Config keys of other namespaces that this program knowingly accepts.
FOREIGN_KEYS = ("pulumi:disable-default-providers", "pulumi:tags")


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

    @property
    def name_prefix(self) -> str:
        """Prefix of every physical name: two environments can never collide."""
        return f"{self.project}-{self.environment}"

    @property
    def cluster_name(self) -> str:
        return self.name_prefix

    @property
    def training_namespace(self) -> str:
        return f"team-{self.team}" if self.team else f"training-{self.environment}"

    @property
    def system_pool(self) -> NodePoolConfig:
        """The pool for CoreDNS and controllers: the first CPU pool that never scales to zero."""
        return next(p for p in self.node_pools if not p.gpu and p.min_size >= 1)


def stack_kind(stack: str) -> tuple[str | None, str | None]:
    """(team, environment) implied by a stack name; (None, None) for an unknown form."""
    if stack in ENVIRONMENTS:
        return None, stack
    match = TEAM_STACK.match(stack)
    if match:
        return match["team"], match["env"]
    return None, None


def read_raw_config() -> dict[str, Any]:
    """Every config value of the running stack, structured values decoded from their JSON form."""
    return decode_raw_config({**runtime_config.get_config_env(), **runtime_config.CONFIG.get()})


def decode_raw_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The engine passes structured values as JSON text; decode them, leave plain strings be."""
    return {key: _decode(value) for key, value in raw.items()}


def _decode(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def read_secret_keys(raw: Mapping[str, Any]) -> set[str]:
    """The keys of `raw` the engine marks secret (set with `pulumi config set --secret`)."""
    return {key for key in raw if runtime_config.is_config_secret(key)}


def load_stack_config(raw: Mapping[str, Any], *, project: str, stack: str,
                      secret_keys: Collection[str] | None = None) -> StackConfig:
    """Parse and validate fully-qualified config (`project:key` -> decoded value).

    `secret_keys` (None: unknown) lets the model reject secrets stored in plain text.
    Raises ConfigError listing every problem found.
    """
    errors: list[str] = []
    prefix = f"{project}:"
    own = {key[len(prefix):]: value for key, value in raw.items() if key.startswith(prefix)}
    # Secret values must never reach Section's generic messages (they print the value): the
    # secrets parser reads its key itself.
    raw_secrets = own.pop("secrets", None)
    _check_foreign_keys(raw, prefix, errors)

    root = Section(errors, project, own, separator=":")
    team, implied_env = stack_kind(stack)
    if implied_env is None:
        errors.append(
            f"stack '{stack}': unknown stack name. Fix: name platform stacks dev, staging or prod "
            "and team stacks team-<team>-<env> (e.g. team-vision-prod)."
        )
    environment = root.string("environment", choices=ENVIRONMENTS)
    if implied_env and environment and environment != implied_env:
        root.error(root.key("environment"), environment,
                   f"differs from the stack name '{stack}', which implies '{implied_env}'",
                   f"set environment: {implied_env}, or select the stack you meant")
    region = root.string("region", check=lambda v: None if REGION.match(v) else "is not an AWS region name",
                         fix="use a region name like us-east-1")
    cost_center = root.string("costCenter", check=lambda v: None if COST_CENTER.match(v) else "is not a valid AWS tag value",
                              fix="use letters, digits, spaces and . _ : / = + - @")

    # Environment rules follow the stack name: a prod stack gets prod rules even when its
    # `environment` key is wrong (that mismatch is reported above).
    env = implied_env or environment or "dev"
    network = parse_network(root.section("network"), region=region, environment=env)
    fabric = parse_fabric(root.section("fabric", {}))
    cluster = parse_cluster(root.section("cluster"), environment=env)
    node_pools = parse_node_pools(root, root.items("nodePools"), network_zones=network.availability_zones)
    storage = parse_storage(root.section("storage", {}), environment=env)
    registry = parse_registry(root.section("registry", {}))
    secrets = parse_secrets(errors, root.key("secrets"), raw_secrets,
                            stored_as_secret=None if secret_keys is None else root.key("secrets") in secret_keys)
    training = parse_training(root.section("training", {}), pools=node_pools, secret_names=secrets.names,
                              trainer_image=root.string("trainerImage", None))
    root.finish()

    if errors:
        raise ConfigError(errors)
    return StackConfig(
        project=project,
        stack=stack,
        environment=environment,
        team=team,
        region=region,
        cost_center=cost_center,
        network=network,
        fabric=fabric,
        cluster=cluster,
        node_pools=node_pools,
        storage=storage,
        registry=registry,
        secrets=secrets,
        training=training,
    )


def _check_foreign_keys(raw: Mapping[str, Any], prefix: str, errors: list[str]) -> None:
    providers_off = raw.get("pulumi:disable-default-providers")
    if not isinstance(providers_off, list) or "*" not in providers_off:
        errors.append(
            f"pulumi:disable-default-providers: must list \"*\" (got {providers_off!r}). Fix: add "
            "`pulumi:disable-default-providers: [\"*\"]` to the stack file so no resource can land on "
            "an ambient AWS account or kubeconfig."
        )
    for key in sorted(raw):
        if key.startswith(prefix) or key in FOREIGN_KEYS:
            continue
        if key.startswith(("aws:", "kubernetes:")):
            errors.append(
                f"{key}: is not read: every resource uses an explicit provider built from this "
                f"program's own config. Fix: remove it (set {prefix}region for the AWS region)."
            )
        else:
            known = [k[len(prefix):] for k in raw if k.startswith(prefix)]
            errors.append(f"{key}: unknown key. Fix: remove it or use {prefix}<key>; {did_you_mean(key.split(':')[-1], known)}")
