"""What `tpuray preview prod` and `tpuray render prod` show of the observability objects."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tpuray.cli import main


def test_preview_prod_lists_the_dashboard_every_alert_policy_and_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preview", "prod", "--json"]) == 0
    resources = json.loads(capsys.readouterr().out)["resources"]
    kinds = Counter(r["type"] for r in resources)
    assert kinds["gcp:monitoring/dashboard:Dashboard"] == 1
    assert kinds["gcp:billing/budget:Budget"] == 1
    alerts = sorted(r["name"] for r in resources if r["type"] == "gcp:monitoring/alertPolicy:AlertPolicy")
    assert alerts == [
        "obs-alert-TpurayBudgetProjected100",
        "obs-alert-TpurayBudgetProjected50",
        "obs-alert-TpurayBudgetProjected90",
        "obs-alert-TpurayHungGangStepStalled",
        "obs-alert-TpurayHungGangTpuIdle",
        "obs-alert-TpurayIdleSlice-v5e-serve",
        "obs-alert-TpurayIdleSlice-v6e-train",
        "obs-alert-TpurayServeStuckDeploy",
    ]


def test_render_writes_no_in_cluster_rule_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The alerts are Cloud Monitoring PromQL policies (docs/observability.md says why), so
    no Managed Prometheus Rules/ClusterRules/GlobalRules object goes into the cluster."""
    assert main(["render", "prod", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    docs = [yaml.safe_load(p.read_text()) for p in sorted(tmp_path.glob("*.yaml"))]
    assert docs, "render wrote nothing"
    assert [d["kind"] for d in docs if d["apiVersion"].startswith("monitoring.googleapis.com/")] == []
    assert not {"Rules", "ClusterRules", "GlobalRules", "PrometheusRule"} & {d["kind"] for d in docs}
