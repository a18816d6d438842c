"""Pods of one Ray object reach each other on every port the TPU runtime, JAX and Ray Train use.

The ports come from upstream, not from tpuray/ray_ports.py: tests/fixtures/upstream-ports.json
(the GKE TPU webhook, xpk, KubeRay, each with repository, commit, path and line) and the
installed Ray itself. tests/test_network_ports_emulated.py adds the ports that the emulated
hosts' processes are seen listening on. The rendered NetworkPolicies are evaluated by
Kubernetes' rules (tests/netpol.py) for every pair of pods of one object: a multi-host slice's
hosts dial each other (libtpu), every worker dials Train rank 0's worker (jax.distributed), the
head and the workers dial each other (Ray).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STACKS, mocked
from tests.netpol import ALL_PORTS, Pod, admits, admitted_ranges
from tpuray import labels
from tpuray.preview.render import manifests

UPSTREAM = json.loads((Path(__file__).parent / "fixtures" / "upstream-ports.json").read_text())
NAMESPACE = "ray"


def ray_object_pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Pod]]:
    """object name -> {"head": pod, "<group>": pod} from the rendered pod templates."""
    out: dict[str, dict[str, Pod]] = {}
    for m in objects:
        if m["kind"] in labels.RAY_KINDS:
            spec = labels.ray_cluster_spec(m)
            pods = {"head": Pod(spec["headGroupSpec"]["template"]["metadata"]["labels"], NAMESPACE)}
            for g in spec["workerGroupSpecs"]:
                pods[g["groupName"]] = Pod(g["template"]["metadata"]["labels"], NAMESPACE)
            out[m["metadata"]["name"]] = pods
    return out


def policies(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in objects if m["kind"] == "NetworkPolicy"]


def unreachable(objects: list[dict[str, Any]], first: int, last: int) -> list[str]:
    """'<object>: <source> -> <target>' for every pair of pods of one object not admitted."""
    nets = policies(objects)
    return [
        f"{name}: {a} -> {b}"
        for name, pods in ray_object_pods(objects).items()
        for a, source in pods.items()
        for b, target in pods.items()
        if not admits(nets, source, target, first, last)
    ]


def upstream_port_ids() -> list[str]:
    return [p["name"] for p in UPSTREAM["ports"]]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("fact", UPSTREAM["ports"], ids=upstream_port_ids())
def test_every_upstream_tpu_and_jax_port_is_admitted_between_the_pods_of_one_ray_object(
    stack: str, fact: dict[str, Any]
) -> None:
    first, last = fact.get("range") or (fact["port"], fact["port"])
    assert unreachable(manifests(mocked(stack)), first, last) == []


@pytest.mark.parametrize("stack", STACKS)
def test_pods_of_one_ray_object_admit_each_other_on_every_port_as_kuberays_own_policy_does(stack: str) -> None:
    objects = manifests(mocked(stack))
    nets = policies(objects)
    for name, pods in ray_object_pods(objects).items():
        for a, source in pods.items():
            for b, target in pods.items():
                assert admitted_ranges(nets, source, target) == [ALL_PORTS], f"{name}: {a} -> {b}"


def test_the_tpu_runtime_port_stays_closed_to_the_pods_of_another_ray_object() -> None:
    objects = manifests(mocked("prod"))
    pods = ray_object_pods(objects)
    serve_worker = pods["tpuray-prod-serve"]["serve-v5litepod-8"]
    train_worker = pods["tpuray-prod-train"]["train-v6e-16"]
    assert not admits(policies(objects), serve_worker, train_worker, 8471)
    assert not admits(policies(objects), serve_worker, train_worker, 8081)


def test_a_pod_outside_every_ray_object_reaches_no_tpu_worker_port() -> None:
    objects = manifests(mocked("dev"))
    worker = ray_object_pods(objects)["tpuray-dev-train"]["train-v6e-16"]
    stranger = Pod({"app": "debug"}, NAMESPACE)
    assert admitted_ranges(policies(objects), stranger, worker) == []


def test_the_installed_ray_gives_multi_slice_workers_the_megascale_port_recorded_from_upstream() -> None:
    from ray._private.accelerators import tpu

    recorded = next(p for p in UPSTREAM["ports"] if p["name"] == "megascale-ray")
    assert int(tpu.DEFAULT_MEGASCALE_PORT) == recorded["port"] == 8081


def test_the_installed_ray_trains_jax_coordinator_port_is_one_the_kernel_picks_from_the_ephemeral_range() -> None:
    import inspect

    from ray._common.network_utils import find_free_port
    from ray.train.v2.jax.config import _JaxBackend

    recorded = next(p for p in UPSTREAM["ports"] if p["name"] == "jax-distributed-coordinator")
    assert recorded["text"] in inspect.getsource(_JaxBackend.on_start)
    low, high = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    port = find_free_port(socket.AF_INET)
    assert low <= port <= high  # bind(port=0): the kernel's net.ipv4.ip_local_port_range
