"""The team's namespace through the official Kubernetes client, with the caller's own credentials
(their kubeconfig: on EKS, `aws eks update-kubeconfig`, whose `aws eks get-token` is the caller's
identity and its namespace-scoped access entry). What each call needs of RBAC is listed in
docs/run-your-first-job.md, "What the command needs in the cluster".
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from components.config.job_context import JOB_CONTEXT_CONFIG_MAP
from components.workload.training_job import JobObjects

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
WORKLOAD = ("kueue.x-k8s.io", "v1beta2", "workloads")
# Kueue labels a job's Workload with the job's uid (v0.19.2 pkg/controller/constants JobUIDLabel).
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
# JobSet labels every pod with its JobSet (jobset v0.12.0 api/jobset/v1alpha2 JobSetNameKey) and
# the Job controller with the pod's index (batch.kubernetes.io/job-completion-index).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
NODE_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
PART_OF = "app.kubernetes.io/part-of=gpu-training"
# (connect, read) seconds, as scripts/verify (verify/kube.py).
TIMEOUT = (5, 60)
LOG_TAIL_LINES = 5000
DELETE_WAIT_S = 300


class JobCluster:
    """The calls the command makes, each one API request of the official client, answered as plain
    JSON objects (what `kubectl get -o json` shows), as scripts/verify reads them (verify/kube.py)."""

    def __init__(self, api: client.ApiClient):
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.policy = client.PolicyV1Api(api)

    # --- reads ----------------------------------------------------------------------------------
    def job_context(self, namespace: str) -> dict[str, Any] | None:
        """The data of the job context ConfigMap the team stack wrote (None: there is none)."""
        try:
            return _json(self.core.read_namespaced_config_map, JOB_CONTEXT_CONFIG_MAP, namespace).get("data") or {}
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def jobset(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _json(self.custom.get_namespaced_custom_object, *JOBSET[:2], namespace, JOBSET[2], name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def jobsets(self, namespace: str) -> list[dict[str, Any]]:
        return _json(self.custom.list_namespaced_custom_object, *JOBSET[:2], namespace, JOBSET[2],
                     label_selector=PART_OF)["items"]

    def workload_of(self, namespace: str, jobset: dict[str, Any]) -> dict[str, Any] | None:
        uid = jobset["metadata"].get("uid", "")
        items = _json(self.custom.list_namespaced_custom_object, *WORKLOAD[:2], namespace, WORKLOAD[2],
                      label_selector=f"{JOB_UID_LABEL}={uid}")["items"]
        return max(items, key=lambda w: w["metadata"].get("creationTimestamp", ""), default=None)

    def pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return _json(self.core.list_namespaced_pod, namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")["items"]

    def log(self, namespace: str, pod: str, tail_lines: int = LOG_TAIL_LINES) -> str:
        try:
            response: Any = self.core.read_namespaced_pod_log(pod, namespace, container="trainer", tail_lines=tail_lines,
                                                              _preload_content=False, _request_timeout=TIMEOUT)
        except ApiException as error:
            if error.status in (400, 404):  # not started yet, or gone
                return ""
            raise
        return response.data.decode("utf-8", errors="replace")

    def follow(self, namespace: str, pod: str) -> Iterator[str]:
        """The trainer's log lines as they come (the client's watch over `follow=true`)."""
        for line in watch.Watch().stream(self.core.read_namespaced_pod_log, name=pod, namespace=namespace,
                                         container="trainer", follow=True):
            yield str(line)  # a log stream yields its lines as text (kubernetes.watch: pod logs are not events)

    # --- writes ---------------------------------------------------------------------------------
    def submit(self, objects: JobObjects) -> dict[str, Any]:
        """Create the JobSet, then its ConfigMap and budget owned by it (deleted with it). Kueue
        suspends a queued JobSet until it admits the gang, so no pod starts before the ConfigMap exists.
        Create only, never update: an earlier run's objects went with its JobSet (Foreground deletion
        waits for them), and a team member who may not update ConfigMaps cannot rewrite the job
        context the command judges jobs against."""
        namespace = objects.jobset["metadata"]["namespace"]
        created = _json(self.custom.create_namespaced_custom_object, *JOBSET[:2], namespace, JOBSET[2], objects.jobset)
        owner = {"apiVersion": "/".join(JOBSET[:2]), "kind": "JobSet", "name": created["metadata"]["name"],
                 "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        try:
            _json(self.core.create_namespaced_config_map, namespace, _owned(objects.hyperparameters, owner))
            if objects.disruption_budget is not None:
                _json(self.policy.create_namespaced_pod_disruption_budget, namespace,
                      _owned(objects.disruption_budget, owner))
        except ApiException:
            # A JobSet whose ConfigMap is missing would never start its pods: take it back.
            self.delete(namespace, created["metadata"]["name"], wait_s=0)
            raise
        return created

    def stop(self, namespace: str, workload: dict[str, Any]) -> None:
        """Deactivate the Workload: Kueue evicts the gang and suspends the JobSet, whose pods get
        SIGTERM and their grace (kueue v0.19.2 docs, concepts/workload.md "Active"; the same as
        `kubectl kueue stop workload`)."""
        _json(self.custom.patch_namespaced_custom_object, *WORKLOAD[:2], namespace, WORKLOAD[2],
              workload["metadata"]["name"], {"spec": {"active": False}})

    def delete(self, namespace: str, name: str, *, wait_s: float = DELETE_WAIT_S) -> None:
        """Delete a JobSet and what it owns, and wait until it is gone (its name is free again)."""
        try:
            _json(self.custom.delete_namespaced_custom_object, *JOBSET[:2], namespace, JOBSET[2], name,
                  propagation_policy="Foreground")
        except ApiException as error:
            if error.status != 404:
                raise
        deadline = time.monotonic() + wait_s
        while wait_s and self.jobset(namespace, name) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"JobSet {name} is still being deleted after {wait_s:.0f} s")
            time.sleep(2)


def api_message(error: ApiException) -> str:
    """The API's own one-line message of a refused request (its Status body), else the reason."""
    try:
        return str(json.loads(error.body or "{}").get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)


def _json(method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    response = method(*args, _preload_content=False, _request_timeout=TIMEOUT, **kwargs)
    return json.loads(response.data or b"{}")


def _owned(manifest: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    metadata = {**manifest["metadata"], "ownerReferences": [owner]}
    return {**manifest, "metadata": metadata}
