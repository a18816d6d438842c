"""The whole stack's config model, `StackConfig`, with images, Terraform and observability keys.

The parts live beside it by concept: cluster.py (gcp, cluster), pools.py (slicePools and their
capacity chains), workloads.py (ray, workloads). Checks of values across keys: checks.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from tpuray.config.base import ConfigModel
from tpuray.config.cluster import ClusterConfig, GcpConfig
from tpuray.config.files import stacks_dir
from tpuray.config.pools import SlicePoolConfig
from tpuray.config.queues import QueuesConfig
from tpuray.config.workloads import _TRAIN, RayConfig, WorkloadsConfig

IMAGE_NAMES = ("ray-tpu", "serve-llm")  # images/<name>/Dockerfile (tpuray/images.py)


class ImagesConfig(ConfigModel):
    """The images built from images/ and where they are pushed (docs/ci.md).

    `repository` is the Artifact Registry docker repository the Terraform foundation
    declares (its output image_repository); `digests` are handed in by the deploy workflow
    after it pushed the images (config-map `tpuray:images` of `pulumi up`)."""

    repository: str | None = Field(None, description="REGION-docker.pkg.dev/PROJECT/REPO the images are pushed to")
    digests: dict[str, str] = Field(default_factory=dict, description="image name -> sha256:<64 hex>, from the deploy")


class TerraformOutputs(ConfigModel):
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


class TerraformConfig(ConfigModel):
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
        # Relative paths are relative to the repository root (see tpuray/config/terraform.py).
        return str(path if path.is_absolute() else stacks_dir().parent / path)


class BudgetConfig(ConfigModel):
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


class HungGangConfig(ConfigModel):
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


class ObservabilityConfig(ConfigModel):
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


class StackConfig(ConfigModel):
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
    queues: QueuesConfig | None = Field(None, description="Kueue queues and quotas in front of the Ray workloads")

    def pool(self, name: str) -> SlicePoolConfig:
        return next(p for p in self.slice_pools if p.name == name)
