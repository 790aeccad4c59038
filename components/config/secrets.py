"""The `secrets` map: secret name -> value, set with `pulumi config set --path --secret`.

    pulumi config set --stack dev --path --secret 'secrets.wandb-api-key' <value>

Each entry becomes an AWS Secrets Manager secret under the environment's secrets key, is synced
by External Secrets into the Kubernetes Secret `training-secrets` (key = the name) and reaches
the trainer as an env var (`wandb-api-key` -> `WANDB_API_KEY`).

Values are wrapped in `pulumi.Output.secret` here, at the only place that reads them, so they
stay secret in state, plan output and logs. No error message below ever includes a value: the
generic `Section.error` prints `got <value>`, so this module reports problems itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

# A DNS-1123 label: valid as a Kubernetes Secret key, inside a Secrets Manager name, and it
# maps one-to-one onto an env var name.
SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SET_COMMAND = "pulumi config set --path --secret 'secrets.{name}' <value>"


@dataclass(frozen=True)
class SecretEntry:
    name: str
    value: pulumi.Output[str] = field(repr=False, compare=False)

    @property
    def env_var(self) -> str:
        """The env var the trainer reads it from: wandb-api-key -> WANDB_API_KEY."""
        return env_var_name(self.name)


@dataclass(frozen=True)
class SecretsConfig:
    entries: tuple[SecretEntry, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.entries)


def env_var_name(secret_name: str) -> str:
    return secret_name.upper().replace("-", "_")


def parse_secrets(errors: list[str], key: str, raw: Any, *, stored_as_secret: bool | None = None) -> SecretsConfig:
    """Parse the `secrets` map. `stored_as_secret` says whether the engine marked the key secret
    (None when unknown, e.g. in pure config tests): plain-text values in a stack file are an error."""
    if raw is None:
        return SecretsConfig()
    if not isinstance(raw, Mapping):
        errors.append(f"{key}: must be a mapping of secret names to values (value not shown). "
                      f"Fix: set each secret with `{SET_COMMAND.format(name='<name>')}`.")
        return SecretsConfig()

    entries = []
    for name, value in sorted(raw.items(), key=lambda item: str(item[0])):
        entry_key = f"{key}.{name}"
        if not isinstance(name, str) or not SECRET_NAME.match(name):
            errors.append(f"{entry_key}: is not a valid secret name (lowercase letters, digits and '-', at most 63, "
                          f"e.g. wandb-api-key). Fix: rename it.")
            continue
        if value is None or value == "":
            errors.append(f"{entry_key}: is declared without a value. Fix: run `{SET_COMMAND.format(name=name)}`, "
                          "or remove the entry.")
            continue
        if not isinstance(value, str):
            errors.append(f"{entry_key}: must be a string (value not shown). "
                          f"Fix: run `{SET_COMMAND.format(name=name)}`.")
            continue
        entries.append(SecretEntry(name=name, value=pulumi.Output.secret(value)))

    if entries and stored_as_secret is False:
        errors.append(f"{key}: values are stored in plain text in the stack file (values not shown). "
                      f"Fix: remove them and set each with `{SET_COMMAND.format(name='<name>')}`; "
                      "rotate any value that was committed.")
    return SecretsConfig(entries=tuple(entries))
