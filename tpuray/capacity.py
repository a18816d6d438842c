"""Capacity tiers: one row per tier, and every module asks the table (as tpuray/catalog.py does
for TPU shapes; the same layout as xpk's core/capacity.py).

A row says everything the program needs to know about a tier:
- the stack config key of a `slicePools[].capacity[]` step (`spot: true`, `flexStart: true`);
- the GKE node pool `node_config` fragment (pulumi_gcp snake_case names) and the ComputeClass
  priority fragment (cloud.google.com/v1 ComputeClass `spec.priorities[]`);
- the node label GKE puts on that tier's nodes (which no worker group selects: a pod pinned to a
  tier never falls down the ComputeClass, docs/capacity.md; the policies flag such a pin), and
  whether those nodes are tainted (Spot: `cloud.google.com/gke-spot=true:NoSchedule`, which
  TPU worker pods tolerate);
- Ray's `ray.io/market-type` for the tier (Ray knows `spot` and `on-demand` only);
- whether its node pools scale from zero (flex-start capacity arrives through the autoscaler)
  and run GKE auto-repair;
- the tier's name in prices (`tpuray:prices`, tpuray/prices.yaml) and labels, and its display name.

Reading the rendered objects back (preview's key inputs, the ComputeClass description, the
policies) goes through `tier_of_node_config` / `tier_of_priority`: the first row whose marker the
object carries, else the default tier (on-demand, which has no marker of its own).

Adding a tier is one row here (its stack config key, with its documentation, is generated from
the row: tpuray/config/pools.py), plus its prices (tpuray/data/prices.yaml or a stack's
tpuray:prices); tests/test_one_home.py adds a made-up one in a copy of the sources and follows it
into the config, the generated docs, the preview, the ComputeClass, the worker groups, the cost
table and the emulator.

Sources: Spot node pools and the gke-spot label and taint:
https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms ; flex-start:
https://cloud.google.com/kubernetes-engine/docs/concepts/dws ; consuming a specific
reservation (key compute.googleapis.com/reservation-name; no pod selects a tier's node label,
docs/capacity.md, so no GKE label of a reservation's nodes is relied on): https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations ;
ComputeClass priorities: https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tpuray import labels

# GKE waits this long for TPU capacity of one flex-start priority before trying the next.
CAPACITY_CHECK_WAIT_SECONDS = 600


class Reservation(Protocol):
    """What a reservation tier needs of its config (tpuray.config.ReservationRef)."""

    name: str
    project: str | None


@dataclass(frozen=True)
class PriceBounds:
    """The published bounds of a tier's rate when no price is listed for it: between
    `low_factor` x the `low` tier's listed rate and `high_factor` x the `high` tier's."""

    low: str  # a price key: a tier's, or a commitment's (tpuray.cost.pricebook.COMMITMENTS)
    low_factor: float
    high: str
    high_factor: float
    rule: str  # the published rule, with its source, as the cost table prints it


# https://cloud.google.com/spot-vms/pricing: Spot VMs are "up to 91% off" on-demand.
SPOT_MAX_DISCOUNT = 0.91
SPOT_BOUNDS = PriceBounds(
    "on-demand", 1 - SPOT_MAX_DISCOUNT, "on-demand", 1.0,
    "spot is 9-100% of on-demand (cloud.google.com/spot-vms/pricing: up to 91% off)",
)  # fmt: skip
# https://cloud.google.com/tpu/docs/consumption-options: a TPU reservation needs a committed use discount.
RESERVATION_BOUNDS = PriceBounds(
    "3-year", 1.0, "1-year", 1.0,
    "a TPU reservation needs a CUD (cloud.google.com/tpu/docs/consumption-options): "
    "between the 3-year and the 1-year commitment rate",
)  # fmt: skip


@dataclass(frozen=True)
class Tier:
    key: str  # label value, price key, TierKind value: spot | reservation | on-demand | flex-start
    config_key: str  # the stack config key: spot | reservation | onDemand | flexStart
    field: str  # the CapacityTier attribute that holds it (generated from this row: config/pools.py)
    display: str  # how the preview and the ComputeClass description name it
    market_type: str  # Ray's ray.io/market-type value
    # The stack config key's documentation (docs/configuration.md is generated from it), its place
    # among a capacity step's keys (messages and docs list them in this order), and whether the
    # key names a reservation ({reservation: {name, project}}) or is a flag (spot: true).
    config_description: str = ""
    config_rank: int = 100
    names_reservation: bool = False
    from_zero: bool = False  # node pools start at zero nodes and autoscale up
    auto_repair: bool = True
    gke_feature: str | None = None  # the GKE feature (tpuray/checks/gke_versions.py FLOORS) a cluster needs for it
    # GKE node label of the tier's nodes, value "true" (None: none tpuray relies on).
    node_label: str | None = None
    tainted: bool = False  # the node label is also a NoSchedule taint pods must tolerate
    # Fragments: node_config (snake_case, as infra passes it) and ComputeClass priority.
    node_config: Callable[[Reservation | None, str], dict[str, Any]] = lambda _ref, _project: {}
    priority: Callable[[Reservation | None], dict[str, Any]] = lambda _ref: {}
    # What marks the tier in a rendered NodePool's nodeConfig / a ComputeClass priority
    # (camelCase wire names; a nested dict matches a subset). None: the default tier.
    node_config_marker: dict[str, Any] | None = None
    priority_marker: dict[str, Any] | None = None
    # The reservation a rendered object names, after the display name ("reservation prod-v6e").
    node_config_detail: Callable[[dict[str, Any]], str] | None = None
    priority_detail: Callable[[dict[str, Any]], str] | None = None
    # Prices: the bounds of an unlisted rate, and how Cloud Billing names the tier's SKUs
    # (Category.usageType, then words of the description; tpuray/cost/billing.py).
    price_bounds: PriceBounds | None = None
    sku_usage_types: tuple[str, ...] = ()
    sku_words: tuple[str, ...] = ()

    @property
    def price_key(self) -> str:
        return self.key

    @property
    def is_default(self) -> bool:
        return self.priority_marker is None

    def describe_node_config(self, node_config: dict[str, Any]) -> str:
        """How the preview names a rendered NodePool's tier."""
        return (
            self.display
            if self.node_config_detail is None
            else f"{self.display} {self.node_config_detail(node_config)}"
        )

    def describe_priority(self, priority: dict[str, Any]) -> str:
        """How a ComputeClass description names a priority's tier."""
        return self.display if self.priority_detail is None else f"{self.display} {self.priority_detail(priority)}"


def _reservation_node_config(ref: Reservation | None, project: str) -> dict[str, Any]:
    assert ref is not None
    name = ref.name
    if ref.project and ref.project != project:
        name = f"projects/{ref.project}/reservations/{name}"  # a shared reservation: its full path
    return {
        "reservation_affinity": {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": labels.RESERVATION_AFFINITY_KEY,
            "values": [name],
        }
    }


def _reservation_priority(ref: Reservation | None) -> dict[str, Any]:
    assert ref is not None
    specific: dict[str, Any] = {"name": ref.name}
    if ref.project:
        specific["project"] = ref.project
    # Specific reservations only: AnyBestEffort would silently fall to on-demand.
    return {"reservations": {"affinity": "Specific", "specific": [specific]}}


SPOT = Tier(
    key="spot",
    config_key="spot",
    field="spot",
    display="spot",
    market_type="spot",
    config_description="Spot VMs (may be preempted)",
    config_rank=0,
    node_label=labels.GKE_SPOT,
    tainted=True,
    node_config=lambda _ref, _project: {"spot": True},
    priority=lambda _ref: {"spot": True},
    node_config_marker={"spot": True},
    priority_marker={"spot": True},
    price_bounds=SPOT_BOUNDS,
    sku_usage_types=("Preemptible",),
    sku_words=("preemptible", "spot"),
)
RESERVATION = Tier(
    key="reservation",
    config_key="reservation",
    field="reservation",
    display="reservation",
    market_type="on-demand",
    config_description="a specific Compute Engine reservation",
    config_rank=1,
    names_reservation=True,
    node_config=_reservation_node_config,
    priority=_reservation_priority,
    node_config_marker={"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION"}},
    priority_marker={"reservations": {"affinity": "Specific"}},
    node_config_detail=lambda nc: ",".join((nc.get("reservationAffinity") or {}).get("values") or []),
    priority_detail=lambda p: p["reservations"]["specific"][0]["name"],
    price_bounds=RESERVATION_BOUNDS,
)
ON_DEMAND = Tier(
    key="on-demand",
    config_key="onDemand",
    field="on_demand",
    display="on-demand",
    market_type="on-demand",
    config_description="on-demand VMs",
    config_rank=2,
    priority=lambda _ref: {"spot": False, "reservations": {"affinity": "None"}},
    sku_usage_types=("OnDemand",),
)
FLEX_START = Tier(
    key="flex-start",
    config_key="flexStart",
    field="flex_start",
    display="flex-start",
    market_type="on-demand",
    config_description="flex-start (DWS): node pools scale from zero",
    config_rank=3,
    from_zero=True,
    auto_repair=False,
    gke_feature="flex-start for TPUs",
    node_label=labels.GKE_FLEX_START,
    node_config=lambda _ref, _project: {
        "flex_start": True,
        "reservation_affinity": {"consume_reservation_type": "NO_RESERVATION"},
    },
    priority=lambda _ref: {"flexStart": {"enabled": True}, "capacityCheckWaitTimeSeconds": CAPACITY_CHECK_WAIT_SECONDS},
    node_config_marker={"flexStart": True},
    priority_marker={"flexStart": {}},
    sku_words=("flex start", "flex-start", "dws"),
)

# Reading a rendered object back tries the rows in this order; the default tier comes last. Its
# labels are excluded in this order too. Messages list the tiers in the config schema's order
# (config_rank: tpuray.config.CapacityTier's fields are generated from these rows), which
# price_keys() follows after the default tier.
TIERS: list[Tier] = [SPOT, FLEX_START, RESERVATION, ON_DEMAND]


def tiers() -> list[Tier]:
    return list(TIERS)


def by_key(key: str) -> Tier:
    for tier in TIERS:
        if tier.key == key:
            return tier
    raise KeyError(key)


def tier_of_sku(usage_type: str, description: str) -> Tier | None:
    """The tier a Cloud Billing SKU prices: by its usage type or a word of its description, in
    table order (a "Spot Preemptible" SKU is spot before anything else); None if no row claims it."""
    text = description.lower()
    for tier in TIERS:
        if usage_type in tier.sku_usage_types or any(word in text for word in tier.sku_words):
            return tier
    return None


def default_tier() -> Tier:
    return next(t for t in TIERS if t.is_default)


def _carries(whole: Any, part: Any) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _carries(whole[k], v) for k, v in part.items())
    if isinstance(part, bool) or isinstance(whole, bool):
        return whole is part  # `spot: 1` is not `spot: true`
    return whole == part  # 600 and the engine's 600.0 alike


def tier_of_node_config(node_config: dict[str, Any]) -> Tier:
    """The tier a rendered NodePool's nodeConfig (camelCase) expresses."""
    for tier in TIERS:
        if tier.node_config_marker is not None and _carries(node_config, tier.node_config_marker):
            return tier
    return default_tier()


def tier_of_priority(priority: dict[str, Any]) -> Tier:
    """The tier a ComputeClass priority expresses."""
    for tier in TIERS:
        if tier.priority_marker is not None and _carries(priority, tier.priority_marker):
            return tier
    return default_tier()


def toleration(tier: Tier) -> dict[str, str] | None:
    if not tier.tainted:
        return None
    assert tier.node_label is not None
    return {"key": tier.node_label, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
