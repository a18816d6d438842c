"""A slice pool, and each fallback shape of its chain, must be in a zone that offers its TPU
generation (Google's TPU regions and zones table, tpuray/data/tpu_zones.yaml), unless it runs on
capacity the stack knows it has (unlistedCapacity). The snapshot is dated and its age warns."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest

from tests.stack_edits import STACKS, errors
from tpuray import catalog
from tpuray.checks import tpu_zones
from tpuray.config.checks import parse_stack_config


def parses(stack: str, edit: Any) -> bool:
    raw = copy.deepcopy(STACKS[stack])
    edit(raw)
    return parse_stack_config(raw, stack).stack == stack


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_committed_stack_is_in_zones_that_offer_its_generations(stack: str) -> None:
    assert tpu_zones.zone_lines(parse_stack_config(copy.deepcopy(STACKS[stack]), stack)) == []


def test_the_snapshot_names_only_catalog_generations_with_its_source_and_date() -> None:
    snap = tpu_zones.snapshot()
    assert set(snap["generations"]) <= set(catalog.GENERATIONS)
    assert snap["source"] == "https://cloud.google.com/tpu/docs/regions-zones"
    assert tpu_zones.snapshot_date() == dt.date(2026, 12, 2)


def test_v6e_is_offered_in_both_us_east5_zones_the_table_lists() -> None:
    assert tpu_zones.listed_zones("v6e") == (
        "us-central1-b",
        "us-east1-d",
        "us-east5-a",
        "us-east5-b",
        "europe-west4-a",
    )


def test_a_v5p_pool_in_a_zone_without_v5p_is_refused_naming_the_zones_that_have_it() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["slicePools"][0].update(generation="v5p", topology="2x2x4")

    assert errors("dev", edit) == [
        "tpuray:slicePools[0].generation: 'v5p' is not offered in zone 'us-east5-b' (the pool's zone, "
        "tpuray:gcp.zones[0]) by Google's TPU regions and zones table (snapshot 2026-12-02); v5p zones: "
        "us-central1-a, us-east5-a; if your project has v5p capacity there, set "
        "tpuray:slicePools[0].unlistedCapacity: true"
    ]


def test_the_same_v5p_pool_in_the_zone_that_has_v5p_is_accepted() -> None:
    assert parses("dev", lambda c: c["slicePools"][0].update(generation="v5p", topology="2x2x4", zone="us-east5-a"))


def test_a_pool_of_its_own_zone_is_refused_naming_that_key() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["slicePools"][1]["zone"] = "us-east5-c"

    assert errors("dev", edit) == [
        "tpuray:slicePools[1].generation: 'v6e' is not offered in zone 'us-east5-c' (tpuray:slicePools[1].zone) "
        "by Google's TPU regions and zones table (snapshot 2026-12-02); v6e zones: us-central1-b, us-east1-d, "
        "us-east5-a, us-east5-b, europe-west4-a; if your project has v6e capacity there, set "
        "tpuray:slicePools[1].unlistedCapacity: true"
    ]


def test_prods_v5e_serving_pool_without_its_unlisted_capacity_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        del c["slicePools"][1]["unlistedCapacity"]

    assert errors("prod", edit) == [
        "tpuray:slicePools[1].generation: 'v5e' is not offered in zone 'us-east5-a' (tpuray:slicePools[1].zone) "
        "by Google's TPU regions and zones table (snapshot 2026-12-02); v5e zones: us-central1-a, us-south1-a, "
        "us-west1-c, us-west4-a; if your project has v5e capacity there, set "
        "tpuray:slicePools[1].unlistedCapacity: true"
    ]


def test_a_fallback_shape_whose_generation_no_cluster_zone_offers_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        del c["slicePools"][0]["fallback"][0]["unlistedCapacity"]

    assert errors("prod", edit) == [
        "tpuray:slicePools[0].fallback[0].generation: 'v5e' is not offered in 'us-east5-b' (tpuray:gcp.zones) by "
        "Google's TPU regions and zones table (snapshot 2026-12-02); v5e zones: us-central1-a, us-south1-a, "
        "us-west1-c, us-west4-a; if your project has v5e capacity there, set "
        "tpuray:slicePools[0].fallback[0].unlistedCapacity: true"
    ]


def test_a_fallback_shape_is_accepted_when_one_cluster_zone_offers_it() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gcp"]["zones"] = ["us-east5-b", "us-east5-a"]
        c["slicePools"][0]["fallback"] = [{"generation": "v5p", "topology": "2x2x4"}]

    assert parses("prod", edit)


def test_unlisted_capacity_lets_a_pool_run_where_the_table_lists_no_such_tpu() -> None:
    assert parses(
        "dev", lambda c: c["slicePools"][0].update(generation="tpu7x", topology="2x2x2", unlistedCapacity=True)
    )


def test_unlisted_capacity_in_a_zone_the_table_lists_is_refused_as_needless() -> None:
    assert errors("dev", lambda c: c["slicePools"][1].update(unlistedCapacity=True)) == [
        "tpuray:slicePools[1].unlistedCapacity: true is not needed; Google's TPU table lists v6e in us-east5-b: "
        "remove it, so that the zone is checked again"
    ]


def test_unlisted_capacity_of_a_fallback_one_cluster_zone_offers_is_refused_as_needless() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["gcp"]["zones"] = ["us-east5-b", "us-east5-a"]
        c["slicePools"][0]["fallback"] = [{"generation": "v5p", "topology": "2x2x4", "unlistedCapacity": True}]

    assert errors("prod", edit) == [
        "tpuray:slicePools[0].fallback[0].unlistedCapacity: true is not needed; Google's TPU table lists v5p in "
        "us-east5-a: remove it, so that the zone is checked again"
    ]


def test_a_generation_the_table_does_not_list_is_not_judged() -> None:
    assert tpu_zones.offered("v9z", "us-east5-b") is None


def test_a_zone_of_a_region_the_snapshot_did_not_read_in_full_is_not_judged() -> None:
    assert tpu_zones.offered("v5e", "asia-southeast1-b") is None
    assert tpu_zones.offered("v5e", "us-east5-b") is False


def test_the_snapshot_age_is_a_note_until_180_days() -> None:
    assert tpu_zones.age_text(dt.date(2027, 5, 31)) == (
        "tpu zones: https://cloud.google.com/tpu/docs/regions-zones, snapshot 2026-12-02 (180 days old)"
    )


def test_the_snapshot_age_past_180_days_is_a_warning() -> None:
    assert tpu_zones.age_text(dt.date(2027, 6, 1)) == (
        "tpu zones: https://cloud.google.com/tpu/docs/regions-zones, snapshot 2026-12-02 (181 days old); "
        "warning: older than 180 days: compare with the page and update tpuray/data/tpu_zones.yaml (a pool on "
        "capacity the table does not list sets unlistedCapacity)"
    )
