"""MultiKueue: one queue on the manager cluster over the environment's worker clusters.

Manager (kueue v0.19.2 site/static/examples/multikueue/multikueue-setup.yaml): a MultiKueueCluster
per worker (its kubeconfig in a Secret of kueue-system), one MultiKueueConfig listing them, an
AdmissionCheck with controller `kueue.x-k8s.io/multikueue`, and a ClusterQueue with that check,
whose quota is the sum of the workers' (docs/concepts/multikueue.md: "the quota in the manager
cluster should equal the total quota available in all worker clusters"). Jobs submit to the
LocalQueue ANY_REGION; a JobSet there carries `spec.managedBy: kueue.x-k8s.io/multikueue`, so the
manager's JobSet controller leaves it to MultiKueue, which creates it where it is admitted.

Credentials: a CronJob rotates each worker's kubeconfig Secret with a 15-minute EKS token minted
from the dispatcher role (multikueue_token_script.py); no long-lived key or token exists.

Worker: the same namespace with a LocalQueue ANY_REGION onto its own ClusterQueue (MultiKueue
expects the job's namespace and LocalQueue to exist on the worker: docs/tasks/manage/
setup_multikueue.md), and an EKS access entry for the dispatcher role in a Kubernetes group with
the rules of that page's create-multikueue-kubeconfig.sh (the JobSet and batch Job rules of it:
the only kinds this platform runs), not cluster admin, split by reach:

- writes (create and delete Jobs, JobSets and Workloads, update Workload status) in a ClusterRole
  `multikueue-manager` bound by a RoleBinding in each training namespace only (the environment's
  here; team namespaces get the same RoleBinding from their stacks);
- reads cluster-wide in `multikueue-manager-read` (a ClusterRoleBinding): ClusterQueues and
  LocalQueues (the script's queue reads), and list/watch of Workloads, Jobs and JobSets, because
  MultiKueue watches each of them on the worker across all namespaces (kueue v0.19.2
  pkg/controller/admissionchecks/multikueue/multikueuecluster.go establishWatch: `c.Watch(...,
  client.MatchingLabels{MultiKueueOriginLabel: origin})`, no namespace); a namespaced watch would
  be refused and the cluster never become active.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster.pool_scheduling import EFA_RESOURCE, GPU_RESOURCE, POOL_LABEL
from components.common.manifests import built_in_object, custom_resource, job_spec
from components.config.multikueue import MultiKueueConfig, stack_name_prefix
from components.workload.namespaced import NamespacedArgs
from components.workload.queues import COVERED_RESOURCES, KUEUE_API

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
MANAGED_BY = MULTIKUEUE_CONTROLLER
"""JobSet spec.managedBy of a JobSet the manager dispatches (kueue v0.19.2 docs/tasks/run/multikueue/jobsets.md)."""
ANY_REGION = "any-region"
"""The LocalQueue, on the manager and on every worker, of jobs that run wherever there is capacity."""
ADMISSION_CHECK = "multikueue"
FLAVOR = "multikueue"
WORKER_GROUP = "multikueue-manager"
"""The Kubernetes group of the dispatcher role's access entry on each worker, and the name of its
ClusterRole and of the RoleBinding of it in each training namespace (team stacks bind theirs so)."""
WORKER_READ = "multikueue-manager-read"
"""The ClusterRole and ClusterRoleBinding of the group's cluster-wide reads."""
KUEUE_NAMESPACE = "kueue-system"
ROTATION = "multikueue-token-rotation"
SCRIPT = Path(__file__).with_name("multikueue_token_script.py")
SCRIPT_DIR = "/opt/multikueue"
# EKS accepts a token for 15 minutes (aws-iam-authenticator README). Renewed every 10: one failed
# run leaves 5 minutes without a valid token, well inside the 15 Kueue waits before it takes a
# worker for lost and dispatches its jobs again (v1beta2 MultiKueue.WorkerLostTimeout default).
# Each renewal is a full reconnect to the worker (multikueuecluster.go updateConfigAndRefreshWatchers):
# every 10 minutes, half the reconnects of every 5.
ROTATION_SCHEDULE = "*/10 * * * *"
# A small image, so a cold pull on a fresh system node fits the deadline with the run: the Docker
# Official Image python:3.13-slim (Debian with CPython 3.13 and CA certificates, ~45 MB; the script
# needs the standard library only), pinned by its index digest of 2026-08-23 as a public Dockerfile
# pins it (found offline, not resolved here: re-pin with `docker buildx imagetools inspect
# public.ecr.aws/docker/library/python:3.13-slim`). The trainer image, several GB, took longer to
# pull than the old 120 s deadline. From ECR Public: no Docker Hub pull limit.
ROTATION_IMAGE = ("public.ecr.aws/docker/library/python:3.13-slim@sha256:"
                  "ffb752e139c0a19692a43af8d8523b274222dd68eebad5d583b45c2201c6e30a")
ROTATION_DEADLINE_SECONDS = 300
# The script logs one JSON line per renewed worker; an alarm per worker fires when a 15-minute
# window (a token's lifetime) holds none (observability/monitoring.py). Every aligned 15-minute
# window holds a */10 run.
RENEWED_EVENT = "kubeconfig_renewed"
RENEWED_METRIC = "MultiKueueKubeconfigRenewed"
TOKEN_ALARM_PERIOD_SECONDS = 900
# The manager's ceilings per GPU for what a GPU pod brings along: a p5.48xlarge's 192 vCPUs, 2 TiB
# and 32 EFA devices over 8 GPUs (components/facts/instances.py). The workers' own quotas decide.
CPU_PER_GPU, MEMORY_GIB_PER_GPU, EFA_PER_GPU = 24, 256, 4


def manager_manifests(config: MultiKueueConfig, *, cohort: str, training_namespace: str) -> list[dict]:
    """The manager's Kueue objects, in creation order."""
    workers = [{"apiVersion": KUEUE_API, "kind": "MultiKueueCluster", "metadata": {"name": w.stack},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                          "location": kubeconfig_secret_name(w.stack)}}}}
               for w in config.workers]
    quota = dispatch_quota(config.total_gpus)
    return [
        *workers,
        {"apiVersion": KUEUE_API, "kind": "MultiKueueConfig", "metadata": {"name": ADMISSION_CHECK},
         "spec": {"clusters": [w.stack for w in config.workers]}},
        {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK},
         "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": ADMISSION_CHECK}}},
        # A flavor of no nodes: the manager runs none of these pods, the worker picks its own flavor.
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}, "spec": {}},
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": ANY_REGION},
         "spec": {"cohortName": cohort,
                  # The environment's training namespace only: each team dispatches through a queue of its
                  # own with its own quota (team_any_region_cluster_queue), never this one's.
                  "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": training_namespace}},
                  "queueingStrategy": "BestEffortFIFO",
                  "resourceGroups": [{"coveredResources": COVERED_RESOURCES, "flavors": [
                      {"name": FLAVOR, "resources": [{"name": r, "nominalQuota": quota[r]} for r in COVERED_RESOURCES]}]}],
                  "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]}}},
    ]


def dispatch_quota(gpus: int) -> dict[str, int | str]:
    """What the manager may hold in flight for `gpus` GPUs: the GPUs and the per-GPU ceilings of what comes with them."""
    return {"cpu": gpus * CPU_PER_GPU, "memory": f"{gpus * MEMORY_GIB_PER_GPU}Gi", GPU_RESOURCE: gpus,
            EFA_RESOURCE: gpus * EFA_PER_GPU}


def team_any_region_queue_name(namespace: str) -> str:
    """`team-vision.any-region`: a dot, which no namespace (a DNS label) holds, so it can never be
    another team's ClusterQueue (named as its namespace); the policy pack allows a team this name."""
    return f"{namespace}.{ANY_REGION}"


def team_any_region_cluster_queue(namespace: str, *, cohort: str, gpus: int) -> dict[str, Any]:
    """A team's ClusterQueue on the manager behind its LocalQueue ANY_REGION: the MultiKueue check
    and a quota of its own, `gpus` (the team's total over every region; each worker's own team
    queue caps that region), neither lent nor borrowed (lendingLimit and borrowingLimit 0, kueue
    v0.19.2 ClusterQueue): the team's dispatches never take the environment's ANY_REGION quota
    (the platform's own jobs) nor hold any of it, and a team can use no more than its total."""
    quota = dispatch_quota(gpus)
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": team_any_region_queue_name(namespace)},
            "spec": {"cohortName": cohort,
                     "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                     "queueingStrategy": "BestEffortFIFO",
                     "resourceGroups": [{"coveredResources": COVERED_RESOURCES, "flavors": [
                         {"name": FLAVOR, "resources": [
                             {"name": r, "nominalQuota": quota[r], "borrowingLimit": _none(quota[r]),
                              "lendingLimit": _none(quota[r])} for r in COVERED_RESOURCES]}]}],
                     "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]}}}


def _none(quantity: int | str) -> int | str:
    """Zero in the quantity's own form (`0Gi` for memory)."""
    return "0Gi" if isinstance(quantity, str) else 0


def any_region_local_queue(namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": ANY_REGION, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def worker_cluster_role() -> dict[str, Any]:
    """kueue v0.19.2 site/static/examples/multikueue/create-multikueue-kubeconfig.sh, its rules for
    batch Jobs, JobSets and Kueue's Workloads (no pods, StatefulSets, Kubeflow, Ray: not run
    here), less the cluster-wide reads of worker_read_cluster_role: bound per training namespace."""
    write = ["create", "delete", "get"]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": WORKER_GROUP},
            "rules": [
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": write},
                {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": write},
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*write, "update", "patch"]},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
            ]}


def worker_read_cluster_role() -> dict[str, Any]:
    """What the manager reads on the worker across namespaces: the script's queue reads
    (ClusterQueues, cluster-scoped, and LocalQueues, which its ClusterRoleBinding grants
    cluster-wide too: MultiKueue lists both on a worker, without a namespace, for quota automation,
    kueue v0.19.2 multikueue/clusterqueue.go aggregateWorkerQuotas), and the kinds MultiKueue
    watches cluster-wide (Workloads, and the Jobs and JobSets of the integrations the manager's
    Kueue enables: controllers.py)."""
    read = ["get", "list", "watch"]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": WORKER_READ},
            "rules": [
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues", "workloads"], "verbs": read},
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": read},
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": read},
            ]}


def dispatcher_role_binding(namespace: str) -> dict[str, Any]:
    """The group's RoleBinding in `namespace`: it may manage Jobs, JobSets and Workloads there
    (the ClusterRole WORKER_GROUP bound in this namespace only). The environment's training
    namespace gets it here, each team namespace on a worker from its team stack (worker_tenant.py)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": WORKER_GROUP, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WORKER_GROUP},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": WORKER_GROUP}]}


def worker_bindings(namespace: str) -> list[dict[str, Any]]:
    """The group's RoleBinding in `namespace` and its ClusterRoleBinding to the cluster-wide reads."""
    return [
        dispatcher_role_binding(namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": WORKER_READ},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WORKER_READ},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": WORKER_GROUP}]},
    ]


def dispatcher_policy(*, partition: str, account_id: str, clusters: Sequence[tuple[str, str]]) -> str:
    """DescribeCluster (endpoint and CA) of the workers only; the token needs no permission
    (sts:GetCallerIdentity is never denied: IAM User Guide, GetCallerIdentity)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "DescribeWorkerClusters", "Effect": "Allow", "Action": "eks:DescribeCluster",
        "Resource": [f"arn:{partition}:eks:{region}:{account_id}:cluster/{name}" for name, region in clusters]}]})


def kubeconfig_secret_name(worker: str) -> str:
    """The Secret of `worker`'s kubeconfig in kueue-system (its MultiKueueCluster names it)."""
    return f"{worker}-kubeconfig"


def kubeconfig_secrets(workers: Sequence[str]) -> list[dict[str, Any]]:
    """The workers' kubeconfig Secrets, created up front and empty, so the rotation needs no
    `create` (RBAC cannot name an object that does not exist yet) and no credential is ever in
    the plan or the state (the policy pack's no-plaintext-secrets refuses data on a Secret); the
    CronJob writes their data from then on (Kueue reports the worker not connected until then)."""
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": kubeconfig_secret_name(worker), "namespace": KUEUE_NAMESPACE,
                          "labels": {"app.kubernetes.io/managed-by": ROTATION}}} for worker in workers]


def api_script_pod(*, account: str, container: str, image: str, script_dir: str, script: str,
                   env: dict[str, str], system_pool: str) -> dict[str, Any]:
    """The pod of a CronJob that runs one Python script (`script`, from the ConfigMap named as its
    service account `account`) against the Kubernetes API with a short-lived projected token:
    non-root, read-only, on the system pool."""
    return {
        "serviceAccountName": account, "automountServiceAccountToken": False, "restartPolicy": "Never",
        "nodeSelector": {POOL_LABEL: system_pool},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": container, "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["python3", f"{script_dir}/{script}"], "env": [{"name": k, "value": v} for k, v in env.items()],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "script", "mountPath": script_dir, "readOnly": True},
                             {"name": "api", "mountPath": "/var/run/secrets/api", "readOnly": True}]}],
        "volumes": [{"name": "script", "configMap": {"name": account, "items": [{"key": script, "path": script}]}},
                    {"name": "api", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 600}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
    }


def rotation_manifests(*, system_pool: str, workers: list[dict[str, str]]) -> list[dict[str, Any]]:
    """ServiceAccount, Role (only the workers' Secrets, by name), RoleBinding, ConfigMap, CronJob.
    `workers`: {name, cluster, region, dnsSuffix} each (the token script's WORKERS)."""
    meta = {"name": ROTATION, "namespace": KUEUE_NAMESPACE}
    secrets = [kubeconfig_secret_name(w["name"]) for w in workers]
    pod = api_script_pod(account=ROTATION, container="rotate", image=ROTATION_IMAGE, script_dir=SCRIPT_DIR,
                         script="rotate.py", env={"WORKERS": json.dumps(workers)}, system_pool=system_pool)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         # Only the workers' Secrets, which Pulumi creates (kubeconfig_secrets): no `create`, no list.
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": secrets,
                    "verbs": ["get", "update", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROTATION},
         "subjects": [{"kind": "ServiceAccount", "name": ROTATION, "namespace": KUEUE_NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"rotate.py": SCRIPT.read_text()}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta, "spec": {
            "schedule": ROTATION_SCHEDULE, "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": ROTATION_DEADLINE_SECONDS, "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": job_spec(labels={"app.kubernetes.io/name": ROTATION}, pod_spec=pod, backoff_limit=1,
                                             deadline_seconds=ROTATION_DEADLINE_SECONDS)}}},
    ]


@dataclass(frozen=True)
class MultiKueueManagerArgs:
    config: MultiKueueConfig
    """The stack's multiKueue config: its workers, their regions and GPU quotas."""
    project: str
    """The Pulumi project: the workers' cluster names start with it."""
    cohort: str
    """The Kueue cohort of the any-region ClusterQueue (the environment's queues share it)."""
    training_namespace: str
    """The one namespace whose jobs may use the queue (the environment's own; teams have theirs)."""
    system_pool: str
    """The node pool the rotation CronJob runs on."""
    cluster_name: pulumi.Input[str]
    """The manager's EKS cluster: the dispatcher role's Pod Identity association is made there."""
    dispatcher_role_name: str
    """The IAM role that mints the workers' EKS tokens (each worker's access entry names it)."""
    trust_policy: pulumi.Input[str]
    """The dispatcher role's trust policy: Pod Identity for the rotation CronJob's service account."""
    partition: str
    """The region's ARN partition (aws, aws-us-gov, ...)."""
    dns_suffix: pulumi.Input[str]
    """The partition's DNS suffix (aws.get_partition's dnsSuffix): the EKS and STS hosts of the workers."""
    account_id: pulumi.Output[str]
    """The account the workers' clusters are in (the dispatcher policy names their ARNs)."""
    aws_opts: pulumi.ResourceOptions
    """Options of the AWS resources (their provider): the component's own opts are the cluster's."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist before the Kubernetes objects: Kueue (its CRDs) and the training namespace."""


class MultiKueueManager(pulumi.ComponentResource):
    def __init__(self, name: str, args: MultiKueueManagerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:MultiKueueManager", name, None, opts)
        aws_child = pulumi.ResourceOptions.merge(args.aws_opts, pulumi.ResourceOptions(parent=self))
        role = aws.iam.Role(f"{name}-dispatcher", name=args.dispatcher_role_name, assume_role_policy=args.trust_policy,
                            description="MultiKueue: mints short-lived EKS tokens for the worker clusters",
                            tags={"workload": ROTATION}, opts=aws_child)
        clusters = [(stack_name_prefix(args.project, w.stack), w.region) for w in args.config.workers]
        aws.iam.RolePolicy(f"{name}-dispatcher-access", role=role.id, opts=aws_child, policy=args.account_id.apply(
            lambda account: dispatcher_policy(partition=args.partition, account_id=account, clusters=clusters)))
        aws.eks.PodIdentityAssociation(f"{name}-dispatcher-pod-identity", cluster_name=args.cluster_name,
                                       namespace=KUEUE_NAMESPACE, service_account=ROTATION, role_arn=role.arn,
                                       opts=aws_child)
        in_cluster = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        def manifests(dns_suffix: str) -> list[dict[str, Any]]:
            workers = [{"name": w.stack, "cluster": cluster, "region": w.region, "dnsSuffix": dns_suffix}
                       for w, (cluster, _) in zip(args.config.workers, clusters, strict=True)]
            return rotation_manifests(system_pool=args.system_pool, workers=workers)

        # The CronJob's WORKERS carry the partition's DNS suffix (amazonaws.com.cn in China): only the
        # CronJob waits for it; the ServiceAccount, Role, RoleBinding and ConfigMap do not read it.
        cronjob_spec = pulumi.Output.from_input(args.dns_suffix).apply(lambda suffix: manifests(suffix)[-1]["spec"])
        for secret in kubeconfig_secrets([w.stack for w in args.config.workers]):
            # The CronJob writes the token: a `pulumi up` must never take it away.
            built_in_object(f"{name}-{secret['metadata']['name']}", secret, pulumi.ResourceOptions.merge(
                in_cluster, pulumi.ResourceOptions(ignore_changes=["data", "stringData"])))
        *before_the_cronjob, _ = manifests("")
        for suffix, manifest in zip(("account", "role", "role-binding", "script"), before_the_cronjob, strict=True):
            built_in_object(f"{name}-{suffix}", manifest, in_cluster)
        k8s.batch.v1.CronJob(f"{name}-cronjob", metadata={"name": ROTATION, "namespace": KUEUE_NAMESPACE},
                             spec=cronjob_spec, opts=in_cluster)
        for manifest in manager_manifests(args.config, cohort=args.cohort, training_namespace=args.training_namespace):
            custom_resource(f"{name}-{manifest['kind'].lower()}-{manifest['metadata']['name']}", manifest, in_cluster)
        self.register_outputs({})


def renewed_filter_pattern() -> str:
    """The metric filter's pattern: the token script's renewal line, as Fluent Bit parses it
    (observability/training_metrics.py: the JSON line under `log_processed`)."""
    return f'{{ $.log_processed.event = "{RENEWED_EVENT}" }}'


@dataclass(frozen=True, kw_only=True)
class MultiKueueWorkerArgs(NamespacedArgs):
    """namespace: the environment's training namespace, where the group's writes are bound; depends_on: Kueue and it."""

    cluster_name: pulumi.Input[str]
    """The worker's EKS cluster: the manager's access entry is made there."""
    dispatcher_role_arn: pulumi.Input[str]
    """The manager's dispatcher role, let in by the access entry."""
    aws_opts: pulumi.ResourceOptions
    """Options of the AWS resources (their provider): the component's own opts are the cluster's."""


class MultiKueueWorker(pulumi.ComponentResource):
    """The manager's way in: an access entry in a group whose writes are bound in the training
    namespace only, and whose cluster-wide grant is read-only."""

    def __init__(self, name: str, args: MultiKueueWorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-training:workload:MultiKueueWorker", name, None, opts)
        aws.eks.AccessEntry(f"{name}-manager-access", cluster_name=args.cluster_name,
                            principal_arn=args.dispatcher_role_arn, kubernetes_groups=[WORKER_GROUP], type="STANDARD",
                            opts=pulumi.ResourceOptions.merge(args.aws_opts, pulumi.ResourceOptions(parent=self)))
        in_cluster = pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on))
        # (The ClusterRoleBinding `multikueue-cluster-role-binding` of the writes is gone on purpose:
        # its deletion is the change, no alias.)
        for suffix, manifest in zip(("cluster-role", "read-cluster-role", "role-binding", "read-cluster-role-binding"),
                                    [worker_cluster_role(), worker_read_cluster_role(), *worker_bindings(args.namespace)],
                                    strict=True):
            built_in_object(f"{name}-{suffix}", manifest, in_cluster)
        self.register_outputs({})


QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def dispatched_jobset(jobset: dict[str, Any]) -> dict[str, Any]:
    """A JobSet of the manager's namespace made to run in any region: on the any-region queue and
    managed by MultiKueue (the manager's JobSet controller then leaves it alone; kueue v0.19.2
    docs/tasks/run/multikueue/jobsets.md). Its pods, volumes and the launcher's environment are as
    they are: each worker has the same namespace, claims, secrets and service account."""
    metadata = {**jobset["metadata"], "labels": {**jobset["metadata"].get("labels", {}), QUEUE_LABEL: ANY_REGION}}
    return {**jobset, "metadata": metadata, "spec": {**jobset["spec"], "managedBy": MANAGED_BY}}
