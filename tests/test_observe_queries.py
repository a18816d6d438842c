"""Every PromQL query of the dashboards and alerts parses and names only documented metrics."""

from __future__ import annotations

import json

import pytest

from tests.conftest import STACKS
from tpuray.config.checks import load_stack
from tpuray.observe import dashboard, queries, rules


def stack_queries(stack: str) -> list[str]:
    cfg = load_stack(stack)
    found = [r.expr for r in rules.stack_rules(cfg)]
    for panel in dashboard.panels(cfg):
        found += [q for q, _ in panel.queries]
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_query_parses_and_names_only_documented_metrics(stack: str) -> None:
    problems = [p for q in stack_queries(stack) for p in queries.query_problems(q)]
    assert problems == []


def test_every_documented_metric_names_a_known_source() -> None:
    doc = queries.documented()
    assert {m["source"] for m in doc["metrics"].values()} <= set(doc["sources"])


def test_every_documented_metric_is_used_by_some_query() -> None:
    used = {name for stack in STACKS for q in stack_queries(stack) for name in queries.metric_names(q)}
    assert queries.documented_names() - used == set()


def test_the_tpu_metric_names_are_the_gke_system_metrics_in_promql_form() -> None:
    names = queries.documented_names()
    assert {
        "kubernetes_io:node_accelerator_duty_cycle",
        "kubernetes_io:node_accelerator_tensorcore_utilization",
        "kubernetes_io:node_accelerator_memory_used",
        "kubernetes_io:node_accelerator_memory_total",
    } <= names


def test_an_undocumented_metric_is_reported_by_name() -> None:
    assert queries.query_problems("rate(tpu_made_up_total[5m])") == [
        "tpu_made_up_total is not in tpuray/data/metrics.yaml: rate(tpu_made_up_total[5m])"
    ]


def test_a_query_that_does_not_parse_is_reported() -> None:
    (problem,) = queries.query_problems("sum(ray_serve_application_status")
    assert problem.startswith("does not parse (")


def test_a_query_without_a_metric_is_reported() -> None:
    assert queries.query_problems("vector(1)") == ["selects no metric: vector(1)"]


def test_metric_names_come_from_inside_functions_ranges_and_joins() -> None:
    query = "deriv(a[5m]) unless on (n) (b > 0) or count(c:d)"
    assert queries.metric_names(query) == ["a", "b", "c:d"]


# ---------------------------------------------------------------- dashboard JSON shape


def test_prod_dashboard_has_the_issue_panels() -> None:
    titles = [p.title for p in dashboard.panels(load_stack("prod"))]
    assert titles[0].startswith("Running TPU cost (USD/h")
    for pool in ("v6e-train", "v5e-serve"):
        assert [t for t in titles if t.startswith(pool + ":")] == [
            f"{pool}: chips allocated",
            f"{pool}: TPU duty cycle (%)",
            f"{pool}: TensorCore utilization (%)",
            f"{pool}: HBM used (%)",
        ]
    assert {"Steps per second", "Last checkpoint age (s)", "Requests per second", "p99 latency (ms)"} <= set(titles)
    assert "Errors per second" in titles
    assert "Healthy replicas, and application state (6 = RUNNING)" in titles


@pytest.mark.parametrize("stack", STACKS)
def test_dashboard_tiles_fit_the_48_column_grid_without_overlap(stack: str) -> None:
    body = json.loads(dashboard.dashboard_json(load_stack(stack)))
    assert set(body) == {"displayName", "mosaicLayout", "labels"}
    assert body["mosaicLayout"]["columns"] == 48
    cells: set[tuple[int, int]] = set()
    for tile in body["mosaicLayout"]["tiles"]:
        assert set(tile) == {"xPos", "yPos", "width", "height", "widget"}
        assert tile["xPos"] + tile["width"] <= 48
        area = {(x, y) for x in range(tile["xPos"], tile["xPos"] + tile["width"])
                for y in range(tile["yPos"], tile["yPos"] + tile["height"])}  # fmt: skip
        assert not cells & area
        cells |= area


def test_every_chart_query_is_a_prometheus_query() -> None:
    body = dashboard.dashboard(load_stack("prod"))
    charts = [t["widget"]["xyChart"] for t in body["mosaicLayout"]["tiles"] if "xyChart" in t["widget"]]
    assert len(charts) == 19  # the goodput panels: ratio, slice-seconds by cause, slices up
    for chart in charts:
        for data_set in chart["dataSets"]:
            assert set(data_set["timeSeriesQuery"]) <= {"prometheusQuery", "unitOverride"}
            assert queries.query_problems(data_set["timeSeriesQuery"]["prometheusQuery"]) == []
