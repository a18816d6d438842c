"""Who may reach a head's Jobs API, and where each Ray pod may connect to (issue 36, item 9).

The rendered NetworkPolicies are evaluated by Kubernetes' rules (tests/netpol.py): ingress for
the admin ports, egress for everything a pod dials. Addresses are realistic ones: a VM of the
corp VPN range, a Google front end that storage.googleapis.com resolves to, the control plane's
private endpoint of prod (172.16.0.2 in masterCidr 172.16.0.0/28).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import STACKS, mocked
from tests.netpol import Pod, admits, egress_admits
from tpuray import labels
from tpuray.preview.render import manifests

NAMESPACE = "ray"
KUBE_DNS = Pod({"k8s-app": "kube-dns"}, "kube-system")
GCS_ADDRESS = "142.250.72.187"  # a Google front end storage.googleapis.com resolves to
HF_HUB_ADDRESS = "18.164.174.118"  # huggingface.co behind its CDN
CORP_VM = "10.128.4.7"
PROD_CONTROL_PLANE = "172.16.0.2"


def objects(stack: str) -> list[dict[str, Any]]:
    return manifests(mocked(stack))


def policies(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in objs if m["kind"] == "NetworkPolicy"]


def pods(objs: list[dict[str, Any]]) -> dict[str, Pod]:
    """'<object>/head', '<object>/<group>' and '<object>/submitter' -> the pod its template renders."""
    out: dict[str, Pod] = {}
    for m in objs:
        if m["kind"] not in labels.RAY_KINDS:
            continue
        name, spec = m["metadata"]["name"], labels.ray_cluster_spec(m)
        out[f"{name}/head"] = Pod(spec["headGroupSpec"]["template"]["metadata"]["labels"], NAMESPACE, ip="10.8.1.2")
        for g in spec["workerGroupSpecs"]:
            out[f"{name}/{g['groupName']}"] = Pod(g["template"]["metadata"]["labels"], NAMESPACE, ip="10.8.1.3")
        if m["kind"] == "RayJob":
            submitter = m["spec"]["submitterPodTemplate"]["metadata"]["labels"]
            out[f"{name}/submitter"] = Pod(submitter, NAMESPACE, ip="10.8.1.4")
    return out


# --------------------------------------------------------------------------- the Jobs API (ingress)


def test_the_train_head_admits_its_own_submitter_on_the_jobs_api() -> None:
    objs = objects("prod")
    found = pods(objs)
    assert admits(policies(objs), found["tpuray-prod-train/submitter"], found["tpuray-prod-train/head"], 8265)


def test_a_serve_replica_cannot_reach_the_train_heads_jobs_api_or_ray_client() -> None:
    objs = objects("prod")
    found = pods(objs)
    replica, head = found["tpuray-prod-serve/serve-v5litepod-8"], found["tpuray-prod-train/head"]
    assert not admits(policies(objs), replica, head, 8265)
    assert not admits(policies(objs), replica, head, 10001)


def test_an_unlabelled_pod_of_the_ray_namespace_reaches_no_heads_jobs_api() -> None:
    objs = objects("staging")
    debug = Pod({"app": "debug"}, NAMESPACE, ip="10.8.2.9")
    heads = {k: p for k, p in pods(objs).items() if k.endswith("/head")}
    assert sorted(heads) == [
        "tpuray-staging-interactive/head",
        "tpuray-staging-serve/head",
        "tpuray-staging-train/head",
    ]
    assert [k for k, head in heads.items() if admits(policies(objs), debug, head, 8265)] == []


def test_the_train_submitter_cannot_reach_the_serve_heads_jobs_api() -> None:
    objs = objects("dev")
    found = pods(objs)
    assert not admits(policies(objs), found["tpuray-dev-train/submitter"], found["tpuray-dev-serve/head"], 8265)


def test_the_control_plane_and_the_admin_cidrs_still_reach_the_jobs_api() -> None:
    objs = objects("prod")
    head = pods(objs)["tpuray-prod-train/head"]
    operator = Pod({}, "", ip="172.16.0.5")  # the GKE-managed KubeRay operator, in masterCidr
    operator_vpn = Pod({}, "", ip=CORP_VM)  # adminCidrs 10.128.0.0/16
    assert admits(policies(objs), operator, head, 8265)
    assert admits(policies(objs), operator_vpn, head, 8265)


# --------------------------------------------------------------------------- egress


@pytest.mark.parametrize("stack", STACKS)
def test_every_ray_pod_reaches_the_pods_of_its_own_object_on_every_port(stack: str) -> None:
    objs = objects(stack)
    found = {k: p for k, p in pods(objs).items() if not k.endswith("/submitter")}
    blocked = [
        f"{a} -> {b}"
        for a, source in found.items()
        for b, target in found.items()
        if a.split("/")[0] == b.split("/")[0]
        and not all(egress_admits(policies(objs), source, target, port) for port in (6379, 8471, 8081, 45123))
    ]
    assert blocked == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_ray_pod_reaches_dns_the_metadata_server_and_https_on_public_addresses(stack: str) -> None:
    objs = objects(stack)
    nets = policies(objs)
    for name, pod in pods(objs).items():
        if name.endswith("/submitter"):
            continue
        assert egress_admits(nets, pod, KUBE_DNS, 53, "UDP"), name
        assert egress_admits(nets, pod, KUBE_DNS, 53, "TCP"), name
        assert egress_admits(nets, pod, "169.254.169.254", 80), name
        assert egress_admits(nets, pod, "169.254.169.252", 988), name
        assert egress_admits(nets, pod, GCS_ADDRESS, 443), name
        assert egress_admits(nets, pod, HF_HUB_ADDRESS, 443), name


def test_a_ray_pod_reaches_no_vpc_vm_no_other_object_and_no_plain_http_on_the_internet() -> None:
    objs = objects("prod")
    nets, found = policies(objs), pods(objs)
    replica = found["tpuray-prod-serve/serve-v5litepod-8"]
    assert not egress_admits(nets, replica, CORP_VM, 22)
    assert not egress_admits(nets, replica, CORP_VM, 443)
    assert not egress_admits(nets, replica, found["tpuray-prod-train/train-v6e-16"], 8471)
    assert not egress_admits(nets, replica, found["tpuray-prod-train/head"], 6379)
    assert not egress_admits(nets, replica, GCS_ADDRESS, 80)
    assert not egress_admits(nets, replica, "169.254.169.254", 443)
    assert not egress_admits(nets, replica, Pod({"app": "grafana"}, "monitoring"), 3000)


def test_only_an_autoscaling_head_reaches_the_control_plane() -> None:
    objs = objects("prod")
    nets, found = policies(objs), pods(objs)
    # prod's RayJob autoscales (a v5e fallback group); its RayService does not.
    assert egress_admits(nets, found["tpuray-prod-train/head"], PROD_CONTROL_PLANE, 443)
    assert not egress_admits(nets, found["tpuray-prod-train/train-v6e-16"], PROD_CONTROL_PLANE, 443)
    assert not egress_admits(nets, found["tpuray-prod-serve/head"], PROD_CONTROL_PLANE, 443)
    assert not egress_admits(nets, found["tpuray-prod-serve/serve-v5litepod-8"], PROD_CONTROL_PLANE, 443)


def test_the_submitter_reaches_its_heads_jobs_api_and_dns_and_nothing_else() -> None:
    objs = objects("prod")
    nets, found = policies(objs), pods(objs)
    submitter = found["tpuray-prod-train/submitter"]
    assert egress_admits(nets, submitter, found["tpuray-prod-train/head"], 8265)
    assert egress_admits(nets, submitter, KUBE_DNS, 53, "UDP")
    assert not egress_admits(nets, submitter, found["tpuray-prod-train/head"], 6379)
    assert not egress_admits(nets, submitter, found["tpuray-prod-serve/head"], 8265)
    assert not egress_admits(nets, submitter, GCS_ADDRESS, 443)
    assert not egress_admits(nets, submitter, "169.254.169.254", 80)
    assert not egress_admits(nets, submitter, PROD_CONTROL_PLANE, 443)


def test_a_pod_no_object_policy_selects_has_no_egress_at_all() -> None:
    objs = objects("dev")
    debug = Pod({"app": "debug"}, NAMESPACE)
    assert not egress_admits(policies(objs), debug, KUBE_DNS, 53, "UDP")
    assert not egress_admits(policies(objs), debug, GCS_ADDRESS, 443)
