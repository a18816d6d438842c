"""What GCP, IAM and GKE refuse at apply time, checked on the stack config before anything is declared.

Each rule is the one GCP documents (sources beside each constant); each broken rule is one
line naming the key, the value and what is allowed. `stack_lines(cfg)` runs them all and is
called by tpuray.config after its own checks. Everything here is O(pools), never O(slices):
a pool with a billion slices is refused at once.

The names tpuray derives from config (service account IDs) are made here too, so the
program and the check can never disagree.
"""

from __future__ import annotations

import ipaddress
import re

from tpuray.checks import gcp_names, gcp_ranges, maintenance_rules, stack_consistency
from tpuray.checks.gcp_names import PROJECT_ID
from tpuray.config.schema import StackConfig

NS = "tpuray"

# IAM service account IDs: "must be 6-30 characters long, and match the regular expression
# [a-z]([-a-z0-9]*[a-z0-9]) to comply with RFC1035" (pulumi-gcp 10.2.0 serviceaccount.Account
# account_id, from the Terraform google_service_account docs; IAM docs: service-accounts-create).
SERVICE_ACCOUNT_ID = re.compile(r"^[a-z](?:[-a-z0-9]{4,28}[a-z0-9])$")
# The service accounts tpuray creates per cluster, by suffix.
SERVICE_ACCOUNT_SUFFIXES = ("nodes", "ray")
# GKE cluster names: lowercase letters, digits and hyphens, start with a letter, end with a
# letter or digit, at most 40 characters (`gcloud container clusters create` NAME; API Cluster.name).
CLUSTER_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
# Compute Engine resource names (networks, subnetworks, routers, reservations): RFC 1035,
# at most 63 characters. https://cloud.google.com/compute/docs/naming-resources
RFC1035 = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
# GKE limits per Standard cluster: https://cloud.google.com/kubernetes-engine/quotas
MAX_NODES_PER_CLUSTER = 15_000
MAX_NODES_PER_POOL_ZONE = 1_000
# The private control plane range is a /28 from a private range.
# https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters (master-ipv4-cidr)
MASTER_PREFIX = 28


def service_account_id(cluster_name: str, suffix: str) -> str:
    """`<cluster>-<suffix>`, the cluster part cut so that the ID is at most 30 characters and
    never ends with a hyphen. Valid for every cluster name `stack_lines` accepts."""
    head = cluster_name[: 30 - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}"


def service_account_email(project: str, cluster_name: str, suffix: str) -> str:
    """The email of `<cluster>-<suffix>` in `project`: the Terraform foundation creates these accounts
    (terraform/modules/ci-identity: node_service_account, workload_service_accounts) and the stack
    names them, so the deploy identity's grants can be on the accounts instead of the project."""
    return f"{service_account_id(cluster_name, suffix)}@{project}.iam.gserviceaccount.com"


def _name_lines(key: str, value: str, pattern: re.Pattern[str], allowed: str) -> list[str]:
    return [] if pattern.match(value) else [f"{key}: {value!r} is invalid; {allowed}"]


def _cluster_lines(cfg: StackConfig) -> list[str]:
    c, key = cfg.cluster, f"{NS}:cluster"
    lines = _name_lines(
        f"{key}.name",
        c.name,
        CLUSTER_NAME,
        "GKE cluster names are 1-40 lowercase letters, digits or hyphens, start with a letter "
        "and end with a letter or digit",
    )
    if not lines:
        for suffix in SERVICE_ACCOUNT_SUFFIXES:
            account = service_account_id(c.name, suffix)
            if not SERVICE_ACCOUNT_ID.match(account):
                lines.append(
                    f"{key}.name: {c.name!r} cannot make a valid service account ID ({account!r}); IDs are "
                    "6-30 characters: use a cluster name of at least 2 characters"
                )
                break
    for field, value in (("network", c.network), ("subnetwork", c.subnetwork)):
        lines += _name_lines(f"{key}.{field}", value, RFC1035, "use a Compute Engine name (RFC 1035, 1-63 characters)")
    try:
        master = ipaddress.ip_network(c.master_cidr)
    except ValueError:
        lines.append(f"{key}.masterIpv4CidrBlock: {c.master_cidr!r} is not a CIDR block; e.g. 172.16.0.0/28")
    else:
        if master.version != 4 or master.prefixlen != MASTER_PREFIX or not master.is_private:
            lines.append(
                f"{key}.masterIpv4CidrBlock: {c.master_cidr!r} is invalid; GKE needs a private IPv4 /28, "
                "e.g. 172.16.0.0/28"
            )
    for i, network in enumerate(c.master_authorized_networks):
        try:
            ipaddress.ip_network(network.cidr)
        except ValueError:
            lines.append(
                f"{key}.masterAuthorizedNetworks[{i}].cidr: {network.cidr!r} is not a CIDR block "
                "(host bits must be zero); e.g. 10.128.0.0/16"
            )
    pool = c.cpu_pool
    if pool.min_nodes > pool.max_nodes:
        lines.append(
            f"{key}.cpuPool.minNodes: {pool.min_nodes} is above maxNodes ({pool.max_nodes}); "
            "GKE needs minNodes <= maxNodes"
        )
    if pool.max_nodes > MAX_NODES_PER_POOL_ZONE:
        lines.append(
            f"{key}.cpuPool.maxNodes: {pool.max_nodes} is above GKE's limit of "
            f"{MAX_NODES_PER_POOL_ZONE} nodes per node pool zone"
        )
    return lines


def _gcp_lines(cfg: StackConfig) -> list[str]:
    g, key = cfg.gcp, f"{NS}:gcp"
    lines = _name_lines(
        f"{key}.project",
        g.project,
        PROJECT_ID,
        "project IDs are 6-30 lowercase letters, digits or hyphens, start with a letter and do not end with a hyphen",
    )
    lines += _name_lines(f"{key}.region", g.region, REGION, "use a Compute Engine region, e.g. us-central1")
    for i, zone in enumerate(g.zones):
        if not re.fullmatch(rf"{re.escape(g.region)}-[a-z]", zone):
            lines.append(f"{key}.zones[{i}]: {zone!r} is not a zone of region {g.region!r}; e.g. {g.region}-a")
    for i, pool in enumerate(cfg.slice_pools):
        if pool.zone is not None and not re.fullmatch(rf"{re.escape(g.region)}-[a-z]", pool.zone):
            lines.append(
                f"{NS}:slicePools[{i}].zone: {pool.zone!r} is not a zone of region {g.region!r}; "
                f"the cluster is regional in {g.region}"
            )
    return lines


def _size_lines(cfg: StackConfig) -> list[str]:
    """GKE's documented size limits, with arithmetic only (never one step per slice)."""
    from tpuray.catalog import CatalogError

    lines: list[str] = []
    total = cfg.cluster.cpu_pool.max_nodes * len(cfg.gcp.zones)
    for i, pool in enumerate(cfg.slice_pools):
        try:
            shape = pool.shape
        except CatalogError:
            continue  # reported by the shape check
        if pool.slices < 1:
            continue  # reported on its own
        nodes = pool.slices * shape.hosts
        total += nodes
        # A single-host pool is one node pool with one node per slice, in one zone.
        if not shape.multi_host and pool.slices > MAX_NODES_PER_POOL_ZONE:
            lines.append(
                f"{NS}:slicePools[{i}].slices: {pool.slices} is above GKE's limit of {MAX_NODES_PER_POOL_ZONE} "
                f"nodes per node pool zone ({pool.generation} {pool.topology} is one node per slice)"
            )
    if total > MAX_NODES_PER_CLUSTER:
        lines.append(
            f"{NS}:slicePools: {total} nodes in all (slices x hosts, plus the CPU pool) is above GKE's limit of "
            f"{MAX_NODES_PER_CLUSTER} nodes per cluster"
        )
    return lines


def _reservation_lines(cfg: StackConfig) -> list[str]:
    lines = []
    for i, pool in enumerate(cfg.slice_pools):
        for j, tier in enumerate(pool.capacity):
            if tier.reservation is None or not tier.reservation.name.strip():
                continue  # a missing name is reported by tpuray.config
            key = f"{NS}:slicePools[{i}].capacity[{j}].reservation"
            lines += _name_lines(f"{key}.name", tier.reservation.name, RFC1035, "reservation names follow RFC 1035")
            if tier.reservation.project is not None:
                lines += _name_lines(f"{key}.project", tier.reservation.project, PROJECT_ID, "use a project ID")
    return lines


def stack_lines(cfg: StackConfig) -> list[str]:
    """Every rule above and those of the focused modules, one line per broken rule. (Whether each
    pool's zone offers its TPU generation is asked of an otherwise valid stack only: tpuray.config.)"""
    return (
        _gcp_lines(cfg)
        + _cluster_lines(cfg)
        + gcp_ranges.stack_lines(cfg)
        + maintenance_rules.stack_lines(cfg)
        + _size_lines(cfg)
        + _reservation_lines(cfg)
        + gcp_names.stack_lines(cfg)
        + stack_consistency.stack_lines(cfg)
    )
