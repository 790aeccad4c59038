"""The ProvisioningRequest API (autoscaling.x-k8s.io/v1): how Kueue asks the Cluster Autoscaler
for all of a gang's nodes in one scale-up instead of node by node.

The autoscaler's chart ships no CRD (chart 9.50.0 to 9.59.0), and Kueue sets up its provisioning
admission check only if the API exists when its manager starts ("Skipping provisioning
controller setup: Provisioning Requests not supported", kueue v0.19.2 cmd/kueue/main.go). So
the CRD is installed here, before both, from the upstream file of the autoscaler release
(schemas/crds/autoscaling.x-k8s.io_provisioningrequests.yaml, byte for byte; the CRD-schema
tests read the same file).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import yaml

from components.common.manifests import custom_resource
from components.config.stack_file import REPO_ROOT

CRD_FILE = REPO_ROOT / "schemas" / "crds" / "autoscaling.x-k8s.io_provisioningrequests.yaml"


@functools.cache
def provisioning_request_crd() -> dict[str, Any]:
    """The upstream CustomResourceDefinition (kubernetes/autoscaler cluster-autoscaler-1.34.0,
    cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml)."""
    # libyaml's loader where PyYAML has it: the pure-Python one takes ~0.08 s of every plan here.
    return yaml.load(CRD_FILE.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@dataclass(frozen=True)
class ProvisioningRequestApiArgs:
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the CRD is applied: e.g. the node groups."""


class ProvisioningRequestApi(pulumi.ComponentResource):
    def __init__(self, name: str, args: ProvisioningRequestApiArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:cluster:ProvisioningRequestApi", name, None, opts)
        custom_resource(f"{name}-crd", provisioning_request_crd(),
                        pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        self.register_outputs({})
