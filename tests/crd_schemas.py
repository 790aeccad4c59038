"""Validate custom resources (JobSet, Kueue, External Secrets, ...) against their CRD schemas.

kubernetes-validate only warns on custom kinds, so rendered custom resources are checked here
against the OpenAPI v3 schema of the CRD release we pin (schemas/crds/, copied verbatim from
upstream; see its README):

    errors = validate_custom_resource(manifest)   # [] when valid, else "path: problem" lines

The CRD file is chosen by the manifest's group and kind; the version by its apiVersion. The
schema is made strict the way `kubectl apply --validate=strict` is: an object schema that lists
its properties rejects unknown ones (a misspelt field is an error, not silently pruned), unless
it says `x-kubernetes-preserve-unknown-fields`. `x-kubernetes-int-or-string` accepts both. Other
`x-kubernetes-*` keys (list types, validations in CEL) are dropped: CEL rules are not checked.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent
# The repository's copy first (CI on a fresh clone), then the team's shared folder.
SCHEMA_DIRS = (ROOT / "schemas" / "crds", ROOT.parent / "shared" / "schemas" / "crds")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def schema_dir() -> Path:
    for directory in SCHEMA_DIRS:
        if directory.is_dir() and any(directory.glob("*.yaml")):
            return directory
    raise FileNotFoundError(f"no CRD schemas in any of {', '.join(map(str, SCHEMA_DIRS))}")


def _files() -> dict[str, list[Path]]:
    """API group -> its CRD files (files are named `<group>_<plural>.yaml`, as upstream ships them)."""
    groups: dict[str, list[Path]] = {}
    for path in sorted(schema_dir().glob("*_*.yaml")):
        groups.setdefault(path.name.split("_", 1)[0], []).append(path)
    return groups


CRD_GROUPS = frozenset(_files())


@functools.cache
def _load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_Loader)


@functools.cache
def _crd(group: str, kind: str) -> dict[str, Any] | None:
    for path in _files().get(group, []):
        crd = _load(path)
        if crd.get("kind") == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == kind:
            return crd
    return None


def strict_schema(schema: Any) -> Any:
    """The CRD schema as plain JSON Schema: x-kubernetes-* handled, unknown properties rejected."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict_schema(value) for key, value in schema.items() if not key.startswith("x-kubernetes-")}
    pattern = result.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        # Go's RE2 takes a flag group anywhere (Kueue's AdmissionCheck `kind`); Python only first.
        result["pattern"] = "(?i)^" + pattern.removeprefix("^(?i)")
    if schema.get("x-kubernetes-int-or-string"):
        result.pop("type", None)
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if ("properties" in schema and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")):
        result["additionalProperties"] = False
    return result


@functools.cache
def _validator(group: str, kind: str, version: str) -> jsonschema.protocols.Validator | str:
    crd = _crd(group, kind)
    if crd is None:
        return f"no CRD schema for kind {kind} of group {group} in {schema_dir()}"
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    if version not in versions:
        return f"{group}/{kind}: version {version} not in the CRD (has {', '.join(sorted(versions))})"
    schema = strict_schema(versions[version]["schema"]["openAPIV3Schema"])
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return validator_class(schema)


def validate_custom_resource(manifest: dict[str, Any]) -> list[str]:
    """Problems of one custom resource against its CRD schema; [] when it is valid."""
    api_version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
    group, _, version = api_version.rpartition("/")
    if not group:
        return [f"apiVersion {api_version!r} has no group: not a custom resource"]
    validator = _validator(group, kind, version)
    if isinstance(validator, str):
        return [validator]
    return [f"{'.'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
            for error in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path)))]
