"""Ray Serve LLM configuration for multi-host TPU replicas, behind one small wrapper.

Why a wrapper: `import ray.serve.llm` fails unless vLLM (or SGLang) is installed, and vLLM's
wheels pull a multi-GB CUDA torch that CI must not install. The pydantic model itself,
LLMConfig, lives at a private path that imports without vLLM. We pin that path here (and
only here) against ray==2.60.0 so the production config is still built and validated in
tests; if Ray moves it, this module is the one place to change.

What makes a multi-host replica safe: accelerator_type plus accelerator_config
{"kind": "tpu", "topology": "4x4"}. With a topology, Serve LLM defers the placement group to
the replica, which reserves one whole slice atomically (ray.util.tpu.slice_placement_group)
instead of letting a gang of per-host bundles spread over several slices and sit DEPLOYING
forever.
"""

from __future__ import annotations

from typing import Any

# Pinned private path (ray==2.60.0, see requirements.lock).
_LLM_CONFIG_MODULE = "ray.llm._internal.serve.core.configs.llm_config"
OPENAI_APP_IMPORT_PATH = "ray.serve.llm:build_openai_app"

# From the Ray Serve LLM TPU guide's vllm-tpu example: the vLLM TPU engine spans hosts
# through Ray, and JAX must see the TPU first.
TPU_ENGINE_ENV = {"TPU_MULTIHOST_BACKEND": "ray", "JAX_PLATFORMS": "tpu,cpu"}


class LLMBackendUnavailable(RuntimeError):
    """The llm backend cannot run in this environment (no vLLM)."""


def llm_config_class() -> type:
    """Ray Serve LLM's LLMConfig pydantic model (no vLLM needed to import it)."""
    import importlib
    import logging

    # Ray's optional imports of torch/transformers log a WARNING each; neither is needed here.
    quiet = logging.getLogger("ray.llm._internal.common.utils.import_utils")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return importlib.import_module(_LLM_CONFIG_MODULE).LLMConfig
    except (ImportError, AttributeError) as e:  # Ray moved the private model
        raise LLMBackendUnavailable(
            f"cannot import LLMConfig from {_LLM_CONFIG_MODULE} ({e}); this wrapper is pinned to ray==2.60.0"
        ) from None
    finally:
        quiet.setLevel(level)


def build_llm_config(
    *,
    model_id: str,
    model_source: str | None,
    accelerator_type: str,
    topology: str,
    hosts_per_slice: int,
    chips_per_host: int,
    replicas: int = 1,
    engine_kwargs: dict[str, Any] | None = None,
    runtime_env: dict[str, Any] | None = None,
) -> Any:
    """A validated LLMConfig for one model whose replicas each span one whole TPU slice.

    hosts_per_slice and chips_per_host come from the catalog; the engine's tensor
    parallelism covers every chip of the slice.
    """
    if hosts_per_slice < 1 or chips_per_host < 1:
        raise ValueError("hosts_per_slice and chips_per_host must be >= 1")
    if replicas < 1:
        raise ValueError("replicas must be >= 1")
    env = {**TPU_ENGINE_ENV, **((runtime_env or {}).get("env_vars") or {})}
    llm_config_cls = llm_config_class()
    return llm_config_cls(
        model_loading_config={"model_id": model_id, "model_source": model_source or model_id},
        accelerator_type=accelerator_type,
        accelerator_config={"kind": "tpu", "topology": topology},
        engine_kwargs={"tensor_parallel_size": hosts_per_slice * chips_per_host, **(engine_kwargs or {})},
        deployment_config={"num_replicas": replicas},
        runtime_env={**(runtime_env or {}), "env_vars": env},
    )


def llm_config_dict(config: Any) -> dict[str, Any]:
    """The config as plain JSON data (what a Serve config file / RayService carries)."""
    return config.model_dump(mode="json", exclude_unset=True)


def openai_app_entry(config: Any, name: str = "llm", route_prefix: str = "/") -> dict[str, Any]:
    """A Serve config `applications` entry for Ray's own OpenAI app builder.

    Lets a RayService deploy the LLM without importing ray_apps on the cluster.
    """
    return {
        "name": name,
        "route_prefix": route_prefix,
        "import_path": OPENAI_APP_IMPORT_PATH,
        "args": {"llm_configs": [llm_config_dict(config)]},
    }


def build_openai_app(config: Any) -> Any:
    """The Serve application for the config; raises LLMBackendUnavailable without vLLM."""
    try:
        from ray.serve.llm import build_openai_app as ray_build_openai_app
    except ImportError as e:
        raise LLMBackendUnavailable(
            "the llm backend needs vLLM for TPU (e.g. the vllm/vllm-tpu image with Ray installed); "
            f"ray.serve.llm is not importable here: {e}. Use backend=checkpoint on CPU-only machines."
        ) from None
    return ray_build_openai_app({"llm_configs": [config]})
