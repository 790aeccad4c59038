"""Headroom by computation: what EKS reserves and the platform's DaemonSets take, per GPU type."""

import math
import re

import pulumi
import pytest

from components.cluster.device_plugins import EFA_CHART_VERSION, NVIDIA_CHART_VERSION
from components.common.eks_addons import managed_addon
from components.common.helm import helm_release
from components.config.node_pools import CAPACITY_TYPES
from components.facts.eks_versions import ADDON_VERSIONS, SUPPORTED_KUBERNETES_VERSIONS
from components.facts.instance_types import INSTANCE_TYPES
from components.facts.node_sizing import (
    NODE_DAEMONSETS,
    OFF_GPU_NODES,
    UnsizedInstallError,
    check_sized,
    daemonset_requests,
    eni_max_pods,
    kube_reserved_cpu_millis,
    kube_reserved_memory_mib,
    kubelet_max_pods,
    margin_cpu_millis,
    margin_memory_mib,
    node_headroom,
    pod_share,
)

GPU_TYPES = sorted(name for name, t in INSTANCE_TYPES.items() if t.has_gpu)


# nodeadm's tiers: 6 % of core 1, 1 % of core 2, 0.5 % of cores 3-4, 0.25 % above (60, 70, 80 m, ...).
@pytest.mark.parametrize(("vcpus", "millis"), [(1, 60), (2, 70), (4, 80), (8, 90), (48, 190), (96, 310), (192, 550)])
def test_kube_reserved_cpu(vcpus, millis):
    assert kube_reserved_cpu_millis(vcpus) == millis


# (type, ENI max pods, kubelet max pods under the MNG cap, kube-reserved MiB = 11 x ENI max pods + 255)
@pytest.mark.parametrize(("name", "eni_pods", "kubelet_pods", "reserved_mib"), [
    ("p5.48xlarge", 100, 100, 1355),
    ("p5en.48xlarge", 198, 198, 2433),
    ("p4d.24xlarge", 737, 250, 8362),     # the cap does not lower kube-reserved (nodeadm config.go)
    ("g6e.12xlarge", 292, 250, 3467),
    ("g5.xlarge", 58, 58, 893),
    ("m7i.xlarge", 58, 58, 893),
])
def test_max_pods_and_reserved_memory(name, eni_pods, kubelet_pods, reserved_mib):
    instance = INSTANCE_TYPES[name]
    assert (eni_max_pods(instance), kubelet_max_pods(instance), kube_reserved_memory_mib(instance)) == (
        eni_pods, kubelet_pods, reserved_mib)


def test_daemonsets_on_an_efa_node():
    """780m CPU / 555 MiB on an EFA node: the EFA device plugin's 10m / 20Mi on top of the rest
    (the FSx CSI node's 30m / 104Mi, sidecars included, counted everywhere)."""
    assert daemonset_requests(efa=True) == (780, 555)
    assert daemonset_requests(efa=False) == (770, 535)


def test_a_csi_node_pod_counts_its_sidecars():
    """The S3 chart gives its sidecars the plugin's requests; the FSx chart gives them 10m / 32Mi."""
    rows = {p.pod: p for p in NODE_DAEMONSETS}
    assert (rows["s3-csi-node"].cpu_millis, rows["s3-csi-node"].memory_mib) == (30, 120)
    assert (rows["fsx-csi-node"].cpu_millis, rows["fsx-csi-node"].memory_mib) == (30, 104)
    assert rows["aws-node"].cpu_millis == 50  # aws-node + the network policy agent


@pytest.mark.parametrize(("name", "efa"), [(n, False) for n in GPU_TYPES] + [(n, True) for n in GPU_TYPES if INSTANCE_TYPES[n].has_efa])
def test_a_whole_node_pod_fits_beside_everything_the_platform_runs(name, efa):
    """For every GPU type the config accepts: kube-reserved + every DaemonSet + the training pod's
    request fit the node, CPU and memory, and leave at least the margin free (2 % of the vCPUs,
    at least 2, and 2 % of the memory, at least 1 GiB) for a DaemonSet the table does not know,
    but less than one vCPU / one GiB beyond it (the pod takes what is left, in whole units)."""
    instance = INSTANCE_TYPES[name]
    room = node_headroom(name, efa=efa)
    cpu, memory_gib = pod_share([name], gpus=instance.gpus, gpus_per_node=instance.gpus, efa=efa)
    free_cpu_millis = instance.vcpus * 1000 - room.kube_reserved_cpu_millis - room.daemonset_cpu_millis - cpu * 1000
    assert max(2000, instance.vcpus * 20) <= free_cpu_millis < max(2000, instance.vcpus * 20) + 1000
    free_memory_mib = (instance.memory_gib * 1024 - room.unseen_memory_mib - room.kube_reserved_memory_mib
                       - room.daemonset_memory_mib - memory_gib * 1024)
    margin_mib = max(1024, instance.memory_gib * 1024 * 0.02)
    assert margin_mib <= free_memory_mib < margin_mib + 1024
    assert cpu == math.floor(room.pod_cpu) and memory_gib == math.floor(room.pod_memory_gib)


# (vCPUs, margin millicores): 2 % of the cores, never under 2 vCPU.
@pytest.mark.parametrize(("vcpus", "millis"), [(4, 2000), (48, 2000), (96, 2000), (100, 2000), (101, 2020), (192, 3840)])
def test_cpu_margin(vcpus, millis):
    assert margin_cpu_millis(vcpus) == millis


# (memory GiB, margin MiB): 2 % of the memory, never under 1 GiB.
@pytest.mark.parametrize(("memory_gib", "mib"), [(16, 1024), (32, 1024), (50, 1024), (64, 1311), (2048, 41944)])
def test_memory_margin(memory_gib, mib):
    assert margin_memory_mib(memory_gib) == mib


def test_p5_numbers():
    """192 vCPU - 550m kube-reserved - 780m DaemonSets - 3840m margin = 186.83 (the request: 186,
    4.67 vCPU free for what the table does not list)."""
    room = node_headroom("p5.48xlarge", efa=True)
    assert (room.kube_reserved_cpu_millis, room.daemonset_cpu_millis, room.margin_cpu_millis, room.pod_cpu) == (
        550, 780, 3840, 186.83)
    assert pod_share(["p5.48xlarge"], gpus=8, gpus_per_node=8, efa=True) == (186, 1897)


def test_staging_g6e_keeps_two_vcpus_free():
    """The review's worst case: 30m left on g6e.12xlarge before the margin; 2.03 vCPU now."""
    room = node_headroom("g6e.12xlarge", efa=True)
    assert room.pod_cpu == 45.03
    assert pod_share(["g6e.12xlarge"], gpus=4, gpus_per_node=4, efa=True)[0] == 45


def test_a_spot_pool_is_sized_by_its_smallest_type():
    assert pod_share(["g6.48xlarge", "g5.48xlarge"], gpus=8, gpus_per_node=8)[0] == 186
    # g5.12xlarge's 15 ENIs make nodeadm reserve 8362 MiB (g6.12xlarge: 2829): g5 decides.
    # 192 GiB - 5 % - 100 MiB - 8362 MiB - 535 MiB of DaemonSets - 3933 MiB margin = 169.8 GiB;
    # half of it is 84.
    assert pod_share(["g6.12xlarge", "g5.12xlarge"], gpus=2, gpus_per_node=4) == (22, 84)
    assert pod_share(["g5.12xlarge"], gpus=2, gpus_per_node=4) == pod_share(["g6.12xlarge", "g5.12xlarge"], gpus=2, gpus_per_node=4)


def test_the_table_names_every_daemonset_the_plans_install(plan_of):
    """A DaemonSet added to the platform without a row here would eat the training pod's room:
    every add-on and chart of the dev, staging and prod plans has rows, or is known to stay off
    GPU nodes; no row is left over; and no plain manifest of the plans is a DaemonSet."""
    installed: set[str] = set()
    for stack in ("dev", "staging", "prod"):
        plan = plan_of(stack)
        installed |= {a["inputs"]["addonName"] for a in plan.of_type("aws:eks/addon:Addon")}
        installed |= {r["inputs"]["chart"].rsplit("/", 1)[-1] for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
        kinds = {r["type"] for r in plan.resources} | {str(m.get("kind")) for m in plan.manifests()}
        assert not {k for k in kinds if "DaemonSet" in k}, stack
    assert installed - set(OFF_GPU_NODES) == {p.installed_by for p in NODE_DAEMONSETS}
    assert set(OFF_GPU_NODES) <= installed, "an OFF_GPU_NODES entry the plans no longer install"


@pytest.mark.parametrize(("install", "kind"), [
    (lambda: managed_addon("x", cluster_name="c", addon_name="aws-guardduty-agent", kubernetes_version="1.36",
                           opts=pulumi.ResourceOptions()), "EKS add-on aws-guardduty-agent"),
    (lambda: helm_release("x", chart="oci://public.ecr.aws/example/node-problem-detector", version="1.0.0",
                          namespace="kube-system", values={}, opts=pulumi.ResourceOptions()),
     "Helm chart node-problem-detector"),
])
def test_the_plan_fails_for_an_install_the_sizing_does_not_count(install, kind):
    """Before any resource exists: an add-on or chart without DaemonSet rows stops the program."""
    with pytest.raises(UnsizedInstallError, match=kind):
        install()


@pytest.mark.parametrize("name", sorted({p.installed_by for p in NODE_DAEMONSETS} | set(OFF_GPU_NODES)))
def test_every_known_install_passes_the_check(name):
    check_sized(name, kind="EKS add-on")


# The Helm charts the platform pins outside the add-on table (components/cluster/device_plugins.py).
CHART_PINS = {"nvidia-device-plugin": NVIDIA_CHART_VERSION, "aws-efa-k8s-device-plugin": EFA_CHART_VERSION}


def pinned_versions(installed_by: str) -> set[str]:
    """Every version the platform pins for an add-on (one per supported minor) or a chart."""
    if installed_by in CHART_PINS:
        return {CHART_PINS[installed_by]}
    return {ADDON_VERSIONS[minor][installed_by] for minor in SUPPORTED_KUBERNETES_VERSIONS}


def names_version(source: str, version: str) -> bool:
    """`version` as a whole token of `source`, with or without a leading v ("v1.7.0-eksbuild.1"
    does not name "v1.7.0-eksbuild.10", nor "0.5.3" "0.5.30")."""
    bare = re.escape(version.removeprefix("v"))
    return re.search(rf"(?<![\w.-])v?{bare}(?![\w-]|\.\d)", source) is not None


def test_names_version_takes_whole_tokens():
    assert names_version("add-on v1.7.0-eksbuild.1: ...", "v1.7.0-eksbuild.1")
    assert names_version("chart v0.5.30.", "0.5.30")
    assert not names_version("add-on v1.7.0-eksbuild.10", "v1.7.0-eksbuild.1")
    assert not names_version("chart 0.5.30", "0.5.3")
    assert not names_version("chart 10.5.3", "0.5.3")


@pytest.mark.parametrize("row", NODE_DAEMONSETS, ids=lambda row: row.pod)
def test_each_row_was_read_at_the_pinned_version(row):
    """A pin bump (an add-on build on any supported minor, or a chart) without reading the row's
    requests again at the new version fails here: the source must name every pinned version."""
    versions = pinned_versions(row.installed_by)
    missing = sorted(v for v in versions if not names_version(row.source, v))
    assert not missing, f"{row.pod}: its source names none of {missing}, pinned for {row.installed_by}; read its requests there"


def test_every_capacity_type_has_planning_numbers():
    from components.cluster.pool_scheduling import CAPACITY_PRIORITY
    from components.workload.sizing import NODE_MTBF_HOURS
    assert set(CAPACITY_PRIORITY) == set(NODE_MTBF_HOURS) == set(CAPACITY_TYPES)


# (platform stack, its jobs' plans): a team stack's jobs run on its platform's pools.
JOB_PLANS = [("dev", "dev"), ("staging", "staging"), ("prod", "prod"), ("prod", "team-vision-prod")]


def _gib(quantity: str) -> float:
    return float(quantity.removesuffix("Gi")) if quantity.endswith("Gi") else float(quantity.removesuffix("Mi")) / 1024


@pytest.mark.parametrize(("platform", "jobs"), JOB_PLANS, ids=[j for _, j in JOB_PLANS])
def test_every_planned_trainer_leaves_the_margin_free_on_each_type_of_its_pool(platform, jobs, plan_of):
    """#27 item 5 on the synthesised plans: for every JobSet, as many trainer pods as fit a node's
    GPUs, plus kube-reserved and the DaemonSet table, leave at least 2 % of the vCPUs (>= 2) and
    2 % of the memory (>= 1 GiB) free, on every instance type of the pool's node groups (the
    review measured 0.67 vCPU on p5 and 30m on staging's g6e.12xlarge before the margin)."""
    from components.cluster.pool_scheduling import POOL_LABEL
    node_groups = [g["inputs"] for g in plan_of(platform).of_type("aws:eks/nodeGroup:NodeGroup")]
    types_of = {g["labels"][POOL_LABEL]: g["instanceTypes"] for g in node_groups if g.get("instanceTypes")}
    checked = 0
    for jobset in (m for m in plan_of(jobs).manifests() if m["kind"] == "JobSet"):
        spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        requests = container["resources"]["requests"]
        efa = "vpc.amazonaws.com/efa" in requests
        for name in types_of[spec["nodeSelector"][POOL_LABEL]]:
            instance, room = INSTANCE_TYPES[name], node_headroom(name, efa=efa)
            pods = instance.gpus // int(requests["nvidia.com/gpu"])
            free_cpu = (instance.vcpus * 1000 - room.kube_reserved_cpu_millis - room.daemonset_cpu_millis
                        - pods * float(requests["cpu"]) * 1000)
            free_memory_mib = (instance.memory_gib * 1024 - room.unseen_memory_mib - room.kube_reserved_memory_mib
                               - room.daemonset_memory_mib - pods * _gib(requests["memory"]) * 1024)
            where = f"{jobset['metadata']['name']} on {name}"
            assert free_cpu >= max(2000, instance.vcpus * 20), f"{where}: {free_cpu:.0f}m free"
            assert free_memory_mib >= max(1024, instance.memory_gib * 1024 * 0.02), f"{where}: {free_memory_mib:.0f} MiB free"
            checked += 1
    assert checked, "no trainer checked: the test would pass on nothing"
