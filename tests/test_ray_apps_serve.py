"""The Serve builder, its HTTP schema and the LLM config wrapper (no cluster started)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from ray_apps import features, llm, model, serve

LLM_ARGS = {
    "backend": "llm",
    "model_id": "llama-3-8b",
    "model_source": "gs://bucket/models/llama-3-8b",
    "accelerator_type": "TPU-V6E",
    "topology": "4x4",
    "hosts_per_slice": 4,
    "chips_per_host": 4,
}


def test_llm_config_carries_accelerator_type_and_topology() -> None:
    cfg = serve.llm_config_from_args(serve.AppArgs.model_validate(LLM_ARGS))
    assert cfg.accelerator_type == "TPU-V6E"
    assert (cfg.accelerator_config.kind, cfg.accelerator_config.topology) == ("tpu", "4x4")


def test_llm_engine_spans_every_chip_of_the_slice() -> None:
    cfg = serve.llm_config_from_args(serve.AppArgs.model_validate(LLM_ARGS))
    assert cfg.engine_kwargs["tensor_parallel_size"] == 16


def test_llm_serve_config_entry_uses_rays_openai_builder_with_the_topology() -> None:
    entry = serve.serve_config_entry(LLM_ARGS)
    assert entry["import_path"] == "ray.serve.llm:build_openai_app"
    (cfg,) = entry["args"]["llm_configs"]
    assert cfg["accelerator_config"] == {"kind": "tpu", "topology": "4x4"}
    assert cfg["accelerator_type"] == "TPU-V6E"
    assert cfg["model_loading_config"] == {"model_id": "llama-3-8b", "model_source": "gs://bucket/models/llama-3-8b"}


def test_llm_backend_without_topology_is_rejected() -> None:
    with pytest.raises(ValidationError, match="topology"):
        serve.AppArgs.model_validate({**LLM_ARGS, "topology": None})


def test_an_unknown_accelerator_type_is_rejected_by_the_llm_config() -> None:
    with pytest.raises(ValueError):
        serve.llm_config_from_args(serve.AppArgs.model_validate({**LLM_ARGS, "accelerator_type": "TPU-V9Z"}))


def test_building_the_llm_app_without_vllm_fails_with_a_clear_message() -> None:
    try:
        import ray.serve.llm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here")
    with pytest.raises(llm.LLMBackendUnavailable, match="needs vLLM"):
        serve.build_app(LLM_ARGS)


def test_serve_cli_exits_2_without_traceback_when_vllm_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--backend", "llm", "--model-id", "m", "--accelerator-type", "TPU-V6E", "--topology", "4x4"]
    argv += ["--hosts-per-slice", "4", "--chips-per-host", "4"]
    try:
        import ray.serve.llm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    assert serve.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the llm backend needs vLLM") and "Traceback" not in err


def test_checkpoint_backend_needs_a_checkpoint_uri() -> None:
    with pytest.raises(ValidationError, match="checkpoint_uri"):
        serve.AppArgs.model_validate({"backend": "checkpoint"})


def test_builder_args_reject_unknown_keys() -> None:
    with pytest.raises(ValidationError, match="checkpoint_url"):
        serve.AppArgs.model_validate({"backend": "checkpoint", "checkpoint_url": "x"})


def test_checkpoint_replica_can_be_pinned_with_a_label_selector() -> None:
    args = serve.AppArgs(checkpoint_uri="gs://b/runs/r", label_selector={"ray.io/accelerator-type": "TPU-V6E"})
    assert serve.checkpoint_actor_options(args) == {
        "num_cpus": 1.0,
        "label_selector": {"ray.io/accelerator-type": "TPU-V6E"},
    }


def test_checkpoint_app_binds_replicas_and_actor_options() -> None:
    app = serve.build_app({"checkpoint_uri": "/x", "replicas": 2, "num_cpus": 0.5})
    deployment = app._bound_deployment  # Serve's Application keeps the bound deployment here
    assert deployment.num_replicas == 2 and deployment.ray_actor_options["num_cpus"] == 0.5


def test_checkpoint_serve_config_entry_points_at_build_app() -> None:
    entry = serve.serve_config_entry({"backend": "checkpoint", "checkpoint_uri": "gs://b/runs/r"})
    assert entry["import_path"] == "ray_apps.serve:build_app"
    assert entry["args"] == {"checkpoint_uri": "gs://b/runs/r"}


def test_predict_request_accepts_rows_of_raw_features() -> None:
    req = serve.PredictRequest.model_validate({"instances": [[1000.0, 3, 20.0, 5.0, 60.0]]})
    assert req.instances == [[1000.0, 3.0, 20.0, 5.0, 60.0]]


@pytest.mark.parametrize(
    "body",
    [
        {"instances": []},
        {"instances": [[1.0, 2.0]]},
        {"instances": [[1000.0, 3, 20.0, 5.0, "x"]]},
        {"instances": [[1000.0, 3, 20.0, 5.0, 60.0]], "extra": 1},
        {},
    ],
    ids=["empty", "short-row", "not-a-number", "unknown-key", "missing-instances"],
)
def test_predict_request_rejects_malformed_bodies(body: dict) -> None:
    with pytest.raises(ValidationError):
        serve.PredictRequest.model_validate(body)


def test_predict_request_rejects_non_finite_values() -> None:
    with pytest.raises(ValidationError, match="non-finite"):
        serve.PredictRequest.model_validate({"instances": [[float("nan"), 3, 20.0, 5.0, 60.0]]})


def write_checkpoint(path: Path, step: int) -> Path:
    """A complete checkpoint, written by the training code's own save_checkpoint."""
    stats = features.fit_stats(features.engineer(features.generate_rows(256)))
    cfg = model.ModelConfig()
    return model.save_checkpoint(path, model.TrainingState(step, model.init_params(cfg), None, cfg, stats))


@pytest.fixture
def checkpoint_dir(tmp_path: Path) -> Path:
    return write_checkpoint(tmp_path / "checkpoint_step_00000007", step=7)


def test_checkpoint_model_predicts_in_target_units_and_reports_its_step(checkpoint_dir: Path) -> None:
    predictor = serve.CheckpointPredictor(str(checkpoint_dir.parent), "m")  # a run dir: latest checkpoint
    resp = predictor.predict(serve.PredictRequest(instances=[[1000.0, 3, 20.0, 5.0, 60.0]] * 2))
    assert resp.model_step == 7 and resp.model_id == "m" and len(resp.predictions) == 2
    assert np.isfinite(resp.predictions).all()
    assert predictor.health_report().model_dump(mode="json") == {
        "status": "ready",
        "reason": None,
        "backend": "checkpoint",
        "model_id": "m",
        "model_step": 7,
        "placement": None,
    }


def test_checkpoint_model_rejects_an_impossible_house(checkpoint_dir: Path) -> None:
    predictor = serve.CheckpointPredictor(str(checkpoint_dir), "m")  # a checkpoint dir itself
    with pytest.raises(ValueError, match="positive"):
        predictor.predict(serve.PredictRequest(instances=[[-5.0, 3, 20.0, 5.0, 60.0]]))


def test_checkpoint_model_fails_fast_without_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(serve.CheckpointNotReady, match="no complete checkpoint"):
        serve.CheckpointPredictor(str(tmp_path), "m")


class FakeClock:
    """A monotonic clock that advances only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_replica_waits_for_a_checkpoint_written_after_it_started(tmp_path: Path) -> None:
    clock = FakeClock()

    def training_writes_during_the_second_wait(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 2:
            write_checkpoint(tmp_path / "checkpoint_step_00000012", step=12)

    found = serve.wait_for_checkpoint(
        str(tmp_path), 1800, poll_s=5, clock=clock, sleep=training_writes_during_the_second_wait
    )
    assert found == (str(tmp_path / "checkpoint_step_00000012"), 12)
    assert clock.sleeps == [5, 5]


def test_replica_fails_at_its_deadline_naming_the_uri_and_the_setting(tmp_path: Path) -> None:
    clock = FakeClock()
    with pytest.raises(serve.CheckpointNotReady) as err:
        serve.wait_for_checkpoint(str(tmp_path), 12, poll_s=5, clock=clock, sleep=clock.sleep)
    assert str(err.value) == (
        f"no complete checkpoint at {tmp_path} after 12 s (checkpoint_wait_s=12): has the training run written one "
        "there? Check its checkpoint URI, or raise tpuray:workloads.serve.checkpointWaitSeconds"
    )
    assert clock.sleeps == [5, 5, 2]


def test_checkpoint_deployment_sets_serves_own_health_checks() -> None:
    config = serve.CheckpointModel._deployment_config
    assert (config.health_check_period_s, config.health_check_timeout_s) == (10.0, 30.0)
