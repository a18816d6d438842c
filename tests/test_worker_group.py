"""The one worker-group model (tpuray/desired/worker_group.py): every group the program renders and
every group of the official samples reads back through it and writes out unchanged, and what the
readers ask of a group comes from its fields."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import STACKS, mocked
from tpuray import catalog, labels
from tpuray.desired.worker_group import WorkerGroup, of_object, pod_groups, pod_shape
from tpuray.shared import shared_path


def _rendered_groups() -> list[tuple[str, dict]]:
    out = []
    for stack in STACKS:
        for resource in mocked(stack).kubernetes_objects():
            manifest = resource.manifest()
            if manifest.get("kind") in labels.RAY_KINDS:
                spec = labels.ray_cluster_spec(manifest)
                for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
                    out.append((f"{stack}/{manifest['metadata']['name']}/{group.get('groupName', 'head')}", group))
    return out


def _sample_groups() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(Path(shared_path("conformance")).rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in labels.RAY_KINDS:
                spec = labels.ray_cluster_spec(doc)
                for group in [spec.get("headGroupSpec"), *(spec.get("workerGroupSpecs") or [])]:
                    if isinstance(group, dict):
                        out.append((f"{path.name}/{group.get('groupName', 'head')}", group))
    return out


def test_every_stack_renders_groups_and_the_samples_hold_groups_to_round_trip() -> None:
    # dev, staging and prod render a RayJob and a RayService (prod: two TPU groups each).
    assert len(_rendered_groups()) >= 12
    assert len(_sample_groups()) >= 30


@pytest.mark.parametrize("where,group", _rendered_groups(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_rendered_group_round_trips_through_the_model(where: str, group: dict) -> None:
    assert WorkerGroup.from_manifest(group).to_manifest() == group


@pytest.mark.parametrize("where,group", _sample_groups(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_conformance_sample_group_round_trips_through_the_model(where: str, group: dict) -> None:
    assert WorkerGroup.from_manifest(group).to_manifest() == group


def test_the_model_of_a_rendered_tpu_group_names_its_shape_pool_and_slices() -> None:
    rayjob = next(r.manifest() for r in mocked("prod").kubernetes_objects() if r.inputs.get("kind") == "RayJob")
    first, fallback = of_object(rayjob)
    assert (first.name, first.pool, first.compute_class) == ("train-v6e-16", "v6e-train", "v6e-train")
    assert first.shape == catalog.lookup("v6e", "4x4")
    assert (first.start_slices, first.most_slices, first.hosts, first.chips_per_host) == (0, 2, 4, 4)
    assert (fallback.name, fallback.shape, fallback.start_slices) == (
        "train-v5litepod-16",
        catalog.lookup("v5e", "4x4"),
        0,
    )


def test_the_head_group_reads_through_the_same_model_without_a_name_or_replicas() -> None:
    rayjob = next(r.manifest() for r in mocked("dev").kubernetes_objects() if r.inputs.get("kind") == "RayJob")
    head = pod_groups(rayjob)[0]
    assert (head.name, head.replicas, head.shape, head.is_tpu) == ("", None, None, False)
    assert head.ray_start_params is not None and head.ray_start_params["num-cpus"] == "0"


def test_a_tpu_group_built_from_the_catalog_selects_its_shape_and_asks_for_its_chips() -> None:
    group = WorkerGroup.tpu(
        name="train-v6e-16",
        pool="v6e-train",
        shape=catalog.lookup("v6e", "4x4"),
        compute_class="v6e-train",
        tolerations=[],
        replicas=1,
        max_replicas=2,
        image="rayproject/ray:2.60.0-py312-tpu",
        service_account="ray-worker",
    )
    manifest = group.to_manifest()
    assert manifest["numOfHosts"] == 4
    assert manifest["labels"] == {
        "tpuray.dev/slice-pool": "v6e-train",
        "tpuray.dev/generation": "v6e",
        "tpuray.dev/tpu-pod-type": "v6e-16",
    }
    pod = manifest["template"]["spec"]
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        "cloud.google.com/compute-class": "v6e-train",
    }
    assert pod["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"


def test_unset_replica_counts_stay_unset_and_kuberay_defaults_apply() -> None:
    group = WorkerGroup.from_manifest({"groupName": "tpu", "rayStartParams": {}, "template": {}})
    assert (group.replicas, group.max_replicas, group.num_of_hosts) == (None, None, None)
    assert (group.start_slices, group.hosts) == (1, 1)
    assert group.desired_slices(autoscaling=True) == 2147483647
    assert group.to_manifest() == {"groupName": "tpu", "rayStartParams": {}}


def test_a_suspended_group_runs_no_slice_and_replicas_are_clamped_to_min_and_max() -> None:
    assert WorkerGroup.from_manifest({"replicas": 3, "maxReplicas": 2}).desired_slices(False) == 2
    assert WorkerGroup.from_manifest({"replicas": 0, "minReplicas": 1}).desired_slices(False) == 1
    assert WorkerGroup.from_manifest({"replicas": 2, "suspend": True}).desired_slices(True) == 0


def test_the_subslice_annotation_wins_over_the_topology_selector() -> None:
    template = {
        "metadata": {"annotations": {"cloud.google.com/gke-tpu-slice-topology": "2x2"}},
        "spec": {
            "nodeSelector": {
                "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                "cloud.google.com/gke-tpu-topology": "4x4",
            },
            "containers": [{"resources": {"limits": {"google.com/tpu": "4"}}}],
        },
    }
    assert pod_shape(template) == catalog.lookup("v6e", "2x2")


def test_an_emulated_slice_belongs_to_the_group_whose_name_and_replica_index_it_carries() -> None:
    group = WorkerGroup(name="train-v6e-16")
    assert group.owns_slice("train-v6e-16-0") and group.owns_slice("train-v6e-16-12")
    assert not group.owns_slice("train-v6e-16-x") and not group.owns_slice("serve-v6e-16-0")
    assert group.slice_name(1) == "train-v6e-16-1"
