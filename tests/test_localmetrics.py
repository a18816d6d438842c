"""tpuray.local.localmetrics: a real Prometheus (Debian package) scraping the targets Ray's
service-discovery file lists, with the stack's scope labels and alert rules, stopped by PID.

The target here is a stand-in HTTP server serving the exposition text a Ray node serves;
tests/test_watchdog_emulated.py does the same against the emulator's real Ray nodes.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from tpuray.config.checks import load_stack
from tpuray.local import localmetrics
from tpuray.observe import rules

LABELS = 'run="r1",rank="1",slice="tpu-v6e-dev-0",worker_id="1"'


def needs_prometheus() -> None:
    if shutil.which("prometheus") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is missing under CI=true: .ci/run installs the Debian package prometheus")
        pytest.skip("prometheus not installed (apt-get install prometheus)")


@pytest.fixture()
def ray_like_target() -> Iterator[str]:
    stalled_at = time.time() - 100

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = (
                f"ray_tpuray_train_last_step_timestamp_seconds{{{LABELS}}} {stalled_at}\n"
                f"ray_tpuray_train_step_seconds_median{{{LABELS}}} 1.5\n"
                f"ray_tpuray_train_step{{{LABELS}}} 5\n"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_prometheus_scrapes_ray_targets_with_scope_labels_and_fires_the_step_rule(
    tmp_path: Path, ray_like_target: str
) -> None:
    needs_prometheus()
    cfg = load_stack("dev")
    # Ray's dashboard writes this file into the session folder (Ray 2.60 metrics_agent.py).
    session = tmp_path / "ray" / "session_latest"
    session.mkdir(parents=True)
    (session / localmetrics.SD_FILE).write_text(json.dumps([{"labels": {"job": "ray"}, "targets": [ray_like_target]}]))
    hung = cfg.observability.hung_gang.model_copy(update={"floor_seconds": 30, "step_factor": 3})
    cfg = cfg.model_copy(update={"observability": cfg.observability.model_copy(update={"hung_gang": hung})})
    rule = dataclasses.replace(rules.hung_gang_step_rule(cfg), for_="0s")  # `for` is promtool-tested
    state = localmetrics.start(cfg, tmp_path, str(tmp_path / "ray"), [rule])
    try:
        # Evaluated as often as scraped: at GKE's 30 s, the first evaluation comes up to 30 s late.
        assert yaml.safe_load((tmp_path / "prometheus" / "rules.yaml").read_text())["groups"][0]["interval"] == "2s"
        deadline, alerts, steps = time.monotonic() + 60, [], {}
        while time.monotonic() < deadline and not (alerts and steps):
            alerts = localmetrics.firing(state)
            steps = localmetrics.last_steps(state)
            time.sleep(1)
        series = localmetrics.query(state, "ray_tpuray_train_step")
        assert [s["metric"]["cluster"] + "/" + s["metric"]["namespace"] for s in series] == ["tpuray-dev/ray"]
        assert [(a["labels"]["alertname"], a["labels"]["rank"], a["labels"]["slice"]) for a in alerts] == [
            ("TpurayHungGangStepStalled", "1", "tpu-v6e-dev-0")
        ]
        assert steps["tpu-v6e-dev-0"]["step"] == 5
    finally:
        pid = state.pid
        assert localmetrics.stop(tmp_path) == []
    assert not psutil.pid_exists(pid)
    assert localmetrics.load(tmp_path) is None


def test_stopping_without_a_started_prometheus_is_a_no_op(tmp_path: Path) -> None:
    assert localmetrics.stop(tmp_path) == []


def test_metrics_without_the_dashboard_is_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    from tpuray.cli import main

    assert main(["local", "up", "dev", "--metrics", "--no-dashboard"]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("error: --metrics needs the Ray dashboard (it writes Prometheus' target list); drop --no-dashboard")
    )
