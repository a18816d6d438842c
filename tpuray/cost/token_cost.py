"""Dollars per million output tokens of the stack's LLM service, per capacity tier.

One replica of the llm backend holds one whole slice of the serve pool (tpuray/desired/llm_stack.py),
so a measured throughput of N output tokens/s per replica costs

    slice chips x price per chip-hour / (N x 3600) x 1e6   USD per million output tokens

on each capacity tier of the pool's chain (prices: tpuray/cost/table.py `price`, the stack's own
`tpuray:prices` over the dated snapshot). Chips come from the catalog. Cross-generation
fallbacks are not listed: a throughput measured on one shape says nothing about another.
A tier whose price nobody published shows its floor as "at least", never $0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpuray.config import StackConfig
from tpuray.cost import table as cost
from tpuray.cost.pricebook import Price
from tpuray.errors import UserError

SECONDS_PER_HOUR = 3600
PER = 1_000_000


@dataclass(frozen=True)
class TierTokenCost:
    pool: str
    generation: str
    topology: str
    tier: str
    chips: int  # one replica = one slice
    price: Price
    tokens_per_second: float

    def _per_million(self, per_chip_hour: float | None) -> float | None:
        if per_chip_hour is None:
            return None
        return self.chips * per_chip_hour / (self.tokens_per_second * SECONDS_PER_HOUR) * PER

    @property
    def usd_per_million(self) -> float | None:
        return self._per_million(self.price.value)

    @property
    def floor_per_million(self) -> float | None:
        return self._per_million(self.price.floor)

    def text(self) -> str:
        if self.usd_per_million is not None:
            return f"${self.usd_per_million:.4f}"
        if self.floor_per_million is not None:
            return f"at least ${self.floor_per_million:.4f}"
        return "unknown"

    def as_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "generation": self.generation,
            "topology": self.topology,
            "tier": self.tier,
            "chipsPerReplica": self.chips,
            "tokensPerSecondPerReplica": self.tokens_per_second,
            "price": self.price.as_json(),
            "usdPerMillionOutputTokens": self.usd_per_million,
            "floorUsdPerMillionOutputTokens": self.floor_per_million,
        }


def per_token_costs(cfg: StackConfig, tokens_per_second: float) -> list[TierTokenCost]:
    """One row per capacity tier of the serve pool (its chain order), plus on-demand for comparison."""
    if tokens_per_second <= 0:
        raise UserError(
            f"--tokens-per-second: {tokens_per_second:g} is invalid; give the measured output tokens/s (> 0)"
        )
    serve = cfg.workloads.serve
    if serve is None:
        raise UserError(f"{cfg.stack}: tpuray:workloads.serve: missing; per-token cost needs a serve workload")
    pool = cfg.pool(serve.pool)
    tiers = [t.kind.price_key for t in pool.capacity]
    if cost.ON_DEMAND not in tiers:
        tiers.append(cost.ON_DEMAND)
    return [
        TierTokenCost(
            pool.name,
            pool.generation,
            pool.topology,
            tier,
            pool.shape.chips,
            cost.price(cfg, pool.generation, tier),
            tokens_per_second,
        )
        for tier in tiers
    ]
