"""The stack's alert rules under `promtool test rules`: every alert firing and not firing.

promtool is the Debian `prometheus` package's rule tester (.ci/run installs it). Without it
these tests skip locally and fail under CI=true: a missing tool is never a silent pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tpuray.config.checks import load_stack
from tpuray.observe import rules

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "observe"
OBS_STACK = FIXTURES / "Pulumi.obs.yaml"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing under CI=true: .ci/run installs the Debian package prometheus")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return path


def run_promtool(tmp_path: Path, rule_text: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rules.yaml").write_text(rule_text)
    shutil.copy(FIXTURES / "alerts_test.yaml", tmp_path / "alerts_test.yaml")
    return subprocess.run([promtool(), *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_generated_rules_pass_promtool_check(tmp_path: Path) -> None:
    result = run_promtool(tmp_path, rules.rule_file(load_stack(str(OBS_STACK))), "check", "rules", "rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_every_alert_fires_and_stays_quiet_as_specified(tmp_path: Path) -> None:
    result = run_promtool(tmp_path, rules.rule_file(load_stack(str(OBS_STACK))), "test", "rules", "alerts_test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_cases_catch_a_wrong_hung_gang_floor(tmp_path: Path) -> None:
    text = rules.rule_file(load_stack(str(OBS_STACK))).replace("* 10, 900)", "* 10, 1900)")
    result = run_promtool(tmp_path, text, "test", "rules", "alerts_test.yaml")
    assert result.returncode == 1
    assert "alertname: TpurayHungGangStepStalled, time: 30m" in result.stdout + result.stderr


def test_promtool_cases_catch_a_wrong_budget_threshold(tmp_path: Path) -> None:
    text = rules.rule_file(load_stack(str(OBS_STACK))).replace("> 25000", "> 45000")
    result = run_promtool(tmp_path, text, "test", "rules", "alerts_test.yaml")
    assert result.returncode == 1
    assert "alertname: TpurayBudgetProjected50, time: 31m" in result.stdout + result.stderr


def test_the_obs_stack_has_every_alert_kind() -> None:
    names = [r.alert for r in rules.stack_rules(load_stack(str(OBS_STACK)))]
    assert names == [
        "TpurayHungGangStepStalled",
        "TpurayHungGangTpuIdle",
        "TpurayServeStuckDeploy",
        "TpurayIdleSlice",
        "TpurayIdleSlice",
        "TpurayBudgetProjected50",
        "TpurayBudgetProjected90",
        "TpurayBudgetProjected100",
    ]


def test_a_stack_without_serve_or_budget_has_no_stuck_deploy_or_budget_alert() -> None:
    cfg = load_stack(str(OBS_STACK))
    bare = cfg.model_copy(
        update={
            "workloads": cfg.workloads.model_copy(update={"serve": None}),
            "observability": cfg.observability.model_copy(update={"budget": None}),
        }
    )
    names = [r.alert for r in rules.stack_rules(bare)]
    assert names == ["TpurayHungGangStepStalled", "TpurayHungGangTpuIdle", "TpurayIdleSlice", "TpurayIdleSlice"]


def test_an_unpriced_shape_is_named_in_the_budget_alert_never_priced_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_stack(str(OBS_STACK))
    real_price = rules.cost.price

    def no_v5e_price(stack: object, generation: str, tier: str) -> rules.cost.Price:
        return rules.cost.Price(None, "no public price") if generation == "v5e" else real_price(stack, generation, tier)

    monkeypatch.setattr(rules.cost, "price", no_v5e_price)
    expr, missing = rules.hourly_cost_expr(cfg)
    assert missing == ["v5e-serve v5e 2x4 on-demand"]
    assert "tpu-v5-lite-podslice" not in expr
    assert rules.budget_rules(cfg)[0].summary.endswith("budget (not priced: v5e-serve v5e 2x4 on-demand)")


@pytest.mark.parametrize(("seconds", "text"), [(900, "15m"), (3600, "1h"), (45, "45s"), (5400, "90m")])
def test_durations_are_written_as_prometheus_durations(seconds: int, text: str) -> None:
    assert rules.duration(seconds) == text
