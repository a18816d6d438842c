"""What the Pulumi program declares for observability: metrics on, labels, dashboard,
PromQL alert policies and the budget (inputs as the engine sees them, camelCase)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import mocked
from tests.test_config import errors_of
from tpuray.preview.mockrun import StackRun


def one(run: StackRun, type_token: str, name: str) -> dict:
    (found,) = [r.inputs for r in run.of_type(type_token) if r.name == name]
    return found


def test_cluster_turns_on_managed_prometheus_and_system_metrics(stack_run: StackRun) -> None:
    (cluster,) = [r.inputs for r in stack_run.of_type("gcp:container/cluster:Cluster")]
    assert cluster["monitoringConfig"] == {
        "enableComponents": ["SYSTEM_COMPONENTS", "POD"],
        "managedPrometheus": {"enabled": True},
    }
    assert cluster["loggingConfig"] == {"enableComponents": ["SYSTEM_COMPONENTS", "WORKLOADS"]}


def test_cluster_has_gke_cost_allocation_and_the_stack_label(stack_run: StackRun) -> None:
    (cluster,) = [r.inputs for r in stack_run.of_type("gcp:container/cluster:Cluster")]
    assert cluster["costManagementConfig"] == {"enabled": True}
    assert cluster["resourceLabels"] == {"tpuray-stack": stack_run.stack}


def test_every_node_pool_carries_stack_pool_and_tier_cost_labels() -> None:
    run = mocked("prod")
    labels = {r.name: r.inputs["nodeConfig"]["resourceLabels"] for r in run.of_type("gcp:container/nodePool:NodePool")}
    assert labels == {
        "gke-cpu": {"tpuray-stack": "prod", "tpuray-pool": "ray-system", "tpuray-tier": "system"},
        "v5e-serve-0": {"tpuray-stack": "prod", "tpuray-pool": "v5e-serve", "tpuray-tier": "on-demand"},
        "v6e-train-0": {"tpuray-stack": "prod", "tpuray-pool": "v6e-train", "tpuray-tier": "reservation"},
        "v6e-train-1": {"tpuray-stack": "prod", "tpuray-pool": "v6e-train", "tpuray-tier": "reservation"},
    }


def test_prod_declares_one_dashboard_with_every_panel_query() -> None:
    (dash,) = mocked("prod").of_type("gcp:monitoring/dashboard:Dashboard")
    body = json.loads(dash.inputs["dashboardJson"])
    assert dash.inputs["project"] == "acme-ml-prod"
    assert body["displayName"] == "tpuray prod (tpuray-prod)"
    assert len(body["mosaicLayout"]["tiles"]) == 24  # 21 + the goodput panels


def test_prod_declares_an_alert_policy_per_alert_rule() -> None:
    names = sorted(r.name for r in mocked("prod").of_type("gcp:monitoring/alertPolicy:AlertPolicy"))
    assert names == [
        "obs-alert-TpurayBudgetProjected100",
        "obs-alert-TpurayBudgetProjected50",
        "obs-alert-TpurayBudgetProjected90",
        "obs-alert-TpurayHungGangStepStalled",
        "obs-alert-TpurayHungGangTpuIdle",
        "obs-alert-TpurayIdleSlice-v5e-serve",
        "obs-alert-TpurayIdleSlice-v6e-train",
        "obs-alert-TpurayServeStuckDeploy",
    ]


def test_stuck_deploy_policy_is_a_promql_condition_to_the_stack_channel() -> None:
    policy = one(mocked("prod"), "gcp:monitoring/alertPolicy:AlertPolicy", "obs-alert-TpurayServeStuckDeploy")
    assert policy["combiner"] == "OR"
    assert policy["severity"] == "CRITICAL"
    assert policy["notificationChannels"] == ["projects/acme-ml-prod/notificationChannels/4471029384756102938"]
    (condition,) = policy["conditions"]
    assert condition["conditionPrometheusQueryLanguage"] == {
        "query": 'ray_serve_application_status{cluster="tpuray-prod",namespace="ray"} != 6',
        "duration": "900s",
        "evaluationInterval": "30s",
        "labels": {"severity": "critical", "stack": "prod"},
        "ruleGroup": "tpuray-prod",
        "alertRule": "TpurayServeStuckDeploy",
        "disableMetricValidation": True,
    }


def test_prod_budget_thresholds_channel_and_label_filter() -> None:
    budget = one(mocked("prod"), "gcp:billing/budget:Budget", "obs-budget")
    assert budget["billingAccount"] == "01A2B3-C4D5E6-F7A8B9"
    assert budget["amount"] == {"specifiedAmount": {"currencyCode": "USD", "units": "75000"}}
    assert budget["budgetFilter"] == {"labels": {"tpuray-stack": "prod"}, "calendarPeriod": "MONTH"}
    assert budget["thresholdRules"] == [
        {"thresholdPercent": 0.5, "spendBasis": "CURRENT_SPEND"},
        {"thresholdPercent": 0.9, "spendBasis": "CURRENT_SPEND"},
        {"thresholdPercent": 1.0, "spendBasis": "CURRENT_SPEND"},
        {"thresholdPercent": 1.0, "spendBasis": "FORECASTED_SPEND"},
    ]
    assert budget["allUpdatesRule"] == {
        "monitoringNotificationChannels": ["projects/acme-ml-prod/notificationChannels/4471029384756102938"]
    }


def test_a_stack_without_a_budget_declares_none() -> None:
    assert mocked("dev").of_type("gcp:billing/budget:Budget") == []


# ---------------------------------------------------------------- config errors


def test_a_notification_channel_that_is_not_a_resource_name_is_rejected(tmp_path) -> None:
    def edit(config: dict) -> None:
        config["tpuray:observability"] = {"notificationChannels": ["oncall@acme.example"]}

    (line,) = errors_of(tmp_path, edit)
    assert line.startswith("tpuray:observability.notificationChannels: ")
    assert "'oncall@acme.example' is not projects/<project>/notificationChannels/<id>" in line


@pytest.mark.parametrize("account", ["01A2B3C4D5E6F7A8B9", "billingAccounts/01A2B3-C4D5E6-F7A8B9"])
def test_a_billing_account_must_be_its_id(tmp_path, account: str) -> None:
    def edit(config: dict) -> None:
        config["tpuray:observability"] = {"budget": {"billingAccount": account, "monthlyUsd": 100}}

    (line,) = errors_of(tmp_path, edit)
    assert line.startswith(f"tpuray:observability.budget.billingAccount: '{account}' is invalid")


def test_budget_thresholds_are_fractions(tmp_path) -> None:
    def edit(config: dict) -> None:
        config["tpuray:observability"] = {
            "budget": {"billingAccount": "01A2B3-C4D5E6-F7A8B9", "monthlyUsd": 100, "thresholds": [50, 90]}
        }

    (line,) = errors_of(tmp_path, edit)
    assert line.startswith("tpuray:observability.budget: ")
    assert "thresholds [50.0, 90.0] must be fractions of the budget in (0, 2]" in line
