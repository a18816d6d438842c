"""What a stack's TPU slice pools cost per hour and per month, at minimum and maximum scale.

Prices per chip-hour come from tpuray/data/prices.yaml (each figure with its source and
date) overridden by the stack's `tpuray:prices`. A price nobody published is `None`
(unknown) and stays unknown through every sum: nothing is silently priced at zero. Chip
counts come from the catalog (shape.chips); no TPU arithmetic happens here.

Scale, per pool (what the program builds, see infra/components/slice_pool.py):
- the node pools carry the chain's first tier: at minimum they hold every slice, except
  flex-start pools, which scale from zero;
- later tiers and cross-generation fallbacks are ComputeClass priorities GKE creates on
  demand: zero at minimum, every slice at maximum.
The stack total is the first (configured) tier of every pool; the other tiers are shown
per line so a reviewer sees what a fallback would cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tpuray import catalog
from tpuray.config import PRICE_TIERS, SlicePoolConfig, StackConfig, TierKind

PRICES_FILE = Path(__file__).resolve().parent / "data" / "prices.yaml"
CONFIG_SOURCE = "stack config (tpuray:prices)"
NO_SOURCE = "no public price"
# Not TPU chips, so outside this model; listed in every report so they are never taken as $0.
NOT_INCLUDED = (
    "GKE cluster management fee",
    "CPU node pool for Ray heads",
    "network egress, storage, load balancers",
)


@dataclass(frozen=True)
class Price:
    """USD per chip-hour of one generation in one tier; value None means unknown."""

    value: float | None
    source: str
    date: str | None = None
    note: str = ""

    @property
    def known(self) -> bool:
        return self.value is not None

    def as_json(self) -> dict[str, Any]:
        return {"perChipHour": self.value, "source": self.source, "date": self.date, "note": self.note}


@cache
def price_book() -> dict[str, Any]:
    return yaml.safe_load(PRICES_FILE.read_text())


def hours_per_month() -> int:
    return int(price_book()["hours_per_month"])


def published_price(generation: str, tier: str) -> Price:
    entry = price_book()["generations"].get(generation, {}).get(tier, "unknown")
    if not isinstance(entry, dict):  # `unknown`
        return Price(None, NO_SOURCE)
    return Price(float(entry["price"]), str(entry["source"]), str(entry["date"]), str(entry.get("note", "")))


def price(cfg: StackConfig, generation: str, tier: str) -> Price:
    """The price a stack pays: its own `tpuray:prices` first, then the published figure."""
    assert tier in PRICE_TIERS, tier
    override = cfg.prices.get(generation, {}).get(tier)
    if override is not None:
        return Price(float(override), CONFIG_SOURCE)
    return published_price(generation, tier)


@dataclass(frozen=True)
class CostLine:
    """One slice pool served by one capacity tier of one shape."""

    pool: str
    generation: str
    topology: str
    tier: str  # a PRICE_TIERS value
    role: str  # configured (the node pools' tier) | chain (a later tier) | fallback (another shape)
    chips_min: int
    chips_max: int
    price: Price
    on_demand: Price

    @staticmethod
    def _cost(chips: int, p: Price) -> float | None:
        if chips == 0:
            return 0.0  # nothing running costs nothing, whether or not the price is known
        return None if p.value is None else chips * p.value

    def hourly(self, scale: str) -> float | None:
        return self._cost(self.chips_min if scale == "min" else self.chips_max, self.price)

    def on_demand_hourly(self, scale: str) -> float | None:
        return self._cost(self.chips_min if scale == "min" else self.chips_max, self.on_demand)

    @property
    def label(self) -> str:
        return f"{self.pool} {self.generation} {self.topology} {self.tier}"

    def as_json(self) -> dict[str, Any]:
        hpm = hours_per_month()
        return {
            "pool": self.pool,
            "generation": self.generation,
            "topology": self.topology,
            "tier": self.tier,
            "role": self.role,
            "chips": {"min": self.chips_min, "max": self.chips_max},
            "price": self.price.as_json(),
            "onDemandPrice": self.on_demand.as_json(),
            "hourly": {s: self.hourly(s) for s in ("min", "max")},
            "monthly": {s: _times(self.hourly(s), hpm) for s in ("min", "max")},
            "onDemandHourly": {s: self.on_demand_hourly(s) for s in ("min", "max")},
        }


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


@dataclass(frozen=True)
class Total:
    """A sum that knows which of its parts were unknown. `value` is None if any was."""

    known: float
    unknown: tuple[str, ...] = ()

    @property
    def value(self) -> float | None:
        return None if self.unknown else self.known

    def as_json(self) -> dict[str, Any]:
        return {"value": self.value, "knownPart": self.known, "unknownParts": list(self.unknown)}


def _sum(parts: list[tuple[str, float | None]]) -> Total:
    return Total(
        known=sum(v for _, v in parts if v is not None),
        unknown=tuple(label for label, v in parts if v is None),
    )


@dataclass
class StackCost:
    stack: str
    lines: list[CostLine] = field(default_factory=list)

    def configured(self) -> list[CostLine]:
        return [line for line in self.lines if line.role == "configured"]

    def total(self, scale: str, on_demand: bool = False) -> Total:
        return _sum(
            [
                (line.label, line.on_demand_hourly(scale) if on_demand else line.hourly(scale))
                for line in self.configured()
            ]
        )

    def as_json(self) -> dict[str, Any]:
        hpm = hours_per_month()
        totals: dict[str, Any] = {}
        for scale in ("min", "max"):
            hourly, od = self.total(scale), self.total(scale, on_demand=True)
            totals[scale] = {
                "hourly": hourly.as_json(),
                "monthly": {**hourly.as_json(), "value": _times(hourly.value, hpm), "knownPart": hourly.known * hpm},
                "onDemandHourly": od.as_json(),
            }
        return {
            "currency": "USD",
            "hoursPerMonth": hpm,
            "lines": [line.as_json() for line in self.lines],
            "total": totals,
            "notIncluded": list(NOT_INCLUDED),
        }


def _tier_name(kind: TierKind) -> str:
    return kind.value  # TierKind values are the price file's tier names


def _pool_lines(cfg: StackConfig, pool: SlicePoolConfig) -> list[CostLine]:
    lines = []
    for index, tier in enumerate(pool.capacity):
        kind = tier.kind
        chips_max = pool.slices * pool.shape.chips
        # Only the node pools' own tier runs at minimum; flex-start node pools start at zero.
        first = index == 0
        chips_min = chips_max if first and kind is not TierKind.FLEX_START else 0
        lines.append(
            CostLine(
                pool=pool.name,
                generation=pool.generation,
                topology=pool.topology,
                tier=_tier_name(kind),
                role="configured" if first else "chain",
                chips_min=chips_min,
                chips_max=chips_max,
                price=price(cfg, pool.generation, _tier_name(kind)),
                on_demand=price(cfg, pool.generation, "on-demand"),
            )
        )
    for fb in pool.fallback:
        shape = catalog.lookup(fb.generation, fb.topology)
        for tier in fb.capacity:
            lines.append(
                CostLine(
                    pool=pool.name,
                    generation=fb.generation,
                    topology=fb.topology,
                    tier=_tier_name(tier.kind),
                    role="fallback",
                    chips_min=0,
                    chips_max=pool.slices * shape.chips,
                    price=price(cfg, fb.generation, _tier_name(tier.kind)),
                    on_demand=price(cfg, fb.generation, "on-demand"),
                )
            )
    return lines


def stack_cost(cfg: StackConfig) -> StackCost:
    cost = StackCost(stack=cfg.stack)
    for pool in cfg.slice_pools:
        cost.lines += _pool_lines(cfg, pool)
    return cost


# ---------------------------------------------------------------------------- formatting


def money(value: float | None, per: str = "h") -> str:
    if value is None:
        return "unknown"
    return f"${value:,.2f}/{per}" if value < 1000 else f"${value:,.0f}/{per}"


def total_text(total: Total, factor: float = 1.0, per: str = "h") -> str:
    """'$86.40/h', or 'unknown (≥ $43.20/h known; unknown: ...)' when a part is unknown."""
    if not total.unknown:
        return money(total.known * factor, per)
    if total.known:
        return f"unknown (≥ {money(total.known * factor, per)} known)"
    return "unknown"


def price_text(p: Price) -> str:
    if p.value is None:
        return "unknown"
    return f"${p.value:.2f}"


def cost_table(cost: StackCost) -> Any:
    """A rich Table of every line and the stack total (min and max scale, hour and month)."""
    from rich.table import Table  # imported here: the cost model itself needs no terminal

    hpm = hours_per_month()
    table = Table(title=f"cost: stack {cost.stack} (USD; TPU chips only; {hpm} h/month)")
    for column in (
        "pool",
        "shape",
        "tier",
        "chips min–max",
        "$/chip-h",
        "on-demand $/chip-h",
        "min $/h",
        "max $/h",
        "max $/month",
        "price source",
    ):
        table.add_column(column)
    for line in cost.lines:
        tier = line.tier + ("" if line.role == "configured" else f" ({line.role})")
        source = line.price.source + (f", {line.price.date}" if line.price.date else "")
        table.add_row(
            line.pool,
            f"{line.generation} {line.topology}",
            tier,
            f"{line.chips_min}–{line.chips_max}",
            price_text(line.price),
            price_text(line.on_demand),
            money(line.hourly("min")),
            money(line.hourly("max")),
            money(_times(line.hourly("max"), hpm), "mo"),
            source,
        )
    for scale in ("min", "max"):
        total = cost.total(scale)
        table.add_row(
            f"[bold]total at {scale} scale[/]", "", "configured tiers", "", "", "",
            total_text(total) if scale == "min" else "",
            total_text(total) if scale == "max" else "",
            total_text(total, hpm, "mo"),
            "on-demand: " + total_text(cost.total(scale, on_demand=True)),
        )  # fmt: skip
    table.caption = "not included: " + "; ".join(NOT_INCLUDED)
    return table
