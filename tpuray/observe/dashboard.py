"""The stack's Cloud Monitoring dashboard: panels as PromQL, laid out as dashboard JSON.

The JSON follows the projects.dashboards resource of the Cloud Monitoring API v1
(https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards): a mosaicLayout of
48 columns whose tiles hold xyChart widgets with `timeSeriesQuery.prometheusQuery`
(https://cloud.google.com/monitoring/dashboards/prometheus) or text widgets. Every query is
checked against tpuray/data/metrics.yaml by the tests; docs/observability.md explains each
panel.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tpuray.config import SlicePoolConfig, StackConfig
from tpuray.observe.queries import selector
from tpuray.observe.rules import SYSTEM_DUTY, SYSTEM_TENSORCORE, hourly_cost_expr, pool_chips, ray_scope

COLUMNS = 48
TILE_W, TILE_H = 16, 12


@dataclass(frozen=True)
class Panel:
    section: str
    title: str
    queries: tuple[tuple[str, str], ...]  # (PromQL, legend template)
    unit: str = ""


def _pool_nodes(cfg: StackConfig, pool: SlicePoolConfig) -> str:
    """The pool's TPU nodes, one series per node_name, for `and on (node_name)` joins."""
    sel = selector(cluster_name=cfg.cluster.name, model=pool.shape.gke_accelerator, tpu_topology=pool.topology)
    return f"count by (node_name) ({SYSTEM_TENSORCORE}{sel})"


def pool_panels(cfg: StackConfig, pool: SlicePoolConfig) -> list[Panel]:
    section = f"Slice pool {pool.name} ({pool.generation} {pool.topology} x {pool.slices})"
    cluster = selector(cluster_name=cfg.cluster.name)
    nodes = _pool_nodes(cfg, pool)
    shape_sel = selector(cluster_name=cfg.cluster.name, model=pool.shape.gke_accelerator, tpu_topology=pool.topology)
    return [
        Panel(section, f"{pool.name}: chips allocated", tuple((q, label) for q, _, label in pool_chips(cfg, pool))),
        Panel(
            section,
            f"{pool.name}: TPU duty cycle (%)",
            ((f"avg by (node_name) ({SYSTEM_DUTY}{cluster}) and on (node_name) {nodes}", "${labels.node_name}"),),
            "%",
        ),
        Panel(
            section,
            f"{pool.name}: TensorCore utilization (%)",
            ((f"avg by (node_name) ({SYSTEM_TENSORCORE}{shape_sel})", "${labels.node_name}"),),
            "%",
        ),
        Panel(
            section,
            f"{pool.name}: HBM used (%)",
            (
                (
                    f"100 * sum by (node_name) (kubernetes_io:node_accelerator_memory_used{cluster}) / "
                    f"sum by (node_name) (kubernetes_io:node_accelerator_memory_total{cluster}) "
                    f"and on (node_name) {nodes}",
                    "${labels.node_name}",
                ),
            ),
            "%",
        ),
    ]


def train_panels(cfg: StackConfig) -> list[Panel]:
    scope = ray_scope(cfg)
    rank0 = selector(**scope, rank="0")
    sel = selector(**scope)
    return [
        Panel("Ray Train", "Steps per second", ((f"deriv(ray_tpuray_train_step{rank0}[5m])", "${labels.run}"),), "1/s"),
        Panel(
            "Ray Train",
            "Seconds since each rank's last step",
            ((f"time() - ray_tpuray_train_last_step_timestamp_seconds{sel}", "${labels.run} rank ${labels.rank}"),),
            "s",
        ),
        Panel(
            "Ray Train",
            "Last checkpoint age (s)",
            ((f"time() - max by (run) (ray_tpuray_train_last_checkpoint_timestamp_seconds{sel})", "${labels.run}"),),
            "s",
        ),
        # Goodput (ray_apps/goodput.py): productive slice time / slice time held, and what the rest went to.
        Panel("Ray Train", "Goodput", ((f"max by (run) (ray_tpuray_train_goodput_ratio{sel})", "${labels.run}"),), "1"),
        Panel(
            "Ray Train",
            "Slice-seconds held, and badput by cause",
            (
                (f"max by (run) (ray_tpuray_train_allocated_slice_seconds{sel})", "${labels.run} held"),
                (
                    f"max by (run, cause) (ray_tpuray_train_badput_slice_seconds{sel})",
                    "${labels.run} ${labels.cause}",
                ),
            ),
            "s",
        ),
        Panel(
            "Ray Train", "Whole slices up", ((f"max by (run) (ray_tpuray_train_slices_up{sel})", "${labels.run}"),), "1"
        ),
    ]


def serve_panels(cfg: StackConfig) -> list[Panel]:
    sel = selector(**ray_scope(cfg))
    return [
        Panel(
            "Ray Serve",
            "Requests per second",
            (
                (
                    f"sum by (application) (rate(ray_serve_deployment_request_counter_total{sel}[5m]))",
                    "${labels.application}",
                ),
            ),
            "1/s",
        ),
        Panel(
            "Ray Serve",
            "p99 latency (ms)",
            (
                (
                    "histogram_quantile(0.99, sum by (application, le) "
                    f"(rate(ray_serve_deployment_processing_latency_ms_bucket{sel}[5m])))",
                    "${labels.application}",
                ),
            ),
            "ms",
        ),
        Panel(
            "Ray Serve",
            "Errors per second",
            (
                (
                    f"sum by (application) (rate(ray_serve_deployment_error_counter_total{sel}[5m]))",
                    "${labels.application}",
                ),
            ),
            "1/s",
        ),
        Panel(
            "Ray Serve",
            "Healthy replicas, and application state (6 = RUNNING)",
            (
                (f"sum by (deployment) (ray_serve_deployment_replica_healthy{sel})", "healthy ${labels.deployment}"),
                (f"ray_serve_application_status{sel}", "state ${labels.application}"),
            ),
        ),
    ]


def cost_panel(cfg: StackConfig) -> Panel:
    expr, unpriced = hourly_cost_expr(cfg)
    title = "Running TPU cost (USD/h, at each pool's first capacity tier)"
    if unpriced:
        title += f"; not priced: {', '.join(unpriced)}"
    return Panel("Cost", title, ((expr, "USD/h"),), "USD/h")


def panels(cfg: StackConfig) -> list[Panel]:
    out = [cost_panel(cfg)]
    for pool in cfg.slice_pools:
        out += pool_panels(cfg, pool)
    if cfg.workloads.train is not None:
        out += train_panels(cfg)
    if cfg.workloads.serve is not None:
        out += serve_panels(cfg)
    return out


def _chart(panel: Panel) -> dict[str, Any]:
    data_sets = []
    for query, legend in panel.queries:
        series: dict[str, Any] = {"prometheusQuery": query}
        if panel.unit:
            series["unitOverride"] = panel.unit
        data_sets.append({"timeSeriesQuery": series, "plotType": "LINE", "legendTemplate": legend})
    return {"title": panel.title, "xyChart": {"dataSets": data_sets, "yAxis": {"scale": "LINEAR"}}}


def dashboard(cfg: StackConfig) -> dict[str, Any]:
    """The projects.dashboards body: a header per section, then its panels, three to a row."""
    tiles: list[dict[str, Any]] = []
    y = 0
    sections: dict[str, list[Panel]] = {}
    for panel in panels(cfg):
        sections.setdefault(panel.section, []).append(panel)
    for section, members in sections.items():
        tiles.append(
            {"xPos": 0, "yPos": y, "width": COLUMNS, "height": 4, "widget": {"sectionHeader": {"subtitle": section}}}
        )
        y += 4
        for i, panel in enumerate(members):
            col = i % (COLUMNS // TILE_W)
            tiles.append({"xPos": col * TILE_W, "yPos": y, "width": TILE_W, "height": TILE_H, "widget": _chart(panel)})
            if col == COLUMNS // TILE_W - 1 or i == len(members) - 1:
                y += TILE_H
    return {
        "displayName": f"tpuray {cfg.stack} ({cfg.cluster.name})",
        "mosaicLayout": {"columns": COLUMNS, "tiles": tiles},
        "labels": {"tpuray": "", f"stack-{cfg.stack}": ""},
    }


def dashboard_json(cfg: StackConfig) -> str:
    return json.dumps(dashboard(cfg), indent=1, sort_keys=True)
