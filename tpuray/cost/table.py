"""What a stack's TPU slice pools cost per hour and per month, at minimum and maximum scale.

Prices per chip-hour come from the dated snapshot tpuray/data/prices.yaml (tpuray/cost/pricebook.py,
each figure with its source and date) overridden by the stack's `tpuray:prices`. A price
nobody published is unknown and is never priced at zero: where a published rule bounds it
(spot, reservation) the sums carry its floor and say "at least". Chip counts come from the
catalog (shape.chips); no TPU arithmetic happens here.

Scale, per pool (what the program builds, see infra/components/slice_pool.py):
- the node pools carry the chain's first tier: at minimum they hold every slice, except
  flex-start pools, which scale from zero;
- later tiers and cross-generation fallbacks are ComputeClass priorities GKE creates on
  demand: zero at minimum, every slice at maximum.

The stack's range (`StackCost.range()`): the low end is minimum scale on each pool's first
tier; the high end is maximum scale on each pool's worst tier, the dearest of its chain and
fallbacks. Each part is exact or a lower bound, and so is each end.

Length (about 425 lines, over the ~400 rule): the pricing of one pool's scale, the stack's range
and the table printed from it are one computation whose bounds (exact or "at least") must agree
line by line; the price book and Cloud Billing reader are their own modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tpuray import capacity, catalog, terminal
from tpuray.config import SlicePoolConfig, StackConfig, price_tiers
from tpuray.cost import pricebook
from tpuray.cost.pricebook import Price, hours_per_month

__all__ = ["Price", "hours_per_month"]

CONFIG_SOURCE = "stack config (tpuray:prices)"
# Every line is also priced on demand: what the chain would cost with no discount at all.
ON_DEMAND = capacity.ON_DEMAND.price_key
# Not TPU chips, so outside this model; listed in every report so they are never taken as $0.
NOT_INCLUDED = (
    "GKE cluster management fee",
    "CPU node pool for Ray heads",
    "network egress, storage, load balancers",
)


def price(cfg: StackConfig, generation: str, tier: str) -> Price:
    """The price a stack pays: its own `tpuray:prices` first, then the snapshot's figure."""
    assert tier in price_tiers(), tier
    own = cfg.prices.get(generation, {})
    if own.get(tier) is not None:
        return Price(float(own[tier]), CONFIG_SOURCE)
    return pricebook.published_price(cfg.gcp.region, generation, tier, own.get(ON_DEMAND))


@dataclass(frozen=True)
class Part:
    """One pool's share of a range end: `amount` USD/h, exact or a lower bound."""

    pool: str
    label: str
    amount: float
    exact: bool

    def as_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "line": self.label, "hourly": self.amount, "exact": self.exact}


@dataclass(frozen=True)
class RangeEnd:
    parts: tuple[Part, ...]

    @property
    def amount(self) -> float:
        return sum(p.amount for p in self.parts)

    @property
    def exact(self) -> bool:
        return all(p.exact for p in self.parts)

    def as_json(self) -> dict[str, Any]:
        hpm = hours_per_month()
        return {
            "hourly": self.amount,
            "monthly": self.amount * hpm,
            "exact": self.exact,
            "parts": [p.as_json() for p in self.parts],
        }


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

    def bounded(self, scale: str) -> Part:
        """This line's cost as a range part: exact, or its price floor (0 if none) as a lower bound."""
        chips = self.chips_min if scale == "min" else self.chips_max
        exact = self._cost(chips, self.price)
        if exact is not None:
            return Part(self.pool, self.label, exact, True)
        return Part(self.pool, self.label, chips * (self.price.floor or 0.0), False)

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


@dataclass(frozen=True)
class FinishedJobWait:
    """What the training job's slices cost between the job's end and KubeRay deleting its
    cluster (`ttlSecondsAfterFinished`): every chip of the run's slices, at the first tier's price."""

    pool: str
    chips: int
    seconds: int
    price: Price
    # An elastic run (slices {min, max}): `chips` are its most slices', these its fewest's.
    min_chips: int | None = None

    @property
    def per_run(self) -> float | None:
        return None if self.price.value is None else self.chips * self.price.value * self.seconds / 3600

    def text(self) -> str:
        if self.per_run is not None:
            cost = f"${self.per_run:,.2f}"
        elif self.price.floor:  # an unpublished price a published rule bounds (spot, reservation)
            cost = f"at least ${self.chips * self.price.floor * self.seconds / 3600:,.2f}"
        else:
            cost = "unknown"
        chips = f"{self.chips} chips" if self.min_chips is None else f"{self.min_chips} to {self.chips} chips (elastic)"
        return (
            f"a finished training run keeps its {chips} on {self.pool} for {self.seconds} s until KubeRay "
            f"deletes its cluster (ttlSecondsAfterFinished): {cost} per run"
            + (", priced at the most" if self.min_chips is not None else "")
        )

    def as_json(self) -> dict[str, Any]:
        out = {"pool": self.pool, "chips": self.chips, "seconds": self.seconds, "perRun": self.per_run}
        return out if self.min_chips is None else {**out, "minChips": self.min_chips}


@dataclass
class StackCost:
    stack: str
    lines: list[CostLine] = field(default_factory=list)
    finished_job_wait: FinishedJobWait | None = None

    def configured(self) -> list[CostLine]:
        return [line for line in self.lines if line.role == "configured"]

    def total(self, scale: str, on_demand: bool = False) -> Total:
        return _sum(
            [
                (line.label, line.on_demand_hourly(scale) if on_demand else line.hourly(scale))
                for line in self.configured()
            ]
        )

    def range(self) -> tuple[RangeEnd, RangeEnd]:
        """(low, high): minimum scale on each pool's first tier; maximum scale on its worst tier."""
        pools = list(dict.fromkeys(line.pool for line in self.lines))
        low = tuple(line.bounded("min") for line in self.configured())
        high = tuple(_worst([x for x in self.lines if x.pool == pool]) for pool in pools)
        return RangeEnd(low), RangeEnd(high)

    def as_json(self) -> dict[str, Any]:
        hpm = hours_per_month()
        low, high = self.range()
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
            "range": {"low": low.as_json(), "high": high.as_json()},
            "prices": {
                "source": pricebook.snapshot_source(),
                "snapshotDate": pricebook.snapshot_date().isoformat(),
                "ageDays": pricebook.snapshot_age_days(),
            },
            "notIncluded": list(NOT_INCLUDED),
            "finishedJobWait": self.finished_job_wait.as_json() if self.finished_job_wait else None,
        }


def _worst(lines: list[CostLine]) -> Part:
    """The dearest line of one pool at maximum scale. An unknown price whose ceiling keeps it
    under a known line cannot be the worst; any other unknown makes the result a lower bound."""
    known = [x for x in lines if x.hourly("max") is not None]
    worst = max(known, key=lambda x: x.hourly("max") or 0.0, default=None)
    part = worst.bounded("max") if worst else Part(lines[0].pool, lines[0].label, 0.0, True)
    for line in lines:
        if line.hourly("max") is not None:
            continue
        ceiling = line.price.ceiling
        if ceiling is not None and line.chips_max * ceiling <= part.amount:
            continue
        candidate = line.bounded("max")
        part = candidate if candidate.amount > part.amount else Part(part.pool, part.label, part.amount, False)
    return part


def _pool_lines(cfg: StackConfig, pool: SlicePoolConfig) -> list[CostLine]:
    lines = []
    for index, tier in enumerate(pool.capacity):
        kind = tier.kind  # its row in tpuray/capacity.py
        chips_max = pool.slices * pool.shape.chips
        # Only the node pools' own tier runs at minimum; flex-start node pools start at zero.
        first = index == 0
        chips_min = chips_max if first and not kind.from_zero else 0
        lines.append(
            CostLine(
                pool=pool.name,
                generation=pool.generation,
                topology=pool.topology,
                tier=kind.price_key,
                role="configured" if first else "chain",
                chips_min=chips_min,
                chips_max=chips_max,
                price=price(cfg, pool.generation, kind.price_key),
                on_demand=price(cfg, pool.generation, ON_DEMAND),
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
                    tier=tier.kind.price_key,
                    role="fallback",
                    chips_min=0,
                    chips_max=pool.slices * shape.chips,
                    price=price(cfg, fb.generation, tier.kind.price_key),
                    on_demand=price(cfg, fb.generation, ON_DEMAND),
                )
            )
    return lines


def stack_cost(cfg: StackConfig) -> StackCost:
    cost = StackCost(stack=cfg.stack)
    for pool in cfg.slice_pools:
        cost.lines += _pool_lines(cfg, pool)
    train = cfg.workloads.train
    if train is not None:
        pool = cfg.pool(train.pool)
        cost.finished_job_wait = FinishedJobWait(
            pool.name,
            train.max_slices * pool.shape.chips,  # an elastic run may hold its most
            train.ttl_seconds_after_finished,
            price(cfg, pool.generation, pool.capacity[0].kind.price_key),
            train.min_slices * pool.shape.chips if train.elastic else None,
        )
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


def end_text(amount: float, exact: bool, factor: float = 1.0, per: str = "h") -> str:
    """One end of a range: '$54.00/h', or 'at least $4.86/h' when a part is a lower bound."""
    return money(amount * factor, per) if exact else f"at least {money(amount * factor, per)}"


def range_text(low: RangeEnd, high: RangeEnd, factor: float = 1.0, per: str = "h") -> str:
    """'$79.68/h to $105.60/h' (min scale, first tiers to max scale, worst tiers)."""
    a, b = end_text(low.amount, low.exact, factor, per), end_text(high.amount, high.exact, factor, per)
    return a if a == b else f"{a} to {b}"


def end_from_json(doc: dict[str, Any]) -> RangeEnd:
    """A range end back from its JSON (a preview document, e.g. the base side of a diff)."""
    return RangeEnd(tuple(Part(x["pool"], x["line"], float(x["hourly"]), bool(x["exact"])) for x in doc["parts"]))


def end_delta_text(a: RangeEnd, b: RangeEnd, factor: float = 1.0, per: str = "h") -> str:
    """'+$1,971/mo', or '+$1,971/mo (between lower bounds)' when either end is a bound."""
    d = (b.amount - a.amount) * factor
    text = ("+" if d >= 0 else "−") + money(abs(d), per)
    return text if a.exact and b.exact else f"{text} (between lower bounds)"


def price_text(p: Price) -> str:
    if p.value is not None:
        return f"${p.value:.2f}"
    if p.floor is not None and p.ceiling is not None:
        return f"unknown (${p.floor:.2f}–${p.ceiling:.2f})"
    return "unknown"


def _line_text(line: CostLine, scale: str, factor: float = 1.0, per: str = "h") -> str:
    part = line.bounded(scale)
    return end_text(part.amount, part.exact, factor, per) if part.exact or part.amount else "unknown"


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
            _line_text(line, "min"),
            _line_text(line, "max"),
            _line_text(line, "max", hpm, "mo"),
            source if line.price.known else f"unknown: {line.price.note.split(';')[0]}",
        )
    od = cost.total("max", on_demand=True)
    table.add_row(
        terminal.styled(("all on-demand", "bold")), "", "same pools, max scale", "", "", "", "", total_text(od),
        total_text(od, hpm, "mo"), "for comparison",
    )  # fmt: skip
    low, high = cost.range()
    table.add_row(
        terminal.styled(("stack range", "bold")), "", "first tier → worst tier", "", "", "",
        end_text(low.amount, low.exact), end_text(high.amount, high.exact),
        range_text(low, high, hpm, "mo"), pricebook.snapshot_source() + ", " + pricebook.snapshot_date().isoformat(),
    )  # fmt: skip
    table.caption = "range: minimum scale on each pool's first tier to maximum scale on its worst tier. "
    table.caption += "not included: " + "; ".join(NOT_INCLUDED)
    if cost.finished_job_wait is not None:
        wait = cost.finished_job_wait.text()
        table.caption += ". " + wait[0].upper() + wait[1:]
    return table
