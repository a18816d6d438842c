"""Stack config -> validated StackConfig -> catalog -> desired state (tpuray/desired) -> components -> resources."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.components.capacity_chain import CapacityChain, CapacityChainArgs
from infra.components.cluster import GkeCluster, GkeClusterArgs
from infra.components.hardening import binary_authorization_policy
from infra.components.observability import Observability, ObservabilityArgs
from infra.components.queues import KueueQueues, KueueQueuesArgs
from infra.components.slice_pool import SlicePool, SlicePoolArgs
from infra.components.workloads import RayWorkloads, RayWorkloadsArgs
from tpuray.checks import gke_versions
from tpuray.config import CONFIG_KEYS, NAMESPACE, ConfigError, StackConfig, terraform
from tpuray.config.checks import parse_stack_config
from tpuray.desired import queues
from tpuray.desired.state import desire


def read_pulumi_config() -> dict[str, Any]:
    """The raw `tpuray:` keys as the engine hands them over (objects arrive JSON-encoded)."""
    config = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        value = config.get(key)
        if value is None:
            continue
        try:
            raw[key] = json.loads(value)
        except json.JSONDecodeError:
            raw[key] = value
    return raw


def build(cfg: StackConfig) -> None:
    gcp_provider = gcp.Provider("gcp", project=cfg.gcp.project, region=cfg.gcp.region)
    opts = pulumi.ResourceOptions(providers={"gcp": gcp_provider})
    # The channel picks the cluster's version; refuse the stack, before anything is declared,
    # when it would create the cluster below a floor of a feature the stack uses (gke_versions).
    engine = gcp.container.get_engine_versions(
        location=cfg.gcp.region, project=cfg.gcp.project, opts=pulumi.InvokeOptions(provider=gcp_provider)
    )
    version_problems = gke_versions.channel_lines(cfg, engine.release_channel_default_version or {})
    if version_problems:
        raise pulumi.RunError("the release channel's GKE version:\n" + "\n".join(version_problems))

    # The Ray objects, their images and the token version, computed once (tpuray/desired/state.py).
    desired = desire(cfg)
    cluster = GkeCluster(
        "gke",
        GkeClusterArgs(
            gcp=cfg.gcp,
            cluster=cfg.cluster,
            stack=cfg.stack,
            min_master_version=cfg.cluster.min_master_version,
            secret_manager=desired.hf_token_version is not None,
        ),
        opts,
    )
    binary_authorization_policy(cfg, opts)
    for pool in cfg.slice_pools:
        SlicePool(
            pool.name,
            SlicePoolArgs(
                pool=pool,
                project=cfg.gcp.project,
                region=cfg.gcp.region,
                zone=pool.zone or cfg.gcp.zones[0],
                cluster_name=cluster.name,
                node_service_account=cluster.node_service_account,
                stack=cfg.stack,
                queued_provisioning=pool.name in queues.queued_provisioning_pools(cfg),
            ),
            opts,
        )
        CapacityChain(
            pool.name,
            CapacityChainArgs(pool=pool, provider=cluster.provider, node_service_account=cluster.node_service_account),
        )
    workloads = cfg.workloads
    ray: list[pulumi.Resource] = []
    if workloads.train or workloads.serve or workloads.interactive:
        ray = [
            RayWorkloads(
                "ray",
                RayWorkloadsArgs(desired=desired, provider=cluster.provider, workload_pool=cluster.workload_pool),
                opts,
            )
        ]

    if cfg.queues is not None:
        KueueQueues("queues", KueueQueuesArgs(config=cfg, provider=cluster.provider, after=ray), opts)

    Observability("obs", ObservabilityArgs(config=cfg), opts)

    pulumi.export("cluster", cluster.name)
    pulumi.export("slicePools", [p.name for p in cfg.slice_pools])


def main() -> None:
    try:
        cfg = parse_stack_config(read_pulumi_config(), pulumi.get_stack())
        # Names kept in a Terraform state (VPC, reservations) replace the config's, if configured.
        cfg = terraform.resolve(cfg)
    except ConfigError as err:
        # RunError ends the program with its message alone: no traceback, nothing declared.
        raise pulumi.RunError("invalid stack config:\n" + str(err)) from None
    build(cfg)
