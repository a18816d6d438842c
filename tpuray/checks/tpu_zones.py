"""Which zones offer which TPU generation (tpuray/data/tpu_zones.yaml), and the stack check that a
slice pool and each of its fallback shapes are in a zone that offers their generation.

GKE creates a TPU node pool only in a zone that has the machine type: "To use a TPU type in your
GKE workload, your cluster must be in a supported region for that type"
(https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus, "Validate TPU availability").
The zones per generation are Google's "TPU regions and zones" table
(https://cloud.google.com/tpu/docs/regions-zones), kept as a dated snapshot like the prices
(tpuray/cost/pricebook.py); `age_text` says how old it is and warns past STALE_AFTER_DAYS.

Where a pool's slices run: its node pool is declared in `slicePools[].zone`, or in the first of
`tpuray:gcp.zones` (infra/program.py). Its ComputeClass's fallback shapes are auto-created by GKE
(nodePoolAutoCreation, infra/components/capacity_chain.py) in the zones the cluster's nodes may
use, `tpuray:gcp.zones` (node_locations, infra/components/cluster.py), or the pool's own zone when
it names one: a fallback generation needs one of those zones.

The snapshot judges only what it holds: a generation it does not list (a new row of
tpuray/catalog.py) and a zone of a region it did not read in full are not refused. A pool (or a
fallback shape) on capacity the table does not list, a single-tenant or reserved block, says so
with `unlistedCapacity: true`; where the table does list the zone, the flag is refused as needless.
"""

from __future__ import annotations

import datetime as dt
from functools import cache
from typing import Any

import yaml

from tpuray.config.schema import StackConfig
from tpuray.paths import DATA_DIR

NS = "tpuray"
ZONES_FILE = DATA_DIR / "tpu_zones.yaml"
# Google adds TPU zones a few times a year; past this the snapshot's age is a warning.
STALE_AFTER_DAYS = 180


@cache
def snapshot() -> dict[str, Any]:
    return yaml.safe_load(ZONES_FILE.read_text())


def snapshot_date() -> dt.date:
    value = snapshot()["retrieved"]
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value))


def snapshot_source() -> str:
    return str(snapshot()["source"])


def listed_zones(generation: str) -> tuple[str, ...] | None:
    """The zones Google's table lists for a generation; None for a generation it does not hold."""
    zones = snapshot()["generations"].get(generation)
    return None if zones is None else tuple(zones)


def covers(zone: str) -> bool:
    """Whether the snapshot read the table rows of this zone's region in full."""
    return any(zone.startswith(prefix) for prefix in snapshot()["covered_region_prefixes"])


def age_text(today: dt.date | None = None) -> str:
    """'tpu zones: <source>, snapshot 2026-12-02 (3 days old)', plus a warning past 180 days."""
    days = ((today or dt.date.today()) - snapshot_date()).days
    text = f"tpu zones: {snapshot_source()}, snapshot {snapshot_date().isoformat()} ({days} days old)"
    if days > STALE_AFTER_DAYS:
        text += (
            f"; warning: older than {STALE_AFTER_DAYS} days: compare with the page and update "
            "tpuray/data/tpu_zones.yaml (a pool on capacity the table does not list sets unlistedCapacity)"
        )
    return text


def offered(generation: str, zone: str) -> bool | None:
    """True/False: Google's table does/does not offer the generation in the zone; None: the snapshot
    cannot tell (a generation it does not list, a zone of a region it did not read in full)."""
    listed = listed_zones(generation)
    if listed is None or not covers(zone):
        return None
    return zone in listed


def _line(key: str, generation: str, where: str, flag: str) -> str:
    listed = listed_zones(generation) or ()
    return (
        f"{key}: {generation!r} is not offered in {where} by Google's TPU regions and zones table "
        f"(snapshot {snapshot_date().isoformat()}); {generation} zones: {', '.join(listed)}; if your project has "
        f"{generation} capacity there, set {flag}: true"
    )


def _listed_line(flag: str, generation: str, zones: list[str]) -> str:
    return (
        f"{flag}: true is not needed; Google's TPU table lists {generation} in {', '.join(zones)}: remove it, "
        "so that the zone is checked again"
    )


def zone_lines(cfg: StackConfig) -> list[str]:
    """One line per pool or fallback shape in zones that do not offer its generation, and per
    unlistedCapacity the table makes needless. Run on an otherwise valid stack (tpuray.config):
    the pools' shapes and zones are known to be valid then."""
    lines = []
    for i, pool in enumerate(cfg.slice_pools):
        key = f"{NS}:slicePools[{i}]"
        zone = pool.zone or cfg.gcp.zones[0]
        verdict = offered(pool.generation, zone)
        if pool.unlisted_capacity and verdict is True:
            lines.append(_listed_line(f"{key}.unlistedCapacity", pool.generation, [zone]))
        elif verdict is False and not pool.unlisted_capacity:
            where = (
                f"zone {zone!r} ({key}.zone)" if pool.zone else f"zone {zone!r} (the pool's zone, {NS}:gcp.zones[0])"
            )
            lines.append(_line(f"{key}.generation", pool.generation, where, f"{key}.unlistedCapacity"))
        zones = [pool.zone] if pool.zone else cfg.gcp.zones
        for j, fb in enumerate(pool.fallback):
            fkey = f"{key}.fallback[{j}]"
            verdicts = [offered(fb.generation, z) for z in zones]
            if fb.unlisted_capacity and any(v is True for v in verdicts):
                listed = [z for z, v in zip(zones, verdicts, strict=True) if v is True]
                lines.append(_listed_line(f"{fkey}.unlistedCapacity", fb.generation, listed))
            elif all(v is False for v in verdicts) and not fb.unlisted_capacity:
                shown = f"{zones[0]!r}" if len(zones) == 1 else f"any of {', '.join(zones)}"
                source = f"{key}.zone" if pool.zone else f"{NS}:gcp.zones"
                lines.append(
                    _line(f"{fkey}.generation", fb.generation, f"{shown} ({source})", f"{fkey}.unlistedCapacity")
                )
    return lines
