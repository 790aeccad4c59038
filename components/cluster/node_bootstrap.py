"""Launch template user data for EKS managed node groups on AL2023 (pure).

nodeadm reads `NodeConfig` documents from MIME multipart user data. A managed node group whose
launch template names no AMI merges its own NodeConfig (cluster endpoint, CA, maxPods) with
ours, so ours carries only what we add (EKS User Guide, launch-templates: user data "must be in
the MIME multi-part archive format"; awslabs/amazon-eks-ami nodeadm/doc/examples.md).

What we add: types with instance-store NVMe get `localStorage: RAID0`. nodeadm then builds one
RAID0 array of all local disks, mounts it at /mnt/k8s-disks/0 and bind-mounts the kubelet's,
containerd's and the pod logs' directories onto it (amazon-eks-ami setup-local-disks), so image
layers and every emptyDir (/tmp, scratch) live on NVMe instead of the gp3 root volume.
"""

from __future__ import annotations

import base64

import yaml

from components.config import NodePoolConfig
from components.facts.instance_types import INSTANCE_TYPES

BOUNDARY = "==NODEADM=="


def node_config(pool: NodePoolConfig) -> dict | None:
    """Our NodeConfig for the pool, or None when the defaults are right."""
    if not all(INSTANCE_TYPES[t].has_instance_store for t in pool.instance_types):
        return None
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
            "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}}}


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
