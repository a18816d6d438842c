"""GkeCluster: a private GKE Standard cluster with the Ray operator add-on and a CPU pool."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.components import control_plane
from infra.components.access import kubeconfig
from infra.components.egress import cluster_egress
from infra.components.hardening import hardening_settings
from infra.components.observability import cluster_settings, cost_labels
from tpuray import labels
from tpuray.checks.gcp_rules import service_account_email
from tpuray.config import ClusterConfig, GcpConfig

# Least privilege for nodes: write logs and metrics, read images. Nothing else.
NODE_ROLES = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter",
    "roles/artifactregistry.reader",
)
OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def node_hardening(service_account: pulumi.Input[str]) -> dict:
    """node_config fields every pool shares: dedicated SA, GKE metadata server, shielded VMs."""
    return {
        "service_account": service_account,
        "oauth_scopes": OAUTH_SCOPES,
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "shielded_instance_config": {"enable_secure_boot": True, "enable_integrity_monitoring": True},
    }


@dataclass(frozen=True)
class GkeClusterArgs:
    gcp: GcpConfig
    cluster: ClusterConfig
    # Only a version the stack pins (tpuray:cluster.minMasterVersion): the provider sends it as the
    # cluster's initial version, so by default the release channel chooses (tpuray.checks.gke_versions).
    min_master_version: str | None = None
    stack: str = ""  # names the cost-allocation labels (infra/components/observability.py)
    # The GKE Secret Manager add-on: on when the serve workload reads a Hugging Face token (hf_secret.py).
    secret_manager: bool = False


class GkeCluster(pulumi.ComponentResource):
    """The cluster, its node service account's roles, the CPU pool for Ray heads and a k8s provider."""

    name: pulumi.Output[str]
    node_service_account: pulumi.Output[str]
    workload_pool: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:GkeCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        project, cfg = args.gcp.project, args.cluster

        # The nodes' account exists already: the Terraform foundation creates it and lets the deploy
        # identity act as it (that account only), so the stack grants its roles and runs nodes as it.
        node_account = service_account_email(project, cfg.name, "nodes")
        for role in NODE_ROLES:
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.split('/')[1]}",
                project=project,
                role=role,
                member=f"serviceAccount:{node_account}",
                opts=child,
            )

        authorized = [{"cidr_block": n.cidr, "display_name": n.name or n.cidr} for n in cfg.master_authorized_networks]
        cluster = gcp.container.Cluster(
            name,
            name=cfg.name,
            project=project,
            location=args.gcp.region,
            node_locations=args.gcp.zones,
            network=cfg.network,
            subnetwork=cfg.subnetwork,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=_ip_allocation_policy(cfg),
            release_channel={"channel": cfg.release_channel},
            # None unless pinned: the channel's default version, checked against the floors of
            # the features the stack uses before anything is declared (infra/program.py).
            min_master_version=args.min_master_version,
            # The default pool would run with the default compute SA: remove it.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=node_hardening(node_account),
            addons_config={
                "ray_operator_configs": [
                    {
                        "enabled": True,
                        "ray_cluster_logging_config": {"enabled": True},
                        "ray_cluster_monitoring_config": {"enabled": True},
                    }
                ],
                "gcs_fuse_csi_driver_config": {"enabled": True},
            },
            workload_identity_config={"workload_pool": f"{project}.svc.id.goog"},
            # Mounts Secret Manager secrets as CSI volumes (the serve pods' Hugging Face token).
            secret_manager_config={"enabled": True} if args.secret_manager else None,
            private_cluster_config={
                "enable_private_nodes": True,
                "enable_private_endpoint": cfg.private_endpoint,
                "master_ipv4_cidr_block": cfg.master_cidr,
            },
            # The DNS endpoint per tpuray:cluster.dnsEndpoint: IAM-authorised from anywhere, or off.
            control_plane_endpoints_config=control_plane.endpoints_config(cfg),
            master_authorized_networks_config={"cidr_blocks": authorized} if authorized else None,
            enable_shielded_nodes=True,
            enable_legacy_abac=False,
            deletion_protection=cfg.deletion_protection,
            # Application-layer secrets encryption with the foundation's Cloud KMS key.
            database_encryption={"state": "ENCRYPTED", "key_name": cfg.secrets_kms_key}
            if cfg.secrets_kms_key
            else None,
            **cluster_settings(args.stack),
            # Dataplane V2, KMS secrets, Binary Authorization, maintenance, Gateway API (hardening.py).
            **hardening_settings(cfg),
            opts=child,
        )

        gcp.container.NodePool(
            f"{name}-cpu",
            name="ray-system",
            project=project,
            cluster=cluster.name,
            location=args.gcp.region,
            # Sized by the autoscaler alone: initial_node_count is ForceNew in the provider, so a
            # new minNodes would replace the pool (every Ray head on it) rather than update it
            # (tpuray/data/provider_force_new.yaml); node_count would fight the autoscaler. The
            # provider's advice for initial_node_count: "If you don't need this value, don't set it"
            # (pulumi_gcp NodePool). The pending Ray heads and system pods bring the first nodes.
            autoscaling={
                "total_min_node_count": cfg.cpu_pool.min_nodes,
                "total_max_node_count": cfg.cpu_pool.max_nodes,
            },
            management={"auto_repair": True, "auto_upgrade": True},
            node_config={
                "machine_type": cfg.cpu_pool.machine_type,
                "labels": {labels.SYSTEM_POOL: "ray-system"},
                "resource_labels": cost_labels(args.stack, "ray-system", "system"),
                **node_hardening(node_account),
            },
            opts=child,
        )

        # Private nodes reach image registries and PyPI through Cloud NAT (tpuray:cluster.egress).
        cluster_egress(name, cfg, project, args.gcp.region, child)

        if cfg.dns_endpoint == control_plane.PUBLIC_IAM:
            dns_endpoint = cluster.control_plane_endpoints_config.dns_endpoint_config.endpoint
            provider_config = pulumi.Output.all(cluster.name, dns_endpoint).apply(lambda a: kubeconfig(*a))
        else:  # from inside the VPC: the private IP endpoint and the cluster's CA
            ip = cluster.private_cluster_config.private_endpoint
            ca = cluster.master_auth.cluster_ca_certificate
            provider_config = pulumi.Output.all(cluster.name, ip, ca).apply(lambda a: kubeconfig(*a))
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=provider_config, opts=child)
        self.name = cluster.name
        # Exists once the cluster does: IAM refuses a binding to PROJECT.svc.id.goog before that.
        self.workload_pool = cluster.workload_identity_config.workload_pool
        self.node_service_account = pulumi.Output.from_input(node_account)
        self.register_outputs({"name": cluster.name, "endpoint": cluster.endpoint})


def _ip_allocation_policy(cfg: ClusterConfig) -> dict:
    """The subnetwork's named secondary ranges when the stack names them; else GKE creates ranges."""
    if cfg.pods_range_name and cfg.services_range_name:
        return {
            "cluster_secondary_range_name": cfg.pods_range_name,
            "services_secondary_range_name": cfg.services_range_name,
        }
    return {}
