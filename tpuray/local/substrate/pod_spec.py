"""What the pod runner makes of a container the operator wrote: its environment and argv, plus
the few rewrites this machine needs, each named with its reason (REWRITES).

The kubelet's own work is done as the kubelet does it, not rewritten: env `value` with `$(VAR)`
expansion of earlier variables, `valueFrom.fieldRef` (the downward API) and `resourceFieldRef`,
then `$(VAR)` expansion in command and args (Kubernetes "Define dependent environment variables").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Every place the pod runner departs from what the operator wrote, and why. `tpuray local run
# --explain` lists its own the same way; docs/testing.md repeats this table.
REWRITES = {
    "image": "no container runtime here: the container's command runs on this machine, with this checkout's "
    "Python environment as the image's (`ray`, `python`... on /usr/local/bin in the pod's mount namespace, "
    "which a `bash -l` PATH keeps; its Ray 2.60 is the image's; ray_apps comes from the runtime_env bundle); "
    "the checkout and its environment are bound at their own paths in every pod, above its volumes",
    "user": "runs as this machine's user, not securityContext.runAsUser; readOnlyRootFilesystem is not applied",
    "network": "every pod shares one private network namespace with loopback alone (created by the runner), "
    "so Ray keeps 127.0.0.1 and nothing listens on the machine's network",
    "ports": "pods share that loopback: each fixed port a Ray pod listens on (`--*-port=N` flags, Ray's "
    "defaults 6379, 8265, 10001, 52365, 8080, and declared containerPorts) gets a free port of its own; "
    "`--dashboard-host=0.0.0.0` becomes 127.0.0.1 and `--node-ip-address=127.0.0.1` is added",
    "dns": "`<service>.<namespace>.svc.cluster.local:<port>` in args and env (a worker's --address, the "
    "submitter's --address) becomes 127.0.0.1 and the port of the pod the Service selects",
    "volumes": "emptyDir and projected volumes are folders of the pod, bind-mounted at their mountPath in a "
    "private mount namespace (tmpfs under /home and /run, where the image has folders this machine lacks)",
    "api server": "KUBERNETES_SERVICE_HOST/PORT point at the local API server on 127.0.0.1, relayed into the "
    "pods' network namespace",
    "devices": "no TPU chips: the TPU environment GKE's device plugin gives a TPU container "
    "(TPU_ACCELERATOR_TYPE, TPU_TOPOLOGY, from its node's labels) is added; JAX runs on CPU (a TPU "
    "container's JAX_PLATFORMS of tpu,cpu becomes cpu: JAX refuses to start when a listed platform fails)",
    "storage": "GCS is the local GCS emulator (tpuray/local/storage_emulator.py): STORAGE_EMULATOR_HOST is added "
    "to every container (google-cloud-storage, Ray's gs:// working_dir fetch and ray_apps.runtime read it), "
    "relayed into the pods' namespace; on GKE a pod reaches GCS with its Workload Identity",
    "memory": "`--object-store-memory` is capped at 100 MiB per node: the machine has 24 GiB shared",
    "serve": "Ray Serve's proxy on a worker pod binds the pod's own ports for Serve's 8000 and 9000 "
    "(Ray's RAY_SERVE_WORKER_PROXY_HTTP_PORT / _GRPC_PORT, set in its env); the head's proxy keeps 8000 "
    "and 9000, which Ray exempts from that override",
    "autoscaler": "`ray kuberay-autoscaler` gets `--gcs-address=127.0.0.1:<the head's GCS port>`, the address "
    "it defaults to (<node ip>:6379) under the ports rewrite",
}

RAY_DEFAULT_PORTS = {"port": 6379, "dashboard-port": 8265, "ray-client-server-port": 10001}
OBJECT_STORE_BYTES = 100 * 2**20
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_PORT_FLAG = re.compile(r"--([a-z-]*port)=(\d+)")
_SVC = re.compile(r"\b([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?:(\d+)")


class PodSpecError(Exception):
    """A container uses something the pod runner does not provide (named in the message)."""


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined variables replaced, `$$` is a literal `$`, others kept."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, text)


def _field(pod: dict[str, Any], path: str) -> str:
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": status.get("hostIP", ""),
        "status.podIP": status.get("podIP", ""),
    }
    if path not in simple:
        raise PodSpecError(f"fieldRef {path!r} is not provided by the pod runner")
    return simple[path]


def _quantity(value: str) -> float:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


def _resource(container: dict[str, Any], ref: dict[str, Any]) -> str:
    kind, _, name = ref["resource"].partition(".")
    res = container.get("resources") or {}
    value = (res.get(kind) or {}).get(name) or (res.get("limits") or {}).get(name)
    if value is None:
        raise PodSpecError(f"resourceFieldRef {ref['resource']!r} has no value in the container")
    divisor = _quantity(str(ref.get("divisor", "1")))
    return str(math.ceil(_quantity(str(value)) / divisor))


def container_env(pod: dict[str, Any], container: dict[str, Any], base: dict[str, str]) -> dict[str, str]:
    """The environment the kubelet gives `container`: `base` (the service variables), then its env."""
    env = dict(base)
    for var in container.get("env") or []:
        if "value" in var or "valueFrom" not in var:
            env[var["name"]] = expand(var.get("value", ""), env)
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            env[var["name"]] = _field(pod, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            env[var["name"]] = _resource(container, source["resourceFieldRef"])
        else:
            raise PodSpecError(f"env {var['name']}: {sorted(source)} is not provided by the pod runner")
    return env


def argv(container: dict[str, Any], env: dict[str, str]) -> list[str]:
    """command + args with `$(VAR)` expanded (an image ENTRYPOINT is not known here: a container
    without a command is refused)."""
    if not container.get("command"):
        raise PodSpecError(f"container {container['name']!r} has no command (the image's entrypoint is unknown)")
    return [expand(a, env) for a in [*container["command"], *(container.get("args") or [])]]


@dataclass
class PortMap:
    """The pod's own ports: what it was written to listen on -> the free port it listens on here."""

    ports: dict[int, int] = field(default_factory=dict)

    def get(self, port: int, free: Callable[[], int]) -> int:
        if port not in self.ports:
            self.ports[port] = free()
        return self.ports[port]


Resolve = Callable[[str, str, int], int]  # (service, namespace, port) -> the port on 127.0.0.1


def rewrite_services(text: str, resolve: Resolve) -> str:
    return _SVC.sub(lambda m: f"127.0.0.1:{resolve(m.group(1), m.group(2), int(m.group(3)))}", text)


def rewrite_ray_start(script: str, ports: PortMap, free: Callable[[], int], head: bool) -> str:
    """A KubeRay container script (`ulimit -n 65536; ray start ... --block`) with the REWRITES
    "ports", "network" and "memory" applied, or the autoscaler's with "autoscaler"; anything else
    is left alone."""
    if "ray kuberay-autoscaler" in script and "--gcs-address" not in script:
        gcs = ports.get(RAY_DEFAULT_PORTS["port"], free)
        return script.replace("ray kuberay-autoscaler", f"ray kuberay-autoscaler --gcs-address=127.0.0.1:{gcs}", 1)
    if "ray start" not in script:
        return script
    script = _PORT_FLAG.sub(lambda m: f"--{m.group(1)}={ports.get(int(m.group(2)), free)}", script)
    script = script.replace("--dashboard-host=0.0.0.0", "--dashboard-host=127.0.0.1")
    added = ["--node-ip-address=127.0.0.1", f"--object-store-memory={OBJECT_STORE_BYTES}"]
    if head:
        for flag, default in RAY_DEFAULT_PORTS.items():
            if f"--{flag}=" not in script:
                added.append(f"--{flag}={ports.get(default, free)}")
    return script.replace("ray start", "ray start " + " ".join(added), 1)


# Serve's default proxy ports (HTTPOptions, gRPCOptions) -> Ray's per-worker-node override of each
# (ray/serve/_private/proxy.py apply_per_node_port_overrides, Ray 2.60: the head is exempt).
SERVE_PROXY_PORTS = {8000: "RAY_SERVE_WORKER_PROXY_HTTP_PORT", 9000: "RAY_SERVE_WORKER_PROXY_GRPC_PORT"}


def serve_proxy_env(ports: PortMap, free: Callable[[], int], head: bool) -> dict[str, str]:
    """REWRITES "serve": a worker pod's Serve proxy binds the pod's own ports; the head's binds
    Serve's own, so its map keeps them (the serve Service and the probes then reach each)."""
    if head:
        for port in SERVE_PROXY_PORTS:
            ports.ports.setdefault(port, port)
        return {}
    return {name: str(ports.get(port, free)) for port, name in SERVE_PROXY_PORTS.items()}


def selects(selector: dict[str, str], pod: dict[str, Any]) -> bool:
    """Whether a Service's equality selector selects the pod."""
    pod_labels = pod["metadata"].get("labels") or {}
    return all(pod_labels.get(k) == v for k, v in selector.items())


def target_port(pod: dict[str, Any], service_port: dict[str, Any]) -> int | None:
    """The pod's port behind a Service port: its targetPort (the port itself when unset), a number
    or the name of one of the pod's container ports; None when the pod has no port of that name."""
    target = service_port.get("targetPort", service_port["port"])
    if isinstance(target, int):
        return target
    named = [
        p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", []) if p.get("name") == target
    ]
    return named[0] if named else None


def rewrite_local(text: str, ports: PortMap) -> str:
    """127.0.0.1:N / localhost:N of the pod's own ports (the head's RAY_ADDRESS, probes)."""
    return re.sub(
        r"\b(?:127\.0\.0\.1|localhost):(\d+)",
        lambda m: f"127.0.0.1:{ports.ports.get(int(m.group(1)), int(m.group(1)))}",
        text,
    )
