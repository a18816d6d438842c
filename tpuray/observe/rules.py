"""The stack's alerts as Prometheus alerting rules (PromQL), one home for every expression.

The same rule groups are (1) written as a Prometheus rule file and unit-tested with
`promtool test rules` (tests/test_observe_rules.py), (2) evaluated by a real Prometheus
against the local emulator (`tpuray local up --metrics`), and (3) declared on GCP as Cloud
Monitoring alerting policies with PromQL conditions (infra/components/observability.py).

Why Cloud Monitoring PromQL alert policies rather than Managed Prometheus Rules objects:
the TPU duty-cycle, TensorCore and HBM series are GKE *system* metrics stored in Cloud
Monitoring (kubernetes_io:node_accelerator_*), which Cloud Monitoring's PromQL queries next
to the Ray metrics Managed Prometheus collects
(https://cloud.google.com/monitoring/promql/promql-mapping); an alert policy notifies the
stack's notification channels directly, the same channels as its budget, with no in-cluster
rule evaluator or Alertmanager to configure; and Pulumi declares them next to the dashboard
and the budget, so `tpuray preview` lists them and the SDK's input types check them
(https://cloud.google.com/monitoring/promql/create-promql-alerts).

Scoping labels: GKE system metrics carry `cluster_name`; series collected by Managed
Prometheus carry `cluster` and `namespace` (the target labels Managed Prometheus adds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from tpuray import catalog
from tpuray.config import SlicePoolConfig, StackConfig
from tpuray.cost import table as cost
from tpuray.observe.queries import selector

# The evaluation interval this project's AlertPolicies ask Cloud Monitoring for, and the rule
# file's group interval (promtool's tests evaluate at the same pace, tests/fixtures/observe/alerts_test.yaml).
EVALUATION_INTERVAL = "30s"
# Ray Serve's numeric application state for RUNNING (ray serve application_state.py).
SERVE_RUNNING = 6
SYSTEM_DUTY = "kubernetes_io:node_accelerator_duty_cycle"
SYSTEM_TENSORCORE = "kubernetes_io:node_accelerator_tensorcore_utilization"


@dataclass(frozen=True)
class Rule:
    alert: str
    expr: str
    for_: str  # Prometheus duration, e.g. "30m"
    summary: str
    labels: dict[str, str] = field(default_factory=dict)

    def as_prometheus(self) -> dict[str, Any]:
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": self.labels,
            "annotations": {"summary": self.summary},
        }


def duration(seconds: int) -> str:
    """Seconds as a Prometheus duration ("90m", "45s"): the form promtool and alert policies take."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def ray_scope(cfg: StackConfig) -> dict[str, str]:
    return {"cluster": cfg.cluster.name, "namespace": cfg.workloads.namespace}


def pool_shapes(pool: SlicePoolConfig) -> list[tuple[str, str, str, str]]:
    """(gke accelerator, topology, generation, first tier) of the pool's shape and fallbacks."""
    shapes = [(pool.shape.gke_accelerator, pool.topology, pool.generation, pool.capacity[0].kind.key)]
    for fb in pool.fallback:
        shape = catalog.lookup(fb.generation, fb.topology)
        shapes.append((shape.gke_accelerator, fb.topology, fb.generation, fb.capacity[0].kind.key))
    return shapes


def pool_chips(cfg: StackConfig, pool: SlicePoolConfig) -> list[tuple[str, float | None, str]]:
    """(PromQL of the chips allocated to one shape of the pool, USD per chip-hour, label).

    A chip is allocated while its node exists: the TensorCore utilization host metric has one
    series per chip on every TPU node, busy or not.
    """
    out = []
    for accel, topology, gen, tier in pool_shapes(pool):
        sel = selector(cluster_name=cfg.cluster.name, model=accel, tpu_topology=topology)
        price = cost.price(cfg, gen, tier).value
        if price is None:
            price = cost.price(cfg, gen, "on-demand").value
        out.append((f"count({SYSTEM_TENSORCORE}{sel})", price, f"{pool.name} {gen} {topology} {tier}"))
    return out


def hourly_cost_expr(cfg: StackConfig) -> tuple[str, list[str]]:
    """PromQL of the stack's running TPU cost in USD/h, and the shapes it cannot price."""
    terms, unpriced = [], []
    for pool in cfg.slice_pools:
        for chips, price, label in pool_chips(cfg, pool):
            if price is None:
                unpriced.append(label)
                continue
            terms.append(f"(({chips} or vector(0)) * {price:g})")
    return (" + ".join(terms) or "vector(0)"), unpriced


def hung_gang_step_rule(cfg: StackConfig) -> Rule:
    hung = cfg.observability.hung_gang
    scope = selector(**ray_scope(cfg))
    return Rule(
        alert="TpurayHungGangStepStalled",
        expr=(
            f"(time() - ray_tpuray_train_last_step_timestamp_seconds{scope}) > "
            f"clamp_min(ray_tpuray_train_step_seconds_median{scope} * {hung.step_factor:g}, {hung.floor_seconds})"
        ),
        for_="1m",
        summary=(
            "Training run {{ $labels.run }}: rank {{ $labels.rank }} on slice {{ $labels.slice }} worker "
            f"{{{{ $labels.worker_id }}}} completed no step within max({hung.step_factor:g} x median step time, "
            f"{hung.floor_seconds}s)"
        ),
        labels={"severity": "critical", "stack": cfg.stack},
    )


def hung_gang_tpu_rule(cfg: StackConfig) -> Rule:
    hung = cfg.observability.hung_gang
    sel = selector(cluster_name=cfg.cluster.name)
    return Rule(
        alert="TpurayHungGangTpuIdle",
        expr=f"max by (node_name) ({SYSTEM_DUTY}{sel}) < {hung.duty_cycle_percent:g}",
        for_=duration(hung.duty_cycle_minutes * 60),
        summary=(
            "TPU node {{ $labels.node_name }} runs a TPU program but its duty cycle stayed below "
            f"{hung.duty_cycle_percent:g}% for {hung.duty_cycle_minutes}m"
        ),
        labels={"severity": "critical", "stack": cfg.stack},
    )


def stuck_deploy_rule(cfg: StackConfig) -> Rule | None:
    serve = cfg.workloads.serve
    if serve is None:
        return None
    return Rule(
        alert="TpurayServeStuckDeploy",
        expr=f"ray_serve_application_status{selector(**ray_scope(cfg))} != {SERVE_RUNNING}",
        for_=duration(serve.service_unhealthy_seconds),
        summary=(
            "Serve application {{ $labels.application }} has not been RUNNING for "
            f"{duration(serve.service_unhealthy_seconds)} (status {{{{ $value }}}}; 5 = DEPLOYING)"
        ),
        labels={"severity": "critical", "stack": cfg.stack},
    )


def idle_slice_rule(cfg: StackConfig, pool: SlicePoolConfig) -> Rule:
    accel, topology = pool.shape.gke_accelerator, pool.topology
    nodes = selector(cluster_name=cfg.cluster.name, model=accel, tpu_topology=topology)
    busy = selector(cluster_name=cfg.cluster.name)
    return Rule(
        alert="TpurayIdleSlice",
        expr=(f"count by (node_name) ({SYSTEM_TENSORCORE}{nodes}) unless on (node_name) ({SYSTEM_DUTY}{busy} > 0)"),
        for_=duration(pool.idle_timeout_minutes * 60),
        summary=(
            f"Slice pool {pool.name}: TPU node {{{{ $labels.node_name }}}} has been allocated with no TPU work "
            f"for {pool.idle_timeout_minutes}m"
        ),
        labels={"severity": "warning", "stack": cfg.stack, "pool": pool.name},
    )


def budget_rules(cfg: StackConfig) -> list[Rule]:
    budget = cfg.observability.budget
    if budget is None:
        return []
    hourly, unpriced = hourly_cost_expr(cfg)
    hours = cost.hours_per_month()
    # Nothing is silently priced at zero: the alert names what it could not price.
    caveat = f" (not priced: {', '.join(unpriced)})" if unpriced else ""
    rules = []
    for fraction in sorted(budget.thresholds):
        percent = round(fraction * 100)
        limit = budget.monthly_usd * fraction
        rules.append(
            Rule(
                alert=f"TpurayBudgetProjected{percent}",
                expr=f"({hourly}) * {hours} > {limit:g}",
                for_="30m",
                summary=(
                    f"Stack {cfg.stack}: TPUs allocated now project to {{{{ $value | humanize }}}} USD a month, "
                    f"over {percent}% of the {budget.monthly_usd:g} USD budget{caveat}"
                ),
                labels={"severity": "critical" if fraction >= 1 else "warning", "stack": cfg.stack},
            )
        )
    return rules


def stack_rules(cfg: StackConfig) -> list[Rule]:
    rules = [hung_gang_step_rule(cfg), hung_gang_tpu_rule(cfg)]
    stuck = stuck_deploy_rule(cfg)
    if stuck is not None:
        rules.append(stuck)
    rules += [idle_slice_rule(cfg, pool) for pool in cfg.slice_pools]
    rules += budget_rules(cfg)
    return rules


def group_name(cfg: StackConfig) -> str:
    return f"tpuray-{cfg.stack}"


def rule_file(cfg: StackConfig, rules: list[Rule] | None = None, interval: str = EVALUATION_INTERVAL) -> str:
    """A Prometheus rule file (the format of `promtool check rules` and Prometheus itself).

    `interval` is the group's evaluation interval: GKE's by default; the local Prometheus
    (tpuray.local.localmetrics) evaluates as often as it scrapes. Prometheus starts a group's
    evaluations at an offset within the interval (a hash of the group, rules/group.go
    `EvalTimestamp`), so at 30 s a rule first fired up to 30 s after its data arrived here
    (measured: 7 s and 31 s in two starts of the same test)."""
    rules = stack_rules(cfg) if rules is None else rules
    doc = {"groups": [{"name": group_name(cfg), "interval": interval, "rules": [r.as_prometheus() for r in rules]}]}
    return yaml.safe_dump(doc, sort_keys=False, width=200)
