"""Finding a running emulated cluster again, and what it holds (`tpuray local status`).

Discovery goes through the state files under the local root ($TPURAY_LOCAL_DIR, default
/tmp/tpuray-local): one folder per stack, named after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpuray import config
from tpuray.local import localmetrics
from tpuray.local.emulator.cluster import EmulatedCluster
from tpuray.local.emulator.plan import EmulatorError
from tpuray.local.emulator.state import STATE_FILE, local_root, state_dir_for


def running_state_dirs() -> list[Path]:
    """The state folders of every emulated cluster under the local root, by name."""
    return sorted(p.parent for p in local_root().glob(f"*/{STATE_FILE}"))


def find(stack: str | None) -> EmulatedCluster:
    """The emulated cluster of a stack (a name or a Pulumi.<name>.yaml path), or the only one running."""
    if stack is not None:
        name = config.stack_name(stack)
        sdir = state_dir_for(name)
        if not (sdir / STATE_FILE).exists():
            raise EmulatorError(
                f"no emulated cluster for stack {name!r} (nothing at {sdir}); start one with `tpuray local up {name}`"
            )
        return EmulatedCluster.attach(sdir)
    dirs = running_state_dirs()
    if not dirs:
        raise EmulatorError("no emulated cluster is running; start one with `tpuray local up STACK`")
    if len(dirs) > 1:
        raise EmulatorError(f"several emulated clusters: {', '.join(d.name for d in dirs)}; name the stack")
    return EmulatedCluster.attach(dirs[0])


SERVE_REPLICA_CLASS = "ServeReplica:"  # Serve names each replica actor's class ServeReplica:<app>:<deployment>


def serve_replicas_per_node(actors: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The live Serve replicas on each node ID, from GCS's actor table (`ray._private.state.actors()`:
    ActorClassName, State, Address.NodeID). A replica that Ray's fallback_strategy placed on a later
    step of the chain thus shows on the host, slice and tier it got (docs/capacity.md)."""
    on_node: dict[str, list[str]] = {}
    for actor in actors.values():
        name = actor.get("ActorClassName") or ""
        node_id = (actor.get("Address") or {}).get("NodeID")
        if actor.get("State") == "ALIVE" and name.startswith(SERVE_REPLICA_CLASS) and node_id:
            on_node.setdefault(node_id, []).append(name)
    return {node: sorted(names) for node, names in on_node.items()}


def status_data(cluster: EmulatedCluster) -> dict[str, Any]:
    """Slices, hosts, chips in use and their holders (placement groups and Serve replicas), as Ray's
    own inventory sees them."""
    import ray

    # GCS's actor table, not ray.util.state.list_actors: that goes through the dashboard, which
    # the emulator starts only with --metrics.
    from ray._private.state import actors as actor_table

    from ray_apps import goodput, slices

    cluster.connect()
    try:
        views = {v.name: v for v in slices.slice_inventory(include_draining=True)}
        replicas = serve_replicas_per_node(actor_table())
        runs = goodput.live_reports()  # each running training run's goodput so far
    finally:
        ray.shutdown()
    out: list[dict[str, Any]] = []
    for spec in cluster.slices:
        view = views.get(spec.name)
        hosts = {h.worker_id: h for h in (view.hosts if view else ())}
        out.append(
            {
                "slice": spec.name,
                "pool": spec.pool,
                "generation": spec.shape.generation,
                "topology": spec.shape.topology,
                "pod_type": spec.shape.pod_type,
                "market_type": spec.market_type,
                "reduced_from": spec.reduced_from,
                "hosts": [
                    {
                        "worker_id": w,
                        "alive": w in hosts,
                        "tpu_total": hosts[w].tpu_total if w in hosts else 0,
                        "tpu_free": hosts[w].tpu_free if w in hosts else 0,
                        "holders": [*hosts[w].holders, *replicas.get(hosts[w].node_id, [])] if w in hosts else [],
                        "node_id": hosts[w].node_id if w in hosts else None,
                    }
                    for w in range(spec.shape.hosts)
                ],
            }
        )
    steps: dict[str, dict[str, float]] = {}
    prom = localmetrics.load(cluster.state_dir)
    if prom is not None:
        try:
            steps = localmetrics.last_steps(prom)
        except localmetrics.MetricsError:
            steps = {}
    for entry in out:
        entry["last_step"] = steps.get(str(entry["slice"]))
        total = sum(h["tpu_total"] for h in entry["hosts"])
        entry["occupancy"] = {"chips_used": total - sum(h["tpu_free"] for h in entry["hosts"]), "chips": total}
    return {
        "stack": cluster.state.name,
        "prometheus": prom.url if prom else None,
        "address": cluster.address,
        "state_dir": str(cluster.state_dir),
        "notes": cluster.notes,
        "slices": out,
        "goodput": {
            run: {k: r[k] for k in ("goodput", "allocated_slice_s", "badput_slice_s")} for run, r in runs.items()
        },
        "pids": len(cluster.pids()),
    }
