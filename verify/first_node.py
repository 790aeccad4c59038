"""The first-node checklist of docs/gpu-fabric-and-capacity.md, as far as the Kubernetes API and
the launcher's logs show it: the EFA devices and GPUDirect RDMA NCCL found on each node, huge
pages and memory against the pod sizing, the pod IP budget, the Lustre client. What only a shell
inside a training pod shows (`fi_info -p efa` as the trainer's UID, `ulimit -l`, the Lustre
kernel module) is reported as a skip that names the command to run.

Each result says what it read, what it expected and what it found, and the fix. The expected
values come from the same facts the plan was built from (components/facts), so a first node that
differs from them shows here.
"""

from __future__ import annotations

from typing import Any

from components.facts.instance_types import INSTANCE_TYPES, InstanceType
from components.facts.node_sizing import EFA_HUGEPAGES_MIB, kubelet_max_pods, node_headroom
from verify import progress_log
from verify.checks import Context, JobState, container_started, gpu_nodes, name, quantity_mib, ready_pods_by_node
from verify.report import CheckResult, Diagnosis, failed, passed, skipped
from verify.stack_outputs import PoolPromise

# The well-known label the kubelet sets on every node (Kubernetes "Well-Known Labels").
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
# The FSx for Lustre CSI driver's node DaemonSet and its pods' label (kubernetes-sigs/aws-fsx-csi-driver
# v1.9.0 charts/aws-fsx-csi-driver/templates/node-daemonset.yaml). Its container loads the Lustre
# client kernel module on the node (same tag, Dockerfile: "the kernel module is node loaded via the container").
FSX_NODE_DAEMONSET = "fsx-csi-node"
FSX_NODE_PODS = "app=fsx-csi-node"
# The launcher's events carrying the fabric self-check's counts (trainer/launcher/main.py).
FABRIC_EVENTS = ("fabric_status", "fabric_check")
TRAINER_UID = 1000  # the image's user (trainer/Dockerfile), the pods' runAsUser


def _instance(node: dict[str, Any], pool: PoolPromise) -> InstanceType:
    label = node.get("metadata", {}).get("labels", {}).get(INSTANCE_TYPE_LABEL)
    return INSTANCE_TYPES.get(label or "", INSTANCE_TYPES[pool.instance_types[0]])


def _failed_nodes(check: str, what: str, problems: list[tuple[str, Diagnosis]], nodes: int) -> CheckResult:
    return failed(check, f"{len(problems)} of {nodes} GPU nodes: {what}", problems[0][1], *[p for p, _ in problems])


# --- from the API ----------------------------------------------------------------------------
def check_hugepages(ctx: Context) -> CheckResult:
    """EFA nodes: the huge pages the AMI reserves fit in what the sizing held back, and the node's
    allocatable memory holds the whole-node training pod plus the DaemonSets."""
    check = "cluster.hugepages"
    nodes = [(n, p) for n, p in gpu_nodes(ctx) if p.efa_per_node]
    if not nodes:
        return skipped(check, "no EFA node is up (GPU pools scale from zero): nothing to check yet")
    problems: list[tuple[str, Diagnosis]] = []
    for node, pool in nodes:
        allocatable = node.get("status", {}).get("allocatable", {})
        instance = _instance(node, pool)
        hugepages = quantity_mib(allocatable.get("hugepages-2Mi"))
        room = node_headroom(instance.name, efa=True)
        needed = int(room.pod_memory_gib) * 1024 + room.daemonset_memory_mib
        memory = quantity_mib(allocatable.get("memory"))
        where = f"{name(node)} ({instance.name}, pool {pool.name})"
        if hugepages > EFA_HUGEPAGES_MIB:
            problems.append((f"{where}: hugepages-2Mi {hugepages:.0f} MiB, expected at most {EFA_HUGEPAGES_MIB}",
                             Diagnosis("the AMI reserves more huge pages than the pod sizing holds back "
                                       "(components/facts/node_sizing.py EFA_HUGEPAGES_MIB): raise it to what the "
                                       "node shows, or the training pod's memory request may not fit",
                                       f"kubectl describe node {name(node)}")))
        if memory < needed:
            problems.append((f"{where}: allocatable memory {memory:.0f} MiB, expected at least {needed} "
                             f"(the {int(room.pod_memory_gib)} GiB training pod + {room.daemonset_memory_mib} MiB "
                             "of DaemonSets)", Diagnosis(
                                 "the node reports less memory than the sizing assumed: the training pod stays "
                                 "Pending; lower the job's memoryGiB or correct the margins in "
                                 "components/facts/node_sizing.py", f"kubectl describe node {name(node)}")))
    if problems:
        return _failed_nodes(check, "huge pages or memory differ from the sizing", problems, len(nodes))
    return passed(check, f"{len(nodes)} EFA nodes: huge pages <= {EFA_HUGEPAGES_MIB} MiB and memory for the "
                  "whole-node pod, as sized", nodes=len(nodes))


def cni_pod_ips(instance: InstanceType, *, efa: bool) -> int:
    """Pod IPs the VPC CNI can hand out on the default network card: every ENI slot but the one the
    efa-only interface takes on card 0 (components/facts/pod_network.py efa_interfaces), each
    ENI's primary address kept for itself."""
    enis = instance.enis - (1 if efa and instance.has_efa else 0)
    return max(0, enis) * (instance.ipv4_per_eni - 1)


def check_pod_ips(ctx: Context) -> CheckResult:
    """GPU nodes: the kubelet's maxPods is the one the subnet budget was computed with, and the
    node has pod IPs left."""
    check = "cluster.pod-ips"
    nodes = gpu_nodes(ctx)
    if not nodes:
        return skipped(check, "no GPU node is up (GPU pools scale from zero): nothing to check yet")
    problems: list[tuple[str, Diagnosis]] = []
    details: list[str] = []
    for node, pool in nodes:
        instance = _instance(node, pool)
        max_pods = int(node.get("status", {}).get("allocatable", {}).get("pods", "0"))
        expected = kubelet_max_pods(instance)
        ceiling = cni_pod_ips(instance, efa=bool(pool.efa_per_node))
        in_use = sum(1 for p in ctx.kube.pods_on_node(name(node)) if not p.get("spec", {}).get("hostNetwork")
                     and p.get("status", {}).get("phase") in ("Pending", "Running"))
        where = f"{name(node)} ({instance.name})"
        details.append(f"{where}: maxPods {max_pods}, {in_use} of {ceiling} pod IPs in use")
        if max_pods != expected:
            problems.append((f"{where}: maxPods {max_pods}, expected {expected}", Diagnosis(
                "the node's maxPods differs from the one the subnet IP budget and kube-reserved were computed with "
                "(ENIs x (IPs per ENI - 1) + 2, capped by the managed node group): correct the type's enis/"
                "ipv4_per_eni in components/facts/instance_types.py", f"kubectl describe node {name(node)}")))
        if in_use >= ceiling:
            problems.append((f"{where}: {in_use} pods need an IP, the VPC CNI has {ceiling}", Diagnosis(
                "no pod IP left on the node: the next pod stays ContainerCreating ('failed to assign an IP "
                "address'); move DaemonSets to hostNetwork or run fewer pods per GPU node",
                "kubectl -n kube-system logs -l k8s-app=aws-node --tail=50 | grep -i 'ip address'")))
    if problems:
        return _failed_nodes(check, "pod IP budget", problems, len(nodes))
    return passed(check, f"{len(nodes)} GPU nodes: maxPods as computed, pod IPs left", *details, nodes=len(nodes))


def check_lustre_client(ctx: Context) -> CheckResult:
    """GPU nodes run a Ready FSx for Lustre CSI node pod (it loads the Lustre client module)."""
    check = "cluster.lustre-client"
    if ctx.kube.daemonset("kube-system", FSX_NODE_DAEMONSET) is None:
        return skipped(check, "the stack installs no FSx for Lustre CSI driver (no storage.lustre)")
    nodes = gpu_nodes(ctx)
    if not nodes:
        return skipped(check, "no GPU node is up (GPU pools scale from zero): nothing to check yet")
    ready = ready_pods_by_node(ctx.kube, FSX_NODE_PODS)
    missing = [(f"{name(n)} (pool {p.name}): no Ready {FSX_NODE_DAEMONSET} pod", Diagnosis(
        "no Lustre client on the node: pods that mount the checkpoints or datasets stay ContainerCreating "
        "(FailedMount); the CSI node pod loads the Lustre kernel module, which must match the node's kernel",
        f"kubectl -n kube-system get pods -l {FSX_NODE_PODS} -o wide --field-selector spec.nodeName={name(n)}; "
        f"kubectl -n kube-system logs -l {FSX_NODE_PODS} -c fsx-plugin --tail=50"))
        for n, p in nodes if name(n) not in ready]
    if missing:
        return _failed_nodes(check, "no Lustre client", missing, len(nodes))
    return passed(check, f"{len(nodes)} GPU nodes run the FSx for Lustre CSI node pod", nodes=len(nodes))


# --- from the launcher's logs ----------------------------------------------------------------
def _fabric_event(text: str, pod: str) -> progress_log.Event | None:
    """The latest fabric_status/fabric_check of the pod's current launcher run."""
    events = progress_log.parse_events(text, pod)
    starts = [i for i, e in enumerate(events) if e.name == progress_log.LAUNCHER_START]
    return next((e for e in reversed(events[starts[-1] if starts else 0:]) if e.name in FABRIC_EVENTS), None)


def check_fabric(ctx: Context, state: JobState) -> CheckResult:
    """EFA jobs: on every pod, NCCL found all the node type's EFA devices and used GPUDirect RDMA
    where the type has it (the launcher's self-check, read from its fabric_status events)."""
    job, ns = state.promise.name, ctx.outputs.namespace
    check = f"job.{job}.fabric"
    pool = ctx.outputs.pools.get(state.promise.pool)
    if pool is None or not pool.efa_per_node:
        return skipped(check, "not an EFA pool: NCCL uses sockets")
    rdma = all(INSTANCE_TYPES[t].efa_gpudirect_rdma for t in pool.instance_types if t in INSTANCE_TYPES)
    logs = ctx.logs(job, state.pods)
    seen = {pod: e for pod, text in logs.items() if (e := _fabric_event(text, pod))}
    pod0 = sorted(logs)[0] if logs else job
    if not seen:
        return skipped(check, "no pod's launcher reported the fabric yet (NCCL not initialised, or an image older "
                       f"than this check): read NCCL's own lines with `kubectl -n {ns} logs {pod0} | grep '^nccl: '`")
    problems = [_fabric_problem(pod, e.fields, pool.efa_per_node, rdma) for pod, e in sorted(seen.items())]
    problems = [p for p in problems if p]
    measured = {f"{pod}_efa_devices": e.fields.get("efa_devices_found") for pod, e in seen.items()}
    if problems:
        pod = problems[0].split(":", 1)[0]
        return failed(check, f"the fabric is degraded on {len(problems)} of {len(seen)} pods", Diagnosis(
            "the pod does not get the whole fabric: fewer EFA devices than the type has (the pod's "
            "vpc.amazonaws.com/efa request, the node's allocatable, the launch template's interfaces) or no "
            "GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA=0 in the job's env, the node's drivers)",
            f"kubectl -n {ns} logs {pod} | grep -E '^nccl: |fabric_'; kubectl -n {ns} exec {pod} -- ls /dev/infiniband"),
            *problems, **measured)
    gdr = "GPUDirect RDMA on every inter-node channel" if rdma else "no GPUDirect RDMA expected"
    return passed(check, f"{len(seen)} pods: {pool.efa_per_node} of {pool.efa_per_node} EFA devices, {gdr}",
                  **measured)


def _fabric_problem(pod: str, fields: dict[str, Any], expected: int, rdma: bool) -> str | None:
    found = fields.get("efa_devices_found") or []
    if fields.get("verdict") == "wrong":
        return f"{pod}: the launcher's fabric check failed (its last line says why)"
    if any(n != expected for n in found):
        return f"{pod}: NCCL found {', '.join(map(str, found))} EFA devices, expected {expected}"
    if rdma and fields.get("gpudirect_rdma") is False:
        return f"{pod}: inter-node channels without GPUDirect RDMA, expected with it"
    return None


def check_in_pod(ctx: Context, state: JobState) -> CheckResult:
    """What only a shell in the training pod shows: reported as a skip with the command and what it
    must print (scripts/verify runs no command inside pods)."""
    job, ns = state.promise.name, ctx.outputs.namespace
    check = f"job.{job}.in-pod"
    pool = ctx.outputs.pools.get(state.promise.pool)
    running = sorted(name(p) for p in state.pods if container_started(p))
    pod = running[0] if running else f"<a pod of {job}>"
    efa = pool.efa_per_node if pool else 0
    expect = [f"`id -u` prints {TRAINER_UID}", "`ulimit -l` prints unlimited",
              "`grep -c lustre /proc/filesystems` prints 1 or more (on stacks with storage.lustre)"]
    command = "id -u; ulimit -l; grep -c lustre /proc/filesystems"
    if efa:
        expect += [f"`ls /dev/infiniband` lists {efa} uverbs devices",
                   f"`fi_info -p efa -t FI_EP_RDM` lists {efa} domains (rdmap...-rdm), no `fi_getinfo: -61`"]
        command += "; ls /dev/infiniband; fi_info -p efa -t FI_EP_RDM | grep domain: | sort -u"
    return skipped(check, f"needs a live pod exec, which verify does not run: kubectl -n {ns} exec {pod} -- "
                   f"sh -c '{command}'; expect: " + "; ".join(expect))
