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
# Room kept free beyond kube-reserved and the DaemonSet table, on every node: the table lists
# what this platform installs, not what the account's owners may add to every node later (a
# security or runtime-monitoring agent, a log shipper; an add-on bump that raises a request
# before its row is read again). Without it the whole-node pod's request is exact to the
# millicore (0.67 vCPU left on p5.48xlarge, 30m on g6e.12xlarge: gpu-training#27 item 5), so one
# more DaemonSet pod leaves the trainer Pending on a node the Cluster Autoscaler believes fits
# it (its template node is the whole instance minus the DaemonSets it knows), and the autoscaler
# keeps adding nodes up to the pool's max. The figures are the issue's: 2 % of the node's vCPUs,
# at least 2 vCPU, and 2 % of its memory, at least 1 GiB (a typical node agent requests well
# under 0.5 GiB: the largest row below is 128 MiB). A planning margin, not a measurement.
MARGIN_SHARE = 0.02
MIN_MARGIN_CPU_MILLIS = 2000
MIN_MARGIN_MEMORY_MIB = 1024


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
# A row is one pod: the sum of its containers' requests, sidecars included (a CSI node pod's
# node-driver-registrar and liveness-probe request CPU too; the whole-node pod is rounded down to
# whole CPUs, but what that leaves over is whatever the arithmetic gives, from 0 up, so it is no
# room to count on). An init container counts only where it asks more than the pod's containers
# together; none here does (aws-vpc-cni-init: 25m of aws-node's 50m). Each source names the pinned build it was read from, which
# tests/test_node_sizing.py holds against the pin tables (eks_versions.ADDON_VERSIONS for every
# supported minor, the chart pins in cluster/device_plugins.py): a pin bump fails that test until
# the row is read again. EKS publishes no add-on manifests; an add-on is read from the upstream
# chart or manifest at the tag its build is made from; where that was not found, the source says
# what stands in for it. The same test checks that the table names every add-on and chart the
# plans install.
NODE_DAEMONSETS: tuple[DaemonSetPod, ...] = (
    DaemonSetPod("aws-node", "vpc-cni", 25 + 25, 0,
                 "add-on v1.23.1-eksbuild.1: read at aws/amazon-vpc-cni-k8s tag v1.23.0 (0c65d58) "
                 "config/master/aws-k8s-cni.yaml (no v1.23.1 tag in the mirror of 2026-08-20; v1.22.4 had the "
                 "same requests, so assumed unchanged), rendered from its chart aws-vpc-cni: "
                 "containers aws-node and aws-eks-nodeagent (the network policy agent, always in the pod) "
                 "request cpu 25m each and no memory; the init container aws-vpc-cni-init 25m"),
    DaemonSetPod("kube-proxy", "kube-proxy", 100, 0,
                 "add-ons v1.34.6-eksbuild.13, v1.35.3-eksbuild.13, v1.36.0-eksbuild.14: not found (EKS publishes no "
                 "kube-proxy manifest); v1.34.3-eksbuild.5's value, cpu 100m and no memory, observed with kubectl "
                 "describe, the only one found"),
    DaemonSetPod("eks-pod-identity-agent", "eks-pod-identity-agent", 0, 0,
                 "add-on v1.3.10-eksbuild.3 (its DaemonSet is chart eks-pod-identity-agent 1.3.10, agent 0.1.37): "
                 "chart 1.3.10 not found; aws/eks-pod-identity-agent@d4dc0f3 (release 0.1.37) "
                 "charts/eks-pod-identity-agent/values.yaml, chart 1.2.0, the only one found: resources {} "
                 "(the template gives the agent container no other)"),
    DaemonSetPod("eks-node-monitoring-agent", "eks-node-monitoring-agent", 10, 30,
                 "add-on v1.7.0-eksbuild.1: aws/eks-node-monitoring-agent tag v1.7.0 (c399089) "
                 "charts/eks-node-monitoring-agent/values.yaml (chart 1.7.0) nodeAgent.resources.requests, one container"),
    DaemonSetPod("dcgm-server", "eks-node-monitoring-agent", 0, 0,
                 "add-on v1.7.0-eksbuild.1: aws/eks-node-monitoring-agent tag v1.7.0 (c399089) "
                 "charts/eks-node-monitoring-agent/values.yaml (chart 1.7.0) dcgmAgent.resources: {}, one container"),
    DaemonSetPod("cloudwatch-agent", "amazon-cloudwatch-observability", 250, 128,
                 "add-on v6.7.0-eksbuild.1: chart 6.7.0 not found; aws-observability/helm-charts "
                 "charts/amazon-cloudwatch-observability/values.yaml agent.resources.requests of chart 6.5.0 "
                 "(branch release-6.5.0, a44f1b3) and 6.4.0 (tag, f4ad2e3), the newest found, equal (the larger of "
                 "the two is either); one container (operator internal/manifests/collector)"),
    DaemonSetPod("fluent-bit", "amazon-cloudwatch-observability", 50, 25,
                 "add-on v6.7.0-eksbuild.1: chart 6.7.0 not found; aws-observability/helm-charts "
                 "charts/amazon-cloudwatch-observability/values.yaml containerLogs.fluentBit.resources.requests of "
                 "chart 6.5.0 (a44f1b3) and 6.4.0 (f4ad2e3), equal; one container"),
    DaemonSetPod("dcgm-exporter", "amazon-cloudwatch-observability", 250, 128,
                 "add-on v6.7.0-eksbuild.1: chart 6.7.0 not found; aws-observability/helm-charts "
                 "charts/amazon-cloudwatch-observability/values.yaml dcgmExporter.resources.requests of "
                 "chart 6.5.0 (a44f1b3) and 6.4.0 (f4ad2e3), equal; one container (operator "
                 "internal/manifests/dcgmexporter). node-exporter needs otelContainerInsights, off by default"),
    DaemonSetPod("efs-csi-node", "aws-efs-csi-driver", 0, 0,
                 "add-on v3.4.1-eksbuild.1: kubernetes-sigs/aws-efs-csi-driver tag v3.4.1 (3fcc6bd) "
                 "charts/aws-efs-csi-driver/values.yaml (chart 4.4.1): node.resources, "
                 "sidecars.nodeDriverRegistrar.resources and sidecars.livenessProbe.resources all {}"),
    DaemonSetPod("s3-csi-node", "aws-mountpoint-s3-csi-driver", 10 + 10 + 10, 40 + 40 + 40,
                 "add-on v2.7.0-eksbuild.1: awslabs/mountpoint-s3-csi-driver tag v2.7.0 (a2d4b06) "
                 "charts/aws-mountpoint-s3-csi-driver (chart 2.7.0): node.resources.requests 10m/40Mi, which "
                 "templates/node.yaml also gives node-driver-registrar and liveness-probe (their resources {} "
                 "default to it; deploy/kubernetes/base/node.yaml agrees). Mountpoint Pods request nothing "
                 "unless the PV sets mountpointContainerResources*, which ours do not"),
    # Counted on every stack's nodes, though only a stack with storage.lustre installs it.
    DaemonSetPod("fsx-csi-node", "aws-fsx-csi-driver", 10 + 10 + 10, 40 + 32 + 32,
                 "add-on v1.9.0-eksbuild.1: kubernetes-sigs/aws-fsx-csi-driver tag v1.9.0 (0267bab) "
                 "charts/aws-fsx-csi-driver/values.yaml (chart 1.17.0): node.resources.requests 10m/40Mi, "
                 "sidecars.nodeDriverRegistrar and sidecars.livenessProbe 10m/32Mi each"),
    DaemonSetPod("nvidia-device-plugin", "nvidia-device-plugin", 0, 0,
                 "chart 0.20.0: NVIDIA/k8s-device-plugin tag v0.20.0 (460230b) "
                 "deployments/helm/nvidia-device-plugin/values.yaml: resources {}; no config, so no "
                 "config-manager sidecar; gfd and nfd off"),
    DaemonSetPod("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", 10, 20,
                 "chart 0.5.30: aws/eks-charts@bfe91c4 (the chart's v0.5.30, unchanged at 5239609) "
                 "stable/aws-efa-k8s-device-plugin/values.yaml resources.requests, one container",
                 efa_nodes_only=True),
)


# Add-ons and charts the platform installs whose pods never land on a GPU node: Deployments
# pinned to the system pool, with no toleration of the GPU taint (values in components/cluster,
# components/workload, components/secrets). Everything else the plans install must have rows above.
OFF_GPU_NODES: dict[str, str] = {
    "coredns": "EKS add-on Deployment; no toleration of the GPU taint",
    "cluster-autoscaler": "Deployment, nodeSelector the system pool (cluster/autoscaler.py)",
    "kueue": "controller Deployment on the system pool (workload/controllers.py)",
    "jobset": "controller Deployment on the system pool (workload/controllers.py)",
    "external-secrets": "controller Deployments on the system pool (secrets/sync.py)",
    "aws-load-balancer-controller": "controller Deployment on the system pool (cluster/load_balancer_controller.py); "
                                    "chart 3.5.0 has no DaemonSet",
}


class UnsizedInstallError(Exception):
    """An add-on or chart the plan installs that neither has rows in NODE_DAEMONSETS nor is
    known to stay off GPU nodes: its DaemonSet (if any) would eat the training pod's room."""


def check_sized(name: str, *, kind: str) -> None:
    """Fail the plan for an install whose node pods the sizing does not count. `kind` says what
    `name` is ("EKS add-on", "Helm chart") for the message."""
    sized = {pod.installed_by for pod in NODE_DAEMONSETS}
    if name not in sized and name not in OFF_GPU_NODES:
        raise UnsizedInstallError(
            f"{kind} {name} is installed, but components/facts/node_sizing.py neither lists its DaemonSet pods "
            "(NODE_DAEMONSETS) nor says it stays off GPU nodes (OFF_GPU_NODES): the training pod's CPU and "
            "memory request would not leave room for it. Read its pinned chart or manifest, add a row per "
            "DaemonSet pod with its requests (sidecars included), or an OFF_GPU_NODES entry with the reason")


@dataclass(frozen=True)
class NodeHeadroom:
    """How one node's CPU and memory divide: reserved by EKS, taken by DaemonSets, left for pods."""

    instance_type: str
    kube_reserved_cpu_millis: int
    daemonset_cpu_millis: int
    kube_reserved_memory_mib: int
    daemonset_memory_mib: int
    unseen_memory_mib: int  # kernel, firmware, eviction threshold, EFA huge pages
    margin_cpu_millis: int  # kept free for DaemonSets the table does not know (MARGIN_SHARE)
    margin_memory_mib: int
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


def margin_cpu_millis(vcpus: int) -> int:
    return max(MIN_MARGIN_CPU_MILLIS, math.ceil(vcpus * 1000 * MARGIN_SHARE))


def margin_memory_mib(memory_gib: int) -> int:
    return max(MIN_MARGIN_MEMORY_MIB, math.ceil(memory_gib * 1024 * MARGIN_SHARE))


def node_headroom(instance_type: str, *, efa: bool) -> NodeHeadroom:
    instance = INSTANCE_TYPES[instance_type]
    reserved_cpu, reserved_memory = kube_reserved_cpu_millis(instance.vcpus), kube_reserved_memory_mib(instance)
    daemon_cpu, daemon_memory = daemonset_requests(efa=efa)
    margin_cpu, margin_memory = margin_cpu_millis(instance.vcpus), margin_memory_mib(instance.memory_gib)
    capacity_mib = instance.memory_gib * 1024
    unseen = math.ceil(capacity_mib * KERNEL_MEMORY_FRACTION) + EVICTION_HARD_MEMORY_MIB + (EFA_HUGEPAGES_MIB if efa else 0)
    return NodeHeadroom(
        instance_type=instance_type,
        kube_reserved_cpu_millis=reserved_cpu,
        daemonset_cpu_millis=daemon_cpu,
        kube_reserved_memory_mib=reserved_memory,
        daemonset_memory_mib=daemon_memory,
        unseen_memory_mib=unseen,
        margin_cpu_millis=margin_cpu,
        margin_memory_mib=margin_memory,
        pod_cpu=(instance.vcpus * 1000 - reserved_cpu - daemon_cpu - margin_cpu) / 1000,
        pod_memory_gib=(capacity_mib - unseen - reserved_memory - daemon_memory - margin_memory) / 1024,
    )


def allocatable(instance_types: Sequence[str], *, efa: bool = False) -> tuple[float, float]:
    """(cpu, memory GiB) a pod can have on any node launched from `instance_types` once the
    platform's DaemonSets run there and the margin is kept free: a pool may launch any of its
    types, so the smallest decides."""
    rooms = [node_headroom(name, efa=efa) for name in instance_types]
    return min(r.pod_cpu for r in rooms), min(r.pod_memory_gib for r in rooms)


def pod_share(instance_types: Sequence[str], *, gpus: int, gpus_per_node: int, efa: bool = False) -> tuple[int, int]:
    """(cpu, memory GiB) of a pod using `gpus` of a node's GPUs: the same share of CPU and memory,
    in whole units rounded down (the remainder stays free for the node's daemons)."""
    cpu, memory = allocatable(instance_types, efa=efa)
    share = gpus / gpus_per_node
    return max(1, math.floor(cpu * share)), max(1, math.floor(memory * share))


# /dev/shm: PyTorch's DataLoader workers hand each batch to the training process through shared
# memory (torch.multiprocessing's default file_descriptor strategy, backed by /dev/shm), and each
# worker keeps `prefetch_factor` batches (default 2) in flight (torch.utils.data.DataLoader docs).
# Too small a /dev/shm fails a worker with "bus error" / "No space left on device" mid-epoch.
# A planning figure per worker, not a measurement: 2 batches of up to 512 MiB of decoded samples.
SHM_GIB_PER_LOADER_WORKER = 1
# A memory-backed emptyDir's files count against the container's memory limit (Kubernetes docs,
# Volumes, emptyDir: "files you write count against your container's memory limit"), so /dev/shm
# is carved out of the pod's memory, not added to it: the trainer's processes keep at least 3/4.
SHM_MAX_SHARE_OF_POD_MEMORY = 0.25


def shared_memory_gib(*, gpus: int, loader_workers_per_gpu: int, pod_memory_gib: int) -> int:
    """Default /dev/shm size: one training process per GPU, each with its loader workers, each
    worker SHM_GIB_PER_LOADER_WORKER; at most SHM_MAX_SHARE_OF_POD_MEMORY of the pod's memory,
    at least 1 GiB."""
    wanted = gpus * loader_workers_per_gpu * SHM_GIB_PER_LOADER_WORKER
    return max(1, min(wanted, math.floor(pod_memory_gib * SHM_MAX_SHARE_OF_POD_MEMORY)))
