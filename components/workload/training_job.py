"""A distributed training job: a JobSet of N nodes x G GPUs, admitted through Kueue.

One pod per node runs the trainer image's launcher, which starts torchrun with c10d rendezvous
on pod 0 (stable DNS through the JobSet's headless service). The pod pins
`net.ipv4.ip_local_port_range` to the same NCCL range the socket-fabric security group opens.
Failures: a disruption (spot reclaim, preemption, drain) restarts the whole gang from the last
checkpoint without spending `maxRestarts`, whether the Job first sees the evicted pod
(DisruptionTarget) or a peer that stopped with it (exit 143); a contract error (exit 2) fails at
once; anything else restarts the gang and spends one restart. Disruptions are bounded too: the launcher exits 2
once the gang has restarted more than `maxRestarts + maxDisruptionRestarts` times in all.
EFA pools get the fabric environment (fabric_env.py), and the launcher fails the job if NCCL
did not pick EFA. The pod requests CPU without a limit (unless the job sets `cpu`), so the
node's daemons always keep what they asked for and the trainer may use whatever is idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.cluster.pool_scheduling import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    POOL_LABEL,
    node_taints,
)
from components.common.manifests import built_in_object, checkov_skips, custom_resource
from components.config import FabricConfig, NodePoolConfig, memory_tier
from components.config.training import JobConfig
from components.config.vocabularies import Capacity
from components.data import training_data
from components.facts.instance_types import INSTANCE_TYPES
from components.workload.fabric_env import fabric_env
from components.workload.namespaced import NamespacedArgs
from components.workload.sizing import PodShape, default_pod_shape, job_mtbf_seconds

REPLICATED_JOB = "node"
HPARAMS_DIR = "/etc/trainer"
HEARTBEAT_FILE = "/tmp/trainer/heartbeat"
# Rendezvous, data loading and checkpoint restore happen before the first heartbeat.
STARTUP_BUDGET_SECONDS = 1800
PROBE_PERIOD_SECONDS = 30
CONTRACT_ERROR_EXIT_CODE = 2  # the launcher's "bad contract, usage or hparams"
# The launcher's "stopped after saving": on the pod that got SIGTERM, and on every other pod of
# the gang, whose workers stopped with it. Only a pod the API evicted carries DisruptionTarget;
# the Job fails on whichever pod it sees first, and a peer's exit must not make a spot reclaim
# a failure that spends one of `maxRestarts`.
STOPPED_EXIT_CODE = 143
# How long pods wait for pod 0's rendezvous store before they give up (and the gang restarts):
# inside the startup budget, since no pod heartbeats before the rendezvous.
RENDEZVOUS_WAIT_SECONDS = STARTUP_BUDGET_SECONDS // 2
# A failed worker restarts the gang's workers inside the running pods this often (torchrun's restart
# rounds, trainer/launcher/inplace.py) before its pod fails and the JobSet recreates the gang, which
# costs pod deletion, scheduling and container start on top ("several minutes per restart" at scale:
# kubernetes-sigs/jobset keps/467-InPlaceRestart). Needs no Kubernetes or JobSet feature gate: the
# pods and the JobSet never see it. A config error, a stop and a frozen peer are never retried in
# place (the launcher ends torchrun), so the bound only caps repeated crashes within one pod's life.
INPLACE_RESTARTS = 2
# JobSet's count of the gang's restarts, failures and disruptions together (jobset v0.12.0
# constants.RestartsKey), which it puts on every pod.
RESTART_ATTEMPT_ANNOTATION = "jobset.sigs.k8s.io/restart-attempt"
SCRATCH_DIR = "/scratch"
# The run's progress on its own pod (workload/progress_access.py): an API token for the trainer
# container only, where the official client's in-cluster config reads it, bound to the pod (the
# admission policy checks that binding) and short-lived (the kubelet renews it at 80% of its life:
# Kubernetes docs, "Configure Service Accounts for Pods", Launch a Pod using service account token projection).
API_TOKEN_VOLUME = "api-token"
API_TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_TOKEN_SECONDS = 3600
POD_NAME_VAR, POD_NAMESPACE_VAR = "TRAIN_POD_NAME", "TRAIN_POD_NAMESPACE"  # launcher/status_publisher.py
# Of a node's instance store, what its pods' scratch volumes may fill: the same RAID0 array
# holds the container images and the pod logs (node_bootstrap.py).
SCRATCH_SHARE_OF_INSTANCE_STORE = 0.8
# Set by the job command (`gpu-training job submit`) on every JobSet it submits, never by a plan:
# how the platform tells a run submitted ad hoc from the stack's own `training.jobs` (which carry
# no such label). Both share one manifest (jobset_manifest) and so the same TRAIN_* contract,
# checkpoint directory and metric dimensions; docs/team-stacks.md, "Jobs submitted ad hoc".
SUBMITTED_BY_LABEL = "gpu-training/submitted-by"
SUBMITTED_BY_JOB_COMMAND = "job-command"
SKIP_REASONS = {
    # checkov, kept next to what they excuse
    "CKV_K8S_35": "Secrets reach containers as env vars (a requirement); they come from the External Secrets "
                  "sync, never from the manifest",
    "CKV_K8S_40": "UID 1000 is the image's user and the EFS access point's POSIX owner; no host paths are shared",
    "CKV_K8S_11": "No CPU limit unless the job sets cpu: the request is the node's computed headroom, CPU shares keep every "
                  "other pod's request, and a cap would only idle cores",
}


def pod_shape(job: JobConfig, pool: NodePoolConfig) -> PodShape:
    default = default_pod_shape(pool, job.gpus_per_node)
    return PodShape(gpus=default.gpus, efa=default.efa, cpu=job.cpu or default.cpu,
                    memory_gib=job.memory_gib or default.memory_gib)


def scratch_gib(job: JobConfig, pool: NodePoolConfig) -> int:
    """Size of the pod's /scratch volume on the node's NVMe; 0 on types without instance store."""
    store_gb = min(INSTANCE_TYPES[t].instance_store_gb for t in pool.instance_types)
    share = job.gpus_per_node / pool.gpus_per_node
    return int(store_gb * 10**9 / 2**30 * SCRATCH_SHARE_OF_INSTANCE_STORE * share)


def trainer_env(job: JobConfig, pool: NodePoolConfig, fabric: FabricConfig, *, stack: str) -> list[dict[str, Any]]:
    """The launcher contract (trainer/README.md), NCCL settings, then the job's own env and secrets.
    `stack`: the stack that owns the run (its checkpoint namespace, training_data.run_checkpoint_dir)."""
    contract = {
        # torchrun's own settings for the gang's size, read by torchrun and checked by the launcher
        # (trainer/launcher/contract.py), as kubeflow/trainer sets them.
        "PET_NNODES": job.nodes,
        "PET_NPROC_PER_NODE": job.gpus_per_node,
        # One release: the same under their old names, for images whose launcher predates the
        # rename and reads only these (docs/operations.md, "Upgrading to torchrun's own ...").
        "TRAIN_NNODES": job.nodes,
        "TRAIN_NPROC_PER_NODE": job.gpus_per_node,
        # Pod 0's stable name: <jobset>-<replicated job>-<job index>-<pod index>.<subdomain>
        "TRAIN_RDZV_HOST": f"{job.name}-{REPLICATED_JOB}-0-0.{job.name}",
        "TRAIN_RDZV_PORT": fabric.rendezvous_ports[0],
        "TRAIN_JOB_ID": job.name,
        "TRAIN_CHECKPOINT_DIR": training_data.run_checkpoint_dir(stack, job.name),
        "TRAIN_RUN_ID": training_data.run_id(stack, job.name),
        # One release: a run without a checkpoint of its own resumes from its directory of the
        # layout before one namespace per run (docs/multi-region.md, "Upgrading to ...").
        "TRAIN_LEGACY_CHECKPOINT_DIR": f"{training_data.CHECKPOINTS.mount_path}/{job.name}",
        # The launcher ends a stopping pod's workers by this minus its own 5 s (launcher.supervisor).
        "TRAIN_TERMINATION_GRACE_S": job.termination_grace_period_seconds,
        "TRAIN_DATA_DIR": training_data.DATASETS.mount_path,
        "TRAIN_HPARAMS_FILE": f"{HPARAMS_DIR}/hparams.yaml",
        "TRAIN_MTBF_S": job_mtbf_seconds(pool, job.nodes),
        "TRAIN_HEARTBEAT_FILE": HEARTBEAT_FILE,
        "TRAIN_MAX_GANG_RESTARTS": job.max_restarts + job.max_disruption_restarts,
        "TRAIN_RDZV_WAIT_S": RENDEZVOUS_WAIT_SECONDS,
        # torchrun's own setting, read by torchrun and the launcher (trainer/launcher/inplace.py).
        "PET_MAX_RESTARTS": INPLACE_RESTARTS,
        # Turn NCCL hangs into errors the JobSet can restart, with a trace for the post-mortem.
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": 1,
        "TORCH_NCCL_DUMP_ON_TIMEOUT": 1,
        "TORCH_NCCL_TRACE_BUFFER_SIZE": 2000,
        **fabric_env(INSTANCE_TYPES[pool.instance_types[0]], efa=pool.efa),
        "NCCL_DEBUG": "WARN",
        "HOME": "/tmp",
    }
    if job.checkpoint_interval_seconds:
        contract["TRAIN_CHECKPOINT_INTERVAL_S"] = job.checkpoint_interval_seconds
    if job.memory_checkpoint_seconds:  # the memory tier (trainer/launcher/memory_tier.py) in its emptyDir
        contract["TRAIN_MEMORY_CHECKPOINT_DIR"] = memory_tier.MOUNT_PATH
        contract["TRAIN_MEMORY_CHECKPOINT_INTERVAL_S"] = job.memory_checkpoint_seconds
    if scratch_gib(job, pool):
        contract["SCRATCH_DIR"] = SCRATCH_DIR
    plain = [{"name": k, "value": str(v)} for k, v in {**contract, **job.env}.items()]
    restart_attempt = {"name": "TRAIN_RESTART_ATTEMPT", "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.annotations['{RESTART_ATTEMPT_ANNOTATION}']"}}}
    pod = [{"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
           for name, path in ((POD_NAME_VAR, "metadata.name"), (POD_NAMESPACE_VAR, "metadata.namespace"))]
    return [*plain, restart_attempt, *pod, *training_data.secret_env(job.secrets)]


def _memory_tier_gib(job: JobConfig) -> int:
    """The memory tier's emptyDir size (config/memory_tier.py validated that it fits), 0 when off."""
    if not job.memory_checkpoint_seconds or not job.checkpoint_gib:
        return 0
    return memory_tier.tier_gib(job.checkpoint_gib)


def _trainer_resources(job: JobConfig, pool: NodePoolConfig) -> dict[str, dict[str, str]]:
    shape = pod_shape(job, pool)
    limits = {"memory": f"{shape.memory_gib}Gi", GPU_RESOURCE: str(shape.gpus)}
    if shape.efa:
        limits[EFA_RESOURCE] = str(shape.efa)
    requests = {"cpu": str(shape.cpu), **limits}
    if job.cpu is not None:  # a configured CPU count is also a cap
        limits["cpu"] = str(job.cpu)
    return {"requests": requests, "limits": limits}


def trainer_container(job: JobConfig, pool: NodePoolConfig, fabric: FabricConfig,
                      checkpoints_sub_path: str | None, *, stack: str) -> dict[str, Any]:
    scratch = scratch_gib(job, pool)
    heartbeat_check = ["heartbeat-check", str(job.heartbeat_timeout_seconds)]
    return {
        "name": "trainer",
        "image": job.image,
        "imagePullPolicy": "Always",
        # Without args the image's CMD is the training command (config/training.py DEFAULT_ARGS).
        **({"args": list(job.args)} if job.args else {}),
        "env": trainer_env(job, pool, fabric, stack=stack),
        # Memory, GPUs, EFA and huge pages: requests equal limits (exclusive devices; a leaking
        # trainer cannot starve the node). CPU: requested, not capped, unless the job sets `cpu`:
        # CPU shares already protect every other pod's request, and a cap would only idle cores.
        "resources": _trainer_resources(job, pool),
        "ports": [{"name": "rendezvous", "containerPort": fabric.rendezvous_ports[0], "protocol": "TCP"}],
        "startupProbe": {"exec": {"command": heartbeat_check}, "periodSeconds": PROBE_PERIOD_SECONDS,
                         "failureThreshold": STARTUP_BUDGET_SECONDS // PROBE_PERIOD_SECONDS},
        # A hung loop stops refreshing the heartbeat: restart instead of burning GPU hours.
        "livenessProbe": {"exec": {"command": heartbeat_check}, "periodSeconds": PROBE_PERIOD_SECONDS,
                          "failureThreshold": 3},
        "volumeMounts": [
            *training_data.volume_mounts(checkpoints_sub_path),
            {"name": "hyperparameters", "mountPath": HPARAMS_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            *([{"name": memory_tier.VOLUME, "mountPath": memory_tier.MOUNT_PATH}] if _memory_tier_gib(job) else []),
            {"name": "tmp", "mountPath": "/tmp"},
            *([{"name": "scratch", "mountPath": SCRATCH_DIR}] if scratch else []),
            {"name": API_TOKEN_VOLUME, "mountPath": API_TOKEN_DIR, "readOnly": True},
        ],
        "securityContext": training_data.container_security_context(),
    }


def trainer_pod_spec(job: JobConfig, pool: NodePoolConfig, fabric: FabricConfig, *, hyperparameters_config_map: str,
                     checkpoints_sub_path: str | None, stack: str) -> dict[str, Any]:
    scratch = scratch_gib(job, pool)
    return {
        "serviceAccountName": training_data.SERVICE_ACCOUNT,
        # EKS Pod Identity mounts its own token; the one Kubernetes API token the pod has is the
        # trainer container's projected `api-token` (its progress annotation), not the default mount.
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": job.termination_grace_period_seconds,
        "nodeSelector": {POOL_LABEL: pool.name},
        # The pool's own taints (the GPU taint, and any the stack adds): this job is meant for it.
        "tolerations": [{"key": t.key, "operator": "Equal", "value": t.value, "effect": str(t.effect)}
                        for t in node_taints(pool)],
        "securityContext": {
            **training_data.pod_security_context(),
            # Pins NCCL's ephemeral ports to the range the fabric security group opens.
            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": fabric.nccl_port_range.sysctl_value}],
        },
        "containers": [trainer_container(job, pool, fabric, checkpoints_sub_path, stack=stack)],
        "volumes": [
            *training_data.pod_volumes(),
            {"name": "hyperparameters", "configMap": {"name": hyperparameters_config_map}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{job.shared_memory_gib}Gi"}},
            # Lives as long as the pod: an in-place restart keeps it, a recreated pod starts empty.
            *([{"name": memory_tier.VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{_memory_tier_gib(job)}Gi"}}]
              if _memory_tier_gib(job) else []),
            {"name": "tmp", "emptyDir": {"sizeLimit": "10Gi"}},
            # Local NVMe (RAID0) scratch, e.g. to stage checkpoints or data; empty at every start.
            *([{"name": "scratch", "emptyDir": {"sizeLimit": f"{scratch}Gi"}}] if scratch else []),
            {"name": API_TOKEN_VOLUME, "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": API_TOKEN_SECONDS}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ]}},
        ],
    }


def _jobset_failure_policy(job: JobConfig) -> dict[str, Any]:
    return {
        "maxRestarts": job.max_restarts,
        "rules": [
            {"name": "contract_error", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"],
             "onJobFailureMessagePatterns": [f"failed with exit code {CONTRACT_ERROR_EXIT_CODE}"]},
            {"name": "disruption", "action": "RestartJobSetAndIgnoreMaxRestarts",
             "onJobFailureReasons": ["PodFailurePolicy"],
             "onJobFailureMessagePatterns": ["has condition DisruptionTarget"]},
            {"name": "stopped", "action": "RestartJobSetAndIgnoreMaxRestarts",
             "onJobFailureReasons": ["PodFailurePolicy"],
             "onJobFailureMessagePatterns": [f"failed with exit code {STOPPED_EXIT_CODE} matching"]},
        ],
    }


def _indexed_job_spec(job: JobConfig, labels: dict[str, str], pod_spec: dict[str, Any]) -> dict[str, Any]:
    """One pod per node, all started together; a pod that fails fails its Job (the JobSet restarts the gang)."""
    annotations = {
        # A changed hyperparameter file changes the pod template, so the job is replaced.
        "gpu-training/hyperparameters-sha256": job.hyperparameters_sha256,
        # Never scale a node away from under a running gang.
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
    }
    return {
        "parallelism": job.nodes,
        "completions": job.nodes,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In",
                                                  "values": [CONTRACT_ERROR_EXIT_CODE]}},
            {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In",
                                                  "values": [STOPPED_EXIT_CODE]}},
        ]},
        "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
    }


def _pod_labels(job: JobConfig) -> dict[str, str]:
    return {"app.kubernetes.io/name": job.name, "app.kubernetes.io/component": "training",
            "app.kubernetes.io/part-of": "gpu-training"}


def jobset_manifest(job: JobConfig, *, stack: str, namespace: str, local_queue: str, pool: NodePoolConfig,
                    fabric: FabricConfig, hyperparameters_config_map: str,
                    checkpoints_sub_path: str | None = None) -> dict[str, Any]:
    pod_spec = trainer_pod_spec(job, pool, fabric, hyperparameters_config_map=hyperparameters_config_map,
                                checkpoints_sub_path=checkpoints_sub_path, stack=stack)
    labels = _pod_labels(job)
    spec: dict[str, Any] = {}
    if job.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = job.ttl_seconds_after_finished
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": job.name,
            "namespace": namespace,
            "labels": {**labels, "kueue.x-k8s.io/queue-name": local_queue},
            # Accepted deviations, justified where a reviewer reads them (checkov's skip syntax).
            "annotations": checkov_skips(SKIP_REASONS),
        },
        "spec": {
            # Headless service <job>.<namespace>: stable pod DNS names for the rendezvous.
            "network": {"enableDNSHostnames": True, "subdomain": job.name, "publishNotReadyAddresses": True},
            "failurePolicy": _jobset_failure_policy(job),
            "successPolicy": {"operator": "All"},
            **spec,
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {"metadata": {"labels": labels}, "spec": _indexed_job_spec(job, labels, pod_spec)},
            }],
        },
    }


@dataclass(frozen=True, kw_only=True)
class TrainingJobArgs(NamespacedArgs):
    """namespace: where the JobSet goes; depends_on: e.g. the queue, the volumes and the secrets."""

    job: JobConfig
    """The job: image, nodes, GPUs, hyperparameters, restarts, secrets."""
    stack: str
    """The stack that owns the run: its checkpoints go to /workspace/checkpoints/<stack>/<job>."""
    pool: NodePoolConfig
    """The pool the job's pods run on: its instance type sizes the pods."""
    fabric: FabricConfig
    """The rendezvous port and the NCCL port range the pods use."""
    local_queue: str
    """The Kueue LocalQueue the job is submitted to."""
    checkpoints_sub_path: str | None = None
    """The trainer sees only this directory of the checkpoints volume (StorageMounts.checkpoints_sub_path)."""


def disruption_budget(job: JobConfig, pool: NodePoolConfig, namespace: str) -> dict[str, Any] | None:
    """A PodDisruptionBudget that allows no voluntary eviction of a running gang's pods, or None on spot.

    A managed node group update (a Kubernetes minor, a new AMI, any launch template change) drains
    its nodes through the eviction API, which honours PDBs: with this one the update waits, then
    fails with PodEvictionFailure instead of evicting a running multi-day gang (EKS User Guide,
    "Managed node update behavior", upgrade phase: "If the Pods don't leave the node within 15
    minutes and there's no force flag, the upgrade phase fails with a PodEvictionFailure error").
    `minAvailable` as a whole number: the pods belong to a Job, which has no scale subresource, so
    `maxUnavailable` would leave the budget failing to sync (Kubernetes docs, "Specifying a
    Disruption Budget for your Application", Arbitrary workloads: only an integer minAvailable).
    A pod that is not Ready (a gang still starting, or broken) may still be evicted
    (`unhealthyPodEvictionPolicy: AlwaysAllow`, stable since 1.31). Kueue's preemption and a JobSet
    restart delete pods, which no PDB holds. Spot pools get none: their nodes go on the 2-minute
    notice whatever a PDB says, and a rebalance drain restarts the gang early (docs/gpu-fabric-and-capacity.md,
    "Updates that do not drain running gangs")."""
    if pool.capacity == Capacity.SPOT:
        return None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": job.name, "namespace": namespace, "labels": {"app.kubernetes.io/name": job.name}},
        "spec": {"minAvailable": job.nodes, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                 "selector": {"matchLabels": _pod_labels(job)}},
    }


def hyperparameters_config_map(job: JobConfig, namespace: str) -> dict[str, Any]:
    """The ConfigMap a job's pods mount its hyperparameters from (also on each MultiKueue worker,
    where a dispatched copy of the job runs: workload/worker_tenant.py)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{job.name}-hyperparameters", "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": job.name}},
            "data": {"hparams.yaml": job.hyperparameters}}


@dataclass(frozen=True)
class JobPlacement:
    """Where a job runs: what `job_objects` needs besides the job itself."""

    stack: str
    """The stack that owns the run: its checkpoints go to /workspace/checkpoints/<stack>/<job>."""
    namespace: str
    """The training namespace the objects go to."""
    local_queue: str
    """The Kueue LocalQueue the JobSet is submitted to."""
    pool: NodePoolConfig
    """The pool the job's pods run on."""
    fabric: FabricConfig
    """The rendezvous port and the NCCL port range the pods use."""
    checkpoints_sub_path: str | None = None
    """The trainer sees only this directory of the checkpoints volume (StorageMounts.checkpoints_sub_path)."""


@dataclass(frozen=True)
class JobObjects:
    """The Kubernetes objects of one training job, as plain manifests."""

    hyperparameters: dict[str, Any]
    """The ConfigMap its pods mount the hyperparameters from."""
    jobset: dict[str, Any]
    """The JobSet, labelled for the LocalQueue."""
    disruption_budget: dict[str, Any] | None
    """The PodDisruptionBudget of a job on on-demand or reserved capacity; None on spot."""

    def manifests(self) -> list[dict[str, Any]]:
        """In the order they are created: the ConfigMap the pods mount, the JobSet, its budget."""
        return [self.hyperparameters, self.jobset, *([self.disruption_budget] if self.disruption_budget else [])]


def job_objects(job: JobConfig, placement: JobPlacement) -> JobObjects:
    """The one rendering of a job: the stack's TrainingJob component creates these objects, and the
    job command (job_command/) submits them for an ad-hoc job; so a job is the same either way."""
    hyperparameters = hyperparameters_config_map(job, placement.namespace)
    jobset = jobset_manifest(job, stack=placement.stack, namespace=placement.namespace,
                             local_queue=placement.local_queue, pool=placement.pool, fabric=placement.fabric,
                             hyperparameters_config_map=hyperparameters["metadata"]["name"],
                             checkpoints_sub_path=placement.checkpoints_sub_path)
    return JobObjects(hyperparameters, jobset, disruption_budget(job, placement.pool, placement.namespace))


class TrainingJob(pulumi.ComponentResource):
    def __init__(self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:TrainingJob", name, None, opts)
        objects = job_objects(args.job, JobPlacement(
            stack=args.stack, namespace=args.namespace, local_queue=args.local_queue, pool=args.pool,
            fabric=args.fabric, checkpoints_sub_path=args.checkpoints_sub_path))
        config_map = built_in_object(f"{name}-hyperparameters", objects.hyperparameters,
                                     pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        custom_resource(
            f"{name}-jobset",
            objects.jobset,
            pulumi.ResourceOptions(
                parent=self,
                depends_on=[config_map, *args.depends_on],
                # A JobSet's pod template is immutable: any change replaces the job, which resumes
                # from its last checkpoint.
                replace_on_changes=["spec"],
                delete_before_replace=True,
            ),
        )
        if objects.disruption_budget is not None:
            built_in_object(f"{name}-disruption-budget", objects.disruption_budget,
                            pulumi.ResourceOptions(parent=self, depends_on=args.depends_on))
        self.register_outputs({})
