"""The typed stack configuration, validated before any resource is declared.

Stack config lives in stacks/Pulumi.<env>.yaml under the `tpuray:` namespace. The raw
mapping (from the YAML file, or from pulumi.Config under the CLI) goes through
`parse_stack_config`, which either returns a `StackConfig` or raises `ConfigError`
holding one line per problem: the key, the bad value and what is allowed.

Length (about 900 lines, over the ~400 rule): the whole stack schema and the one-line message
of every key's check sit together so that a key and its message never drift apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from ray_apps import contracts
from tpuray import capacity, catalog, gcp_rules, gke_versions, tpu_zones
from tpuray.errors import ConfigError, yaml_problem
from tpuray.security_config import (
    BinaryAuthorizationConfig,
    MaintenanceConfig,
    ServeGateway,
    hardening_lines,
    network_lines,
)

NAMESPACE = "tpuray"
CONFIG_KEYS = (
    "environment",
    "gcp",
    "cluster",
    "slicePools",
    "ray",
    "workloads",
    "prices",
    "terraform",
    "observability",
    "images",
)
_TRAIN = contracts.train_defaults()
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class _Model(BaseModel):
    # Unknown keys are typos more often than not: reject them by name.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        """Pydantic's lax mode reads `slices: true` as 1 slice: a number is never a boolean here.
        Numbers written as strings stay valid (`pulumi config set --path` stores "2")."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and _is_number(field.annotation):
            raise PydanticCustomError("number_not_boolean", "input should be a number, not true or false")
        return value


def _is_number(annotation: Any) -> bool:
    kinds = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return any(kind in (int, float) for kind in kinds)


class GcpConfig(_Model):
    """Where the stack deploys."""

    project: str = Field(min_length=1, description="the Google Cloud project id")
    region: str = Field(min_length=1, description="the cluster's region, e.g. us-east5")
    zones: list[str] = Field(
        min_length=1, description="zones of the region with the TPU capacity; the first is the default"
    )


class CpuPoolConfig(_Model):
    """The CPU node pool for Ray heads and system pods."""

    machine_type: str = Field(
        "e2-standard-8", alias="machineType", description="machine type of the CPU node pool (Ray heads, system pods)"
    )
    min_nodes: int = Field(1, alias="minNodes", ge=0, description="the CPU pool's autoscaling minimum, per zone")
    max_nodes: int = Field(4, alias="maxNodes", ge=1, description="the CPU pool's autoscaling maximum, per zone")


class AuthorizedNetwork(_Model):
    """A CIDR allowed to reach the control plane."""

    cidr: str = Field(description="a CIDR allowed to reach the control plane's endpoint")
    name: str = Field("", description="a display name for the CIDR")


class ClusterConfig(_Model):
    """The GKE cluster."""

    name: str = Field(description="the GKE cluster's name")
    release_channel: Literal["RAPID", "REGULAR", "STABLE"] = Field(
        "REGULAR", alias="releaseChannel", description="the GKE release channel the cluster follows"
    )
    network: str = Field("default", description="the VPC network (or the foundation's output, see terraform)")
    subnetwork: str = Field("default", description="the subnetwork of the cluster's region")
    master_cidr: str = Field(
        "172.16.0.0/28", alias="masterIpv4CidrBlock", description="the /28 of the private control plane"
    )
    # The IP endpoint is private unless a stack opts out.
    private_endpoint: bool = Field(
        True,
        alias="privateEndpoint",
        description="the control plane's IP endpoint is private",
    )
    # GKE's DNS-based control-plane endpoint (infra/components/control_plane.py, docs/ci.md "How the
    # runners reach the cluster"): `public-iam` takes user traffic from anywhere that reaches Google
    # APIs, authorised by IAM (container.clusters.connect) and then RBAC, which is how GitHub-hosted
    # runners deploy; `off` takes none, and the deploy runs on a runner inside the VPC.
    dns_endpoint: Literal["public-iam", "off"] = Field(
        "public-iam",
        alias="dnsEndpoint",
        description="public-iam: the DNS control-plane endpoint, reachable wherever Google APIs are and authorised by "
        "IAM then RBAC; off: no user traffic over it (deploy from a runner inside the VPC)",
    )
    master_authorized_networks: list[AuthorizedNetwork] = Field(
        default_factory=list, alias="masterAuthorizedNetworks", description="CIDRs allowed to reach the control plane"
    )
    # The VPC's own ranges (the foundation's network.subnet_cidr, pods_cidr, services_cidr): the
    # admin and authorized networks must lie outside them (tpuray/gcp_ranges.py).
    vpc_ranges: list[str] = Field(
        default_factory=list,
        alias="vpcRanges",
        description="the cluster VPC's own ranges (nodes, Pods, Services); adminCidrs and masterAuthorizedNetworks "
        "must lie outside them",
    )
    cpu_pool: CpuPoolConfig = Field(
        default_factory=CpuPoolConfig, alias="cpuPool", description="the CPU node pool for Ray heads and system pods"
    )
    deletion_protection: bool = Field(
        True, alias="deletionProtection", description="`pulumi destroy` cannot delete the cluster while set"
    )
    # Named secondary ranges of the subnetwork for Pods and Services (VPC-native); unset,
    # GKE creates the ranges itself. The Terraform foundation declares and outputs them.
    pods_range_name: str | None = Field(
        None, alias="podsRangeName", min_length=1, description="the subnetwork's secondary range for Pods"
    )
    services_range_name: str | None = Field(
        None, alias="servicesRangeName", min_length=1, description="the subnetwork's secondary range for Services"
    )
    # Cloud KMS key for GKE application-layer secrets encryption (full resource name).
    secrets_kms_key: str | None = Field(
        None, alias="secretsKmsKey", description="Cloud KMS key (full resource name) for application-layer secrets"
    )
    # Egress of the private nodes: `cloudNat` declares a Cloud Router + Cloud NAT for the
    # cluster's region and network; `provided` means the network (e.g. the Terraform foundation)
    # already gives the nodes NAT, and nothing is declared.
    egress: Literal["cloudNat", "provided"] = Field(
        "cloudNat", description="cloudNat: declare Cloud Router + NAT; provided: the network already has NAT"
    )
    # Optional floor on the control plane's GKE version (e.g. 1.34.0-gke.2201000).
    min_master_version: str | None = Field(
        None,
        alias="minMasterVersion",
        description="a GKE version to create the cluster at (sent as its initial version); unset: the release "
        "channel's default",
    )

    @field_validator("dns_endpoint", mode="before")
    @classmethod
    def _off_is_not_false(cls, value: Any) -> Any:
        # YAML 1.1 (PyYAML, so `tpuray preview`) reads a bare `off` as false; Pulumi's YAML does not.
        if value is False:
            raise PydanticCustomError("dns_endpoint_bool", 'a bare off reads as false in YAML: write "off" (quoted)')
        return value

    # Hardening (tpuray/security_config.py, docs/security.md).
    binary_authorization: BinaryAuthorizationConfig | None = Field(
        None, alias="binaryAuthorization", description="enforce the project's Binary Authorization policy"
    )
    maintenance: MaintenanceConfig | None = Field(None, description="the maintenance window and exclusions")


class ReservationRef(_Model):
    """A Compute Engine reservation by name (a string is shorthand for the name)."""

    name: str = Field(description="the reservation's name")
    project: str | None = Field(None, description="the project that owns a shared reservation")

    @classmethod
    def coerce(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value


class CapacityTier(_Model):
    """One step of a capacity chain. Exactly one tier key is set (tpuray/capacity.py has the tiers)."""

    spot: bool = Field(False, description="Spot VMs (may be preempted)")
    reservation: ReservationRef | None = Field(None, description="a specific Compute Engine reservation")
    on_demand: bool = Field(False, alias="onDemand", description="on-demand VMs")
    flex_start: bool = Field(False, alias="flexStart", description="flex-start (DWS): node pools scale from zero")
    # Keys of tiers in tpuray.capacity.TIERS that have no field above (a tier added to the table only).
    others: SkipJsonSchema[dict[str, Any]] = Field(default_factory=dict, exclude=True)

    @field_validator("reservation", mode="before")
    @classmethod
    def _reservation_shorthand(cls, value: Any) -> Any:
        return ReservationRef.coerce(value)

    @model_validator(mode="before")
    @classmethod
    def _table_tiers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        declared = {info.alias or name for name, info in cls.model_fields.items()} | set(cls.model_fields)
        others = {t.config_key: data[t.config_key] for t in capacity.TIERS if t.config_key in data}
        others = {k: v for k, v in others.items() if k not in declared}
        return {k: v for k, v in data.items() if k not in others} | ({"others": others} if others else {})

    def value(self, tier: capacity.Tier) -> Any:
        """What this step says for one tier: False/None when it does not choose it."""
        if tier.field in type(self).model_fields:
            return getattr(self, tier.field)
        return self.others.get(tier.config_key)

    def kinds(self) -> list[capacity.Tier]:
        return [t for t in tier_order() if self.value(t) is not None and self.value(t) is not False]

    @property
    def kind(self) -> capacity.Tier:
        return self.kinds()[0]

    @property
    def market_type(self) -> str:
        """Ray's ray.io/market-type label value for nodes of this tier."""
        return self.kind.market_type


def tier_order() -> list[capacity.Tier]:
    """The capacity tiers in the order the config schema lists their keys (spot, reservation,
    onDemand, flexStart), then tiers of the table that have no field of their own."""
    fields = list(CapacityTier.model_fields)
    return sorted(capacity.TIERS, key=lambda t: fields.index(t.field) if t.field in fields else len(fields))


def tier_keys() -> str:
    """ "spot, reservation, onDemand, flexStart": the config keys of a capacity step, for messages."""
    return ", ".join(t.config_key for t in tier_order())


def price_tiers() -> tuple[str, ...]:
    """Capacity tiers as the price file and tpuray:prices name them, the default (on-demand) first."""
    return tuple(t.price_key for t in sorted(tier_order(), key=lambda t: not t.is_default))


UNLISTED_CAPACITY = (
    "your project has capacity of this generation in the pool's zone that Google's TPU table "
    "(tpuray/data/tpu_zones.yaml) does not list"
)


class FallbackShape(_Model):
    """A cross-generation fallback appended to a pool's ComputeClass (v6e 4x8, then v5e 4x8)."""

    generation: str = Field(description="the fallback shape's TPU generation")
    topology: str = Field(description="the fallback shape's topology")
    capacity: list[CapacityTier] = Field(
        default_factory=lambda: [CapacityTier(onDemand=True)], description="the fallback shape's capacity chain"
    )
    unlisted_capacity: bool = Field(False, alias="unlistedCapacity", description=UNLISTED_CAPACITY)


class SlicePoolConfig(_Model):
    """A pool of identical TPU slices and the capacity chain that provides them."""

    name: str = Field(description="the pool's name: node pools, ComputeClass and labels are named after it")
    generation: str = Field(description="a TPU generation of the catalog (`tpuray topology`)")
    topology: str = Field(description="a topology valid for the generation, e.g. 4x4")
    machine_type: str | None = Field(
        None, alias="machineType", description="picks between the two forms of 2x4; default: the catalog's"
    )
    slices: int = Field(description="how many slices the pool provides")
    capacity: list[CapacityTier] = Field(description="the capacity chain, in priority order")
    fallback: list[FallbackShape] = Field(
        default_factory=list, description="other shapes appended to the pool's ComputeClass, in order"
    )
    zone: str | None = Field(None, description="default: the first of tpuray:gcp.zones")
    unlisted_capacity: bool = Field(False, alias="unlistedCapacity", description=UNLISTED_CAPACITY)
    idle_timeout_minutes: int = Field(
        60,
        alias="idleTimeoutMinutes",
        ge=5,
        description="the idle-slice alert fires when a host of this pool ran no TPU program for this long",
    )

    @property
    def shape(self) -> catalog.SliceShape:
        return catalog.lookup(self.generation, self.topology, self.machine_type)

    @property
    def fallback_shapes(self) -> list[catalog.SliceShape]:
        """The cross-generation shapes of the chain, in order (the driver's steps, docs/capacity.md)."""
        return [catalog.lookup(f.generation, f.topology) for f in self.fallback]

    @property
    def compute_class(self) -> str:
        return self.name


class RayConfig(_Model):
    """The pinned Ray release every Ray object runs."""

    version: str = Field("2.60.0", description="Ray version: rayVersion and the image tag")
    python: str = Field("py312", pattern=r"^py3\d+$", description="the image's Python, e.g. py312")
    image: str | None = Field(None, description="default: rayproject/ray:<version>-<python>-tpu")

    @property
    def tpu_image(self) -> str:
        return self.image or f"rayproject/ray:{self.version}-{self.python}-tpu"


class TrainWorkload(_Model):
    """The training RayJob (`python -m ray_apps.train`)."""

    pool: str = Field(description="the slice pool it trains on")
    # The job's own defaults (ray_apps/contracts.py TrainArgs), so a key left out means the same here.
    slices: int = Field(_TRAIN["slices"], ge=1, description="slices of the pool one run uses")
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


class LlmAutoscaling(_Model):
    """Serve autoscaling bounds of the llm backend: each replica holds one whole slice."""

    min_replicas: int = Field(1, alias="minReplicas", ge=0, description="replicas (slices) kept when idle")
    max_replicas: int = Field(alias="maxReplicas", ge=1, description="most replicas (slices) under load")
    target_ongoing_requests: float | None = Field(
        None, alias="targetOngoingRequests", gt=0, description="Serve's scale-up target per replica"
    )


class ServeWorkload(_Model):
    """The Ray Serve RayService (ray_apps.serve)."""

    pool: str = Field(description="the slice pool its replicas run on")
    backend: Literal["llm", "checkpoint"] = Field(
        "llm", description="llm: a model served by Ray Serve LLM; checkpoint: the training run's checkpoints"
    )
    model_id: str = Field("google/gemma-3-4b-it", alias="modelId", description="llm backend: the model id")
    # llm backend (tpuray/llm_stack.py turns these into Ray Serve LLM's LLMConfig and checks them)
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


class InteractiveCluster(_Model):
    """A long-lived RayCluster for notebooks and ad-hoc jobs."""

    pool: str = Field(description="the slice pool it runs on")
    slices: int = Field(1, ge=1, description="slices of the pool it holds")


class WorkloadsConfig(_Model):
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


IMAGE_NAMES = ("ray-tpu", "serve-llm")  # images/<name>/Dockerfile (tpuray/images.py)


class ImagesConfig(_Model):
    """The images built from images/ and where they are pushed (docs/ci.md).

    `repository` is the Artifact Registry docker repository the Terraform foundation
    declares (its output image_repository); `digests` are handed in by the deploy workflow
    after it pushed the images (config-map `tpuray:images` of `pulumi up`)."""

    repository: str | None = Field(None, description="REGION-docker.pkg.dev/PROJECT/REPO the images are pushed to")
    digests: dict[str, str] = Field(default_factory=dict, description="image name -> sha256:<64 hex>, from the deploy")


class TerraformOutputs(_Model):
    """Which Terraform root outputs stand in for which stack values.

    Each field names a root output; the foundation module (terraform/modules/foundation)
    has one output per field, named like the field (tests/test_foundation.py)."""

    network: str | None = Field(None, description="output for cluster.network")
    subnetwork: str | None = Field(None, description="output for cluster.subnetwork")
    pods_range_name: str | None = Field(None, alias="podsRangeName", description="output for cluster.podsRangeName")
    services_range_name: str | None = Field(
        None, alias="servicesRangeName", description="output for cluster.servicesRangeName"
    )
    secrets_kms_key: str | None = Field(None, alias="secretsKmsKey", description="output for cluster.secretsKmsKey")
    image_repository: str | None = Field(None, alias="imageRepository", description="output for images.repository")
    # reservation name as written in slicePools[].capacity -> output holding the real name,
    # or OUTPUT.KEY for an entry of a map output (the foundation's `reservations`)
    reservations: dict[str, str] = Field(
        default_factory=dict, description="reservation name in slicePools -> output (or OUTPUT.KEY of a map output)"
    )


class TerraformConfig(_Model):
    """Read the VPC and TPU reservations from a Terraform state instead of naming them here."""

    backend: Literal["gcs", "local"] = Field(description="where the state is: a GCS bucket or a local file")
    bucket: str | None = Field(None, description="gcs: the state bucket")
    prefix: str = Field("", description="gcs: the backend's prefix; the object is <prefix>/<workspace>.tfstate")
    workspace: str = Field("default", description="the Terraform workspace")
    path: str | None = Field(None, description="local: a terraform.tfstate, relative to the repository root")
    outputs: TerraformOutputs = Field(description="which root outputs stand in for which stack values")

    @property
    def location(self) -> str:
        """Where the state is, as a reader would look for it (used in error messages)."""
        if self.backend == "gcs":
            prefix = self.prefix.strip("/")
            return f"gs://{self.bucket}/{prefix + '/' if prefix else ''}{self.workspace}.tfstate"
        path = Path(str(self.path))
        # Relative paths are relative to the repository root (see tpuray/terraform.py).
        return str(path if path.is_absolute() else stacks_dir().parent / path)


class BudgetConfig(_Model):
    """A Cloud Billing budget on the stack's labelled resources (docs/observability.md)."""

    billing_account: str = Field(
        alias="billingAccount",
        pattern=r"^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$",
        description="the Cloud Billing account id",
    )
    monthly_usd: float = Field(alias="monthlyUsd", gt=0, description="the monthly budget in USD")
    thresholds: list[float] = Field(
        default_factory=lambda: [0.5, 0.9, 1.0], min_length=1, description="alert at these fractions of the budget"
    )


class HungGangConfig(_Model):
    """When a training gang counts as hung (the alert and ray_apps.train's watchdog)."""

    step_factor: float = Field(
        _TRAIN["watchdog_factor"], alias="stepFactor", gt=1, description="hung after this many times the median step"
    )
    floor_seconds: int = Field(
        int(_TRAIN["watchdog_floor_s"]), alias="floorSeconds", ge=30, description="never hung sooner than this"
    )
    duty_cycle_percent: float = Field(
        1.0, alias="dutyCyclePercent", ge=0, le=100, description="TPU duty cycle under which a gang counts as idle"
    )
    duty_cycle_minutes: int = Field(
        30, alias="dutyCycleMinutes", ge=5, description="for this long, for the duty-cycle alert"
    )


class ObservabilityConfig(_Model):
    """Alerts, their notification channels and the budget (docs/observability.md)."""

    notification_channels: list[str] = Field(
        default_factory=list,
        alias="notificationChannels",
        max_length=5,
        description="projects/<project>/notificationChannels/<id> the alerts go to",
    )
    budget: BudgetConfig | None = Field(None, description="a Cloud Billing budget on the stack")
    hung_gang: HungGangConfig = Field(
        default_factory=HungGangConfig, alias="hungGang", description="when a training gang counts as hung"
    )

    @field_validator("notification_channels")
    @classmethod
    def _channel_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(r"^projects/[^/]+/notificationChannels/[^/]+$", name):
                raise ValueError(f"{name!r} is not projects/<project>/notificationChannels/<id>")
        return value

    @field_validator("budget")
    @classmethod
    def _thresholds(cls, value: BudgetConfig | None) -> BudgetConfig | None:
        if value is not None and any(not 0 < t <= 2 for t in value.thresholds):
            raise ValueError(f"thresholds {value.thresholds} must be fractions of the budget in (0, 2]")
        return value


class StackConfig(_Model):
    """A stack's `tpuray:` config, validated."""

    stack: str = Field(description="the stack's name (from its file name, not a key)")
    environment: Literal["dev", "staging", "prod"] = Field(
        description="picks policies/policy-config.<environment>.json and the environment's defaults"
    )
    gcp: GcpConfig = Field(description="where the stack deploys")
    cluster: ClusterConfig = Field(description="the GKE cluster")
    slice_pools: list[SlicePoolConfig] = Field(alias="slicePools", description="the pools of TPU slices")
    ray: RayConfig = Field(default_factory=RayConfig, description="the pinned Ray release")
    workloads: WorkloadsConfig = Field(default_factory=WorkloadsConfig, description="the Ray workloads")
    prices: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="USD per chip-hour by generation and capacity tier, overriding tpuray/data/prices.yaml",
    )
    terraform: TerraformConfig | None = Field(None, description="read VPC and reservations from a Terraform state")
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig, description="alerts and budget")
    images: ImagesConfig = Field(default_factory=ImagesConfig, description="the images built from images/")

    def pool(self, name: str) -> SlicePoolConfig:
        return next(p for p in self.slice_pools if p.name == name)


# ---------------------------------------------------------------------------- parsing


def _path(loc: tuple[Any, ...]) -> str:
    out = NAMESPACE + ":"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("" if i == 0 else ".") + str(part)
    return out


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def _pydantic_lines(err: ValidationError) -> list[str]:
    lines = []
    for e in err.errors():
        # The user's keys (a key written with '[' shown as written) and list indexes: this schema's
        # errors carry no segment of pydantic's own (tests/test_config_checks.py).
        loc = tuple(e["loc"])
        key = _path(loc)
        kind = e["type"]
        msg = e["msg"][0].lower() + e["msg"][1:]
        if kind == "missing" and loc[-2:] == ("reservation", "name"):
            lines.append(
                f"{key}: missing; a reservation tier needs the name of a Compute Engine reservation, "
                "e.g. {reservation: {name: prod-v6e-res}}"
            )
        elif kind == "missing":
            lines.append(f"{key}: missing; this key is required")
        elif kind == "extra_forbidden" and loc == ("workloads", "codeUri"):
            lines.append(
                f"{key}: was replaced by {NAMESPACE}:workloads.bundleUri (gs://BUCKET[/PREFIX]); the zip is named by "
                "its content hash: see docs/apps.md"
            )
        elif kind == "extra_forbidden":
            lines.append(f"{key}: unknown key (value {_show(e['input'])}); check the spelling in docs/configuration.md")
        else:
            lines.append(f"{key}: {_show(e['input'])} is invalid; {msg}")
    return lines


def _tier_lines(key: str, tiers: list[CapacityTier]) -> list[str]:
    if not tiers:
        return [f"{key}: [] is empty; list at least one tier, in priority order, from {tier_keys()}"]
    lines = []
    for i, tier in enumerate(tiers):
        tkey = f"{key}[{i}]"
        kinds = tier.kinds()
        if tier.spot and tier.flex_start:
            lines.append(
                f"{tkey}: {{spot: true, flexStart: true}} is invalid; flex-start cannot be combined with spot in one tier "
                "(GKE rejects it): make them separate tiers"
            )
        elif not kinds:
            lines.append(f"{tkey}: {{}} names no capacity; set exactly one of {tier_keys()}")
        elif len(kinds) > 1:
            lines.append(
                f"{tkey}: combines {' and '.join(k.key for k in kinds)}; set exactly one of {tier_keys()} per tier"
            )
        if tier.reservation is not None and not tier.reservation.name.strip():
            lines.append(
                f"{tkey}.reservation.name: {_show(tier.reservation.name)} is empty; a reservation tier needs the "
                "name of a Compute Engine reservation, e.g. {reservation: {name: prod-v6e-res}}"
            )
    return lines


def _shape_lines(key: str, gen: str, topology: str, machine_type: str | None) -> list[str]:
    if gen not in catalog.GENERATIONS:
        return [f"{key}.generation: {_show(gen)} is not a TPU generation; valid: {', '.join(catalog.GENERATIONS)}"]
    valid_topologies = catalog.topologies(gen)
    if topology not in valid_topologies:
        return [
            f"{key}.topology: {_show(topology)} is not a valid {gen} topology; "
            f"valid: {catalog.generation(gen).describe_topologies()}"
        ]
    if machine_type is not None:
        fits = catalog.machine_types(gen, topology)
        if machine_type not in fits:
            return [f"{key}.machineType: {_show(machine_type)} does not fit {gen} {topology}; valid: {', '.join(fits)}"]
    return []


def _one_vm_gang_lines(cfg: StackConfig, pool_name: str, gang: str) -> list[str]:
    """The pool's shape when `gang` cannot be held to one slice: a multi-host slice that Ray
    reads as one VM (catalog.SliceShape.ray_reads_as_one_host). JaxTrainer and Ray Serve LLM
    (ray/llm/_internal/serve/core/configs/accelerators.py) both reserve TPU slices with Ray's
    slice placement group and pass no chips_per_vm. Fallback shapes name no machine type and
    so get the one-VM machine of such a topology."""
    i, pool = next((i, p) for i, p in enumerate(cfg.slice_pools) if p.name == pool_name)
    try:
        shape = pool.shape
    except catalog.CatalogError:
        return []  # reported by _shape_lines
    if not shape.ray_reads_as_one_host:
        return []
    return [
        f"{NAMESPACE}:slicePools[{i}].machineType: {_show(shape.machine_type)} makes {shape.generation} "
        f"{shape.topology} a {shape.hosts}-host slice, which Ray's SlicePlacementGroup reserves as one "
        f"{shape.chips}-chip VM, so {gang} could span two slices; use "
        f"{' or '.join(shape.one_vm_machine_types)} (one VM) or a topology of more than {shape.chips} chips"
    ]


def _semantic_lines(cfg: StackConfig) -> list[str]:
    lines: list[str] = []
    names: set[str] = set()
    for i, pool in enumerate(cfg.slice_pools):
        key = f"{NAMESPACE}:slicePools[{i}]"
        if not _DNS_LABEL.match(pool.name) or len(pool.name) > 30:
            lines.append(
                f"{key}.name: {_show(pool.name)} is invalid; use a lowercase DNS label of at most 30 characters "
                "(it names node pools and a ComputeClass)"
            )
        if pool.name in names:
            lines.append(f"{key}.name: {_show(pool.name)} is used twice; slice pool names must be unique")
        names.add(pool.name)
        lines += _shape_lines(key, pool.generation, pool.topology, pool.machine_type)
        if pool.slices < 1:
            lines.append(f"{key}.slices: {pool.slices} is invalid; a pool needs at least 1 slice")
        lines += _tier_lines(f"{key}.capacity", pool.capacity)
        for j, fb in enumerate(pool.fallback):
            fkey = f"{key}.fallback[{j}]"
            lines += _shape_lines(fkey, fb.generation, fb.topology, None)
            lines += _tier_lines(f"{fkey}.capacity", fb.capacity)
    if not cfg.slice_pools:
        lines.append(f"{NAMESPACE}:slicePools: [] is empty; declare at least one slice pool")
    demand: dict[str, list[tuple[str, int]]] = {}
    for kind, count_key in (("train", "slices"), ("serve", "replicas"), ("interactive", "slices")):
        workload = getattr(cfg.workloads, kind)
        if workload is None:
            continue
        key = f"{NAMESPACE}:workloads.{kind}"
        if workload.pool not in names:
            lines.append(
                f"{key}.pool: {_show(workload.pool)} is not a slice pool of this stack; valid: {', '.join(sorted(names))}"
            )
            continue
        if kind == "train":
            lines += _one_vm_gang_lines(cfg, workload.pool, "the JaxTrainer gang of workloads.train")
        if kind == "serve" and workload.backend == "llm":
            lines += _one_vm_gang_lines(cfg, workload.pool, "a Ray Serve LLM replica of workloads.serve")
        count = getattr(workload, count_key)
        if kind == "serve" and workload.autoscaling is not None:  # at most maxReplicas slices
            count_key, count = "autoscaling.maxReplicas", workload.autoscaling.max_replicas
        demand.setdefault(workload.pool, []).append((f"{key}.{count_key}", count))
    for pool_name, claims in demand.items():
        pool = cfg.pool(pool_name)
        needed = sum(count for _, count in claims)  # arithmetic, never one step per slice
        if pool.slices >= 1 and needed > pool.slices:  # slices < 1 is reported on its own
            # Each workload holds whole slices; more claims than slices leaves a gang pending forever.
            lines.append(
                f"{claims[-1][0]}: workloads on pool {pool_name!r} need {needed} slices "
                f"({', '.join(sorted({k for k, _ in claims}))}) but the pool has {pool.slices}; raise slicePools "
                f"{pool_name!r}.slices or move a workload to another pool"
            )
    serve = cfg.workloads.serve
    if serve is not None:
        from tpuray import llm_stack  # imports this module

        lines += llm_stack.stack_lines(cfg)
    if serve is not None and serve.backend == "checkpoint" and not serve.checkpoint_uri:
        lines.append(
            f"{NAMESPACE}:workloads.serve.checkpointUri: missing; the checkpoint backend needs the URI of a training run"
        )
    lines += _price_lines(cfg)
    lines += _terraform_lines(cfg)
    lines += _foundation_lines(cfg)
    lines += gcp_rules.stack_lines(cfg)
    # The images built here are deployed by digest (`pulumi up` refuses one without: infra/components/workloads.py).
    own_builds = cfg.ray.image is None and cfg.images.repository is not None
    lines += hardening_lines(f"{NAMESPACE}:cluster", cfg.cluster, None if own_builds else cfg.ray.tpu_image)
    gateway = cfg.workloads.serve.gateway if cfg.workloads.serve else None
    lines += network_lines(f"{NAMESPACE}:workloads", cfg.workloads.admin_cidrs, gateway, f"{NAMESPACE}:workloads.serve")
    lines += _delivery_lines(cfg)
    if not lines:  # floors and zones only matter for an otherwise valid stack (its pools parse)
        lines += gke_versions.version_lines(cfg) + tpu_zones.zone_lines(cfg)
    return lines


_BUNDLE_URI = re.compile(r"^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\s]*)?$")
_REPOSITORY = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev/[a-z][-a-z0-9]{4,28}[a-z0-9]/[a-z]([-a-z0-9]*[a-z0-9])?$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _delivery_lines(cfg: StackConfig) -> list[str]:
    """The bundle location and the image repository and digests."""
    lines = []
    uri = cfg.workloads.bundle_uri
    if not _BUNDLE_URI.match(uri) or uri.endswith(".zip"):
        lines.append(
            f"{NAMESPACE}:workloads.bundleUri: {_show(uri)} is invalid; use gs://BUCKET[/PREFIX], the folder the "
            "deploy workflow uploads bundles to (tpuray adds the tpuray-apps-<sha256>.zip name)"
        )
    images = cfg.images
    if images.repository is not None and not _REPOSITORY.match(images.repository):
        lines.append(
            f"{NAMESPACE}:images.repository: {_show(images.repository)} is invalid; use an Artifact Registry docker "
            "repository, REGION-docker.pkg.dev/PROJECT/REPO (the Terraform output imageRepository)"
        )
    for name, digest in images.digests.items():
        key = f"{NAMESPACE}:images.digests.{name}"
        if name not in IMAGE_NAMES:
            lines.append(f"{key}: unknown image; valid: {', '.join(IMAGE_NAMES)}")
        elif not _DIGEST.match(digest):
            lines.append(f"{key}: {_show(digest)} is invalid; use the pushed image's digest, sha256:<64 hex digits>")
    if images.digests and images.repository is None:
        lines.append(f"{NAMESPACE}:images.repository: missing; digests need the repository the images were pushed to")
    return lines


def _price_lines(cfg: StackConfig) -> list[str]:
    lines = []
    for gen, tiers in cfg.prices.items():
        key = f"{NAMESPACE}:prices.{gen}"
        if gen not in catalog.GENERATIONS:
            lines.append(f"{key}: {_show(gen)} is not a TPU generation; valid: {', '.join(catalog.GENERATIONS)}")
            continue
        for tier, price in tiers.items():
            if tier not in price_tiers():
                lines.append(f"{key}.{tier}: unknown capacity tier; valid: {', '.join(price_tiers())}")
            elif price < 0:
                lines.append(f"{key}.{tier}: {price} is invalid; a price per chip-hour is >= 0 (USD)")
    return lines


def _terraform_lines(cfg: StackConfig) -> list[str]:
    tf = cfg.terraform
    if tf is None:
        return []
    key = f"{NAMESPACE}:terraform"
    lines = []
    if tf.backend == "gcs" and not tf.bucket:
        lines.append(f"{key}.bucket: missing; the gcs backend needs the state bucket (and usually a prefix)")
    if tf.backend == "local" and not tf.path:
        lines.append(f"{key}.path: missing; the local backend needs the path of a terraform.tfstate")
    outputs = tf.outputs
    if not any(getattr(outputs, name) for name in TerraformOutputs.model_fields):
        fields = ", ".join(f.alias or name for name, f in TerraformOutputs.model_fields.items())
        lines.append(f"{key}.outputs: names no output; map at least one of {fields}")
    used = {
        tier.reservation.name
        for pool in cfg.slice_pools
        for tier in [*pool.capacity, *(t for fb in pool.fallback for t in fb.capacity)]
        if tier.reservation is not None
    }
    for name in outputs.reservations:
        if name not in used:
            valid = ", ".join(sorted(used)) or "none: no capacity tier names a reservation"
            lines.append(
                f"{key}.outputs.reservations.{name}: no capacity tier uses reservation {name!r}; valid: {valid}"
            )
    return lines


_KMS_KEY = re.compile(r"^projects/[^/]+/locations/([^/]+)/keyRings/[^/]+/cryptoKeys/[^/]+$")


def _foundation_lines(cfg: StackConfig) -> list[str]:
    """The values the Terraform foundation provides: the secrets key and the two ranges."""
    lines = []
    key = cfg.cluster.secrets_kms_key
    if key is not None:
        match = _KMS_KEY.match(key)
        if not match:
            lines.append(
                f"{NAMESPACE}:cluster.secretsKmsKey: {_show(key)} is invalid; use the key's full resource name, "
                "projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY"
            )
        elif match.group(1) != cfg.gcp.region:
            # GKE: keep the key in the cluster's location (docs/foundation.md, Secrets key).
            lines.append(
                f"{NAMESPACE}:cluster.secretsKmsKey: key location {match.group(1)!r} is not the cluster's region "
                f"{cfg.gcp.region!r}; use a key ring in {cfg.gcp.region}"
            )
    return lines + _range_lines(cfg)


def _range_lines(cfg: StackConfig) -> list[str]:
    """podsRangeName and servicesRangeName go together (from the cluster or a Terraform output)."""
    outputs = cfg.terraform.outputs if cfg.terraform else TerraformOutputs()
    pods = cfg.cluster.pods_range_name or outputs.pods_range_name
    services = cfg.cluster.services_range_name or outputs.services_range_name
    if bool(pods) == bool(services):
        return []
    missing = "servicesRangeName" if pods else "podsRangeName"
    return [
        f"{NAMESPACE}:cluster.{missing}: missing; name both secondary ranges of the subnetwork (podsRangeName and "
        "servicesRangeName, in tpuray:cluster or tpuray:terraform.outputs) or neither"
    ]


def parse_stack_config(raw: dict[str, Any], stack: str) -> StackConfig:
    """Validate a raw `tpuray:` config mapping (keys without the namespace)."""
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            [
                f"{NAMESPACE}:{k}: unknown key; valid: {', '.join(NAMESPACE + ':' + c for c in CONFIG_KEYS)}"
                for k in unknown
            ]
        )
    data = dict(raw)
    data["stack"] = stack
    data.setdefault("environment", stack if stack in ("dev", "staging", "prod") else "dev")
    try:
        cfg = StackConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_pydantic_lines(err)) from None
    lines = _semantic_lines(cfg)
    if lines:
        raise ConfigError(lines)
    return cfg


# ---------------------------------------------------------------------------- stack files


def stacks_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "stacks"


STACK_FILE = re.compile(r"^Pulumi\.(.+)\.ya?ml$")


def stack_files(folder: Path | None = None) -> list[Path]:
    """The Pulumi.<stack>.yaml files of a stacks folder (default: this repository's stacks/)."""
    return sorted((folder if folder is not None else stacks_dir()).glob("Pulumi.*.yaml"))


def stack_names(folder: Path | None = None) -> list[str]:
    return [name_of_stack_file(p) for p in stack_files(folder)]


def name_of_stack_file(path: Path) -> str:
    match = STACK_FILE.match(path.name)
    if not match:
        raise ConfigError([f"stack file {str(path)!r}: name must be Pulumi.<stack>.yaml"])
    return match.group(1)


def stack_name(stack: str) -> str:
    """The name of a stack given as a name ("dev") or a stack file path (stacks/Pulumi.dev.yaml)."""
    path = Path(stack)
    return name_of_stack_file(path) if path.suffix in (".yaml", ".yml") else stack


def stack_file_in(folder: Path, stack: str) -> Path:
    """Where a stack's file is in a stacks folder (which need not be this checkout's)."""
    return folder / f"Pulumi.{stack}.yaml"


def resolve_stack_file(stack: str) -> tuple[str, Path]:
    """A stack name in stacks/ or a path to a Pulumi.<name>.yaml -> (name, path)."""
    path = Path(stack)
    if path.suffix in (".yaml", ".yml") or path.exists():
        name = name_of_stack_file(path)
        if not path.is_file():
            raise ConfigError([f"stack file {str(path)!r}: not found"])
        return name, path
    path = stack_file_in(stacks_dir(), stack)
    if not path.is_file():
        known = stack_names()
        raise ConfigError([f"stack {stack!r}: no stacks/Pulumi.{stack}.yaml; valid: {', '.join(known)}"])
    return stack, path


def read_stack_file(path: Path) -> dict[str, Any]:
    """The `tpuray:` keys of a Pulumi stack file, namespace stripped."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except UnicodeDecodeError as err:
        raise ConfigError([f"stack file {str(path)!r}: not UTF-8 text ({err.reason} at byte {err.start})"]) from None
    except yaml.YAMLError as err:
        raise ConfigError([f"stack file {str(path)!r}: not valid YAML{yaml_problem(err)}"]) from None
    if not isinstance(doc, dict):
        raise ConfigError(
            [f"stack file {str(path)!r}: must be a mapping with a 'config' key, not {type(doc).__name__}"]
        )
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError([f"stack file {str(path)!r}: 'config' must be a mapping"])
    raw: dict[str, Any] = {}
    for key, value in config.items():
        ns, _, name = str(key).partition(":")
        if ns == NAMESPACE:
            if isinstance(value, dict) and "secure" in value:
                raise ConfigError([f"{key}: secret values cannot be read offline; keep tpuray config in plain text"])
            raw[name] = value
    return raw


def load_stack(stack: str) -> StackConfig:
    name, path = resolve_stack_file(stack)
    return parse_stack_config(read_stack_file(path), name)


def pulumi_config_map(raw: dict[str, Any]) -> dict[str, str]:
    """The raw config as the Pulumi CLI passes it: namespaced keys, JSON-encoded non-strings."""
    return {f"{NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
