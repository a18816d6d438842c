"""Port coverage: every port a Ray head or worker opens is admitted by exactly its intended NetworkPolicies.

The emulator cannot enforce NetworkPolicies, so this test reads the rendered objects. The
ports a pod opens come from the installed Ray: every `ray start` option naming a port (its
value from the rendered rayStartParams, else Ray's default), plus the ports Ray opens
without an option (tpuray/ray_ports.py). Every port is admitted to the pods of the same
object (`<obj>-ray-cluster`, all ports, as KubeRay does: tests/test_network_peers.py), and
those reached from outside the object by exactly their access class's policy. A port Ray
would pick at random cannot be named by a policy and fails the test; so does a port no
policy admits from outside (Ray breaks silently) and a port admitted by a wider policy than
intended (security breaks silently).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import STACKS, mocked
from ray._private import ray_constants
from ray.scripts.scripts import start

from tpuray import labels
from tpuray.preview.render import manifests
from tpuray.ray_ports import NOT_LISTENING, RAY_PORTS

# Who may reach each port: the specification, written out (not read from tpuray/ray_ports.py).
# "cluster" (the pods of the same object) reaches every port.
INTENDED = {
    "port": {"cluster"},
    "node-manager-port": {"cluster"},
    "object-manager-port": {"cluster"},
    "runtime-env-agent-port": {"cluster"},
    "dashboard-agent-grpc-port": {"cluster"},
    "dashboard-agent-listen-port": {"cluster"},
    "min-worker-port": {"cluster"},
    "megascale": {"cluster"},
    "tpu-runtime": {"cluster"},
    "ephemeral": {"cluster"},
    "metrics-export-port": {"metrics", "cluster"},
    "dashboard-metrics": {"metrics", "cluster"},
    "autoscaler-metrics": {"metrics", "cluster"},
    "dashboard-port": {"admin", "cluster"},
    "ray-client-server-port": {"admin", "cluster"},
    "serve-http": {"ingress", "cluster"},
}
HEAD_ONLY = {"port", "dashboard-port", "ray-client-server-port", "dashboard-metrics", "autoscaler-metrics"}
# Ray's defaults for options whose CLI default is unset: `ray start --head` binds GCS to
# ray_constants.DEFAULT_PORT and starts the client server on 10001 (ray/scripts/scripts.py).
UNSET_DEFAULTS = {"port": ray_constants.DEFAULT_PORT, "ray-client-server-port": 10001}
EXTRA = {p.name: p for p in RAY_PORTS if p.name not in {o.name.replace("_", "-") for o in start.params}}


def start_port_options() -> dict[str, Any]:
    """`ray start` options that name a port, with Ray's default (None: Ray picks one at random)."""
    out = {}
    for param in start.params:
        name = param.name.replace("_", "-")
        if "port" not in name or name in NOT_LISTENING:
            continue
        default = param.default
        if not isinstance(default, int) or default == 0:
            default = UNSET_DEFAULTS.get(name)
        out[name] = default
    return out


def opened_ports(start_params: dict[str, str], head: bool) -> dict[str, tuple[int | None, int | None]]:
    """name -> (first, last) port the pod listens on; first None: a random port."""
    ports: dict[str, tuple[int | None, int | None]] = {}
    for name, default in start_port_options().items():
        if name in HEAD_ONLY and not head:
            continue
        value = int(start_params[name]) if name in start_params else default
        last = int(start_params.get("max-worker-port", 19999)) if name == "min-worker-port" else value
        ports[name] = (value, last)
    for name, p in EXTRA.items():
        if p.head_only and not head:
            continue
        ports[name] = (p.port, p.end_port or p.port)
    return ports


def _selects(policy: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    wanted = policy["spec"]["podSelector"].get("matchLabels", {})
    return all(pod_labels.get(k) == v for k, v in wanted.items()) and "Ingress" in policy["spec"]["policyTypes"]


def intervals(policy: dict[str, Any]) -> list[tuple[int, int]]:
    """Port ranges the policy's ingress rules admit (a rule without ports admits every port)."""
    out = []
    for rule in policy["spec"].get("ingress", []):
        for p in rule.get("ports") or [{"port": 1, "endPort": 65535}]:
            out.append((p["port"], p.get("endPort", p["port"])))
    return out


def covers(ranges: list[tuple[int, int]], first: int, last: int) -> bool:
    at = first
    for a, b in sorted(ranges):
        if a <= at <= b:
            at = b + 1
    return at > last


def admitting(policies: list[dict[str, Any]], pod_labels: dict[str, str], first: int, last: int) -> set[str]:
    """Names of the policies that admit at least one port of first..last on this pod."""
    return {
        p["metadata"]["name"]
        for p in policies
        if _selects(p, pod_labels) and any(a <= last and first <= b for a, b in intervals(p))
    }


def pieces(first: int, last: int, holes: set[int]) -> list[tuple[int, int]]:
    """A range without the single ports other entries own (they are checked on their own)."""
    out, start = [], first
    for hole in sorted(h for h in holes if first <= h <= last):
        if start < hole:
            out.append((start, hole - 1))
        start = hole + 1
    return out + ([(start, last)] if start <= last else [])


def ray_pods(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, dict[str, Any]]]:
    """(object, role, group) for the head and every worker group."""
    out = []
    for m in objects:
        if m["kind"] in labels.RAY_KINDS:
            cluster = labels.ray_cluster_spec(m)
            out.append((m, "head", cluster["headGroupSpec"]))
            out += [(m, "worker", g) for g in cluster["workerGroupSpecs"]]
    return out


def coverage_problems(objects: list[dict[str, Any]]) -> list[str]:
    policies = [m for m in objects if m["kind"] == "NetworkPolicy"]
    routed = {
        ref["name"]
        for m in objects
        if m["kind"] == "HTTPRoute"
        for rule in m["spec"]["rules"]
        for ref in rule["backendRefs"]
    }
    problems = []
    for obj, role, group in ray_pods(objects):
        name = obj["metadata"]["name"]
        pod_labels = group["template"]["metadata"]["labels"]
        # Serve is reachable only through a Gateway: an HTTPRoute to this RayService's serve service.
        serves = f"{name}-serve-svc" in routed
        opened = opened_ports(group["rayStartParams"], role == "head")
        singles = {first for first, last in opened.values() if first is not None and first == last}
        for port, (first, last) in opened.items():
            where = f"{name} {role} {port}"
            if first is None or last is None:
                problems.append(f"{where}: a random port; pin it in rayStartParams")
                continue
            expected = {
                f"{name}-ray-{access}" + ("-head" if port in HEAD_ONLY and access != "cluster" else "")
                for access in INTENDED[port]
                if serves or access != "ingress"
            }
            for a, b in pieces(first, last, singles - {first} if first == last else singles):
                got = admitting(policies, pod_labels, a, b)
                whole = {
                    n for n in got if covers(intervals(next(p for p in policies if p["metadata"]["name"] == n)), a, b)
                }
                if got != expected or whole != expected:
                    problems.append(f"{where} ({a}-{b}): admitted by {sorted(got)}, intended {sorted(expected)}")
    return problems


@pytest.mark.parametrize("stack", STACKS)
def test_every_ray_port_is_admitted_by_exactly_its_intended_policy(stack: str) -> None:
    assert coverage_problems(manifests(mocked(stack))) == []


def test_every_listening_ray_start_port_option_has_an_intended_policy() -> None:
    assert set(start_port_options()) | set(EXTRA) == set(INTENDED)


def test_a_port_ray_would_pick_at_random_fails_the_coverage() -> None:
    objects = copy.deepcopy(manifests(mocked("dev")))
    job = next(m for m in objects if m["kind"] == "RayJob")
    job["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"].pop("object-manager-port")
    assert coverage_problems(objects) == [
        "tpuray-dev-train head object-manager-port: a random port; pin it in rayStartParams"
    ]


def test_a_port_no_policy_admits_from_outside_its_object_fails_the_coverage() -> None:
    objects = [m for m in manifests(mocked("dev")) if m["metadata"]["name"] != "tpuray-dev-train-ray-metrics"]
    problems = coverage_problems(objects)
    # The head and the one worker group of dev's train job: Managed Prometheus no longer reaches 8080.
    assert [p.split(" metrics-export-port")[0] for p in problems] == [
        "tpuray-dev-train head",
        "tpuray-dev-train worker",
    ]
    assert all(p.endswith("(8080-8080): admitted by ['tpuray-dev-train-ray-cluster'], intended "
                          "['tpuray-dev-train-ray-cluster', 'tpuray-dev-train-ray-metrics']") for p in problems)  # fmt: skip


def test_a_port_opened_to_a_wider_policy_fails_the_coverage() -> None:
    objects = copy.deepcopy(manifests(mocked("dev")))
    metrics = next(m for m in objects if m["metadata"]["name"] == "tpuray-dev-train-ray-metrics-head")
    metrics["spec"]["ingress"][0]["ports"].append({"protocol": "TCP", "port": 8265})
    assert coverage_problems(objects) == [
        "tpuray-dev-train head dashboard-port (8265-8265): admitted by ['tpuray-dev-train-ray-admin-head', "
        "'tpuray-dev-train-ray-cluster', 'tpuray-dev-train-ray-metrics-head'], intended "
        "['tpuray-dev-train-ray-admin-head', 'tpuray-dev-train-ray-cluster']"
    ]


# ---------------------------------------------------------------------------- who the policies admit


def _policy(stack: str, name: str) -> dict[str, Any]:
    return next(m for m in manifests(mocked(stack)) if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == name)


def test_the_namespace_denies_all_ingress_by_default() -> None:
    deny = _policy("prod", "default-deny-ingress")
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}


def test_pods_of_the_same_object_are_admitted_on_every_port_and_only_they() -> None:
    policy = _policy("prod", "tpuray-prod-train-ray-cluster")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"tpuray.dev/ray-object": "tpuray-prod-train"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"tpuray.dev/ray-object": "tpuray-prod-train"}}}]}],
    }


def test_dashboard_admits_the_objects_own_submitter_the_control_plane_and_the_admin_cidr() -> None:
    policy = _policy("prod", "tpuray-prod-train-ray-admin-head")
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        "tpuray.dev/ray-object": "tpuray-prod-train",
        "tpuray.dev/ray-node": "head",
    }
    assert policy["spec"]["ingress"][0]["from"] == [
        {"podSelector": {"matchLabels": {"tpuray.dev/submitter-of": "tpuray-prod-train"}}},
        {"ipBlock": {"cidr": "172.16.0.0/28"}},
        {"ipBlock": {"cidr": "10.128.0.0/16"}},
    ]


def test_serve_admits_only_the_gateways_proxy_subnet_and_google_health_checks() -> None:
    policy = _policy("prod", "tpuray-prod-serve-ray-ingress")
    assert policy["spec"]["ingress"] == [
        {
            "from": [
                {"ipBlock": {"cidr": "10.129.0.0/23"}},
                {"ipBlock": {"cidr": "35.191.0.0/16"}},
                {"ipBlock": {"cidr": "130.211.0.0/22"}},
            ],
            "ports": [{"protocol": "TCP", "port": 8000}],
        }
    ]


def test_without_a_gateway_nothing_admits_the_serve_port() -> None:
    names = [m["metadata"]["name"] for m in manifests(mocked("staging")) if m["kind"] == "NetworkPolicy"]
    assert not any(n.endswith("-ray-ingress") for n in names)


def test_random_ray_ports_are_pinned_in_rendered_ray_start_params() -> None:
    job = next(m for m in manifests(mocked("prod")) if m["kind"] == "RayJob")
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert worker["rayStartParams"] == {
        "node-manager-port": "6380",
        "object-manager-port": "6381",
        "runtime-env-agent-port": "6382",
        "dashboard-agent-grpc-port": "6383",
        "metrics-export-port": "8080",
    }
