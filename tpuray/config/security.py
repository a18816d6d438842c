"""Stack config for cluster hardening and the Serve ingress (part of tpuray.config's StackConfig).

Kept apart from config.py so the security settings have one home:
- `tpuray:cluster.binaryAuthorization`, `.maintenance` (`.secretsKmsKey` is config.py's, from Terraform);
- `tpuray:workloads.adminCidrs` (who may reach the Ray dashboard / Jobs API besides the namespace);
- `tpuray:workloads.serve.gateway` (the GKE Gateway in front of Ray Serve).
docs/configuration.md and docs/security.md describe each key.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# GKE maintenance exclusion scopes (google_container_cluster maintenance_exclusion.exclusion_options.scope).
EXCLUSION_SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
# GKE: a NO_UPGRADES exclusion lasts at most 30 days; the others up to the version's end of support.
NO_UPGRADES_MAX = timedelta(days=30)
# GKE: the maintenance window must allow at least 4 contiguous hours.
MIN_WINDOW = timedelta(hours=4)
INTERNAL_GATEWAY = "gke-l7-rilb"
EXTERNAL_GATEWAY = "gke-l7-global-external-managed"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def _utc(value: str) -> datetime:
    """RFC 3339 UTC time as GKE takes it (2026-01-03T04:00:00Z)."""
    if not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", value):
        raise ValueError("use an RFC 3339 UTC time such as 2026-01-03T04:00:00Z")
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")


class _Period(_Model):
    """RFC 3339 UTC start and end times, as GKE's maintenance policy takes them."""

    start: str = Field(description="RFC 3339 UTC start, e.g. 2026-01-03T02:00:00Z")
    end: str = Field(description="RFC 3339 UTC end")

    @field_validator("start", "end")
    @classmethod
    def _time(cls, value: str) -> str:
        _utc(value)
        return value


class MaintenanceWindow(_Period):
    """A recurring window (google_container_cluster maintenance_policy.recurring_window)."""

    recurrence: str = Field(
        "FREQ=WEEKLY;BYDAY=SA,SU", pattern=r"^FREQ=", description="an RFC 5545 RRULE for the window"
    )


class MaintenanceExclusion(_Period):
    """A period without auto-upgrades, e.g. around a long training run (TPU pools are recreated on upgrade)."""

    name: str = Field(min_length=1, description="the exclusion's name")
    scope: Literal["NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"] = Field(
        "NO_MINOR_OR_NODE_UPGRADES", description="which upgrades the exclusion holds back"
    )


class MaintenanceConfig(_Model):
    """The cluster's maintenance policy (docs/security.md)."""

    window: MaintenanceWindow = Field(description="when GKE may upgrade")
    exclusions: list[MaintenanceExclusion] = Field(default_factory=list, description="periods without upgrades")


class BinaryAuthorizationConfig(_Model):
    """Opt-in: the cluster enforces the project's Binary Authorization policy."""

    enforce: bool = Field(False, description="enforce the project's Binary Authorization policy")
    # Images admitted besides the stack's Ray image, each pinned by digest.
    allowed_images: list[str] = Field(
        default_factory=list, alias="allowedImages", description="other images admitted, each pinned by digest"
    )


class GatewayTls(_Model):
    """One of: regional Certificate Manager certificates, or a kubernetes.io/tls Secret in the namespace."""

    certificate_manager: list[str] = Field(
        default_factory=list, alias="certificateManager", description="regional Certificate Manager certificates"
    )
    secret_name: str | None = Field(None, alias="secretName", description="a kubernetes.io/tls Secret in the namespace")


class GatewayIap(_Model):
    """Identity-Aware Proxy in front of an external Gateway (GCPBackendPolicy)."""

    client_id: str = Field(alias="clientId", min_length=1, description="the OAuth client id IAP uses")
    oauth_secret_name: str = Field(
        alias="oauthSecretName", min_length=1, description="the Secret holding the OAuth client secret"
    )


class ServeGateway(_Model):
    """The GKE Gateway in front of Serve (docs/security.md)."""

    class_name: Literal["gke-l7-rilb", "gke-l7-global-external-managed"] = Field(
        INTERNAL_GATEWAY, alias="className", description="internal (regional) or external (global) load balancer"
    )
    hostname: str = Field(min_length=1, description="the hostname the Gateway serves")
    tls: GatewayTls = Field(description="the certificate")
    # gke-l7-rilb: the region's proxy-only subnet, the only source of Serve traffic.
    proxy_only_subnet_cidr: str | None = Field(
        None, alias="proxyOnlySubnetCidr", description="gke-l7-rilb: the only source of Serve traffic"
    )
    iap: GatewayIap | None = Field(None, description="Identity-Aware Proxy (external Gateway only)")


def _cidr_line(key: str, value: str) -> str | None:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        return f"{key}: {value!r} is not a CIDR block ({err}); e.g. 10.128.0.0/16"
    return None


def hardening_lines(prefix: str, cluster: object, ray_image: str | None) -> list[str]:
    """Semantic checks of cluster.binaryAuthorization and .maintenance. `ray_image` None: the workloads
    run this project's own builds (tpuray:images.repository), which `pulumi up` names by digest only."""
    lines: list[str] = []  # secretsKmsKey's form and region are checked in config.py
    binauthz: BinaryAuthorizationConfig | None = getattr(cluster, "binary_authorization", None)
    if binauthz is not None and binauthz.enforce:
        for i, image in enumerate([ray_image, *binauthz.allowed_images]):
            if image is not None and not DIGEST.search(image):
                where = "tpuray:ray.image" if i == 0 else f"{prefix}.binaryAuthorization.allowedImages[{i - 1}]"
                lines.append(
                    f"{where}: {image!r} is not pinned by digest; Binary Authorization in enforce mode admits "
                    "the project's images by digest: use <image>@sha256:<64 hex digits>"
                )
    maintenance: MaintenanceConfig | None = getattr(cluster, "maintenance", None)
    if maintenance is not None:
        w = maintenance.window
        if _utc(w.end) - _utc(w.start) < MIN_WINDOW:
            lines.append(
                f"{prefix}.maintenance.window: {w.start} to {w.end} is shorter than 4 hours; GKE needs at least "
                "4 contiguous hours: move end later"
            )
        for i, ex in enumerate(maintenance.exclusions):
            ekey = f"{prefix}.maintenance.exclusions[{i}]"
            span = _utc(ex.end) - _utc(ex.start)
            if span <= timedelta(0):
                lines.append(f"{ekey}: end {ex.end} is not after start {ex.start}")
            elif ex.scope == "NO_UPGRADES" and span > NO_UPGRADES_MAX:
                lines.append(
                    f"{ekey}: a NO_UPGRADES exclusion of {span.days} days is longer than GKE's 30; "
                    "use scope NO_MINOR_OR_NODE_UPGRADES for longer runs"
                )
    return lines


def network_lines(prefix: str, admin_cidrs: list[str], gateway: ServeGateway | None, serve_prefix: str) -> list[str]:
    """Semantic checks of workloads.adminCidrs and workloads.serve.gateway."""
    lines = [line for i, c in enumerate(admin_cidrs) if (line := _cidr_line(f"{prefix}.adminCidrs[{i}]", c))]
    for i, c in enumerate(admin_cidrs):
        if c in ("0.0.0.0/0", "::/0"):
            lines.append(
                f"{prefix}.adminCidrs[{i}]: {c!r} opens the Ray dashboard to everyone; list your admin networks"
            )
    if gateway is None:
        return lines
    gkey = f"{serve_prefix}.gateway"
    tls = gateway.tls
    if bool(tls.certificate_manager) == bool(tls.secret_name):
        lines.append(
            f"{gkey}.tls: set exactly one of certificateManager (Certificate Manager certificate names) "
            "or secretName (a kubernetes.io/tls Secret in the Ray namespace)"
        )
    if gateway.class_name == INTERNAL_GATEWAY:
        if gateway.proxy_only_subnet_cidr is None:
            lines.append(
                f"{gkey}.proxyOnlySubnetCidr: missing; {INTERNAL_GATEWAY} proxies connect from the region's "
                "proxy-only subnet, and the Serve NetworkPolicy admits only that range"
            )
        elif line := _cidr_line(f"{gkey}.proxyOnlySubnetCidr", gateway.proxy_only_subnet_cidr):
            lines.append(line)
        if gateway.iap is not None:
            lines.append(f"{gkey}.iap: Identity-Aware Proxy is for {EXTERNAL_GATEWAY}; remove it or change className")
    elif gateway.iap is None:
        lines.append(
            f"{gkey}.iap: missing; an external Gateway in front of Ray Serve must sit behind Identity-Aware Proxy "
            "(clientId, oauthSecretName)"
        )
    return lines
