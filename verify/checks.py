"""The go-live checks, against a live cluster: what `pulumi up` promised (the stack's
outputs) and what the cluster, the trainer's logs and Container Insights show.

Each check returns one result; a failure carries its likely cause and the command that
shows it. Names of the controllers are the ones their pinned charts render (see CONTROLLERS).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

# The labels and resources of the pools, from where the program defines them (pure module).
from components.cluster.pool_scheduling import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    POOL_LABEL,
)
from verify import progress_log
from verify.kube import ClusterUnreachableError, Kube
from verify.report import CheckResult, Diagnosis, failed, passed, skipped
from verify.stack_outputs import JobPromise, PoolPromise, StackOutputs

TRAINER_CONTAINER = "trainer"
# JobSet labels every pod with its JobSet's name (jobset api/jobset/v1alpha2 JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
EXTERNAL_SECRETS = ("external-secrets.io", "v1", "externalsecrets")

# Restarts of the whole gang that spent the failure budget (disruptions, e.g. spot, do not).
RESTART_LOOP_GANG_RESTARTS = 2
RESTART_LOOP_CONTAINER_RESTARTS = 3
# A healthy training job, as the go-live requirement puts it: "GPU utilisation ... above 80%".
DEFAULT_GPU_THRESHOLD = 80.0
DEFAULT_GPU_WINDOW_MINUTES = 10
# The least time without a step that counts as a hang (the jobs' default heartbeatTimeoutSeconds);
# progress_log.stall_after_seconds raises it for a trainer that logs its steps further apart.
STALL_SECONDS = 600
# (summary, cause) of a `launcher: error:` line, by progress_log.launcher_error_kind.
LAUNCHER_ERRORS = {
    "config": ("the launcher rejected its configuration",
               "crash at start: missing or invalid config/env (TRAIN_* variables)"),
    "rendezvous": ("a worker pod could not reach the rendezvous",
                   "pod 0's rendezvous did not answer in time: pod 0 not running or restarting, its headless Service's "
                   "DNS, or the fabric security group's rendezvous port"),
    "fabric": ("the fabric check stopped the run",
               "NCCL did not use EFA on an EFA pool (its NCCL log names the transport it fell back to)"),
    "start": ("the launcher could not start torchrun", "crash at start: the image cannot run torchrun"),
    "budget": ("the gang is past its restart budget",
               "the gang kept failing or being evicted (maxRestarts + maxDisruptionRestarts): read the previous "
               "pods' events and logs before raising the budget"),
}
# Container Insights (enhanced, accelerated compute) publishes pod_gpu_utilization with these
# dimensions: aws/amazon-cloudwatch-agent translator/translate/otel/exporter/awsemf/kubernetes.go
# getGPUMetricDeclarations (commit ab55b8da, 2026-08-07).
CI_NAMESPACE = "ContainerInsights"
POD_GPU_METRIC = "pod_gpu_utilization"
POD_GPU_DIMENSIONS = frozenset({"ClusterName", "Namespace", "PodName", "FullPodName"})


@dataclass(frozen=True)
class Controller:
    label: str
    kind: str
    namespace: str
    name: str
    consequence: str
    needs: str = "always"
    """"always", "gpu" (a GPU pool exists) or "efa" (an EFA pool exists)."""


# Rendered names of the pinned charts (release name = chart name, components/common/helm.py):
# cluster-autoscaler 9.59.0 fullname = <release>-<cloudProvider>-cluster-autoscaler; kueue 0.19.2
# `<fullname>-controller-manager`; jobset 0.12.0 `<fullname>-controller`; external-secrets 2.9.0
# `<fullname>`, `-webhook`, `-cert-controller`; nvidia-device-plugin 0.20.0 and
# aws-efa-k8s-device-plugin 0.5.30 DaemonSets named after the release.
CONTROLLERS = (
    Controller("Cluster Autoscaler", "Deployment", "kube-system", "cluster-autoscaler-aws-cluster-autoscaler",
               "GPU pools never scale up: pending training pods stay pending"),
    Controller("Kueue", "Deployment", "kueue-system", "kueue-controller-manager",
               "no job is admitted: every JobSet stays suspended"),
    Controller("JobSet", "Deployment", "jobset-system", "jobset-controller",
               "JobSets get no Jobs and no pods, and failed gangs are not restarted"),
    Controller("External Secrets", "Deployment", "external-secrets", "external-secrets",
               "secrets never sync: trainer pods fail with CreateContainerConfigError (missing env)"),
    Controller("External Secrets webhook", "Deployment", "external-secrets", "external-secrets-webhook",
               "SecretStores and ExternalSecrets cannot be created or changed"),
    Controller("External Secrets cert controller", "Deployment", "external-secrets", "external-secrets-cert-controller",
               "the webhook's certificate is not renewed"),
    Controller("NVIDIA device plugin", "DaemonSet", "kube-system", "nvidia-device-plugin",
               "GPU not detected: nodes never advertise nvidia.com/gpu", needs="gpu"),
    Controller("EFA device plugin", "DaemonSet", "kube-system", "aws-efa-k8s-device-plugin",
               "nodes never advertise vpc.amazonaws.com/efa: EFA pods stay Pending", needs="efa"),
)
# The pods of the two device plugins, by the labels their charts put on them.
NVIDIA_PLUGIN_PODS = "app.kubernetes.io/name=nvidia-device-plugin"
EFA_PLUGIN_PODS = "name=aws-efa-k8s-device-plugin"


@dataclass
class Context:
    stack: str
    outputs: StackOutputs
    kube: Kube
    cloudwatch: Callable[[], Any]
    """Makes the boto3 CloudWatch client when a check first needs it."""
    now: float
    gpu_threshold: float = DEFAULT_GPU_THRESHOLD
    gpu_window_minutes: int = DEFAULT_GPU_WINDOW_MINUTES
    _logs: dict[str, dict[str, str]] = field(default_factory=dict)

    def logs(self, job: str, pods: list[dict[str, Any]]) -> dict[str, str]:
        """Each pod's trainer log (read once per job)."""
        if job not in self._logs:
            self._logs[job] = {name(p): self.kube.pod_log(self.outputs.namespace, name(p), TRAINER_CONTAINER)
                               for p in pods if container_started(p)}
        return self._logs[job]


def name(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("name", "?")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == kind), {})


def container_started(pod: dict[str, Any]) -> bool:
    return any("running" in (s.get("state") or {}) or "terminated" in (s.get("state") or {})
               for s in pod.get("status", {}).get("containerStatuses") or [])


def quantity_mib(value: str | None) -> float:
    """Kubernetes memory quantity -> MiB (enough of the grammar for allocatable values)."""
    if not value:
        return 0.0
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2, "k": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value) / 2**20


# --- cluster ---------------------------------------------------------------------------------
def check_nodes(ctx: Context) -> CheckResult:
    nodes = ctx.kube.nodes()
    not_ready = [n for n in nodes if condition(n, "Ready").get("status") != "True"]
    if not nodes:
        return failed("cluster.nodes", "the cluster has no node", Diagnosis(
            "the node groups did not start any node (the system pool must have at least one)",
            f"aws eks list-nodegroups --cluster-name {ctx.outputs.cluster_name} --region {ctx.outputs.region}"))
    if not_ready:
        return failed(
            "cluster.nodes", f"{len(not_ready)} of {len(nodes)} nodes not Ready",
            Diagnosis("abnormal node state: kubelet, the VPC CNI (aws-node) or the node's network; a GPU node with "
                      "failed hardware is replaced by node auto-repair", f"kubectl describe node {name(not_ready[0])}"),
            *[_not_ready(n) for n in not_ready])
    return passed("cluster.nodes", f"{len(nodes)} nodes Ready", nodes=len(nodes))


def _not_ready(node: dict[str, Any]) -> str:
    """Each node's own reason and message (the kubelet's, e.g. "cni plugin not initialized")."""
    ready = condition(node, "Ready")
    message = " ".join(str(ready.get("message", "")).split())[:200]
    return (f"{name(node)}: Ready={ready.get('status', 'Unknown')} ({ready.get('reason', 'no reason')}"
            + (f": {message})" if message else ")"))


def gpu_nodes(ctx: Context) -> list[tuple[dict[str, Any], PoolPromise]]:
    pools = {p.name: p for p in ctx.outputs.pools.values() if p.gpu}
    return [(n, pools[pool]) for n in ctx.kube.nodes()
            if (pool := n.get("metadata", {}).get("labels", {}).get(POOL_LABEL)) in pools]


def check_gpu_devices(ctx: Context) -> CheckResult:
    nodes = gpu_nodes(ctx)
    if not nodes:
        return skipped("cluster.gpu-devices", "no GPU node is up (GPU pools scale from zero): nothing to check yet")
    running = ready_pods_by_node(ctx.kube, NVIDIA_PLUGIN_PODS)
    efa_pools = any(p.gpu and p.efa_per_node for p in ctx.outputs.pools.values())
    efa_running = ready_pods_by_node(ctx.kube, EFA_PLUGIN_PODS) if efa_pools else {}
    problems: list[tuple[str, Diagnosis]] = []
    for node, pool in nodes:
        node_name = name(node)
        allocatable = node.get("status", {}).get("allocatable", {})
        gpus = int(allocatable.get(GPU_RESOURCE, "0"))
        problems += _device_problems(node_name, pool.name, GPU_DEVICE, advertised=gpus,
                                     promised=pool.gpus_per_node, plugin_running=node_name in running)
        if not pool.efa_per_node:
            continue
        efa = int(allocatable.get(EFA_RESOURCE, "0"))
        problems += _device_problems(node_name, pool.name, EFA_DEVICE, advertised=efa,
                                     promised=pool.efa_per_node, plugin_running=node_name in efa_running)
    if problems:
        return failed("cluster.gpu-devices", f"{len(problems)} problem(s) on {len(nodes)} GPU nodes",
                      problems[0][1], *[text for text, _ in problems])
    return passed("cluster.gpu-devices", f"{len(nodes)} GPU nodes advertise the GPUs (and EFA) their pools promise",
                  gpu_nodes=len(nodes))


@dataclass(frozen=True)
class _DeviceKind:
    """One kind of device a pool promises per node, and how its absence is named and diagnosed."""
    plugin: str
    plugin_pods: str
    advertised: str
    """How a count of them reads when the plugin is missing."""
    too_few: str
    """How a count of them reads when the plugin runs but reports fewer."""
    no_plugin_cause: str
    too_few_cause: str


GPU_DEVICE = _DeviceKind(
    "NVIDIA device plugin", NVIDIA_PLUGIN_PODS, "GPUs advertised", "GPUs advertised",
    "GPU not detected: the device plugin is missing on this node",
    "a GPU failed or its driver did not load (the plugin runs but reports fewer devices)")
EFA_DEVICE = _DeviceKind(
    "EFA device plugin", EFA_PLUGIN_PODS, "EFA interfaces advertised", "EFA interfaces",
    "EFA not detected: the EFA device plugin is missing on this node",
    "EFA interfaces missing: the launch template attached fewer network cards")


def _device_problems(node_name: str, pool_name: str, kind: _DeviceKind, *, advertised: int, promised: int,
                     plugin_running: bool) -> list[tuple[str, Diagnosis]]:
    """The node's problem with one kind of device (at most one), as (text, diagnosis)."""
    counted = f"{advertised} of {promised}"
    if not plugin_running:
        return [(f"{node_name} (pool {pool_name}): no running {kind.plugin} pod, {counted} {kind.advertised}",
                 Diagnosis(kind.no_plugin_cause, f"kubectl -n kube-system get pods -l {kind.plugin_pods} -o wide "
                                                 f"--field-selector spec.nodeName={node_name}"))]
    if advertised < promised:
        return [(f"{node_name} (pool {pool_name}): {counted} {kind.too_few}",
                 Diagnosis(kind.too_few_cause, f"kubectl describe node {node_name}"))]
    return []


def ready_pods_by_node(kube: Kube, selector: str) -> set[str]:
    return {p.get("spec", {}).get("nodeName", "") for p in kube.pods("kube-system", label_selector=selector)
            if p.get("status", {}).get("phase") == "Running" and condition(p, "Ready").get("status") == "True"}


def check_controllers(ctx: Context) -> CheckResult:
    has_gpu = any(p.gpu for p in ctx.outputs.pools.values())
    has_efa = any(p.efa_per_node for p in ctx.outputs.pools.values())
    wanted = [c for c in CONTROLLERS if c.needs == "always" or (c.needs == "gpu" and has_gpu)
              or (c.needs == "efa" and has_efa)]
    problems: list[tuple[Controller, str]] = []
    for c in wanted:
        if c.kind == "Deployment":
            obj = ctx.kube.deployment(c.namespace, c.name)
            if obj is None:
                problems.append((c, "not installed"))
            elif condition(obj, "Available").get("status") != "True":
                status = obj.get("status", {})
                problems.append((c, f"{status.get('availableReplicas', 0)}/{obj.get('spec', {}).get('replicas', 1)} "
                                    "replicas available"))
        else:
            obj = ctx.kube.daemonset(c.namespace, c.name)
            if obj is None:
                problems.append((c, "not installed"))
    if problems:
        c, state = problems[0]
        kind = c.kind.lower()
        return failed("cluster.controllers", f"{len(problems)} of {len(wanted)} controllers not available",
                      Diagnosis(f"{c.label} {state}: {c.consequence}",
                                f"kubectl -n {c.namespace} describe {kind} {c.name}; "
                                f"kubectl -n {c.namespace} logs {kind}/{c.name}"),
                      *[f"{c.label} ({c.namespace}/{c.name}): {state}" for c, state in problems])
    return passed("cluster.controllers", f"{len(wanted)} controllers available: "
                  + ", ".join(c.label for c in wanted if "webhook" not in c.label and "cert" not in c.label))


def check_training_secret(ctx: Context) -> CheckResult:
    secret, ns = ctx.outputs.secret, ctx.outputs.namespace
    if secret is None:
        return skipped("cluster.training-secret", "the stack declares no secrets")
    group, version, plural = EXTERNAL_SECRETS
    external = ctx.kube.custom_object(group, version, ns, plural, secret)
    ready = condition(external, "Ready") if external else {}
    if external is None or ready.get("status") != "True" or not ctx.kube.secret_exists(ns, secret):
        state = "no ExternalSecret" if external is None else f"{ready.get('reason', 'not synced')}: {ready.get('message', '')}"
        return failed("cluster.training-secret", f"secret {ns}/{secret} not synced from Secrets Manager",
                      Diagnosis("crash at start (missing config/env): the trainer's secretKeyRef has nothing to read; "
                                "the store's role cannot read the secret, or the secret has no value yet",
                                f"kubectl -n {ns} describe externalsecret {secret}"), state.strip(": "))
    return passed("cluster.training-secret", f"{ns}/{secret} synced ({ready.get('reason', 'Ready')})")


# --- job -------------------------------------------------------------------------------------
@dataclass
class JobState:
    promise: JobPromise
    jobset: dict[str, Any] | None = None
    pods: list[dict[str, Any]] = field(default_factory=list)
    admitted: bool = False


def check_admitted(ctx: Context, state: JobState) -> CheckResult:
    job, ns = state.promise.name, ctx.outputs.namespace
    check = f"job.{job}.admitted"
    group, version, plural = JOBSET
    state.jobset = ctx.kube.custom_object(group, version, ns, plural, job)
    if state.jobset is None:
        return failed(check, f"JobSet {ns}/{job} not found", Diagnosis(
            "the job was never created (`pulumi up` did not finish) or was deleted", f"kubectl -n {ns} get jobsets"))
    group, version, plural = WORKLOADS
    owned = [w for w in ctx.kube.custom_objects(group, version, ns, plural)
             if any(o.get("kind") == "JobSet" and o.get("name") == job for o in w["metadata"].get("ownerReferences", []))]
    if not owned:
        return failed(check, "Kueue has no Workload for the JobSet", Diagnosis(
            "Kueue does not manage it: the JobSet lacks the kueue.x-k8s.io/queue-name label, or Kueue's JobSet "
            "integration is off (JobSet's CRDs were missing when Kueue started)",
            f"kubectl -n {ns} get jobset {job} -o jsonpath='{{.metadata.labels}}'"))
    workload = owned[0]
    admitted, evicted = condition(workload, "Admitted"), condition(workload, "Evicted")
    if admitted.get("status") == "True":
        state.admitted = True
        queue = workload.get("status", {}).get("admission", {}).get("clusterQueue", "?")
        return passed(check, f"admitted by ClusterQueue {queue}", cluster_queue=queue)
    if evicted.get("status") == "True":
        cause = (f"evicted ({evicted.get('reason')}): the gang's pods were not all Ready in time: nodes did not scale "
                 "up (capacity) or pods cannot start; Kueue requeues it with backoff")
    else:
        reserved = condition(workload, "QuotaReserved")
        cause = (f"waiting for quota ({reserved.get('reason', 'Pending')}: {reserved.get('message', 'no message')}): "
                 "the queue's gpuQuota is below the gang's request, or other jobs hold it")
    return failed(check, "not admitted", Diagnosis(cause, f"kubectl -n {ns} describe workload {name(workload)}"))


def check_pods(ctx: Context, state: JobState) -> CheckResult:
    job, ns, want = state.promise.name, ctx.outputs.namespace, state.promise.nodes
    check = f"job.{job}.pods"
    state.pods = ctx.kube.pods(ns, label_selector=f"{JOBSET_NAME_LABEL}={job}")
    statuses = [(p, s) for p in state.pods for s in p.get("status", {}).get("containerStatuses") or []]

    def terminated(s: dict[str, Any], key: str) -> dict[str, Any]:
        return (s.get(key) or {}).get("terminated") or {}

    oom = [name(p) for p, s in statuses if "OOMKilled" in (terminated(s, "state").get("reason"),
                                                           terminated(s, "lastState").get("reason"))]
    if oom:
        return failed(check, f"OOMKilled: {', '.join(oom)}", Diagnosis(
            "out of memory: the container exceeded its memory limit (host memory: fewer DataLoader workers or less "
            "prefetch, or a larger memoryGiB); a GPU OOM shows as 'CUDA out of memory' in the log instead: lower the "
            "batch size, free computation graphs", f"kubectl -n {ns} describe pod {oom[0]}"))
    gang_restarts = int((state.jobset or {}).get("status", {}).get("restartsCountTowardsMax") or 0)
    looping = [name(p) for p, s in statuses if int(s.get("restartCount") or 0) >= RESTART_LOOP_CONTAINER_RESTARTS
               or (s.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"]
    if looping or gang_restarts >= RESTART_LOOP_GANG_RESTARTS:
        summary = (f"restart loop: gang restarted {gang_restarts} times for failures"
                   + (f"; restarting: {', '.join(looping)}" if looping else ""))
        if looping:
            return failed(check, summary, Diagnosis(
                "the trainer fails again after every restart; the previous container's log says why "
                "(crash at start: missing config or env)", f"kubectl -n {ns} logs {looping[0]} --previous"))
        # restartPolicy Never: a gang restart replaces every pod (no --previous to read), so the failed
        # attempts' logs live on in Container Insights' application log group (Fluent Bit).
        return failed(check, summary, Diagnosis(
            "the trainer fails again after every gang restart (crash at start: missing config or env; a bad node); "
            "JobSet replaced the failed pods, so their logs are in CloudWatch: each attempt's launcher_exit names "
            "its pod and exit code, and the Warning events name the first failed Job",
            f"kubectl -n {ns} get events --sort-by=.lastTimestamp | grep {job}; "
            f"aws logs tail /aws/containerinsights/{ctx.outputs.cluster_name}/application --region {ctx.outputs.region} "
            f"--since 6h --filter-pattern '\"{job}\" \"launcher_exit\"'"))
    bad_start = [(name(p), s) for p, s in statuses
                 if terminated(s, "state").get("exitCode") == 2
                 or (s.get("state") or {}).get("waiting", {}).get("reason") in ("CreateContainerConfigError",
                                                                                 "CreateContainerError")]
    if bad_start:
        pod, s = bad_start[0]
        detail = (s.get("state") or {}).get("waiting", {}).get("message") or "exit code 2 (the launcher's contract error)"
        return failed(check, f"crash at start: {pod}", Diagnosis(
            "missing config or env: a TRAIN_* variable, the hyperparameters ConfigMap, or a secret key that never "
            "synced", f"kubectl -n {ns} logs {pod}; kubectl -n {ns} describe pod {pod}"), detail)
    pulling = [(name(p), s) for p, s in statuses
               if (s.get("state") or {}).get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff")]
    if pulling:
        return failed(check, f"image not pulled: {pulling[0][0]}", Diagnosis(
            "wrong image reference or digest, or the node role cannot pull from the registry",
            f"kubectl -n {ns} describe pod {pulling[0][0]}"))
    pending = [p for p in state.pods if p.get("status", {}).get("phase") == "Pending"]
    unscheduled = [p for p in pending if condition(p, "PodScheduled").get("status") == "False"]
    if unscheduled:
        message = condition(unscheduled[0], "PodScheduled").get("message", "")
        return failed(check, f"{len(unscheduled)} pods not scheduled", Diagnosis(
            "no node fits: GPUs not advertised on the pool's nodes (device plugin) or the pool is at its maximum"
            if GPU_RESOURCE in message else "no node fits the pod's requests, selector or tolerations",
            f"kubectl -n {ns} describe pod {name(unscheduled[0])}"), message)
    running = [p for p in state.pods if p.get("status", {}).get("phase") == "Running"]
    if len(running) < want:
        return failed(check, f"{len(running)} of {want} pods Running", Diagnosis(
            "the gang is incomplete: pods still starting, or failed and not yet replaced",
            f"kubectl -n {ns} get pods -l {JOBSET_NAME_LABEL}={job} -o wide"),
            *[f"{name(p)}: {p.get('status', {}).get('phase')}" for p in state.pods if p not in running])
    restarts = sum(int(s.get("restartCount") or 0) for _, s in statuses)
    return passed(check, f"{len(running)}/{want} pods Running, no OOMKilled, {gang_restarts} gang restarts",
                  pods=len(running), gang_restarts=gang_restarts, container_restarts=restarts)


def fabric_security_group(cluster_name: str, pool: PoolPromise | None) -> str:
    """The name of the security group that carries a GPU pool's node-to-node traffic:
    components/network/security_groups.py names it <name prefix>-efa-fabric (EFA pools) or
    <name prefix>-socket-fabric, and the platform's name prefix is its cluster name (a team stack
    exports the platform's cluster)."""
    return f"{cluster_name}-{'efa' if pool is not None and pool.efa_per_node else 'socket'}-fabric"


def _hang(ctx: Context, state: JobState, pod: str) -> Diagnosis:
    first, last = ctx.outputs.nccl_ports
    pool = ctx.outputs.pools.get(state.promise.pool)
    group = fabric_security_group(ctx.outputs.cluster_name, pool)
    allows = ("which must allow all traffic between its members (EFA), or a node outside it"
              if pool is not None and pool.efa_per_node else
              f"which opens only TCP {ctx.outputs.rendezvous_port} and {first}-{last} between its members")
    return Diagnosis(f"hang: nodes cannot talk (ports blocked by the fabric security group {group}, {allows}; or "
                     f"the pod's ip_local_port_range is not {first}-{last}, the stack's ncclPortRange)",
                     f"kubectl -n {ctx.outputs.namespace} exec {pod} -- cat /proc/sys/net/ipv4/ip_local_port_range; "
                     f"aws ec2 describe-security-groups --region {ctx.outputs.region} "
                     f"--filters Name=group-name,Values={group} --query 'SecurityGroups[].IpPermissions'")


def check_progress(ctx: Context, state: JobState) -> CheckResult:
    job, ns = state.promise.name, ctx.outputs.namespace
    check = f"job.{job}.progress"
    logs = ctx.logs(job, state.pods)
    pod0 = sorted(logs)[0] if logs else (name(state.pods[0]) if state.pods else job)
    events = [e for pod, text in logs.items() for e in progress_log.parse_events(text, pod)]
    errors = [line for text in logs.values() for line in progress_log.launcher_errors(text)]
    if errors:
        summary, cause = LAUNCHER_ERRORS[progress_log.launcher_error_kind(errors[0])]
        return failed(check, summary, Diagnosis(cause, f"kubectl -n {ns} logs {pod0}"), errors[0])
    if not any(e.name == progress_log.LAUNCHER_START for e in events):
        return failed(check, "no launcher_start in the logs", Diagnosis(
            "crash at start: the container did not reach the launcher (image entrypoint, dependency conflict)",
            f"kubectl -n {ns} logs {pod0}"))
    run = progress_log.current_run(events)
    started = next((e for e in run if e.name == progress_log.TRAINER_START), None)
    if started is None:
        waited = ctx.now - max(e.ts or 0 for e in events if e.name == progress_log.LAUNCHER_START)
        if waited <= STALL_SECONDS:  # the rendezvous waits for every pod: not a hang yet
            return failed(check, f"trainer not initialised yet, {waited:.0f} s after the launcher started",
                          Diagnosis("still starting: torchrun waits for every node at the rendezvous, then the trainer "
                                    "prepares its data and joins the process group; no trainer_start after "
                                    f"{STALL_SECONDS} s is a hang: rerun then", f"kubectl -n {ns} logs -f {pod0}"))
        return failed(check, f"trainer not initialised {waited:.0f} s after the launcher started",
                      _hang(ctx, state, pod0))
    steps = [e for e in run if e.name == progress_log.STEP]
    if not steps:
        return failed(check, f"trainer initialised, no step {ctx.now - (started.ts or ctx.now):.0f} s later "
                      "(data not loaded?)", Diagnosis(
                          "data not loaded or the first all-reduce hangs: an empty or unreadable dataset mount, or "
                          "nodes that cannot talk", f"kubectl -n {ns} exec {started.pod} -- ls /workspace/data"))
    last_step = max(e.ts or 0 for e in steps)
    ended = any(e.name in progress_log.END_EVENTS for e in run)
    if not ended and ctx.now - last_step > progress_log.stall_after_seconds([e.ts for e in steps if e.ts], STALL_SECONDS):
        return failed(check, f"no step for {ctx.now - last_step:.0f} s", _hang(ctx, state, steps[-1].pod))
    trend = progress_log.loss_trend(progress_log.losses(steps))
    measured = {"steps_logged": trend.points, "mann_kendall_z": round(trend.z, 2),
                "loss_first": round(trend.first, 4), "loss_last": round(trend.last, 4)}
    if not trend.falling:
        why = (f"only {trend.points} logged steps with a loss (a trend needs {progress_log.MIN_TREND_POINTS})"
               if trend.points < progress_log.MIN_TREND_POINTS
               else f"Mann-Kendall z = {trend.z:.2f} over {trend.points} steps (falling needs <= {progress_log.FALLING_Z})")
        return failed(check, f"loss not falling: {trend.first:.4g} -> {trend.last:.4g}", Diagnosis(
            "the model is not learning: learning rate, labels or data source (a test environment pointing at the wrong "
            "data), or a resume that lost the optimizer state",
            f"kubectl -n {ns} logs {steps[-1].pod} | grep '\"event\":\"step\"' | tail -n 20"), why, **measured)
    return passed(check, f"initialised, data loaded, loss falling {trend.first:.4g} -> {trend.last:.4g} "
                  f"over {trend.points} steps (Mann-Kendall z = {trend.z:.1f})", **measured)


def check_checkpoints(ctx: Context, state: JobState) -> CheckResult:
    job, ns = state.promise.name, ctx.outputs.namespace
    check = f"job.{job}.checkpoints"
    logs = ctx.logs(job, state.pods)
    run = progress_log.current_run([e for pod, text in logs.items() for e in progress_log.parse_events(text, pod)])
    cadence = progress_log.checkpoint_cadence(run, ctx.now)
    if cadence is None:
        return skipped(check, "the trainer logged no checkpoint period (trainer_start.checkpoint_interval_s or "
                       "checkpoint_every_steps) to hold it to")
    unit = "s" if cadence.unit == "s" else " steps"
    measured = {"period": cadence.period, "unit": cadence.unit, "saves": cadence.saves,
                "worst_gap": round(cadence.worst_gap, 1)}
    if cadence.late:
        pod = next((e.pod for e in run if e.name == progress_log.TRAINER_START), job)
        return failed(check, f"no checkpoint for {cadence.worst_gap:.0f}{unit}, more than "
                      f"{progress_log.LATE_PERIODS} periods of {cadence.period:.0f}{unit}", Diagnosis(
                          "checkpoints are not completing: the shared file system is not mounted, not writable or too "
                          "slow (EFS throughput), or saves fail",
                          f"kubectl -n {ns} exec {pod} -- sh -c 'ls -l \"$TRAIN_CHECKPOINT_DIR\"'; "
                          f"kubectl -n {ns} logs {pod} | grep checkpoint"), **measured)
    return passed(check, f"{cadence.saves} checkpoints, none more than {progress_log.LATE_PERIODS} periods apart "
                  f"(period {cadence.period:.0f}{unit}, longest gap {cadence.worst_gap:.0f}{unit})", **measured)


def check_gpu_utilisation(ctx: Context, state: JobState) -> CheckResult:
    job, ns, cluster = state.promise.name, ctx.outputs.namespace, ctx.outputs.cluster_name
    check = f"job.{job}.gpu-utilisation"
    end = datetime.fromtimestamp(ctx.now, UTC)
    start = end - timedelta(minutes=ctx.gpu_window_minutes)
    running = [name(p) for p in state.pods if p.get("status", {}).get("phase") == "Running"]
    averages: dict[str, float] = {}
    dimensions: dict[str, list[dict[str, str]]] = {}
    try:
        cw = ctx.cloudwatch()
        for pod in running:
            found = cw.list_metrics(Namespace=CI_NAMESPACE, MetricName=POD_GPU_METRIC, Dimensions=[
                {"Name": "ClusterName", "Value": cluster}, {"Name": "Namespace", "Value": ns},
                {"Name": "FullPodName", "Value": pod}])["Metrics"]
            metric = next((m for m in found if {d["Name"] for d in m["Dimensions"]} == POD_GPU_DIMENSIONS), None)
            if metric is None:
                continue
            points = cw.get_metric_statistics(Namespace=CI_NAMESPACE, MetricName=POD_GPU_METRIC,
                                              Dimensions=metric["Dimensions"], StartTime=start, EndTime=end,
                                              Period=60, Statistics=["Average"])["Datapoints"]
            if points:
                averages[pod] = statistics.fmean(p["Average"] for p in points)
                dimensions[pod] = metric["Dimensions"]
    except Exception as e:  # botocore: no credentials, access denied, endpoint unreachable
        return failed(check, "cannot read Container Insights metrics from CloudWatch", Diagnosis(
            f"no AWS access from here ({type(e).__name__}: {' '.join(str(e).split())[:160]})",
            "aws sts get-caller-identity"))
    missing = [p for p in running if p not in averages]
    if not running or missing:
        return failed(check, f"no {POD_GPU_METRIC} datapoints in the last {ctx.gpu_window_minutes} min for "
                      f"{len(missing) or 'any'} pod(s)", Diagnosis(
                          "GPU metrics missing: the CloudWatch add-on's DCGM exporter is not running on the node, or "
                          "the pods started only minutes ago (rerun later)",
                          "kubectl -n amazon-cloudwatch get pods -o wide | grep -i dcgm"), *missing)
    low = {p: v for p, v in averages.items() if v < ctx.gpu_threshold}
    lowest = min(averages.values())
    measured = {f"{p}_percent": round(v, 1) for p, v in averages.items()}
    if low:
        pod = min(low, key=lambda p: low[p])
        return failed(check, f"GPU utilisation {lowest:.0f}% on {pod} (healthy: >= {ctx.gpu_threshold:.0f}%, "
                      f"average over {ctx.gpu_window_minutes} min)", Diagnosis(
                          "GPUs wait for input: a data-loading bottleneck (more prefetch workers, the binary shard "
                          "format) or stalled collectives",
                          f"aws cloudwatch get-metric-statistics --region {ctx.outputs.region} --namespace {CI_NAMESPACE} "
                          f"--metric-name {POD_GPU_METRIC} --dimensions "
                          + " ".join(f"Name={d['Name']},Value={d['Value']}" for d in dimensions[pod])
                          + f" --start-time {start:%Y-%m-%dT%H:%M:%SZ} --end-time {end:%Y-%m-%dT%H:%M:%SZ} "
                          "--period 60 --statistics Average"),
                      *[f"{p}: {v:.0f}%" for p, v in sorted(averages.items())], **measured)
    return passed(check, f"GPU utilisation >= {lowest:.0f}% on every pod (healthy: >= {ctx.gpu_threshold:.0f}%, "
                  f"average over {ctx.gpu_window_minutes} min)", **measured)


def guarded(check: str, fn: Callable[..., CheckResult], *args: Any, **kwargs: Any) -> CheckResult:
    """An API refusal fails the one check; a lost connection ends the run (exit 2)."""
    try:
        return fn(*args, **kwargs)
    except ApiException as e:
        return failed(check, f"the Kubernetes API answered HTTP {e.status} ({e.reason})", Diagnosis(
            "this identity may not read (or create) what the check needs: RBAC or the EKS access entry",
            "kubectl auth can-i --list"))
    except (urllib3.exceptions.HTTPError, OSError) as e:
        raise ClusterUnreachableError(" ".join(str(e).split())[:300]) from e
