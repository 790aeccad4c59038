"""No plaintext secret in any resource input.

What a policy can and cannot see: the engine hands a policy every input with Pulumi secrets
already decrypted (pulumi-policy's Analyze deserialises without keeping the secret marker), so
"is this value marked secret" cannot be asked here. The config model asks it instead: it rejects
a `secrets` value not set with `pulumi config set --secret` (components/config/secrets.py), and the
provider schema keeps a Secrets Manager `secretString` secret in state. This policy catches the
other ways a credential reaches an input:

- a credential-shaped literal anywhere (AWS access keys, private keys, GitHub/Hugging Face/Slack
  tokens, passwords in URLs; shapes from gitleaks' default rules, config/gitleaks.toml), except in
  the value fields of Secrets Manager, which exist to hold one;
- a container env var named like a credential with a literal `value` instead of `valueFrom`
  (a secretKeyRef to the Secret External Secrets syncs);
- a Kubernetes Secret with inline data (values belong in Secrets Manager, synced by External
  Secrets, never in Pulumi inputs) and ConfigMap keys named like credentials.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import (
    ResourceValidationArgs,
    Severity,
)

from gpu_training_policy.resources import Report, describe, is_list, is_set, known, known_items, strings
from gpu_training_policy.rules import resource_rule

# Fields whose job is to hold a secret value: the engine shows them decrypted.
SECRET_VALUE_FIELDS = {
    "aws:secretsmanager/secretVersion:SecretVersion": ("secretString", "secretBinary"),
}
K8S_SECRET = "kubernetes:core/v1:Secret"
K8S_CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
CREDENTIAL_SHAPES = {
    "an AWS access key id": re.compile(r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b"),
    "a private key": re.compile(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"),
    "a GitHub token": re.compile(r"\b(?:gh[pousr]_[0-9A-Za-z]{36}|github_pat_\w{82})\b"),
    "a Hugging Face token": re.compile(r"\bhf_[A-Za-z]{34}\b"),
    "a Slack token": re.compile(r"\bxox[abposr]-[0-9A-Za-z-]{10,}"),
    "a password in a URL": re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s:@]+@"),
}
# Env var names that say "credential": whole underscore-separated words, or word pairs...
CREDENTIAL_WORDS = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY"}
CREDENTIAL_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"), ("AUTH", "TOKEN")}
# ...unless the last word says the value only locates or describes one (TOKEN_DIR, PASSWORD_FILE).
REFERENCE_WORDS = {"DIR", "PATH", "FILE", "FILENAME", "URL", "URI", "ENDPOINT", "HOST", "NAME", "TYPE", "ID", "ARN",
                   "REGION", "TTL"}


def names_credential(name: str) -> bool:
    words = re.split(r"[_.\-]", name.upper())
    if words[-1] in REFERENCE_WORDS:
        return False
    return bool(CREDENTIAL_WORDS & set(words)) or any(pair in CREDENTIAL_PAIRS for pair in itertools.pairwise(words))


def credential_shape(text: str) -> str | None:
    for what, pattern in CREDENTIAL_SHAPES.items():
        if pattern.search(text):
            return what
    return None


def _literal_env(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(path, name) of every container env entry that sets a credential-named var to a literal."""
    for key, item in known_items(value):
        child = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
        if key == "env" and is_list(item):
            for index, entry in known_items(item):
                name = known(entry, "name")
                if isinstance(name, str) and names_credential(name) and known(entry, "value"):
                    yield f"{child}[{index}]", name
        else:
            yield from _literal_env(item, child)


def _user_data(props: Mapping[str, Any]) -> str:
    """Launch template user data is base64 text; scan what it decodes to."""
    raw = known(props, "userData")
    if not isinstance(raw, str):
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return raw


@resource_rule(Severity.CRITICAL)
def no_plaintext_secrets(args: ResourceValidationArgs, report: Report) -> None:
    """No credential in plain text in any resource input: Secrets Manager values are set as Pulumi secrets and reach
    containers through secretKeyRef."""
    what = describe(args.name, args.resource_type)
    exempt = SECRET_VALUE_FIELDS.get(args.resource_type, ())
    for path, text in strings(args.props):
        if path.split(".")[0].split("[")[0] in exempt:
            continue
        shape = credential_shape(text)
        if shape:
            report(f"{what} has {shape} in plain text at {path}. Put it in Secrets Manager "
                   "(pulumi config set --path --secret 'secrets.<name>') and reference it.")
    if args.resource_type == LAUNCH_TEMPLATE:
        shape = credential_shape(_user_data(args.props))
        if shape:
            report(f"{what} has {shape} in plain text in its user data.")
    if not args.resource_type.startswith("kubernetes:"):
        return
    for path, name in _literal_env(args.props):
        report(f"{what} sets {name} to a literal value at {path}. Read it from the synced Secret with "
               "valueFrom.secretKeyRef.")
    if args.resource_type == K8S_SECRET and (is_set(args.props, "data") or is_set(args.props, "stringData")):
        report(f"{what} carries secret data in its inputs. Keep the value in Secrets Manager and let External "
               "Secrets create the Secret.")
    if args.resource_type == K8S_CONFIG_MAP:
        for key, _ in known_items(known(args.props, "data", {})):
            if names_credential(str(key)):
                report(f"{what} holds {key} in a ConfigMap; credentials belong in a Secret.")


POLICIES = (no_plaintext_secrets,)
