"""The step watchdog and the hung-gang alert on an emulated v5p 2x2x2 slice (2 hosts + head: the
fewest that make a multi-host gang, one rank of which hangs while the other waits on it).

One rank of a JaxTrainer gang hangs at a step (fault injection). Two things must notice:
1. a real Prometheus (tpuray.local.localmetrics, as `tpuray local up --metrics` starts it) scraping
   the emulator's own Ray metrics endpoints fires TpurayHungGangStepStalled, the rule of
   tpuray/observe/rules.py with this test's thresholds (the TPU duty-cycle branch has no
   series here: emulated hosts have no TPU device plugin);
2. the step watchdog names the stalled rank with its slice and worker id and fails the
   attempt, and Ray Train's FailureConfig restarts the gang from the last checkpoint to
   the final step.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from ray_apps import data
from tests.drivers import REPO, driver_env, result_of, train_argv
from tpuray import catalog
from tpuray.config.checks import load_stack
from tpuray.local import localmetrics
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for
from tpuray.observe import rules

# A 2-host gang, a stall of WATCHDOG_FLOOR_S and a restart: longer than the suite's 600 s default.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

V5P = catalog.lookup("v5p", "2x2x2")
SLICE = "v5p-wd-0"
STEPS, CHECKPOINT_EVERY, STALL_AT, STALL_RANK, BATCH = 12, 4, 6, 1, 32
# The alert must fire well before the watchdog ends the stall: the rule runs here with `for: 0s`
# (its `for: 1m` is promtool's to test, tests/fixtures/observe/alerts_test.yaml) and the local
# Prometheus scrapes and evaluates every 2 s, so it fires a few seconds after ALERT_FLOOR_S (the
# stalled ranks' last-step timestamps are already scraped). The watchdog's floor stays far above
# a step's time on a loaded 2-core machine (about a second), so only the injected stall trips it.
ALERT_FLOOR_S, WATCHDOG_FLOOR_S = 5, 30


def alert_config() -> Any:
    cfg = load_stack("dev")
    hung = cfg.observability.hung_gang.model_copy(update={"floor_seconds": ALERT_FLOOR_S, "step_factor": 3})
    return cfg.model_copy(update={"observability": cfg.observability.model_copy(update={"hung_gang": hung})})


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[EmulatedCluster, localmetrics.PrometheusState]]:
    state_dir = tempfile.mkdtemp(prefix="tpwd-", dir="/tmp")  # short: Ray puts sockets under it
    emu = EmulatedCluster.start(
        plan_for([SliceSpec(SLICE, "v5p-spot", V5P, "spot")]),
        state_dir=state_dir,
        name="test-watchdog",
        dashboard=True,  # its reporter writes the Prometheus target list
    )
    pids = emu.pids()
    prom = None
    try:
        cfg = alert_config()
        rule = dataclasses.replace(rules.hung_gang_step_rule(cfg), for_="0s")
        prom = localmetrics.start(cfg, state_dir, emu.state.ray_dir, [rule])
        yield emu, prom
    finally:
        assert localmetrics.stop(state_dir) == []
        assert emu.stop() == []
        assert [p for p in pids + ([prom.pid] if prom else []) if psutil.pid_exists(p)] == []


@pytest.fixture(scope="module")
def stalled_run(
    cluster: tuple[EmulatedCluster, localmetrics.PrometheusState], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    emu, prom = cluster
    work = tmp_path_factory.mktemp("watchdog")
    data.write_synthetic(str(work / "data"), rows=V5P.hosts * BATCH * STEPS, fmt="parquet", files=4)
    cmd = train_argv(
        V5P, work, "stalled", steps=STEPS, checkpoint_every=CHECKPOINT_EVERY, batch_size=BATCH, max_failures=1,
        slice_deadline_s=300, stall_once_at_step=STALL_AT, stall_rank=STALL_RANK, watchdog_factor=3,
        watchdog_floor_s=WATCHDOG_FLOOR_S, watchdog_startup_s=900,
    )  # fmt: skip
    alerts: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}  # every alert seen firing, by its labels
    seen_metrics: list[dict[str, Any]] = []
    log_path = work / "train.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, env=driver_env(emu.address), cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + 1200
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if not seen_metrics:
                    seen_metrics = localmetrics.query(prom, "ray_tpuray_train_step")
                # Kept polling: both ranks stop completing steps (one hangs, the other waits on it),
                # and with evaluations every 2 s their alerts can start at different evaluations.
                for alert in localmetrics.firing(prom):
                    alerts.setdefault(tuple(sorted(alert["labels"].items())), alert)
                time.sleep(2)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    output = log_path.read_text()
    return {
        "returncode": proc.returncode,
        "output": output,
        "summary": result_of(output),
        "alerts": list(alerts.values()),
        "metrics": seen_metrics,
    }


def test_prometheus_scrapes_the_training_step_gauges_from_the_emulated_hosts(stalled_run: dict[str, Any]) -> None:
    labels = [m["metric"] for m in stalled_run["metrics"]]
    assert labels, "no ray_tpuray_train_step series was scraped"
    assert {(lb["cluster"], lb["namespace"], lb["slice"]) for lb in labels} == {("tpuray-dev", "ray", SLICE)}


def test_the_hung_gang_rule_fires_on_the_emulators_real_metrics(stalled_run: dict[str, Any]) -> None:
    stalled = [a["labels"] for a in stalled_run["alerts"] if a["labels"]["alertname"] == "TpurayHungGangStepStalled"]
    assert stalled, stalled_run["alerts"]
    assert {lb["run"] for lb in stalled} == {"stalled"}
    assert {lb["slice"] for lb in stalled} == {SLICE}
    assert str(STALL_RANK) in {lb["rank"] for lb in stalled}


def test_the_watchdog_names_the_stalled_rank_with_its_slice_and_worker(stalled_run: dict[str, Any]) -> None:
    fired = re.findall(r"tpuray watchdog: rank \d+ completed no step for \d+s \(limit \d+s.*", stalled_run["output"])
    assert fired, stalled_run["output"][-6000:]
    worker = next(p["tpu_worker_id"] for p in stalled_run["summary"]["placements"] if p["rank"] == STALL_RANK)
    assert f"stuck: rank {STALL_RANK} (slice {SLICE}, worker {worker}) started step {STALL_AT - 1}" in fired[0]
    assert f"the others wait in step {STALL_AT}" in fired[0]


def test_after_the_watchdog_the_gang_restarts_cleanly_and_finishes(stalled_run: dict[str, Any]) -> None:
    summary = stalled_run["summary"]
    assert stalled_run["returncode"] == 0, stalled_run["output"][-6000:]
    assert summary["error"] is None
    assert summary["final_step"] == STEPS
    assert [(a["attempt"], a["start_step"]) for a in summary["attempts"]] == [(1, 1), (2, CHECKPOINT_EVERY + 1)]
    assert summary["history_problems"] == []
