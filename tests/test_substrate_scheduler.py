"""The emulated GKE nodes and the scheduler stand-in (tpuray/local/substrate/nodes.py, scheduler.py),
on literal pods shaped as the KubeRay operator and the TPU webhook make them."""

from __future__ import annotations

import functools
from typing import Any

from conftest import mocked

from tpuray import capacity, catalog
from tpuray.local.substrate import nodes, scheduler
from tpuray.preview.render import manifests

V6E_4X4 = catalog.lookup("v6e", "4x4")
V5E_4X4 = catalog.lookup("v5e", "4x4")


@functools.cache
def prod_class(name: str = "v6e-train") -> dict[str, Any]:
    return next(o for o in manifests(mocked("prod")) if o["kind"] == "ComputeClass" and o["metadata"]["name"] == name)


def worker(replica: str, host: int, accelerator: str = "tpu-v6e-slice", spot_ok: bool = True) -> dict[str, Any]:
    """A TPU worker pod of prod's training group after the webhook: replicaIndex and TPU_WORKER_ID set."""
    tolerations = [
        {"key": "cloud.google.com/compute-class", "operator": "Equal", "value": "v6e-train", "effect": "NoSchedule"},
        {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    if spot_ok:
        tolerations.append(
            {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
        )
    return {
        "metadata": {
            "name": f"{replica}-worker-{host}",
            "namespace": "ray",
            "labels": {"ray.io/cluster": "c1", "ray.io/group": "g", "replicaIndex": replica},
        },
        "spec": {
            "nodeSelector": {
                "cloud.google.com/compute-class": "v6e-train",
                "cloud.google.com/gke-tpu-accelerator": accelerator,
                "cloud.google.com/gke-tpu-topology": "4x4",
            },
            "tolerations": tolerations,
            "containers": [
                {
                    "name": "ray-worker",
                    "resources": {"limits": {"google.com/tpu": "4"}},
                    "env": [{"name": "TPU_WORKER_ID", "value": str(host)}],
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def head() -> dict[str, Any]:
    return {
        "metadata": {"name": "c1-head", "namespace": "ray", "labels": {"ray.io/cluster": "c1"}},
        "spec": {"nodeSelector": {"tpuray.dev/pool": "ray-system"}, "containers": [{"name": "ray-head"}]},
        "status": {"phase": "Pending"},
    }


def pool_nodes(*pools: nodes.SlicePool) -> list[dict[str, Any]]:
    out = [nodes.system_node("ray-system")]
    for pool in pools:
        for i in range(pool.slices):
            out += nodes.slice_nodes(pool, i)
    return out


def test_a_spot_v6e_slice_has_one_node_per_host_with_gke_labels_and_taints() -> None:
    found = nodes.slice_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 1), 0)
    assert [n["metadata"]["name"] for n in found] == [f"gke-v6e-train-v6e-16-spot-0-{h}" for h in range(4)]
    assert found[2]["metadata"]["labels"] == {
        "cloud.google.com/gke-nodepool": "v6e-train-v6e-16-spot-0",
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        "node.kubernetes.io/instance-type": "ct6e-standard-4t",
        "cloud.google.com/compute-class": "v6e-train",
        "cloud.google.com/gke-spot": "true",
        "kubernetes.io/hostname": "gke-v6e-train-v6e-16-spot-0-2",
    }
    assert found[0]["spec"]["taints"] == [
        {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"},
        {"key": "cloud.google.com/compute-class", "value": "v6e-train", "effect": "NoSchedule"},
        {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"},
    ]
    assert found[0]["status"]["allocatable"]["google.com/tpu"] == "4"


def test_a_reservation_slice_records_its_reservation_and_has_no_spot_taint() -> None:
    (pool,) = [p for p in nodes.pools_for_class(prod_class(), {("v6e-16", "reservation"): 1}) if p.slices]
    node = nodes.slice_nodes(pool, 0)[0]
    assert node["metadata"]["annotations"] == {
        "tpuray.dev/emulated-tier": "reservation",
        "tpuray.dev/emulated-reservation": "acme-v6e-4x4-prod",
    }
    assert [t["key"] for t in node["spec"]["taints"]] == ["google.com/tpu", "cloud.google.com/compute-class"]


def test_the_scripted_stock_gives_each_priority_of_the_class_its_slices() -> None:
    pools = nodes.pools_for_class(prod_class(), {("v6e-16", "spot"): 1, ("v5litepod-16", "on-demand"): 2})
    assert [(p.shape.pod_type, p.tier.key, p.slices) for p in pools] == [
        ("v6e-16", "reservation", 0),
        ("v6e-16", "spot", 1),
        ("v6e-16", "on-demand", 0),
        ("v5litepod-16", "on-demand", 2),
    ]


def test_a_replica_is_not_bound_until_all_its_hosts_exist() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 1))
    bindings, stuck = scheduler.plan([worker("g-0", h) for h in range(3)], all_nodes, {"v6e-train": prod_class()})
    assert (bindings, stuck) == ([], [])


def test_all_hosts_of_a_replica_go_to_one_slice_host_i_on_node_i() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 2))
    pods = [worker("g-0", h) for h in (2, 0, 3, 1)]
    bindings, _ = scheduler.plan(pods, all_nodes, {"v6e-train": prod_class()})
    assert [(p["metadata"]["name"], n) for p, n in bindings] == [
        ("g-0-worker-0", "gke-v6e-train-v6e-16-spot-0-0"),
        ("g-0-worker-1", "gke-v6e-train-v6e-16-spot-0-1"),
        ("g-0-worker-2", "gke-v6e-train-v6e-16-spot-0-2"),
        ("g-0-worker-3", "gke-v6e-train-v6e-16-spot-0-3"),
    ]


def test_two_replicas_get_two_different_slices() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 2))
    pods = [worker(r, h) for r in ("g-0", "g-1") for h in range(4)]
    bindings, _ = scheduler.plan(pods, all_nodes, {"v6e-train": prod_class()})
    pools = {p["metadata"]["labels"]["replicaIndex"]: n.rsplit("-", 1)[0] for p, n in bindings}
    assert pools == {"g-0": "gke-v6e-train-v6e-16-spot-0", "g-1": "gke-v6e-train-v6e-16-spot-1"}


def test_the_first_priority_of_the_compute_class_with_a_free_slice_wins() -> None:
    all_nodes = pool_nodes(
        nodes.SlicePool("v6e-train", V6E_4X4, capacity.ON_DEMAND, 1),
        nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 1),
    )
    bindings, _ = scheduler.plan([worker("g-0", h) for h in range(4)], all_nodes, {"v6e-train": prod_class()})
    assert {n.rsplit("-", 1)[0] for _, n in bindings} == {"gke-v6e-train-v6e-16-spot-0"}


def test_a_v6e_replica_never_lands_on_a_v5e_slice_and_is_marked_unschedulable() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V5E_4X4, capacity.ON_DEMAND, 1))
    pods = [worker("g-0", h) for h in range(4)]
    bindings, stuck = scheduler.plan(pods, all_nodes, {"v6e-train": prod_class()})
    assert bindings == []
    assert [p["metadata"]["name"] for p in stuck] == [f"g-0-worker-{h}" for h in range(4)]


def test_a_pod_without_the_spot_toleration_is_not_bound_to_a_spot_slice() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 1))
    pods = [worker("g-0", h, spot_ok=False) for h in range(4)]
    bindings, stuck = scheduler.plan(pods, all_nodes, {"v6e-train": prod_class()})
    assert (bindings, len(stuck)) == ([], 4)


def test_a_slice_with_one_busy_host_takes_no_new_replica() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 1))
    running = worker("g-0", 0)
    running["spec"]["nodeName"] = "gke-v6e-train-v6e-16-spot-0-0"
    running["status"]["phase"] = "Running"
    bindings, stuck = scheduler.plan(
        [running, *(worker("g-1", h) for h in range(4))], all_nodes, {"v6e-train": prod_class()}
    )
    assert (bindings, len(stuck)) == ([], 4)


def test_a_head_pod_goes_to_the_system_pool_by_its_node_selector() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 1))
    bindings, _ = scheduler.plan([head()], all_nodes, {})
    assert [(p["metadata"]["name"], n) for p, n in bindings] == [("c1-head", "gke-ray-system-0")]


def _bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    return pod


def test_a_replaced_host_rejoins_its_replicas_slice_on_its_own_node() -> None:
    # Host 3's raylet failed and the operator recreated its pod: hosts 0-2 still run on slice 1.
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 2))
    survivors = [_bound(worker("g-1", h), f"gke-v6e-train-v6e-16-spot-1-{h}") for h in range(3)]
    bindings, stuck = scheduler.plan([*survivors, worker("g-1", 3)], all_nodes, {"v6e-train": prod_class()})
    assert ([(p["metadata"]["name"], n) for p, n in bindings], stuck) == (
        [("g-1-worker-3", "gke-v6e-train-v6e-16-spot-1-3")],
        [],
    )


def test_a_replaced_host_whose_slice_has_no_free_node_is_unschedulable() -> None:
    all_nodes = pool_nodes(nodes.SlicePool("v6e-train", V6E_4X4, capacity.SPOT, 2))
    pods = [_bound(worker("g-1", h), f"gke-v6e-train-v6e-16-spot-1-{h}") for h in range(3)]
    pods.append(_bound(worker("g-2", 0), "gke-v6e-train-v6e-16-spot-1-3"))
    bindings, stuck = scheduler.plan([*pods, worker("g-1", 3)], all_nodes, {"v6e-train": prod_class()})
    assert (bindings, [p["metadata"]["name"] for p in stuck]) == ([], ["g-1-worker-3"])
