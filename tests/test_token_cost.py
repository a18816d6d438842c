"""Dollars per million output tokens per capacity tier, and `tpuray cost STACK --tokens-per-second N`."""

from __future__ import annotations

import json

import pytest

from tpuray.cli import main
from tpuray.config.checks import load_stack
from tpuray.cost import token_cost


def test_prod_v5e_slice_at_1000_tokens_per_second_costs_2_67_per_million_on_demand() -> None:
    (row,) = token_cost.per_token_costs(load_stack("prod"), 1000.0)
    # 8 chips x $1.20/chip-h = $9.60/h for 3.6 M tokens/h
    assert (row.tier, row.chips, row.text()) == ("on-demand", 8, "$2.6667")


def test_an_unpublished_spot_price_shows_its_floor_never_zero() -> None:
    spot, on_demand = token_cost.per_token_costs(load_stack("dev"), 250.0)
    # v6e 2x2: 4 chips; spot floor $0.243/chip-h (9 % of $2.70), on-demand $2.70
    assert (spot.tier, spot.usd_per_million, spot.text()) == ("spot", None, "at least $1.0800")
    assert (on_demand.tier, on_demand.text()) == ("on-demand", "$12.0000")


def test_cost_cli_prints_the_per_token_figure_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "prod", "--tokens-per-second", "1000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(t["tier"], round(t["usdPerMillionOutputTokens"], 4)) for t in doc["tiers"]] == [("on-demand", 2.6667)]


def test_a_throughput_of_zero_is_refused_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "prod", "--tokens-per-second", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --tokens-per-second: 0 is invalid; give the measured output tokens/s (> 0)"
    )
