"""The IP ranges a stack carries do not overlap where GKE forbids it, have the size GKE and Cloud
Load Balancing need, and a private control plane is not opened wider than any private network."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.stack_edits import STACKS, errors
from tpuray.checks import gcp_ranges
from tpuray.config.checks import parse_stack_config


def gateway(c: dict[str, Any]) -> dict[str, Any]:
    return c["workloads"]["serve"]["gateway"]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_committed_stacks_ranges_are_apart_and_narrow_enough(stack: str) -> None:
    assert gcp_ranges.stack_lines(parse_stack_config(copy.deepcopy(STACKS[stack]), stack)) == []


def test_a_proxy_only_subnet_over_the_control_plane_range_is_refused_naming_both() -> None:
    assert errors("prod", lambda c: gateway(c).update(proxyOnlySubnetCidr="172.16.0.0/23")) == [
        "tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: '172.16.0.0/23' overlaps "
        "tpuray:cluster.masterIpv4CidrBlock '172.16.0.0/28'; GKE needs the control plane's range apart from every "
        "subnet of the cluster's network: move one of them"
    ]


def test_a_control_plane_range_inside_the_proxy_only_subnet_is_refused() -> None:
    assert errors("prod", lambda c: c["cluster"].update(masterIpv4CidrBlock="10.129.1.0/28")) == [
        "tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: '10.129.0.0/23' overlaps "
        "tpuray:cluster.masterIpv4CidrBlock '10.129.1.0/28'; GKE needs the control plane's range apart from every "
        "subnet of the cluster's network: move one of them"
    ]


def test_a_proxy_only_subnet_of_fewer_than_64_addresses_is_refused() -> None:
    assert errors("prod", lambda c: gateway(c).update(proxyOnlySubnetCidr="10.129.0.0/27")) == [
        "tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: '10.129.0.0/27' has 32 addresses; a proxy-only subnet "
        "needs at least 64, a /26 or shorter prefix (Google recommends a /23)"
    ]


def test_a_proxy_only_subnet_of_exactly_64_addresses_is_accepted() -> None:
    raw = copy.deepcopy(STACKS["prod"])
    gateway(raw)["proxyOnlySubnetCidr"] = "10.129.0.0/26"
    assert parse_stack_config(raw, "prod").workloads.serve.gateway.proxy_only_subnet_cidr == "10.129.0.0/26"


def test_everyone_as_an_authorized_network_of_a_private_endpoint_is_refused() -> None:
    networks = [{"cidr": "10.128.0.0/16", "name": "corp-vpn"}, {"cidr": "0.0.0.0/0", "name": "anywhere"}]
    assert errors("prod", lambda c: c["cluster"].update(masterAuthorizedNetworks=networks)) == [
        "tpuray:cluster.masterAuthorizedNetworks[1].cidr: '0.0.0.0/0' is wider than a /8; the control plane's "
        "endpoint is private (privateEndpoint), reached from internal networks only, and the widest private "
        "range is 10.0.0.0/8: list the networks your clients are in"
    ]


def test_an_authorized_slash_7_of_a_private_endpoint_is_refused() -> None:
    networks = [{"cidr": "10.0.0.0/7", "name": "all-of-ten-and-more"}]
    assert errors("prod", lambda c: c["cluster"].update(masterAuthorizedNetworks=networks)) == [
        "tpuray:cluster.masterAuthorizedNetworks[0].cidr: '10.0.0.0/7' is wider than a /8; the control plane's "
        "endpoint is private (privateEndpoint), reached from internal networks only, and the widest private "
        "range is 10.0.0.0/8: list the networks your clients are in"
    ]


def test_all_of_ten_slash_8_is_still_a_private_network() -> None:
    raw = copy.deepcopy(STACKS["prod"])
    raw["cluster"].pop("vpcRanges")  # prod's own ranges lie in 10/8 (test_admin_and_authorized_networks_...)
    raw["cluster"]["masterAuthorizedNetworks"] = [{"cidr": "10.0.0.0/8", "name": "all-internal"}]
    assert parse_stack_config(raw, "prod").cluster.master_authorized_networks[0].cidr == "10.0.0.0/8"


def test_the_same_authorized_network_twice_is_refused() -> None:
    networks = [{"cidr": "10.128.0.0/16", "name": "corp-vpn"}, {"cidr": "10.128.0.0/16", "name": "corp-vpn-2"}]
    assert errors("prod", lambda c: c["cluster"].update(masterAuthorizedNetworks=networks)) == [
        "tpuray:cluster.masterAuthorizedNetworks[1].cidr: '10.128.0.0/16' is listed already "
        "(tpuray:cluster.masterAuthorizedNetworks[0]); list each network once"
    ]


def test_more_than_50_authorized_networks_is_refused() -> None:
    networks = [{"cidr": f"192.168.{i}.0/24", "name": f"site-{i}"} for i in range(51)]
    assert errors("prod", lambda c: c["cluster"].update(masterAuthorizedNetworks=networks)) == [
        "tpuray:cluster.masterAuthorizedNetworks: 51 networks is more than GKE's 50; merge adjacent CIDRs"
    ]


# The VPC's own ranges (tpuray:cluster.vpcRanges, held to the foundation's by
# tests/test_foundation_contract.py): an operator range inside them admits every node and pod.
# Before (issue 36, item 5) the stacks sat in the default VPC, whose 10.128.0.0/9 holds the corp VPN's 10.128.0.0/16.
def test_an_admin_cidr_inside_the_clusters_own_vpc_range_is_refused() -> None:
    assert errors("prod", lambda c: c["workloads"].update(adminCidrs=["10.20.4.0/24"])) == [
        "tpuray:workloads.adminCidrs[0]: '10.20.4.0/24' overlaps the cluster's own VPC range '10.20.0.0/20' "
        "(tpuray:cluster.vpcRanges[0]), so every node, pod and VM there would count as an operator's network: list "
        "the operators' networks (VPN, bastion) outside the VPC"
    ]


def test_an_authorized_network_holding_the_pods_range_is_refused() -> None:
    networks = [{"cidr": "10.64.0.0/12", "name": "too-wide"}]
    assert errors("prod", lambda c: c["cluster"].update(masterAuthorizedNetworks=networks)) == [
        "tpuray:cluster.masterAuthorizedNetworks[0].cidr: '10.64.0.0/12' overlaps the cluster's own VPC range "
        "'10.64.0.0/14' (tpuray:cluster.vpcRanges[1]), so every node, pod and VM there would count as an operator's "
        "network: list the operators' networks (VPN, bastion) outside the VPC"
    ]


def test_a_vpc_range_that_is_not_a_cidr_is_refused() -> None:
    assert errors("dev", lambda c: c["cluster"].update(vpcRanges=["gke-pods"])) == [
        "tpuray:cluster.vpcRanges[0]: 'gke-pods' is not a CIDR block; list the VPC's ranges, e.g. '10.20.0.0/20'"
    ]
