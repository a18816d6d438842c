"""The Ray Serve application: one builder, two backends.

Serve config (RayService serveConfigV2 or `serve run`):
    applications:
      - name: tpuray
        route_prefix: /
        import_path: ray_apps.serve:build_app
        args: {backend: checkpoint, checkpoint_uri: gs://bucket/runs/NAME}
    or  args: {backend: llm, model_id: ..., model_source: ..., accelerator_type: TPU-V6E,
               topology: 4x4, hosts_per_slice: 4, chips_per_host: 4, replicas: 1}

Backends:
- checkpoint: serves the MLP trained by ray_apps.train from its checkpoint (a checkpoint
  directory, or a run directory: the latest complete checkpoint is used). CPU only, numpy
  forward pass, so it runs anywhere, including next to training on TPU hosts.
    POST /predict  {"instances": [[sqft, rooms, age_years, distance_km, income_k], ...]}
               ->  {"predictions": [price_k, ...], "model_step": N, "model_id": "..."}
    GET  /healthz  ->  {"status": "ready", "reason": null, "backend": "checkpoint", "model_id": ..., "model_step": N}
               (waiting / loading / failed with a reason and HTTP 503 otherwise: ray_apps.health)
- llm: Ray Serve LLM (vLLM on TPU) with accelerator_type and a TPU topology so each replica
  is gang-placed on one whole slice; OpenAI-compatible routes (/v1/chat/completions ...).
  Needs vLLM: without it the builder fails with a one-paragraph message.

CLI:
    python -m ray_apps.serve --backend checkpoint --checkpoint-uri URI [--host 127.0.0.1] [--port 8000]
    python -m ray_apps.serve --backend llm --model-id M --model-source S --accelerator-type TPU-V6E \
        --topology 4x4 --hosts-per-slice 4 --chips-per-host 4 [--print-config]
"""

# No `from __future__ import annotations` here: FastAPI (through Serve's ingress wrapper)
# must see the request model as a class, or it takes `request` for a query parameter.
import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from fastapi import FastAPI, HTTPException, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ray import serve

from ray_apps import checkpoints, features, health, llm, slices
from ray_apps.contracts import SERVE_IMPORT_PATH as IMPORT_PATH

MAX_INSTANCES = 1024
# Serve's own replica health checks: what KubeRay honours now that the RayService unhealthy
# thresholds are no-ops. A replica whose check_health fails or hangs past the timeout is
# restarted by the Serve controller (docs.ray.io/en/latest/serve/production-guide/fault-tolerance.html).
HEALTH_CHECK_PERIOD_S = 10.0
HEALTH_CHECK_TIMEOUT_S = 30.0
# How often a replica waiting for its first checkpoint looks again, and says so in its log.
CHECKPOINT_POLL_S = 5.0
CHECKPOINT_LOG_EVERY_S = 60.0

log = logging.getLogger("ray.serve")


# ---------------------------------------------------------------- HTTP schema


class PredictRequest(BaseModel):
    """POST /predict body: raw feature rows in features.RAW_COLUMNS order."""

    model_config = ConfigDict(extra="forbid")
    instances: list[list[float]] = Field(min_length=1, max_length=MAX_INSTANCES)

    @field_validator("instances")
    @classmethod
    def _rows_have_all_features(cls, rows: list[list[float]]) -> list[list[float]]:
        width = len(features.RAW_COLUMNS)
        for i, row in enumerate(rows):
            if len(row) != width:
                raise ValueError(f"instance {i} has {len(row)} values; expected {width}: {list(features.RAW_COLUMNS)}")
            if not all(math.isfinite(v) for v in row):
                raise ValueError(f"instance {i} has a non-finite value")
        return rows


class PredictResponse(BaseModel):
    predictions: list[float]
    model_step: int
    model_id: str


HealthResponse = health.HealthReport  # GET /healthz: waiting / loading / ready / failed, with a reason


# ---------------------------------------------------------------- builder arguments


class AppArgs(BaseModel):
    """The args of build_app (a Serve config's `args`). Unknown keys are rejected so a typo
    fails the deploy instead of silently using a default."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["checkpoint", "llm"] = "checkpoint"
    model_id: str = "tpuray-mlp"
    replicas: int = Field(default=1, ge=1)
    # checkpoint backend
    checkpoint_uri: str | None = None
    # How long a replica waits for the training run's first complete checkpoint before it
    # fails its start with a message naming the URI (0: fail at once when there is none).
    checkpoint_wait_s: float = Field(default=1800.0, ge=0)
    num_cpus: float = Field(default=1.0, gt=0)
    # On emulated/real TPU hosts: where the CPU replica may run, e.g.
    # {"ray.io/accelerator-type": "TPU-V6E"} or {"ray.io/tpu-slice-name": "!slice-0"}.
    label_selector: dict[str, str] | None = None
    # The capacity chain's later shapes, in order: Ray's fallback_strategy for the replica when
    # label_selector's hosts have no room (docs/capacity.md).
    fallback_label_selectors: list[dict[str, str]] = Field(default_factory=list)
    # llm backend (values from the catalog)
    model_source: str | None = None
    accelerator_type: str | None = None
    topology: str | None = None
    hosts_per_slice: int | None = Field(default=None, ge=1)
    chips_per_host: int | None = Field(default=None, ge=1)
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _backend_needs(self) -> "AppArgs":
        if self.backend == "checkpoint" and not self.checkpoint_uri:
            raise ValueError("backend=checkpoint needs checkpoint_uri (a checkpoint or run directory)")
        if self.backend == "llm":
            missing = [
                n
                for n in ("accelerator_type", "topology", "hosts_per_slice", "chips_per_host")
                if getattr(self, n) is None
            ]
            if missing:
                raise ValueError(f"backend=llm needs {', '.join(missing)} (from the TPU catalog)")
        return self


# ---------------------------------------------------------------- checkpoint backend

api = FastAPI(title="tpuray checkpoint model", version="1")


class CheckpointNotReady(RuntimeError):
    """No complete checkpoint appeared at the URI before the replica's deadline."""


def wait_for_checkpoint(
    uri: str,
    wait_s: float,
    *,
    poll_s: float = CHECKPOINT_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, int]:
    """(checkpoint uri, step) of the latest complete checkpoint, waiting up to wait_s for one.

    On a stack's first deploy the RayService starts before its RayJob has written anything;
    the replica then waits here, inside its constructor, so Serve keeps the application
    DEPLOYING (and KubeRay never switches traffic to it) until the model is loaded. Past the
    deadline the constructor fails with this message and Serve reports DEPLOY_FAILED.
    """
    start = clock()
    logged = start
    while True:
        found = checkpoints.find_latest(uri)
        if found is not None:
            return found
        waited = clock() - start
        if waited >= wait_s:
            raise CheckpointNotReady(
                f"no complete checkpoint at {uri} after {waited:.0f} s (checkpoint_wait_s={wait_s:.0f}): "
                "has the training run written one there? Check its checkpoint URI, or raise "
                "tpuray:workloads.serve.checkpointWaitSeconds"
            )
        if clock() - logged >= CHECKPOINT_LOG_EVERY_S:
            log.warning("waiting for the first complete checkpoint at %s (%.0f of %.0f s)", uri, waited, wait_s)
            logged = clock()
        sleep(min(poll_s, max(wait_s - waited, 0.0)))


class CheckpointPredictor:
    """The checkpoint backend's model, without Serve (unit-testable in-process)."""

    def __init__(self, checkpoint_uri: str, model_id: str, wait_s: float = 0.0) -> None:
        from ray_apps import model

        # What /healthz says; the code that waits for or loads the checkpoint sets it.
        self.health = health.Health(
            "checkpoint", model_id, health.State.WAITING, f"no checkpoint yet at {checkpoint_uri}"
        )
        try:
            found = wait_for_checkpoint(checkpoint_uri, wait_s)
        except CheckpointNotReady as err:
            self.health.set(health.State.FAILED, str(err))
            raise
        self.health.set(health.State.LOADING, f"loading {found[0]} (step {found[1]})")
        try:
            state = model.load_checkpoint(checkpoints.fetch(found[0]))
        except Exception as err:
            self.health.set(health.State.FAILED, f"could not load {found[0]}: {err}")
            raise
        self._apply = model.apply
        self.params = state.params
        self.stats = state.stats
        self.step = state.step
        self.model_id = model_id
        self.health.model_step = state.step
        self.health.set(health.State.READY)

    def predict(self, request: PredictRequest) -> PredictResponse:
        """Raises ValueError for rows that are valid JSON but impossible houses (sqft <= 0)."""
        x = features.instances_to_features(request.instances, self.stats)
        # numpy forward pass: no JAX backend in the replica, so it never claims TPU chips.
        y = self._apply(self.params, x, xp=np)
        predictions = features.denormalise_target(y, self.stats).tolist()
        return PredictResponse(predictions=predictions, model_step=self.step, model_id=self.model_id)

    def health_report(self) -> HealthResponse:
        return self.health.report()


# Above the deployment: @serve.deployment pickles the class where it is defined, with the module
# globals that exist at that point (a helper defined below it is a NameError in the replica).
def replica_placement(node_labels: dict[str, str], primary: dict[str, str] | None) -> dict[str, Any]:
    """What /healthz says about where a replica runs: its node's slice, generation and tier, and
    whether the node is off the primary selector (a fallback step of the chain)."""
    return {
        "slice": node_labels.get(slices.SLICE_NAME),
        "generation": node_labels.get(slices.GENERATION),
        "tier": node_labels.get(slices.CAPACITY_TIER) or node_labels.get(slices.MARKET_TYPE),
        "fallback": bool(primary) and not slices.label_matches(primary or {}, node_labels),
    }


def _own_node_labels() -> dict[str, str]:  # pragma: no mutate (Ray's live view)
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return dict(node.get("Labels") or {})
    return {}


@serve.deployment(
    name="checkpoint-model",
    health_check_period_s=HEALTH_CHECK_PERIOD_S,
    health_check_timeout_s=HEALTH_CHECK_TIMEOUT_S,
)
@serve.ingress(api)
class CheckpointModel:
    def __init__(
        self, checkpoint_uri: str, model_id: str, wait_s: float = 0.0, primary: dict[str, str] | None = None
    ) -> None:
        self.predictor = CheckpointPredictor(checkpoint_uri, model_id, wait_s)
        self.predictor.health.placement = replica_placement(_own_node_labels(), primary)

    def check_health(self) -> None:
        """Serve's periodic replica check: a replica whose model is gone is restarted."""
        if self.predictor.params is None:
            raise RuntimeError(f"model {self.predictor.model_id} lost its parameters")

    @api.post("/predict", response_model=PredictResponse)
    def predict(self, request: PredictRequest) -> PredictResponse:
        try:
            return self.predictor.predict(request)
        except ValueError as e:
            raise HTTPException(status_code=422, detail=str(e)) from None

    @api.get("/healthz", response_model=HealthResponse)
    def healthz(self, response: Response) -> HealthResponse:
        report = self.predictor.health_report()
        response.status_code = report.http_status  # 200 ready, 503 otherwise
        return report


def checkpoint_actor_options(args: AppArgs) -> dict[str, Any]:
    options: dict[str, Any] = {"num_cpus": args.num_cpus}
    if args.label_selector:
        # Checked here: Ray leaves a replica with a malformed selector PENDING, silently.
        options["label_selector"] = slices.validate_selector(args.label_selector)
    if args.fallback_label_selectors:
        options["fallback_strategy"] = slices.fallback_strategy(args.fallback_label_selectors)
    return options


# ---------------------------------------------------------------- builder


def llm_config_from_args(args: AppArgs) -> Any:
    assert args.accelerator_type and args.topology and args.hosts_per_slice and args.chips_per_host
    return llm.build_llm_config(
        model_id=args.model_id,
        model_source=args.model_source,
        accelerator_type=args.accelerator_type,
        topology=args.topology,
        hosts_per_slice=args.hosts_per_slice,
        chips_per_host=args.chips_per_host,
        replicas=args.replicas,
        engine_kwargs=args.engine_kwargs,
    )


def build_app(args: dict[str, Any]) -> Any:
    """Serve application builder (import_path ray_apps.serve:build_app)."""
    parsed = AppArgs.model_validate(args or {})
    if parsed.backend == "llm":
        return llm.build_openai_app(llm_config_from_args(parsed))
    return CheckpointModel.options(
        num_replicas=parsed.replicas, ray_actor_options=checkpoint_actor_options(parsed)
    ).bind(parsed.checkpoint_uri, parsed.model_id, parsed.checkpoint_wait_s, parsed.label_selector)


def serve_config_entry(args: dict[str, Any], name: str = "tpuray", route_prefix: str = "/") -> dict[str, Any]:
    """The Serve config `applications` entry for these args (validated here first).

    For llm this is Ray's own OpenAI app with the validated LLMConfig, so the cluster image
    needs vLLM but not ray_apps; for checkpoint it points at build_app.
    """
    parsed = AppArgs.model_validate(args)
    if parsed.backend == "llm":
        return llm.openai_app_entry(llm_config_from_args(parsed), name=name, route_prefix=route_prefix)
    return {
        "name": name,
        "route_prefix": route_prefix,
        "import_path": IMPORT_PATH,
        "args": parsed.model_dump(exclude_defaults=True),
    }


# ---------------------------------------------------------------- CLI


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, Any]]:
    p = argparse.ArgumentParser(prog="python -m ray_apps.serve", description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("checkpoint", "llm"), default="checkpoint")
    p.add_argument("--checkpoint-uri")
    p.add_argument("--model-id")
    p.add_argument("--model-source")
    p.add_argument("--accelerator-type")
    p.add_argument("--topology")
    p.add_argument("--hosts-per-slice", type=int)
    p.add_argument("--chips-per-host", type=int)
    p.add_argument("--replicas", type=int)
    p.add_argument("--label-selector", type=json.loads, help='JSON, e.g. {"ray.io/accelerator-type": "TPU-V6E"}')
    p.add_argument("--host", default="127.0.0.1", help="HTTP proxy bind address")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--address", default=None, help="Ray address (default: RAY_ADDRESS, else local 127.0.0.1)")
    p.add_argument("--print-config", action="store_true", help="print the Serve config entry and exit")
    ns = p.parse_args(argv)
    app_keys = (
        "backend checkpoint_uri model_id model_source accelerator_type topology hosts_per_slice "
        "chips_per_host replicas label_selector"
    ).split()
    app_args = {k: getattr(ns, k) for k in app_keys if getattr(ns, k) is not None}
    return ns, app_args


def main(argv: list[str] | None = None) -> int:
    from pydantic import ValidationError

    ns, app_args = parse_args(argv)
    try:
        if ns.print_config:
            print(json.dumps(serve_config_entry(app_args), indent=2))
            return 0
        app = build_app(app_args)
    except (ValidationError, ValueError, llm.LLMBackendUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from ray_apps.runtime import ensure_ray

    ensure_ray(ns.address)
    serve.start(http_options={"host": ns.host, "port": ns.port})
    print(f"serving backend={app_args['backend']} on http://{ns.host}:{ns.port}/ (Ctrl-C to stop)")
    serve.run(app, name="tpuray", route_prefix="/", blocking=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
