"""The namespace's run viewer: TensorBoard over the jobs' event files, behind the environment's ALB.

- Reads `/workspace/checkpoints` of the namespace's `checkpoints` volume, mounted read-only:
  each job writes `<job>/tensorboard/` there (trainer/launcher/events.py), so every job is a run.
- Image: the trainer image (`training.cleanupImage`, pinned by digest), which pins `tensorboard`
  (trainer/requirements.txt). The checkpoint cleanup CronJob already pulls it onto the system
  pool, it is one image to scan and patch, and there is no image the TensorBoard project itself
  publishes and keeps.
- Hardening as the other system-pool pods: UID/GID 1000 (the access point's owner), non-root,
  read-only root file system (TensorBoard's scratch on an emptyDir /tmp), no privilege
  escalation, every capability dropped, RuntimeDefault seccomp, no service account token;
  requests and limits within the namespace quota's spare room (workload/sizing.py SPARE_*).
- Reached only through the ALB: Ingress class `alb` in the environment's IngressGroup at path
  `/<namespace>` (TensorBoard's --path_prefix), IP targets, the security group
  components/network planned (by Name tag; the controller adds no rule), its CIDRs restated in
  `inbound-cidrs`. The ALB lives in the public subnets (`subnets`), internal or not, and a
  NetworkPolicy admits the viewer's port from those subnets only: no pod has an address there
  (the VPC CNI gives pods the private subnets' addresses), so another tenant's pods cannot reach
  the viewer whatever their own egress policies say (issue #41: it once admitted the private
  subnets, and rested on the other tenants' default-deny egress).

One ALB per environment, one path per namespace (IngressGroup `<prefix>-viewer`): an ALB is billed
per hour whether used or not (about $16/month in us-east-1, $0.0225/h, plus LCUs;
https://aws.amazon.com/elasticloadbalancing/pricing/), so a team's viewer costs a listener rule,
not another load balancer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.cluster.pool_scheduling import POOL_LABEL
from components.common.manifests import checkov_skips
from components.config import StackConfig
from components.config.viewer import VIEWER_PORT, alb_security_group_name, inbound_cidrs
from components.data import training_data
from components.network.vpc import public_subnet_name
from components.workload.namespaced import SystemPodArgs
from components.workload.training_job import SKIP_REASONS as TRAINING_SKIP_REASONS

NAME = "tensorboard"
INGRESS_CLASS = "alb"  # the chart's ingressClass (values.yaml `ingressClass: alb`)
TMP = "/tmp"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpu-training"}
# TensorBoard keeps every scalar it loads in memory; a namespace's dozen jobs of a few thousand
# logged steps each stay well under 1 GiB. Within the namespace quota's spare 4 CPUs / 16 GiB.
RESOURCES = {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
# How often TensorBoard looks for new event files (`--reload_interval`, default 5 s): a minute is
# enough for a curve of a long run, and keeps it from listing the shared file system constantly.
RELOAD_SECONDS = 60
# The training pods' accepted deviation, for the same reason (checkov's skip syntax).
SKIP_REASONS = {"CKV_K8S_40": TRAINING_SKIP_REASONS["CKV_K8S_40"]}

# One TensorBoard per namespace, always running: the per-job "no step while pods run" alarm
# (components/observability/training_metrics.py) counts these pods out of the namespace's.
VIEWER_REPLICAS = 1


@dataclass(frozen=True)
class ViewerExposure:
    """How the environment's load balancer reaches viewers: the same for every namespace of it."""

    group: str
    """The IngressGroup (one ALB) every namespace's viewer joins."""
    security_group: str
    """The Name tag of the ALB's security group (components/network)."""
    internet_facing: bool
    certificate_arn: str | None
    listen_ports: tuple[int, ...]
    inbound_cidrs: tuple[str, ...]
    """Who may reach the ALB."""
    alb_subnet_cidrs: tuple[str, ...]
    """Where the ALB's addresses are: the public subnets, internal or not, which hold no pod."""
    alb_subnets: tuple[str, ...] = ()
    """Those subnets' Name tags, for the controller's `subnets` annotation (none: its own discovery)."""


def exposure_of(platform: StackConfig) -> ViewerExposure:
    """The exposure a platform stack's config gives (a team stack passes its judged platform's)."""
    network, viewer = platform.network, platform.viewer
    # The public subnets whether the ALB is internal or not: pods get their addresses from the
    # private subnets (VPC CNI), so a NetworkPolicy that admits the ALB's subnets admits no other
    # tenant's pod. An internal ALB has private addresses only, in whatever subnets it is put
    # (the controller takes `subnets` by ID or Name tag: docs/guide/ingress/annotations.md).
    return ViewerExposure(
        group=f"{platform.name_prefix}-viewer", security_group=alb_security_group_name(platform.name_prefix),
        internet_facing=viewer.internet_facing, certificate_arn=viewer.certificate_arn,
        listen_ports=viewer.listen_ports,
        inbound_cidrs=tuple(str(c) for c in inbound_cidrs(network.monitoring_ingress, network.vpc_cidr)),
        alb_subnet_cidrs=tuple(str(s.public) for s in network.subnets),
        alb_subnets=tuple(public_subnet_name(platform.name_prefix, s.availability_zone) for s in network.subnets))


def path_prefix(namespace: str) -> str:
    return f"/{namespace}"


def container(image: str, namespace: str, checkpoints_sub_path: str | None) -> dict[str, Any]:
    prefix = path_prefix(namespace)
    return {
        "name": NAME,
        "image": image,
        "command": ["python", "-m", "tensorboard.main"],
        "args": ["--logdir", training_data.CHECKPOINTS.mount_path, "--host", "0.0.0.0", "--port", str(VIEWER_PORT),
                 "--path_prefix", prefix, "--reload_interval", str(RELOAD_SECONDS)],
        "env": [{"name": "HOME", "value": TMP}],
        "ports": [{"name": "http", "containerPort": VIEWER_PORT, "protocol": "TCP"}],
        "resources": RESOURCES,
        "readinessProbe": {"httpGet": {"path": f"{prefix}/", "port": VIEWER_PORT}, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": f"{prefix}/", "port": VIEWER_PORT}, "periodSeconds": 30,
                          "failureThreshold": 4},
        "securityContext": {**training_data.container_security_context(), "privileged": False},
        "volumeMounts": [
            training_data.checkpoints_mount(checkpoints_sub_path, read_only=True),
            {"name": "tmp", "mountPath": TMP},
        ],
    }


def deployment_spec(*, image: str, namespace: str, system_pool: str, checkpoints_sub_path: str | None) -> dict[str, Any]:
    return {
        "replicas": VIEWER_REPLICAS,
        "selector": {"matchLabels": LABELS},
        "template": {"metadata": {"labels": LABELS}, "spec": {
            "automountServiceAccountToken": False,
            "nodeSelector": {POOL_LABEL: system_pool},
            # It only reads the checkpoints: their files keep the group the trainer gave them.
            "securityContext": training_data.pod_security_context(fs_group=False),
            "containers": [container(image, namespace, checkpoints_sub_path)],
            "volumes": [
                training_data.checkpoints_claim(read_only=True),
                {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            ],
        }},
    }


def ingress_annotations(exposure: ViewerExposure, namespace: str) -> dict[str, str]:
    """Annotations of the AWS Load Balancer Controller (docs/guide/ingress/annotations.md, v3.5.0)."""
    prefix = "alb.ingress.kubernetes.io"
    annotations = {
        f"{prefix}/scheme": "internet-facing" if exposure.internet_facing else "internal",
        f"{prefix}/target-type": "ip",
        f"{prefix}/group.name": exposure.group,
        f"{prefix}/security-groups": exposure.security_group,
        f"{prefix}/manage-backend-security-group-rules": "false",
        # Ignored by the controller while security-groups is set; stated so that the Ingress
        # alone says who may reach it, and stays limited should security-groups ever go (the
        # controller's default is 0.0.0.0/0). Every member states the same set: no conflict.
        f"{prefix}/inbound-cidrs": ",".join(exposure.inbound_cidrs),
        f"{prefix}/listen-ports": json.dumps([{"HTTPS" if p == 443 else "HTTP": p} for p in exposure.listen_ports]),
        f"{prefix}/healthcheck-path": f"{path_prefix(namespace)}/",
        f"{prefix}/success-codes": "200",
    }
    if exposure.alb_subnets:
        annotations[f"{prefix}/subnets"] = ",".join(exposure.alb_subnets)
    if exposure.certificate_arn:
        annotations[f"{prefix}/certificate-arn"] = exposure.certificate_arn
        annotations[f"{prefix}/ssl-redirect"] = "443"
    return annotations


def network_policy_spec(exposure: ViewerExposure) -> dict[str, Any]:
    return {
        "pod_selector": {"match_labels": LABELS},
        "policy_types": ["Ingress"],
        "ingress": [{"from_": [{"ip_block": {"cidr": cidr}} for cidr in exposure.alb_subnet_cidrs],
                     "ports": [{"protocol": "TCP", "port": VIEWER_PORT}]}],
    }


@dataclass(frozen=True, kw_only=True)
class RunViewerArgs(SystemPodArgs):
    """It shows the namespace's jobs (its path on the ALB is the namespace's); on a platform stack it
    also waits for the load balancer controller."""

    exposure: ViewerExposure
    """The environment's load balancer."""


class RunViewer(pulumi.ComponentResource):
    def __init__(self, name: str, args: RunViewerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:RunViewer", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on)
        metadata = k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=args.namespace, labels=LABELS)
        skips = checkov_skips(SKIP_REASONS)
        spec: Any = deployment_spec(image=args.image, namespace=args.namespace, system_pool=args.system_pool,
                                    checkpoints_sub_path=args.checkpoints_sub_path)
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment", metadata=k8s.meta.v1.ObjectMetaArgs(
                name=NAME, namespace=args.namespace, labels=LABELS, annotations=skips), spec=spec, opts=child)
        policy: Any = network_policy_spec(args.exposure)
        self.service = k8s.core.v1.Service(f"{name}-service", metadata=metadata, spec={
            "type": "ClusterIP", "selector": LABELS,
            "ports": [{"name": "http", "port": VIEWER_PORT, "target_port": VIEWER_PORT, "protocol": "TCP"}],
        }, opts=child)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-netpol", metadata=k8s.meta.v1.ObjectMetaArgs(name="allow-viewer-from-alb", namespace=args.namespace),
            spec=policy, opts=child)
        self.ingress = k8s.networking.v1.Ingress(
            f"{name}-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=args.namespace, labels=LABELS,
                                                annotations=ingress_annotations(args.exposure, args.namespace)),
            spec={"ingress_class_name": INGRESS_CLASS, "rules": [{"http": {"paths": [{
                "path": path_prefix(args.namespace), "path_type": "Prefix",
                "backend": {"service": {"name": NAME, "port": {"number": VIEWER_PORT}}}}]}}]},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.service, *args.depends_on]))
        self.register_outputs({})
