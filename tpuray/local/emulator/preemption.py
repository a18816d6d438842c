"""Preemptions with a notice, and slices that come back, on an emulated cluster.

On GKE a spot preemption or a host maintenance event gives each pod of the slice SIGTERM and its
termination grace period (docs/capacity.md, "The preemption notice"). The train worker group's
preStop hook drains its own Ray node with that deadline (`ray drain-node --reason
DRAIN_NODE_REASON_PREEMPTION --deadline-remaining-seconds N`, infra/components/ray_cluster.py),
the kubelet kills the pod when the period ends, and KubeRay recreates the replica once GKE has a
slice again. Here the same steps, on one emulated slice:

- `drain_slice`: GCS DrainNode on every host of the slice, reason PREEMPTION, with the deadline,
  the call `ray drain-node` makes (ray 2.60.0 python/ray/scripts/scripts.py, `drain_node`);
- `preempt_slice`: the drain, then after `notice_s` the hosts killed (SIGTERM, then SIGKILL);
- `return_slice`: the slice's hosts started again with the same TPU environment, as KubeRay's
  new replica pods would be (in-process clusters only: tests and benchmarks).
"""

from __future__ import annotations

import contextlib
import time

from tpuray import labels
from tpuray.local import storage_emulator
from tpuray.local.emulator.cluster import BASE_ENV, IMAGE_SITE, EmulatedCluster, host_node_args, node_common_args
from tpuray.local.emulator.plan import HOST_CPUS, EmulatorError
from tpuray.local.emulator.processes import _environ, _records
from tpuray.local.emulator.state import HostRecord

PREEMPTION_REASON = "DRAIN_NODE_REASON_PREEMPTION"


def slice_node_ids(cluster: EmulatedCluster, slice_name: str) -> list[str]:
    """Ray node IDs of the slice's live hosts, from Ray's own slice-name label."""
    import ray

    cluster.slice(slice_name)  # an unknown slice fails here, naming the known ones
    return [
        n["NodeID"]
        for n in ray.nodes()
        if n.get("Alive") and (n.get("Labels") or {}).get(labels.RAY_TPU_SLICE_NAME) == slice_name
    ]


def drain_slice(cluster: EmulatedCluster, slice_name: str, notice_s: float, message: str = "spot preemption") -> float:
    """Drain every host of the slice with a deadline `notice_s` from now; returns the deadline
    (unix seconds). Raises EmulatorError when GCS refuses a drain."""
    import ray
    from ray.core.generated import autoscaler_pb2

    deadline_ms = int((time.time() + notice_s) * 1000)
    gcs = ray._raylet.GcsClient(address=cluster.address)
    nodes = slice_node_ids(cluster, slice_name)
    if not nodes:
        raise EmulatorError(f"slice {slice_name} has no live host to drain")
    for node_id in nodes:
        accepted, why = gcs.drain_node(
            node_id, autoscaler_pb2.DrainNodeReason.Value(PREEMPTION_REASON), message, deadline_ms
        )
        if not accepted:
            raise EmulatorError(f"GCS refused to drain {slice_name} node {node_id}: {why}")
    return deadline_ms / 1000


def preempt_slice(cluster: EmulatedCluster, slice_name: str, notice_s: float) -> dict[str, float]:
    """A preemption with a notice: drain, wait `notice_s`, kill every host. Returns the times."""
    noticed = time.time()
    deadline = drain_slice(cluster, slice_name, notice_s) if notice_s > 0 else noticed
    time.sleep(max(0.0, deadline - time.time()))
    killed = time.time()
    # The kubelet's SIGTERM first, as at the end of a pod's preStop: a raylet that gets it leaves
    # GCS at once (a SIGKILLed one is found dead only by GCS's health checks, seconds later).
    hosts = [h for h in cluster.state.hosts if h.slice == slice_name]
    for host in hosts:
        node = cluster._nodes.get((slice_name, host.worker_id))
        if node is not None:
            with contextlib.suppress(Exception):
                node._kill_process_type("raylet", check_alive=False, allow_graceful=True)
    for host in hosts:
        cluster.kill_host(slice_name, host.worker_id)
    return {"noticed": noticed, "deadline": deadline, "killed": killed}


def return_slice(cluster: EmulatedCluster, slice_name: str, host_cpus: int = HOST_CPUS) -> float:
    """Start the slice's hosts again (a new replica of its worker group); returns when Ray has them."""
    spec = cluster.slice(slice_name)
    if cluster._cluster is None:
        raise EmulatorError("only an emulated cluster started in this process can bring a slice back")
    state = cluster.state
    base = {**BASE_ENV, "RAY_TMPDIR": state.state_dir, "RAY_ADDRESS": state.address}
    if state.storage_host:
        base[storage_emulator.HOST_ENV] = state.storage_host
        base["PYTHONPATH"] = str(IMAGE_SITE)
    common = node_common_args(state.ray_dir)
    with _environ(base):
        for worker in range(spec.shape.hosts):
            if any((h.slice, h.worker_id) == (slice_name, worker) for h in state.hosts):
                continue  # still up
            with _environ(spec.host_env(worker)):
                node = cluster._cluster.add_node(wait=False, **host_node_args(spec, worker, host_cpus, common))
            cluster._nodes[(slice_name, worker)] = node
            state.hosts.append(HostRecord(slice_name, worker, node.unique_id, _records(node)))
            state.save()
        cluster._cluster.wait_for_nodes(timeout=120)
    return time.time()
