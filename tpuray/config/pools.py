"""Slice pools and their capacity chains: `tpuray:slicePools`."""

from __future__ import annotations

from typing import Any

from pydantic import Field, create_model, model_validator

from tpuray import capacity, catalog
from tpuray.config.base import ConfigModel


class ReservationRef(ConfigModel):
    """A Compute Engine reservation by name (a string is shorthand for the name)."""

    name: str = Field(description="the reservation's name")
    project: str | None = Field(None, description="the project that owns a shared reservation")

    @classmethod
    def coerce(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class _CapacityStep(ConfigModel):
    """One step of a capacity chain. Exactly one tier key is set. The keys are generated from the
    capacity table (tpuray/capacity.py), one per row: a tier added there is a key here, in the
    docs and in every message that lists the keys."""

    @model_validator(mode="before")
    @classmethod
    def _reservation_shorthand(cls, data: Any) -> Any:
        # `reservation: prod-v6e` is shorthand for {reservation: {name: prod-v6e}}.
        if not isinstance(data, dict):
            return data
        keys = {t.config_key for t in capacity.TIERS if t.names_reservation}
        return {k: ReservationRef.coerce(v) if k in keys else v for k, v in data.items()}

    def value(self, tier: capacity.Tier) -> Any:
        """What this step says for one tier: False/None when it does not choose it."""
        return getattr(self, tier.field)

    def kinds(self) -> list[capacity.Tier]:
        return [t for t in tier_order() if self.value(t) is not None and self.value(t) is not False]

    @property
    def kind(self) -> capacity.Tier:
        return self.kinds()[0]

    @property
    def market_type(self) -> str:
        """Ray's ray.io/market-type label value for nodes of this tier."""
        return self.kind.market_type


def tier_order() -> list[capacity.Tier]:
    """The capacity tiers in the order the config lists their keys (spot, reservation, onDemand,
    flexStart: each row's config_rank), a tier of equal rank in the table's order."""
    return sorted(capacity.TIERS, key=lambda t: t.config_rank)


def _tier_field(tier: capacity.Tier) -> tuple[Any, Any]:
    alias = tier.config_key if tier.config_key != tier.field else None
    if tier.names_reservation:
        return ReservationRef | None, Field(None, alias=alias, description=tier.config_description)
    return bool, Field(False, alias=alias, description=tier.config_description)


CapacityTier = create_model(
    "CapacityTier",
    __base__=_CapacityStep,
    __module__=__name__,
    **{t.field: _tier_field(t) for t in tier_order()},
)
CapacityTier.__doc__ = _CapacityStep.__doc__


def tier_keys() -> str:
    """ "spot, reservation, onDemand, flexStart": the config keys of a capacity step, for messages."""
    return ", ".join(t.config_key for t in tier_order())


def price_tiers() -> tuple[str, ...]:
    """Capacity tiers as the price file and tpuray:prices name them, the default (on-demand) first."""
    return tuple(t.price_key for t in sorted(tier_order(), key=lambda t: not t.is_default))


UNLISTED_CAPACITY = (
    "your project has capacity of this generation in the pool's zone that Google's TPU table "
    "(tpuray/data/tpu_zones.yaml) does not list"
)


class FallbackShape(ConfigModel):
    """A cross-generation fallback appended to a pool's ComputeClass (v6e 4x8, then v5e 4x8)."""

    generation: str = Field(description="the fallback shape's TPU generation")
    topology: str = Field(description="the fallback shape's topology")
    capacity: list[CapacityTier] = Field(
        default_factory=lambda: [CapacityTier(onDemand=True)], description="the fallback shape's capacity chain"
    )
    unlisted_capacity: bool = Field(False, alias="unlistedCapacity", description=UNLISTED_CAPACITY)


class SlicePoolConfig(ConfigModel):
    """A pool of identical TPU slices and the capacity chain that provides them."""

    name: str = Field(description="the pool's name: node pools, ComputeClass and labels are named after it")
    generation: str = Field(description="a TPU generation of the catalog (`tpuray topology`)")
    topology: str = Field(description="a topology valid for the generation, e.g. 4x4")
    machine_type: str | None = Field(
        None, alias="machineType", description="picks between the two forms of 2x4; default: the catalog's"
    )
    slices: int = Field(description="how many slices the pool provides")
    capacity: list[CapacityTier] = Field(description="the capacity chain, in priority order")
    fallback: list[FallbackShape] = Field(
        default_factory=list, description="other shapes appended to the pool's ComputeClass, in order"
    )
    zone: str | None = Field(None, description="default: the first of tpuray:gcp.zones")
    unlisted_capacity: bool = Field(False, alias="unlistedCapacity", description=UNLISTED_CAPACITY)
    idle_timeout_minutes: int = Field(
        60,
        alias="idleTimeoutMinutes",
        ge=5,
        description="the idle-slice alert fires when a host of this pool ran no TPU program for this long",
    )

    @property
    def shape(self) -> catalog.SliceShape:
        return catalog.lookup(self.generation, self.topology, self.machine_type)

    @property
    def fallback_shapes(self) -> list[catalog.SliceShape]:
        """The cross-generation shapes of the chain, in order (the driver's steps, docs/capacity.md)."""
        return [catalog.lookup(f.generation, f.topology) for f in self.fallback]

    @property
    def compute_class(self) -> str:
        return self.name
