"""The Pod Security Standards (baseline and restricted) as a checker of rendered pod specs.

Written from the controls table of kubernetes.io/docs/concepts/security/pod-security-standards
(the Linux controls; Windows pods are not made here). The built-in admission controller is Go
and needs an API server; this is the same list of rules over the manifest the plan renders, so a
pod template can be judged against the level its namespace enforces before it reaches one.
"""

from __future__ import annotations

from typing import Any

LEVELS = ("privileged", "baseline", "restricted")
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                         "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                           "projected", "secret"}


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]


def _baseline(pod: dict[str, Any]) -> list[str]:
    found = [f"spec.{field}" for field in ("hostNetwork", "hostPID", "hostIPC") if pod.get(field)]
    pod_context = pod.get("securityContext") or {}
    contexts = [("spec", pod_context)] + [(f"container {c['name']}", c.get("securityContext") or {}) for c in _containers(pod)]
    for where, context in contexts:
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{where}: hostProcess")
        if context.get("privileged"):
            found.append(f"{where}: privileged")
        added = set((context.get("capabilities") or {}).get("add") or ()) - BASELINE_CAPABILITIES
        if added:
            found.append(f"{where}: adds capabilities {sorted(added)}")
        if (context.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            found.append(f"{where}: AppArmor profile")
        selinux = context.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            found.append(f"{where}: SELinux options")
        if context.get("procMount") not in (None, "Default"):
            found.append(f"{where}: procMount")
        if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
            found.append(f"{where}: seccomp Unconfined")
    for container in _containers(pod):
        if any(port.get("hostPort") for port in container.get("ports") or ()):
            found.append(f"container {container['name']}: hostPort")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            handler = container.get(probe) or {}
            if (handler.get("httpGet") or {}).get("host") or (handler.get("tcpSocket") or {}).get("host"):
                found.append(f"container {container['name']}: {probe} host")
    found += [f"volume {v['name']}: hostPath" for v in pod.get("volumes") or () if "hostPath" in v]
    found += [f"sysctl {s['name']}" for s in pod_context.get("sysctls") or () if s["name"] not in SAFE_SYSCTLS]
    for annotation, value in (pod.get("_annotations") or {}).items():
        if annotation.startswith("container.apparmor.security.beta.kubernetes.io/") and value != "runtime/default" \
                and not value.startswith("localhost/"):
            found.append(f"annotation {annotation}")
    return found


def _restricted(pod: dict[str, Any]) -> list[str]:
    found = [f"volume {v['name']}: type {sorted(set(v) - {'name'})}" for v in pod.get("volumes") or ()
             if not (set(v) - {"name"}) <= RESTRICTED_VOLUME_TYPES]
    pod_context = pod.get("securityContext") or {}
    if pod_context.get("runAsUser") == 0:
        found.append("spec: runAsUser 0")
    for container in _containers(pod):
        where, context = f"container {container['name']}", container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{where}: allowPrivilegeEscalation is not false")
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            found.append(f"{where}: runAsNonRoot is not true")
        if context.get("runAsUser") == 0:
            found.append(f"{where}: runAsUser 0")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{where}: seccomp profile {seccomp}")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or ()):
            found.append(f"{where}: does not drop ALL capabilities")
        if set(capabilities.get("add") or ()) - {"NET_BIND_SERVICE"}:
            found.append(f"{where}: adds capabilities beyond NET_BIND_SERVICE")
    return found


def violations(pod_spec: dict[str, Any], level: str, annotations: dict[str, str] | None = None) -> list[str]:
    """Every rule of `level` the pod breaks (empty: admitted)."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}")
    pod = {**pod_spec, "_annotations": annotations or {}}
    found = [] if level == "privileged" else _baseline(pod)
    return found + _restricted(pod) if level == "restricted" else found
