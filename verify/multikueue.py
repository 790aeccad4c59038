"""MultiKueue on the manager: each worker connected and Active, and a probe dispatched, run and read back.

What "connected" means is Kueue's own condition: MultiKueueCluster `Active=True` (reason
`Active`, message `Connected`) and the AdmissionCheck `Active=True` (kueue v0.19.2
site/content/en/docs/tasks/manage/setup_multikueue.md, "Upon successful configuration ...").
The probe is a one-pod JobSet on the any-region queue, managed by MultiKueue, asking for one GPU
of the stack's probe pool (its cheapest GPU node: stack output `multiKueue.probePool`) with the
GPU taint tolerated. It passes once a worker admitted it (the manager's Workload has the MultiKueue
check `Ready` and names the worker in `status.clusterName`) and the JobSet, whose status MultiKueue
copies back from the worker (kueue v0.19.2 jobset_multikueue_adapter.go), is `Completed`: the
worker pulled the image, scheduled the pod on a GPU node and ran it. Admission alone proves only
the queue. It is deleted either way, here and (by MultiKueue's garbage collection) there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from components.cluster.pool_scheduling import GPU_RESOURCE, GPU_TAINT, POOL_LABEL
from verify.checks import condition
from verify.report import CheckResult, Diagnosis, failed, passed

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
ADMISSION_CHECK = "multikueue"
ANY_REGION = "any-region"
MANAGED_BY = "kueue.x-k8s.io/multikueue"
# A GPU node from zero (the autoscaler's own wait for a node is 30 minutes: max-node-provision-time)
# plus the image pull and the pod.
PROBE_TIMEOUT_S = 1800


def check_workers(clusters: list[dict[str, Any]], check: dict[str, Any] | None) -> CheckResult:
    """`clusters`: the manager's MultiKueueClusters; `check`: its MultiKueue AdmissionCheck."""
    if not clusters:
        return failed("multikueue.workers", "no MultiKueueCluster on this cluster", Diagnosis(
            "the stack is not a MultiKueue manager, or its objects were not created",
            "kubectl get multikueueclusters,multikueueconfigs,admissionchecks"))
    down = [(c["metadata"]["name"], condition(c, "Active")) for c in clusters if condition(c, "Active").get("status") != "True"]
    if down:
        worker, active = down[0]
        return failed("multikueue.workers", f"{len(down)} of {len(clusters)} workers not connected", Diagnosis(
            f"{worker}: {active.get('reason', 'no Active condition')} {active.get('message', '')}".strip()
            + ": the kubeconfig Secret is missing or expired (the rotation CronJob), the access entry is missing, "
            "or the worker's API endpoint is unreachable from the manager's VPC",
            f"kubectl -n kueue-system logs job/$(kubectl -n kueue-system get jobs -o name | tail -1 | cut -d/ -f2); "
            f"kubectl get multikueuecluster {worker} -o yaml"),
            *[f"{name}: {c.get('reason', '?')} {c.get('message', '')}".strip() for name, c in down])
    if check is None or condition(check, "Active").get("status") != "True":
        return failed("multikueue.workers", "the MultiKueue AdmissionCheck is not Active", Diagnosis(
            "the check names a MultiKueueConfig that lists no connected worker",
            f"kubectl get admissioncheck {ADMISSION_CHECK} -o yaml"))
    return passed("multikueue.workers", f"{len(clusters)} workers connected: "
                  + ", ".join(c["metadata"]["name"] for c in clusters), workers=len(clusters))


# The probe's proof that it reached a GPU: the NVIDIA container runtime mounts the driver's NVML
# library into a container that asks for a GPU; loading it fails on a node without one.
PROBE_COMMAND = ["python3", "-c",
                 "import ctypes; ctypes.CDLL('libnvidia-ml.so.1'); print('multikueue probe: GPU driver reached')"]


def probe_jobset(name: str, namespace: str, image: str, pool: str = "") -> dict[str, Any]:
    """The smallest job that exercises a worker: one pod, one GPU of `pool` (none when "")."""
    limits: dict[str, str] = {"cpu": "100m", "memory": "64Mi", **({GPU_RESOURCE: "1"} if pool else {})}
    container = {"name": "probe", "image": image,
                 "command": PROBE_COMMAND if pool else ["python3", "-c", "print('multikueue probe')"],
                 "resources": {"requests": dict(limits), "limits": limits},
                 "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 65532,
                                     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}
    placement: dict[str, Any] = {"nodeSelector": {POOL_LABEL: pool}, "tolerations": [
        {"key": GPU_TAINT.key, "operator": "Equal", "value": GPU_TAINT.value, "effect": str(GPU_TAINT.effect)}]} if pool else {}
    return {"apiVersion": "/".join(JOBSET), "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": ANY_REGION}},
            "spec": {"managedBy": MANAGED_BY, "replicatedJobs": [{"name": "probe", "replicas": 1, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container], **placement}}}}}]}}


def probe_state(workloads: list[dict[str, Any]], jobset: str) -> tuple[str, str | None]:
    """(the MultiKueue check's state, the worker that admitted it) of the probe's Workload."""
    mine = [w for w in workloads if any(o.get("kind") == "JobSet" and o.get("name") == jobset
                                        for o in w.get("metadata", {}).get("ownerReferences") or [])]
    if not mine:
        return "NoWorkload", None
    status = mine[0].get("status", {})
    state = next((c.get("state", "Pending") for c in status.get("admissionChecks") or [] if c.get("name") == ADMISSION_CHECK),
                 "Pending")
    return state, status.get("clusterName")


def jobset_finished(jobset: dict[str, Any] | None) -> str | None:
    """"Completed" or "Failed" once the JobSet (its status copied back from the worker) has ended."""
    conditions = (jobset or {}).get("status", {}).get("conditions") or []
    return next((c["type"] for c in conditions if c.get("type") in ("Completed", "Failed") and c.get("status") == "True"),
                None)


def check_probe(kube: Any, namespace: str, image: str, *, now: float, pool: str = "", timeout_s: float = PROBE_TIMEOUT_S,
                sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> CheckResult:
    name = f"multikueue-probe-{int(now)}"
    kube.create_custom_object(*JOBSET, namespace, "jobsets", probe_jobset(name, namespace, image, pool))
    try:
        deadline, state, worker, ended = clock() + timeout_s, "Pending", None, None
        while clock() < deadline:
            state, worker = probe_state(kube.custom_objects(*KUEUE, namespace, "workloads"), name)
            if state in ("Rejected", "Retry"):
                break
            if state == "Ready" and worker:
                if not pool:  # an outputs file from before the probe pool: admission is all it can show
                    return passed("multikueue.probe", f"a probe on queue {ANY_REGION} was admitted by worker {worker}",
                                  worker=worker)
                ended = jobset_finished(kube.custom_object(*JOBSET, namespace, "jobsets", name))
                if ended == "Completed":
                    return passed("multikueue.probe", f"a 1-GPU probe on queue {ANY_REGION} ran to completion on "
                                  f"worker {worker} (pool {pool})", worker=worker)
                if ended == "Failed":
                    break
            sleep(10)
    finally:
        kube.delete_custom_object(*JOBSET, namespace, "jobsets", name)
    if worker and state == "Ready":
        return failed("multikueue.probe", f"worker {worker} admitted the probe, which " + (
            "failed" if ended == "Failed" else f"did not complete in {timeout_s / 60:.0f} minutes"), Diagnosis(
            f"the worker could not run a 1-GPU pod of pool {pool}: no node came up (vCPU quota: aws.ec2-vcpu-quotas, "
            "spot capacity), the image cannot be pulled there, or the GPU driver is not reachable in the pod",
            f"kubectl --context <{worker}> -n {namespace} get pods,events | grep multikueue-probe"), worker=worker)
    return failed("multikueue.probe", f"the probe was not admitted by any worker (check state {state})", Diagnosis(
        "no worker admitted a one-pod job: its namespace or any-region LocalQueue is missing there, its quota is "
        f"full, it has no pool {pool or '(none asked)'}, or no worker is connected (multikueue.workers)",
        f"kubectl -n {namespace} get workloads -o wide; kubectl -n {namespace} describe workload"))
