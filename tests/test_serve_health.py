"""What the Serve backends say at GET /healthz: state and reason (ray_apps.health); no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray.serve._private.common import DeploymentStatus, DeploymentStatusTrigger
from ray.serve.schema import ApplicationStatus, ApplicationStatusOverview, DeploymentStatusOverview, ServeStatus

from ray_apps import features, health, model, serve
from ray_apps.health import State


def overview(app: ApplicationStatus, message: str = "", **deployments: tuple[DeploymentStatus, str]) -> ServeStatus:
    """Serve's own status objects (ray.serve.schema), as serve.status() returns them."""
    deps = {
        name: DeploymentStatusOverview(
            status=status, status_trigger=DeploymentStatusTrigger.UNSPECIFIED, replica_states={}, message=msg
        )
        for name, (status, msg) in deployments.items()
    }
    return ServeStatus(
        applications={
            "tpuray-serve": ApplicationStatusOverview(
                status=app, message=message, last_deployed_time_s=0.0, deployments=deps
            )
        }
    )


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> Path:
    raw = features.generate_rows(64)
    cfg = model.ModelConfig()
    state = model.TrainingState(20, model.init_params(cfg), None, cfg, features.fit_stats(features.engineer(raw)))
    return model.save_checkpoint(tmp_path / "runs" / "r" / "checkpoint_step_00000020", state)


# ---------------------------------------------------------------- the checkpoint backend


def test_a_loaded_checkpoint_backend_is_ready_with_its_step_and_http_200(checkpoint_dir: Path) -> None:
    report = serve.CheckpointPredictor(str(checkpoint_dir.parent), "tpuray-mlp").health_report()
    assert report.model_dump(mode="json") == {
        "status": "ready",
        "reason": None,
        "backend": "checkpoint",
        "model_id": "tpuray-mlp",
        "model_step": 20,
        "placement": None,
    }
    assert report.http_status == 200


def test_a_backend_waiting_for_its_checkpoint_says_where_it_looks_with_http_503() -> None:
    waiting = health.Health("checkpoint", "tpuray-mlp", State.WAITING, "no checkpoint yet at gs://b/runs/r")
    report = waiting.report()
    assert (report.status, report.reason, report.model_step) == (
        State.WAITING,
        "no checkpoint yet at gs://b/runs/r",
        None,
    )
    assert report.http_status == 503


def test_a_checkpoint_that_cannot_be_loaded_leaves_the_backend_failed_with_the_error(checkpoint_dir: Path) -> None:
    (checkpoint_dir / model.PARAMS_FILE).write_bytes(b"not an npz: the upload was cut")
    predictor = serve.CheckpointPredictor.__new__(serve.CheckpointPredictor)
    with pytest.raises(Exception):  # noqa: B017 - whatever numpy raises, /healthz reports it
        serve.CheckpointPredictor.__init__(predictor, str(checkpoint_dir.parent), "m")
    report = predictor.health.report()
    assert report.status is State.FAILED
    assert report.reason is not None and report.reason.startswith(f"could not load {checkpoint_dir}: ")


def test_a_backend_whose_checkpoint_never_came_is_failed_with_the_deadline_message(tmp_path: Path) -> None:
    predictor = serve.CheckpointPredictor.__new__(serve.CheckpointPredictor)
    with pytest.raises(serve.CheckpointNotReady):
        serve.CheckpointPredictor.__init__(predictor, str(tmp_path / "runs" / "r"), "m", 0.0)
    report = predictor.health.report()
    assert (report.status, report.http_status) == (State.FAILED, 503)
    assert report.reason == (
        f"no complete checkpoint at {tmp_path / 'runs' / 'r'} after 0 s (checkpoint_wait_s=0): has the training "
        "run written one there? Check its checkpoint URI, or raise tpuray:workloads.serve.checkpointWaitSeconds"
    )


def test_every_state_but_ready_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="state loading needs a reason"):
        health.Health("checkpoint", "m").set(State.LOADING)


def test_ready_drops_the_previous_reason() -> None:
    h = health.Health("checkpoint", "m", State.LOADING, "loading gs://b/runs/r/checkpoint_step_00000020 (step 20)")
    h.set(State.READY, "ignored")
    assert (h.report().status, h.report().reason) == (State.READY, None)


# ---------------------------------------------------------------- the llm backend, from Serve's status


def test_an_llm_app_still_loading_its_model_is_loading_with_serves_message() -> None:
    status = overview(
        ApplicationStatus.DEPLOYING,
        **{
            "LLMServer:llama-3-8b": (
                DeploymentStatus.UPDATING,
                "Deployment 'LLMServer:llama-3-8b' has 1 replicas that have taken more than 30s to initialize.",
            ),
            "OpenAiIngress": (DeploymentStatus.HEALTHY, ""),
        },
    )
    report = health.application_report("tpuray-serve", "llama-3-8b", status)
    assert report.model_dump(mode="json") == {
        "status": "loading",
        "reason": "application tpuray-serve is DEPLOYING; deployment LLMServer:llama-3-8b UPDATING: "
        "Deployment 'LLMServer:llama-3-8b' has 1 replicas that have taken more than 30s to initialize.",
        "backend": "llm",
        "model_id": "llama-3-8b",
        "model_step": None,
        "placement": None,
    }
    assert report.http_status == 503


def test_a_running_llm_app_is_ready_without_a_reason() -> None:
    status = overview(ApplicationStatus.RUNNING, **{"LLMServer:llama-3-8b": (DeploymentStatus.HEALTHY, "")})
    report = health.application_report("tpuray-serve", "llama-3-8b", status)
    assert (report.status, report.reason, report.http_status) == (State.READY, None, 200)


def test_a_failed_llm_deploy_is_failed_with_the_replicas_error() -> None:
    status = overview(
        ApplicationStatus.DEPLOY_FAILED,
        "Deploying application tpuray-serve failed.",
        **{"LLMServer:llama-3-8b": (DeploymentStatus.DEPLOY_FAILED, "RuntimeError: model gs://m not found")},
    )
    state, reason = health.state_of_application("tpuray-serve", status)
    assert state is State.FAILED
    assert reason == (
        "application tpuray-serve is DEPLOY_FAILED; Deploying application tpuray-serve failed.; "
        "deployment LLMServer:llama-3-8b DEPLOY_FAILED: RuntimeError: model gs://m not found"
    )


def test_an_unhealthy_llm_app_is_failed() -> None:
    status = overview(ApplicationStatus.UNHEALTHY, **{"LLMServer:llama-3-8b": (DeploymentStatus.UNHEALTHY, "")})
    assert health.state_of_application("tpuray-serve", status) == (
        State.FAILED,
        "application tpuray-serve is UNHEALTHY; deployment LLMServer:llama-3-8b UNHEALTHY",
    )


def test_an_llm_app_serve_does_not_know_yet_is_waiting() -> None:
    assert health.state_of_application("tpuray-serve", ServeStatus()) == (
        State.WAITING,
        "Serve has no application 'tpuray-serve' yet",
    )


def test_the_health_app_entry_is_a_cpu_only_app_at_healthz_for_the_named_app() -> None:
    entry = health.app_entry("tpuray-serve", "llama-3-8b")
    assert entry == {
        "name": "tpuray-serve-healthz",
        "route_prefix": "/healthz",
        "import_path": "ray_apps.health_app:build_app",
        "args": {"application": "tpuray-serve", "model_id": "llama-3-8b"},
        "deployments": [{"name": "healthz", "ray_actor_options": {"num_cpus": 0.1}}],
    }


def test_the_health_app_builder_rejects_unknown_args() -> None:
    from pydantic import ValidationError

    from ray_apps import health_app

    with pytest.raises(ValidationError, match="aplication"):
        health_app.build_app({"aplication": "tpuray-serve", "model_id": "m"})
