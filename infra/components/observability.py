"""Observability: the stack's dashboard, PromQL alert policies and budget, plus the cluster
settings that make the metrics exist and the labels that make the cost attributable.

What turns the metrics on (pulumi-gcp 10.2.0 `gcp.container.Cluster`):
- `monitoring_config.managed_prometheus.enabled`: Google Cloud Managed Service for
  Prometheus, managed collection. The Ray operator add-on's `ray_cluster_monitoring_config`
  (already on in cluster.py; GKE API RayClusterMonitoringConfig: "Enable metrics collection
  for Ray clusters") collects the Ray pods' metrics with it; our training gauges
  (ray_tpuray_train_*) are Ray application metrics on the same endpoint, so nothing is
  added for Ray (docs/observability.md says what was not verified).
- `monitoring_config.enable_components` with SYSTEM_COMPONENTS: the GKE system metrics, which
  include the TPU node metrics kubernetes.io/node/accelerator/{duty_cycle,
  tensorcore_utilization,memory_used,memory_total}
  (https://cloud.google.com/monitoring/api/metrics_kubernetes); POD adds the kube-state pod
  metrics (restarts, phases) that explain a worker group that never starts.
- `logging_config.enable_components` with WORKLOADS: container logs, libtpu's included.
- `cost_management_config.enabled`: GKE cost allocation, so the billing export breaks the
  cluster's cost down by namespace and Kubernetes label.
- `resource_labels` on the cluster (GKE applies them to the nodes' VMs and disks) and on
  every node pool: tpuray-stack, tpuray-pool and tpuray-tier (tpuray.labels). The budget
  filters on tpuray-stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from tpuray import labels
from tpuray.config import StackConfig
from tpuray.observe import dashboard, rules

MONITORING_COMPONENTS = ["SYSTEM_COMPONENTS", "POD"]
LOGGING_COMPONENTS = ["SYSTEM_COMPONENTS", "WORKLOADS"]


def cost_labels(stack: str, pool: str, tier: str) -> dict[str, str]:
    """The cost-allocation labels of one node pool (GCP label values: lowercase, '-')."""
    return {labels.COST_STACK: stack, labels.COST_POOL: pool, labels.COST_TIER: tier}


def cluster_settings(stack: str) -> dict[str, Any]:
    """gcp.container.Cluster keyword arguments that turn metrics, logs and cost allocation on."""
    return {
        "monitoring_config": {
            "enable_components": MONITORING_COMPONENTS,
            "managed_prometheus": {"enabled": True},
        },
        "logging_config": {"enable_components": LOGGING_COMPONENTS},
        "cost_management_config": {"enabled": True},
        "resource_labels": {labels.COST_STACK: stack},
    }


def _seconds(duration: str) -> str:
    """A Prometheus duration ("15m", "1h") as the API's seconds ("900s")."""
    unit = {"s": 1, "m": 60, "h": 3600}[duration[-1]]
    return f"{int(duration[:-1]) * unit}s"


@dataclass(frozen=True)
class ObservabilityArgs:
    config: StackConfig


class Observability(pulumi.ComponentResource):
    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:Observability", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.config
        project = cfg.gcp.project
        channels = cfg.observability.notification_channels

        gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            project=project,
            dashboard_json=dashboard.dashboard_json(cfg),
            opts=child,
        )
        for rule in rules.stack_rules(cfg):
            suffix = rule.labels.get("pool", "")
            logical = f"{name}-alert-{rule.alert}" + (f"-{suffix}" if suffix else "")
            gcp.monitoring.AlertPolicy(
                logical,
                project=project,
                display_name=f"tpuray {cfg.stack}: {rule.alert}" + (f" ({suffix})" if suffix else ""),
                combiner="OR",
                conditions=[
                    {
                        "display_name": rule.alert,
                        "condition_prometheus_query_language": {
                            "query": rule.expr,
                            "duration": _seconds(rule.for_),
                            "evaluation_interval": rules.EVALUATION_INTERVAL,
                            "labels": rule.labels,
                            "rule_group": rules.group_name(cfg),
                            "alert_rule": rule.alert,
                            # The Ray series exist only once a job runs: create the policy anyway.
                            "disable_metric_validation": True,
                        },
                    }
                ],
                documentation={
                    "content": f"{rule.summary}\n\nWhat it means and what to do: docs/observability.md, {rule.alert}.",
                    "mime_type": "text/markdown",
                },
                severity="CRITICAL" if rule.labels.get("severity") == "critical" else "WARNING",
                notification_channels=channels,
                user_labels={labels.COST_STACK: cfg.stack},
                opts=child,
            )
        budget = cfg.observability.budget
        if budget is not None:
            thresholds = [{"threshold_percent": t, "spend_basis": "CURRENT_SPEND"} for t in sorted(budget.thresholds)]
            # A forecast crossing the whole budget warns before the money is spent.
            thresholds.append({"threshold_percent": 1.0, "spend_basis": "FORECASTED_SPEND"})
            gcp.billing.Budget(
                f"{name}-budget",
                billing_account=budget.billing_account,
                display_name=f"tpuray {cfg.stack} ({cfg.gcp.project})",
                budget_filter={"labels": {labels.COST_STACK: cfg.stack}, "calendar_period": "MONTH"},
                amount={"specified_amount": {"currency_code": "USD", "units": str(round(budget.monthly_usd))}},
                threshold_rules=thresholds,
                all_updates_rule={"monitoring_notification_channels": channels} if channels else None,
                opts=child,
            )
        self.register_outputs({})
