"""How the policies read what the engine hands them: property bags, stacks, documents, tags.

The engine passes inputs as camelCase property bags wrapped in pulumi-policy's proxies: Mappings
and Sequences (not dicts and lists) whose unknown values (preview, before a resource exists)
raise `UnknownValueError` when read. The policy SDK turns that error into an advisory "can't run
during preview" note, which is right when a value decides the outcome. `has` never reads a value,
so checking that a property is present never raises (nor does `is_set`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import PolicyProviderResource
from pulumi_policy.proxy import UnknownValueError

ENVIRONMENTS = ("dev", "staging", "prod")
# Stack names as the program's config model defines them (components/config/stack.py).
TEAM_STACK = re.compile(r"^team-(?P<team>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-(?P<env>dev|staging|prod)$")
# A platform stack of an environment in a further region, `<env>-<site>` such as prod-usw2
# (components/config/sibling_stacks.py REGIONAL_STACK): a platform stack of that environment.
REGIONAL_STACK = re.compile(r"^(?P<env>dev|staging|prod)-(?P<site>[a-z][a-z0-9]{1,7})$")
# The tags cost allocation reads (components/common/tags.py puts them in the provider's default
# tags); a team stack adds `team`.
COST_TAGS = ("project", "environment", "stack", "cost-center")
TEAM_TAG = "team"
# The bootstrap program is the project `<project>-bootstrap` (bootstrap/Pulumi.yaml).
BOOTSTRAP_PROJECT_SUFFIX = "-bootstrap"
# What a validation is handed to report with: `report(message)` or `report(message, urn)`. The
# SDK types ReportViolation with a required URN, but the function it passes defaults it to None.
Report = Callable[..., None]


# --- property bags --------------------------------------------------------------------------

def has(props: Any, key: str) -> bool:
    """True when `key` is set (known or not). Iterating a proxy reads keys, never values."""
    return isinstance(props, Mapping) and key in list(iter(props))


def is_set(props: Any, key: str) -> bool:
    """True when `key` has a value: a known, non-empty one, or one not known yet (computed during
    the deployment, so it will have one). Stack policies read outputs, where the provider reports
    every attribute, unset ones as null."""
    if not has(props, key):
        return False
    try:
        value = props[key]
    except UnknownValueError:
        return True
    return value is not None and value != "" and not ((is_list(value) or isinstance(value, Mapping)) and len(value) == 0)


def get(props: Any, key: str, default: Any = None) -> Any:
    """The value of `key`, `default` when absent; raises UnknownValueError when it is unknown."""
    return props[key] if has(props, key) else default


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def as_list(value: Any) -> list[Any]:
    """IAM and AWS APIs accept one item or a list of them; None is no item."""
    if value is None:
        return []
    return list(value) if is_list(value) else [value]


def known(props: Any, key: str, default: Any = None) -> Any:
    """The value of `key`, or `default` when it is absent or not known yet (during a preview).
    For checks on literals: a value computed during the deployment is not one."""
    try:
        return get(props, key, default)
    except UnknownValueError:
        return default


def known_items(container: Any) -> Iterator[tuple[Any, Any]]:
    """(key, value) of a Mapping, (index, item) of a list; values not known yet are left out."""
    keys = list(iter(container)) if isinstance(container, Mapping) else range(len(container)) if is_list(container) else []
    for key in keys:
        try:
            yield key, container[key]
        except UnknownValueError:
            continue


def strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every known string leaf of a property bag, with its path (`spec.containers[0].env[1].value`)."""
    if isinstance(value, str):
        yield path, value
        return
    for key, item in known_items(value):
        yield from strings(item, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key))


def truthy(value: Any) -> bool:
    """Booleans of the AWS provider arrive as bools or, for some nested blocks, as "true"/"false"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def json_document(value: Any) -> Mapping[str, Any] | None:
    """An IAM/bucket/key policy: the provider takes JSON text; a Mapping is accepted too."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return None


def statements(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if document is None:
        return []
    return [s for s in as_list(document.get("Statement")) if isinstance(s, Mapping)]


# --- which stack ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Stack:
    """The stack a resource belongs to, from its URN and its AWS provider's default tags."""

    name: str
    project: str
    environment: str | None
    team: str | None

    @property
    def is_team(self) -> bool:
        return self.team is not None

    @property
    def kind(self) -> str:
        """`team`, `bootstrap` (the account's bootstrap project, which serves every environment) or
        `platform` (an environment's stack: `<env>` or a regional sibling `<env>-<site>`, whose
        environment its name gives, tag or no tag); allowed_types.py keys its table by it."""
        if self.is_team:
            return "team"
        if self.project.endswith(BOOTSTRAP_PROJECT_SUFFIX) or self.name == "bootstrap":
            return "bootstrap"
        return "platform"

    @property
    def is_prod(self) -> bool:
        return self.environment == "prod"

    @property
    def team_namespace(self) -> str:
        return f"team-{self.team}"

    @property
    def team_name_prefix(self) -> str:
        """Physical names of a team's resources (IAM roles): components/identity/policies.py."""
        return f"{self.project}-{self.environment}-team-{self.team}-"

    @property
    def team_secret_prefix(self) -> str:
        """Secrets Manager names of a team: components/secrets/store.py secret_name."""
        return f"{self.project}/{self.environment}/teams/{self.team}/"

    @property
    def team_access_point_root(self) -> str:
        """The team's directory of the checkpoint file system (components/data/file_system.py)."""
        return f"/workloads/{self.team_namespace}"

    @property
    def team_object_prefix(self) -> str:
        """The team's part of the artifacts bucket (components/team.py artifacts_prefix)."""
        return f"teams/{self.team}/"


def stack_kind(name: str) -> tuple[str | None, str | None]:
    """(team, environment) a stack name implies; (None, None) for another form. An environment's
    stacks are `<env>` and its regional siblings `<env>-<site>`; a team's `team-<team>-<env>`."""
    if name in ENVIRONMENTS:
        return None, name
    if match := REGIONAL_STACK.match(name):
        return None, match["env"]
    if match := TEAM_STACK.match(name):
        return match["team"], match["env"]
    return None, None


def stack_of(urn: str, provider: PolicyProviderResource | None = None) -> Stack:
    """`urn:pulumi:<stack>::<project>::<type>::<name>`; the provider's `team` and `environment`
    tags count only where the name says neither, so a team stack is recognised by its name or,
    misnamed, by its tag. Where the name says them, the name decides: a `dev` stack tagged
    `environment: prod` is still dev to `no-prod-data-outside-prod`, a regional `prod-usw2` is prod
    on every resource (the ones on its Kubernetes provider, which carries no tags, included), and
    a resource of `team-vision-prod` is team vision's on a second provider tagged `team: nlp` too:
    a tag is the stack's to write, so it cannot move a resource into another team's tenancy."""
    parts = urn.removeprefix("urn:pulumi:").split("::")
    name, project = parts[0], parts[1] if len(parts) > 1 else ""
    team, environment = stack_kind(name)
    tags = provider_default_tags(provider)
    return Stack(name=name, project=project, environment=environment or tags.get("environment"),
                 team=team or tags.get(TEAM_TAG))


def provider_default_tags(provider: PolicyProviderResource | None) -> dict[str, str]:
    """The `defaultTags.tags` of an AWS provider. Provider inputs carry nested objects as JSON
    text (the Python SDK serialises provider arguments so); a Mapping is accepted as well."""
    if provider is None or not provider.resource_type.startswith("pulumi:providers:aws"):
        return {}
    raw = get(provider.props, "defaultTags")
    default_tags = json_document(raw) or {}
    tags = default_tags.get("tags")
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, Mapping) else {}


def package_of(resource_type: str) -> str:
    return resource_type.split(":", 1)[0]


def describe(name: str, resource_type: str) -> str:
    """How a message names a resource: `fabric-from-anywhere (aws:vpc/...:SecurityGroupIngressRule)`."""
    return f"{name} ({resource_type})"
