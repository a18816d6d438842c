"""Ray's own autoscaler v2 with Ray's own KubeRay provider (Ray 2.60.0), run by the pod runner as
the head pod's autoscaler sidecar the operator wrote, scaling a TPU worker group through the local
API server (issue 33, item 4; docs/testing.md "The joint substrate").

The cluster is prod's training RayCluster spec (tpuray-prod-train's rayClusterSpec: in-tree
autoscaling, autoscaler v2, the sidecar's projected `autoscaler-api-token`) as rendered: a chain,
so every TPU group starts at replicas 0 and Ray's provider is what adds a slice. Stock: one spot v6e 4x4 slice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import mocked

from tests.control_plane import CRD_FILES, require_tools, tools_missing
from tests.substrate import JointSubstrate, apply_stack, require_namespaces
from tpuray import capacity, catalog
from tpuray.local.substrate import nodes
from tpuray.preview.render import manifests

pytestmark = [pytest.mark.controlplane, pytest.mark.slow]

NS = "ray"
CLUSTER = "substrate-prod-train"
GROUP = "train-v6e-16"
# Four bundles of one host's chips, one per host, selected by the group's own labels: the
# whole-slice demand (issue 33, item 5). The labels make Ray's scheduler pick the v6e group alone.
WHOLE_SLICE = (
    'python -c "import ray; from ray.util.placement_group import placement_group; ray.init(); '
    "pg = placement_group([{'TPU': 4}] * 4, strategy='STRICT_SPREAD', "
    "bundle_label_selector=[{'tpuray.dev/generation': 'v6e'}] * 4); ray.get(pg.ready(), timeout=600); "
    "print('granted', sorted(n['Labels'].get('ray.io/tpu-slice-name', '') for n in ray.nodes() "
    "if n['Alive'] and n['Resources'].get('TPU')))\""
)


# Half a v5e 4x4 slice: two bundles of one host's chips on the fallback group.
HALF_SLICE = (
    'python -c "import ray; from ray.util.placement_group import placement_group; ray.init(); '
    "pg = placement_group([{'TPU': 4}] * 2, strategy='STRICT_SPREAD', "
    "bundle_label_selector=[{'tpuray.dev/generation': 'v5e'}] * 2); ray.get(pg.ready(), timeout=600)\""
)


@pytest.fixture(scope="module")
def substrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JointSubstrate]:
    require_tools(tools_missing())
    require_namespaces()
    joint = JointSubstrate.start(CRD_FILES, tmp_path_factory.mktemp("substrate"))
    try:
        joint.add_nodes([nodes.SlicePool("v6e-train", catalog.lookup("v6e", "4x4"), capacity.SPOT, 1)], system=True)
        objects = manifests(mocked("prod"))
        apply_stack(joint, objects, NS)
        job = next(o for o in objects if o["kind"] == "RayJob")
        spec = job["spec"]["rayClusterSpec"]  # every TPU group at replicas 0, as a chain renders it
        assert [g["replicas"] for g in spec["workerGroupSpecs"]] == [0, 0]
        joint.plane.apply({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                           "metadata": {"name": CLUSTER, "namespace": NS}, "spec": spec})  # fmt: skip
        joint.start_loop()
        yield joint
    finally:
        joint.stop()


def _cluster(joint: JointSubstrate) -> dict[str, Any]:
    url = f"{joint.plane.url}/apis/ray.io/v1/namespaces/{NS}/rayclusters/{CLUSTER}"
    return joint.kube.session.get(url, timeout=10).json()


def _replicas(joint: JointSubstrate) -> dict[str, int]:
    return {g["groupName"]: g.get("replicas", 0) for g in _cluster(joint)["spec"]["workerGroupSpecs"]}


def test_the_cluster_is_ready_with_its_head_alone_when_every_tpu_group_starts_at_zero(
    substrate: JointSubstrate,
) -> None:
    substrate.wait("RayCluster ready", lambda: _cluster(substrate)["status"].get("state") == "ready", 300)
    assert [p["metadata"]["labels"]["ray.io/group"] for p in substrate.pods(NS, f"ray.io/cluster={CLUSTER}")] == [
        "headgroup"
    ]


def _autoscaler_log(joint: JointSubstrate) -> str:
    head = next(r for r in joint.runner.pods.values() if "-head-" in r.name and r.name.startswith(CLUSTER))
    return (head.dir / "autoscaler.log").read_text()


def test_a_demand_for_fewer_hosts_than_a_slice_patches_no_replica(substrate: JointSubstrate) -> None:
    """The issue's first finding, shown by Ray's own code: autoscaler v2 asks for 2 hosts of the
    4-host group, and Ray's KubeRay provider turns that into 2 // 4 = 0 replicas."""
    substrate.wait("RayCluster ready", lambda: _cluster(substrate)["status"].get("state") == "ready", 300)
    service = f"{CLUSTER}-head-svc"
    submitted = substrate.wait(
        "the job submitted",
        lambda: substrate.dashboard(service, NS, "/api/jobs/", json={"entrypoint": HALF_SLICE}).json(),
        60,
    )
    substrate.wait(
        "the autoscaler's decision",
        lambda: "Adding 2 node(s) of type train-v5litepod-16" in _autoscaler_log(substrate),
        180,
    )
    time.sleep(20)  # four more autoscaler rounds, and the operator's reconcile
    assert _replicas(substrate) == {"train-v6e-16": 0, "train-v5litepod-16": 0}
    assert substrate.pods(NS, f"ray.io/cluster={CLUSTER},ray.io/group=train-v5litepod-16") == []
    substrate.dashboard(service, NS, f"/api/jobs/{submitted['submission_id']}/stop", json={})


def test_rays_kuberay_provider_adds_a_whole_slice_for_a_whole_slice_demand(substrate: JointSubstrate) -> None:
    substrate.wait("RayCluster ready", lambda: _cluster(substrate)["status"].get("state") == "ready", 300)
    service = f"{CLUSTER}-head-svc"
    submitted = substrate.wait(
        "the job submitted",
        lambda: substrate.dashboard(service, NS, "/api/jobs/", json={"entrypoint": WHOLE_SLICE}).json(),
        60,
    )
    job_id = submitted["submission_id"]
    t0 = time.monotonic()
    status = substrate.wait(
        "the job finished",
        lambda: (
            (s := substrate.dashboard(service, NS, f"/api/jobs/{job_id}").json())["status"]
            in ("SUCCEEDED", "FAILED", "STOPPED")
            and s
        ),
        600,
    )
    logs = substrate.dashboard(service, NS, f"/api/jobs/{job_id}/logs").json()["logs"]
    assert status["status"] == "SUCCEEDED", logs[-2000:]
    print(f"\nwhole-slice demand granted in {time.monotonic() - t0:.1f} s")
    assert "granted ['train-v6e-16-0', 'train-v6e-16-0', 'train-v6e-16-0', 'train-v6e-16-0']" in logs
    assert _replicas(substrate) == {"train-v6e-16": 1, "train-v5litepod-16": 0}  # Ray's KubeRay provider's patch
    workers = substrate.pods(NS, f"ray.io/cluster={CLUSTER},ray.io/group={GROUP}")
    assert sorted(p["spec"]["nodeName"] for p in workers) == [f"gke-v6e-train-v6e-16-spot-0-{h}" for h in range(4)]
