"""serve-llm-vllm-image on its own: what counts as an image that carries vLLM (tpuray/policies/rules_llm.py).

The rule's fixtures (tests/fixtures/policies/make_fixtures.py) cover the rendered cases; these
cover the policy config (vllmImages, pendingBuildsRefusedAtUp) and a group with no image at all.
"""

from __future__ import annotations

import copy

import yaml

from tests.fixtures.policies.make_fixtures import GOOD, IMAGE
from tpuray.policies.core import Resource
from tpuray.policies.rules_llm import RULES

(RULE,) = RULES
VLLM_IMAGE = "vllm/vllm-tpu:v0.29.0"


def findings(obj: dict, **config: object) -> list[str]:
    res = Resource("kubernetes:ray.io/v1:RayService", "serve", obj)
    return list(RULE.resource_check(res, {"vllmImages": [], "pendingBuildsRefusedAtUp": False, **config}))


def on_image(image: str | None, annotations: dict[str, str] | None = None) -> dict:
    obj = copy.deepcopy(GOOD["rayservice"])
    cluster = obj["spec"]["rayClusterConfig"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        container = group["template"]["spec"]["containers"][0]
        container.pop("image")
        if image is not None:
            container["image"] = image
        group["template"]["metadata"] = {"annotations": annotations or {}}
    return obj


def test_an_image_the_policy_config_lists_as_carrying_vllm_passes() -> None:
    assert findings(on_image(VLLM_IMAGE), vllmImages=["vllm/vllm-tpu:*"]) == []


def test_the_same_image_unlisted_is_refused_in_every_group() -> None:
    assert [f.split(".template")[0] for f in findings(on_image(VLLM_IMAGE))] == [
        "RayService/serve: spec.rayClusterConfig.headGroupSpec",
        "RayService/serve: spec.rayClusterConfig.workerGroupSpecs[0] (group 'tpu')",
    ]


def test_a_base_standing_in_for_serve_llm_passes_only_where_pulumi_up_refuses_it() -> None:
    pending = on_image(IMAGE, {"tpuray.dev/image-pending": "serve-llm"})
    assert findings(pending, pendingBuildsRefusedAtUp=True) == []
    assert len(findings(pending)) == 2


def test_a_base_standing_in_for_ray_tpu_is_no_serve_llm_build() -> None:
    assert len(findings(on_image(IMAGE, {"tpuray.dev/image-pending": "ray-tpu"}), pendingBuildsRefusedAtUp=True)) == 2


def test_a_group_without_an_image_is_named_with_none() -> None:
    (head, _) = findings(on_image(None))
    assert head.startswith(
        "RayService/serve: spec.rayClusterConfig.headGroupSpec.template.spec.containers[0].image is unset, but "
        "serveConfigV2 applications[0] ('llm') is built by ray.serve.llm:build_openai_app"
    )


def test_a_serve_app_that_is_not_ray_serve_llm_needs_no_vllm() -> None:
    obj = on_image(IMAGE)
    obj["spec"]["serveConfigV2"] = yaml.safe_dump(
        {"applications": [{"name": "m", "import_path": "ray_apps.serve:app"}]}
    )
    assert findings(obj) == []
