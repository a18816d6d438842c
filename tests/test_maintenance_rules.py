"""A cluster's maintenance policy as GKE takes it: an RFC 5545 recurrence of the frequencies GKE
supports, at least 48 hours of maintenance in every rolling 32-day window (stretches of 4 hours or
more), and the exclusion limits by scope."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.stack_edits import STACKS, errors
from tpuray.checks import maintenance_rules
from tpuray.config.checks import parse_stack_config

AVAILABILITY = (
    "GKE needs at least 48 hours of maintenance availability in every rolling 32-day window, counting "
    "stretches of 4 hours or more"
)


def window(**keys: str) -> Any:
    return lambda c: c["cluster"]["maintenance"]["window"].update(keys)


def exclusions(*more: dict[str, str]) -> Any:
    return lambda c: c["cluster"]["maintenance"]["exclusions"].extend(more)


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_committed_weekend_windows_meet_every_rule(stack: str) -> None:
    assert maintenance_rules.stack_lines(parse_stack_config(copy.deepcopy(STACKS[stack]), stack)) == []


# ---------------------------------------------------------------------------- RRULE syntax


@pytest.mark.parametrize(
    ("recurrence", "problem"),
    [
        ("FREQ=HOURLY;INTERVAL=6", "FREQ=HOURLY is not supported by GKE; valid: DAILY, WEEKLY, MONTHLY, YEARLY"),
        ("FREQ=FORTNIGHTLY", "FREQ=FORTNIGHTLY is invalid; valid: DAILY, WEEKLY, MONTHLY, YEARLY"),
        (
            "FREQ=WEEKLY;BYDAY=SAT,SUN",
            "BYDAY=SAT,SUN is invalid: days are SU, MO, TU, WE, TH, FR, SA, optionally after a week number (1SA, -1FR)",
        ),
        ("FREQ=WEEKLY;BYDAY=1SA", "BYDAY=1SA is invalid: numbered days (1SA) go with FREQ=MONTHLY or FREQ=YEARLY only"),
        ("FREQ=WEEKLY;BYDAY=SA;BYDAY=SU", "BYDAY is given twice; each part goes once"),
        ("FREQ=WEEKLY;BYDAYS=SA,SU", "BYDAYS is not an RRULE part; valid: FREQ, UNTIL, COUNT, INTERVAL, BYDAY, "
         "WKST, BYSECOND, BYMINUTE, BYHOUR, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYMONTH, BYSETPOS"),
        ("FREQ=WEEKLY;BYDAY=SA,SU;", "'' is not NAME=VALUE"),
        ("FREQ=DAILY;COUNT=30;UNTIL=20270101T000000Z", "UNTIL and COUNT cannot both be given"),
        ("FREQ=DAILY;UNTIL=20270101", "UNTIL=20270101 is invalid: the window starts in UTC, so UNTIL is a UTC time, "
         "20270101T000000Z"),
        ("FREQ=WEEKLY;INTERVAL=0;BYDAY=SA", "INTERVAL=0 is invalid: INTERVAL is a whole number of at least 1"),
        ("FREQ=WEEKLY;BYDAY=SA;WKST=MONDAY", "WKST=MONDAY is invalid; valid: SU, MO, TU, WE, TH, FR, SA"),
        ("FREQ=MONTHLY;BYMONTHDAY=32", "BYMONTHDAY=32 is invalid: BYMONTHDAY takes a list of ±1..31"),
        ("FREQ=YEARLY;BYMONTH=-1", "BYMONTH=-1 is invalid: BYMONTH takes a list of 1..12"),
        ("FREQ=WEEKLY;BYMONTHDAY=1,15", "BYMONTHDAY cannot go with FREQ=WEEKLY"),
        ("FREQ=MONTHLY;BYYEARDAY=100", "BYYEARDAY cannot go with FREQ=MONTHLY; only with FREQ=YEARLY"),
        ("FREQ=MONTHLY;BYWEEKNO=20", "BYWEEKNO cannot go with FREQ=MONTHLY; only with FREQ=YEARLY"),
        ("FREQ=MONTHLY;BYSETPOS=-1", "BYSETPOS needs another BYxxx part to select from"),
        ("FREQ=MONTHLY;BYDAY=54SA", "BYDAY=54SA is invalid: a week number is 1..53 or -53..-1"),
    ],
)  # fmt: skip
def test_a_recurrence_gke_refuses_is_one_line_naming_the_part(recurrence: str, problem: str) -> None:
    assert errors("prod", window(recurrence=recurrence)) == [
        f"tpuray:cluster.maintenance.window.recurrence: {recurrence!r} is invalid; {problem} (RFC 5545 RRULE)"
    ]


def test_a_weekday_evening_recurrence_gke_documents_is_accepted() -> None:
    raw = copy.deepcopy(STACKS["prod"])
    raw["cluster"]["maintenance"]["window"]["recurrence"] = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
    assert parse_stack_config(raw, "prod").cluster.maintenance.window.recurrence == "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"


# ---------------------------------------------------------------------------- 48 hours in 32 days


def test_a_six_hour_sunday_window_allows_24_hours_in_32_days_and_is_refused() -> None:
    edit = window(start="2026-01-04T04:00:00Z", end="2026-01-04T10:00:00Z", recurrence="FREQ=WEEKLY;BYDAY=SU")
    assert errors("prod", edit) == [
        "tpuray:cluster.maintenance.window: FREQ=WEEKLY;BYDAY=SU from 04:00 to 10:00 UTC allows 24 hours in the 32 "
        f"days from 2026-01-04T10:00Z; {AVAILABILITY}: make the window longer or more frequent"
    ]


def test_a_first_saturday_of_the_month_window_leaves_32_days_without_maintenance() -> None:
    assert errors("prod", window(recurrence="FREQ=MONTHLY;BYDAY=1SA")) == [
        "tpuray:cluster.maintenance.window: FREQ=MONTHLY;BYDAY=1SA from 04:00 to 12:00 UTC allows 0 hours in the 32 "
        f"days from 2026-01-03T12:00Z; {AVAILABILITY}: make the window longer or more frequent"
    ]


def test_a_window_that_ends_by_count_leaves_no_maintenance_after_it() -> None:
    assert errors("prod", window(recurrence="FREQ=WEEKLY;BYDAY=SA,SU;COUNT=8")) == [
        "tpuray:cluster.maintenance.window: FREQ=WEEKLY;BYDAY=SA,SU;COUNT=8 from 04:00 to 12:00 UTC allows 0 hours "
        f"in the 32 days from 2026-01-25T12:00Z; {AVAILABILITY}: make the window longer or more frequent"
    ]


def test_a_daily_four_hour_window_is_accepted() -> None:
    raw = copy.deepcopy(STACKS["prod"])
    raw["cluster"]["maintenance"]["window"].update(
        start="2026-01-03T02:00:00Z", end="2026-01-03T06:00:00Z", recurrence="FREQ=DAILY"
    )
    assert parse_stack_config(raw, "prod").cluster.maintenance.window.recurrence == "FREQ=DAILY"


# ---------------------------------------------------------------------------- exclusions


def test_a_29_day_no_upgrades_exclusion_over_weekend_windows_leaves_no_maintenance_and_is_refused() -> None:
    june = {
        "name": "june-freeze",
        "start": "2026-06-01T00:00:00Z",
        "end": "2026-06-30T00:00:00Z",
        "scope": "NO_UPGRADES",
    }
    assert errors("prod", exclusions(june)) == [
        "tpuray:cluster.maintenance.exclusions[1]: NO_UPGRADES from 2026-06-01T00:00:00Z to 2026-06-30T00:00:00Z "
        f"leaves 0 hours of maintenance in the 32 days from 2026-05-31T12:00Z; {AVAILABILITY}: shorten it or make "
        "it NO_MINOR_OR_NODE_UPGRADES"
    ]


def test_a_two_week_no_upgrades_exclusion_over_weekend_windows_leaves_32_hours_and_is_refused() -> None:
    freeze = {
        "name": "launch-freeze",
        "start": "2026-06-01T00:00:00Z",
        "end": "2026-06-15T00:00:00Z",
        "scope": "NO_UPGRADES",
    }
    assert errors("prod", exclusions(freeze)) == [
        "tpuray:cluster.maintenance.exclusions[1]: NO_UPGRADES from 2026-06-01T00:00:00Z to 2026-06-15T00:00:00Z "
        f"leaves 32 hours of maintenance in the 32 days from 2026-05-17T12:00Z; {AVAILABILITY}: shorten it or make "
        "it NO_MINOR_OR_NODE_UPGRADES"
    ]


def test_a_one_week_no_upgrades_exclusion_leaves_exactly_the_48_hours() -> None:
    raw = copy.deepcopy(STACKS["prod"])
    freeze = {
        "name": "launch-freeze",
        "start": "2026-06-01T00:00:00Z",
        "end": "2026-06-08T00:00:00Z",
        "scope": "NO_UPGRADES",
    }
    raw["cluster"]["maintenance"]["exclusions"].append(freeze)
    assert len(parse_stack_config(raw, "prod").cluster.maintenance.exclusions) == 2


def test_a_fourth_no_upgrades_exclusion_is_refused() -> None:
    days = ["2026-02-14", "2026-05-02", "2026-08-01", "2026-11-28"]
    freezes = [
        {"name": f"freeze-{d}", "start": f"{d}T00:00:00Z", "end": f"{d}T23:00:00Z", "scope": "NO_UPGRADES"}
        for d in days
    ]
    assert errors("prod", exclusions(*freezes)) == [
        "tpuray:cluster.maintenance.exclusions[4]: a fourth NO_UPGRADES exclusion; GKE allows at most 3: use scope "
        "NO_MINOR_OR_NODE_UPGRADES for the others"
    ]


def test_more_than_20_exclusions_are_refused() -> None:
    releases = [
        {"name": f"release-{i:02d}", "start": f"2027-{1 + i // 2:02d}-0{1 + 4 * (i % 2)}T00:00:00Z",
         "end": f"2027-{1 + i // 2:02d}-0{3 + 4 * (i % 2)}T00:00:00Z", "scope": "NO_MINOR_OR_NODE_UPGRADES"}
        for i in range(20)
    ]  # fmt: skip
    assert errors("prod", exclusions(*releases)) == [
        "tpuray:cluster.maintenance.exclusions: 21 exclusions is more than GKE's 20"
    ]


def test_a_window_on_a_day_that_never_comes_allows_no_maintenance() -> None:
    assert errors("prod", window(recurrence="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30")) == [
        "tpuray:cluster.maintenance.window: FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30 from 04:00 to 12:00 UTC allows 0 "
        f"hours in the 32 days from 2026-01-03T04:00Z; {AVAILABILITY}: make the window longer or more frequent"
    ]


def test_a_no_upgrades_exclusion_over_30_days_gets_only_its_length_line() -> None:
    long = {
        "name": "summer-freeze",
        "start": "2026-06-01T00:00:00Z",
        "end": "2026-07-16T00:00:00Z",
        "scope": "NO_UPGRADES",
    }
    assert errors("prod", exclusions(long)) == [
        "tpuray:cluster.maintenance.exclusions[1]: a NO_UPGRADES exclusion of 45 days is longer than GKE's 30; use "
        "scope NO_MINOR_OR_NODE_UPGRADES for longer runs"
    ]


def test_a_cluster_without_a_maintenance_policy_has_no_maintenance_rule_to_break() -> None:
    assert maintenance_rules.maintenance_lines("tpuray:cluster", None) == []
