"""A healthy prod cluster running `pretrain-p5` (2 x p5.48xlarge), as the Kubernetes API would
list it, plus the broken variants the go-live checks must catch. Objects carry the fields the
checks read, in the API's own shape (`kubectl get -o json`). Trainer logs are written with the
trainer's own writer (trainer/launcher/progress.py `log`), so their format is the producer's.
"""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import Any

from fake_kube import Scenario, key
from launcher import progress

ROOT = Path(__file__).resolve().parent.parent

JOB = "pretrain-p5"
POOL = "p5-efa"
GPU_NODES = ("ip-10-0-1-11", "ip-10-0-1-12", "ip-10-0-1-13")  # the third is an idle spare
CHECKPOINT_INTERVAL_S = 600.0
RUN_SECONDS = 2400
STEP_EVERY_S = 10


def _node(name: str, pool: str, allocatable: dict[str, str], ready: str = "True",
          instance_type: str = "p5.48xlarge") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"gpu-training/pool": pool, "node.kubernetes.io/instance-type": instance_type}},
            "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": ready,
                                                                   "reason": "KubeletReady"}]}}


def _pod(name: str, namespace: str, node: str, labels: dict[str, str], container: str = "main",
         state: dict[str, Any] | None = None, phase: str = "Running", restarts: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"nodeName": node},
            "status": {"phase": phase,
                       "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False"},
                                      {"type": "PodScheduled", "status": "True"}],
                       "containerStatuses": [{"name": container, "restartCount": restarts,
                                              "state": state or {"running": {"startedAt": "2026-11-30T10:00:00Z"}}}]}}


def _available(namespace: str, name: str, replicas: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"replicas": replicas},
            "status": {"availableReplicas": replicas, "conditions": [{"type": "Available", "status": "True"}]}}


def fabric_status(ts: float, found: tuple[int, ...] = (32,), gdr: bool | None = True, verdict: str = "efa") -> str:
    """The launcher's fabric_status line on a p5 (trainer/launcher/main.py, fabric.NetworkCheck.summary)."""
    line = io.StringIO()
    progress.log("fabric_status", stream=line, verdict=verdict, efa_devices_expected=32, efa_devices_found=list(found),
                 gpudirect_rdma_expected=True, gpudirect_rdma=gdr)
    record = json.loads(line.getvalue())
    record["ts"] = round(ts, 3)
    return json.dumps(record, separators=(",", ":")) + "\n"


def trainer_log(now: float, *, loss=None, saves_until: float | None = None, initialised: bool = True) -> str:
    """Rank 0's log of a run that started RUN_SECONDS ago: launcher, trainer start, a step every
    STEP_EVERY_S with the loss `loss(i)`, a checkpoint every CHECKPOINT_INTERVAL_S (until
    `saves_until` seconds into the run). Not `initialised`: the launcher's lines only (the
    trainer never got past its first collective)."""
    rng = random.Random(7)
    loss = loss or (lambda i: 2.3 * math.exp(-i / 120) + 0.2 + rng.uniform(-0.03, 0.03))
    out = io.StringIO()
    start = now - RUN_SECONDS
    lines: list[tuple[float, str, dict[str, Any]]] = [
        (start, "launcher_start", {"job_id": JOB, "nnodes": 2, "nproc_per_node": 8}),
        (start + 0.1, "resume_selected", {"path": "", "step": None, "skipped": []}),
        (start + 45, "trainer_start", {"world_size": 16, "backend": "nccl", "start_step": 0, "steps": 100000,
                                       "checkpoint_every_steps": None, "checkpoint_interval_s": CHECKPOINT_INTERVAL_S,
                                       "some_future_field": {"ignored": True}}),
        (start + 46, "loader_warmup", {"note": "an event verify does not know"}),
    ]
    if not initialised:
        del lines[2:]
    t, step = start + 50, 0
    while initialised and t < now - 5:
        step += 1
        lines.append((t, "step", {"step": step, "loss": round(loss(step), 6), "samples_per_s": 5120.0, "epoch": 0}))
        since = t - (start + 45)
        if since >= CHECKPOINT_INTERVAL_S * (1 + sum(1 for _, e, _ in lines if e == "checkpoint_saved")) and \
                (saves_until is None or since <= saves_until):
            lines.append((t + 1, "checkpoint_saved", {"step": step, "path": f"/workspace/checkpoints/{JOB}/step-{step:09d}",
                                                      "reason": "schedule", "duration_s": 12.5,
                                                      "next_interval_s": CHECKPOINT_INTERVAL_S}))
        t += STEP_EVERY_S
    for ts, event, fields in lines:
        line = io.StringIO()
        progress.log(event, stream=line, **fields)
        record = json.loads(line.getvalue())
        record["ts"] = round(ts, 3)  # the writer stamps the wall clock; the story needs its own times
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
    out.write("[W socket] torchrun noise that is not JSON\n")
    return out.getvalue()


KUEUE = "kueue.x-k8s.io"
MULTIKUEUE = f"{KUEUE}/multikueue"  # a JobSet's spec.managedBy when MultiKueue dispatches it


def _active(name: str) -> dict[str, Any]:
    """Kueue's `Active` condition as a connected MultiKueueCluster and its AdmissionCheck carry it."""
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "Active", "status": "True", "reason": "Active", "message": "Connected"}]}}


def dispatch_to(worker: str):
    """The manager's Kueue: a JobSet managed by MultiKueue gets a Workload whose MultiKueue check
    is Ready and that names the worker which admitted it (`status.clusterName`)."""
    def on_create(s: Scenario, collection: str, body: dict[str, Any]) -> None:
        if body.get("kind") != "JobSet" or body.get("spec", {}).get("managedBy") != MULTIKUEUE:
            return
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        s.add(key("workloads", ns, KUEUE), {
            "metadata": {"name": f"jobset-{name}-7c1d0", "ownerReferences": [{"kind": "JobSet", "name": name}]},
            "status": {"admissionChecks": [{"name": "multikueue", "state": "Ready"}], "clusterName": worker}})
        # ... and the worker ran it: MultiKueue copies the remote JobSet's status to the local one.
        body.setdefault("status", {})["conditions"] = [{"type": "Completed", "status": "True"}]
    return on_create


def _multikueue_manager(s: Scenario, outputs: dict[str, Any]) -> None:
    """On a manager (its outputs' `multiKueue.role`): every worker connected, the AdmissionCheck
    Active, and the first worker admits what is dispatched."""
    multikueue = outputs.get("multiKueue") or {}
    if multikueue.get("role") != "manager":
        return
    s.add(key("multikueueclusters", group=KUEUE), *[_active(w) for w in multikueue["workers"]])
    s.add(key("admissionchecks", group=KUEUE), _active("multikueue"))
    s.on_create = dispatch_to(multikueue["workers"][0])


def healthy(outputs: dict[str, Any], now: float) -> Scenario:
    ns = outputs["training"]["namespace"]
    # maxPods 100: 2 ENIs x 49 + 2 (nodeadm), under the managed node group's cap of 250.
    p5 = {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "5120Mi", "cpu": "191", "memory": "2000Gi",
          "pods": "100"}
    s = Scenario()
    s.add(key("nodes"), _node("ip-10-0-0-5", "system", {"cpu": "8", "memory": "30Gi"}, instance_type="m6i.xlarge"),
          *[_node(n, POOL, dict(p5)) for n in GPU_NODES])
    for n in GPU_NODES:
        s.add(key("pods", "kube-system"),
              _pod(f"nvidia-device-plugin-{n[-2:]}", "kube-system", n, {"app.kubernetes.io/name": "nvidia-device-plugin"}),
              _pod(f"aws-efa-k8s-device-plugin-{n[-2:]}", "kube-system", n, {"name": "aws-efa-k8s-device-plugin"}),
              _pod(f"fsx-csi-node-{n[-2:]}", "kube-system", n, {"app": "fsx-csi-node"}, "fsx-plugin"))
    s.add(key("deployments", "kube-system", "apps"), _available("kube-system", "cluster-autoscaler-aws-cluster-autoscaler"))
    s.add(key("deployments", "kueue-system", "apps"), _available("kueue-system", "kueue-controller-manager", 2))
    s.add(key("deployments", "jobset-system", "apps"), _available("jobset-system", "jobset-controller"))
    s.add(key("deployments", "external-secrets", "apps"), *[_available("external-secrets", f"external-secrets{suffix}")
                                                          for suffix in ("", "-webhook", "-cert-controller")])
    s.add(key("daemonsets", "kube-system", "apps"), {"metadata": {"name": "nvidia-device-plugin"}},
          {"metadata": {"name": "aws-efa-k8s-device-plugin"}}, {"metadata": {"name": "fsx-csi-node"}})
    s.add(key("externalsecrets", ns, "external-secrets.io"),
          {"metadata": {"name": "training-secrets"},
           "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "SecretSynced"}]}})
    s.add(key("secrets", ns), {"metadata": {"name": "training-secrets"}})
    s.add(key("jobsets", ns, "jobset.x-k8s.io"), {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                                   "metadata": {"name": JOB, "namespace": ns},
                                                   "status": {"restarts": 0, "restartsCountTowardsMax": 0}})
    s.add(key("workloads", ns, "kueue.x-k8s.io"), {
        "metadata": {"name": f"jobset-{JOB}-3f2a1", "ownerReferences": [{"kind": "JobSet", "name": JOB}]},
        "status": {"admission": {"clusterQueue": ns},
                   "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]}})
    labels = {"jobset.sigs.k8s.io/jobset-name": JOB}
    pods = [f"{JOB}-node-0-0-x7k2p", f"{JOB}-node-0-1-m4q9z"]
    s.add(key("pods", ns), *[_pod(p, ns, GPU_NODES[i], labels, "trainer") for i, p in enumerate(pods)])
    # Both launchers report the fabric their ranks found: 32 of 32 EFA devices, GPUDirect RDMA.
    fabric = fabric_status(now - RUN_SECONDS + 40)
    s.logs[f"{ns}/{pods[0]}"] = trainer_log(now) + fabric
    # Only global rank 0 logs steps; the other pod's launcher logs its own start.
    s.logs[f"{ns}/{pods[1]}"] = trainer_log(now).split("\n", 2)[0] + "\n" + fabric
    _multikueue_manager(s, outputs)
    return s


def job_pods(scenario: Scenario, namespace: str) -> list[dict[str, Any]]:
    return [p for p in scenario.objects[key("pods", namespace)] if "jobset.sigs.k8s.io/jobset-name" in p["metadata"]["labels"]]
