"""The emulator's rewrites of a rendered Ray Serve LLM application (and only these).

The RayService's LLM application (`ray.serve.llm:build_openai_app` with its LLMConfig) is
deployed on the emulator as rendered, with three additions, each listed by `tpuray local
run serve` and `tpuray local explain serve`:

1. RAYLLM_VLLM_ENGINE_CLS = tpuray.local.llm_emulator.standin:StandInEngine: Ray Serve LLM's own
   engine-class override; LLMServer starts the CPU stand-in instead of vLLM (standin.py says
   what it does not model).
2. PYTHONPATH += tpuray/local/llm_emulator/stubs: Ray Serve LLM imports vLLM's protocol types and
   engine-argument classes (and one class each of httpx and python-multipart, vLLM
   dependencies) at import time; there is no vLLM CPU build here, so small stand-ins of those
   types take their place on the emulator. Never on GKE: the serve-llm image has vLLM.
3. Both go into the application's runtime_env and into each LLMConfig's runtime_env.env_vars:
   LLMServer replaces the replica's env_vars with the LLMConfig's (a shallow merge in
   LLMServer.get_deployment_options), so the application's alone would not reach the replica.

Before anything is deployed, `topology_problems` refuses an LLMConfig without
accelerator_config.topology on a multi-host slice: on GKE the policy serve-tpu-topology
refuses it; here it fails at once, naming the missing topology, instead of leaving replicas
whose per-chip bundles may straddle slices or wait in DEPLOYING.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpuray.catalog import SliceShape

OPENAI_APP = "ray.serve.llm:build_openai_app"
STUBS = Path(__file__).resolve().parent / "stubs"
ENGINE_ENV = "RAYLLM_VLLM_ENGINE_CLS"
# Not imported from standin.py: that imports Ray Serve LLM, which needs the stubs on the path.
ENGINE_CLS = "tpuray.local.llm_emulator.standin:StandInEngine"


def is_llm_app(app: dict[str, Any]) -> bool:
    return app.get("import_path") == OPENAI_APP


def _env(env: dict[str, str]) -> dict[str, str]:
    # ${PYTHONPATH}: Ray's runtime_env expands it to the host's own value (the emulated image's site).
    return {**env, ENGINE_ENV: ENGINE_CLS, "PYTHONPATH": f"{STUBS}:{env.get('PYTHONPATH', '${PYTHONPATH}')}"}


def topology_problems(app: dict[str, Any], shape: SliceShape | None) -> list[str]:
    """One line per LLMConfig of the app that carries no topology while the slices are multi-host."""
    if shape is None or not shape.multi_host:
        return []
    lines = []
    for i, llm_config in enumerate((app.get("args") or {}).get("llm_configs") or []):
        topology = ((llm_config or {}).get("accelerator_config") or {}).get("topology")
        if not topology:
            lines.append(
                f"application {app.get('name')!r} llm_configs[{i}]: accelerator_config.topology is missing; the "
                f"emulated slices are {shape.generation} {shape.topology} ({shape.hosts} hosts): without a topology "
                f"Ray Serve LLM reserves per-chip bundles that may straddle slices or stay DEPLOYING; set "
                f"accelerator_config {{kind: tpu, topology: {shape.topology}}}"
            )
    return lines


def rewrite_app(app: dict[str, Any], emulated: SliceShape | None = None) -> list[str]:
    """Point the LLM app at the stand-in engine (and at the emulated slice when it is smaller
    than the rendered one); returns the rewrite lines. Changes `app` in place."""
    name = app.get("name")
    lines = []
    runtime_env = app.setdefault("runtime_env", {})
    runtime_env["env_vars"] = _env(runtime_env.get("env_vars") or {})
    for i, llm_config in enumerate(app.get("args", {}).get("llm_configs") or []):
        llm_env = llm_config.setdefault("runtime_env", {})
        llm_env["env_vars"] = _env(llm_env.get("env_vars") or {})
        accel = llm_config.get("accelerator_config") or {}
        if emulated is not None and accel.get("topology") and accel["topology"] != emulated.topology:
            old = accel["topology"]
            accel["topology"] = emulated.topology
            engine = llm_config.setdefault("engine_kwargs", {})
            engine["tensor_parallel_size"] = emulated.chips // int(engine.get("pipeline_parallel_size", 1))
            lines.append(
                f"{name}: llm_configs[{i}] topology {old} -> {emulated.topology}, tensor_parallel_size -> "
                f"{engine['tensor_parallel_size']} (the emulated slice)"
            )
    return [
        f"{name}: {ENGINE_ENV}={ENGINE_CLS} (Ray Serve LLM's engine override: a CPU stand-in for vLLM, which has "
        "no CPU build here)",
        f"{name}: PYTHONPATH += {STUBS} (stand-ins of the vLLM types Ray Serve LLM imports; emulator only)",
        *lines,
    ]


def sample_chat(app: dict[str, Any]) -> dict[str, Any]:
    """The chat request `local run serve` sends to the LLM app's first model."""
    (first, *_) = app["args"]["llm_configs"]
    return {
        "model": first["model_loading_config"]["model_id"],
        "messages": [{"role": "user", "content": "Which slice are you on?"}],
        "max_tokens": 16,
    }
