"""Every port a Ray head or worker pod listens on, and who may connect to it (one home).

The rendered rayStartParams pin each port Ray would otherwise pick at random
(node manager, object manager, agents), so a NetworkPolicy can name it. The access class
of each port decides which NetworkPolicy admits it from outside its Ray object
(infra/components/network.py); between the pods of one object every port is admitted, as
KubeRay's own NetworkPolicy controller does, so the CLUSTER entries below say what listens
there but admit nothing a list could miss (the TPU runtime, jax.distributed and what a later
libtpu, JAX or Ray opens). The port-coverage test (tests/test_network_policies.py) reads the
list of `ray start` port options from the installed Ray itself, so a port a new Ray version
adds fails the test instead of being silently blocked; tests/test_network_peers.py and
tests/test_network_ports_emulated.py take the ports peers dial from upstream sources and from
what emulated hosts listen on, not from this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Access(str, Enum):
    CLUSTER = "cluster"  # only pods of the same Ray object (all their ports are open to each other)
    ADMIN = "admin"  # the namespace, the control plane (KubeRay), and the configured admin CIDRs
    METRICS = "metrics"  # Google Cloud Managed Service for Prometheus collectors (gmp-system)
    INGRESS = "ingress"  # the Serve Gateway's proxies and Google health checks


@dataclass(frozen=True)
class RayPort:
    name: str  # the `ray start` option (without --), or a name for ports Ray opens without one
    port: int
    access: Access
    head_only: bool = False
    end_port: int | None = None  # a range: port..end_port
    why: str = ""


# Ports Ray would pick at random, pinned through rayStartParams (KubeRay passes them to `ray start`).
PINNED_START_PARAMS = {
    "node-manager-port": "6380",
    "object-manager-port": "6381",
    "runtime-env-agent-port": "6382",
    "dashboard-agent-grpc-port": "6383",
    "metrics-export-port": "8080",  # KubeRay's own default, pinned here to be explicit
}
# Linux's default ephemeral range (net.ipv4.ip_local_port_range): where `bind(port=0)` lands.
EPHEMERAL = (32768, 60999)
MEGASCALE_PORT = 8081  # ray._private.accelerators.tpu.DEFAULT_MEGASCALE_PORT; the TPU webhook's base
# libtpu's host-to-host port in a multi-host slice: the GKE TPU webhook's tpuProcessPortBase
# (ai-on-gke/kuberay-tpu-webhook main.go; TPU_PROCESS_PORT on v7x, + the container's index).
TPU_RUNTIME_PORT = 8471
SERVE_PORT = 8000
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001

RAY_PORTS: tuple[RayPort, ...] = (
    RayPort("port", 6379, Access.CLUSTER, head_only=True, why="GCS server"),
    RayPort("node-manager-port", 6380, Access.CLUSTER, why="raylet"),
    RayPort("object-manager-port", 6381, Access.CLUSTER, why="object transfer between nodes"),
    RayPort("runtime-env-agent-port", 6382, Access.CLUSTER, why="runtime env agent (raylet)"),
    RayPort("dashboard-agent-grpc-port", 6383, Access.CLUSTER, why="dashboard agent gRPC (dashboard head)"),
    RayPort("dashboard-agent-listen-port", 52365, Access.CLUSTER, why="dashboard agent HTTP"),
    RayPort("min-worker-port", 10002, Access.CLUSTER, end_port=19999, why="worker processes (actors, tasks)"),
    RayPort("metrics-export-port", 8080, Access.METRICS, why="Prometheus metrics of each node"),
    RayPort("dashboard-port", DASHBOARD_PORT, Access.ADMIN, head_only=True, why="dashboard and Jobs API"),
    RayPort("ray-client-server-port", CLIENT_PORT, Access.ADMIN, head_only=True, why="Ray Client"),
    # Ports Ray opens without a `ray start` option.
    RayPort(
        "dashboard-metrics", 44227, Access.METRICS, head_only=True, why="ray.dashboard.consts.DASHBOARD_METRIC_PORT"
    ),
    RayPort(
        "autoscaler-metrics",
        44217,
        Access.METRICS,
        head_only=True,
        why="ray.autoscaler._private.constants.AUTOSCALER_METRIC_PORT (autoscaler sidecar)",
    ),
    RayPort("serve-http", SERVE_PORT, Access.INGRESS, why="Ray Serve HTTP proxy (one per node)"),
    RayPort("megascale", MEGASCALE_PORT, Access.CLUSTER, why="MXLA/DCN: multi-slice coordinator (MEGASCALE_PORT)"),
    RayPort("tpu-runtime", TPU_RUNTIME_PORT, Access.CLUSTER, why="libtpu between the hosts of a slice"),
    RayPort(
        "ephemeral",
        EPHEMERAL[0],
        Access.CLUSTER,
        end_port=EPHEMERAL[1],
        why="jax.distributed coordinator: Ray Train binds a free port on rank 0 (ray.train._internal.utils)",
    ),
)
# `ray start` options that are not listening ports of their own (covered by another entry).
NOT_LISTENING = {
    "max-worker-port": "the end of the worker range (min-worker-port)",
    "worker-port-list": "an alternative to the worker range; not used",
    "redis-shard-ports": "external Redis only; not used",
}


def by_access(access: Access, head: bool) -> list[RayPort]:
    return [p for p in RAY_PORTS if p.access is access and (head or not p.head_only)]
