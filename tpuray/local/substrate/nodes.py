"""Emulated GKE nodes: one Node object per TPU host of every slice a scripted capacity holds.

GKE gives each slice of a multi-host TPU node pool its own node pool (all hosts of one slice share
`cloud.google.com/gke-nodepool`), and labels and taints its nodes as read by the pods' selectors:
- labels `cloud.google.com/gke-tpu-accelerator` and `cloud.google.com/gke-tpu-topology` (the shape,
  from tpuray/catalog.py), `node.kubernetes.io/instance-type` (its machine type);
- for a node a ComputeClass created: the label and the NoSchedule taint
  `cloud.google.com/compute-class=<class>` (which the rendered TPU pods tolerate);
- `google.com/tpu=present:NoSchedule` on every TPU node (GKE taints TPU nodes; the pods tolerate it);
- the capacity tier's own node label, and taint where tpuray/capacity.py says it is tainted
  (Spot: `cloud.google.com/gke-spot=true:NoSchedule`);
- allocatable `google.com/tpu`: the chips of one host.
Which tier and which reservation a node is on are recorded as annotations (EMULATED_TIER,
EMULATED_RESERVATION): bookkeeping for tests, never read by a pod.

Capacity is scripted: `SlicePool(compute_class, shape, tier, slices)` says how many slices of a
shape that tier has (0: out of stock). Not modelled: provisioning time (a node exists from the
start), node CPU and memory (allocatable is generous: only TPU chips are counted), zones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tpuray import capacity, catalog, labels
from tpuray.local.substrate.kube import Kube

GKE_NODEPOOL = labels.GKE_NODEPOOL
INSTANCE_TYPE = labels.NODE_INSTANCE_TYPE
HOSTNAME = labels.NODE_HOSTNAME
TPU_TAINT = {"key": labels.TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
EMULATED_TIER = labels.EMULATED_TIER
EMULATED_RESERVATION = labels.EMULATED_RESERVATION
# What every emulated node can hold besides TPU chips: more than any test asks (not modelled).
ROOMY = {"cpu": "1000", "memory": "4Ti", "pods": "110", "ephemeral-storage": "1Ti"}


@dataclass(frozen=True)
class SlicePool:
    """`slices` slices of `shape` on capacity tier `tier`, made for ComputeClass `compute_class`."""

    compute_class: str
    shape: catalog.SliceShape
    tier: capacity.Tier
    slices: int
    reservation: str = ""  # the reservation a reservation tier consumes

    def pool_name(self, index: int) -> str:
        """The GKE node pool of slice `index` (every host of one slice shares it)."""
        return f"{self.compute_class}-{self.shape.pod_type}-{self.tier.key}-{index}"


def tier_taints(tier: capacity.Tier) -> list[dict[str, str]]:
    found = capacity.toleration(tier)
    return [] if found is None else [{"key": found["key"], "value": found["value"], "effect": found["effect"]}]


def slice_nodes(pool: SlicePool, index: int) -> list[dict[str, Any]]:
    """The Node objects of slice `index` of `pool`, host 0 first."""
    name = pool.pool_name(index)
    shape = pool.shape
    node_labels = {
        GKE_NODEPOOL: name,
        labels.GKE_TPU_ACCELERATOR: shape.gke_accelerator,
        labels.GKE_TPU_TOPOLOGY: shape.topology,
        INSTANCE_TYPE: shape.machine_type,
        labels.COMPUTE_CLASS: pool.compute_class,
    }
    if pool.tier.node_label:
        node_labels[pool.tier.node_label] = "true"
    taints = [
        TPU_TAINT,
        {"key": labels.COMPUTE_CLASS, "value": pool.compute_class, "effect": "NoSchedule"},
        *tier_taints(pool.tier),
    ]
    annotations = {EMULATED_TIER: pool.tier.key}
    if pool.reservation:
        annotations[EMULATED_RESERVATION] = pool.reservation
    nodes = []
    for host in range(shape.hosts):
        node = f"gke-{name}-{host}"
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "labels": {**node_labels, HOSTNAME: node},
                    "annotations": annotations,
                },
                "spec": {"taints": taints},
                "status": {"allocatable": {**ROOMY, labels.TPU_RESOURCE: str(shape.chips_per_host)}},
            }
        )
    return nodes


def system_node(pool: str, index: int = 0) -> dict[str, Any]:
    """A node of the CPU system pool (what the Ray heads and the submitters land on)."""
    name = f"gke-{pool}-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {GKE_NODEPOOL: pool, labels.SYSTEM_POOL: pool, HOSTNAME: name}},
        "spec": {},
        "status": {"allocatable": dict(ROOMY)},
    }


def ready_status(allocatable: dict[str, str]) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "capacity": allocatable,
        "allocatable": allocatable,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
             "lastTransitionTime": now, "message": "emulated node"}
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
    }  # fmt: skip


def create_nodes(kube: Kube, nodes: Iterable[dict[str, Any]]) -> list[str]:
    """Register Node objects as a kubelet would (the object, then its Ready status). The API
    server's TaintNodesByCondition admission adds `node.kubernetes.io/not-ready:NoSchedule` to a
    new node; the node lifecycle controller (kube-controller-manager, not run here) removes it once
    the node is Ready, and so does this function, leaving the node's own taints."""
    names = []
    for node in nodes:
        status = node.get("status", {})
        created = kube.create("nodes", {k: v for k, v in node.items() if k != "status"})
        name = created["metadata"]["name"]
        kube.patch_status("nodes", name, ready_status(status.get("allocatable", ROOMY)))
        response = kube.session.patch(
            f"{kube.url}/api/v1/nodes/{name}",
            data=json.dumps({"spec": {"taints": node["spec"].get("taints") or None}}),
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=10,
        )
        response.raise_for_status()
        names.append(name)
    return names


def install(kube: Kube, pools: Iterable[SlicePool], system_pool: str | None = None) -> list[str]:
    """Every scripted slice's nodes, plus one system node when `system_pool` is named; the names created."""
    nodes = [system_node(system_pool)] if system_pool else []
    for pool in pools:
        for index in range(pool.slices):
            nodes += slice_nodes(pool, index)
    return create_nodes(kube, nodes)


def pools_for_class(compute_class: dict[str, Any], stock: dict[tuple[str, str], int]) -> list[SlicePool]:
    """A SlicePool per TPU priority of a rendered ComputeClass, with `stock[(pod type, tier)]` slices
    (0 when not listed): e.g. {("v6e-16", "spot"): 1} gives spot one v6e 4x4 slice and the rest none."""
    name = compute_class["metadata"]["name"]
    pools = []
    for priority in compute_class.get("spec", {}).get("priorities", []):
        tpu = priority.get("tpu")
        if not tpu:
            continue
        shape = catalog.by_gke_labels(tpu["type"], tpu["topology"], int(tpu["count"]))
        tier = capacity.tier_of_priority(priority)
        specific = (priority.get("reservations") or {}).get("specific") or [{}]
        reservation = specific[0].get("name", "") if tier is capacity.RESERVATION else ""
        pools.append(SlicePool(name, shape, tier, stock.get((shape.pod_type, tier.key), 0), reservation))
    return pools
