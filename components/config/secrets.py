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
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi

from components.config.reader import SECRET, ConfigProblem

# A DNS-1123 label starting with a letter: valid as a Kubernetes Secret key, inside a Secrets
# Manager name, and it maps one-to-one onto an env var name of the project's own rule (training.py
# ENV_NAME, POSIX: no leading digit; a shell cannot read `$1_TOKEN`).
SECRET_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
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


def surrounding_whitespace(value: str) -> str:
    """What surrounds `value` ("" when nothing), in words that never show the value. At `pulumi up`
    the engine hands the program every secret decrypted, as text (the secrets only become Outputs
    here), so the value is judged before any resource exists: refused, not trimmed, since a trimmed
    value would differ from what the stack's config holds and `pulumi config get` shows.

    A multi-line value (a PEM key, a JSON document) may end with one newline: its file does, and
    what reads it expects one."""
    body = value.removesuffix("\n").removesuffix("\r")
    if "\n" in body and body == body.rstrip() and value.lstrip() == value:
        return ""
    ends = [side for side, stripped in (("begins", value.lstrip()), ("ends", value.rstrip())) if stripped != value]
    if not ends:
        return ""
    newline = value.endswith(("\n", "\r"))
    what = "a newline" if newline and ends == ["ends"] else "whitespace (spaces, tabs or newlines)"
    return f"{' and '.join(ends)} with {what}"


def declared_names(raw: Any) -> tuple[str, ...]:
    """Every name the `secrets` map declares, valid or not: a job may refer to any of them without a
    second error (a bad entry is reported once, by parse_secrets)."""
    return tuple(sorted(name for name in raw if isinstance(name, str))) if isinstance(raw, Mapping) else ()


def parse_secrets(errors: list[ConfigProblem], key: str, raw: Any, *,
                  secret_keys: Collection[str] | None = None) -> SecretsConfig:
    """Parse the `secrets` map. `secret_keys` are the config keys stored encrypted (None when
    unknown, e.g. in pure config tests): the whole map (`pulumi up` marks a key secret as a whole)
    or single entries (the offline plan sees each one). A plain-text value is an error."""
    if raw is None:
        return SecretsConfig()
    if not isinstance(raw, Mapping):
        errors.append(ConfigProblem(key, "must be a mapping of secret names to values",
                                    f"set each secret with `{SET_COMMAND.format(name='<name>')}`.", value=SECRET))
        return SecretsConfig()

    entries = []
    for name, value in sorted(raw.items(), key=lambda item: str(item[0])):
        entry_key = f"{key}.{name}"
        if not isinstance(name, str) or not SECRET_NAME.fullmatch(name):
            errors.append(ConfigProblem(entry_key, "is not a valid secret name (lowercase letters, digits and '-', "
                                        "starting with a letter, at most 63, e.g. wandb-api-key)", "rename it."))
            continue
        if value is None or value == "":
            errors.append(ConfigProblem(entry_key, "is declared without a value",
                                        f"run `{SET_COMMAND.format(name=name)}`, or remove the entry."))
            continue
        if secret_keys is not None and key not in secret_keys and entry_key not in secret_keys:
            errors.append(ConfigProblem(entry_key, "is stored in plain text in the stack file",
                                        f"remove it, run `{SET_COMMAND.format(name=name)}`, and rotate the value: it may "
                                        "have been committed.", value=SECRET))
            continue
        if not isinstance(value, str):
            errors.append(ConfigProblem(entry_key, "must be a string", f"run `{SET_COMMAND.format(name=name)}`.",
                                        value=SECRET))
            continue
        padding = surrounding_whitespace(value)
        if padding:
            errors.append(ConfigProblem(entry_key, f"{padding}: a token or password never does, and the trainer "
                                        "would send it as stored (an HTTP header refuses a newline, a login compares "
                                        "byte for byte); a trailing newline is what `... < file` or `cat file | ...` "
                                        "stores", "set it again without it: "
                                        f"`printf %s \"$VALUE\" | {SET_COMMAND.format(name=name).removesuffix(' <value>')}` "
                                        "(a file's content: `printf %s \"$(cat file)\" | ...`, as $(...) drops trailing "
                                        "newlines)", value=SECRET))
            continue
        entries.append(SecretEntry(name=name, value=pulumi.Output.secret(value)))
    return SecretsConfig(entries=tuple(entries))
