"""The joint substrate (issue 33, tests/substrate.py): the real API server and KubeRay operator,
with emulated GKE nodes, the scheduler step, the TPU webhook stand-in and the pod runner around
them, running real Ray in the pods the operator creates.

The cluster under test is dev's training RayCluster spec (tpuray-dev-train's rayClusterSpec: a
head and one v6e 4x4 replica of 4 hosts), applied as a RayCluster so that no job is submitted.
Without the Go-built tools these tests skip, except under CI=true, where that is a failure; they
need root for the pods' namespaces (as tests/test_read_only_root.py) and skip without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from conftest import mocked

from tests.control_plane import CRD_FILES, require_tools, tools_missing
from tests.substrate import JointSubstrate, apply_stack, require_namespaces
from tpuray import capacity, catalog
from tpuray.local.substrate import nodes, scheduler
from tpuray.preview.render import manifests

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

NS = "ray"
CLUSTER = "substrate-dev-train"
GROUP = "train-v6e-16"
V6E_4X4 = catalog.lookup("v6e", "4x4")


@pytest.fixture(scope="module")
def substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JointSubstrate]:
    require_tools(tools_missing())
    require_namespaces()
    joint = JointSubstrate.start(CRD_FILES, tmp_path_factory.mktemp("substrate"))
    try:
        # dev's class: spot then on-demand v6e 4x4. Spot has one slice, on-demand none.
        joint.add_nodes([nodes.SlicePool("v6e-dev", V6E_4X4, capacity.SPOT, 1)], system=True)
        apply_stack(joint, manifests(mocked("dev")), NS)
        job = next(o for o in manifests(mocked("dev")) if o["kind"] == "RayJob")
        joint.plane.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                           "metadata": {"name": CLUSTER, "namespace": NS}, "spec": job["spec"]["rayClusterSpec"]})  # fmt: skip
        joint.start_loop()
        yield joint
    finally:
        joint.stop()


def _workers(joint: JointSubstrate) -> list[dict[str, Any]]:
    return joint.pods(NS, f"ray.io/cluster={CLUSTER},ray.io/group={GROUP}")


def _env(pod: dict[str, Any], name: str) -> str | None:
    return next((e.get("value") for e in pod["spec"]["containers"][0].get("env", []) if e["name"] == name), None)


def _only_if(items: list[Any], count: int) -> list[Any] | None:
    return items if len(items) == count else None


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("reason") == "Unschedulable" for c in pod["status"].get("conditions", []))


def _bound_workers(joint: JointSubstrate) -> list[dict[str, Any]]:
    pods = joint.wait(
        "4 bound worker pods", lambda: _only_if([p for p in _workers(joint) if p["spec"].get("nodeName")], 4), 120
    )
    return sorted(pods, key=lambda p: int(_env(p, "TPU_WORKER_ID") or 0))


def test_the_webhook_stand_in_indexes_the_hosts_of_the_replica_at_admission(substrate: JointSubstrate) -> None:
    pods = _bound_workers(substrate)
    assert [(p["metadata"]["labels"]["replicaIndex"], _env(p, "TPU_WORKER_ID"), _env(p, "TPU_NAME")) for p in pods] == [
        ("train-v6e-16-0", str(h), "train-v6e-16-0") for h in range(4)
    ]
    assert _env(pods[2], "TPU_WORKER_HOSTNAMES") == ",".join(
        f"train-v6e-16-0-{h}.substrate-dev-train-headless" for h in range(4)
    )
    assert [(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods] == [
        (f"train-v6e-16-0-{h}", "substrate-dev-train-headless") for h in range(4)
    ]


def test_the_scheduler_binds_host_i_of_the_replica_to_node_i_of_the_spot_slice(substrate: JointSubstrate) -> None:
    pods = _bound_workers(substrate)
    assert [p["spec"]["nodeName"] for p in pods] == [f"gke-v6e-dev-v6e-16-spot-0-{h}" for h in range(4)]
    head = substrate.pods(NS, f"ray.io/cluster={CLUSTER},ray.io/node-type=head")
    assert [p["spec"]["nodeName"] for p in head] == ["gke-ray-system-0"]


def _ray_nodes(joint: JointSubstrate) -> list[dict[str, Any]]:
    got = joint.dashboard(f"{CLUSTER}-head-svc", NS, "/nodes?view=summary").json()
    return [n for n in got["data"]["summary"] if n["raylet"]["state"] == "ALIVE"]


def test_the_pods_run_ray_and_the_operator_reports_the_cluster_ready(substrate: JointSubstrate) -> None:
    state = substrate.wait(
        "RayCluster ready",
        lambda: (
            substrate.kube.session.get(
                f"{substrate.plane.url}/apis/ray.io/v1/namespaces/{NS}/rayclusters/{CLUSTER}", timeout=10
            )
            .json()["status"]
            .get("state")
            == "ready"
        ),
        300,
    )
    assert state is True
    alive = substrate.wait("5 alive Ray nodes", lambda: _only_if(_ray_nodes(substrate), 5), 120)
    labels = sorted(
        (n["raylet"]["labels"].get("ray.io/node-group", ""), n["raylet"]["labels"].get("ray.io/tpu-slice-name", ""),
         n["raylet"]["labels"].get("ray.io/tpu-worker-id", ""))
        for n in alive
    )  # fmt: skip
    assert labels == [("headgroup", "", ""), *[(GROUP, "train-v6e-16-0", str(h)) for h in range(4)]]


def test_a_preempted_slice_loses_its_pods_and_the_operators_new_pods_wait_for_capacity(
    substrate: JointSubstrate,
) -> None:
    pods = _bound_workers(substrate)
    before = {p["metadata"]["name"] for p in pods}
    raylets = [p for p in psutil.process_iter(["name", "environ"]) if p.info["name"] == "raylet"]
    ours = [p for p in raylets if (p.info["environ"] or {}).get("TPU_NAME") == "train-v6e-16-0"]
    assert len(ours) == 4
    scheduler.preempt(substrate.kube, "v6e-dev-v6e-16-spot-0", grace_s=5)
    substrate.wait("the preempted hosts' raylets gone", lambda: not any(p.is_running() for p in ours), 60)
    stuck = substrate.wait(
        "4 new unschedulable pods",
        lambda: _only_if([p for p in _workers(substrate) if p["metadata"]["name"] not in before and _unschedulable(p)], 4),
        120,
    )  # fmt: skip
    assert {p["spec"].get("nodeName") for p in stuck} == {None}
    substrate.add_nodes([nodes.SlicePool("v6e-dev", V6E_4X4, capacity.ON_DEMAND, 1)])
    substrate.wait(
        "the new replica on the on-demand slice",
        lambda: (
            sorted(p["spec"].get("nodeName", "") for p in _workers(substrate))
            == [f"gke-v6e-dev-v6e-16-on-demand-0-{h}" for h in range(4)]
        ),
        120,
    )
