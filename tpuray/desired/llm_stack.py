"""The llm Serve backend of a stack: its checks and the Ray Serve LLM LLMConfig it renders.

The RayService of an llm stack carries Ray's own OpenAI app (`ray.serve.llm:build_openai_app`)
with one LLMConfig built here from `tpuray:workloads.serve` and the pool's catalog shape:
accelerator_type and accelerator_config {kind: tpu, topology} from the shape, and
tensor_parallel_size = the slice's chips unless the stack sets tensorParallelSize /
pipelineParallelSize. Weights come from modelSource (gs://...): Ray Serve LLM's cloud model
loading downloads them on the replica's hosts (docs/apps.md explains the choice).

Validation at preview time: `llm_config(cfg)` constructs Ray's own LLMConfig pydantic model
(ray_apps.llm imports it from its private path, which imports without vLLM), so every value
Ray checks (accelerator type, TPU topology, deployment config...) is checked by Ray, and its
errors come back naming the stack key. What Ray checks only with vLLM installed is NOT
checked here: the names of engineKwargs (VLLMEngineConfig compares them with vLLM's
AsyncEngineArgs, which needs the vllm package).
"""

from __future__ import annotations

from typing import Any

from tpuray import catalog
from tpuray.checks.gcp_names import GCS_FOLDER, SECRET_REF
from tpuray.checks.hf_token import HF_TOKEN, plaintext_token_paths
from tpuray.config.base import NAMESPACE
from tpuray.config.schema import StackConfig
from tpuray.errors import ConfigError

KEY = f"{NAMESPACE}:workloads.serve"
OPENAI_APP_IMPORT_PATH = "ray.serve.llm:build_openai_app"
# Keys the stack sets by name so there is one place for each (and the catalog does the arithmetic).
_OWNED_ENGINE_KWARGS = {
    "tensor_parallel_size": "tensorParallelSize",
    "pipeline_parallel_size": "pipelineParallelSize",
    "max_model_len": "maxModelLen",
    "hf_token": "hfTokenSecret",
}
# Where the GKE Secret Manager add-on mounts the token; huggingface_hub reads HF_TOKEN_PATH.
# The folder is a CSI volume of the add-on's driver on every serve pod, the file name is the
# SecretProviderClass's `path` (infra/components/hf_secret.py; docs/apps.md cites the sources).
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
HF_TOKEN_FILE_NAME = "token"
HF_TOKEN_FILE = f"{HF_TOKEN_DIR}/{HF_TOKEN_FILE_NAME}"
# The GKE Secret Manager add-on's CSI driver (the open-source driver is secrets-store.csi.k8s.io).
SECRET_MANAGER_CSI_DRIVER = "secrets-store-gke.csi.k8s.io"
VOLUME_NAME = "hf-token"  # the token volume of every serve pod (infra/components/hf_secret.py)


def hf_token_version(cfg: StackConfig) -> str | None:
    """projects/P/secrets/S/versions/V of the llm stack's Hugging Face token (V: latest unless the
    stack pins one); None when the stack names no token."""
    serve = cfg.workloads.serve
    if serve is None or serve.backend != "llm" or not serve.hf_token_secret:
        return None
    ref = serve.hf_token_secret
    return ref if "/versions/" in ref else f"{ref}/versions/latest"


def devices(cfg: StackConfig) -> int:
    """Chips one replica's engine uses: tensor x pipeline parallel (default: the whole slice)."""
    serve = cfg.workloads.serve
    assert serve is not None
    shape = cfg.pool(serve.pool).shape
    tp = serve.tensor_parallel_size or (shape.chips // (serve.pipeline_parallel_size or 1))
    return tp * (serve.pipeline_parallel_size or 1)


def max_replicas(cfg: StackConfig) -> int:
    serve = cfg.workloads.serve
    assert serve is not None
    return serve.autoscaling.max_replicas if serve.autoscaling else serve.replicas


def stack_lines(cfg: StackConfig) -> list[str]:
    """One line per problem of the serve workload's llm keys (no Ray import: runs on every load)."""
    serve = cfg.workloads.serve
    if serve is None:
        return []
    lines = [
        f"{KEY}.{p}: holds a Hugging Face token in plain text; store it in Secret Manager and set "
        f"{KEY}.hfTokenSecret to projects/PROJECT/secrets/NAME"
        for p in plaintext_token_paths(serve.model_dump(by_alias=True, exclude={"hf_token_secret"}))
    ]
    if serve.hf_token_secret is not None and not SECRET_REF.match(serve.hf_token_secret):
        # Never echo a value that may be the token itself.
        shown = "a plaintext token" if HF_TOKEN.search(serve.hf_token_secret) else repr(serve.hf_token_secret)
        lines.append(
            f"{KEY}.hfTokenSecret: {shown} is invalid; name a Secret Manager secret, "
            "projects/PROJECT/secrets/NAME[/versions/N|latest], never the token"
        )
    if serve.backend != "llm":
        if serve.hf_token_secret is not None:
            lines.append(
                f"{KEY}.hfTokenSecret: only the llm backend reads a Hugging Face token; "
                f"the {serve.backend} backend would never use it: remove it"
            )
        return lines
    if serve.model_source is not None and not GCS_FOLDER.match(serve.model_source):
        lines.append(
            f"{KEY}.modelSource: {serve.model_source!r} is invalid; use gs://BUCKET/PATH, the folder holding the "
            "model in Hugging Face layout (config.json, *.safetensors, tokenizer files)"
        )
    for kwarg, field in _OWNED_ENGINE_KWARGS.items():
        if kwarg in serve.engine_kwargs:
            lines.append(f"{KEY}.engineKwargs.{kwarg}: set by tpuray; use {KEY}.{field} instead")
    if serve.autoscaling and serve.autoscaling.min_replicas > serve.autoscaling.max_replicas:
        a = serve.autoscaling
        lines.append(
            f"{KEY}.autoscaling.minReplicas: {a.min_replicas} is invalid; it must be <= maxReplicas ({a.max_replicas})"
        )
    pool = next((p for p in cfg.slice_pools if p.name == serve.pool), None)
    if pool is None:
        return lines  # reported by the pool check
    try:
        shape = pool.shape
    except catalog.CatalogError:
        return lines  # reported by the shape check
    problem = catalog.engine_devices_problem(shape, devices(cfg))
    if problem:
        field = "tensorParallelSize" if serve.tensor_parallel_size else "pipelineParallelSize"
        lines.append(
            f"{KEY}.{field}: {devices(cfg)} chips per replica (tensor x pipeline parallel) is invalid; {problem}"
        )
    # More replicas than the pool has slices: the stack's slice-demand check (tpuray/desired/checks.py).
    return lines


def llm_config_kwargs(cfg: StackConfig) -> dict[str, Any]:
    """The LLMConfig arguments for the stack's llm backend (plain data, before Ray validates it)."""
    serve = cfg.workloads.serve
    assert serve is not None and serve.backend == "llm"
    shape = cfg.pool(serve.pool).shape
    pp = serve.pipeline_parallel_size or 1
    engine: dict[str, Any] = {"tensor_parallel_size": devices(cfg) // pp}
    if pp > 1:
        engine["pipeline_parallel_size"] = pp
    if serve.max_model_len:
        engine["max_model_len"] = serve.max_model_len
    engine.update(serve.engine_kwargs)
    env = {"TPU_MULTIHOST_BACKEND": "ray", "JAX_PLATFORMS": "tpu,cpu"}
    if serve.hf_token_secret:
        env["HF_TOKEN_PATH"] = HF_TOKEN_FILE  # a file the Secret Manager add-on mounts, never the value
    deployment: dict[str, Any]
    if serve.autoscaling:
        a = serve.autoscaling
        auto: dict[str, Any] = {"min_replicas": a.min_replicas, "max_replicas": a.max_replicas}
        if a.target_ongoing_requests is not None:
            auto["target_ongoing_requests"] = a.target_ongoing_requests
        deployment = {"autoscaling_config": auto}
    else:
        deployment = {"num_replicas": serve.replicas}
    loading: dict[str, Any] = {"model_id": serve.model_id}
    if serve.model_source:
        loading["model_source"] = serve.model_source
    return {
        "model_loading_config": loading,
        "accelerator_type": shape.ray_accelerator_type,
        "accelerator_config": {"kind": "tpu", "topology": shape.topology},
        "engine_kwargs": engine,
        "deployment_config": deployment,
        "runtime_env": {"env_vars": env},
    }


_ERROR_KEYS = {
    "model_loading_config": "modelId",
    "engine_kwargs": "engineKwargs",
    "deployment_config": "replicas",
    "accelerator_type": "pool",
    "accelerator_config": "pool",
}


def llm_config(cfg: StackConfig) -> Any:
    """Ray Serve LLM's own LLMConfig for the stack; a ConfigError naming the stack key otherwise."""
    from pydantic import ValidationError

    from ray_apps import llm

    kwargs = llm_config_kwargs(cfg)
    serve = cfg.workloads.serve
    assert serve is not None
    try:
        return llm.llm_config_class()(**kwargs)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            top = str(e["loc"][0]) if e["loc"] else ""
            field = _ERROR_KEYS.get(top, "")
            if top == "deployment_config" and serve.autoscaling:
                field = "autoscaling"
            if not top:  # a whole-model check: name the engine kwarg it mentions, if any
                field = next((f"engineKwargs.{k}" for k in serve.engine_kwargs if k in e["msg"]), "")
            where = f"{KEY}.{field}" if field else KEY
            if field == "pool":
                where += f" ({serve.pool!r}: accelerator {kwargs['accelerator_type']}, topology "
                where += f"{kwargs['accelerator_config']['topology']})"
            msg = str(e["msg"]).removeprefix("Value error, ")
            lines.append(f"{where}: rejected by Ray Serve LLM's LLMConfig: {msg}")
        raise ConfigError(lines) from None


def llm_config_data(cfg: StackConfig) -> dict[str, Any]:
    """The validated LLMConfig as the JSON data a Serve config carries."""
    return llm_config(cfg).model_dump(mode="json", exclude_unset=True)


def provider_class_name(object_name: str) -> str:
    """tpuray-prod-serve-hf-token: the SecretProviderClass of one RayService."""
    return f"{object_name}-hf-token"


def mount_token(cluster_spec: dict[str, Any], object_name: str) -> None:
    """Give the head and every worker group the token volume, mounted read-only in each container."""
    volume = {
        "name": VOLUME_NAME,
        "csi": {
            "driver": SECRET_MANAGER_CSI_DRIVER,
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": provider_class_name(object_name)},
        },
    }
    mount = {"name": VOLUME_NAME, "mountPath": HF_TOKEN_DIR, "readOnly": True}
    for group in [cluster_spec["headGroupSpec"], *cluster_spec["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        pod.setdefault("volumes", []).append(dict(volume))
        for container in pod["containers"]:
            container.setdefault("volumeMounts", []).append(dict(mount))
