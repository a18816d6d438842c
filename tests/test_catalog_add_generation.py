"""A TPU generation is one row of tpuray/catalog.py: a made-up one added there alone is a valid
stack generation, and the program places, sizes, labels and schedules its slices from the row."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tpuray import catalog
from tpuray.catalog import Generation, Placement
from tpuray.checks import gke_versions
from tpuray.config import stacks_dir
from tpuray.preview.mockrun import StackRun, run_stack

# A future 3-D generation placed, like TPU7x, by a workload policy.
V8X = Generation(
    "v8x", "tpu-v8x-slice", "v8x", 2, 3, "tpu8x-standard", ("2x2x1", "2x2x2", "2x2x4"), {"2x2x1": 4},
    ("2x2x1", "2x2x2", "2x2x4"), multi_host_placement=Placement.WORKLOAD_POLICY, workload_policy="HIGH_THROUGHPUT",
)  # fmt: skip


@pytest.fixture(scope="module")
def with_v8x() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(catalog.GENERATIONS, "v8x", V8X)
        catalog.all_shapes.cache_clear()
        yield
    catalog.all_shapes.cache_clear()


@pytest.fixture(scope="module")
def v8x_run(with_v8x: None, tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    """The dev stack with its training pool on one v8x 2x2x2 slice."""
    doc = yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text())
    doc["config"]["tpuray:slicePools"][0].update(generation="v8x", topology="2x2x2")
    path: Path = tmp_path_factory.mktemp("v8x") / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(doc))
    return run_stack(str(path))


def test_an_added_generation_has_shapes_from_its_row(with_v8x: None) -> None:
    shape = catalog.lookup("v8x", "2x2x2")
    assert (shape.chips, shape.hosts, shape.chips_per_host, shape.machine_type) == (8, 2, 4, "tpu8x-standard-4t")
    assert (shape.ray_accelerator_type, shape.pod_type, shape.placement) == (
        "TPU-V8X",
        "v8x-16",
        Placement.WORKLOAD_POLICY,
    )
    assert catalog.lookup("v8x", "2x2x1").placement is Placement.SINGLE_HOST


def test_an_added_generation_is_placed_by_its_workload_policy(v8x_run: StackRun) -> None:
    policies = v8x_run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert [p.inputs["workloadPolicy"] for p in policies] == [
        {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x2"}
    ]
    pool = next(r for r in v8x_run.resources if r.name == "v6e-dev-0")
    assert (pool.inputs["nodeConfig"]["machineType"], pool.inputs["initialNodeCount"]) == ("tpu8x-standard-4t", 2)
    assert "tpuTopology" not in pool.inputs["placementPolicy"]


def test_an_added_generation_gets_worker_groups_and_a_compute_class(v8x_run: StackRun) -> None:
    job = next(r for r in v8x_run.resources if r.type == "kubernetes:ray.io/v1:RayJob")
    group = job.inputs["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert (group["numOfHosts"], group["labels"]["tpuray.dev/generation"]) == (2, "v8x")
    selector = group["template"]["spec"]["nodeSelector"]
    assert (selector["cloud.google.com/gke-tpu-accelerator"], selector["cloud.google.com/gke-tpu-topology"]) == (
        "tpu-v8x-slice",
        "2x2x2",
    )
    assert "--accelerator-type TPU-V8X --topology 2x2x2 --hosts-per-slice 2" in job.inputs["spec"]["entrypoint"]


def test_every_generation_feature_has_a_gke_version_floor() -> None:
    features = {g.gke_feature for g in catalog.GENERATIONS.values() if g.gke_feature}
    assert features == {"TPU7x (Ironwood)"} and features <= set(gke_versions.FLOORS)
