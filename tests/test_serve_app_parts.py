"""How the serve-tpu-topology rule reads one Serve application (tpuray/policies/rules_workload.py):
where it finds TPU topologies and accelerator types, and when an application is CPU-only; then
rules_workload's rules (tpu-image, ray-version-pinned, ray-version-consistent, rayjob-deadlines,
serve-tpu-topology, serve-tpu-topology-declared) on
hand-built Ray objects, for the cases the policy fixtures (test_policy_branches.py) do not show:
a later group after one that passes, a built image, an image that is not text, several shapes."""

from __future__ import annotations

from typing import Any

from tpuray.policies.core import Resource
from tpuray.policies.rules_workload import (
    _accelerator_types,
    _allowed,
    _cpu_only,
    _declared_topologies,
    _job_deadlines,
    _ray_version,
    _ray_version_consistent,
    _serve_topology,
    _serve_topology_declared,
    _tpu_image,
)

TOPOLOGY = "ray.io/tpu-topology"


def test_topologies_come_from_args_llm_configs_actor_selectors_and_bundle_selectors_in_that_order() -> None:
    app = {
        "args": {"topology": "4x4", "llm_configs": [{"accelerator_config": {"topology": "2x2"}}, "not a mapping"]},
        "deployments": [
            {
                "ray_actor_options": {"label_selector": {TOPOLOGY: "2x4"}},
                "placement_group_bundle_label_selector": [{TOPOLOGY: "4x8"}, {TOPOLOGY: 8}, {"other": "1x1"}],
            },
            {"placement_group_bundle_label_selector": [{TOPOLOGY: "8x8"}]},
        ],
    }
    assert _declared_topologies(app) == ["4x4", "2x2", "2x4", "4x8", "8x8"]


def test_a_topology_that_is_not_text_or_under_another_label_is_not_declared() -> None:
    app = {
        "args": {"topology": 16, "llm_configs": [{"accelerator_config": {"topology": None}}]},
        "deployments": [{"ray_actor_options": {"label_selector": {"ray.io/accelerator-type": "TPU-V6E"}}}],
    }
    assert _declared_topologies(app) == []


def test_accelerator_types_come_from_args_then_each_llm_config() -> None:
    app = {"args": {"accelerator_type": "TPU-V6E", "llm_configs": [{"accelerator_type": "TPU-V5P"}, {"x": 1}, "y"]}}
    assert _accelerator_types(app) == ["TPU-V6E", "TPU-V5P"]


def test_an_application_with_cpu_actors_only_is_cpu_only() -> None:
    app = {"deployments": [{"ray_actor_options": {"num_cpus": 2, "resources": {"memory_gb": 1}}}]}
    assert _cpu_only(app) is True


def test_an_application_that_says_nothing_of_where_it_runs_is_not_cpu_only() -> None:
    assert _cpu_only({}) is False
    assert _cpu_only({"deployments": [{"name": "a"}]}) is False
    assert _cpu_only({"deployments": [{"ray_actor_options": {"num_cpus": 1}}, {"ray_actor_options": {}}]}) is False


def test_an_application_that_mentions_tpus_anywhere_is_not_cpu_only() -> None:
    cpu = {"ray_actor_options": {"num_cpus": 1}}
    assert _cpu_only({"args": {"accelerator_type": "TPU-V6E"}, "deployments": [cpu]}) is False
    assert _cpu_only({"deployments": [cpu, {"ray_actor_options": {"resources": {"TPU": 4}}}]}) is False
    assert _cpu_only({"deployments": [cpu, {**cpu, "placement_group_bundles": [{"CPU": 1}, {"TPU": 4}]}]}) is False


def test_an_accelerator_type_that_is_not_a_tpu_leaves_a_cpu_application_cpu_only() -> None:
    app = {"args": {"accelerator_type": "A100"}, "deployments": [{"ray_actor_options": {"num_cpus": 1}}]}
    assert _cpu_only(app) is True


def test_an_image_is_allowed_when_a_pattern_matches_it_case_sensitively() -> None:
    config = {"allowedTpuImages": ["us-docker.pkg.dev/acme/*", "vllm/vllm-tpu:v1"]}
    assert [_allowed(i, config) for i in ("us-docker.pkg.dev/acme/ray:1", "vllm/vllm-tpu:v1", "VLLM/vllm-tpu:v1")] == [
        True,
        True,
        False,
    ]
    assert _allowed("vllm/vllm-tpu:v1", {}) is False


def test_a_built_image_by_digest_stands_for_the_tpu_base_its_pod_records() -> None:
    from tpuray.policies.rules_workload import built_base

    built = "us-docker.pkg.dev/acme/ray/ray-tpu@sha256:" + "a" * 64
    base = "tpuray.dev/base-image"
    assert [
        built_base(built, {base: "rayproject/ray:2.60.0-py312-tpu"}),
        built_base(built, {base: "rayproject/ray:2.60.0-py312"}),
        built_base(built, {}),
        built_base("rayproject/ray:2.60.0-py312-tpu", {base: "rayproject/ray:2.60.0-py312-tpu"}),
    ] == ["rayproject/ray:2.60.0-py312-tpu", None, None, None]


# ---------------------------------------------------------------------------- rules on hand-built objects

BUILT = "us-docker.pkg.dev/acme/ray/ray-tpu@sha256:" + "a" * 64
TPU_BASE = {"tpuray.dev/base-image": "rayproject/ray:2.60.0-py312-tpu"}
PIN = {"rayVersion": "2.60.0"}
NO_IMAGE = object()
IMAGE_HINT = (
    "TPU hosts need an image with jax[tpu] and libtpu: use rayproject/ray:<ray version>-py3XX-tpu, this project's "
    "image by digest (REPO/ray-tpu@sha256:...) with its -tpu base in the tpuray.dev/base-image annotation, or add "
    "the image to the allowedTpuImages list of this policy's config"
)
WORKER = "RayCluster/x: spec.workerGroupSpecs[{}] (group {!r}).template.spec.containers[0].image"
SAME_VERSION = "Ray refuses a node whose version differs from the head's: run one Ray version in every group"


def group(
    name: str,
    image: Any,
    accelerator: str = "tpu-v6e-slice",
    topology: str = "2x2",
    chips: int = 4,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One single-host TPU worker group (image NO_IMAGE: the container has none)."""
    container: dict[str, Any] = {"name": "ray-worker", "resources": {"limits": {"google.com/tpu": chips}}}
    if image is not NO_IMAGE:
        container["image"] = image
    selector = {"cloud.google.com/gke-tpu-accelerator": accelerator, "cloud.google.com/gke-tpu-topology": topology}
    template = {
        "metadata": {"annotations": annotations or {}},
        "spec": {"nodeSelector": selector, "containers": [container]},
    }
    return {"groupName": name, "replicas": 1, "numOfHosts": 1, "template": template}


def ray(
    kind: str, workers: list[dict[str, Any]], head_image: Any = "rayproject/ray:2.60.0-py312", **spec: Any
) -> Resource:
    """A RayCluster, RayJob or RayService named x (head_image NO_IMAGE: a head without containers)."""
    head = [] if head_image is NO_IMAGE else [{"name": "ray-head", "image": head_image}]
    cluster = {"headGroupSpec": {"template": {"spec": {"containers": head}}}, "workerGroupSpecs": workers}
    key = {"RayCluster": None, "RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}[kind]
    body = cluster if key is None else {key: cluster, **spec}
    return Resource(f"kubernetes:ray.io/v1:{kind}", "x", {"kind": kind, "metadata": {"name": "x"}, "spec": body})


def test_tpu_image_judges_the_group_after_one_with_a_tpu_image() -> None:
    workers = [group("a", "rayproject/ray:2.60.0-py312-tpu"), group("b", "rayproject/ray:2.60.0-py312")]
    assert list(_tpu_image(ray("RayCluster", workers), {})) == [
        f"{WORKER.format(1, 'b')} is 'rayproject/ray:2.60.0-py312'; {IMAGE_HINT}"
    ]


def test_tpu_image_accepts_a_built_image_by_digest_with_its_tpu_base_annotated() -> None:
    assert list(_tpu_image(ray("RayCluster", [group("a", BUILT, annotations=TPU_BASE)]), {})) == []


def test_tpu_image_judges_the_group_after_one_with_a_built_image() -> None:
    workers = [group("a", BUILT, annotations=TPU_BASE), group("b", "rayproject/ray:2.60.0-py312")]
    assert list(_tpu_image(ray("RayCluster", workers), {})) == [
        f"{WORKER.format(1, 'b')} is 'rayproject/ray:2.60.0-py312'; {IMAGE_HINT}"
    ]


def two_containers(first: str, pod_annotations: dict[str, str]) -> Resource:
    """A RayCluster whose one TPU group runs `first`, then a container without a -tpu image."""
    worker = group("a", first, chips=2, annotations=pod_annotations)
    containers = worker["template"]["spec"]["containers"]
    containers.append({**containers[0], "name": "second", "image": "rayproject/ray:2.60.0-py312"})
    return ray("RayCluster", [worker])


SECOND_CONTAINER = (
    "RayCluster/x: spec.workerGroupSpecs[0] (group 'a').template.spec.containers[1].image is "
    f"'rayproject/ray:2.60.0-py312'; {IMAGE_HINT}"
)


def test_tpu_image_judges_the_container_after_one_with_a_tpu_image_in_the_same_group() -> None:
    assert list(_tpu_image(two_containers("rayproject/ray:2.60.0-py312-tpu", {}), {})) == [SECOND_CONTAINER]


def test_tpu_image_judges_the_container_after_a_built_image_in_the_same_group() -> None:
    assert list(_tpu_image(two_containers(BUILT, TPU_BASE), {})) == [SECOND_CONTAINER]


def test_ray_version_judges_the_workers_after_a_head_without_containers() -> None:
    cluster = ray("RayCluster", [group("a", "rayproject/ray:2.59.0-py312-tpu")], head_image=NO_IMAGE)
    assert list(_ray_version(cluster, PIN)) == [
        f"{WORKER.format(0, 'a')} is 'rayproject/ray:2.59.0-py312-tpu' (Ray 2.59.0); the stack pins Ray 2.60.0: "
        "use rayproject/ray:2.60.0-..."
    ]


def test_ray_version_reads_a_built_image_through_its_tpu_base() -> None:
    assert list(_ray_version(ray("RayCluster", [group("a", BUILT, annotations=TPU_BASE)]), PIN)) == []


def test_ray_version_shows_a_missing_worker_image_as_unset() -> None:
    assert list(_ray_version(ray("RayCluster", [group("a", NO_IMAGE)]), PIN)) == [
        f"{WORKER.format(0, 'a')} is unset, which names no Ray version; the stack pins Ray 2.60.0: "
        "use rayproject/ray:2.60.0-py3XX(-tpu)",
    ]


def test_ray_version_shows_a_worker_image_that_is_not_text_as_written() -> None:
    assert list(_ray_version(ray("RayCluster", [group("a", 5)]), PIN)) == [
        f"{WORKER.format(0, 'a')} is 5, which names no Ray version; the stack pins Ray 2.60.0: "
        "use rayproject/ray:2.60.0-py3XX(-tpu)",
    ]


def test_ray_version_judges_the_workers_after_an_allowed_head_image_without_a_version() -> None:
    cluster = ray("RayCluster", [group("a", "rayproject/ray:2.59.0-py312-tpu")], head_image="vllm/vllm-tpu:v1")
    assert list(_ray_version(cluster, {**PIN, "allowedTpuImages": ["vllm/*"]})) == [
        f"{WORKER.format(0, 'a')} is 'rayproject/ray:2.59.0-py312-tpu' (Ray 2.59.0); the stack pins Ray 2.60.0: "
        "use rayproject/ray:2.60.0-...",
    ]


def test_ray_version_judges_the_worker_after_one_of_the_pinned_version() -> None:
    workers = [group("a", "rayproject/ray:2.60.0-py312-tpu"), group("b", "rayproject/ray:2.59.0-py312-tpu")]
    assert list(_ray_version(ray("RayCluster", workers), PIN)) == [
        f"{WORKER.format(1, 'b')} is 'rayproject/ray:2.59.0-py312-tpu' (Ray 2.59.0); the stack pins Ray 2.60.0: "
        "use rayproject/ray:2.60.0-...",
    ]


def test_ray_version_consistency_compares_the_worker_after_one_of_the_heads_version_with_the_head() -> None:
    workers = [group("a", "rayproject/ray:2.60.0-py312-tpu"), group("b", "rayproject/ray:2.59.0-py312-tpu")]
    assert list(_ray_version_consistent(ray("RayCluster", workers), {})) == [
        f"{WORKER.format(1, 'b')} is 'rayproject/ray:2.59.0-py312-tpu' (Ray 2.59.0) but the head runs "
        f"'rayproject/ray:2.60.0-py312' (Ray 2.60.0); {SAME_VERSION}",
    ]


def test_ray_version_consistency_does_not_judge_an_image_that_names_no_ray_version() -> None:
    # Not known to differ: ray-version-pinned names such an image (a project rule); Ray would only refuse a difference.
    assert list(_ray_version_consistent(ray("RayCluster", [group("a", NO_IMAGE), group("b", 5)]), {})) == []
    vllm_head = ray("RayCluster", [group("a", "rayproject/ray:2.59.0-py312-tpu")], head_image="vllm/vllm-tpu:v1")
    assert list(_ray_version_consistent(vllm_head, {})) == []


def test_ray_version_consistency_has_nothing_to_compare_without_a_head_image_or_a_cluster() -> None:
    no_head = ray("RayCluster", [group("a", "rayproject/ray:2.59.0-py312-tpu")], head_image=NO_IMAGE)
    job = Resource(
        "kubernetes:ray.io/v1:RayJob", "j", {"kind": "RayJob", "spec": {"clusterSelector": {"ray.io/cluster": "c"}}}
    )
    assert [list(_ray_version_consistent(r, {})) for r in (no_head, job)] == [[], []]


def test_a_tpu_job_with_a_one_second_deadline_and_no_retries_passes() -> None:
    job = ray("RayJob", [group("a", "x")], activeDeadlineSeconds=1, backoffLimit=0)
    assert list(_job_deadlines(job, {})) == []


TWO_SHAPES = [group("a", "x", topology="1x1", chips=1), group("b", "x", topology="2x2")]
NEEDS_SERVE_CONFIG = (
    "a RayService on multi-host TPU slices must say which slice topology each application needs: add "
    "serveConfigV2 with the topology per application"
)


def test_a_rayservice_on_two_single_host_shapes_needs_a_serve_config() -> None:
    assert list(_serve_topology(ray("RayService", TWO_SHAPES), {})) == []
    assert list(_serve_topology_declared(ray("RayService", TWO_SHAPES), {})) == [
        f"RayService/x: spec.serveConfigV2 is unset; {NEEDS_SERVE_CONFIG}"
    ]


def test_a_serve_config_that_is_not_text_is_shown_as_written() -> None:
    service = ray("RayService", TWO_SHAPES, serveConfigV2={"applications": []})
    assert list(_serve_topology_declared(service, {})) == [
        f"RayService/x: spec.serveConfigV2 is {{'applications': []}}; {NEEDS_SERVE_CONFIG}"
    ]


def test_an_unnamed_application_is_named_by_its_index_and_the_offered_topologies_are_listed() -> None:
    service = ray("RayService", TWO_SHAPES, serveConfigV2="applications:\n- args: {topology: 4x4}\n")
    assert list(_serve_topology(service, {})) == [
        "RayService/x: spec.serveConfigV2 applications[0] (0) asks TPU topology '4x4' but the cluster's TPU groups "
        "run 1x1, 2x2; no host will ever match and the deployment stays DEPLOYING: use one of those"
    ]


def test_every_accelerator_type_of_an_application_is_judged_after_an_unknown_one() -> None:
    serve = (
        "applications:\n- name: llm\n  args: {accelerator_type: TPU-X, llm_configs: [{accelerator_type: TPU-V4}]}\n"
        "  deployments: [{placement_group_bundle_label_selector: [{ray.io/tpu-topology: 2x2}]}]\n"
    )
    assert list(_serve_topology(ray("RayService", TWO_SHAPES, serveConfigV2=serve), {})) == [
        "RayService/x: spec.serveConfigV2 applications[0] ('llm') accelerator_type is 'TPU-X': unknown Ray "
        "accelerator type 'TPU-X'; valid: TPU-V4, TPU-V5LITEPOD, TPU-V5P, TPU-V6E, TPU-V7X",
        "RayService/x: spec.serveConfigV2 applications[0] ('llm') accelerator_type is 'TPU-V4' but the cluster "
        "runs TPU-V6E: use TPU-V6E",
    ]


def test_a_wrong_accelerator_type_is_told_every_generation_the_cluster_runs() -> None:
    workers = [group("a", "x", topology="1x1", chips=1), group("b", "x", accelerator="tpu-v5-lite-podslice")]
    serve = "applications:\n- name: llm\n  args: {accelerator_type: TPU-V4, topology: 2x2}\n"
    assert list(_serve_topology(ray("RayService", workers, serveConfigV2=serve), {})) == [
        "RayService/x: spec.serveConfigV2 applications[0] ('llm') accelerator_type is 'TPU-V4' but the cluster "
        "runs TPU-V5LITEPOD, TPU-V6E: use TPU-V5LITEPOD, TPU-V6E"
    ]
