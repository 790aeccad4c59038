"""Reading a stack file the way the Pulumi CLI hands it to the program.

Used by the offline plan (scripts/plan.py) and by team stacks, which validate their jobs against
the node pools and fabric of their platform stack's file in the same commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from components.config.reader import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]


def project_file(project_dir: Path = REPO_ROOT) -> dict[str, Any]:
    return yaml.safe_load((project_dir / "Pulumi.yaml").read_text())


def _qualify(key: str, project: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def _replace_secure(value: Any, key: str) -> tuple[Any, bool]:
    """Swap `secure:` ciphertexts (undecryptable without the stack's key) for placeholders."""
    if isinstance(value, dict) and set(value) == {"secure"}:
        return f"offline-placeholder-for-{key}", True
    if isinstance(value, dict):
        pairs = {k: _replace_secure(v, f"{key}.{k}") for k, v in value.items()}
        return {k: p[0] for k, p in pairs.items()}, any(p[1] for p in pairs.values())
    if isinstance(value, list):
        pairs = [_replace_secure(v, f"{key}[{i}]") for i, v in enumerate(value)]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def _encode(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def stack_config(stack: str, stack_file: Path | None = None, *, overrides: dict[str, Any] | None = None,
                 secret_overrides: dict[str, Any] | None = None,
                 project_dir: Path = REPO_ROOT) -> tuple[str, dict[str, str], list[str]]:
    """(project, fully-qualified config as the engine passes it, secret keys).

    `project_dir` holds the Pulumi.yaml: the repository root, or bootstrap/ for the bootstrap."""
    project = project_file(project_dir)
    name = project["name"]
    path = stack_file or project_dir / project.get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"
    if not path.exists():
        raise ConfigError([f"stack '{stack}': no stack file at {path}. Fix: create it "
                           "(scripts/new-team-stack writes team stacks) or check the name."])
    stack_values = (yaml.safe_load(path.read_text()) or {}).get("config") or {}

    values: dict[str, Any] = {}
    # Project-level defaults apply first, as the CLI applies them (the SDK alone does not).
    for key, spec in (project.get("config") or {}).items():
        if isinstance(spec, dict) and ("default" in spec or "value" in spec):
            values[_qualify(key, name)] = spec.get("default", spec.get("value"))
        elif not isinstance(spec, dict):
            values[_qualify(key, name)] = spec
    for key, value in stack_values.items():
        values[_qualify(key, name)] = value
    for key, value in (overrides or {}).items():
        values[_qualify(key, name)] = value

    config, secret_keys = {}, []
    for key, value in values.items():
        value, secret = _replace_secure(value, key)
        config[key] = _encode(value)
        if secret:
            secret_keys.append(key)
    for key, value in (secret_overrides or {}).items():
        key = _qualify(key, name)
        config[key] = _encode(value)
        secret_keys.append(key)
    return name, config, secret_keys
