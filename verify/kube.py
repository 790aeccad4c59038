"""The Kubernetes API through the official client, as plain JSON objects (what `kubectl get -o
json` shows), with short timeouts and one clear error when the cluster cannot be reached."""

from __future__ import annotations

import json
import logging
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

# (connect, read) seconds: a go-live check should not hang on an unreachable endpoint.
TIMEOUT = (5, 60)
LOG_TAIL_LINES = 50_000


class ClusterUnreachableError(Exception):
    """Nothing to check against: exit 2 with this message."""


class Kube:
    def __init__(self, api: client.ApiClient):
        self.api = api
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)

    # --- reads ------------------------------------------------------------------------------
    def nodes(self) -> list[dict[str, Any]]:
        return self._json(self.core.list_node)["items"]

    def pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        return self._json(self.core.list_namespaced_pod, namespace, label_selector=label_selector)["items"]

    def pods_on_node(self, node: str) -> list[dict[str, Any]]:
        """Every namespace's pods on one node (the pod IP budget counts them all)."""
        return self._json(self.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}")["items"]

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._optional(self.apps.read_namespaced_deployment, name, namespace)

    def daemonset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._optional(self.apps.read_namespaced_daemon_set, name, namespace)

    def secret_exists(self, namespace: str, name: str) -> bool:
        return self._optional(self.core.read_namespaced_secret, name, namespace) is not None

    def custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
        return self._optional(self.custom.get_namespaced_custom_object, group, version, namespace, plural, name)

    def custom_objects(self, group: str, version: str, namespace: str, plural: str,
                       label_selector: str = "") -> list[dict[str, Any]]:
        return self._json(self.custom.list_namespaced_custom_object, group, version, namespace, plural,
                          label_selector=label_selector)["items"]

    def cluster_custom_objects(self, group: str, version: str, plural: str) -> list[dict[str, Any]]:
        return self._json(self.custom.list_cluster_custom_object, group, version, plural)["items"]

    def cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
        return self._optional(self.custom.get_cluster_custom_object, group, version, plural, name)

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        response: Any = self.core.read_namespaced_pod_log(name, namespace, container=container,
                                                          tail_lines=LOG_TAIL_LINES, _preload_content=False,
                                                          _request_timeout=TIMEOUT)
        return response.data.decode("utf-8", errors="replace")

    # --- writes (the NCCL gate only) --------------------------------------------------------
    def create_custom_object(self, group: str, version: str, namespace: str, plural: str,
                             body: dict[str, Any]) -> dict[str, Any]:
        return self._json(self.custom.create_namespaced_custom_object, group, version, namespace, plural, body)

    def delete_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> None:
        self._ignore_missing(self.custom.delete_namespaced_custom_object, group, version, namespace, plural, name,
                             propagation_policy="Foreground")

    def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._json(self.core.create_namespaced_secret, namespace, body)

    def patch_secret(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._json(self.core.patch_namespaced_secret, name, namespace, patch)

    def delete_secret(self, namespace: str, name: str) -> None:
        self._ignore_missing(self.core.delete_namespaced_secret, name, namespace)

    # --- plumbing ---------------------------------------------------------------------------
    @staticmethod
    def _json(method, *args, **kwargs) -> dict[str, Any]:
        response = method(*args, _preload_content=False, _request_timeout=TIMEOUT, **kwargs)
        return json.loads(response.data or b"{}")

    def _optional(self, method, *args) -> dict[str, Any] | None:
        try:
            return self._json(method, *args)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _ignore_missing(self, method, *args, **kwargs) -> None:
        try:
            self._json(method, *args, **kwargs)
        except ApiException as e:
            if e.status != 404:
                raise


def connect(kubeconfig: dict[str, Any], context: str | None, where: str) -> Kube:
    """A client for the cluster, proven by one request; `where` names the kubeconfig's origin."""
    configuration = client.Configuration()
    # One attempt: an unreachable endpoint should say so in seconds, not after urllib3's retries.
    configuration.retries = False  # pyright: ignore[reportAttributeAccessIssue] (urllib3 takes False: no retry)
    captured = _CapturedLogs()
    try:
        with captured:
            config.load_kube_config_from_dict(kubeconfig, context=context, client_configuration=configuration,
                                              persist_config=False)
    except (ConfigException, ValueError, TypeError, KeyError) as e:
        raise ClusterUnreachableError(f"the kubeconfig from {where} is not usable: {_one_line(e)}") from e
    api = client.ApiClient(configuration)
    server = configuration.host
    if captured.messages:  # e.g. the `aws eks get-token` exec plugin failed: no token
        raise ClusterUnreachableError(f"no credentials for the cluster at {server} (kubeconfig from {where}): "
                                 f"{captured.messages[-1]}")
    try:
        client.VersionApi(api).get_code(_request_timeout=TIMEOUT, _preload_content=False)
    except ApiException as e:
        if e.status in (401, 403):
            raise ClusterUnreachableError(
                f"the cluster at {server} refused the credentials of {where} (HTTP {e.status}): check "
                "`aws sts get-caller-identity` and the EKS access entry of that identity") from e
        raise ClusterUnreachableError(f"the cluster at {server} answered HTTP {e.status}: {e.reason}") from e
    except Exception as e:  # network errors (urllib3), exec-plugin failures (`aws` missing), TLS
        raise ClusterUnreachableError(
            f"cannot reach the cluster API at {server} (kubeconfig from {where}): {_one_line(e)}. "
            "Is the cluster up, is its endpoint reachable from here (private endpoint: VPN/bastion), "
            "and does `aws eks get-token` work?") from e
    return Kube(api)


class _CapturedLogs(logging.Handler):
    """The client logs exec-plugin failures (and goes on without a token); keep them for the
    message instead of letting them reach the terminal as stray log lines."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(_one_line(Exception(record.getMessage())))

    def __enter__(self):
        root = logging.getLogger()
        self._saved = root.handlers[:], root.level
        root.handlers, root.level = [self], logging.WARNING
        return self

    def __exit__(self, *exc):
        logging.getLogger().handlers, logging.getLogger().level = self._saved


def load_kubeconfig_file(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ClusterUnreachableError(f"--kubeconfig {path}: cannot read it ({e.strerror})") from e
    except yaml.YAMLError as e:
        raise ClusterUnreachableError(f"--kubeconfig {path}: not YAML ({_one_line(e)})") from e
    if not isinstance(data, dict):
        raise ClusterUnreachableError(f"--kubeconfig {path}: not a kubeconfig")
    return data


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text[:300] if text else type(error).__name__
