"""The Ray release and the Ray workloads: `tpuray:ray` and `tpuray:workloads`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ray_apps import contracts
from tpuray.config.base import ConfigModel
from tpuray.config.security import ServeGateway

# The job's own defaults (ray_apps/contracts.py, stdlib only: the floor both sides stand on).
_TRAIN = contracts.train_defaults()


class RayConfig(ConfigModel):
    """The pinned Ray release every Ray object runs."""

    version: str = Field("2.60.0", description="Ray version: rayVersion and the image tag")
    python: str = Field("py312", pattern=r"^py3\d+$", description="the image's Python, e.g. py312")
    image: str | None = Field(None, description="default: rayproject/ray:<version>-<python>-tpu")

    @property
    def tpu_image(self) -> str:
        return self.image or f"rayproject/ray:{self.version}-{self.python}-tpu"


class SliceRange(ConfigModel):
    """An elastic run's slices: it trains on as few as `min` and grows to `max` (docs/capacity.md)."""

    # Bounds checked in tpuray/desired/checks.py (slice_range_lines): one line each (pydantic would
    # report a bad bound once per member of the `int | SliceRange` union).
    min: int = Field(description="the fewest slices the run keeps training on, >= 1")
    max: int = Field(description="the most slices it grows to, >= min")


class TrainWorkload(ConfigModel):
    """The training RayJob (`python -m ray_apps.train`)."""

    pool: str = Field(description="the slice pool it trains on")
    # The job's own defaults (ray_apps/contracts.py TrainArgs), so a key left out means the same here.
    slices: int | SliceRange = Field(
        _TRAIN["slices"], description="slices of the pool one run uses: a number, or {min, max} to train elastically"
    )
    batch_policy: Literal["per-slice", "global"] = Field(
        "per-slice",
        alias="batchPolicy",
        description="elastic: per-slice keeps each host's batch; global keeps the global batch by accumulating",
    )
    steps: int = Field(_TRAIN["steps"], ge=1, description="training steps")
    checkpoint_every: int = Field(
        _TRAIN["checkpoint_every"], alias="checkpointEvery", ge=1, description="steps between checkpoints"
    )
    data_uri: str = Field(alias="dataUri", description="training data: gs:// Parquet or JSONL")
    storage_uri: str = Field(alias="storageUri", description="where checkpoints and results go (gs://)")
    max_failures: int = Field(
        _TRAIN["max_failures"], alias="maxFailures", ge=0, description="restarts of a failed attempt (FailureConfig)"
    )
    active_deadline_seconds: int = Field(
        4 * 3600, alias="activeDeadlineSeconds", ge=60, description="the RayJob stops after this long"
    )
    backoff_limit: int = Field(2, alias="backoffLimit", ge=0, description="RayJob retries of a failed submission")
    # KubeRay deletes a finished job's RayCluster this long after the job ends (with
    # shutdownAfterJobFinishes); until then its TPU workers hold every chip of their slices. A
    # minute lets the dashboard show the end; the logs outlive the cluster in Cloud Logging
    # (the add-on's ray_cluster_logging_config). The cost preview prices the wait.
    ttl_seconds_after_finished: int = Field(
        60,
        alias="ttlSecondsAfterFinished",
        ge=0,
        description="a finished job's cluster, and the slices it holds, is deleted after this",
    )

    @property
    def max_slices(self) -> int:
        return self.slices if isinstance(self.slices, int) else self.slices.max

    @property
    def min_slices(self) -> int:
        return self.slices if isinstance(self.slices, int) else self.slices.min

    @property
    def elastic(self) -> bool:
        return self.min_slices < self.max_slices


class LlmAutoscaling(ConfigModel):
    """Serve autoscaling bounds of the llm backend: each replica holds one whole slice."""

    min_replicas: int = Field(1, alias="minReplicas", ge=0, description="replicas (slices) kept when idle")
    max_replicas: int = Field(alias="maxReplicas", ge=1, description="most replicas (slices) under load")
    target_ongoing_requests: float | None = Field(
        None, alias="targetOngoingRequests", gt=0, description="Serve's scale-up target per replica"
    )


class ServeWorkload(ConfigModel):
    """The Ray Serve RayService (ray_apps.serve)."""

    pool: str = Field(description="the slice pool its replicas run on")
    backend: Literal["llm", "checkpoint"] = Field(
        "llm", description="llm: a model served by Ray Serve LLM; checkpoint: the training run's checkpoints"
    )
    model_id: str = Field("google/gemma-3-4b-it", alias="modelId", description="llm backend: the model id")
    # llm backend (tpuray/desired/llm_stack.py turns these into Ray Serve LLM's LLMConfig and checks them)
    model_source: str | None = Field(
        None,
        alias="modelSource",
        description="llm: gs://BUCKET/PATH holding the weights in Hugging Face layout (Ray Serve LLM loads them)",
    )
    max_model_len: int | None = Field(None, alias="maxModelLen", ge=1, description="llm: longest context, tokens")
    tensor_parallel_size: int | None = Field(
        None, alias="tensorParallelSize", ge=1, description="llm: default every chip of the pool's slice"
    )
    pipeline_parallel_size: int | None = Field(None, alias="pipelineParallelSize", ge=1, description="llm: default 1")
    autoscaling: LlmAutoscaling | None = Field(None, description="llm: autoscaling bounds instead of fixed replicas")
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict, alias="engineKwargs", description="llm: passed through to the vLLM engine"
    )
    hf_token_secret: str | None = Field(
        None,
        alias="hfTokenSecret",
        description="llm: Secret Manager secret holding a Hugging Face token, projects/P/secrets/S[/versions/V]; "
        "mounted in the serve pods by the GKE Secret Manager add-on",
    )
    checkpoint_uri: str | None = Field(
        None, alias="checkpointUri", description="checkpoint backend: where to load from (default: the train storage)"
    )
    # checkpoint backend: how long a replica waits for the training run's first checkpoint
    # (first deploy of a stack) before its start fails naming the URI (ray_apps.serve).
    checkpoint_wait_seconds: int = Field(
        1800,
        alias="checkpointWaitSeconds",
        ge=0,
        le=86400,
        description="checkpoint backend: how long a replica waits for the first checkpoint",
    )
    replicas: int = Field(1, ge=1, description="Serve replicas, each on a whole slice of the pool")
    # How long the Serve app may stay out of RUNNING before the stuck-deploy alert fires
    # (tpuray.observe). Not rendered into the RayService: KubeRay ignores that field since 2023.
    service_unhealthy_seconds: int = Field(
        900,
        alias="serviceUnhealthySecondThreshold",
        ge=60,
        description="the stuck-deploy alert fires when Serve stays out of RUNNING this long",
    )
    gateway: ServeGateway | None = Field(None, description="the GKE Gateway in front of Serve (docs/security.md)")


class InteractiveCluster(ConfigModel):
    """A long-lived RayCluster for notebooks and ad-hoc jobs."""

    pool: str = Field(description="the slice pool it runs on")
    slices: int = Field(1, ge=1, description="slices of the pool it holds")


class WorkloadsConfig(ConfigModel):
    """The Ray workloads the stack deploys (KubeRay objects)."""

    namespace: str = Field("ray", description="the Kubernetes namespace of every Ray object")
    # gs://BUCKET[/PREFIX] the deploy workflow uploads `tpuray bundle` zips to; the rendered
    # working_dir is <bundleUri>/tpuray-apps-<sha256[:16]>.zip (tpuray/bundle.py).
    bundle_uri: str = Field(
        "gs://change-me/bundles", alias="bundleUri", description="gs://BUCKET[/PREFIX] the app bundles are uploaded to"
    )
    train: TrainWorkload | None = Field(None, description="the training RayJob")
    serve: ServeWorkload | None = Field(None, description="the Serve RayService")
    interactive: InteractiveCluster | None = Field(None, description="an interactive RayCluster")
    # Who may reach the Ray dashboard / Jobs API / client port besides the namespace itself.
    admin_cidrs: list[str] = Field(
        default_factory=list, alias="adminCidrs", description="CIDRs allowed to the dashboard, Jobs API and client port"
    )
