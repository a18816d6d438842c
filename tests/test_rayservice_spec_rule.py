"""The rayservice-spec rule (tpuray/policies/rules_kuberay.py `_rayservice_spec`, after KubeRay's
ValidateRayServiceMetadata and ValidateRayServiceSpec) and the Service port names of
ray-ports-not-public (rules_security.py `_service_exposure`), on hand-built objects with
literal messages."""

from __future__ import annotations

from typing import Any

import pytest

from tpuray.policies.core import Resource
from tpuray.policies.rules_kuberay import _rayservice_spec
from tpuray.policies.rules_security import _service_exposure

TIMEOUT = "ray.io/initializing-timeout"
INCREMENTAL = "NewClusterWithIncrementalUpgrade"
NEEDS = (
    "RayService/serve: NewClusterWithIncrementalUpgrade needs enableInTreeAutoscaling: true and "
    "upgradeStrategy.clusterUpgradeOptions (with gatewayClassName); KubeRay refuses it without"
)


def service(annotations: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> Resource:
    props = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "serve", "annotations": annotations or {}},
    }
    return Resource("kubernetes:ray.io/v1:RayService", "serve", {**props, "spec": spec or {}})


@pytest.mark.parametrize("timeout", ["1", "30m", "1.5h", "90s", ""])
def test_a_positive_initializing_timeout_or_none_passes(timeout: str) -> None:
    assert list(_rayservice_spec(service({TIMEOUT: timeout}), {})) == []


@pytest.mark.parametrize("timeout", ["0", "0s", "0.0s", "-5", "abc"])
def test_a_zero_negative_or_unparsable_initializing_timeout_is_refused(timeout: str) -> None:
    assert list(_rayservice_spec(service({TIMEOUT: timeout}), {})) == [
        f"RayService/serve: annotation ray.io/initializing-timeout is {timeout!r}; KubeRay needs a positive Go "
        "duration ('30m', '1h') or whole seconds"
    ]


def test_an_initializing_timeout_that_is_not_text_is_left_to_the_schema() -> None:
    assert list(_rayservice_spec(service({TIMEOUT: 5}), {})) == []


def test_a_head_service_with_metadata_but_no_name_passes() -> None:
    spec = {"rayClusterConfig": {"headGroupSpec": {"headService": {"metadata": {"labels": {"a": "b"}}}}}}
    assert list(_rayservice_spec(service(spec=spec), {})) == []


@pytest.mark.parametrize("kind", ["NewCluster", "None"])
def test_the_upgrade_types_kuberay_knows_pass(kind: str) -> None:
    assert list(_rayservice_spec(service(spec={"upgradeStrategy": {"type": kind}}), {})) == []


def test_an_unknown_upgrade_type_is_named() -> None:
    assert list(_rayservice_spec(service(spec={"upgradeStrategy": {"type": "Blue"}}), {})) == [
        "RayService/serve: spec.upgradeStrategy.type is 'Blue'; KubeRay allows NewClusterWithIncrementalUpgrade, "
        "NewCluster or None"
    ]


def test_an_incremental_upgrade_with_autoscaling_and_a_gateway_class_passes() -> None:
    spec = {
        "rayClusterConfig": {"enableInTreeAutoscaling": True},
        "upgradeStrategy": {"type": INCREMENTAL, "clusterUpgradeOptions": {"gatewayClassName": "gke-l7-rilb"}},
    }
    assert list(_rayservice_spec(service(spec=spec), {})) == []


def test_an_incremental_upgrade_without_autoscaling_is_refused_even_with_a_gateway_class() -> None:
    spec = {
        "rayClusterConfig": {"enableInTreeAutoscaling": False},
        "upgradeStrategy": {"type": INCREMENTAL, "clusterUpgradeOptions": {"gatewayClassName": "gke-l7-rilb"}},
    }
    assert list(_rayservice_spec(service(spec=spec), {})) == [NEEDS]


def test_an_incremental_upgrade_without_options_is_refused() -> None:
    assert list(_rayservice_spec(service(spec={"upgradeStrategy": {"type": INCREMENTAL}}), {})) == [NEEDS]


def test_a_public_service_exposing_ray_ports_by_name_lists_each_name_once() -> None:
    ports = [{"port": 80, "name": "dashboard"}, {"port": 81, "targetPort": "client"}, {"port": 82, "name": "client"}]
    found = list(_service_exposure("Service/x", "spec.", {"spec": {"type": "NodePort", "ports": ports}}, True))
    assert found == [
        "Service/x: spec.type is 'NodePort' and exposes 'dashboard', 'client'; Ray's head ports run code for anyone "
        "who reaches them: use ClusterIP (kubectl port-forward / IAP) or an internal LoadBalancer "
        "(networking.gke.io/load-balancer-type: Internal)"
    ]
