"""The llm Serve backend's stack keys: checked with one line per problem, rendered into Ray's own LLMConfig."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tpuray.checks import hf_token
from tpuray.config import ConfigError, StackConfig, stacks_dir
from tpuray.config.checks import parse_stack_config
from tpuray.desired import llm_stack

PROD = {
    k.removeprefix("tpuray:"): v
    for k, v in yaml.safe_load((stacks_dir() / "Pulumi.prod.yaml").read_text())["config"].items()
}
TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"  # the shape of a Hugging Face token, not a real one
V6E_SERVE = {"name": "v6e-serve", "generation": "v6e", "topology": "4x4", "slices": 2, "capacity": [{"onDemand": True}]}


def stack(**serve: Any) -> dict[str, Any]:
    """Prod with its serve workload on a 2-slice v6e 4x4 pool, and these serve keys changed."""
    raw = copy.deepcopy(PROD)
    raw["slicePools"].append(copy.deepcopy(V6E_SERVE))
    raw["workloads"]["serve"].update({"pool": "v6e-serve", **serve})
    for key, value in serve.items():
        if value is None:
            del raw["workloads"]["serve"][key]
    return raw


def parse(raw: dict[str, Any]) -> StackConfig:
    return parse_stack_config(raw, "prod")


def errors(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(raw)
    return info.value.lines


def test_prod_renders_an_llm_config_on_its_v5e_slice_with_weights_from_gcs() -> None:
    data = llm_stack.llm_config_data(parse(PROD))
    assert data["model_loading_config"] == {
        "model_id": "google/gemma-3-4b-it",
        "model_source": "gs://acme-ml-prod-models/google/gemma-3-4b-it",
    }
    assert data["accelerator_type"] == "TPU-V5LITEPOD"
    assert data["accelerator_config"] == {"kind": "tpu", "topology": "2x4"}
    assert data["engine_kwargs"] == {"tensor_parallel_size": 8, "max_model_len": 8192}
    assert data["deployment_config"] == {"num_replicas": 2}


def test_the_engine_spans_all_16_chips_of_a_v6e_4x4_slice_by_default() -> None:
    data = llm_stack.llm_config_data(parse(stack()))
    assert data["accelerator_config"] == {"kind": "tpu", "topology": "4x4"}
    assert data["engine_kwargs"]["tensor_parallel_size"] == 16


def test_tensor_times_pipeline_parallel_may_cover_the_slice_in_two_stages() -> None:
    data = llm_stack.llm_config_data(parse(stack(pipelineParallelSize=2)))
    assert (data["engine_kwargs"]["tensor_parallel_size"], data["engine_kwargs"]["pipeline_parallel_size"]) == (8, 2)


def test_more_chips_than_the_slice_has_is_rejected_naming_the_slice() -> None:
    assert errors(stack(tensorParallelSize=32)) == [
        "tpuray:workloads.serve.tensorParallelSize: 32 chips per replica (tensor x pipeline parallel) is invalid; "
        "the 4x4 slice has 16 chips"
    ]


def test_a_partial_host_beyond_the_first_is_rejected_as_ray_serve_llm_does() -> None:
    assert errors(stack(tensorParallelSize=6)) == [
        "tpuray:workloads.serve.tensorParallelSize: 6 chips per replica (tensor x pipeline parallel) is invalid; "
        "more than one host's chips must be a multiple of the 4 chips per host"
    ]


def test_autoscaling_bounds_render_serves_autoscaling_config() -> None:
    raw = stack(replicas=None, autoscaling={"minReplicas": 1, "maxReplicas": 2, "targetOngoingRequests": 8})
    data = llm_stack.llm_config_data(parse(raw))
    assert data["deployment_config"] == {
        "autoscaling_config": {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8.0}
    }


def test_autoscaling_beyond_the_pools_slices_is_rejected() -> None:
    assert errors(stack(replicas=None, autoscaling={"maxReplicas": 3})) == [
        "tpuray:workloads.serve.autoscaling.maxReplicas: workloads on pool 'v6e-serve' need 3 slices "
        "(tpuray:workloads.serve.autoscaling.maxReplicas) but the pool has 2; raise slicePools 'v6e-serve'.slices "
        "or move a workload to another pool"
    ]


def test_autoscaling_min_above_max_is_rejected() -> None:
    assert errors(stack(replicas=None, autoscaling={"minReplicas": 2, "maxReplicas": 1})) == [
        "tpuray:workloads.serve.autoscaling.minReplicas: 2 is invalid; it must be <= maxReplicas (1)"
    ]


def test_a_model_source_outside_gcs_is_rejected() -> None:
    assert errors(stack(modelSource="hf://google/gemma-3-4b-it")) == [
        "tpuray:workloads.serve.modelSource: 'hf://google/gemma-3-4b-it' is invalid; use gs://BUCKET/PATH, the "
        "folder holding the model in Hugging Face layout (config.json, *.safetensors, tokenizer files)"
    ]


def test_engine_kwargs_pass_through_to_the_llm_config() -> None:
    data = llm_stack.llm_config_data(parse(stack(engineKwargs={"max_num_seqs": 64, "enable_prefix_caching": True})))
    assert data["engine_kwargs"] == {
        "tensor_parallel_size": 16,
        "max_model_len": 8192,
        "max_num_seqs": 64,
        "enable_prefix_caching": True,
    }


def test_engine_kwargs_the_stack_sets_by_name_are_rejected() -> None:
    assert errors(stack(engineKwargs={"tensor_parallel_size": 4})) == [
        "tpuray:workloads.serve.engineKwargs.tensor_parallel_size: set by tpuray; use "
        "tpuray:workloads.serve.tensorParallelSize instead"
    ]


def test_what_rays_llm_config_rejects_comes_back_naming_the_engine_kwarg() -> None:
    cfg = parse(stack(engineKwargs={"disable_log_stats": True}))
    with pytest.raises(ConfigError) as info:
        llm_stack.llm_config(cfg)
    assert info.value.lines == [
        "tpuray:workloads.serve.engineKwargs.disable_log_stats: rejected by Ray Serve LLM's LLMConfig: "
        "disable_log_stats cannot be set to True when log_engine_metrics is enabled. Engine metrics require log "
        "stats to be enabled."
    ]


def test_a_secret_manager_reference_mounts_the_token_as_a_file_never_a_value() -> None:
    data = llm_stack.llm_config_data(parse(stack(hfTokenSecret="projects/acme-ml-prod/secrets/hf-token")))
    assert data["runtime_env"]["env_vars"]["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
    assert hf_token.plaintext_token_paths(data) == []


def test_a_plaintext_token_as_the_secret_is_rejected_without_echoing_it() -> None:
    lines = errors(stack(hfTokenSecret=TOKEN))
    assert lines == [
        "tpuray:workloads.serve.hfTokenSecret: a plaintext token is invalid; name a Secret Manager secret, "
        "projects/PROJECT/secrets/NAME[/versions/N|latest], never the token"
    ]
    assert TOKEN not in "".join(lines)


def test_a_secret_name_that_is_not_a_secret_manager_reference_is_rejected() -> None:
    assert errors(stack(hfTokenSecret="hf-token")) == [
        "tpuray:workloads.serve.hfTokenSecret: 'hf-token' is invalid; name a Secret Manager secret, "
        "projects/PROJECT/secrets/NAME[/versions/N|latest], never the token"
    ]


def test_a_plaintext_token_anywhere_in_the_serve_keys_is_rejected() -> None:
    assert errors(stack(engineKwargs={"hf_overrides": {"token": TOKEN}})) == [
        "tpuray:workloads.serve.engineKwargs.hf_overrides.token: holds a Hugging Face token in plain text; store it "
        "in Secret Manager and set tpuray:workloads.serve.hfTokenSecret to projects/PROJECT/secrets/NAME"
    ]


def test_autoscaled_serve_claims_its_max_replicas_beside_training_on_the_same_pool() -> None:
    raw = stack(replicas=None, autoscaling={"minReplicas": 1, "maxReplicas": 2})
    raw["workloads"]["train"]["pool"] = "v6e-serve"  # 2 training slices + up to 2 serving on 2 slices
    assert errors(raw) == [
        "tpuray:workloads.serve.autoscaling.maxReplicas: workloads on pool 'v6e-serve' need 4 slices "
        "(tpuray:workloads.serve.autoscaling.maxReplicas, tpuray:workloads.train.slices) but the pool has 2; raise "
        "slicePools 'v6e-serve'.slices or move a workload to another pool"
    ]


def test_a_token_secret_on_the_checkpoint_backend_is_refused_as_never_read() -> None:
    raw = stack(
        backend="checkpoint",
        checkpointUri="gs://acme-ml-prod-ray/checkpoints",
        hfTokenSecret="projects/acme-ml-prod/secrets/hf-token",
    )
    assert errors(raw) == [
        "tpuray:workloads.serve.hfTokenSecret: only the llm backend reads a Hugging Face token; the checkpoint "
        "backend would never use it: remove it"
    ]


def test_the_mounted_secret_version_is_latest_unless_the_stack_pins_one() -> None:
    latest = parse(stack(hfTokenSecret="projects/acme-ml-prod/secrets/hf-token"))
    pinned = parse(stack(hfTokenSecret="projects/acme-ml-prod/secrets/hf-token/versions/7"))
    assert llm_stack.hf_token_version(latest) == "projects/acme-ml-prod/secrets/hf-token/versions/latest"
    assert llm_stack.hf_token_version(pinned) == "projects/acme-ml-prod/secrets/hf-token/versions/7"
    assert llm_stack.hf_token_version(parse(stack())) is None


def test_an_llm_pool_of_2_host_v5e_2x4_slices_is_refused_as_ray_would_read_them_as_one_vm() -> None:
    raw = stack()
    raw["slicePools"][-1].update(generation="v5e", topology="2x4", machineType="ct5lp-hightpu-4t")
    assert errors(raw) == [
        "tpuray:slicePools[2].machineType: 'ct5lp-hightpu-4t' makes v5e 2x4 2 hosts of 4 chips: Ray's SlicePlacementGroup "
        "(JaxTrainer, Ray Serve LLM) reserves it as one 8-chip VM, so a Ray Serve LLM replica of workloads.serve could span two slices; "
        "use ct5lp-hightpu-8t (8 chips per pod, numOfHosts: 1) or a topology of more than 8 chips"
    ]


def test_a_train_pool_and_an_llm_pool_ray_would_read_as_one_vm_are_both_reported_train_first() -> None:
    raw = stack()
    raw["slicePools"][0].update(topology="2x4", machineType="ct6e-standard-4t", fallback=[])
    raw["slicePools"][-1].update(generation="v5e", topology="2x4", machineType="ct5lp-hightpu-4t")
    assert errors(raw) == [
        "tpuray:slicePools[0].machineType: 'ct6e-standard-4t' makes v6e 2x4 2 hosts of 4 chips: Ray's SlicePlacementGroup "
        "(JaxTrainer, Ray Serve LLM) reserves it as one 8-chip VM, so the JaxTrainer gang of workloads.train could span two slices; "
        "use ct6e-standard-8t (8 chips per pod, numOfHosts: 1) or a topology of more than 8 chips",
        "tpuray:slicePools[2].machineType: 'ct5lp-hightpu-4t' makes v5e 2x4 2 hosts of 4 chips: Ray's SlicePlacementGroup "
        "(JaxTrainer, Ray Serve LLM) reserves it as one 8-chip VM, so a Ray Serve LLM replica of workloads.serve could span two slices; "
        "use ct5lp-hightpu-8t (8 chips per pod, numOfHosts: 1) or a topology of more than 8 chips",
    ]
