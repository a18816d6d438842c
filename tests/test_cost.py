"""The cost model: every figure sourced, unknown stays unknown, scale follows the program."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import REPO
from tpuray import cost
from tpuray.config import ConfigError, load_stack, parse_stack_config, read_stack_file, resolve_stack_file


def _raw(stack: str) -> dict[str, Any]:
    return read_stack_file(resolve_stack_file(stack)[1])


def _with(stack: str, **changes: Any) -> Any:
    raw = _raw(stack)
    raw.update(changes)
    return parse_stack_config(raw, stack)


def test_every_published_price_has_a_source_and_a_date() -> None:
    for gen, tiers in cost.price_book()["generations"].items():
        for tier, entry in tiers.items():
            if tier == "commitments":
                entries = list(entry.values())
            else:
                entries = [entry]
            for e in entries:
                assert e == "unknown" or (e["price"] > 0 and e["source"].startswith("https://") and e["date"]), (
                    gen,
                    tier,
                )


def test_price_file_names_every_generation_and_tier() -> None:
    from tpuray.catalog import GENERATIONS
    from tpuray.config import PRICE_TIERS

    gens = cost.price_book()["generations"]
    assert set(gens) == set(GENERATIONS)
    for tiers in gens.values():
        assert set(PRICE_TIERS) <= set(tiers)


def test_unpublished_price_is_unknown_not_zero() -> None:
    line = next(x for x in cost.stack_cost(load_stack("staging")).lines if x.pool == "v5e-serve")
    assert line.price.value is None and line.hourly("max") is None
    assert cost.money(line.hourly("max")) == "unknown"


def test_an_unknown_part_makes_the_total_unknown_and_keeps_the_known_part() -> None:
    total = cost.stack_cost(load_stack("staging")).total("max", on_demand=True)
    assert total.value is None
    assert total.known == pytest.approx(54.0)  # v6e 16 + 4 chips at $2.70
    assert total.unknown == ("v5e-serve v5e 2x4 on-demand",)
    assert cost.total_text(total).startswith("unknown")


def test_stack_config_sets_a_price_and_names_itself_as_source() -> None:
    cfg = _with("staging", prices={"v5e": {"on-demand": 1.2}, "v6e": {"spot": 1.0}})
    c = cost.stack_cost(cfg)
    serve = next(x for x in c.lines if x.pool == "v5e-serve")
    assert serve.price.value == 1.2 and serve.price.source == cost.CONFIG_SOURCE
    # v6e spot 20 chips at $1.00 + v5e 8 chips at $1.20; flex-start of the chain is not configured
    assert c.total("max").value == pytest.approx(20 * 1.0 + 8 * 1.2)


def test_flex_start_first_tier_scales_from_zero() -> None:
    raw = _raw("dev")
    raw["slicePools"][0]["capacity"] = [{"flexStart": True}, {"onDemand": True}]
    line = cost.stack_cost(parse_stack_config(raw, "dev")).configured()[0]
    assert (line.chips_min, line.chips_max) == (0, 16)
    assert line.hourly("min") == 0.0 and line.hourly("max") is None


def test_later_tiers_and_fallbacks_cost_nothing_at_minimum_and_every_slice_at_maximum() -> None:
    lines = [x for x in cost.stack_cost(load_stack("prod")).lines if x.pool == "v6e-train"]
    assert [(x.tier, x.role, x.chips_min, x.chips_max) for x in lines] == [
        ("reservation", "configured", 32, 32),
        ("spot", "chain", 0, 32),
        ("on-demand", "chain", 0, 32),
        ("on-demand", "fallback", 0, 32),
    ]
    assert lines[2].hourly("max") == pytest.approx(32 * 2.70)


def test_monthly_is_hourly_times_730() -> None:
    doc = cost.stack_cost(load_stack("dev")).as_json()
    line = next(x for x in doc["lines"] if x["tier"] == "on-demand")
    assert line["monthly"]["max"] == pytest.approx(line["hourly"]["max"] * 730)


def test_a_price_for_an_unknown_generation_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tpuray:prices.v9: 'v9' is not a TPU generation"):
        _with("dev", prices={"v9": {"spot": 1.0}})


def test_a_price_for_an_unknown_tier_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"tpuray:prices.v6e.preemptible: unknown capacity tier"):
        _with("dev", prices={"v6e": {"preemptible": 1.0}})


def test_preview_json_carries_the_cost() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tpuray.cli", "preview", "prod", "--json"], cwd=REPO, capture_output=True, text=True
    )
    doc = json.loads(out.stdout)
    assert doc["cost"]["currency"] == "USD"
    assert {x["pool"] for x in doc["cost"]["lines"]} == {"v6e-train", "v5e-serve"}
