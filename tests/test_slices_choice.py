"""The slice choice of ray_apps.slices without a Ray cluster: fake inventory views, shaped
like what Ray reports for GKE TPU hosts (labels it derives from the TPU env, a node's
total resources, and its available resources with a TPU entry that vanishes at 0).

test_slices.py keeps the real-cluster proof; these pin down the choice itself: prefer a
fully free slice, require the right host count and chips, follow the fallback order, and
fail at the deadline with every slice described.
"""

from __future__ import annotations

from typing import Any

import pytest

from ray_apps import slices
from ray_apps.slices import HostView, SliceView, choose_slice, label_matches

SPOT = {"ray.io/accelerator-type": "TPU-V6E", "ray.io/market-type": "spot"}
ON_DEMAND = {"ray.io/accelerator-type": "TPU-V6E", "ray.io/market-type": "on-demand"}
V5E_ANY = {"ray.io/accelerator-type": "TPU-V5LITEPOD"}
# v6e 4x4: 4 hosts x 4 chips (tpu-facts.md section 1).
V6E_4X4 = {"topology": "4x4", "hosts": 4, "chips_per_host": 4}


def host(
    slice_name: str,
    worker: int,
    *,
    used: float = 0,
    chips: float = 4,
    topology: str = "4x4",
    accelerator: str = "TPU-V6E",
    pod_type: str = "v6e-16",
    market: str = "spot",
    holders: tuple[str, ...] = (),
) -> HostView:
    labels = {
        "ray.io/tpu-slice-name": slice_name,
        "ray.io/tpu-worker-id": str(worker),
        "ray.io/tpu-topology": topology,
        "ray.io/tpu-pod-type": pod_type,
        "ray.io/accelerator-type": accelerator,
        "ray.io/market-type": market,
    }
    total = {"CPU": 8.0, "TPU": chips, f"accelerator_type:{accelerator}": 1.0, slice_name: 1.0}
    if worker == 0:
        total[f"TPU-{pod_type}-head"] = 1.0
    available = {"CPU": 8.0}
    if chips - used:  # Ray drops a resource from the available map when it reaches 0
        available["TPU"] = chips - used
    return HostView(f"node-{slice_name}-{worker}", slice_name, worker, labels, total, available, holders)


def a_slice(name: str, *, hosts: int = 4, busy: dict[int, float] | None = None, **kw: Any) -> SliceView:
    busy = busy or {}
    return SliceView(name, tuple(host(name, w, used=busy.get(w, 0), **kw) for w in range(hosts)))


def v5e(name: str, **kw: Any) -> SliceView:
    return a_slice(name, accelerator="TPU-V5LITEPOD", pod_type="v5litepod-16", market="on-demand", **kw)


# ---------------------------------------------------------------------------- label_matches


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"market": "spot"}, True),
        ({"market": "on-demand"}, False),
        ({"market": "!spot"}, False),
        ({"market": "!on-demand"}, True),
        ({"market": "in(on-demand,spot)"}, True),
        ({"market": "in(on-demand, spot)"}, True),  # spaces after commas are ignored
        ({"market": "in(on-demand)"}, False),
        ({"market": "!in(on-demand,spot)"}, False),
        ({"market": "!in(on-demand)"}, True),
        ({"zone": "a"}, False),  # a missing label equals nothing...
        ({"zone": "!a"}, True),  # ...and differs from everything
        ({"zone": "in(a,b)"}, False),
        ({"zone": "!in(a,b)"}, True),
        ({"market": "spot", "gen": "v6e"}, True),  # keys are ANDed
        ({"market": "spot", "gen": "v5e"}, False),
        ({"market": "in(spot"}, False),  # not an in() expression: compared as a plain value
        ({}, True),
    ],
)
def test_label_selector_semantics_match_rays(selector: dict[str, str], expected: bool) -> None:
    assert label_matches(selector, {"market": "spot", "gen": "v6e"}) is expected


# ---------------------------------------------------------------------------- host and slice state


def test_a_host_whose_tpu_entry_vanished_from_available_is_busy() -> None:
    h = host("s", 1, used=4)
    assert "TPU" not in h.available
    assert (h.tpu_free, h.free) == (0.0, False)


def test_a_host_with_some_chips_in_use_is_not_free() -> None:
    assert host("s", 1, used=1).free is False


def test_a_host_without_tpu_chips_is_never_free() -> None:
    assert host("s", 0, chips=0).free is False


def test_a_slice_is_free_only_when_every_host_is() -> None:
    assert a_slice("s").free is True
    assert a_slice("s", busy={3: 4}).free is False
    assert SliceView("empty", ()).free is False


def test_slice_labels_are_those_all_hosts_share() -> None:
    assert a_slice("v6e-spot-0").labels == {
        "ray.io/tpu-slice-name": "v6e-spot-0",
        "ray.io/tpu-topology": "4x4",
        "ray.io/tpu-pod-type": "v6e-16",
        "ray.io/accelerator-type": "TPU-V6E",
        "ray.io/market-type": "spot",
    }
    assert SliceView("empty", ()).labels == {}
    assert SliceView("empty", ()).topology == "?"


# ---------------------------------------------------------------------------- candidates


def test_candidates_keep_slices_of_the_topology_host_count_chips_and_selector() -> None:
    views = [
        a_slice("v6e-4x4"),
        a_slice("v6e-4x8", hosts=8, topology="4x8", pod_type="v6e-32"),
        a_slice("v6e-4x4-host-down", hosts=3),  # a preempted host leaves 3 of 4 alive
        a_slice("v6e-2x4-8t", hosts=4, chips=8),  # right count, wrong chips per host
        a_slice("v6e-on-demand", market="on-demand"),
    ]
    got = slices.candidates(views, SPOT, "4x4", 4, 4)
    assert [v.name for v in got] == ["v6e-4x4"]


def test_candidates_need_every_host_to_match_the_selector() -> None:
    mixed = SliceView("mixed", (*a_slice("mixed").hosts[:3], host("mixed", 3, market="on-demand")))
    assert slices.candidates([mixed], SPOT, "4x4", 4, 4) == []


def test_candidates_keep_busy_slices_of_the_right_shape() -> None:
    # candidates judges shape and labels; freedom is the caller's choice.
    assert [v.name for v in slices.candidates([a_slice("busy", busy={0: 4})], SPOT, "4x4", 4, 4)] == ["busy"]


# ---------------------------------------------------------------------------- choose_slice


def test_a_fully_free_slice_is_preferred_over_one_with_a_busy_host() -> None:
    views = [a_slice("v6e-spot-0", busy={3: 4}), a_slice("v6e-spot-1")]
    index, view = choose_slice(views, [SPOT], **V6E_4X4)
    assert (index, view.name) == (0, "v6e-spot-1")


def test_a_slice_with_one_chip_in_use_is_not_chosen() -> None:
    assert choose_slice([a_slice("v6e-spot-0", busy={2: 1})], [SPOT], **V6E_4X4) is None


def test_no_slice_is_chosen_when_every_slice_is_partly_busy() -> None:
    views = [a_slice("v6e-spot-0", busy={1: 4}), a_slice("v6e-spot-1", busy={2: 4})]
    assert choose_slice(views, [SPOT], **V6E_4X4) is None


def test_among_free_slices_the_first_by_inventory_order_is_chosen() -> None:
    index, view = choose_slice([a_slice("v6e-spot-0"), a_slice("v6e-spot-1")], [SPOT], **V6E_4X4)
    assert (index, view.name) == (0, "v6e-spot-0")


def test_the_first_selector_with_a_free_slice_wins_even_if_a_later_one_has_one_too() -> None:
    views = [v5e("v5e-od-0"), a_slice("v6e-spot-0")]
    index, view = choose_slice(views, [SPOT, V5E_ANY], **V6E_4X4)
    assert (index, view.name) == (0, "v6e-spot-0")


def test_a_selector_without_slices_is_skipped_for_the_next_one() -> None:
    index, view = choose_slice([a_slice("v6e-spot-0")], [ON_DEMAND, SPOT, V5E_ANY], **V6E_4X4)
    assert (index, view.name) == (1, "v6e-spot-0")


def test_falls_back_to_the_next_generation_when_no_v6e_slice_is_whole() -> None:
    views = [a_slice("v6e-spot-0", busy={0: 4}), a_slice("v6e-spot-1", busy={2: 4}), v5e("v5e-od-0")]
    index, view = choose_slice(views, [SPOT, ON_DEMAND, V5E_ANY], **V6E_4X4)
    assert (index, view.name) == (2, "v5e-od-0")


def test_a_slice_with_a_host_down_is_not_chosen() -> None:
    assert choose_slice([a_slice("v6e-spot-0", hosts=3)], [SPOT], **V6E_4X4) is None


def test_a_slice_with_the_wrong_chips_per_host_is_not_chosen() -> None:
    assert choose_slice([a_slice("v6e-spot-0", chips=8)], [SPOT], **V6E_4X4) is None


def test_a_slice_of_another_topology_is_not_chosen() -> None:
    views = [a_slice("v6e-spot-0", topology="2x4", pod_type="v6e-8")]
    assert choose_slice(views, [SPOT], **V6E_4X4) is None


def test_skipped_slices_are_passed_over() -> None:
    views = [a_slice("v6e-spot-0"), a_slice("v6e-spot-1")]
    index, view = choose_slice(views, [SPOT], **V6E_4X4, skip={"v6e-spot-0"})
    assert (index, view.name) == (0, "v6e-spot-1")


# ---------------------------------------------------------------------------- reserve_slice with a fake Ray


class FakePG(str):
    """A placement group handle: what reserve_slice waits on is its ready() reference."""

    def ready(self) -> str:
        return f"ready-{self}"


class FakeRay:
    """Stands in for the Ray calls reserve_slice makes; records the placement groups asked for."""

    def __init__(self, views: list[SliceView], grant: list[bool] | None = None) -> None:
        self.views = views
        self.grants = list(grant) if grant is not None else None
        self.groups: list[dict[str, Any]] = []
        self.removed: list[str] = []

    def placement_group(self, bundles: list[dict[str, float]], **kw: Any) -> FakePG:
        self.groups.append({"bundles": bundles, **kw})
        return FakePG(f"pg-{len(self.groups)}")

    def wait(self, refs: list[str], timeout: float) -> tuple[list[str], list[str]]:
        granted = self.grants.pop(0) if self.grants is not None else True
        return (refs, []) if granted else ([], refs)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeRay:
        monkeypatch.setattr(slices, "slice_inventory", lambda: self.views)
        monkeypatch.setattr(slices, "placement_group", self.placement_group)
        monkeypatch.setattr(slices, "remove_placement_group", self.removed.append)
        monkeypatch.setattr(slices, "_node_of_bundles", lambda pg: [f"{pg}-node-{i}" for i in range(4)])
        monkeypatch.setattr(slices.ray, "wait", self.wait)
        return self


def test_reserve_slice_asks_ray_for_the_whole_free_slice_one_bundle_per_tpu_worker(monkeypatch) -> None:
    ray = FakeRay([a_slice("v6e-spot-0", busy={3: 4}), a_slice("v6e-spot-1")]).install(monkeypatch)
    res = slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], bundle_resources={"CPU": 1})
    assert (res.slice_name, res.selector_index, res.hosts, res.topology) == ("v6e-spot-1", 0, 4, "4x4")
    (group,) = ray.groups
    assert group["bundles"] == [{"TPU": 4.0, "CPU": 1}] * 4
    assert group["strategy"] == "STRICT_SPREAD"
    assert group["bundle_label_selector"] == [
        {**SPOT, "ray.io/tpu-slice-name": "v6e-spot-1", "ray.io/tpu-worker-id": "0"},
        {**SPOT, "ray.io/tpu-slice-name": "v6e-spot-1", "ray.io/tpu-worker-id": "1"},
        {**SPOT, "ray.io/tpu-slice-name": "v6e-spot-1", "ray.io/tpu-worker-id": "2"},
        {**SPOT, "ray.io/tpu-slice-name": "v6e-spot-1", "ray.io/tpu-worker-id": "3"},
    ]
    assert res.node_ids == ["pg-1-node-0", "pg-1-node-1", "pg-1-node-2", "pg-1-node-3"]
    assert res.label_selector() == {"ray.io/tpu-slice-name": "v6e-spot-1"}
    assert res.labels["ray.io/market-type"] == "spot"
    assert ray.removed == []


def test_reserve_slice_selectors_inherit_the_requested_accelerator_type(monkeypatch) -> None:
    views = [v5e("v5e-od-0"), a_slice("v6e-od-0", market="on-demand")]
    ray = FakeRay(views).install(monkeypatch)
    res = slices.reserve_slice(
        "4x4", hosts=4, chips_per_host=4, selectors=[{"ray.io/market-type": "on-demand"}], accelerator_type="TPU-V6E"
    )
    assert (res.slice_name, res.selector) == ("v6e-od-0", ON_DEMAND)
    assert ray.groups[0]["bundle_label_selector"][0] == {
        **ON_DEMAND,
        "ray.io/tpu-slice-name": "v6e-od-0",
        "ray.io/tpu-worker-id": "0",
    }


def test_a_selector_naming_its_own_accelerator_keeps_it(monkeypatch) -> None:
    FakeRay([a_slice("v6e-spot-0"), v5e("v5e-od-0")]).install(monkeypatch)
    res = slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[V5E_ANY], accelerator_type="TPU-V6E")
    assert res.slice_name == "v5e-od-0"


def test_reserve_slice_gives_a_slice_up_when_ray_does_not_grant_it_and_takes_the_next(monkeypatch) -> None:
    ray = FakeRay([a_slice("v6e-spot-0"), a_slice("v6e-spot-1")], grant=[False, True]).install(monkeypatch)
    res = slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], attempt_timeout_s=60)
    assert res.slice_name == "v6e-spot-1"
    assert [g["bundle_label_selector"][0]["ray.io/tpu-slice-name"] for g in ray.groups] == ["v6e-spot-0", "v6e-spot-1"]
    assert ray.removed == ["pg-1"]  # the pending group is removed, or it would grab the slice later


def test_reserve_slice_raises_at_the_deadline_naming_every_slice(monkeypatch) -> None:
    views = [a_slice("v6e-spot-0", busy={1: 4}), a_slice("v6e-spot-1", busy={0: 4, 3: 4})]
    ray = FakeRay(views).install(monkeypatch)
    with pytest.raises(slices.SliceUnavailableError) as info:
        slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], deadline_s=0)
    assert ray.groups == []
    assert "v6e-spot-0 (TPU-V6E, 4x4, spot, 4 hosts): 1/4 hosts busy" in str(info.value)
    assert isinstance(info.value, TimeoutError)


# ---------------------------------------------------------------------------- _deadline_message


def test_deadline_message_describes_every_slice_its_occupants_and_why_it_was_not_taken() -> None:
    views = [
        a_slice("v6e-spot-0", busy={1: 4}, holders=()),
        SliceView(
            "v6e-spot-1",
            (
                host("v6e-spot-1", 0, used=4, holders=("placement group 'train' (CREATED)",)),
                host("v6e-spot-1", 1),
                host("v6e-spot-1", 2, used=2),
                host("v6e-spot-1", 3),
            ),
        ),
        v5e("v5e-od-0"),
        a_slice("v6e-4x8", hosts=8, topology="4x8", pod_type="v6e-32"),
    ]
    chain = [SPOT, {"ray.io/accelerator-type": "TPU-V6E"}]
    message = slices._deadline_message("4x4", 4, 4, chain, views, 1.5)
    assert message.splitlines() == [
        "no free TPU slice of topology 4x4 (4 hosts x 4 chips) within 1.5 s; selectors tried in order: "
        "{'ray.io/accelerator-type': 'TPU-V6E', 'ray.io/market-type': 'spot'}, {'ray.io/accelerator-type': 'TPU-V6E'}",
        "slices seen:",
        "  - v6e-spot-0 (TPU-V6E, 4x4, spot, 4 hosts): 1/4 hosts busy [worker 1: TPU 4/4 in use by a task or actor]"
        " (matches selector 0)",
        "  - v6e-spot-1 (TPU-V6E, 4x4, spot, 4 hosts): 2/4 hosts busy [worker 0: TPU 4/4 in use by placement group "
        "'train' (CREATED); worker 2: TPU 2/4 in use by a task or actor] (matches selector 0)",
        "  - v5e-od-0 (TPU-V5LITEPOD, 4x4, on-demand, 4 hosts): all free (no selector matches)",
        "  - v6e-4x8 (TPU-V6E, 4x8, spot, 8 hosts): all free (other shape)",
    ]


def test_deadline_message_says_when_no_node_is_a_tpu_slice() -> None:
    message = slices._deadline_message("4x4", 4, 4, [SPOT], [], 300)
    assert message.splitlines()[1:] == ["slices seen: none (no node has a ray.io/tpu-slice-name label)"]
    assert "within 300 s" in message.splitlines()[0]


def test_deadline_message_calls_a_slice_missing_a_host_another_shape() -> None:
    message = slices._deadline_message("4x4", 4, 4, [SPOT], [a_slice("v6e-spot-0", hosts=3)], 5)
    assert message.splitlines()[-1] == "  - v6e-spot-0 (TPU-V6E, 4x4, spot, 3 hosts): all free (other shape)"


def test_deadline_message_calls_a_slice_with_other_chips_per_host_unmatched() -> None:
    message = slices._deadline_message("4x4", 4, 4, [SPOT], [a_slice("v6e-spot-0", chips=8)], 5)
    assert message.splitlines()[-1] == "  - v6e-spot-0 (TPU-V6E, 4x4, spot, 4 hosts): all free (no selector matches)"


def test_a_slice_left_with_one_host_is_described_as_one_host() -> None:
    message = slices._deadline_message("4x4", 4, 4, [SPOT], [a_slice("v6e-spot-0", hosts=1)], 5)
    assert message.splitlines()[-1] == "  - v6e-spot-0 (TPU-V6E, 4x4, spot, 1 host): all free (other shape)"
