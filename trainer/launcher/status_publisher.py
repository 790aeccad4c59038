"""Keeps the run's figures (launcher.run_status) where tools read them without the job command:
the annotation `gpu-training/progress` on the pod of global rank 0, and a `run_status` log line
(the CloudWatch metrics of the alarms that cover jobs no stack file names).

Never in training's way: a daemon thread publishes at most every PUBLISH_INTERVAL_S, each API
call is bounded by API_TIMEOUT_S, any failure is logged (the first of a kind, then once when it
recovers) and backs off, and nothing here is awaited by the workers or the router. The pod may
patch only its own annotation: the workload's Role grants `patch` on pods, and the platform's
ValidatingAdmissionPolicy admits a trainer's change only to its own pod and only to this
annotation (components/workload/progress_access.py; docs: trainer/README.md, "Progress on the pod").

Enabled where the workload mounted the pod's API token and named the pod (TRAIN_POD_NAME,
TRAIN_POD_NAMESPACE); elsewhere (a laptop, tests, an older manifest) only the log line is written.
The API client is the official `kubernetes` package, imported in the thread (its import costs a
second that startup should not wait for); an image without it publishes no annotation and says so.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .log_line import log
from .run_status import RunStatus

ANNOTATION = "gpu-training/progress"
POD_NAME_VAR, POD_NAMESPACE_VAR = "TRAIN_POD_NAME", "TRAIN_POD_NAMESPACE"
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # load_incluster_config's path
# Often enough for a status view and the 5-minute alarm periods, rare enough that a large
# namespace's pod watchers (the Job and JobSet controllers, Kueue) see one update a minute per run.
PUBLISH_INTERVAL_S = 60.0
API_TIMEOUT_S = 5.0
MAX_BACKOFF_S = 600.0
FINAL_PUBLISH_WAIT_S = 2.0

Patch = Callable[[dict[str, str]], None]


def kubernetes_patch(pod: str, namespace: str, configuration: Any = None) -> Patch:
    """A function that merge-patches `annotations` onto the pod, through the in-cluster config
    (its token is re-read every minute: kubernetes.config.incluster_config) unless a client
    `configuration` is given (tests)."""
    from kubernetes import client, config  # in the publisher thread: see the module's docstring

    if configuration is None:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
    api = client.CoreV1Api(client.ApiClient(configuration))

    def patch(annotations: dict[str, str]) -> None:
        api.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": annotations}},
                                 _request_timeout=API_TIMEOUT_S, _content_type="application/merge-patch+json")

    return patch


def patch_from_env(env: dict[str, str] | os._Environ[str]) -> Callable[[], Patch] | None:
    """How to make the pod's patch function, or None where the workload gave no pod identity."""
    pod, namespace = env.get(POD_NAME_VAR, "").strip(), env.get(POD_NAMESPACE_VAR, "").strip()
    if not pod or not namespace or not os.path.isfile(TOKEN_FILE):
        return None
    return lambda: kubernetes_patch(pod, namespace)


class StatusPublisher:
    """Publishes `status` every `interval_s` once global rank 0's lines pass through this launcher."""

    def __init__(self, status: RunStatus, make_patch: Callable[[], Patch] | None, *,
                 interval_s: float = PUBLISH_INTERVAL_S, clock: Callable[[], float] = time.monotonic,
                 write_log: Callable[..., None] = log):
        self.status = status
        self._make_patch = make_patch
        self._patch: Patch | None = None
        self.interval_s = interval_s
        self._clock = clock
        self._log = write_log
        self._next_api_try = 0.0
        self._backoff_s = interval_s
        self._failing: str | None = None
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="status-publisher", daemon=True)
        self._thread.start()

    def stop(self, wait_s: float = FINAL_PUBLISH_WAIT_S) -> None:
        """Publish the last figures and end the thread, waiting for that at most `wait_s` (the pod
        is on its way out; the thread is a daemon and dies with the launcher)."""
        self._stopped.set()
        if self._thread is not None and wait_s > 0:
            self._thread.join(timeout=wait_s)

    def _loop(self) -> None:
        while not self._stopped.wait(self.interval_s):
            self.publish_once()
        self.publish_once()

    def publish_once(self) -> bool:
        """One round: the log line, then the annotation unless backing off. True if the annotation
        was written. Never raises."""
        try:
            if not self.status.seen_rank0:
                return False
            figures = self.status.snapshot()
            self._log("run_status", **{k: v for k, v in figures.items() if k not in ("v", "updated")})
            return self._annotate(figures)
        except Exception as error:  # a status must never end the launcher
            self._failed(error)
            return False

    def _annotate(self, figures: dict[str, Any]) -> bool:
        if self._make_patch is None or self._clock() < self._next_api_try:
            return False
        if self._patch is None:
            self._patch = self._make_patch()
        self._patch({ANNOTATION: json.dumps(figures, separators=(",", ":"))})
        if self._failing is not None:
            self._log("run_status_published", after=self._failing)
        self._failing, self._backoff_s = None, self.interval_s
        return True

    def _failed(self, error: Exception) -> None:
        kind = type(error).__name__
        if isinstance(error, ImportError):  # no client in this image: it will not appear later
            self._make_patch = None
        if self._failing != kind:
            self._log("run_status_not_published", error=f"{kind}: {error}"[:300],
                      retry_in_s=None if self._make_patch is None else round(self._backoff_s))
        self._failing = kind
        self._next_api_try = self._clock() + self._backoff_s
        self._backoff_s = min(self._backoff_s * 2, MAX_BACKOFF_S)
