"""The Endpoints controller stand-in (tpuray/local/substrate/controllers.py): KubeRay v1.5.0
marks a RayService Ready only when its serve Service's Endpoints hold an address
(rayservice_controller.go counts `subsets[].addresses`), so the joint serve test depends on it.
"""

from __future__ import annotations

from typing import Any

from tpuray.local.substrate.controllers import endpoints

SERVE_SVC = {
    "metadata": {"name": "tpuray-dev-serve-serve-svc", "namespace": "ray"},
    "spec": {
        "selector": {"ray.io/node-type": "worker", "ray.io/serve": "true"},
        "ports": [{"name": "serve", "port": 8000, "protocol": "TCP", "targetPort": 8000}],
    },
}


def _pod(name: str, ip: str | None, ready: bool, **meta: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    return {
        "metadata": {"name": name, "namespace": "ray", "uid": f"uid-{name}", **meta},
        "spec": {"nodeName": "gke-v6e-serve-dev-v6e-4-spot-0-0", "containers": [{"name": "ray-worker", "ports": [
            {"name": "serve", "containerPort": 8000}]}]},  # fmt: skip
        "status": status,
    }


def test_a_ready_pod_is_an_address_and_an_unready_one_a_not_ready_address() -> None:
    pods = [_pod("serve-b", "10.80.0.5", ready=False), _pod("serve-a", "10.80.0.4", ready=True)]
    assert endpoints(SERVE_SVC, pods) == [
        {
            "ports": [{"name": "serve", "port": 8000, "protocol": "TCP"}],
            "addresses": [{"ip": "10.80.0.4", "nodeName": "gke-v6e-serve-dev-v6e-4-spot-0-0",
                           "targetRef": {"kind": "Pod", "namespace": "ray", "name": "serve-a", "uid": "uid-serve-a"}}],
            "notReadyAddresses": [{"ip": "10.80.0.5", "nodeName": "gke-v6e-serve-dev-v6e-4-spot-0-0",
                                   "targetRef": {"kind": "Pod", "namespace": "ray", "name": "serve-b", "uid": "uid-serve-b"}}],
        }
    ]  # fmt: skip


def test_a_pod_without_an_ip_or_being_deleted_is_left_out() -> None:
    pods = [_pod("pending", None, ready=False), _pod("going", "10.80.0.6", ready=True, deletionTimestamp="2026-12-02T13:00:00Z")]
    assert endpoints(SERVE_SVC, pods) == []


def test_a_named_target_port_resolves_to_the_pods_container_port() -> None:
    service = {**SERVE_SVC, "spec": {**SERVE_SVC["spec"], "ports": [{"name": "serve", "port": 80, "targetPort": "serve"}]}}
    (subset,) = endpoints(service, [_pod("serve-a", "10.80.0.4", ready=True)])
    assert subset["ports"] == [{"name": "serve", "port": 8000, "protocol": "TCP"}]
