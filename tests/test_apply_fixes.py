"""Defects a real `pulumi up` would hit, each caught here under mocks (issue 9)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from tests.conftest import mocked
from tpuray.config import stacks_dir
from tpuray.mockrun import StackRun, run_stack

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
    binding = one(run, "gcp:serviceaccount/iAMMember:IAMMember", "ray-wi")
    assert cluster.inputs["workloadIdentityConfig"] == {"workloadPool": "acme-ml-dev.svc.id.goog"}
    assert binding.inputs["member"] == "serviceAccount:acme-ml-dev.svc.id.goog[ray/ray-workload]"
    # Registered only once the cluster (which creates the pool) is: it depends on its output.
    assert binding.order > cluster.order


def test_private_nodes_get_cloud_nat_in_the_cluster_region_and_network():
    run = mocked("prod")
    router = one(run, ROUTER, "gke-router")
    nat = one(run, NAT, "gke-nat")
    assert router.inputs == {
        "name": "tpuray-prod-nat-router",
        "project": "acme-ml-prod",
        "region": "us-east5",
        "network": "default",
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


def test_egress_provided_by_the_network_declares_no_router_or_nat(tmp_path):
    run = stack_with(tmp_path, "dev", lambda c: c["tpuray:cluster"].update(egress="provided"))
    assert run.of_type(ROUTER) == [] and run.of_type(NAT) == []


def test_ci_reaches_the_control_plane_through_the_dns_endpoint_and_the_ip_endpoint_stays_private():
    for stack in ("dev", "staging", "prod"):
        run = mocked(stack)
        cluster = one(run, CLUSTER, "gke").inputs
        assert cluster["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
        assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is True


def test_kubernetes_provider_kubeconfig_points_at_the_dns_endpoint_with_the_gcloud_auth_plugin():
    (provider,) = mocked("prod").of_type("pulumi:providers:kubernetes")
    kubeconfig = yaml.safe_load(provider.inputs["kubeconfig"])
    (entry,) = kubeconfig["clusters"]
    assert entry["cluster"] == {"server": "https://gke-tpuray-prod-mock.us-east5.gke.goog"}
    (user,) = kubeconfig["users"]
    assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
