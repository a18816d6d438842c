"""Defects a real `pulumi up` would hit, each caught here under mocks (issue 9)."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import pytest
import yaml

from tests.conftest import mocked
from tpuray.checks import gke_versions
from tpuray.config import ConfigError, stacks_dir
from tpuray.preview.mockrun import StackRun, run_stack

CLUSTER = "gcp:container/cluster:Cluster"
ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"


def one(run: StackRun, type_token: str, name: str) -> dict:
    (found,) = [r for r in run.of_type(type_token) if r.name == name]
    return found


def stack_with(tmp_path: Path, stack: str, edit) -> StackRun:
    doc = copy.deepcopy(yaml.safe_load((stacks_dir() / f"Pulumi.{stack}.yaml").read_text()))
    edit(doc["config"])
    path = tmp_path / f"Pulumi.{stack}-edited.yaml"
    path.write_text(yaml.safe_dump(doc))
    return run_stack(str(path))


def test_workload_identity_binding_waits_for_the_cluster_and_uses_its_workload_pool():
    run = mocked("dev")
    cluster = one(run, CLUSTER, "gke")
    binding = one(run, "gcp:serviceaccount/iAMMember:IAMMember", "ray-wi-ray-worker")
    assert cluster.inputs["workloadIdentityConfig"] == {"workloadPool": "acme-ml-dev.svc.id.goog"}
    assert binding.inputs["member"] == "serviceAccount:acme-ml-dev.svc.id.goog[ray/ray-worker]"
    # Registered only once the cluster (which creates the pool) is: it depends on its output.
    assert binding.order > cluster.order


def test_private_nodes_get_cloud_nat_in_the_cluster_region_and_network(tmp_path):
    # The committed stacks run on the Terraform foundation's network, whose NAT is there
    # already (egress: provided); a stack on a network without one declares its own.
    run = stack_with(tmp_path, "prod", lambda c: c["tpuray:cluster"].update(egress="cloudNat"))
    router = one(run, ROUTER, "gke-router")
    nat = one(run, NAT, "gke-nat")
    assert router.inputs == {
        "name": "tpuray-prod-nat-router",
        "project": "acme-ml-prod",
        "region": "us-east5",
        "network": "tpuray-prod",
    }
    assert nat.inputs == {
        "name": "tpuray-prod-nat",
        "project": "acme-ml-prod",
        "region": "us-east5",
        "router": "tpuray-prod-nat-router",
        "natIpAllocateOption": "AUTO_ONLY",
        "sourceSubnetworkIpRangesToNat": "ALL_SUBNETWORKS_ALL_IP_RANGES",
        "logConfig": {"enable": True, "filter": "ERRORS_ONLY"},
    }


def test_egress_provided_by_the_network_declares_no_router_or_nat():
    run = mocked("dev")  # egress: provided, on the foundation's network
    assert run.of_type(ROUTER) == [] and run.of_type(NAT) == []


def test_every_ip_endpoint_stays_private_whatever_the_dns_endpoint():
    # Which stack takes user traffic over the DNS endpoint is per stack: tests/test_dns_endpoint.py.
    for stack in ("dev", "staging", "prod"):
        cluster = one(mocked(stack), CLUSTER, "gke").inputs
        assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is True


def test_kubernetes_provider_kubeconfig_points_at_the_dns_endpoint_with_the_gcloud_auth_plugin():
    (provider,) = mocked("staging").of_type("pulumi:providers:kubernetes")
    kubeconfig = yaml.safe_load(provider.inputs["kubeconfig"])
    (entry,) = kubeconfig["clusters"]
    assert entry["cluster"] == {"server": "https://gke-tpuray-staging-mock.us-east5.gke.goog"}
    (user,) = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_the_release_channel_picks_the_cluster_version_when_the_stack_pins_none():
    # min_master_version would be sent as initialClusterVersion, and one old patch soon stops
    # being creatable in a channel (terraform-provider-google resource_container_cluster.go).
    for stack in ("dev", "staging", "prod"):
        assert "minMasterVersion" not in one(mocked(stack), CLUSTER, "gke").inputs


def test_a_version_the_stack_pins_is_sent_as_it_is(tmp_path):
    def pinned(c: dict) -> None:
        c["tpuray:cluster"]["minMasterVersion"] = "1.35.8-gke.1036000"

    assert one(stack_with(tmp_path, "dev", pinned), CLUSTER, "gke").inputs["minMasterVersion"] == "1.35.8-gke.1036000"


# The Regular channel's default in GKE's release notes of January 2026 ("Default patch version for
# cluster creation": Rapid 1.35.0-gke.1624000, Regular 1.33.5-gke.2100000, Stable 1.33.5-gke.2019000).
JANUARY_2026 = gke_versions.ChannelDefaults(
    {"RAPID": "1.35.0-gke.1624000", "REGULAR": "1.33.5-gke.2100000", "STABLE": "1.33.5-gke.2019000"},
    dt.date(2026, 1, 15),
    "https://cloud.google.com/kubernetes-engine/docs/release-notes",
)


def test_a_channel_that_would_create_the_cluster_below_a_feature_floor_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gke_versions, "channel_defaults_snapshot", lambda: JANUARY_2026)

    def ironwood(c: dict) -> None:
        # Google's TPU table has TPU7x in us-central1-c only: capacity the dev project holds in us-east5-b.
        c["tpuray:slicePools"][0].update(generation="tpu7x", topology="2x2x2", unlistedCapacity=True)
        c["tpuray:cluster"]["releaseChannel"] = "REGULAR"

    with pytest.raises(ConfigError) as info:
        stack_with(tmp_path, "dev", ironwood)
    assert info.value.lines == [
        "tpuray:cluster.releaseChannel: 'REGULAR' creates clusters at GKE 1.33.5-gke.2100000 in us-east5, below "
        "1.34.0-gke.2201000, the first version with TPU7x (Ironwood); use RAPID, or pin "
        "tpuray:cluster.minMasterVersion (sent as the initial version)"
    ]


def test_every_committed_stacks_channel_creates_it_above_its_floors_in_the_snapshot():
    snapshot = gke_versions.channel_defaults_snapshot()
    assert (snapshot.versions["REGULAR"], snapshot.versions["STABLE"]) == ("1.35.8-gke.1036000", "1.34.6-gke.1307000")
    for stack in ("dev", "staging", "prod"):
        assert gke_versions.channel_lines(mocked(stack).config, snapshot.versions) == []


def test_min_master_version_below_a_feature_floor_is_refused(tmp_path):
    def too_old(c: dict) -> None:
        c["tpuray:cluster"]["minMasterVersion"] = "1.32.1-gke.1000"

    with pytest.raises(ConfigError) as info:
        stack_with(tmp_path, "dev", too_old)
    assert info.value.lines == [
        "tpuray:cluster.minMasterVersion: '1.32.1-gke.1000' is below 1.33.3-gke.1136000, the first GKE version "
        "with ComputeClass nodePoolAutoCreation without cluster-level node auto-provisioning; raise it or leave "
        "it unset"
    ]
