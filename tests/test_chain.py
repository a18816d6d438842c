"""The training driver's walk down the capacity chain (ray_apps.chain), without a Ray cluster:
fake inventories shaped like what Ray reports for GKE TPU hosts, a fake clock, a recording
demand. test_chain_emulated.py proves the same on emulated slices."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from ray_apps import chain, contracts
from ray_apps.contracts import ShapeStep
from ray_apps.slices import HostView, SliceView

V6E = ShapeStep("TPU-V6E", "4x4", 4, 4)
V5E = ShapeStep("TPU-V5LITEPOD", "4x4", 4, 4)


def a_slice(
    name: str,
    *,
    accelerator: str = "TPU-V6E",
    pod_type: str = "v6e-16",
    tier: str = "spot",
    hosts_up: int = 4,
    busy: Sequence[int] = (),
) -> SliceView:
    hosts = []
    for worker in range(hosts_up):
        labels = {
            "ray.io/tpu-slice-name": name,
            "ray.io/tpu-worker-id": str(worker),
            "ray.io/tpu-topology": "4x4",
            "ray.io/tpu-pod-type": pod_type,
            "ray.io/accelerator-type": accelerator,
            "ray.io/market-type": "spot" if tier == "spot" else "on-demand",
            "tpuray.dev/capacity-tier": tier,
        }
        total = {"CPU": 8.0, "TPU": 4.0, **({f"TPU-{pod_type}-head": 1.0} if worker == 0 else {})}
        available = {"CPU": 8.0} if worker in busy else {"CPU": 8.0, "TPU": 4.0}
        hosts.append(HostView(f"{name}-{worker}", name, worker, labels, total, available))
    return SliceView(name, tuple(hosts))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Timeline:
    """The inventory Ray would report: `appear` lists (time, slice) that come up at that time."""

    def __init__(self, clock: FakeClock, *appear: tuple[float, SliceView]) -> None:
        self.clock, self.appear = clock, appear

    def __call__(self) -> list[SliceView]:
        return [view for at, view in self.appear if at <= self.clock.now]


class RecordingDemand:
    """A demand that is placed `placed_after` seconds after it is asked for (never by default)."""

    def __init__(self, clock: FakeClock | None = None, placed_after: float | None = None) -> None:
        self.events: list[str] = []
        self.clock, self.placed_after = clock, placed_after
        self.asked_at: float | None = None

    def ask(self, step: ShapeStep, num_slices: int) -> Any:
        self.events.append(f"ask {num_slices} x {step.to_flag()}")
        self.asked_at = self.clock.now if self.clock else 0.0
        return step.to_flag()

    def placed(self, handle: Any) -> bool:
        if self.clock is None or self.placed_after is None or self.asked_at is None:
            return False
        return self.clock.now - self.asked_at >= self.placed_after

    def cancel(self, handle: Any) -> None:
        self.events.append(f"cancel {handle}")
        self.asked_at = None


def walk(inventory: Any, clock: FakeClock, num_slices: int = 1, demand: Any = None) -> chain.ChainChoice:
    return chain.walk(
        [V6E, V5E],
        num_slices=num_slices,
        deadline_s=60,
        inventory=inventory,
        demand=demand,
        clock=clock,
        sleep=clock.sleep,
        poll_s=5,
    )


def test_the_first_shape_wins_when_its_slice_comes_up_before_the_deadline() -> None:
    clock = FakeClock()
    choice = walk(Timeline(clock, (30, a_slice("v6e-a", tier="on-demand"))), clock)
    assert (choice.step, choice.slices, choice.tier) == (V6E, ("v6e-a",), "on-demand")
    assert choice.tried[0].waited_s == 30


def test_the_fallback_shape_runs_when_the_first_gets_no_slice_in_time() -> None:
    clock = FakeClock()
    choice = walk(Timeline(clock, (0, a_slice("v5e-a", accelerator="TPU-V5LITEPOD", pod_type="v5litepod-16"))), clock)
    assert (choice.index, choice.step, choice.slices) == (1, V5E, ("v5e-a",))
    assert [t.granted for t in choice.tried] == [False, True]
    # The first step waited its whole deadline; the second found its slice at once.
    assert [t.waited_s for t in choice.tried] == [60, 0]


def test_a_slice_with_a_host_missing_is_no_slice() -> None:
    clock = FakeClock()
    partial = a_slice("v6e-a", hosts_up=3)
    v5e = a_slice("v5e-a", accelerator="TPU-V5LITEPOD", pod_type="v5litepod-16")
    assert walk(Timeline(clock, (0, partial), (0, v5e)), clock).step == V5E


def test_a_step_whose_hosts_are_joining_at_its_deadline_waits_a_deadline_after_the_first_joined() -> None:
    clock = FakeClock()
    # Two hosts of a v6e slice join at 50 s, the rest at 100 s: past the 60 s deadline, within
    # 60 s of the first host.
    inventory = Timeline(clock, (50, a_slice("v6e-a", hosts_up=2)), (100, a_slice("v6e-b")))
    choice = walk(inventory, clock)
    assert (choice.step, choice.slices) == (V6E, ("v6e-b",))
    assert choice.tried[0].waited_s == 100


def test_a_step_whose_hosts_keep_joining_still_gives_up_a_deadline_after_the_first_joined() -> None:
    clock = FakeClock()
    joining = Timeline(clock, (50, a_slice("v6e-a", hosts_up=1)), (100, a_slice("v6e-b", hosts_up=3)))
    with pytest.raises(chain.ChainExhaustedError) as raised:
        walk(joining, clock)
    assert "step 1: TPU-V6E 4x4 (4 hosts x 4 chips): no whole free slice within 110.0 s" in str(raised.value)


def test_a_busy_slice_of_the_first_shape_does_not_hold_the_driver_past_the_deadline() -> None:
    clock = FakeClock()
    busy = a_slice("v6e-a", busy=(2,))
    v5e = a_slice("v5e-a", accelerator="TPU-V5LITEPOD", pod_type="v5litepod-16", tier="on-demand")
    choice = walk(Timeline(clock, (0, busy), (0, v5e)), clock)
    assert (choice.step, choice.tier) == (V5E, "on-demand")
    assert "v6e-a (TPU-V6E, 4x4, spot, 4 hosts): 1/4 hosts busy" in choice.tried[0].seen


def test_multi_slice_needs_every_slice_whole_and_free() -> None:
    clock = FakeClock()
    inventory = Timeline(clock, (0, a_slice("v6e-a")), (45, a_slice("v6e-b", tier="on-demand")))
    choice = walk(inventory, clock, num_slices=2)
    assert (choice.step, choice.slices, choice.tier) == (V6E, ("v6e-a", "v6e-b"), "on-demand,spot")


def test_a_step_short_of_slices_asks_for_its_shape_and_gives_the_demand_back_before_the_next() -> None:
    clock, demand = FakeClock(), RecordingDemand()
    walk(Timeline(clock, (0, a_slice("v5e-a", accelerator="TPU-V5LITEPOD", pod_type="v5litepod-16"))), clock, 1, demand)
    # The v5e slice is already whole and free: its step takes it without asking.
    assert demand.events == ["ask 1 x TPU-V6E:4x4:4:4", "cancel TPU-V6E:4x4:4:4"]


class HeldSlice:
    """A v6e slice that comes up at `at` and reads busy while `demand` holds it (a placed
    placement group holds every host's chips)."""

    def __init__(self, clock: FakeClock, demand: RecordingDemand, at: float) -> None:
        self.clock, self.demand, self.at = clock, demand, at

    def __call__(self) -> list[SliceView]:
        if self.clock.now < self.at:
            return []
        return [a_slice("v6e-a", busy=range(4) if self.demand.placed("held") else ())]


def test_a_placed_demand_is_given_back_so_the_slices_it_holds_read_free() -> None:
    clock = FakeClock()
    demand = RecordingDemand(clock, placed_after=20)
    inventory = HeldSlice(clock, demand, at=20)
    choice = walk(inventory, clock, 1, demand)
    assert (choice.step, choice.slices) == (V6E, ("v6e-a",))
    assert demand.events == ["ask 1 x TPU-V6E:4x4:4:4", "cancel TPU-V6E:4x4:4:4"]
    assert choice.tried[0].waited_s == 25  # placed at 20 s, given back, read free at the next poll


def test_nothing_available_fails_at_the_deadline_naming_every_step() -> None:
    clock = FakeClock()
    with pytest.raises(chain.ChainExhaustedError) as raised:
        walk(Timeline(clock, (0, a_slice("v6e-a", hosts_up=2))), clock)
    assert str(raised.value) == (
        "no step of the capacity chain gave 1 whole free slice(s) within 60 s per step; tried 2 step(s):\n"
        "  - step 1: TPU-V6E 4x4 (4 hosts x 4 chips): no whole free slice within 60.0 s; 0 whole free of 1 needed; "
        "v6e-a (TPU-V6E, 4x4, spot, 2 hosts): all free\n"
        "  - step 2: TPU-V5LITEPOD 4x4 (4 hosts x 4 chips): no whole free slice within 60.0 s; "
        "no slice of this shape came up"
    )
    assert clock.now == 120


def test_the_tier_is_the_market_type_where_nodes_carry_no_tier_label() -> None:
    view = a_slice("v6e-a", tier="spot")
    stripped = SliceView(
        "v6e-a",
        tuple(
            HostView(
                h.node_id,
                h.slice_name,
                h.worker_id,
                {k: v for k, v in h.labels.items() if "tpuray" not in k},
                h.total,
                h.available,
            )
            for h in view.hosts
        ),
    )
    assert chain.tier_of(stripped) == "spot"


def test_the_rendered_fallback_flag_parses_into_the_chain() -> None:
    args = contracts.TrainArgs(
        data_uri="d",
        storage_uri="s",
        run_name="r",
        accelerator_type="TPU-V6E",
        topology="4x4",
        hosts_per_slice=4,
        chips_per_host=4,
        fallback_shapes="TPU-V5LITEPOD:4x4:4:4",
    )
    assert args.chain() == [V6E, V5E]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "TPU-V5LITEPOD:4x4:4",
            "--fallback-shapes step 1 is 'TPU-V5LITEPOD:4x4:4'; write ACCELERATOR:TOPOLOGY:HOSTS:CHIPS",
        ),
        ("TPU-V5LITEPOD:4x4:4:4,TPU-V4:2x2x4:four:4", "--fallback-shapes step 2 is 'TPU-V4:2x2x4:four:4'"),
        ("TPU-V5LITEPOD:4x4:0:4", "hosts and chips must be >= 1"),
    ],
)
def test_a_malformed_fallback_step_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        contracts.parse_shapes(text)
