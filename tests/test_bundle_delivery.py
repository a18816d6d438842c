"""The bundle reaches the emulated hosts through Ray's own runtime_env path: uploaded to the
GCS emulator at the rendered gs:// URI, downloaded and unpacked by Ray (one `local up` for
the module)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from tpuray import bundle
from tpuray.config import stacks_dir
from tpuray.local import emulator

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env() -> Iterator[dict[str, str]]:
    root = Path(tempfile.mkdtemp(prefix="tpb-", dir="/tmp"))  # short: Ray's socket paths live under it
    yield {**os.environ, emulator.LOCAL_DIR_ENV: str(root), "COLUMNS": "200"}
    for state in root.glob(f"*/{emulator.STATE_FILE}"):
        emulator.EmulatedCluster.attach(state.parent).stop()
    assert not any(str(root) in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
    shutil.rmtree(root, ignore_errors=True)


def tpuray(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpuray", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def stack(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """dev with one one-host v6e 2x2 slice for training (serve on a 1x1): quick to emulate."""
    doc = copy.deepcopy(yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text()))
    train_pool, serve_pool = doc["config"]["tpuray:slicePools"]
    train_pool.update(topology="2x2", capacity=[{"spot": True}])
    serve_pool.update(topology="1x1", capacity=[{"onDemand": True}])
    doc["config"]["tpuray:queues"]["teams"][0]["quotas"][0]["tier"] = "spot"  # the training pool's one tier
    path = tmp_path_factory.mktemp("stack") / "Pulumi.bundle.yaml"
    path.write_text(yaml.safe_dump(doc))
    up = tpuray(env, "local", "up", str(path))
    assert up.returncode == 0, up.stderr + up.stdout
    yield path
    down = tpuray(env, "local", "down", "bundle")
    assert down.returncode == 0, down.stderr


def last_json(stdout: str) -> dict:
    return json.loads(stdout[stdout.rindex("\n{") + 1 :])


def test_the_job_reports_the_bundle_it_was_built_as(env, stack):
    built = bundle.build()
    train = tpuray(env, "local", "run", "train", str(stack), "--steps", "2")
    assert train.returncode == 0, train.stderr + train.stdout[-3000:]
    code = last_json(train.stdout)["code"]
    assert code["sources_sha256"] == built.sources_sha256
    # Ray downloaded gs://acme-ml-dev-bundles/ray-apps/<name> and unpacked it in the runtime resources of
    # the node the driver runs on (the head), a folder of its own (tpuray.local.emulator.RUNTIME_ENV_DIR).
    assert "/runtime_resources/head/working_dir_files/gs_" in code["imported_from"]
    assert not code["imported_from"].startswith(str(REPO))
    assert f"gs://acme-ml-dev-bundles/ray-apps/{built.name}" in train.stdout  # the URI Ray fetched, as rendered
    assert "runtime_env.working_dir" not in train.stdout  # no rewrite of the bundle URI


def test_a_bundle_with_ray_apps_as_its_only_top_level_directory_fails_naming_the_import(env, stack, tmp_path):
    wrong = bundle.build(wrapper=bundle.WRONG_LAYOUT_ROOT).write(tmp_path)
    train = tpuray(env, "local", "run", "train", str(stack), "--steps", "2", "--bundle", str(wrong))
    assert train.returncode == 1
    assert "No module named 'ray_apps'" in train.stderr and "tpuray bundle" in train.stderr


def test_tpuray_bundle_writes_the_archive_the_job_ran(env, stack, tmp_path):
    """`tpuray bundle` (what CI uploads) writes the same bytes `local run` uploaded and the
    first test's job ran: the name is the archive's own sha256 (tpuray/bundle.py), so the
    passing run above covers this layout without a second training run."""
    out = tpuray(env, "bundle", "--out", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    written = Path(json.loads(out.stdout)["path"])
    assert written.name == bundle.build().name
    assert written.name == f"tpuray-apps-{hashlib.sha256(written.read_bytes()).hexdigest()[:16]}.zip"
