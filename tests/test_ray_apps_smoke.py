"""Smoke test on a private local Ray cluster (127.0.0.1, CPU): Data -> Train -> resume -> Serve.

One cluster for the module. The runs build on each other (module fixtures), each test
checks one behaviour:
1. run 1: 10 steps, a checkpoint every 5, two CPU workers with jax.distributed over gloo;
2. run 2: the same run name asked for 20 steps, with a failure injected at step 13: it
   resumes from checkpoint 10 (job-level resume), fails, and FailureConfig restarts it from
   checkpoint 10 again; the persisted history is then 1..20 with no step twice;
3. Serve (checkpoint backend) answers over HTTP on 127.0.0.1 with the step-20 model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from ray_apps import data, model, serve, train

try:  # tests/ is a plain directory unless someone adds an __init__.py
    from ray_fixtures import LocalRay, local_ray  # noqa: F401
except ImportError:  # pragma: no cover
    from tests.ray_fixtures import LocalRay, local_ray  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CHECKPOINT_EVERY = 5
FAIL_AT = 13


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("smoke")
    # 2 workers x 64 rows x 10 steps per epoch: the run also crosses an epoch boundary.
    data.write_synthetic(str(root / "data"), rows=1280, fmt="parquet", files=2)
    return root


def _args(workdir: Path, steps: int, **kw: Any) -> train.TrainArgs:
    return train.TrainArgs(
        data_uri=str(workdir / "data"),
        storage_uri=str(workdir / "runs"),
        run_name="smoke",
        device="cpu",
        hosts_per_slice=2,
        steps=steps,
        checkpoint_every=CHECKPOINT_EVERY,
        max_failures=1,
        batch_size=64,
        **kw,
    )


@pytest.fixture(scope="module")
def first_run(local_ray: LocalRay, workdir: Path) -> dict[str, Any]:
    return train.run(_args(workdir, steps=10))


@pytest.fixture(scope="module")
def resumed_run(first_run: dict[str, Any], workdir: Path) -> dict[str, Any]:
    return train.run(_args(workdir, steps=20, fail_once_at_step=FAIL_AT))


def test_first_run_trains_and_checkpoints_every_interval(first_run: dict[str, Any], workdir: Path) -> None:
    assert first_run["error"] is None and first_run["final_step"] == 10
    assert sorted(p.name for p in (workdir / "runs" / "smoke").glob("checkpoint_step_*")) == [
        "checkpoint_step_00000005",
        "checkpoint_step_00000010",
    ]
    assert first_run["metrics"]["samples_per_s"] > 0


def test_first_run_loss_goes_down(first_run: dict[str, Any]) -> None:
    history = model.load_checkpoint(first_run["checkpoint"]).history
    assert history[-1]["loss"] < history[0]["loss"]


def test_second_run_resumes_at_the_next_step_after_the_checkpoint(resumed_run: dict[str, Any]) -> None:
    assert resumed_run["error"] is None and resumed_run["final_step"] == 20
    keys = ("attempt", "start_step", "resumed_from")
    first, second = ({k: a[k] for k in keys} for a in resumed_run["attempts"])
    assert first == {"attempt": 1, "start_step": 1, "resumed_from": None}
    assert second == {"attempt": 2, "start_step": 11, "resumed_from": 10}
    # Each attempt also says where and when it started (no TPU slice on a cpu run).
    assert all(a["slice"] is None and a["started_at"] > 0 for a in resumed_run["attempts"])


def test_restart_after_a_failure_loses_at_most_one_checkpoint_interval(
    resumed_run: dict[str, Any], workdir: Path
) -> None:
    # The injected failure really happened (its marker is written just before raising) ...
    assert (workdir / "runs" / "smoke" / f".fail_once_at_step_{FAIL_AT}").exists()
    # ... and the restart resumed from the last checkpoint before it, not from scratch.
    resumed_from = resumed_run["attempts"][-1]["resumed_from"]
    assert FAIL_AT - CHECKPOINT_EVERY <= resumed_from < FAIL_AT


def test_persisted_step_history_has_no_gaps_and_no_duplicates(resumed_run: dict[str, Any]) -> None:
    history = model.load_checkpoint(resumed_run["checkpoint"]).history
    assert [h["step"] for h in history] == list(range(1, 21))
    assert resumed_run["history_problems"] == []


@pytest.fixture(scope="module")
def served(local_ray: LocalRay, resumed_run: dict[str, Any], workdir: Path) -> str:
    from ray import serve as ray_serve

    ray_serve.start(http_options={"host": "127.0.0.1", "port": local_ray.http_port})
    app = serve.build_app({"backend": "checkpoint", "checkpoint_uri": str(workdir / "runs" / "smoke"), "num_cpus": 0.5})
    ray_serve.run(app, name="tpuray", route_prefix="/")
    return f"http://127.0.0.1:{local_ray.http_port}"


def test_serve_predicts_with_the_latest_checkpoint(served: str) -> None:
    body = {"instances": [[1100.0, 3, 25.0, 4.0, 65.0], [600.0, 2, 60.0, 20.0, 40.0]]}
    resp = requests.post(f"{served}/predict", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert out["model_step"] == 20 and len(out["predictions"]) == 2
    assert out["predictions"][0] > out["predictions"][1]  # bigger, newer, closer, richer area


def test_serve_health_route_reports_the_model_step(served: str) -> None:
    resp = requests.get(f"{served}/healthz", timeout=30)
    assert resp.status_code == 200
    assert resp.json() == {
        "status": "ready",
        "reason": None,
        "backend": "checkpoint",
        "model_id": "tpuray-mlp",
        "model_step": 20,
        # A plain local Ray node has no slice labels: the replica is on no slice of the chain.
        "placement": {"slice": None, "generation": None, "tier": None, "fallback": False},
    }


def test_serve_rejects_a_malformed_request_with_422(served: str) -> None:
    resp = requests.post(f"{served}/predict", json={"instances": [[1.0, 2.0]]}, timeout=30)
    assert resp.status_code == 422
