"""The scheduler stand-in: one step binds every pending pod it can, all hosts of a slice together.

What kube-scheduler and GKE's TPU placement do that a test needs, and no more:
- a node fits a pod when the pod's nodeSelector is a subset of the node's labels, the pod
  tolerates every NoSchedule/NoExecute taint of the node, and the node's free `google.com/tpu`
  covers the pod's request (chips held by bound, not finished pods are used);
- the pods of one multi-host replica (same `ray.io/cluster`, and the same `replicaIndex` label
  the TPU webhook sets, or KubeRay's `ray.io/worker-group-replica-name`) are bound together, host
  i (its TPU_WORKER_ID) to node i of one free slice (one GKE node pool), and only once all of them
  exist; that is what the webhook's pod affinity on `cloud.google.com/gke-nodepool` asks for;
  a replaced host of a replica whose other hosts are still bound joins them on their slice;
- among fitting slices, the one whose tier comes first in the pod's ComputeClass priorities
  (GKE's walk of the class; tpuray/capacity.py reads the tier of a priority);
- a pod that fits nowhere gets PodScheduled=False, reason Unschedulable, as kube-scheduler writes.
Not modelled: node affinity and pod (anti-)affinity terms (the slice binding covers the webhook's),
CPU and memory requests, priorities and preemption of pods, topology spread.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tpuray import capacity, catalog, labels
from tpuray.local.substrate.kube import Kube
from tpuray.local.substrate.nodes import EMULATED_TIER, GKE_NODEPOOL

REPLICA_INDEX = labels.TPU_WEBHOOK_REPLICA
REPLICA_NAME = labels.RAY_REPLICA_NAME
HOST_INDEX = labels.RAY_HOST_INDEX
UNRANKED = 1_000


def tpu_chips(pod: dict[str, Any]) -> int:
    """google.com/tpu the pod asks for: each container's request, else its limit (as the webhook reads it)."""
    total = 0
    for container in pod["spec"].get("containers", []):
        res = container.get("resources", {})
        value = (res.get("requests") or {}).get(labels.TPU_RESOURCE) or (res.get("limits") or {}).get(
            labels.TPU_RESOURCE
        )
        total += int(value or 0)
    return total


def tolerates(tolerations: Sequence[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol["key"] == taint["key"]:
                return True
        elif tol.get("key") == taint["key"] and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def fits(pod: dict[str, Any], node: dict[str, Any], free_chips: int) -> bool:
    spec = pod["spec"]
    node_labels = node["metadata"].get("labels", {})
    if any(node_labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    taints = [t for t in node["spec"].get("taints", []) if t.get("effect") in ("NoSchedule", "NoExecute")]
    if not all(tolerates(spec.get("tolerations") or [], t) for t in taints):
        return False
    return tpu_chips(pod) <= free_chips


def _env(pod: dict[str, Any], name: str) -> str | None:
    for container in pod["spec"].get("containers", []):
        for env in container.get("env") or []:
            if env["name"] == name:
                return env.get("value")
    return None


def gang_key(pod: dict[str, Any]) -> tuple[str, ...]:
    """Pods bound together: a multi-host TPU replica's, else the pod alone."""
    meta = pod["metadata"]
    lab = meta.get("labels", {})
    replica = lab.get(REPLICA_NAME) or lab.get(REPLICA_INDEX)
    if tpu_chips(pod) and replica:
        return (meta["namespace"], lab.get(labels.RAY_CLUSTER, ""), replica)
    return (meta["namespace"], meta["name"])


def hosts_of(pod: dict[str, Any]) -> int:
    """Hosts of the slice a TPU pod asks for (1 for a pod without TPUs)."""
    chips = tpu_chips(pod)
    selector = pod["spec"].get("nodeSelector") or {}
    if not chips or labels.GKE_TPU_TOPOLOGY not in selector:
        return 1
    return catalog.by_gke_labels(selector[labels.GKE_TPU_ACCELERATOR], selector[labels.GKE_TPU_TOPOLOGY], chips).hosts


def host_index(pod: dict[str, Any]) -> int:
    value = pod["metadata"].get("labels", {}).get(HOST_INDEX) or _env(pod, "TPU_WORKER_ID") or "0"
    return int(value)


def rank(node: dict[str, Any], pod: dict[str, Any], classes: dict[str, dict[str, Any]]) -> int:
    """Where the node's tier and shape stand in the pod's ComputeClass priorities (lower first)."""
    cls = classes.get((pod["spec"].get("nodeSelector") or {}).get(labels.COMPUTE_CLASS, ""))
    if cls is None:
        return UNRANKED
    node_labels = node["metadata"].get("labels", {})
    tier = node["metadata"].get("annotations", {}).get(EMULATED_TIER)
    for i, priority in enumerate(cls.get("spec", {}).get("priorities", [])):
        tpu = priority.get("tpu") or {}
        if (
            tpu.get("type") == node_labels.get(labels.GKE_TPU_ACCELERATOR)
            and tpu.get("topology") == node_labels.get(labels.GKE_TPU_TOPOLOGY)
            and capacity.tier_of_priority(priority).key == tier
        ):
            return i
    return UNRANKED


def _live(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed")


def plan(
    pods: Sequence[dict[str, Any]], nodes: Sequence[dict[str, Any]], classes: dict[str, dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], str]], list[dict[str, Any]]]:
    """(bindings (pod, node name), pods that fit nowhere) for the pending pods among `pods`."""
    alloc = {n["metadata"]["name"]: int(n["status"].get("allocatable", {}).get(labels.TPU_RESOURCE, 0)) for n in nodes}
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        if pod["spec"].get("nodeName") and _live(pod):
            used[pod["spec"]["nodeName"]] += tpu_chips(pod)
    pending = [p for p in pods if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
    gangs: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for pod in pending:
        gangs[gang_key(pod)].append(pod)
    by_pool: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        by_pool[node["metadata"].get("labels", {}).get(GKE_NODEPOOL, node["metadata"]["name"])].append(node)
    pool_of = {n["metadata"]["name"]: p for p, pool in by_pool.items() for n in pool}
    bound_in: dict[tuple[str, ...], str] = {}  # a replica whose other hosts are bound -> their slice
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node in pool_of and _live(pod) and not pod["metadata"].get("deletionTimestamp") and tpu_chips(pod):
            bound_in.setdefault(gang_key(pod), pool_of[node])
    bindings: list[tuple[dict[str, Any], str]] = []
    unschedulable: list[dict[str, Any]] = []
    for key, gang in sorted(gangs.items()):
        gang.sort(key=host_index)
        hosts = hosts_of(gang[0])
        if key in bound_in:
            # A replaced host of a replica that is still on its slice (the operator recreates a
            # failed pod): the free nodes of that slice, as the webhook's node-pool affinity asks.
            chosen = _rejoin(gang, by_pool[bound_in[key]], alloc, used)
        elif len(gang) < hosts:
            continue  # the rest of the replica is not created yet
        else:
            chosen = _choose(gang, by_pool, alloc, used, classes)
        if chosen is None:
            unschedulable += gang
            continue
        for pod, node in zip(gang, chosen, strict=True):
            used[node] += tpu_chips(pod)
            bindings.append((pod, node))
    return bindings, unschedulable


Pool = list[dict[str, Any]]


def _choose(
    gang: list[dict[str, Any]],
    by_pool: dict[str, Pool],
    alloc: dict[str, int],
    used: dict[str, int],
    classes: dict[str, dict[str, Any]],
) -> list[str] | None:
    lead = gang[0]
    if not tpu_chips(lead):  # a CPU pod: the first node that takes it
        return next(([n] for pool in by_pool.values() for n in _names(pool) if _fits(lead, pool, n, alloc, used)), None)
    candidates = []
    for pool in by_pool.values():
        if len(pool) != len(gang):
            continue
        names = _names(pool)
        if all(used[n] == 0 for n in names) and all(
            _fits(p, pool, n, alloc, used) for p, n in zip(gang, names, strict=True)
        ):
            candidates.append((rank(pool[0], lead, classes), names))
    return min(candidates)[1] if candidates else None


def _rejoin(gang: list[dict[str, Any]], pool: Pool, alloc: dict[str, int], used: dict[str, int]) -> list[str] | None:
    """Nodes of the slice `pool` for the pending hosts of a replica bound there: host i's own
    node when it is free, else another free node of the slice."""
    names, chosen = _names(pool), []
    for pod in gang:
        i = host_index(pod)
        order = ([names[i]] if i < len(names) else []) + names
        node = next((n for n in order if n not in chosen and used[n] == 0 and _fits(pod, pool, n, alloc, used)), None)
        if node is None:
            return None
        chosen.append(node)
    return chosen


def _names(pool: list[dict[str, Any]]) -> list[str]:
    return [n["metadata"]["name"] for n in pool]


def _fits(pod: dict[str, Any], pool: Pool, name: str, alloc: dict[str, int], used: dict[str, int]) -> bool:
    node = next(n for n in pool if n["metadata"]["name"] == name)
    return fits(pod, node, alloc[name] - used[name])


def unschedulable_condition(message: str) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
            "lastTransitionTime": now}  # fmt: skip


def step(kube: Kube) -> int:
    """One scheduling pass over the whole cluster; the number of pods bound."""
    pods = kube.list("pods")
    nodes = [n for n in kube.list("nodes") if not n["spec"].get("unschedulable")]
    classes = {c["metadata"]["name"]: c for c in kube.list_objects("cloud.google.com/v1", "computeclasses")}
    bindings, stuck = plan(pods, nodes, classes)
    bound = sum(kube.bind(pod, node) for pod, node in bindings)
    for pod in stuck:
        conditions = pod["status"].get("conditions") or []
        if any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions):
            continue
        message = f"0/{len(nodes)} nodes are available: no free slice matches the pod's selectors and tolerations"
        meta = pod["metadata"]
        try:
            kube.patch_status(
                "pods", meta["name"], {"conditions": [unschedulable_condition(message)]}, meta["namespace"]
            )
        except Exception:  # noqa: BLE001 - the pod went away meanwhile
            continue
    return bound


def preempt(kube: Kube, node_pool: str, grace_s: int = 30) -> list[str]:
    """GKE reclaims a slice: its nodes go, and with them the pods bound there (what the pod
    garbage collector does for pods of a deleted node). Returns the deleted pods' names."""
    nodes = [n["metadata"]["name"] for n in kube.list("nodes", selector=f"{GKE_NODEPOOL}={node_pool}")]
    deleted = []
    for pod in kube.list("pods"):
        if pod["spec"].get("nodeName") in nodes:
            kube.delete("pods", pod["metadata"]["name"], pod["metadata"]["namespace"], grace_s)
            deleted.append(pod["metadata"]["name"])
    for name in nodes:
        kube.delete("nodes", name)
    return deleted
