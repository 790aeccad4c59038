"""What AWS and Kubernetes accept, restated here from their API references on purpose (not imported
from the config model): the oracle a plan must satisfy, so a limit the model gets wrong cannot also
hide the plan that breaks it. `violations(plan, region)` lists what the APIs would refuse.

Sources: AWS tag restrictions (keys 1-128, values 0-256, no `aws:` prefix; letters, numbers,
spaces and _ . : / = + - @ in most services, EFS's API pattern for one, while EC2 and Auto Scaling
take any character: the provider's default tags land on every service, so they get the strict set); EKS CreateNodegroup (labels: keys and
values 1-63; taints: key 1-63, value 0-63, at most 50; scaling sizes); IAM CreateRole (names
1-64 of [\\w+=,.@-]); Kubernetes object names (DNS-1123 subdomain, 253; namespaces and services
DNS-1123 label, 63), label keys (optional DNS-subdomain prefix of 253, name of 63) and values
(63), container names (DNS label), env vars (unique per container), ports (1-65535); the 32-bit
integers of the Kubernetes API and AWS `Integer` members; Linux's execve, which refuses any one
argument or "NAME=value" environment string over MAX_ARG_STRLEN (PAGE_SIZE * 32, its NUL
included: include/uapi/linux/binfmts.h).

Volumes: a PersistentVolume's access modes reach its CSI driver as CSI access modes (the kubelet's
mapping, kubernetes pkg/volume/csi/csi_client.go asCSIAccessModeV1), and a driver refuses to
mount a mode it does not support; a claim binds only a volume that offers all of its modes.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from components.facts.regions import availability_zones
from offline.documents import values_under

INT32 = (-(2**31), 2**31 - 1)
MAX_ARG_STRLEN = 32 * 4096
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
IAM_NAME = re.compile(r"[\w+=,.@-]{1,64}", re.ASCII)
TAG_PUNCTUATION = set("_.:/=+-@")
LABEL_NAMED_KINDS = ("Namespace", "Service")
# PersistentVolume access mode -> the CSI access mode the kubelet asks the driver for
# (kubernetes pkg/volume/csi/csi_client.go asCSIAccessModeV1).
CSI_ACCESS_MODES = {"ReadWriteOnce": "SINGLE_NODE_WRITER", "ReadOnlyMany": "MULTI_NODE_READER_ONLY",
                    "ReadWriteMany": "MULTI_NODE_MULTI_WRITER"}
# The CSI access modes each driver's node plugin accepts (anything else: "Volume capability not
# supported"), at the versions the plan pins (components/facts/eks_versions.py).
CSI_DRIVER_MODES = {
    # kubernetes-sigs/aws-fsx-csi-driver v1.9.0, pkg/driver/controller.go volumeCaps (node.go checks the same)
    "fsx.csi.aws.com": {"SINGLE_NODE_WRITER", "MULTI_NODE_MULTI_WRITER"},
    # kubernetes-sigs/aws-efs-csi-driver v3.4.1, pkg/driver/node.go volumeCapAccessModes
    "efs.csi.aws.com": {"SINGLE_NODE_WRITER", "MULTI_NODE_MULTI_WRITER"},
    # awslabs/mountpoint-s3-csi-driver v2.7.0, pkg/driver/node/node.go; docs/CONFIGURATION.md:
    # "Supported options: ReadWriteMany / ReadOnlyMany"
    "s3.csi.aws.com": {"MULTI_NODE_MULTI_WRITER", "MULTI_NODE_READER_ONLY"},
}


def violations(plan: Any, region: str) -> list[str]:
    found: list[str] = []
    for resource in plan.resources:
        where = f"{resource['type']} {resource['name']}"
        inputs = resource["inputs"]
        found += [f"{where}: {problem}" for problem in _resource_problems(resource["type"], inputs, region)]
        found += [f"{where}: {path} = {value} is outside int32" for path, value in _integers(inputs, "")
                  if not INT32[0] <= value <= INT32[1]]
    manifests = list(plan.manifests())
    for manifest in manifests:
        name = f"{manifest.get('kind')} {(manifest.get('metadata') or {}).get('name')}"
        found += [f"{name}: {problem}" for problem in _manifest_problems(manifest)]
    found += _claim_problems(manifests)
    return found


def volume_mode_problems(volume_spec: dict[str, Any]) -> list[str]:
    """What a CSI driver would refuse to mount: access modes it does not support."""
    driver = (volume_spec.get("csi") or {}).get("driver")
    if driver is None:
        return []
    if driver not in CSI_DRIVER_MODES:
        return [f"CSI driver {driver!r} has no access-mode table here (add its supported modes, with the source)"]
    supported = CSI_DRIVER_MODES[driver]
    return [f"access mode {mode} is CSI {CSI_ACCESS_MODES.get(mode, 'UNKNOWN')}, which {driver} does not support "
            f"(it supports {', '.join(sorted(supported))}): the volume never mounts"
            for mode in volume_spec.get("accessModes") or [] if CSI_ACCESS_MODES.get(mode) not in supported]


def _claim_problems(manifests: list[dict[str, Any]]) -> list[str]:
    """A claim that names a volume binds only if the volume offers every mode the claim asks for."""
    volumes = {m["metadata"].get("name"): m.get("spec") or {} for m in manifests if m.get("kind") == "PersistentVolume"}
    found = []
    for claim in (m for m in manifests if m.get("kind") == "PersistentVolumeClaim"):
        spec, name = claim.get("spec") or {}, claim["metadata"].get("name")
        volume = volumes.get(spec.get("volumeName"))
        if volume is not None and not set(spec.get("accessModes") or []) <= set(volume.get("accessModes") or []):
            found.append(f"PersistentVolumeClaim {name}: access modes {spec.get('accessModes')} are not all offered by "
                         f"PersistentVolume {spec.get('volumeName')} ({volume.get('accessModes')}): it never binds")
    return found


def _integers(value: Any, path: str) -> Iterator[tuple[str, int]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _integers(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _integers(item, f"{path}[{index}]")


def tag_problem(key: Any, value: Any, *, any_character: bool = False) -> str | None:
    if not isinstance(key, str) or not isinstance(value, str):
        return f"tag {key!r}={value!r} is not text"
    if not 1 <= len(key) <= 128 or len(value) > 256:
        return f"tag {key!r}: key 1-128 and value 0-256 characters"
    if key.lower().startswith("aws:"):
        return f"tag {key!r}: the aws: prefix is reserved"
    for text in (key, value) if not any_character else ():
        if any(not (unicodedata.category(c)[0] in "LNZ" or c in TAG_PUNCTUATION) for c in text):
            return f"tag {key!r}={value!r}: characters AWS refuses"
    return None


def _tags(type_token: str, inputs: dict[str, Any]) -> dict[str, Any]:
    if type_token == "pulumi:providers:aws":
        default_tags = inputs.get("defaultTags") or "{}"
        return (json.loads(default_tags) if isinstance(default_tags, str) else default_tags).get("tags") or {}
    if type_token == "aws:autoscaling/tag:Tag":
        return {inputs["tag"]["key"]: inputs["tag"]["value"]}
    tags = dict(inputs.get("tags") or {})
    for spec in inputs.get("tagSpecifications") or []:
        tags.update(spec.get("tags") or {})
    return tags


def _resource_problems(type_token: str, inputs: dict[str, Any], region: str) -> Iterator[str]:
    any_character = type_token.startswith(("aws:ec2/", "aws:autoscaling/"))
    for key, value in _tags(type_token, inputs).items():
        problem = tag_problem(key, value, any_character=any_character)
        if problem:
            yield problem
    if type_token == "aws:eks/nodeGroup:NodeGroup":
        yield from _node_group_problems(inputs)
    if type_token == "aws:ec2/subnet:Subnet" and inputs.get("availabilityZone") not in availability_zones(region):
        yield f"availabilityZone {inputs.get('availabilityZone')!r} is not a zone of {region}"
    if type_token == "aws:iam/role:Role" and "name" in inputs and not IAM_NAME.fullmatch(str(inputs["name"])):
        yield f"IAM role name {inputs.get('name')!r} is not 1-64 of [\\w+=,.@-]"


def _node_group_problems(inputs: dict[str, Any]) -> Iterator[str]:
    if len(inputs.get("nodeGroupName", "")) > 63:
        yield "nodeGroupName longer than 63"
    for key, value in (inputs.get("labels") or {}).items():
        if not (1 <= len(key) <= 63 and 1 <= len(value) <= 63) or label_problem(key, value):
            yield f"EKS label {key!r}={value!r}: keys and values 1-63, Kubernetes syntax"
    taints = inputs.get("taints") or []
    if len(taints) > 50:
        yield "more than 50 taints"
    for taint in taints:
        if not 1 <= len(taint["key"]) <= 63 or len(taint.get("value") or "") > 63 or label_problem(taint["key"], taint.get("value") or ""):
            yield f"EKS taint {taint!r}: key 1-63, value 0-63, Kubernetes syntax"
        if taint["effect"] not in ("NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"):
            yield f"EKS taint effect {taint['effect']!r}"
    scaling = inputs.get("scalingConfig") or {}
    if not 0 <= scaling.get("minSize", -1) <= scaling.get("desiredSize", -1) <= scaling.get("maxSize", -1) or scaling.get("maxSize", 0) < 1:
        yield f"scalingConfig {scaling!r}"
    if not inputs.get("subnetIds"):
        yield "no subnets"


def label_problem(key: Any, value: Any) -> str | None:
    """Kubernetes' rules for a label (and the key of an annotation, with value=None)."""
    if not isinstance(key, str):
        return f"label key {key!r} is not text"
    prefix, _, name = key.rpartition("/")
    if (prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix))) or not QUALIFIED_NAME.fullmatch(name):
        return f"label key {key!r} is not a qualified name"
    if value is not None and (not isinstance(value, str) or not LABEL_VALUE.fullmatch(value)):
        return f"label {key!r} has value {value!r}"
    return None


def _manifest_problems(manifest: dict[str, Any]) -> Iterator[str]:
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name", "")
    pattern = DNS_LABEL if manifest.get("kind") in LABEL_NAMED_KINDS else DNS_SUBDOMAIN
    if not isinstance(name, str) or len(name) > 253 or not pattern.fullmatch(name):
        yield f"metadata.name {name!r}"
    for key, value in (metadata.get("labels") or {}).items():
        problem = label_problem(key, value)
        if problem:
            yield problem
    for key in metadata.get("annotations") or {}:
        problem = label_problem(key, None)
        if problem:
            yield problem
    if manifest.get("kind") == "PersistentVolume":
        yield from volume_mode_problems(manifest.get("spec") or {})
    for containers in values_under(manifest, ("containers", "initContainers"), list):
        for container in containers:
            yield from _container_problems(container)


def _container_problems(container: dict[str, Any]) -> Iterator[str]:
    if not DNS_LABEL.fullmatch(str(container.get("name", ""))):
        yield f"container name {container.get('name')!r}"
    names = [entry.get("name") for entry in container.get("env") or []]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        yield f"env {duplicate!r} appears twice in container {container.get('name')!r}"
    for entry in container.get("env") or []:
        if not isinstance(entry.get("name"), str) or not entry["name"] or "=" in entry["name"]:
            yield f"env name {entry.get('name')!r}"
        if "valueFrom" not in entry and not isinstance(entry.get("value", ""), str):
            yield f"env {entry.get('name')!r} value {entry.get('value')!r} is not text"
        elif len(f"{entry.get('name')}={entry.get('value', '')}".encode()) >= MAX_ARG_STRLEN:
            yield f"env {entry.get('name')!r}: its NAME=value string is over MAX_ARG_STRLEN"
    for port in container.get("ports") or []:
        if not 1 <= port.get("containerPort", 0) <= 65535:
            yield f"containerPort {port.get('containerPort')!r}"
    for arg in container.get("args") or []:
        if not isinstance(arg, str):
            yield f"arg {arg!r} is not text"
        elif len(arg.encode()) >= MAX_ARG_STRLEN:
            yield f"an arg of {len(arg.encode())} bytes is over MAX_ARG_STRLEN"
