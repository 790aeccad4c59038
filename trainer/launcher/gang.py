"""The gang's side of the launcher: a bound on restarts, and a rendezvous that cannot race DNS.

Restarts. JobSet restarts the whole gang on a failure (spending `maxRestarts`) and on a
disruption: spot reclaim, drain, preemption, or a kubelet eviction, which spends nothing. A job
that evicts itself every time (say, it overflows its /tmp sizeLimit) would then restart forever.
JobSet stamps every pod with the gang's restart count, failures and disruptions together
(annotation jobset.sigs.k8s.io/restart-attempt, kubernetes-sigs/jobset v0.12.0
pkg/controllers/jobset_controller.go); the workload passes it in as TRAIN_RESTART_ATTEMPT with
the budget TRAIN_MAX_GANG_RESTARTS (maxRestarts + maxDisruptionRestarts). Past the budget the
launcher exits 2, which the JobSet turns into a failed job.

Rendezvous. torchrun's c10d backend makes the node whose host name matches the endpoint host
the store's server; it finds out by resolving the endpoint in DNS. Pod 0's headless-service
record can be missing for a moment after the pod starts: pod 0 would then not host the store,
and every node would wait for a server that never comes. So the launcher says who hosts
(`--rdzv-conf is_host=1` on pod 0, `0` elsewhere), from the pod's own host name. The other pods
wait, bounded, until pod 0's store accepts connections before they start torchrun: torchrun's
client gives up after its read_timeout (60 s by default; torch/distributed/elastic/rendezvous/
c10d_rendezvous_backend.py), less than pod 0 may need to pull its image. The other way round,
torchrun gives up on pods that have not joined after its join_timeout (600 s by default;
dynamic_rendezvous.py), which must outlast that wait: the launcher passes
`join_timeout=TRAIN_RDZV_WAIT_S + JOIN_MARGIN_S` to every pod. `--rdzv-conf` replaces
PET_RDZV_CONF, so its other keys are passed along.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping

RESTART_ATTEMPT_VAR = "TRAIN_RESTART_ATTEMPT"
MAX_RESTARTS_VAR = "TRAIN_MAX_GANG_RESTARTS"
RDZV_WAIT_VAR = "TRAIN_RDZV_WAIT_S"
DEFAULT_RDZV_WAIT_S = 900
# Between a pod's store check succeeding and its torchrun joining: interpreter and torch imports,
# slow on a node that just pulled the image.
JOIN_MARGIN_S = 120
RETRY_SECONDS = 2.0


class GangError(ValueError):
    """A gang setting is unusable, or the gang may not start again."""


class RestartBudgetSpentError(GangError):
    """The gang restarted more often than its budget allows."""


class StopRequestedError(Exception):
    """The launcher was asked to stop while it waited for the rendezvous."""


def _int(environ: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise GangError(f"{name} must be a whole number, got {raw!r}") from None
    if value < 0:
        raise GangError(f"{name} must be >= 0, got {value}")
    return value


def check_restart_budget(environ: Mapping[str, str]) -> int | None:
    """The gang's restart attempt, or None when unknown; GangError once it exceeds the budget."""
    attempt = _int(environ, RESTART_ATTEMPT_VAR, None)
    budget = _int(environ, MAX_RESTARTS_VAR, None)
    if attempt is not None and budget is not None and attempt > budget:
        raise RestartBudgetSpentError(
            f"the gang has restarted {attempt} times, more than {MAX_RESTARTS_VAR}={budget} "
            "(maxRestarts + maxDisruptionRestarts): it keeps failing or being evicted; read the "
            "previous pods' events (kubectl describe) before raising the budget")
    return attempt


def rendezvous_wait_seconds(environ: Mapping[str, str]) -> int:
    value = _int(environ, RDZV_WAIT_VAR, DEFAULT_RDZV_WAIT_S)
    return DEFAULT_RDZV_WAIT_S if value is None else value


def hosts_rendezvous(rdzv_host: str, hostname: str) -> bool | None:
    """Whether this pod hosts the c10d store: its host name is the endpoint's first DNS label.
    None for an IP address or localhost, where torch decides correctly without DNS."""
    if rdzv_host == "localhost":
        return None
    with contextlib.suppress(ValueError):  # a host name
        ipaddress.ip_address(rdzv_host)
        return None
    return rdzv_host.split(".", 1)[0].lower() == hostname.split(".", 1)[0].lower()


def join_timeout_seconds(rdzv_wait_s: int) -> int:
    """torchrun's rendezvous join timeout for a gang whose pods may reach pod 0's store up to
    `rdzv_wait_s` after they start, plus their torchrun's own start."""
    return rdzv_wait_s + JOIN_MARGIN_S


def _parse_conf(text: str) -> dict[str, str]:
    conf = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key.strip():
            conf[key.strip()] = value.strip()
    return conf


def with_rendezvous_conf(cmd: list[str], is_host: bool | None, join_timeout_s: int,
                         inherited: str = "") -> list[str]:
    """The torchrun command with `--rdzv-conf` after `--rdzv-id <id>`: join_timeout, is_host (if
    decided), and the other keys of `inherited` (PET_RDZV_CONF, which the flag replaces)."""
    if "--rdzv-id" not in cmd:
        return list(cmd)
    conf = _parse_conf(inherited)
    conf["join_timeout"] = str(join_timeout_s)
    if is_host is not None:
        conf["is_host"] = str(int(is_host))
    at = cmd.index("--rdzv-id") + 2
    return [*cmd[:at], "--rdzv-conf", ",".join(f"{k}={v}" for k, v in conf.items()), *cmd[at:]]


def wait_for_rendezvous(host: str, port: int, timeout_s: float, *,
                        connect: Callable[[tuple[str, int], float], object] = socket.create_connection,
                        clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep,
                        stop_requested: Callable[[], bool] = lambda: False) -> float:
    """Wait until `host` resolves and its store accepts a TCP connection; the seconds it took.
    GangError after `timeout_s`, naming the last reason; StopRequestedError as soon as
    `stop_requested()` says so (checked before every attempt)."""
    started = clock()
    while True:
        if stop_requested():
            raise StopRequestedError(f"stopped while waiting for the rendezvous host {host}:{port}")
        try:
            connection = connect((host, port), RETRY_SECONDS)
            close = getattr(connection, "close", None)
            if close:
                close()
            return clock() - started
        except OSError as exc:
            reason = f"{type(exc).__name__}: {exc}"
        waited = clock() - started
        if waited >= timeout_s:
            raise GangError(f"the rendezvous host {host}:{port} was not reachable within {timeout_s:g} s "
                            f"({reason}); pod 0 of the gang did not start its store")
        sleep(min(RETRY_SECONDS, max(0.0, timeout_s - waited)))
