"""What the stack's Kueue quotas cap its queued TPU spend at (tpuray preview, tpuray cost).

Kueue admits a queued workload only within quota, and borrowing moves unused nominal quota
between the ClusterQueues of a cohort, never past its sum: at most the sum of every team's
nominal google.com/tpu quota runs at once on each flavor (pool and tier, tpuray/desired/queues.py). The
cap prices each flavor's chips at its tier's price per chip-hour (tpuray/cost.py `price`); an
unpublished price counts at its published ceiling (spot: on-demand), so the cap stays an upper
bound, and an unbounded one leaves the cap unknown. Ray objects that are not queued (a pool no
team has quota on, an autoscaling RayService) are outside the cap, and the preview says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpuray.config.queues import quota_tier
from tpuray.cost.pricebook import hours_per_month
from tpuray.cost.table import money, price
from tpuray.desired import queues


@dataclass(frozen=True)
class FlavorCap:
    flavor: str
    generation: str
    tier: str
    chips: int  # the sum of the teams' nominal quotas
    per_chip_hour: float | None  # the price, or its ceiling when unpublished; None: unbounded

    @property
    def hourly(self) -> float | None:
        return None if self.per_chip_hour is None else self.chips * self.per_chip_hour


@dataclass(frozen=True)
class QuotaCap:
    flavors: list[FlavorCap]
    teams: list[str]  # one line per team: its queue, quotas and priority

    @property
    def hourly(self) -> float | None:
        parts = [f.hourly for f in self.flavors]
        return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)

    def text(self) -> str:
        cap = self.hourly
        if cap is None:
            return "queues: the quotas cap queued TPU spend at an unknown rate (a tier has no published bound)"
        return (
            f"queues: the quotas cap queued TPU spend at {money(cap)} ({money(cap * hours_per_month(), 'mo')}): "
            + ", ".join(f"{f.flavor} {f.chips} chips x ${f.per_chip_hour:.2f}" for f in self.flavors if f.chips)
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "teams": self.teams,
            "flavors": [
                {
                    "flavor": f.flavor,
                    "generation": f.generation,
                    "tier": f.tier,
                    "chips": f.chips,
                    "perChipHour": f.per_chip_hour,
                    "hourly": f.hourly,
                }
                for f in self.flavors
            ],  # fmt: skip
            "capHourly": self.hourly,
        }


def _team_line(cfg: Any, team: Any) -> str:
    quotas = []
    for q in team.quotas:
        borrow = f" (+{q.borrowing_limit} borrowed)" if q.borrowing_limit else ""
        quotas.append(f"{queues.flavor_name(q.pool, quota_tier(cfg, q))} {q.chips} chips{borrow}")
    cohort = f", cohort {cfg.queues.cohort}" if cfg.queues.cohort else ""
    priority = f", priority {team.priority_class}" if team.priority_class else ""
    return (
        f"ClusterQueue {team.name} (LocalQueue {queues.team_namespace(cfg, team)}/{team.name}{cohort}{priority}): "
        + "; ".join(quotas)
    )


def quota_cap(cfg: Any) -> QuotaCap | None:
    """None for a stack without tpuray:queues."""
    if cfg.queues is None:
        return None
    chips: dict[str, int] = {}
    for team in cfg.queues.teams:
        for q in team.quotas:
            name = queues.flavor_name(q.pool, quota_tier(cfg, q))
            chips[name] = chips.get(name, 0) + q.chips
    caps = []
    for flavor in queues.flavors(cfg):
        generation = flavor.shape.generation
        p = price(cfg, generation, flavor.tier.price_key)
        per_chip = p.value if p.value is not None else p.ceiling
        caps.append(FlavorCap(flavor.name, generation, flavor.tier.key, chips.get(flavor.name, 0), per_chip))
    return QuotaCap(caps, [_team_line(cfg, t) for t in cfg.queues.teams])


def preview_lines(cfg: Any) -> list[str]:
    """The preview's queue section: a line per team, then the cap."""
    cap = quota_cap(cfg)
    if cap is None:
        return []
    team = cfg.queues.workloads_team(cfg.workloads.namespace)
    quota_pools = {q.pool for q in team.quotas} if team else set()
    outside = [
        f"queues: the {kind} of workloads.{key} is not queued: no team has quota on pool {w.pool!r} in namespace "
        f"{cfg.workloads.namespace!r}, so its slices are outside the cap"
        for kind, key in (("RayJob", "train"), ("RayService", "serve"), ("RayCluster", "interactive"))
        if (w := getattr(cfg.workloads, key)) is not None and w.pool not in quota_pools
    ]
    return [f"queue: {line}" for line in cap.teams] + [cap.text(), *outside]
