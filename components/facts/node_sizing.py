"""What a pod can have on a node, computed from instance facts (pure, plain values in and out).

A node's allocatable CPU and memory is its capacity minus what EKS's AL2023 bootstrap (nodeadm)
reserves for the kubelet and runtime, minus the eviction threshold. Of that, every DaemonSet the
platform installs takes its requests first; a training pod may have the rest. Requesting more
leaves the pod Pending while the Cluster Autoscaler (whose template node is the whole instance)
keeps adding nodes, so the numbers are computed, type by type, from the same rules nodeadm uses.

The config model checks jobs against these numbers and the workload sizes pods with them, so
this module sits below the config model: it takes instance type names, not pool objects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from components.facts.instance_types import INSTANCE_TYPES, InstanceType

# nodeadm's kube-reserved CPU: a share of each range of the node's millicores, in 1/100 %
# (awslabs/amazon-eks-ami@81fec2e:nodeadm/internal/kubelet/config.go getCPUMillicoresToReserve):
# 6 % of the first core, 1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest.
KUBE_RESERVED_CPU_TIERS: tuple[tuple[int | None, int], ...] = ((1000, 600), (2000, 100), (4000, 50), (None, 25))
# nodeadm's kube-reserved memory: 11 MiB per pod of the ENI-based max pods, plus 255 MiB (same
# file, getMemoryMebibytesToReserve), and its hard eviction threshold `memory.available: 100Mi`.
KUBE_RESERVED_MIB_PER_POD, KUBE_RESERVED_MIB_BASE = 11, 255
EVICTION_HARD_MEMORY_MIB = 100
# Managed node groups cap the kubelet's maxPods at 110 below 30 vCPUs and 250 above (EKS User
# Guide, create-managed-node-group: "managed node groups enforce a maximum number on maxPods").
# nodeadm still computes kube-reserved from the uncapped ENI-based value (config.go, same file).
MNG_MAX_PODS_SMALL, MNG_MAX_PODS_LARGE, MNG_LARGE_FROM_VCPUS = 110, 250, 30
# The kernel, firmware and EFA's pre-allocated huge pages never reach the kubelet's capacity:
# EC2's nominal memory is more than the node reports. A planning margin, not a measurement.
KERNEL_MEMORY_FRACTION = 0.05
# 2 MiB huge pages an EFA node may pre-allocate for libfabric (AWS's EKS EFA examples request
# 5120Mi per whole-node pod: aws-ia/terraform-aws-eks-blueprints patterns/nvidia-gpu-efa,
# awsome-distributed-training nccl-tests.yaml). Our pods request none: they run libfabric with
# FI_EFA_USE_HUGE_PAGE=0 (workload/fabric_env.py), so DataLoader workers can fork. Memory a node
# holds as huge pages is not in its memory capacity, so it is counted as unavailable here.
EFA_HUGEPAGES_MIB = 5120


@dataclass(frozen=True)
class DaemonSetPod:
    """One pod every node (or every EFA node) of the platform runs, with what it requests."""

    pod: str
    installed_by: str  # the EKS add-on or Helm chart that creates it
    cpu_millis: int
    memory_mib: int
    source: str
    efa_nodes_only: bool = False


# Every DaemonSet the platform installs that lands on a GPU node (their charts tolerate every
# taint or are given the GPU taint's toleration), with the requests of the pinned versions.
# tests/test_node_sizing.py checks that this table names every add-on and chart the plans install.
NODE_DAEMONSETS: tuple[DaemonSetPod, ...] = (
    DaemonSetPod("aws-node", "vpc-cni", 25, 0,
                 "aws/eks-charts@5239609 stable/aws-vpc-cni/values.yaml resources.requests"),
    DaemonSetPod("kube-proxy", "kube-proxy", 100, 0,
                 "observed: kubectl describe of eks/kube-proxy v1.34.3-eksbuild.5 (not documented)"),
    DaemonSetPod("eks-pod-identity-agent", "eks-pod-identity-agent", 0, 0,
                 "aws/eks-pod-identity-agent@d4dc0f3 charts/eks-pod-identity-agent/values.yaml: resources {}"),
    DaemonSetPod("eks-node-monitoring-agent", "eks-node-monitoring-agent", 10, 30,
                 "aws/eks-node-monitoring-agent chart 1.4.0 values.yaml nodeAgent.resources.requests"),
    DaemonSetPod("dcgm-server", "eks-node-monitoring-agent", 0, 0,
                 "aws/eks-node-monitoring-agent chart 1.4.0 values.yaml dcgmAgent.resources: {}"),
    DaemonSetPod("cloudwatch-agent", "amazon-cloudwatch-observability", 250, 128,
                 "aws-observability/helm-charts amazon-cloudwatch-observability-4.7.0 values.yaml agent.resources"),
    DaemonSetPod("fluent-bit", "amazon-cloudwatch-observability", 50, 25,
                 "same file, containerLogs.fluentBit.resources"),
    DaemonSetPod("dcgm-exporter", "amazon-cloudwatch-observability", 250, 128,
                 "same file, dcgmExporter.resources"),
    DaemonSetPod("efs-csi-node", "aws-efs-csi-driver", 0, 0,
                 "kubernetes-sigs/aws-efs-csi-driver v2.2.0 charts/aws-efs-csi-driver/values.yaml: resources {}"),
    DaemonSetPod("s3-csi-node", "aws-mountpoint-s3-csi-driver", 10, 40,
                 "awslabs/mountpoint-s3-csi-driver v2.2.2 charts/aws-mountpoint-s3-csi-driver/values.yaml node.resources"),
    # Counted on every stack's nodes, though only a stack with storage.lustre installs it. Like the
    # S3 row, the plugin container only: its two sidecars (10m / 32Mi each) fit in the rounding
    # that leaves every pod share short of a whole vCPU and GiB.
    DaemonSetPod("fsx-csi-node", "aws-fsx-csi-driver", 10, 40,
                 "kubernetes-sigs/aws-fsx-csi-driver@5b22712 charts/aws-fsx-csi-driver/values.yaml (chart 1.17.0) "
                 "node.resources"),
    DaemonSetPod("nvidia-device-plugin", "nvidia-device-plugin", 0, 0,
                 "NVIDIA/k8s-device-plugin v0.18.0 deployments/helm/nvidia-device-plugin/values.yaml: resources {}"),
    DaemonSetPod("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", 10, 20,
                 "aws/eks-charts@5239609 stable/aws-efa-k8s-device-plugin/values.yaml (chart v0.5.30)",
                 efa_nodes_only=True),
)


@dataclass(frozen=True)
class NodeHeadroom:
    """How one node's CPU and memory divide: reserved by EKS, taken by DaemonSets, left for pods."""

    instance_type: str
    kube_reserved_cpu_millis: int
    daemonset_cpu_millis: int
    kube_reserved_memory_mib: int
    daemonset_memory_mib: int
    unseen_memory_mib: int  # kernel, firmware, eviction threshold, EFA huge pages
    pod_cpu: float
    pod_memory_gib: float


def kube_reserved_cpu_millis(vcpus: int) -> int:
    total, reserved, start = vcpus * 1000, 0, 0
    for end, share in KUBE_RESERVED_CPU_TIERS:
        top = total if end is None else min(total, end)
        if top > start:
            reserved += (top - start) * share // 10000
        start = end or total
    return reserved


def eni_max_pods(instance: InstanceType) -> int:
    """nodeadm's CalcMaxPods: ENIs on the default card x (IPv4 per ENI - 1) + 2 (eni_max_pods.go)."""
    return instance.enis * (instance.ipv4_per_eni - 1) + 2


def kubelet_max_pods(instance: InstanceType) -> int:
    """The kubelet's maxPods on a managed node group node (the ENI value under the MNG cap)."""
    cap = MNG_MAX_PODS_SMALL if instance.vcpus < MNG_LARGE_FROM_VCPUS else MNG_MAX_PODS_LARGE
    return min(eni_max_pods(instance), cap)


def kube_reserved_memory_mib(instance: InstanceType) -> int:
    return KUBE_RESERVED_MIB_PER_POD * eni_max_pods(instance) + KUBE_RESERVED_MIB_BASE


def daemonset_requests(*, efa: bool) -> tuple[int, int]:
    """(CPU millicores, memory MiB) that the platform's DaemonSets request on one node."""
    pods = [p for p in NODE_DAEMONSETS if efa or not p.efa_nodes_only]
    return sum(p.cpu_millis for p in pods), sum(p.memory_mib for p in pods)


def node_headroom(instance_type: str, *, efa: bool) -> NodeHeadroom:
    instance = INSTANCE_TYPES[instance_type]
    reserved_cpu, reserved_memory = kube_reserved_cpu_millis(instance.vcpus), kube_reserved_memory_mib(instance)
    daemon_cpu, daemon_memory = daemonset_requests(efa=efa)
    capacity_mib = instance.memory_gib * 1024
    unseen = math.ceil(capacity_mib * KERNEL_MEMORY_FRACTION) + EVICTION_HARD_MEMORY_MIB + (EFA_HUGEPAGES_MIB if efa else 0)
    return NodeHeadroom(
        instance_type=instance_type,
        kube_reserved_cpu_millis=reserved_cpu,
        daemonset_cpu_millis=daemon_cpu,
        kube_reserved_memory_mib=reserved_memory,
        daemonset_memory_mib=daemon_memory,
        unseen_memory_mib=unseen,
        pod_cpu=(instance.vcpus * 1000 - reserved_cpu - daemon_cpu) / 1000,
        pod_memory_gib=(capacity_mib - unseen - reserved_memory - daemon_memory) / 1024,
    )


def allocatable(instance_types: Sequence[str], *, efa: bool = False) -> tuple[float, float]:
    """(cpu, memory GiB) a pod can have on any node launched from `instance_types` once the
    platform's DaemonSets run there: a pool may launch any of its types, so the smallest decides."""
    rooms = [node_headroom(name, efa=efa) for name in instance_types]
    return min(r.pod_cpu for r in rooms), min(r.pod_memory_gib for r in rooms)


def pod_share(instance_types: Sequence[str], *, gpus: int, gpus_per_node: int, efa: bool = False) -> tuple[int, int]:
    """(cpu, memory GiB) of a pod using `gpus` of a node's GPUs: the same share of CPU and memory,
    in whole units rounded down (the remainder stays free for the node's daemons)."""
    cpu, memory = allocatable(instance_types, efa=efa)
    share = gpus / gpus_per_node
    return max(1, math.floor(cpu * share)), max(1, math.floor(memory * share))
