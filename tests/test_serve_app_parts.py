"""How the serve-tpu-topology rule reads one Serve application (tpuray/policies/rules_workload.py):
where it finds TPU topologies and accelerator types, and when an application is CPU-only.
The rule's messages on whole RayServices are in the policy fixtures (test_policy_branches.py)."""

from __future__ import annotations

from tpuray.policies.rules_workload import _accelerator_types, _allowed, _cpu_only, _declared_topologies

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
