"""The NCCL gate: a short nccl-tests all_reduce JobSet on N nodes of a pool, admitted by Kueue
like a training job, parsed and compared with the published bandwidth of the instance type.

Shape (the AWS reference runs an MPIJob, awsome-distributed-training micro-benchmarks/nccl-tests/
kubernetes/nccl-tests.yaml; JobSet has no MPI launcher, so the same roles are two replicated
jobs): `worker` = one pod per node with all its GPUs and EFA interfaces, running sshd; `launcher`
= one small pod that waits for the workers' sshd, then runs mpirun over them. The JobSet
succeeds when the launcher does and its success policy then removes the workers.

Ports: sshd listens on the stack's rendezvous port and every pod pins ip_local_port_range to the
NCCL range, as training pods do, so socket pools' fabric security group (rendezvous port + NCCL
range, from itself) carries MPI's and NCCL's traffic. The SSH key pair is made here per run and
lives in a Secret owned by the JobSet, deleted with it.
"""

from __future__ import annotations

import re
import shlex
import time
from dataclasses import dataclass
from typing import Any

from components.cluster.pool_scheduling import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    POOL_LABEL,
)
from components.facts.instance_types import INSTANCE_TYPES
from components.workload.fabric_env import fabric_env as training_fabric_env
from verify import nccl_output
from verify.checks import JOBSET
from verify.kube import Kube
from verify.nccl_reference import REFERENCE_NODES, REFERENCE_SIZE_BYTES, reference_for
from verify.report import CheckResult, Diagnosis, failed, passed, warned
from verify.stack_outputs import PoolPromise, StackOutputs

NAME_PREFIX = "verify-nccl"
LABEL = "gpu-training/verify"
SSH_DIR = "/etc/nccl-ssh"
# Paths inside the awsome nccl-tests image (nccl-tests.Dockerfile: Open MPI from the EFA installer,
# tests built with MPI=1 into /opt/nccl-tests/build).
MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
ALL_REDUCE = "/opt/nccl-tests/build/all_reduce_perf"
# Short: 8 B .. 2 GiB doubling (the reference size is the last row), 20 timed iterations, one
# correctness pass. The AWS reference uses -e 16G -n 100 (minutes); SkyPilot's -e 2G.
TEST_ARGS = ("-b", "8", "-e", "2G", "-f", "2", "-g", "1", "-c", "1", "-n", "20")
# The worker's memory: the AWS reference asks 32000Mi; /dev/shm for NCCL's intra-node buffers.
WORKER_MEMORY = "32Gi"
WORKER_CPU = "8"
SHM_SIZE = "16Gi"
JOBSET_TTL_SECONDS = 3600  # a backstop if verify itself is killed before it cleans up
POLL_SECONDS = 10
LAUNCHER_SELECTOR = "jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name=launcher"
# What NCCL (NCCL_DEBUG=INFO) and aws-ofi-nccl print about the network they use.
NETWORK_CHOICE = re.compile(r"NET/OFI|NET/Socket|NET/IB|Using network|Selected [Pp]rovider")


def fabric_env(pool: PoolPromise) -> dict[str, str]:
    """The training pods' fabric environment (components/workload/fabric_env.py: on EFA pools
    NCCL_NET=Libfabric, so a missing plugin fails instead of measuring sockets), without the
    launcher's TRAIN_* self-check settings; NCCL_DEBUG=INFO makes NCCL print the network it chose, which the
    failure diagnosis points at."""
    env = training_fabric_env(INSTANCE_TYPES[pool.instance_types[0]], efa=bool(pool.efa_per_node))
    return {**{k: v for k, v in env.items() if not k.startswith("TRAIN_")}, "NCCL_DEBUG": "INFO"}


@dataclass(frozen=True)
class NcclRun:
    name: str
    pool: PoolPromise
    nodes: int
    image: str


def worker_host(run: NcclRun, index: int) -> str:
    # JobSet pod host names: <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>
    return f"{run.name}-worker-0-{index}.{run.name}"


def launcher_script(run: NcclRun, ssh_port: int, ports: tuple[int, int]) -> str:
    gpus = run.pool.gpus_per_node
    hosts = [worker_host(run, i) for i in range(run.nodes)]
    env = fabric_env(run.pool)
    ssh = f"ssh -p {ssh_port} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes"
    mpirun = [MPIRUN, "--allow-run-as-root", "--tag-output", "-np", str(run.nodes * gpus), "-N", str(gpus),
              "--hostfile", "/tmp/hostfile", "--bind-to", "none",
              "--mca", "plm_rsh_args", ssh.removeprefix("ssh "),
              "--mca", "pml", "^ucx", "--mca", "btl", "tcp,self",
              "--mca", "btl_tcp_if_exclude", "lo,docker0",
              # MPI's TCP listeners inside the range the fabric security group opens.
              "--mca", "btl_tcp_port_min_v4", str(ports[0]),
              "--mca", "btl_tcp_port_range_v4", str(ports[1] - ports[0] + 1),
              "-x", "PATH", "-x", "LD_LIBRARY_PATH",
              *[a for k in sorted(env) for a in ("-x", f"{k}={env[k]}")],
              ALL_REDUCE, *TEST_ARGS]
    return "\n".join([
        "set -eu",
        "mkdir -p /root/.ssh && cp " + f"{SSH_DIR}/id_ed25519 /root/.ssh/id_ed25519 && chmod 600 /root/.ssh/id_ed25519",
        ": > /tmp/hostfile",
        *[f"echo '{h} slots={gpus}' >> /tmp/hostfile" for h in hosts],
        "deadline=$(( $(date +%s) + 900 ))",
        f"for host in {' '.join(hosts)}; do",
        f"  until {ssh} \"$host\" true 2>/dev/null; do",
        "    [ \"$(date +%s)\" -lt \"$deadline\" ] || { echo \"verify: no sshd answer from $host\" >&2; exit 3; }",
        "    sleep 5",
        "  done",
        "done",
        shlex.join(mpirun),
    ])


def worker_script(ssh_port: int) -> str:
    return "\n".join([
        "set -eu",
        "mkdir -p /root/.ssh /run/sshd",
        f"cp {SSH_DIR}/id_ed25519.pub /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys",
        "ssh-keygen -A >/dev/null",
        f"exec /usr/sbin/sshd -D -e -p {ssh_port}",
    ])


def _pod(run: NcclRun, outputs: StackOutputs, role: str, script: str, resources: dict[str, str]) -> dict[str, Any]:
    first, last = outputs.nccl_ports
    return {
        "metadata": {"labels": {LABEL: "nccl"}},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {POOL_LABEL: run.pool.name},
            "tolerations": [{"key": t.key, "operator": "Equal", "value": t.value, "effect": str(t.effect)}
                            for t in run.pool.taints],
            # The same pinned port range as training pods (the fabric security group opens it).
            "securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": f"{first} {last}"}]},
            "containers": [{
                "name": role,
                "image": run.image,
                "command": ["/bin/bash", "-c", script],
                "env": [{"name": k, "value": v} for k, v in sorted(fabric_env(run.pool).items())],
                "resources": {"requests": resources, "limits": dict(resources)},
                "volumeMounts": [{"name": "ssh", "mountPath": SSH_DIR, "readOnly": True},
                                 {"name": "dshm", "mountPath": "/dev/shm"}],
            }],
            "volumes": [{"name": "ssh", "secret": {"secretName": run.name, "defaultMode": 0o400}},
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}}],
        },
    }


def jobset_manifest(run: NcclRun, outputs: StackOutputs) -> dict[str, Any]:
    pool, port = run.pool, outputs.rendezvous_port
    worker_resources = {"cpu": WORKER_CPU, "memory": WORKER_MEMORY, GPU_RESOURCE: str(pool.gpus_per_node)}
    if pool.efa_per_node:
        worker_resources |= {EFA_RESOURCE: str(pool.efa_per_node)}

    def replicated(role: str, pods: int, script: str, resources: dict[str, str]) -> dict[str, Any]:
        return {"name": role, "replicas": 1, "template": {"spec": {
            "parallelism": pods, "completions": pods, "backoffLimit": 0, "completionMode": "Indexed",
            "template": _pod(run, outputs, role, script, resources)}}}

    return {
        "apiVersion": f"{JOBSET[0]}/{JOBSET[1]}",
        "kind": "JobSet",
        "metadata": {
            "name": run.name,
            "namespace": outputs.namespace,
            # Admitted by Kueue against the namespace's quota, like the training jobs.
            "labels": {"kueue.x-k8s.io/queue-name": outputs.local_queue, LABEL: "nccl"},
        },
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": run.name, "publishNotReadyAddresses": True},
            "failurePolicy": {"maxRestarts": 0},
            # Done when the launcher is done; JobSet then removes the workers (sshd never exits).
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
            "ttlSecondsAfterFinished": JOBSET_TTL_SECONDS,
            "replicatedJobs": [
                replicated("worker", run.nodes, worker_script(port), worker_resources),
                replicated("launcher", 1, launcher_script(run, port, outputs.nccl_ports), {"cpu": "1", "memory": "2Gi"}),
            ],
        },
    }


def ssh_key_pair() -> tuple[str, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public + " verify-nccl\n"


def evaluate(run: NcclRun, log: str, namespace: str) -> CheckResult:
    """Judge a finished run's launcher log against the pool's published reference."""
    check = f"nccl.{run.pool.name}"
    # The JobSet is gone when the report prints: the command re-runs the gate with a printed log.
    ns_hint = f"-n {namespace} -l {LAUNCHER_SELECTOR.format(name=run.name)} --tail=-1"
    try:
        result = nccl_output.parse(log)
    except nccl_output.NcclOutputError as e:
        return failed(check, "the test printed no result", Diagnosis(
            "mpirun or NCCL failed before the first size: workers unreachable over SSH/MPI ports, or NCCL init "
            "failed (fabric)", f"kubectl logs {ns_hint}"), str(e))
    row = result.row_at(REFERENCE_SIZE_BYTES)
    if row is None:
        return failed(check, "no 2 GiB row in the output", Diagnosis(
            "the test stopped early (out of memory or killed)", f"kubectl logs {ns_hint}"))
    busbw = row.out_of_place_busbw
    measured = {"busbw_gbps_at_2GiB": busbw, "avg_busbw_gbps": result.avg_busbw, "nodes": run.nodes,
                "instance_types": list(run.pool.instance_types)}
    if result.wrong_values:
        return failed(check, f"{result.wrong_values} wrong values in the all-reduce results", Diagnosis(
            "data corruption: a faulty GPU, NVLink or NIC on one of the nodes", f"kubectl logs {ns_hint}"), **measured)
    reference = reference_for(run.pool.instance_types)
    if reference is None or run.nodes != REFERENCE_NODES:
        why = (f"no published 2-node reference for {', '.join(run.pool.instance_types)}" if reference is None
               else f"references are for {REFERENCE_NODES} nodes, this run used {run.nodes}")
        return warned(check, f"busbw {busbw:.2f} GB/s at 2 GiB on {run.nodes} nodes: {why}; not judged "
                      "(give a floor with --nccl-min-busbw)", **measured)
    return judge(check, busbw, reference.threshold_gbps,
                 f"90% of {reference.busbw_gbps} GB/s published for {reference.instance_type} ({reference.source}, "
                 f"{reference.published})", ns_hint, measured, network_lines(log))


def network_lines(log: str) -> list[str]:
    """NCCL's own words on the transport it chose (NCCL_DEBUG=INFO), kept for the report: the
    JobSet and its logs are deleted before the report prints."""
    return [line.strip() for line in log.splitlines() if NETWORK_CHOICE.search(line)][:5]


def judge(check: str, busbw: float, floor: float, basis: str, logs: str, measured: dict[str, Any],
          network: list[str]) -> CheckResult:
    if busbw < floor:
        return failed(check, f"busbw {busbw:.2f} GB/s at 2 GiB, below {floor:.2f} GB/s", Diagnosis(
            "the fabric is not used at full speed: NCCL fell back to sockets (EFA missing from the image, or "
            "FI_PROVIDER/aws-ofi-nccl not loaded), fewer EFA interfaces than the type has, or nodes outside one "
            "placement group", f"kubectl logs {logs} | grep -E '{NETWORK_CHOICE.pattern}' "
            "(while the test runs; the lines it printed are above)"),
            f"floor: {basis}", *[f"NCCL: {line}" for line in network], **measured)
    return passed(check, f"busbw {busbw:.2f} GB/s at 2 GiB >= {floor:.2f} GB/s", f"floor: {basis}", **measured)


def run_gate(kube: Kube, outputs: StackOutputs, run: NcclRun, *, timeout_s: int, min_busbw: float | None,
             sleep=time.sleep, clock=time.monotonic) -> CheckResult:
    """Create, wait, read, judge, and always clean up."""
    group, version, plural = JOBSET
    ns, check = outputs.namespace, f"nccl.{run.pool.name}"
    private, public = ssh_key_pair()
    kube.create_secret(ns, {"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": run.name, "labels": {LABEL: "nccl"}},
                            "stringData": {"id_ed25519": private, "id_ed25519.pub": public}})
    try:
        created = kube.create_custom_object(group, version, ns, plural, jobset_manifest(run, outputs))
        # The key goes when the JobSet goes, even if this process does not get to delete it.
        kube.patch_secret(ns, run.name, {"metadata": {"ownerReferences": [{
            "apiVersion": created["apiVersion"], "kind": "JobSet", "name": run.name,
            "uid": created["metadata"]["uid"]}]}})
        deadline = clock() + timeout_s
        while True:
            jobset = kube.custom_object(group, version, ns, plural, run.name) or {}
            conditions = {c.get("type"): c for c in jobset.get("status", {}).get("conditions") or []
                          if c.get("status") == "True"}
            if "Completed" in conditions or "Failed" in conditions:
                break
            if clock() > deadline:
                suspended = jobset.get("spec", {}).get("suspend")
                return failed(check, f"the test did not finish in {timeout_s} s", Diagnosis(
                    "not admitted: the queue's GPU quota is held by other jobs (a training job?)" if suspended else
                    "pods did not start: the pool could not scale up (capacity) or the image pull is slow",
                    f"kubectl -n {ns} get workloads; kubectl -n {ns} get pods -l {LABEL}=nccl -o wide"))
            sleep(POLL_SECONDS)
        launcher = kube.pods(ns, label_selector=LAUNCHER_SELECTOR.format(name=run.name))
        log = kube.pod_log(ns, launcher[0]["metadata"]["name"], "launcher") if launcher else ""
        if "Failed" in conditions and not log:
            return failed(check, "the test failed before it printed anything", Diagnosis(
                "worker pods failed to start (image, resources) or the launcher could not reach them",
                f"kubectl -n {ns} describe jobset {run.name}"), conditions["Failed"].get("message", ""))
        result = evaluate(run, log, ns)
        if min_busbw is not None and result.status.value != "fail":
            measured = result.measurements.get("busbw_gbps_at_2GiB")
            busbw = float(measured) if isinstance(measured, int | float) else 0.0
            result = judge(check, busbw, min_busbw, "--nccl-min-busbw",
                           f"-n {ns} -l {LAUNCHER_SELECTOR.format(name=run.name)} --tail=-1",
                           dict(result.measurements), network_lines(log))
        return result
    finally:
        kube.delete_custom_object(group, version, ns, plural, run.name)
        kube.delete_secret(ns, run.name)


def run_name(pool: str, now: float) -> str:
    return f"{NAME_PREFIX}-{pool}-{int(now) % 100000:05d}"[:40]
