"""reserve_slice's clock and Ray calls without a Ray cluster, and the selector helpers.

A fake clock stands in for time.monotonic/time.sleep, so the polling interval, the deadline,
the attempt timeout and the rest given to a slice Ray did not grant are checked to the
quarter second. The inventory views are test_slices_choice.py's (shaped like Ray's report
of GKE TPU hosts); test_slices.py keeps the real-cluster proof.
"""

from __future__ import annotations

from typing import Any

import pytest

from ray_apps import slices
from ray_apps.slices import fallback_strategy, label_matches, tpu_host_selector, validate_selector
from tests.test_slices_choice import SPOT, FakeRay, a_slice, host


class FakeClock:
    """time.monotonic and time.sleep for ray_apps.slices: sleeping moves the clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, now: float = 1000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []
        monkeypatch.setattr(slices.time, "monotonic", lambda: self.now)
        monkeypatch.setattr(slices.time, "sleep", self.sleep)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class TimedRay(FakeRay):
    """FakeRay whose wait takes `grant_s` to grant, or its whole timeout to refuse, and
    which notes the clock at each placement group and each wait's timeout."""

    def __init__(self, clock: FakeClock, *args: Any, grant_s: float = 0.0, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.clock = clock
        self.grant_s = grant_s
        self.asked_at: list[float] = []
        self.timeouts: list[float] = []

    def placement_group(self, bundles: list[dict[str, float]], **kw: Any) -> Any:
        self.asked_at.append(self.clock.now)
        return super().placement_group(bundles, **kw)

    def wait(self, refs: list[str], timeout: float) -> tuple[list[str], list[str]]:
        self.timeouts.append(timeout)
        ready, pending = super().wait(refs, timeout)
        self.clock.now += self.grant_s if ready else timeout
        return ready, pending


BUSY = [a_slice("v6e-spot-0", busy={1: 4})]


def test_reserve_slice_polls_every_poll_s_and_stops_at_the_deadline(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    FakeRay(BUSY).install(monkeypatch)
    with pytest.raises(slices.SliceUnavailableError):
        slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], deadline_s=1, poll_s=0.25)
    assert clock.sleeps == [0.25, 0.25, 0.25, 0.25]
    assert clock.now == 1001.0


def test_reserve_slice_names_the_shape_it_waited_for(monkeypatch) -> None:
    FakeClock(monkeypatch)
    FakeRay(BUSY).install(monkeypatch)
    with pytest.raises(slices.SliceUnavailableError) as info:
        slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], deadline_s=0)
    assert str(info.value).splitlines()[0] == (
        "no free TPU slice of topology 4x4 (4 hosts x 4 chips) within 0 s; selectors tried in order: "
        "{'ray.io/accelerator-type': 'TPU-V6E', 'ray.io/market-type': 'spot'}"
    )


def test_reserve_slice_shortens_the_last_poll_to_the_deadline(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    FakeRay(BUSY).install(monkeypatch)
    with pytest.raises(slices.SliceUnavailableError):
        slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], deadline_s=0.625, poll_s=0.25)
    assert clock.sleeps == [0.25, 0.25, 0.125]


def test_reserve_slice_polls_every_quarter_second_for_300_s_by_default(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    FakeRay(BUSY).install(monkeypatch)
    with pytest.raises(slices.SliceUnavailableError, match="within 300 s"):
        slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT])
    assert set(clock.sleeps) == {0.25}
    assert clock.now == 1300.0


def test_reserve_slice_gives_ray_5_s_per_attempt_by_default(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    ray = TimedRay(clock, [a_slice("v6e-spot-0")]).install(monkeypatch)
    slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT])
    assert ray.timeouts == [5.0]


def test_an_attempt_never_waits_past_the_deadline(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    ray = TimedRay(clock, [a_slice("v6e-spot-0")]).install(monkeypatch)
    slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], deadline_s=2)
    assert ray.timeouts == [2.0]


def test_an_attempt_at_the_deadline_still_waits_50_ms(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    ray = TimedRay(clock, [a_slice("v6e-spot-0")]).install(monkeypatch)
    slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], deadline_s=0)
    assert ray.timeouts == [0.05]


def test_a_slice_ray_did_not_grant_rests_for_two_attempt_timeouts(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    ray = TimedRay(clock, [a_slice("v6e-spot-0")], grant=[False, True]).install(monkeypatch)
    res = slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], attempt_timeout_s=5, poll_s=0.25)
    # refused at 1005 (after its 5 s attempt), resting while 10 s or less have passed
    assert ray.asked_at == [1000.0, 1015.25]
    assert res.slice_name == "v6e-spot-0"


def test_the_reservation_records_the_time_ray_took_to_grant_it(monkeypatch) -> None:
    clock = FakeClock(monkeypatch)
    TimedRay(clock, [a_slice("v6e-spot-0")], grant_s=2.5).install(monkeypatch)
    res = slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT])
    assert res.waited_s == 2.5


def test_the_reservation_holds_the_placement_group_and_the_shape(monkeypatch) -> None:
    FakeClock(monkeypatch)
    FakeRay([a_slice("v6e-spot-0")]).install(monkeypatch)
    res = slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT])
    assert (res.placement_group, res.chips_per_host, res.bundle_indices) == ("pg-1", 4, [0, 1, 2, 3])


def test_the_placement_group_gets_the_name_and_lifetime_asked_for(monkeypatch) -> None:
    FakeClock(monkeypatch)
    ray = FakeRay([a_slice("v6e-spot-0")]).install(monkeypatch)
    slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT], name="train", lifetime="detached")
    assert (ray.groups[0]["name"], ray.groups[0]["lifetime"]) == ("train", "detached")


def test_the_placement_group_is_unnamed_and_owned_by_the_job_by_default(monkeypatch) -> None:
    FakeClock(monkeypatch)
    ray = FakeRay([a_slice("v6e-spot-0")]).install(monkeypatch)
    slices.reserve_slice("4x4", hosts=4, chips_per_host=4, selectors=[SPOT])
    assert (ray.groups[0]["name"], ray.groups[0]["lifetime"]) == ("", None)


# ---------------------------------------------------------------------------- candidates, in any order


def test_a_slice_of_another_shape_listed_first_does_not_hide_the_next() -> None:
    views = [a_slice("v6e-spot-3-hosts", hosts=3), a_slice("v6e-spot-0")]
    assert [v.name for v in slices.candidates(views, SPOT, "4x4", 4, 4)] == ["v6e-spot-0"]


def test_a_slice_of_other_chips_per_host_listed_first_does_not_hide_the_next() -> None:
    views = [a_slice("v6e-spot-8t", chips=8), a_slice("v6e-spot-0")]
    assert [v.name for v in slices.candidates(views, SPOT, "4x4", 4, 4)] == ["v6e-spot-0"]


# ---------------------------------------------------------------------------- label values


def test_the_first_value_of_an_in_list_counts() -> None:
    assert label_matches({"market": "in(spot,on-demand)"}, {"market": "spot"}) is True


def test_a_value_ending_in_a_parenthesis_is_compared_whole() -> None:
    assert label_matches({"market": "spot)"}, {"market": "spot)"}) is True


# ---------------------------------------------------------------------------- host descriptions


def test_a_free_host_is_described_as_free() -> None:
    assert host("v6e-spot-0", 2).describe() == "worker 2: free"


def test_a_busy_host_names_every_placement_group_holding_it() -> None:
    h = host("v6e-spot-0", 1, used=4, holders=("placement group 'a' (CREATED)", "placement group 'b' (CREATED)"))
    assert h.describe() == "worker 1: TPU 4/4 in use by placement group 'a' (CREATED), placement group 'b' (CREATED)"


def test_a_host_with_no_chips_is_described_without_a_holder() -> None:
    assert host("v6e-spot-0", 0, chips=0).describe() == "worker 0: TPU 0/0 in use"


# ---------------------------------------------------------------------------- selectors for other APIs


def test_tpu_host_selector_names_accelerator_market_and_slice() -> None:
    assert tpu_host_selector("TPU-V6E", market_type="spot", slice_name="v6e-spot-0") == {
        "ray.io/accelerator-type": "TPU-V6E",
        "ray.io/market-type": "spot",
        "ray.io/tpu-slice-name": "v6e-spot-0",
    }


def test_tpu_host_selector_without_arguments_matches_any_host() -> None:
    assert tpu_host_selector() == {}


def test_fallback_strategy_is_rays_list_of_label_selectors_in_order() -> None:
    assert fallback_strategy([SPOT, {"ray.io/accelerator-type": "TPU-V5LITEPOD"}]) == [
        {"label_selector": {"ray.io/accelerator-type": "TPU-V6E", "ray.io/market-type": "spot"}},
        {"label_selector": {"ray.io/accelerator-type": "TPU-V5LITEPOD"}},
    ]


def test_fallback_strategy_checks_each_selector() -> None:
    with pytest.raises(ValueError, match="lists no values"):
        fallback_strategy([SPOT, {"ray.io/market-type": "in()"}])


@pytest.mark.parametrize(
    "selector",
    [
        {"ray.io/market-type": "spot"},
        {"ray.io/market-type": "!spot"},
        {"ray.io/market-type": "in(spot,on-demand)"},
        {"ray.io/market-type": "!in(spot)"},
        {"ray.io/tpu-worker-id": "in(0)"},  # one value of one character
    ],
)
def test_validate_selector_returns_a_copy_of_a_valid_selector(selector: dict[str, str]) -> None:
    out = validate_selector(selector)
    assert out == selector
    assert out is not selector


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"": "spot"}, "label selector entries must be non-empty strings, got '': 'spot'"),
        ({"ray.io/market-type": ""}, "label selector entries must be non-empty strings, got 'ray.io/market-type': ''"),
        ({1: "spot"}, "label selector entries must be non-empty strings, got 1: 'spot'"),
        ({"ray.io/market-type": 1}, "label selector entries must be non-empty strings, got 'ray.io/market-type': 1"),
        ({"k": "!"}, "label selector value '!' for 'k': use 'v', '!v', 'in(a,b)' or '!in(a,b)'"),
        ({"k": "in(a"}, "label selector value 'in(a' for 'k': use 'v', '!v', 'in(a,b)' or '!in(a,b)'"),
        ({"k": "a)"}, "label selector value 'a)' for 'k': use 'v', '!v', 'in(a,b)' or '!in(a,b)'"),
        ({"k": "(a)"}, "label selector value '(a)' for 'k': use 'v', '!v', 'in(a,b)' or '!in(a,b)'"),
        ({"k": "in()"}, "label selector value 'in()' for 'k' lists no values"),
        ({"k": "!in( , )"}, "label selector value '!in( , )' for 'k' lists no values"),
    ],
)
def test_validate_selector_rejects_with_its_message(selector: dict[Any, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        validate_selector(selector)
    assert str(info.value) == message
