"""Every value a plan sends to AWS, against the rows of tests/aws_api_rows.py: the shapes of the
botocore model of the operation that receives it, the API references' prose, tag rules and IAM's
per-role quotas. `check(resources)` reads resources.json records and lists what AWS would refuse.

How a planned value is read:
- A value made of another resource's output is unknown before that resource exists: the offline
  plan shows the mock engine's stand-in (`<name>-id`, `arn:aws:mock:...`, a key id), which says
  nothing about what AWS will get. In an input that reads outputs (resources.json
  `propertyDependencies`), each value holding a stand-in of what it reads is skipped (UNKNOWN);
  the same input's literals (an EFA interface type beside a security group id) are checked.
- A pattern must match the whole value, as AWS validates it (a role name with a space is refused:
  "Member must satisfy regular expression pattern: [\\w+=,.@-]+"). The patterns are Java's, with
  \\p{L} classes: the `regex` module reads them, `re` cannot.
- A resource's tags are the provider's default tags merged with its own, as the provider sends them.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import botocore
import regex
from aws_api_rows import API, PROSE, SERVICES, tag_problems
from botocore.loaders import Loader


@dataclass
class Report:
    checked: int = 0
    """How many planned values were compared with a constraint."""
    problems: list[str] = field(default_factory=list)


@functools.cache
def _model(service: str) -> dict[str, Any]:
    return Loader().load_service_model(service, "service-2", SERVICES[service])


@functools.cache
def _compiled(pattern: str) -> regex.Pattern[str]:
    """A model's (Java) pattern for Python: a UTF-16 surrogate pair written as two escapes
    (\\uD800\\uDC00, Auto Scaling's XmlString) is one code point (U+10000)."""
    def code_point(pair: regex.Match[str]) -> str:
        high, low = int(pair[1], 16), int(pair[2], 16)
        return f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08X}"
    return regex.compile(regex.sub(r"\\u(D[89AB][0-9A-F]{2})\\u(D[C-F][0-9A-F]{2})", code_point, pattern, flags=regex.I))


def shape_of(service: str, operation: str, member_path: str) -> str:
    """The name of the shape at `member_path` of the operation's input (KeyError: no such member)."""
    model = _model(service)
    shape = model["operations"][operation]["input"]["shape"]
    for part in member_path.split("."):
        shape = model["shapes"][shape]["members"][part.removesuffix("[]")]["shape"]
        if part.endswith("[]"):
            shape = model["shapes"][shape]["member"]["shape"]
    return shape


def values_at(inputs: Mapping[str, Any], path: str) -> Iterator[tuple[str, Any]]:
    """(where, value) for each value at a Pulumi input path; `a[]` walks a list's elements."""
    def walk(value: Any, parts: list[str], where: str) -> Iterator[tuple[str, Any]]:
        if not parts:
            yield where, value
            return
        key = parts[0].removesuffix("[]")
        if not isinstance(value, Mapping) or value.get(key) is None:
            return
        item = value[key]
        if parts[0].endswith("[]"):
            for index, element in enumerate(item if isinstance(item, list) else [item]):
                yield from walk(element, parts[1:], f"{where}{key}[{index}].")
        else:
            yield from walk(item, parts[1:], f"{where}{key}.")
    for where, value in walk(inputs, path.split("."), ""):
        yield where.rstrip("."), value


def shape_problems(service: str, shape_name: str, value: Any, report: Report) -> Iterator[str]:
    """What the shape refuses in `value`; a list or map shape checks its size and each element."""
    shape = _model(service)["shapes"][shape_name]
    kind = shape["type"]
    if value is UNKNOWN:
        return
    if kind in ("list", "map"):
        yield from _size_problems(shape, value, report)
        yield from _element_problems(service, shape, value, report)
    elif kind == "structure" or isinstance(value, (Mapping, list)):
        raise ValueError(f"shape {shape_name} ({kind}) cannot take {_short(value)}: map the members one by one in API")
    elif kind == "string" and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        report.checked += 1
        yield from _string_problems(shape, str(value))
    elif kind in ("integer", "long", "double", "float") and not isinstance(value, bool):
        report.checked += 1
        yield from _number_problems(shape, value)


def _number_problems(shape: Mapping[str, Any], value: Any) -> Iterator[str]:
    try:
        number = float(value)
    except ValueError:
        yield "is not a number"
        return
    if "min" in shape and number < shape["min"]:
        yield f"below the minimum {shape['min']}"
    if "max" in shape and number > shape["max"]:
        yield f"above the maximum {shape['max']}"


def _size_problems(shape: Mapping[str, Any], value: Any, report: Report) -> Iterator[str]:
    if isinstance(value, Mapping) and not value:
        return  # an empty map is not sent (tags: {})
    if isinstance(value, (list, Mapping)) and ("min" in shape or "max" in shape):
        report.checked += 1
        if not shape.get("min", 0) <= len(value) <= shape.get("max", len(value)):
            yield f"{len(value)} items; the API takes {shape.get('min', 0)} to {shape.get('max', 'any number')}"


def _element_problems(service: str, shape: Mapping[str, Any], value: Any, report: Report) -> Iterator[str]:
    """A list's elements, a map's keys and values; a Pulumi map sent as a list of Key/Value pairs."""
    shapes = _model(service)["shapes"]
    if shape["type"] == "map":
        key_shape, value_shape = shape["key"]["shape"], shape["value"]["shape"]
    else:
        member = shape["member"]["shape"]
        if not isinstance(value, Mapping):
            if shapes[member]["type"] == "structure":
                return  # a list of structures: its size here, its members by their own rows
            for element in value if isinstance(value, list) else [value]:
                yield from shape_problems(service, member, element, report)
            return
        members = shapes[member]["members"]  # {Key, Value}, {Name, Value} or {TagKey, TagValue}
        key_shape = next(members[m]["shape"] for m in ("Key", "Name", "TagKey") if m in members)
        value_shape = next(members[m]["shape"] for m in ("Value", "TagValue") if m in members)
    for key, item in value.items():
        yield from (f"key {_short(key)}: {p}" for p in shape_problems(service, key_shape, key, report))
        yield from (f"[{key!r}] = {_short(item)}: {p}" for p in shape_problems(service, value_shape, item, report))


def _string_problems(shape: Mapping[str, Any], text: str) -> Iterator[str]:
    if not shape.get("min", 0) <= len(text) <= shape.get("max", len(text)):
        yield f"{len(text)} characters; the API takes {shape.get('min', 0)} to {shape.get('max')}"
    if "pattern" in shape and _compiled(shape["pattern"]).fullmatch(text) is None:
        yield f"does not match the pattern {shape['pattern']}"
    if "enum" in shape and text not in shape["enum"]:
        yield f"is not one of {', '.join(shape['enum'])}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Unknown:
    """A value the plan cannot know yet: it holds another resource's output."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()
# What the offline engine (offline/plan.py _Mocks) makes up for outputs only AWS computes: ARNs,
# key ids and other UUIDs, endpoints and mount names; ids are `<name>-id`, an unnamed resource's
# name is its logical name (both matched per dependency below).
MOCK_OUTPUT = regex.compile(r":mock:|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|offline")


def _without_outputs(value: Any, sources: frozenset[str]) -> Any:
    """`value` with each string that holds an output of `sources` (logical names) as UNKNOWN."""
    if isinstance(value, Mapping):
        return {key: _without_outputs(item, sources) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_outputs(item, sources) for item in value]
    if isinstance(value, str) and (MOCK_OUTPUT.search(value) or value in sources
                                   or any(f"{source}-id" in value for source in sources)):
        return UNKNOWN
    return value


def _known_inputs(resource: Mapping[str, Any], default_tags: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs as AWS will get them, outputs of other resources UNKNOWN, and the provider's
    default tags merged into the resource's own."""
    reads = resource.get("propertyDependencies") or {}
    inputs = {key: _without_outputs(value, frozenset(urn.split("::")[-1] for urn in reads[key])) if key in reads else value
              for key, value in resource["inputs"].items()}
    if default_tags and any("tags" in call.fields for call in API.get(resource["type"], ())):
        inputs["tags"] = {**default_tags, **(inputs.get("tags") or {})}
    return inputs


def _default_tags(resources: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Provider name -> its default tags."""
    found = {}
    for record in resources:
        if record["type"] == "pulumi:providers:aws":
            tags = record["inputs"].get("defaultTags") or "{}"
            found[record["name"]] = (json.loads(tags) if isinstance(tags, str) else tags).get("tags") or {}
    return found


def resource_problems(resource: Mapping[str, Any], inputs: Mapping[str, Any], report: Report) -> Iterator[str]:
    """Each known value of one resource against its API rows, its prose rows and the tag rules."""
    for call in API.get(resource["type"], ()):
        for path, member in call.fields.items():
            shape = shape_of(call.service, call.operation, member)
            for where, value in values_at(inputs, path):
                shown = where if isinstance(value, (Mapping, list)) else f"{where} = {_short(value)}"
                for problem in shape_problems(call.service, shape, value, report):
                    yield f"{shown}: {problem} ({call.service} {call.operation} {member}, shape {shape})"
    for rule in PROSE.get(resource["type"], ()):
        for where, value in values_at(inputs, rule.field) if rule.field else [("inputs", inputs)]:
            if value is UNKNOWN:
                continue
            report.checked += 1
            if not rule.accepts(value):
                yield f"{where} = {_short(value)}: {rule.says} ({rule.source})"
    tag_sets = [inputs.get("tags") or {}, *(spec.get("tags") or {} for spec in inputs.get("tagSpecifications") or [])]
    if resource["type"] == "aws:autoscaling/tag:Tag":
        tag_sets.append({inputs["tag"]["key"]: inputs["tag"]["value"]})
    for tags in tag_sets:
        report.checked += len(tags)
        yield from tag_problems(tags, resource["type"])


# IAM User Guide, "IAM and AWS STS quotas" (docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html),
# the defaults: a role's trust policy 2,048 characters, its inline policies 10,240 together (white
# space not counted), 10 managed policies attached. The models state none of them.
TRUST_POLICY_CHARACTERS, INLINE_POLICY_CHARACTERS, MANAGED_POLICIES_PER_ROLE = 2048, 10240, 10


def iam_size(document: str) -> int:
    """A policy's size as IAM counts it: no white space outside strings."""
    return len(json.dumps(json.loads(document), separators=(",", ":")))


def role_quota_problems(resources: Sequence[Mapping[str, Any]], report: Report) -> Iterator[str]:
    """Per role: trust policy size, inline policies' total, managed policies attached. A policy
    holding stand-in ARNs is measured as planned (a real ARN is a few characters longer)."""
    inline: Counter[str] = Counter()
    attached: Counter[str] = Counter()
    for record in resources:
        role = (record.get("propertyDependencies") or {}).get("role", [str(record["inputs"].get("role"))])[0].split("::")[-1]
        policy, trust = record["inputs"].get("policy"), record["inputs"].get("assumeRolePolicy")
        if record["type"] == "aws:iam/rolePolicy:RolePolicy" and isinstance(policy, str):
            inline[role] += iam_size(policy)
        elif record["type"] == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            attached[role] += 1
        elif record["type"] == "aws:iam/role:Role" and isinstance(trust, str):
            report.checked += 1
            if iam_size(trust) > TRUST_POLICY_CHARACTERS:
                yield f"aws:iam/role:Role {record['name']}: trust policy over {TRUST_POLICY_CHARACTERS} characters (IAM quotas)"
    report.checked += len(inline) + len(attached)
    yield from (f"role {role}: inline policies of {size} characters together, over {INLINE_POLICY_CHARACTERS} (IAM quotas)"
                for role, size in inline.items() if size > INLINE_POLICY_CHARACTERS)
    yield from (f"role {role}: {count} managed policies attached, over {MANAGED_POLICIES_PER_ROLE} (IAM quotas)"
                for role, count in attached.items() if count > MANAGED_POLICIES_PER_ROLE)


# IAM User Guide, "IAM JSON policy elements: Sid" and "Version": in IAM a Sid holds "ASCII uppercase
# letters (A-Z), lowercase letters (a-z), and numbers (0-9)" and is unique within its policy (KMS
# and S3 policies take more: not checked here); Version is 2012-10-17 or the old 2008-10-17.
IAM_DOCUMENTS = {"aws:iam/role:Role": "assumeRolePolicy", "aws:iam/rolePolicy:RolePolicy": "policy",
                 "aws:iam/policy:Policy": "policy"}


def iam_document_problems(resource: Mapping[str, Any], report: Report) -> Iterator[str]:
    """A policy's Sids and Version; read from the planned text, stand-in ARNs and all (both are literals)."""
    text = resource["inputs"].get(IAM_DOCUMENTS.get(resource["type"], ""))
    if not isinstance(text, str):
        return
    document = json.loads(text)
    statements = document.get("Statement") or []
    sids = [s["Sid"] for s in (statements if isinstance(statements, list) else [statements]) if "Sid" in s]
    report.checked += 1 + len(sids)
    if document.get("Version") not in ("2012-10-17", "2008-10-17"):
        yield f"policy Version {document.get('Version')!r}: IAM takes 2012-10-17 (IAM JSON policy elements: Version)"
    yield from (f"policy Sid {sid!r}: IAM takes A-Z, a-z and 0-9 only (IAM JSON policy elements: Sid)"
                for sid in sids if not regex.fullmatch(r"[A-Za-z0-9]*", str(sid)))
    yield from (f"policy Sid {sid!r} appears twice: a Sid is unique within its policy (IAM JSON policy elements: Sid)"
                for sid in sorted({sid for sid in sids if sids.count(sid) > 1}))


def check(resources: Sequence[Mapping[str, Any]]) -> Report:
    """Every AWS resource of a plan (resources.json records) against its API's constraints."""
    report = Report()
    default_tags = _default_tags(resources)
    for resource in resources:
        if not resource["type"].startswith("aws:"):
            continue
        inputs = _known_inputs(resource, default_tags.get(resource.get("provider") or "", {}))
        report.problems += [f"{resource['type']} {resource['name']}: {problem}"
                            for problem in (*resource_problems(resource, inputs, report), *iam_document_problems(resource, report))]
    report.problems += role_quota_problems(resources, report)
    return report


def model_file(service: str) -> str:
    """Where the model of a service lies, for messages and the version test."""
    return f"botocore {botocore.__version__} data/{service}/{SERVICES[service]}/service-2.json"
