"""Launch template user data for EKS managed node groups on AL2023 (pure).

nodeadm reads `NodeConfig` documents from MIME multipart user data. A managed node group whose
launch template names no AMI merges its own NodeConfig (cluster endpoint, CA, maxPods) with
ours, so ours carries only what we add (EKS User Guide, launch-templates: user data "must be in
the MIME multi-part archive format"; awslabs/amazon-eks-ami nodeadm/doc/examples.md).

What we add: GPU pools state the kubelet's graceful node shutdown (`shutdownGracePeriod`, of it
`shutdownGracePeriodCriticalPods` for critical pods: config/node_pools.py), so a node stop or an
auto-repair replacement leaves a training pod the time its job asks to write its last checkpoint
(nodeadm's own 150 s leaves it 120 s). Types with instance-store NVMe get `localStorage: RAID0`. nodeadm then builds one
RAID0 array of all local disks, mounts it at /mnt/k8s-disks/0 and bind-mounts the kubelet's,
containerd's and the pod logs' directories onto it (amazon-eks-ami setup-local-disks), so image
layers and every emptyDir (/tmp, scratch) live on NVMe instead of the gp3 root volume.
"""

from __future__ import annotations

import base64

import yaml

from components.config import NodePoolConfig
from components.config.node_pools import SHUTDOWN_GRACE_CRITICAL_PODS_S
from components.facts.instance_types import INSTANCE_TYPES

BOUNDARY = "==NODEADM=="


def node_config(pool: NodePoolConfig) -> dict | None:
    """Our NodeConfig for the pool, or None when the defaults are right."""
    spec: dict = {}
    if pool.gpu:
        # nodeadm merges spec.kubelet.config into the kubelet's configuration (KubeletConfiguration
        # fields, durations as text): awslabs/amazon-eks-ami nodeadm/doc/examples.md.
        spec["kubelet"] = {"config": {
            "shutdownGracePeriod": f"{pool.shutdown_grace_period_seconds}s",
            "shutdownGracePeriodCriticalPods": f"{SHUTDOWN_GRACE_CRITICAL_PODS_S}s",
        }}
    if all(INSTANCE_TYPES[t].has_instance_store for t in pool.instance_types):
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    if not spec:
        return None
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


def user_data(pool: NodePoolConfig) -> str | None:
    """Base64 MIME multipart user data (what EC2 launch templates take), or None."""
    config = node_config(pool)
    if config is None:
        return None
    document = yaml.safe_dump(config, sort_keys=False)
    mime = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n\n'
        f"--{BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n\n"
        f"---\n{document}\n"
        f"--{BOUNDARY}--\n"
    )
    return base64.b64encode(mime.encode()).decode()
