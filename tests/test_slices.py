"""Slice-atomic scheduling (ray_apps.slices) on a real emulated cluster.

One cluster for the whole module (started once, ~40 s on 2 cores):
  v6e-spot-0, v6e-spot-1: v6e 4x4 (4 hosts x 4 chips), market spot
  v5e-od-0:               v5e 4x4 (4 hosts x 4 chips), market on-demand
Hosts are made busy with one-bundle placement groups pinned to a host by label, which
hold the host's TPU exactly as a running gang would, but start no process.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from tests.ray_fixtures import connected_emulator
from tpuray import catalog
from tpuray.emulator import EmulatedCluster, SliceSpec, plan_for

pytestmark = pytest.mark.slow

V6E = catalog.lookup("v6e", "4x4")
V5E = catalog.lookup("v5e", "4x4")
V6E_SLICES = ["v6e-spot-0", "v6e-spot-1"]
TOPOLOGY = V6E.topology
SHAPE = {"hosts": V6E.hosts, "chips_per_host": V6E.chips_per_host}
SPOT = {"ray.io/accelerator-type": V6E.ray_accelerator_type, "ray.io/market-type": "spot"}
ON_DEMAND = {"ray.io/accelerator-type": V6E.ray_accelerator_type, "ray.io/market-type": "on-demand"}
V5E_ANY = {"ray.io/accelerator-type": V5E.ray_accelerator_type}


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    specs = [SliceSpec(name, "v6e-spot", V6E, "spot") for name in V6E_SLICES]
    specs.append(SliceSpec("v5e-od-0", "v5e-od", V5E, "on-demand"))
    with connected_emulator(plan_for(specs), "tprs-", "test-slices") as emu:
        yield emu


@pytest.fixture
def slices(cluster: EmulatedCluster):
    """ray_apps.slices, with every placement group made by a test removed afterwards."""
    import ray
    from ray.util.placement_group import remove_placement_group

    from ray_apps import slices as mod

    yield mod
    for pg_id, info in ray.util.placement_group_table().items():
        if info["state"] != "REMOVED":
            remove_placement_group(ray.util.placement_group.PlacementGroup(ray.PlacementGroupID.from_hex(pg_id)))
    _wait_view(mod, set())


def _busy(hosts: set[tuple[str, int]]) -> list:
    """Hold the TPU of each (slice, worker) host with a pinned one-bundle placement group."""
    import ray
    from ray.util.placement_group import placement_group

    pgs = [
        placement_group(
            [{"TPU": 4}],
            name=f"busy-{s}-w{w}",
            bundle_label_selector=[{"ray.io/tpu-slice-name": s, "ray.io/tpu-worker-id": str(w)}],
        )
        for s, w in sorted(hosts)
    ]
    ready, _ = ray.wait([pg.ready() for pg in pgs], num_returns=len(pgs), timeout=30)
    assert len(ready) == len(pgs)
    return pgs


def _wait_view(mod, busy: set[tuple[str, int]], timeout: float = 10.0) -> None:
    """Wait until the resource view Ray publishes shows exactly `busy` as busy hosts, so
    each trial starts from a known state (the view lags PG creation/removal a little)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = {(h.slice_name, h.worker_id) for v in mod.slice_inventory() for h in v.hosts if not h.free}
        if seen == busy or time.monotonic() > deadline:
            assert seen == busy
            return
        time.sleep(0.05)


def _slice_of_node(node_id: str) -> str:
    import ray

    return next(n["Labels"].get("ray.io/tpu-slice-name", "") for n in ray.nodes() if n["NodeID"] == node_id)


def _release(pgs: list) -> None:
    from ray.util.placement_group import remove_placement_group

    for pg in pgs:
        remove_placement_group(pg)


# ---------------------------------------------------------------------------- emulated hosts = GKE hosts


def test_emulated_host_labels_and_resources_match_gke(cluster: EmulatedCluster) -> None:
    import ray

    nodes = [n for n in ray.nodes() if n["Alive"] and "ray.io/tpu-slice-name" in n["Labels"]]
    assert len(nodes) == sum(s.shape.hosts for s in cluster.slices)
    by_slice = {s.name: s for s in cluster.slices}
    seen: dict[str, set[int]] = {}
    for node in nodes:
        labels, res = node["Labels"], node["Resources"]
        spec = by_slice[labels["ray.io/tpu-slice-name"]]
        shape = spec.shape
        worker = int(labels["ray.io/tpu-worker-id"])
        seen.setdefault(spec.name, set()).add(worker)
        # What Ray derives on a GKE TPU pod of this shape.
        assert labels["ray.io/tpu-topology"] == shape.topology
        assert labels["ray.io/tpu-pod-type"] == shape.pod_type
        assert labels["ray.io/accelerator-type"] == shape.ray_accelerator_type
        assert labels["ray.io/market-type"] == spec.market_type
        assert res["TPU"] == shape.chips_per_host
        assert res[f"accelerator_type:{shape.ray_accelerator_type}"] == 1
        assert res[spec.name] == 1  # Ray's per-slice resource named after TPU_NAME
        assert (shape.head_resource in res) == (worker == 0)
        assert node["NodeManagerAddress"] == "127.0.0.1"
    assert seen == {s.name: set(range(s.shape.hosts)) for s in cluster.slices}
    assert V6E.head_resource == "TPU-v6e-16-head"


# ---------------------------------------------------------------------------- the hang, reproduced


def test_naive_gangs_span_slices(slices) -> None:
    """One busy host per v6e slice: plain Ray splits a 4-host gang over both slices."""
    import ray
    from ray.util.placement_group import placement_group

    busy = {("v6e-spot-0", 1), ("v6e-spot-1", 2)}
    held = _busy(busy)
    _wait_view(slices, busy)
    v6e_bundle = {"TPU": 4, f"accelerator_type:{V6E.ray_accelerator_type}": 0.001}

    pg = placement_group([dict(v6e_bundle)] * 4, strategy="STRICT_SPREAD", name="naive-strict-spread")
    assert ray.wait([pg.ready()], timeout=20)[0], "the naive placement group should be placed (split)"
    nodes = ray.util.placement_group_table(pg)["bundles_to_node_id"].values()
    assert len({_slice_of_node(n) for n in nodes}) == 2
    _release([pg])

    @ray.remote(num_cpus=0, resources=v6e_bundle)
    class Host:
        def where(self) -> str:
            import os

            return os.environ["TPU_NAME"]  # the env the webhook gives the pod

    actors = [Host.remote() for _ in range(4)]
    where = ray.get([a.where.remote() for a in actors], timeout=60)
    assert len(set(where)) == 2, where
    for a in actors:
        ray.kill(a)

    # Ours, in the same setting: no v6e slice is whole, so it refuses instead of splitting.
    with pytest.raises(slices.SliceUnavailableError):
        slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT], deadline_s=0.5)
    _release(held)


# ---------------------------------------------------------------------------- ours never splits


def test_gang_never_spans_slices_under_contention(slices) -> None:
    rng = random.Random(1234)
    hosts = [(s, w) for s in V6E_SLICES for w in range(V6E.hosts)]
    placed = refused = 0
    for _ in range(60):
        busy = set(rng.sample(hosts, rng.randint(0, 3)))
        held = _busy(busy)
        _wait_view(slices, busy)
        free_slices = {s for s in V6E_SLICES if not any(b[0] == s for b in busy)}
        try:
            res = slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT], deadline_s=0.3, attempt_timeout_s=2)
        except slices.SliceUnavailableError:
            assert not free_slices, f"refused although {free_slices} was free (busy: {sorted(busy)})"
            refused += 1
        else:
            on = {_slice_of_node(n) for n in res.node_ids}
            assert on == {res.slice_name}, f"gang spans {on}"
            assert res.slice_name in free_slices
            res.release()
            placed += 1
        _release(held)
        _wait_view(slices, set())
    assert placed > 10 and refused > 10  # both branches exercised


def test_prefers_fully_free_slice_over_one_with_free_worker_0(slices) -> None:
    """SlicePlacementGroup's head claim can land on v6e-spot-0 (worker 0 free, worker 3
    busy) and wait there; ours goes to the fully free v6e-spot-1 at once."""
    held = _busy({("v6e-spot-0", 3)})
    _wait_view(slices, {("v6e-spot-0", 3)})
    with slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT], deadline_s=5) as res:
        assert res.slice_name == "v6e-spot-1"
    _release(held)


def test_bundle_i_is_tpu_worker_i(slices) -> None:
    import ray

    with slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT], bundle_resources={"CPU": 1}, deadline_s=10) as res:

        @ray.remote(num_cpus=1, resources={"TPU": 4})
        def whoami() -> tuple[str, str]:
            import os

            return os.environ["TPU_NAME"], os.environ["TPU_WORKER_ID"]

        got = ray.get(
            [whoami.options(scheduling_strategy=res.strategy(i)).remote() for i in res.bundle_indices], timeout=60
        )
        assert got == [(res.slice_name, str(i)) for i in res.bundle_indices]
        assert res.bundle_label_selectors()[2] == {"ray.io/tpu-slice-name": res.slice_name, "ray.io/tpu-worker-id": "2"}
    res.release()  # idempotent after the context manager released it


# ---------------------------------------------------------------------------- fallback chains


def test_fallback_first_matching_selector_wins(slices) -> None:
    with slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT, V5E_ANY], deadline_s=5) as res:
        assert (res.selector_index, res.labels["ray.io/accelerator-type"]) == (0, "TPU-V6E")


def test_fallback_skips_selector_without_slices(slices) -> None:
    with slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[ON_DEMAND, SPOT, V5E_ANY], deadline_s=5) as res:
        assert res.selector_index == 1
        assert res.labels["ray.io/market-type"] == "spot"


def test_fallback_to_next_generation_when_no_slice_is_free(slices) -> None:
    busy = {("v6e-spot-0", 0), ("v6e-spot-1", 2)}
    held = _busy(busy)
    _wait_view(slices, busy)
    with slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT, ON_DEMAND, V5E_ANY], deadline_s=5) as res:
        assert res.selector_index == 2
        assert res.slice_name == "v5e-od-0"
        assert {_slice_of_node(n) for n in res.node_ids} == {"v5e-od-0"}
    _release(held)


# ---------------------------------------------------------------------------- deadline


def test_deadline_error_names_topology_slices_and_occupants(slices) -> None:
    busy = {("v6e-spot-0", 1), ("v6e-spot-1", 0), ("v6e-spot-1", 3)}
    held = _busy(busy)
    _wait_view(slices, busy)
    t0 = time.monotonic()
    with pytest.raises(slices.SliceUnavailableError) as info:
        slices.reserve_slice(TOPOLOGY, **SHAPE, selectors=[SPOT], deadline_s=1.5)
    elapsed = time.monotonic() - t0
    assert elapsed >= 1.5  # it waited for the deadline (upper bound left loose: shared 2-core machine)
    assert elapsed < 30
    msg = str(info.value)
    assert "topology 4x4" in msg and "4 hosts x 4 chips" in msg
    assert "v6e-spot-0 (TPU-V6E, 4x4, spot, 4 hosts): 1/4 hosts busy" in msg
    assert "v6e-spot-1 (TPU-V6E, 4x4, spot, 4 hosts): 2/4 hosts busy" in msg
    assert "worker 1: TPU 4/4 in use by placement group 'busy-v6e-spot-0-w1'" in msg
    assert "'busy-v6e-spot-1-w3'" in msg
    assert "v5e-od-0 (TPU-V5LITEPOD, 4x4, on-demand, 4 hosts): all free (no selector matches)" in msg
    _release(held)


def test_label_selector_semantics(slices) -> None:
    labels = {"a": "x", "b": "y"}
    assert slices.label_matches({"a": "x"}, labels)
    assert not slices.label_matches({"a": "!x"}, labels)
    assert slices.label_matches({"a": "in(z,x)", "b": "!in(q)"}, labels)
    assert not slices.label_matches({"c": "x"}, labels)
    assert slices.label_matches({"c": "!x"}, labels)
