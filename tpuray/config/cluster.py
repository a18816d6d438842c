"""Where the stack deploys and its GKE cluster: `tpuray:gcp` and `tpuray:cluster`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from tpuray.config.base import ConfigModel
from tpuray.config.security import BinaryAuthorizationConfig, MaintenanceConfig


class GcpConfig(ConfigModel):
    """Where the stack deploys."""

    project: str = Field(min_length=1, description="the Google Cloud project id")
    region: str = Field(min_length=1, description="the cluster's region, e.g. us-east5")
    zones: list[str] = Field(
        min_length=1, description="zones of the region with the TPU capacity; the first is the default"
    )


class CpuPoolConfig(ConfigModel):
    """The CPU node pool for Ray heads and system pods."""

    machine_type: str = Field(
        "e2-standard-8", alias="machineType", description="machine type of the CPU node pool (Ray heads, system pods)"
    )
    min_nodes: int = Field(1, alias="minNodes", ge=0, description="the CPU pool's autoscaling minimum, per zone")
    max_nodes: int = Field(4, alias="maxNodes", ge=1, description="the CPU pool's autoscaling maximum, per zone")


class AuthorizedNetwork(ConfigModel):
    """A CIDR allowed to reach the control plane."""

    cidr: str = Field(description="a CIDR allowed to reach the control plane's endpoint")
    name: str = Field("", description="a display name for the CIDR")


class ClusterConfig(ConfigModel):
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
    # admin and authorized networks must lie outside them (tpuray/checks/gcp_ranges.py).
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

    # Hardening (tpuray/config/security.py, docs/security.md).
    binary_authorization: BinaryAuthorizationConfig | None = Field(
        None, alias="binaryAuthorization", description="enforce the project's Binary Authorization policy"
    )
    maintenance: MaintenanceConfig | None = Field(None, description="the maintenance window and exclusions")
