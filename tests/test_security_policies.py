"""The hardening rules' other branches (their main good/bad fixtures are in tests/fixtures/policies/)."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tpuray.policies.analyzer import InProcessAnalyzer, Target, analyze, urn
from tpuray.policies.core import Resource
from tpuray.policies.evaluate import check_manifests as check

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
assert _spec and _spec.loader
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)

DIGEST_IMAGE = "rayproject/ray:2.60.0-py312-tpu@sha256:" + "0f" * 32


def fired(stack: list[dict[str, Any]]) -> dict[str, list[str]]:
    targets = [Target(Resource(i["type"], i["name"], i["inputs"], urn("fixture", i["type"], i["name"]))) for i in stack]
    out: dict[str, list[str]] = {}
    for v in analyze(InProcessAnalyzer(), targets, {}, {"ray-version-pinned": {"rayVersion": "2.60.0"}}):
        out.setdefault(v.policy, []).append(v.message)
    return out


def good() -> list[dict[str, Any]]:
    return make_fixtures._stack()


def res(stack: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return make_fixtures._res(stack, name)


def set_images(stack: list[dict[str, Any]], image: str) -> None:
    make_fixtures._set_images(res(stack, "train"), image)


def enforce(stack: list[dict[str, Any]]) -> None:
    res(stack, "gke")["binaryAuthorization"] = {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}


def test_calico_network_policy_also_enforces_network_policies() -> None:
    stack = good()
    res(stack, "gke").update(datapathProvider="LEGACY_DATAPATH", networkPolicy={"enabled": True})
    assert fired(stack) == {}


def test_binary_authorization_with_digest_images_and_no_policy_resource_passes() -> None:
    stack = good()
    enforce(stack)
    set_images(stack, DIGEST_IMAGE)
    assert fired(stack) == {}


def test_binary_authorization_refuses_a_digest_the_stacks_policy_does_not_allow() -> None:
    stack = good()
    enforce(stack)
    set_images(stack, DIGEST_IMAGE)
    stack.append(
        {
            "type": "gcp:binaryauthorization/policy:Policy",
            "name": "binauthz",
            "inputs": {"admissionWhitelistPatterns": [{"namePattern": "us-docker.pkg.dev/acme/ray/other@sha256:1"}]},
        }
    )
    (message, _) = fired(stack)["gke-binary-authorization"]  # head and worker images
    assert "does not allow; the pods would be refused" in message


def test_binary_authorization_admits_a_digest_the_stacks_policy_allows() -> None:
    stack = good()
    enforce(stack)
    set_images(stack, DIGEST_IMAGE)
    stack.append(
        {
            "type": "gcp:binaryauthorization/policy:Policy",
            "name": "binauthz",
            "inputs": {"admissionWhitelistPatterns": [{"namePattern": DIGEST_IMAGE}]},
        }
    )
    assert fired(stack) == {}


def test_binary_authorization_skips_objects_without_a_cluster_spec_or_an_image() -> None:
    stack = good()
    enforce(stack)
    set_images(stack, DIGEST_IMAGE)
    del make_fixtures._worker(res(stack, "train"))["template"]["spec"]["containers"][0]["image"]
    on_existing_cluster = {  # a RayJob that runs on a RayCluster it does not declare: no cluster spec
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "adhoc"},
        "spec": {"entrypoint": "python -m ray_apps.train", "clusterSelector": {"ray.io/cluster": "shared"}},
    }
    stack.append({"type": "kubernetes:ray.io/v1:RayJob", "name": "adhoc", "inputs": on_existing_cluster})
    assert "gke-binary-authorization" not in fired(stack)


def test_a_ray_namespace_this_stack_does_not_declare_is_not_judged() -> None:
    stack = [r for r in good() if r["name"] != "ray-ns"]
    assert fired(stack) == {}


def test_baseline_pod_security_is_accepted() -> None:
    stack = good()
    res(stack, "ray-ns")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "baseline"
    assert fired(stack) == {}


def _open_policy(ingress: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        "name": "open",
        "inputs": {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "open", "namespace": "ray"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": ingress},
        },
    }


@pytest.mark.parametrize(
    ("ingress", "ports"),
    [
        ([{}], "6379 (GCS), 8265 (dashboard / Jobs API), 10001 (Ray Client), 52365 (dashboard agent)"),
        ([{"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 8265}]}], "8265 (dashboard / Jobs API)"),
        ([{"from": [{"podSelector": {}}, {"ipBlock": {"cidr": "::/0"}}], "ports": [{"port": "dashboard"}]}],
         "6379 (GCS), 8265 (dashboard / Jobs API), 10001 (Ray Client), 52365 (dashboard agent)"),
        ([{"ports": [{"port": 6000, "endPort": 7000}]}], "6379 (GCS)"),
    ],
)  # fmt: skip
def test_a_policy_opening_a_ray_control_port_to_everyone_fires(ingress: list[dict[str, Any]], ports: str) -> None:
    stack = good() + [_open_policy(ingress)]
    (message,) = fired(stack)["ray-network-policies"]
    assert message.startswith(f"NetworkPolicy/open: spec.ingress[0] admits {ports} from everywhere;")


@pytest.mark.parametrize(
    "ingress",
    [
        [{"ports": [{"port": 8000}]}],  # Serve from everywhere: the Gateway's business, not a control port
        [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 8265}]}],
        [{"from": [{"podSelector": {}}]}],
    ],
)
def test_a_policy_that_names_its_peers_or_opens_no_control_port_passes(ingress: list[dict[str, Any]]) -> None:
    assert fired(good() + [_open_policy(ingress)]) == {}


def test_a_default_deny_with_allow_rules_does_not_count_as_default_deny() -> None:
    stack = good()
    res(stack, "deny")["spec"]["ingress"] = [{"from": [{"podSelector": {}}]}]
    assert list(fired(stack)) == ["ray-network-policies"]


# ---------------------------------------------------------------------------- Gateway (also `tpuray check`)


def _check(obj: dict[str, Any], tmp_path: Path) -> list[str]:
    import yaml

    path = tmp_path / "object.yaml"
    path.write_text(yaml.safe_dump(obj))
    return [v.message for v in check([str(path)], "prod", "2.60.0", []) if v.policy == "serve-gateway-tls"]


def test_an_https_listener_without_certificate_fires(tmp_path: Path) -> None:
    gateway = copy.deepcopy(make_fixtures.GOOD["gateway"])
    gateway["spec"]["listeners"][0]["tls"] = {"mode": "Terminate"}
    (message,) = _check(gateway, tmp_path)
    assert message.startswith("Gateway/serve-gateway: spec.listeners[0].tls names no certificate;")


def test_a_certificate_manager_certificate_counts_as_a_certificate(tmp_path: Path) -> None:
    gateway = copy.deepcopy(make_fixtures.GOOD["gateway"])
    gateway["spec"]["listeners"][0]["tls"] = {
        "mode": "Terminate",
        "options": {"networking.gke.io/cert-manager-certs": "serve-cert"},
    }
    assert _check(gateway, tmp_path) == []


def test_a_route_to_the_ray_dashboard_fires(tmp_path: Path) -> None:
    route = copy.deepcopy(make_fixtures.GOOD["httproute"])
    route["spec"]["rules"][0]["backendRefs"][0]["port"] = 8265
    (message,) = _check(route, tmp_path)
    assert message == (
        "HTTPRoute/serve-route: spec.rules[0].backendRefs[0].port is 8265 (dashboard / Jobs API); a Gateway must "
        "route only to Ray Serve (port 8000), never to a port that runs code"
    )
