"""MultiKueue on the manager: each worker connected and Active, and a probe dispatched and admitted.

What "connected" means is Kueue's own condition: MultiKueueCluster `Active=True` (reason
`Active`, message `Connected`) and the AdmissionCheck `Active=True` (kueue v0.19.2
site/content/en/docs/tasks/manage/setup_multikueue.md, "Upon successful configuration ...").
The probe is a one-pod JobSet on the any-region queue, managed by MultiKueue: it passes once its
Workload on the manager has the MultiKueue check `Ready` and names the worker that admitted it
(`status.clusterName`), then it is deleted, here and (by MultiKueue's garbage collection) there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from verify.report import CheckResult, Diagnosis, failed, passed

KUEUE = ("kueue.x-k8s.io", "v1beta2")
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
ADMISSION_CHECK = "multikueue"
ANY_REGION = "any-region"
MANAGED_BY = "kueue.x-k8s.io/multikueue"
PROBE_TIMEOUT_S = 600


def _active(obj: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == "Active"), {})


def check_workers(clusters: list[dict[str, Any]], check: dict[str, Any] | None) -> CheckResult:
    """`clusters`: the manager's MultiKueueClusters; `check`: its MultiKueue AdmissionCheck."""
    if not clusters:
        return failed("multikueue.workers", "no MultiKueueCluster on this cluster", Diagnosis(
            "the stack is not a MultiKueue manager, or its objects were not created",
            "kubectl get multikueueclusters,multikueueconfigs,admissionchecks"))
    down = [(c["metadata"]["name"], _active(c)) for c in clusters if _active(c).get("status") != "True"]
    if down:
        worker, condition = down[0]
        return failed("multikueue.workers", f"{len(down)} of {len(clusters)} workers not connected", Diagnosis(
            f"{worker}: {condition.get('reason', 'no Active condition')} {condition.get('message', '')}".strip()
            + ": the kubeconfig Secret is missing or expired (the rotation CronJob), the access entry is missing, "
            "or the worker's API endpoint is unreachable from the manager's VPC",
            f"kubectl -n kueue-system logs job/$(kubectl -n kueue-system get jobs -o name | tail -1 | cut -d/ -f2); "
            f"kubectl get multikueuecluster {worker} -o yaml"),
            *[f"{name}: {c.get('reason', '?')} {c.get('message', '')}".strip() for name, c in down])
    if check is None or _active(check).get("status") != "True":
        return failed("multikueue.workers", "the MultiKueue AdmissionCheck is not Active", Diagnosis(
            "the check names a MultiKueueConfig that lists no connected worker",
            f"kubectl get admissioncheck {ADMISSION_CHECK} -o yaml"))
    return passed("multikueue.workers", f"{len(clusters)} workers connected: "
                  + ", ".join(c["metadata"]["name"] for c in clusters), workers=len(clusters))


def probe_jobset(name: str, namespace: str, image: str) -> dict[str, Any]:
    """The smallest job the any-region queue takes: one pod, a tenth of a CPU, no GPU."""
    container = {"name": "probe", "image": image, "command": ["python3", "-c", "print('multikueue probe')"],
                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
                 "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "runAsUser": 65532,
                                     "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}}
    return {"apiVersion": "/".join(JOBSET), "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": ANY_REGION}},
            "spec": {"managedBy": MANAGED_BY, "replicatedJobs": [{"name": "probe", "replicas": 1, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}}]}}


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


def check_probe(kube: Any, namespace: str, image: str, *, now: float, timeout_s: float = PROBE_TIMEOUT_S,
                sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> CheckResult:
    name = f"multikueue-probe-{int(now)}"
    kube.create_custom_object(*JOBSET, namespace, "jobsets", probe_jobset(name, namespace, image))
    try:
        deadline, state, worker = clock() + timeout_s, "Pending", None
        while clock() < deadline:
            state, worker = probe_state(kube.custom_objects(*KUEUE, namespace, "workloads"), name)
            if state == "Ready" and worker:
                return passed("multikueue.probe", f"a probe on queue {ANY_REGION} was admitted by worker {worker}",
                              worker=worker)
            if state in ("Rejected", "Retry"):
                break
            sleep(10)
    finally:
        kube.delete_custom_object(*JOBSET, namespace, "jobsets", name)
    return failed("multikueue.probe", f"the probe was not admitted by any worker (check state {state})", Diagnosis(
        "no worker admitted a one-pod job: its namespace or any-region LocalQueue is missing there, its quota is "
        "full, or no worker is connected (multikueue.workers)",
        f"kubectl -n {namespace} get workloads -o wide; kubectl -n {namespace} describe workload"))
