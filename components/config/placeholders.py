"""Example values still in a stack: the one table of every placeholder kind the repository's stack
files ship with, and pure functions that list the ones present in a stack's config.

The stack files are examples a reader can plan offline: the account, the registry digest, the alert
addresses, the reservation are stand-ins. Each stand-in is a value its issuer reserved for examples
(an AWS documentation account, an RFC 2606 domain, an RFC 5737 network, a fictional phone number),
so a pattern recognises it without guessing at real values. The offline plan lists what is found
once per stack and carries on; a real `pulumi up` or `pulumi preview` refuses them before any
resource exists (`refuse_or_warn`), unless a dev stack sets `placeholders.allow: true`.
docs/first-deploy.md is the checklist of these values, in the order they can be replaced;
tests/test_placeholders.py holds it to this table.

A finding names the key and the kind of value, never the value: a secret's value is never read
here (secret keys are skipped; a placeholder secret is found in the stack file's `secure:` text,
which is not the secret).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi.runtime import mocks, settings

from components.config.reader import ConfigError, ConfigProblem, Section
from components.config.training import image_fix

ALLOW_KEY = "placeholders"
FIRST_DEPLOY_DOC = "docs/first-deploy.md"

# AWS documentation's example accounts: 111122223333 (the IAM, EKS and SDK references' ARNs, e.g.
# `arn:aws:iam::111122223333:role/Admin` in the AWS SDK for Kotlin reference, PostCallAnalyticsSettings
# dataAccessRoleArn), 123456789012 (IAM User Guide, "IAM identifiers"; the account this project's
# offline plan answers with) and 444455556666 (the second account of the cross-account examples).
_EXAMPLE_ACCOUNT = re.compile(r"(?<![0-9])(?:111122223333|123456789012|444455556666)(?![0-9])")
# The digest the stack files pin before `scripts/build-image` printed a real one: no image has it.
_ZERO_DIGEST = re.compile(r"@sha256:0{64}(?![0-9a-f])")
# RFC 2606 section 3: example.com, example.net, example.org are reserved second-level domains;
# section 2: .test, .example, .invalid and .localhost are reserved top-level domains
# (https://www.rfc-editor.org/rfc/rfc2606).
_EXAMPLE_DOMAINS = ("example.com", "example.net", "example.org")
_RESERVED_TLDS = ("test", "example", "invalid", "localhost")
_EMAIL = re.compile(r"[^@\s/]+@(?P<domain>[A-Za-z0-9.-]+)")
# Fictional phone numbers: NANP 555-0100 to 555-0199 in any area code are set aside for fiction
# and examples (NANPA's 555 line number guidelines; e.g. the Splunk style guide, "Phone numbers",
# help.splunk.com); Ofcom's drama range for UK mobiles is 07700 900000 to 900999 (Ofcom, "TV and
# radio drama telephone numbers").
_FICTIONAL_PHONE = re.compile(r"\+1[2-9][0-9]{2}55501[0-9]{2}|\+447700900[0-9]{3}")
# RFC 5737 (TEST-NET-1/2/3, https://www.rfc-editor.org/rfc/rfc5737) and RFC 3849 (IPv6,
# https://www.rfc-editor.org/rfc/rfc3849): address blocks for documentation, never routed.
_DOCUMENTATION_NETWORKS = tuple(ipaddress.ip_network(net) for net in
                                ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
# AWS resource ids as the EC2 documentation writes examples: the ascending hex run
# (`i-1234567890abcdef0`, `cr-0123456789abcdef0`) or an `EXAMPLE` suffix (`cr-1234abcd56EXAMPLE`).
_EXAMPLE_RESOURCE_ID = re.compile(
    r"(?<![A-Za-z0-9])[a-z]{1,20}-(?:0123456789abcdef0?|1234567890abcdef0?|[0-9a-f]{0,17}EXAMPLE)(?![A-Za-z0-9])")
# Example GitHub owners: this repository's own `example-org`, GitHub Docs' `octo-org`, and the
# `OWNER/REPO` spelling of GitHub's reference pages.
_EXAMPLE_REPOSITORY = re.compile(r"(?:example-org|example|octo-org|owner|your-org)/[A-Za-z0-9._-]+", re.IGNORECASE)
# The text the stack files put in a `secure:` value to say which secrets a stack needs. No secrets
# provider writes it (passphrase ciphertexts start with `v1:`, KMS ones are base64), so `pulumi up`
# cannot decrypt it and stops before the program runs; only the offline plan, which replaces every
# `secure:` value, can list it.
_PLACEHOLDER_CIPHERTEXT_START = "placeholder"


def _is_example_email(text: str) -> bool:
    match = _EMAIL.fullmatch(text)
    if not match:
        return False
    domain = match["domain"].lower().rstrip(".")
    return (domain in _EXAMPLE_DOMAINS or domain.endswith(tuple(f".{d}" for d in _EXAMPLE_DOMAINS))
            or domain.rsplit(".", 1)[-1] in _RESERVED_TLDS)


def _is_documentation_network(text: str) -> bool:
    if not any(mark in text for mark in ".:") or not re.fullmatch(r"[0-9A-Fa-f.:/]+", text):
        return False
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    # Inside a documentation block, not merely overlapping one: a real, routed /16 around one is the user's.
    return any(network.version == doc.version and network.subnet_of(doc)  # pyright: ignore[reportArgumentType]
               for doc in _DOCUMENTATION_NETWORKS)


BOOTSTRAP_KEYS = "bootstrap:"
"""How `PlaceholderKind.keys` marks a key of the bootstrap project (bootstrap/Pulumi.yaml)."""


@dataclass(frozen=True)
class PlaceholderKind:
    """One kind of example value: how it is recognised, where the stack files have it, the fix."""

    name: str
    """Short id, as docs/first-deploy.md's checklist names it."""
    what: str
    """The value as a message describes it (never the value a user typed)."""
    keys: tuple[str, ...]
    """Where the repository's stack files carry it (keys.py's spelling; bootstrap keys under `bootstrap:`)."""
    why: str
    fix: str
    matches: Callable[[str], bool]
    secret_file_only: bool = False
    """Found only in a stack file's `secure:` text (offline): a real run never gets this far."""


PLACEHOLDERS: tuple[PlaceholderKind, ...] = (
    PlaceholderKind(
        "example-github-repository", "an example GitHub repository (example-org/...)",
        ("bootstrap:github.repository", "bootstrap:teams.*.repository"),
        "the CI roles would trust the workflows of a repository that is not yours",
        "write your repository as OWNER/REPO, as it appears in its URL",
        lambda text: bool(_EXAMPLE_REPOSITORY.fullmatch(text))),
    PlaceholderKind(
        "aws-example-account", "an account id AWS documentation uses (111122223333, 123456789012, ...)", (
            "iamPermissionsBoundary", "cluster.adminPrincipals[]", "cluster.readOnlyPrincipals[]", "members[]", "trainerImage",
            "bootstrap:github.oidcProviderArn", "bootstrap:teams.*.members[]"),
        "AWS reserves it for examples: no role, policy or registry of yours is in it",
        "put your account's id (aws sts get-caller-identity --query Account) in its place",
        lambda text: bool(_EXAMPLE_ACCOUNT.search(text))),
    PlaceholderKind(
        "documentation-network", "an RFC 5737 documentation network (198.51.100.0/24)", ("cluster.publicAccessCidrs[]",),
        "documentation addresses are never routed: nobody could reach the API from there",
        "use your office or VPN egress CIDR, or set endpointPublicAccess: false",
        _is_documentation_network),
    PlaceholderKind(
        "example-email", "an RFC 2606 example address (@example.com)", ("observability.alertEmails[]",),
        "reserved domains receive no mail: alarms and budget alerts would reach nobody",
        "use the on-call team's address (each must confirm the SNS subscription once)", _is_example_email),
    PlaceholderKind(
        "fictional-phone-number", "a fictional phone number (+1 NPA 555-01xx)", ("observability.alertSms[]",),
        "the number is set aside for fiction: nobody would get the SMS",
        "use the on-call phone in E.164 form (+<country><number>)",
        lambda text: bool(_FICTIONAL_PHONE.fullmatch(re.sub(r"[\s()-]", "", text)))),
    PlaceholderKind(
        "example-resource-id", "an AWS example resource id (cr-0123456789abcdef0)", ("nodePools[].capacityReservationId",),
        "no reservation has it: the pool's nodes would never launch",
        "take the id and its AZ ID from aws ec2 describe-capacity-reservations (or describe-capacity-block-offerings)",
        lambda text: bool(_EXAMPLE_RESOURCE_ID.search(text))),
    PlaceholderKind(
        "placeholder-secret", "a placeholder where the secret's ciphertext belongs", ("secrets.<name>",),
        "it is no ciphertext: `pulumi up` cannot decrypt it and stops before the program runs",
        "pulumi config set --stack <stack> --path --secret 'secrets.<name>' <value>",
        lambda text: text.casefold().startswith(_PLACEHOLDER_CIPHERTEXT_START), secret_file_only=True),
    PlaceholderKind(
        "zero-image-digest", "the all-zero image digest (sha256:000...)", ("trainerImage", "training.jobs[].image"),
        "no image has it: every job and the checkpoint cleanup would fail to pull",
        "run scripts/build-image <stack> once the stack's registry exists and set the trainerImage it prints",
        lambda text: bool(_ZERO_DIGEST.search(text))),
)
"""In the order docs/first-deploy.md replaces them: the bootstrap's first, the image last (its
registry is made by the stack's own first `pulumi up`)."""


@dataclass(frozen=True)
class Placeholder:
    key: str
    """The full path of the value, as messages spell it (`gpu-training:cluster.adminPrincipals[0]`)."""
    kind: PlaceholderKind

    def __str__(self) -> str:
        return f"{self.key}: {self.kind.what}"


def _values(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(path, value) of `value` and of every value inside it, paths as `pulumi config set --path` writes them."""
    yield path, value
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from _values(f"{path}.{name}", item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _values(f"{path}[{index}]", item)


def _strings(path: str, value: Any) -> Iterator[tuple[str, str]]:
    """(path, text) of every string inside `value`."""
    return ((inner, text) for inner, text in _values(path, value) if isinstance(text, str))


def _within(path: str, key: str) -> bool:
    return path == key or path.startswith((f"{key}.", f"{key}["))


def table_key(path: str, project: str) -> str:
    """A value's path as `PlaceholderKind.keys` spells it: without the project, list items as `[]`,
    a team of the bootstrap's registry as `*` (teams.<team>.repository)."""
    return re.sub(r"^teams\.[^.]+\.", "teams.*.", re.sub(r"\[\d+\]", "[]", path.removeprefix(f"{project}:")))


def _kinds_at(key: str) -> list[PlaceholderKind]:
    """The kinds whose example values sit at `key` (a table key). Only there: the same text in a
    free-form value (a job's env `HF_REPO: example/llama`, a real /16 around a documentation /24)
    is the user's own, and a real deploy must not refuse it."""
    return [kind for kind in PLACEHOLDERS if not kind.secret_file_only
            and key in {known.removeprefix(BOOTSTRAP_KEYS) for known in kind.keys}]


def find_placeholders(raw: Mapping[str, Any], *, project: str, secret_keys: Collection[str] = ()) -> tuple[Placeholder, ...]:
    """The example values in `raw` (decoded `project:key` -> value), in key order, at the keys the
    table names. The project's `secrets` and every path in `secret_keys` are never read."""
    prefix = f"{project}:"
    skipped = {f"{prefix}secrets", *secret_keys}
    found = []
    for key in sorted(k for k in raw if k.startswith(prefix)):
        for path, text in _strings(key, raw[key]):
            if not any(_within(path, secret) for secret in skipped):
                found += [Placeholder(path, kind) for kind in _kinds_at(table_key(path, project)) if kind.matches(text)]
    return tuple(found)


def placeholder_secrets(stack_values: Mapping[str, Any], *, project: str) -> tuple[Placeholder, ...]:
    """The `secure:` values of a stack file's `config:` block that hold the placeholder text,
    not a ciphertext (keys qualified as the CLI qualifies them)."""
    kind = next(kind for kind in PLACEHOLDERS if kind.secret_file_only)
    qualified = {key if ":" in key else f"{project}:{key}": value for key, value in stack_values.items()}
    return tuple(Placeholder(path, kind) for key in sorted(qualified)
                 for path, text in _secure_texts(key, qualified[key]) if kind.matches(text))


def _secure_texts(path: str, value: Any) -> Iterator[tuple[str, str]]:
    """(path, text) of every `secure:` value inside `value` (a map whose one key is `secure`)."""
    return ((inner, found["secure"]) for inner, found in _values(path, value)
            if isinstance(found, Mapping) and set(found) == {"secure"} and isinstance(found["secure"], str))


def parse_allow(root: Section, *, environment: str) -> bool:
    """`placeholders.allow`: a dev stack's explicit choice to deploy with example values."""
    section = root.section(ALLOW_KEY)
    allow = section.boolean("allow")
    section.finish()
    if allow and environment != "dev":
        section.error(section.key("allow"), allow, f"only a dev stack may deploy example values; {environment} "
                      "must have every real value before it is deployed",
                      f"remove it and replace the values `make plan` lists ({FIRST_DEPLOY_DOC})")
        return False
    return allow


def offline_report(stack: str, found: Collection[Placeholder]) -> str:
    """The offline plan's one block for a stack, a line per kind of value ("" when nothing is found)."""
    if not found:
        return ""
    unless = " unless the stack sets `placeholders: {allow: true}`" if stack_is_dev(stack) else ""
    lines = [f"stack {stack}: {len(found)} example value{'s' if len(found) != 1 else ''} to replace before a real "
             f"deploy (the offline plan takes them; `pulumi up` and `pulumi preview` refuse them{unless}; "
             f"{FIRST_DEPLOY_DOC}):"]
    for kind in PLACEHOLDERS:
        keys = [placeholder.key for placeholder in found if placeholder.kind == kind]
        if keys:
            lines.append(f"  - {kind.what}: {', '.join(keys)}. Fix: {fix_for(kind, stack)}")
    return "\n".join(lines)


def fix_for(kind: PlaceholderKind, stack: str) -> str:
    if kind.name == "zero-image-digest" and stack.startswith("team-"):
        # A team stack has no image repository of its own: scripts/build-image <team stack> refuses it.
        return image_fix(stack.rsplit("-", 1)[-1], team=True)
    return kind.fix.replace("<stack>", stack)


def refuse_or_warn(found: Collection[Placeholder], *, stack: str, allowed: bool) -> str:
    """Before a real deploy: a ConfigError naming every example value, its kind and the fix; where
    the dev stack allows them, the warning `pulumi up` shows instead ("" when there are none)."""
    if not found:
        return ""
    if allowed:
        listed = "; ".join(str(placeholder) for placeholder in found)
        return f"stack {stack} deploys {len(found)} example values (placeholders.allow): {listed}"
    opt_out = " (a dev stack may deploy them anyway with `placeholders: {allow: true}`)" if stack_is_dev(stack) else ""
    raise ConfigError([ConfigProblem(placeholder.key, f"is {placeholder.kind.what}: {placeholder.kind.why}",
                                     f"{fix_for(placeholder.kind, stack)}; the checklist is {FIRST_DEPLOY_DOC}{opt_out}")
                       for placeholder in found])


def stack_is_dev(stack: str) -> bool:
    return stack == "dev" or stack.endswith("-dev")


def deploys_for_real() -> bool:
    """Whether the program talks to a real engine (`pulumi up`/`preview`), not to the mock monitor
    the offline plan and the tests install (`pulumi.runtime.set_mocks`).

    Why this signal: the monitor is what decides whether a registered resource reaches AWS, so it
    cannot disagree with the truth. An environment variable could be left set in a real shell and
    silently turn the guard off; `is_dry_run()` is true for `pulumi preview` too, which must refuse
    as well. No monitor at all (the program imported outside any engine) counts as real: refusing
    is the safe side."""
    return not isinstance(settings.get_monitor(), mocks.MockMonitor)
