"""The cost model: every figure sourced, unknown stays unknown, scale follows the program."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest

from tpuray.cli import main
from tpuray.config import ConfigError, read_stack_file, resolve_stack_file
from tpuray.config.checks import load_stack, parse_stack_config
from tpuray.cost import pricebook
from tpuray.cost import table as cost


def _raw(stack: str) -> dict[str, Any]:
    return read_stack_file(resolve_stack_file(stack)[1])


def _with(stack: str, **changes: Any) -> Any:
    raw = _raw(stack)
    raw.update(changes)
    return parse_stack_config(raw, stack)


def test_every_snapshot_price_has_a_source_and_a_date_and_every_unknown_a_reason() -> None:
    for region, gens in pricebook.snapshot()["regions"].items():
        for gen, tiers in gens.items():
            for tier, e in tiers.items():
                ok = ("price" in e and e["price"] > 0 and e["source"].startswith("https://") and e["date"]) or (
                    set(e) == {"unknown"} and len(e["unknown"]) > 20
                )
                assert ok, (region, gen, tier, e)


def test_snapshot_names_every_generation_and_tier_in_the_stacks_region() -> None:
    from tpuray.catalog import GENERATIONS

    gens = pricebook.snapshot()["regions"]["us-east5"]
    assert set(gens) == set(GENERATIONS)
    for tiers in gens.values():
        assert {"on-demand", "spot", "reservation", "flex-start"} <= set(tiers)


def test_the_published_us_east5_list_prices_are_in_the_snapshot() -> None:
    got = {
        (g, t): pricebook.listed_price("us-east5", g, t).value
        for g in ("v6e", "v5e", "v5p")
        for t in ("on-demand", "spot", "1-year", "3-year")
    }
    assert got == {
        ("v6e", "on-demand"): 2.70, ("v6e", "spot"): None, ("v6e", "1-year"): 1.89, ("v6e", "3-year"): 1.22,
        ("v5e", "on-demand"): 1.20, ("v5e", "spot"): 0.60, ("v5e", "1-year"): 0.84, ("v5e", "3-year"): 0.54,
        ("v5p", "on-demand"): 4.20, ("v5p", "spot"): 2.10, ("v5p", "1-year"): 2.94, ("v5p", "3-year"): 1.89,
    }  # fmt: skip


def test_an_unpublished_spot_price_is_unknown_between_9_and_100_percent_of_on_demand() -> None:
    p = pricebook.published_price("us-east5", "v6e", "spot")
    assert p.value is None
    assert (p.floor, p.ceiling) == (pytest.approx(0.243), 2.70)
    assert p.note.startswith("no v6e spot price on cloud.google.com/tpu/pricing")


def test_an_unpublished_reservation_rate_lies_between_the_commitment_rates() -> None:
    p = pricebook.published_price("us-east5", "v5e", "reservation")
    assert (p.value, p.floor, p.ceiling) == (None, 0.54, 0.84)


def test_flex_start_is_unknown_without_bounds() -> None:
    p = pricebook.published_price("us-east5", "v6e", "flex-start")
    assert (p.value, p.floor, p.ceiling) == (None, None, None)
    assert p.note == "no TPU flex-start price is published"


def test_a_region_missing_from_the_snapshot_is_unknown_and_says_so() -> None:
    p = pricebook.published_price("asia-south1", "v6e", "on-demand")
    assert p.value is None
    assert p.note == "region asia-south1 is not in the snapshot (us-central2, us-east5); run `tpuray prices refresh`"


def test_an_unknown_part_makes_the_configured_total_unknown_and_keeps_the_known_part() -> None:
    total = cost.stack_cost(load_stack("dev")).total("max")
    assert total.value is None
    assert total.known == 0.0
    assert total.unknown == ("v6e-dev v6e 4x4 spot", "v6e-serve-dev v6e 2x2 spot")


def test_dev_range_is_a_lower_bound_on_spot_to_every_slice_on_demand() -> None:
    low, high = cost.stack_cost(load_stack("dev")).range()
    # low: 16 + 4 v6e chips on spot, at least 9% of $2.70; high: the same 20 chips on-demand
    assert (low.amount, low.exact) == (pytest.approx(20 * 0.243), False)
    assert (high.amount, high.exact) == (pytest.approx(54.0), True)
    assert cost.range_text(low, high) == "at least $4.86/h to $54.00/h"


def test_staging_range_is_a_lower_bound_at_both_ends_because_flex_start_is_unpriced() -> None:
    low, high = cost.stack_cost(load_stack("staging")).range()
    assert cost.range_text(low, high) == "at least $14.46/h to at least $63.60/h"
    worst = {p.pool: (p.label, p.exact) for p in high.parts}
    assert worst["v6e-train"] == ("v6e-train v6e 4x4 on-demand", False)  # flex-start could cost more
    assert worst["v5e-serve"] == ("v5e-serve v5e 2x4 on-demand", True)


def test_prod_range_is_exact_from_reservation_to_on_demand() -> None:
    low, high = cost.stack_cost(load_stack("prod")).range()
    # low: 32 v6e chips at the stack's $1.89 commitment + 16 v5e at $1.20; high: v6e on-demand
    # beats the v5e 4x4 fallback (32 x $1.20), and spot is capped by on-demand.
    assert cost.range_text(low, high) == "$79.68/h to $105.60/h"
    assert cost.range_text(low, high, 730, "mo") == "$58,166/mo to $77,088/mo"


def test_a_spot_only_pool_is_a_lower_bound_at_maximum_scale() -> None:
    raw = _raw("dev")
    raw["slicePools"][1]["capacity"] = [{"spot": True}]
    low, high = cost.stack_cost(parse_stack_config(raw, "dev")).range()
    part = next(p for p in high.parts if p.pool == "v6e-serve-dev")
    assert (part.amount, part.exact) == (pytest.approx(4 * 0.243), False)


def test_snapshot_age_warns_only_past_90_days() -> None:
    assert pricebook.age_text(dt.date(2025, 3, 20)).endswith("snapshot 2024-12-20 (90 days old)")
    assert pricebook.age_text(dt.date(2025, 3, 21)).endswith(
        "(91 days old); warning: older than 90 days, run `tpuray prices refresh`"
    )


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_preview_of_every_example_stack_prints_a_dollar_range_and_the_snapshot_age(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["preview", stack])  # in-process: the same parse, call, print as the command
    out = capsys.readouterr()
    assert code == 0, out.err
    (row,) = [ln for ln in out.out.splitlines() if "stack range" in ln]
    cells = [c.strip() for c in row.split("│")]
    low, high = cells[7], cells[8]
    for end in (low, high):
        assert re.fullmatch(r"(at least )?\$[0-9,.]+/h", end), row
    assert "prices: Google Cloud TPU pricing pages (published list prices), snapshot 2024-12-20" in out.out


def test_stack_config_sets_a_price_and_names_itself_as_source() -> None:
    cfg = _with("staging", prices={"v5e": {"on-demand": 1.2}, "v6e": {"spot": 1.0}})
    c = cost.stack_cost(cfg)
    serve = next(x for x in c.lines if x.pool == "v5e-serve")
    assert serve.price.value == 1.2 and serve.price.source == cost.CONFIG_SOURCE
    # v6e spot 20 chips at $1.00 + v5e 8 chips at $1.20; flex-start of the chain is not configured
    assert c.total("max").value == pytest.approx(20 * 1.0 + 8 * 1.2)


def test_a_stack_on_demand_rate_bounds_its_unpublished_spot_rate() -> None:
    cfg = _with("dev", prices={"v6e": {"on-demand": 2.00}})
    p = next(x for x in cost.stack_cost(cfg).lines if x.tier == "spot").price
    assert (p.value, p.floor, p.ceiling) == (None, pytest.approx(0.18), 2.00)


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


def test_preview_json_carries_the_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "prod", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cost"]["currency"] == "USD"
    assert {x["pool"] for x in doc["cost"]["lines"]} == {"v6e-train", "v5e-serve"}
    assert doc["cost"]["range"]["low"]["hourly"] == pytest.approx(79.68)
    assert doc["cost"]["range"]["high"]["hourly"] == pytest.approx(105.60)
    assert doc["cost"]["range"]["high"]["exact"] is True
    assert doc["cost"]["prices"]["snapshotDate"] == "2024-12-20"


def test_a_finished_training_run_releases_its_slices_after_a_minute_by_default() -> None:
    # With ttlSecondsAfterFinished 3600 a finished prod run held 2 v6e 4x4 slices an hour longer.
    assert load_stack("prod").workloads.train.ttl_seconds_after_finished == 60


def test_the_cost_preview_prices_the_wait_of_a_finished_run_on_its_first_tier() -> None:
    # prod: 2 slices of v6e 4x4 (16 chips each) on the reservation, priced at $1.89/chip-h by the stack.
    wait = cost.stack_cost(load_stack("prod")).finished_job_wait
    assert (wait.pool, wait.chips, wait.seconds, wait.price.value) == ("v6e-train", 32, 60, 1.89)
    assert wait.per_run == pytest.approx(1.008)
    assert wait.text() == (
        "a finished training run keeps its 32 chips on v6e-train for 60 s until KubeRay deletes its cluster "
        "(ttlSecondsAfterFinished): $1.01 per run"
    )


def test_a_stack_without_a_training_job_has_no_finished_run_to_price() -> None:
    raw = read_stack_file(resolve_stack_file("prod")[1])
    del raw["workloads"]["train"]
    assert cost.stack_cost(parse_stack_config(raw, "prod")).finished_job_wait is None


def test_an_unpublished_spot_price_prices_the_wait_as_a_lower_bound() -> None:
    # dev: one v6e 4x4 slice (16 chips) on spot, unpublished; at least 9 % of on-demand $2.70.
    wait = cost.stack_cost(load_stack("dev")).finished_job_wait
    assert wait.text() == (
        "a finished training run keeps its 16 chips on v6e-dev for 60 s until KubeRay deletes its cluster "
        "(ttlSecondsAfterFinished): at least $0.06 per run"
    )


def test_an_elastic_run_s_wait_is_priced_at_its_most_slices_and_names_the_range() -> None:
    # prod with slices {min: 1, max: 2}: 16 to 32 chips, priced at 32 x $1.89/chip-h for 60 s.
    raw = read_stack_file(resolve_stack_file("prod")[1])
    raw["workloads"]["train"]["slices"] = {"min": 1, "max": 2}
    wait = cost.stack_cost(parse_stack_config(raw, "prod")).finished_job_wait
    assert (wait.chips, wait.min_chips) == (32, 16)
    assert wait.text() == (
        "a finished training run keeps its 16 to 32 chips (elastic) on v6e-train for 60 s until KubeRay deletes its "
        "cluster (ttlSecondsAfterFinished): $1.01 per run, priced at the most"
    )
    assert wait.as_json()["minChips"] == 16
