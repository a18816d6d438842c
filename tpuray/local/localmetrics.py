"""A real Prometheus beside the local emulator (`tpuray local up --metrics`).

It scrapes every emulated host's Ray metrics endpoint through the service-discovery file
Ray's dashboard writes (`<session>/prom_metrics_service_discovery.json`, Ray 2.60.0
`_private/metrics_agent.py`; the way https://docs.ray.io/en/latest/cluster/metrics.html
sets Prometheus up), adds the `cluster` and `namespace` target labels Managed Prometheus
adds on GKE, and evaluates the stack's own alert rules (tpuray/observe/rules.py). The GKE
TPU system metrics do not exist here, so locally the step-progress branch of the hung-gang
alert is the one that can fire.

Prometheus is the Debian `prometheus` binary, on 127.0.0.1 only, started in its own session
and stopped by its PID (recorded in the emulator's state folder), never by name.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
import requests
import yaml

from tpuray.config import StackConfig
from tpuray.observe import rules

STATE_FILE = "prometheus.json"
SD_FILE = "prom_metrics_service_discovery.json"


class MetricsError(Exception):
    """Prometheus could not be started or queried: one line for the user."""


@dataclass
class PrometheusState:
    pid: int
    port: int
    folder: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Scrape, global evaluation and rule group interval, in seconds: one value, so a rule is
# evaluated as soon as a scrape can have changed it (the GKE side uses rules.EVALUATION_INTERVAL).
SCRAPE_S = 2


def prometheus_config(cfg: StackConfig, ray_dir: str) -> dict[str, Any]:
    sd_file = os.path.join(ray_dir, "session_latest", SD_FILE)
    labels = rules.ray_scope(cfg)
    return {
        "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [
            {
                "job_name": "ray",
                "file_sd_configs": [{"files": [sd_file], "refresh_interval": "5s"}],
                # The target labels Managed Prometheus adds on GKE, so the same rules match.
                "relabel_configs": [{"target_label": k, "replacement": v} for k, v in labels.items()],
            }
        ],
    }


def start(
    cfg: StackConfig, state_dir: str | Path, ray_dir: str, rule_list: list[rules.Rule] | None = None
) -> PrometheusState:
    """Start Prometheus for this emulated cluster; returns once it answers /-/ready."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise MetricsError("prometheus is not installed: apt-get install prometheus (the Debian package)")
    folder = Path(state_dir) / "prometheus"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rules.yaml").write_text(rules.rule_file(cfg, rule_list, interval=f"{SCRAPE_S}s"))
    (folder / "prometheus.yml").write_text(yaml.safe_dump(prometheus_config(cfg, ray_dir), sort_keys=False))
    port = _free_port()
    log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        cwd=folder,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # outlives `tpuray local up`; stopped by PID in `local down`
    )
    state = PrometheusState(proc.pid, port, str(folder))
    (Path(state_dir) / STATE_FILE).write_text(json.dumps(asdict(state)))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise MetricsError(f"prometheus exited ({proc.returncode}); see {folder / 'prometheus.log'}")
        try:
            if requests.get(state.url + "/-/ready", timeout=1).ok:
                return state
        except requests.RequestException:
            pass
        time.sleep(0.5)
    stop(state_dir)
    raise MetricsError(f"prometheus did not become ready in 60 s; see {folder / 'prometheus.log'}")


def load(state_dir: str | Path) -> PrometheusState | None:
    path = Path(state_dir) / STATE_FILE
    if not path.is_file():
        return None
    return PrometheusState(**json.loads(path.read_text()))


def stop(state_dir: str | Path) -> list[int]:
    """Stop the Prometheus this state folder started, by its PID; returns the PIDs left."""
    state = load(state_dir)
    if state is None:
        return []
    try:
        proc = psutil.Process(state.pid)
        if "prometheus" in proc.name():  # the PID was not reused by something else
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except psutil.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    except psutil.NoSuchProcess:
        pass
    (Path(state_dir) / STATE_FILE).unlink(missing_ok=True)
    return [state.pid] if psutil.pid_exists(state.pid) else []


def query(state: PrometheusState, promql: str) -> list[dict[str, Any]]:
    """An instant query's result vector (each {'metric': {...}, 'value': [t, 'v']})."""
    try:
        reply = requests.get(state.url + "/api/v1/query", params={"query": promql}, timeout=5).json()
    except requests.RequestException as err:
        raise MetricsError(f"prometheus at {state.url} did not answer: {err}") from None
    if reply.get("status") != "success":
        raise MetricsError(f"prometheus rejected {promql!r}: {reply.get('error')}")
    return list(reply["data"]["result"])


def firing(state: PrometheusState) -> list[dict[str, Any]]:
    """Alerts in state firing, as Prometheus's /api/v1/alerts lists them."""
    reply = requests.get(state.url + "/api/v1/alerts", timeout=5).json()
    return [a for a in reply["data"]["alerts"] if a.get("state") == "firing"]


def last_steps(state: PrometheusState) -> dict[str, dict[str, float]]:
    """Per slice: the newest training step and when it completed (unix time)."""
    out: dict[str, dict[str, float]] = {}
    for sample in query(state, "max by (slice) (ray_tpuray_train_last_step_timestamp_seconds)"):
        out.setdefault(sample["metric"].get("slice", ""), {})["at"] = float(sample["value"][1])
    for sample in query(state, "max by (slice) (ray_tpuray_train_step)"):
        out.setdefault(sample["metric"].get("slice", ""), {})["step"] = float(sample["value"][1])
    return out
