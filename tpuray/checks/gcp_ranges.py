"""The IP ranges a stack carries, checked against each other and against GKE's limits.

The stack names these ranges: the private control plane's /28 (`cluster.masterIpv4CidrBlock`),
the region's proxy-only subnet of an internal Gateway (`workloads.serve.gateway.proxyOnlySubnetCidr`),
the CIDRs allowed to the control plane (`cluster.masterAuthorizedNetworks`) and to the Ray admin
ports (`workloads.adminCidrs`), and the VPC's own ranges (`cluster.vpcRanges`: the nodes' primary
range and the Pods and Services secondary ranges, whose CIDRs live in the VPC, terraform/modules/network;
tests/test_foundation_contract.py holds the committed stacks' list to their foundation's). An admin
or authorized network that overlaps the VPC's own ranges admits every node and pod of the cluster
(and every VM of the subnet): refused. Each problem is one line naming both keys where two ranges meet.
Called by tpuray.checks.gcp_rules.stack_lines; a range that is not a CIDR is refused there (masterIpv4CidrBlock,
authorized networks) or in tpuray/config/security.py (proxyOnlySubnetCidr) and skipped here.
"""

from __future__ import annotations

import ipaddress

from tpuray.config.schema import StackConfig

NS = "tpuray"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# The control plane's range "must not overlap with any other ranges in use within the cluster's
# network" (GKE API PrivateClusterConfig.master_ipv4_cidr_block; the proxy-only subnet is a subnet
# of that network). https://cloud.google.com/kubernetes-engine/docs/how-to/private-clusters
# A proxy-only subnet "must provide 64 or more IP addresses. This corresponds to a prefix length of
# /26 or shorter" (https://cloud.google.com/load-balancing/docs/proxy-only-subnets).
PROXY_ONLY_MAX_PREFIX = 26
# MasterAuthorizedNetworksConfig: "cidr_blocks define up to 50 external networks that could access
# Kubernetes master through HTTPS" (GKE API v1, google.container.v1.MasterAuthorizedNetworksConfig).
MAX_AUTHORIZED_NETWORKS = 50
# A control plane with a private endpoint is reached from the cluster's VPC and the networks joined
# to it (VPN, Interconnect, peering) only
# (https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation): its clients have
# internal addresses, and the widest private block, 10.0.0.0/8 (RFC 1918), is a /8. An authorized
# network wider than that (0.0.0.0/0 among them) authorizes more than any private network holds:
# the list then restricts nothing. tpuray's choice, from those two facts: refused.
PRIVATE_WIDEST_PREFIX = 8


def _network(value: str | None) -> Network | None:
    if value is None:
        return None
    try:
        return ipaddress.ip_network(value)
    except ValueError:
        return None  # refused by the key's own check


def _overlaps(a: Network, b: Network) -> bool:
    return a.version == b.version and a.overlaps(b)  # type: ignore[arg-type]


def proxy_only_lines(cfg: StackConfig) -> list[str]:
    serve = cfg.workloads.serve
    gateway = serve.gateway if serve is not None else None
    if gateway is None:
        return []
    key = f"{NS}:workloads.serve.gateway.proxyOnlySubnetCidr"
    proxy = _network(gateway.proxy_only_subnet_cidr)
    if proxy is None:
        return []
    master = _network(cfg.cluster.master_cidr)
    if master is not None and _overlaps(proxy, master):
        return [
            f"{key}: {gateway.proxy_only_subnet_cidr!r} overlaps {NS}:cluster.masterIpv4CidrBlock "
            f"{cfg.cluster.master_cidr!r}; GKE needs the control plane's range apart from every subnet of the "
            "cluster's network: move one of them"
        ]
    if proxy.version == 4 and proxy.prefixlen > PROXY_ONLY_MAX_PREFIX:
        return [
            f"{key}: {gateway.proxy_only_subnet_cidr!r} has {proxy.num_addresses} addresses; a proxy-only subnet "
            f"needs at least 64, a /{PROXY_ONLY_MAX_PREFIX} or shorter prefix (Google recommends a /23)"
        ]
    return []


def authorized_network_lines(cfg: StackConfig) -> list[str]:
    cluster, key = cfg.cluster, f"{NS}:cluster.masterAuthorizedNetworks"
    lines = []
    if len(cluster.master_authorized_networks) > MAX_AUTHORIZED_NETWORKS:
        lines.append(
            f"{key}: {len(cluster.master_authorized_networks)} networks is more than GKE's "
            f"{MAX_AUTHORIZED_NETWORKS}; merge adjacent CIDRs"
        )
    seen: dict[Network, int] = {}
    for i, entry in enumerate(cluster.master_authorized_networks):
        network = _network(entry.cidr)
        if network is None:
            continue
        if network in seen:
            lines.append(
                f"{key}[{i}].cidr: {entry.cidr!r} is listed already ({key}[{seen[network]}]); list each network once"
            )
            continue
        seen[network] = i
        if cluster.private_endpoint and network.prefixlen < PRIVATE_WIDEST_PREFIX:
            lines.append(
                f"{key}[{i}].cidr: {entry.cidr!r} is wider than a /{PRIVATE_WIDEST_PREFIX}; the control plane's "
                "endpoint is private (privateEndpoint), reached from internal networks only, and the widest "
                "private range is 10.0.0.0/8: list the networks your clients are in"
            )
    return lines


def own_vpc_lines(cfg: StackConfig) -> list[str]:
    """vpcRanges must be CIDRs; no admin or authorized network may overlap one of them."""
    key = f"{NS}:cluster.vpcRanges"
    lines, own = [], []
    for i, value in enumerate(cfg.cluster.vpc_ranges):
        network = _network(value)
        if network is None:
            lines.append(f"{key}[{i}]: {value!r} is not a CIDR block; list the VPC's ranges, e.g. '10.20.0.0/20'")
        else:
            own.append((i, value, network))
    # A range refused already for being everyone (adminCidrs: tpuray/config/security.py) or wider
    # than any private network (authorized networks of a private endpoint, above) gets that line only.
    admins = [(f"{NS}:workloads.adminCidrs[{i}]", c, 0) for i, c in enumerate(cfg.workloads.admin_cidrs)]
    widest = PRIVATE_WIDEST_PREFIX if cfg.cluster.private_endpoint else 0
    authorized = [(f"{NS}:cluster.masterAuthorizedNetworks[{i}].cidr", n.cidr, widest)
                  for i, n in enumerate(cfg.cluster.master_authorized_networks)]  # fmt: skip
    for where, cidr, refused_below in admins + authorized:
        network = _network(cidr)
        if network is None or network.prefixlen <= 0 or network.prefixlen < refused_below:
            continue
        hit = next(((i, v) for i, v, own_net in own if _overlaps(network, own_net)), None)
        if hit is not None:
            lines.append(
                f"{where}: {cidr!r} overlaps the cluster's own VPC range {hit[1]!r} ({key}[{hit[0]}]), so every node, "
                "pod and VM there would count as an operator's network: list the operators' networks (VPN, bastion) "
                "outside the VPC"
            )
    return lines


def stack_lines(cfg: StackConfig) -> list[str]:
    return proxy_only_lines(cfg) + authorized_network_lines(cfg) + own_vpc_lines(cfg)
