"""Stack config refuses what GCP, IAM and GKE would refuse at apply time: one line per rule,
naming the key, the value and what is allowed, before anything is declared."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import mocked
from tpuray.checks.gcp_rules import SERVICE_ACCOUNT_ID, service_account_id
from tpuray.config import ConfigError, stacks_dir
from tpuray.config.checks import load_stack

DEV = yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text())


def errors_of(tmp_path: Path, edit) -> list[str]:
    doc: dict[str, Any] = copy.deepcopy(DEV)
    edit(doc["config"])
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as info:
        load_stack(str(path))
    return info.value.lines


def cluster(c: dict) -> dict:
    return c["tpuray:cluster"]


@pytest.mark.parametrize(
    ("cluster_name", "nodes", "ray"),
    [
        ("tpuray-dev", "tpuray-dev-nodes", "tpuray-dev-ray"),
        # cut to 30 characters, and the cut never leaves a trailing hyphen before the suffix
        ("research-tpu-cluster-eu-west4-a", "research-tpu-cluster-eu-nodes", "research-tpu-cluster-eu-we-ray"),
        ("ml-platform-training-", "ml-platform-training-nodes", "ml-platform-training-ray"),
        ("ab", "ab-nodes", "ab-ray"),
    ],
)
def test_service_account_ids_are_valid_iam_ids(cluster_name, nodes, ray):
    assert (service_account_id(cluster_name, "nodes"), service_account_id(cluster_name, "ray")) == (nodes, ray)


def test_every_stack_gets_valid_service_account_ids():
    # The accounts are the Terraform foundation's; the stack names them by these IDs.
    for stack in ("dev", "staging", "prod"):
        name = mocked(stack).config.cluster.name
        for suffix in ("nodes", "ray", "serve"):
            assert SERVICE_ACCOUNT_ID.match(service_account_id(name, suffix)), service_account_id(name, suffix)


def test_old_truncation_would_have_left_a_trailing_hyphen():
    # what the program did before: f"{name}-nodes"[:30] ends in "-" for this name
    assert f"{'ml-platform-tpu-training-wave-2'}-ray"[:30].endswith("-")
    assert service_account_id("ml-platform-tpu-training-wave-2", "ray") == "ml-platform-tpu-training-w-ray"


def test_cluster_name_too_short_for_a_service_account_id_is_refused(tmp_path):
    assert errors_of(tmp_path, lambda c: cluster(c).update(name="a")) == [
        "tpuray:cluster.name: 'a' cannot make a valid service account ID ('a-ray'); IDs are 6-30 characters: "
        "use a cluster name of at least 2 characters"
    ]


def test_cluster_name_gke_would_refuse_is_refused(tmp_path):
    assert errors_of(tmp_path, lambda c: cluster(c).update(name="TPU_ray")) == [
        "tpuray:cluster.name: 'TPU_ray' is invalid; GKE cluster names are 1-40 lowercase letters, digits or "
        "hyphens, start with a letter and end with a letter or digit"
    ]


def test_project_id_format_is_checked(tmp_path):
    assert errors_of(tmp_path, lambda c: c["tpuray:gcp"].update(project="Acme_ML")) == [
        "tpuray:gcp.project: 'Acme_ML' is invalid; project IDs are 6-30 lowercase letters, digits or hyphens, "
        "start with a letter and do not end with a hyphen"
    ]


def test_zone_outside_the_region_is_refused(tmp_path):
    assert errors_of(tmp_path, lambda c: c["tpuray:gcp"].update(zones=["us-central1-a"])) == [
        "tpuray:gcp.zones[0]: 'us-central1-a' is not a zone of region 'us-east5'; e.g. us-east5-a"
    ]


def test_master_range_must_be_a_private_slash_28(tmp_path):
    assert errors_of(tmp_path, lambda c: cluster(c).update(masterIpv4CidrBlock="172.16.0.0/24")) == [
        "tpuray:cluster.masterIpv4CidrBlock: '172.16.0.0/24' is invalid; GKE needs a private IPv4 /28, "
        "e.g. 172.16.0.0/28"
    ]


def test_authorized_network_with_host_bits_is_refused(tmp_path):
    edit = lambda c: cluster(c).update(masterAuthorizedNetworks=[{"cidr": "10.128.0.1/16"}])  # noqa: E731
    assert errors_of(tmp_path, edit) == [
        "tpuray:cluster.masterAuthorizedNetworks[0].cidr: '10.128.0.1/16' is not a CIDR block "
        "(host bits must be zero); e.g. 10.128.0.0/16"
    ]


def test_cpu_pool_min_above_max_is_refused(tmp_path):
    assert errors_of(tmp_path, lambda c: cluster(c).update(cpuPool={"minNodes": 5, "maxNodes": 2})) == [
        "tpuray:cluster.cpuPool.minNodes: 5 is above maxNodes (2); GKE needs minNodes <= maxNodes"
    ]


def test_single_host_pool_above_the_nodes_per_pool_zone_limit_is_refused(tmp_path):
    assert errors_of(tmp_path, lambda c: c["tpuray:slicePools"][1].update(slices=1001)) == [
        "tpuray:slicePools[1].slices: 1001 is above GKE's limit of 1000 nodes per node pool zone "
        "(v6e 2x2 is one node per slice)"
    ]


def test_a_billion_slices_is_refused_at_once(tmp_path):
    start = time.perf_counter()
    lines = errors_of(tmp_path, lambda c: c["tpuray:slicePools"][0].update(slices=1_000_000_000))
    assert time.perf_counter() - start < 2.0
    assert lines == [
        "tpuray:slicePools: 4000000005 nodes in all (slices x hosts, plus the CPU pool) is above GKE's limit "
        "of 15000 nodes per cluster"
    ]


def test_egress_accepts_only_cloud_nat_or_provided(tmp_path):
    lines = errors_of(tmp_path, lambda c: cluster(c).update(egress="none"))
    assert lines == ["tpuray:cluster.egress: 'none' is invalid; input should be 'cloudNat' or 'provided'"]
