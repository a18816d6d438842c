"""The price snapshot (tpuray/data/prices.yaml): what one TPU chip-hour costs, by region,
generation and capacity tier, with where each figure comes from and when.

The shipped snapshot holds the prices Google publishes on https://cloud.google.com/tpu/pricing
(spot from https://cloud.google.com/spot-vms/pricing); `tpuray prices refresh` replaces it
with the Cloud Billing Catalog's SKUs (tpuray/cost/billing.py). A figure neither source gives is
`unknown` with its reason, never zero. Two published rules still bound some unknowns, and
this module is their only home:

- Spot: "discounts of up to 91% off of the corresponding default price for many machine
  types, GPUs, TPUs" (https://cloud.google.com/spot-vms/pricing). An unpublished spot price
  lies between 9% of the on-demand price and the on-demand price.
- Reservation: "You can only use a reservation for TPUs if you have a committed use
  discount (CUD)" (https://cloud.google.com/tpu/docs/consumption-options). An unpublished
  reservation rate lies between the 3-year and the 1-year commitment rate.
Flex-start has no published TPU figure and no published bound.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from tpuray import capacity
from tpuray.paths import DATA_DIR

PRICES_FILE = DATA_DIR / "prices.yaml"
COMMITMENTS = ("1-year", "3-year")
STALE_AFTER_DAYS = 90


@dataclass(frozen=True)
class Price:
    """USD per chip-hour. `value` None means unknown; `floor`/`ceiling` bound an unknown."""

    value: float | None
    source: str
    date: str | None = None
    note: str = ""
    floor: float | None = None
    ceiling: float | None = None

    @property
    def known(self) -> bool:
        return self.value is not None

    def as_json(self) -> dict[str, Any]:
        return {
            "perChipHour": self.value,
            "source": self.source,
            "date": self.date,
            "note": self.note,
            "floor": self.floor,
            "ceiling": self.ceiling,
        }


@cache
def snapshot() -> dict[str, Any]:
    return yaml.safe_load(PRICES_FILE.read_text())


def hours_per_month() -> int:
    return int(snapshot()["hours_per_month"])


def snapshot_date() -> dt.date:
    value = snapshot()["snapshot"]["date"]
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


def snapshot_source() -> str:
    return str(snapshot()["snapshot"]["source"])


def snapshot_age_days(today: dt.date | None = None) -> int:
    return ((today or dt.date.today()) - snapshot_date()).days


def age_text(today: dt.date | None = None) -> str:
    """'prices: <source>, snapshot 2024-12-20 (710 days old)', plus a warning past 90 days."""
    days = snapshot_age_days(today)
    text = f"prices: {snapshot_source()}, snapshot {snapshot_date().isoformat()} ({days} days old)"
    if days > STALE_AFTER_DAYS:
        text += f"; warning: older than {STALE_AFTER_DAYS} days, run `tpuray prices refresh`"
    return text


def _entry(region: str, generation: str, tier: str) -> Any:
    regions = snapshot()["regions"]
    if region not in regions:
        known = ", ".join(sorted(regions))
        return {"unknown": f"region {region} is not in the snapshot ({known}); run `tpuray prices refresh`"}
    return regions[region].get(generation, {}).get(tier, {"unknown": f"no {tier} price for {generation} in {region}"})


def listed_price(region: str, generation: str, tier: str) -> Price:
    """The snapshot's figure as written: a price with its source, or unknown with the reason."""
    entry = _entry(region, generation, tier)
    if "price" in entry:
        note = str(entry.get("note", ""))
        if entry.get("sku_id"):
            note = f"SKU {entry['sku_id']} {entry.get('description', '')}".strip() + (f"; {note}" if note else "")
        return Price(float(entry["price"]), str(entry["source"]), str(entry["date"]), note)
    return Price(None, "unknown", None, str(entry.get("unknown", "")))


def published_price(region: str, generation: str, tier: str, on_demand: float | None = None) -> Price:
    """The snapshot's figure, or for an unknown rate the published bounds of its tier (the tier's
    `price_bounds` in tpuray/capacity.py: spot from on-demand, a reservation from the commitments).
    `on_demand` (a stack's own on-demand rate) replaces the snapshot's in those bounds."""
    p = listed_price(region, generation, tier)
    bounds = next((t.price_bounds for t in capacity.TIERS if t.price_key == tier), None)
    if p.known or bounds is None:
        return p

    def rate(key: str) -> float | None:
        if key == capacity.default_tier().price_key and on_demand is not None:
            return on_demand
        return listed_price(region, generation, key).value

    low, high = rate(bounds.low), rate(bounds.high)
    if low is None or high is None:
        return p
    return Price(None, "unknown", None, f"{p.note}; {bounds.rule}", low * bounds.low_factor, high * bounds.high_factor)
