"""The Pod Security Standards' `restricted` profile, control by control, as Kubernetes defines it.

Source: https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the Baseline
and Restricted tables; every Baseline control is part of Restricted). Check names follow
the Pod Security admission controller's checks (k8s.io/pod-security-admission/policy:
hostProcess, hostNamespaces, privileged, capabilities_baseline, hostPathVolumes, hostPorts,
appArmorProfile, seLinuxOptions, procMount, seccompProfile_baseline, sysctls,
restrictedVolumes, allowPrivilegeEscalation, runAsNonRoot, runAsUser,
seccompProfile_restricted, capabilities_restricted). The API server runs that controller;
this module lets the tests show, offline, that it would admit every rendered pod.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret",
}  # fmt: skip
CONTAINER_KEYS = ("initContainers", "containers", "ephemeralContainers")


def _containers(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key in CONTAINER_KEYS:
        for i, c in enumerate(pod.get(key) or []):
            yield f"{key}[{i}]", c


def _sc(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("securityContext") or {}


def _baseline(pod: dict[str, Any]) -> Iterator[str]:
    psc = _sc(pod)
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        yield "hostProcess: securityContext.windowsOptions.hostProcess is true"
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            yield f"hostNamespaces: {key} is true"
    for where, c in _containers(pod):
        sc = _sc(c)
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            yield f"hostProcess: {where}.securityContext.windowsOptions.hostProcess is true"
        if sc.get("privileged"):
            yield f"privileged: {where}.securityContext.privileged is true"
        for cap in (sc.get("capabilities") or {}).get("add") or []:
            if cap not in BASELINE_CAPABILITIES:
                yield f"capabilities_baseline: {where} adds capability {cap}"
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                yield f"hostPorts: {where} uses hostPort {port['hostPort']}"
        if (sc.get("procMount") or "Default") != "Default":
            yield f"procMount: {where}.securityContext.procMount is {sc['procMount']}"
    for v in pod.get("volumes") or []:
        if "hostPath" in v:
            yield f"hostPathVolumes: volume {v.get('name')} is a hostPath"
    for where, sc in [("securityContext", psc), *((f"{w}.securityContext", _sc(c)) for w, c in _containers(pod))]:
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            yield f"appArmorProfile: {where}.appArmorProfile.type is Unconfined"
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            yield f"seLinuxOptions: {where}.seLinuxOptions {se} is not allowed"
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"seccompProfile_baseline: {where}.seccompProfile.type is Unconfined"
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"sysctls: {sysctl.get('name')} is not a safe sysctl"


def _restricted(pod: dict[str, Any]) -> Iterator[str]:
    psc = _sc(pod)
    for v in pod.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            yield f"restrictedVolumes: volume {v.get('name')} has type {', '.join(sorted(kinds))}"
    pod_non_root = psc.get("runAsNonRoot") is True
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
    if psc.get("runAsUser") == 0:
        yield "runAsUser: securityContext.runAsUser is 0"
    for where, c in _containers(pod):
        sc = _sc(c)
        if sc.get("allowPrivilegeEscalation") is not False:
            yield f"allowPrivilegeEscalation: {where}.securityContext.allowPrivilegeEscalation is not false"
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            yield f"runAsNonRoot: {where} may run as root (runAsNonRoot is not true on the pod or the container)"
        if sc.get("runAsUser") == 0:
            yield f"runAsUser: {where}.securityContext.runAsUser is 0"
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp is None and not pod_seccomp:
            yield f"seccompProfile_restricted: {where} has no RuntimeDefault or Localhost seccomp profile"
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            yield f"capabilities_restricted: {where}.securityContext.capabilities.drop does not include ALL"
        for cap in caps.get("add") or []:
            if cap != "NET_BIND_SERVICE":
                yield f"capabilities_restricted: {where} adds capability {cap}; only NET_BIND_SERVICE is allowed"


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    """Every Baseline and Restricted control the pod spec breaks, one line each ([] = admitted)."""
    return [*_baseline(pod), *_restricted(pod)]
