"""`tpuray local up / run train / run serve / down` end to end on a small emulated stack."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from tests.ray_fixtures import free_port
from tpuray.config import stacks_dir
from tpuray.local import emulator

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def small_stack(tmp_path: Path) -> Path:
    """dev, shrunk to two one-host slices (v6e 2x2 for training, 1x1 for serving): quick to emulate."""
    doc = copy.deepcopy(yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text()))
    config = doc["config"]
    train_pool, serve_pool = config["tpuray:slicePools"]
    train_pool.update(topology="2x2", capacity=[{"spot": True}])
    serve_pool.update(topology="1x1", capacity=[{"onDemand": True}])
    config["tpuray:queues"]["teams"][0]["quotas"][0]["tier"] = "spot"  # the training pool's one tier
    config["tpuray:workloads"]["train"].update(steps=10, checkpointEvery=5)
    path = tmp_path / "Pulumi.e2e.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def local_env() -> Iterator[dict[str, str]]:
    # A short root: Ray's socket paths under it must stay within 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="tpe-", dir="/tmp"))
    env = {**os.environ, emulator.LOCAL_DIR_ENV: str(root), "COLUMNS": "160"}
    yield env
    for state in root.glob(f"*/{emulator.STATE_FILE}"):  # a failed test leaves nothing running
        emulator.EmulatedCluster.attach(state.parent).stop()
    assert not any(str(root) in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    shutil.rmtree(root, ignore_errors=True)


def tpuray(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpuray", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def last_json(stdout: str) -> dict:
    """The JSON document `local run` prints last."""
    start = stdout.rindex("\n{") + 1
    return json.loads(stdout[start:])


def serve_app_status(state_dir: Path, app: str) -> str:
    """The application's status from the dashboard's Serve API; "UNANSWERED" when the
    dashboard does not answer within 10 s (seen once in a loaded `make test`): the caller keeps
    polling until its own deadline."""
    base = emulator.EmulatedCluster.attach(state_dir).state.dashboard_url
    try:
        with urllib.request.urlopen(f"{base}/api/serve/applications/", timeout=10) as response:
            apps = json.load(response).get("applications", {})
    except (TimeoutError, urllib.error.URLError):
        return "UNANSWERED"
    return apps.get(app, {}).get("status", "NOT_STARTED")


@pytest.mark.slow
def test_service_deployed_before_training_waits_for_the_checkpoint_then_serves(small_stack, local_env):
    """dev's first deploy: the RayService starts before the RayJob has written a checkpoint."""
    up = tpuray(local_env, "local", "up", str(small_stack))
    assert up.returncode == 0, up.stderr + up.stdout

    serve = subprocess.Popen(
        [sys.executable, "-m", "tpuray", "local", "run", "serve", str(small_stack), "--timeout", "600",
         "--serve-port", str(free_port())],
        cwd=REPO, env=local_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    state_dir = Path(local_env[emulator.LOCAL_DIR_ENV]) / "e2e"
    deadline = time.monotonic() + 120
    while serve_app_status(state_dir, "tpuray-serve") != "DEPLOYING":  # its replica waits for a checkpoint
        assert serve.poll() is None and time.monotonic() < deadline, serve.communicate()
        time.sleep(1)

    train = tpuray(local_env, "local", "run", "train", str(small_stack))
    assert train.returncode == 0, train.stderr + train.stdout[-3000:]
    result = last_json(train.stdout)
    assert result["device"] == "emulated" and result["final_step"] == 10 and result["history_problems"] == []
    assert "--device: tpu -> emulated" in train.stdout

    out, err = serve.communicate(timeout=600)
    assert serve.returncode == 0, err + out[-3000:]
    answer = last_json(out)
    assert (answer["health"]["status"], answer["health"]["reason"]) == ("ready", None)
    assert len(answer["response"]["predictions"]) == len(answer["request"]["instances"])
    # The replica loads the first complete checkpoint it sees: step 5 or the final step 10.
    assert answer["response"]["model_step"] in (5, 10)

    down = tpuray(local_env, "local", "down", "e2e")
    assert down.returncode == 0, down.stderr


def test_run_without_an_emulated_cluster_says_how_to_start_one(small_stack, local_env):
    out = tpuray(local_env, "local", "run", "train", str(small_stack), timeout=60)
    assert out.returncode == 2
    assert "no emulated cluster for stack 'e2e'; start one with `tpuray local up e2e`" in out.stderr
    assert "Traceback" not in out.stderr
