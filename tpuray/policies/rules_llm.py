"""Ray Serve LLM applications run on an image that carries vLLM.

`ray.serve.llm` imports vLLM (or SGLang) when the application is built: on an image without it,
`import ray.serve.llm` raises "Neither vLLM nor SGLang is installed" (Ray 2.60; seen here, where
neither is installed) and the RayService never leaves DEPLOYING. The rayproject/ray `-tpu` images
do not carry vLLM's TPU build; this project's serve-llm image does (images/serve-llm/Dockerfile,
pinned in tpuray/images.py VLLM_TPU_PACKAGES). Ray builds the application in a task that asks for
no CPU (`@ray.remote(num_cpus=0)` on build_serve_application, ray/serve/_private/application_state.py
in Ray 2.60), so it may land on any node, the head's num-cpus 0 included: every group's Ray
container must carry vLLM.

`pulumi up` refuses a stack whose serve-llm image has no digest yet (infra/components/workloads.py),
and until then a preview shows the `-tpu` base in its place, with the pod template annotation
labels.IMAGE_PENDING naming the image it stands for. Under a stack's preview (`pendingBuildsRefusedAtUp`,
set in policies/policy-config.<env>.json and by tpuray.policies.evaluate.check_stack) such a
stand-in passes; in plain manifests (`tpuray check`, `kubectl apply` of `tpuray render`) it runs
as it is, so it is refused.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator
from typing import Any

from tpuray import labels
from tpuray.desired.llm_stack import OPENAI_APP_IMPORT_PATH
from tpuray.policies.core import GKE, MANDATORY, Resource, Rule
from tpuray.policies.kube import RAY_TYPES, as_dict, cluster_spec, groups, serve_applications, show

SERVE_LLM_MODULE = OPENAI_APP_IMPORT_PATH.split(":")[0]  # ray.serve.llm
# This project's serve-llm build in Artifact Registry, by digest (tpuray/images.py image_for).
_SERVE_LLM_IMAGE = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev/[^/@\s]+/[^/@\s]+/serve-llm@sha256:[0-9a-f]{64}$")


def _llm_applications(raw: Any) -> list[tuple[int, str, str]]:
    """(index, name, import_path) of each serveConfigV2 application built by ray.serve.llm."""
    found = []
    for i, app in enumerate(serve_applications(raw)):
        path = app.get("import_path")
        if isinstance(path, str) and path.strip().split(":")[0] == SERVE_LLM_MODULE:
            found.append((i, str(app.get("name", i)), path.strip()))
    return found


def _carries_vllm(image: Any, annotations: dict[str, Any], config: dict[str, Any]) -> bool:
    if not isinstance(image, str):
        return False
    if _SERVE_LLM_IMAGE.match(image) or any(fnmatch.fnmatchcase(image, str(p)) for p in config.get("vllmImages", [])):
        return True
    return bool(config.get("pendingBuildsRefusedAtUp")) and annotations.get(labels.IMAGE_PENDING) == "serve-llm"


def _vllm_image(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    apps = _llm_applications(as_dict(res.props.get("spec")).get("serveConfigV2"))
    cluster = cluster_spec(res.props)
    if not apps or cluster is None:
        return
    i, name, path = apps[0]
    for g in groups(cluster):
        image = g.containers[0].get("image") if g.containers else None
        if _carries_vllm(image, g.annotations, config):
            continue
        yield (
            f"{res.label}: {g.where}.template.spec.containers[0].image is {show(image)}, but serveConfigV2 "
            f"applications[{i}] ({name!r}) is built by {path}, which imports vLLM and fails at import without it: "
            "use this project's serve-llm image by digest (REPO/serve-llm@sha256:...) or an image that carries "
            "vLLM's TPU build, listed in this policy's vllmImages"
        )


RULES = (
    Rule(
        "serve-llm-vllm-image",
        "Ray Serve LLM applications run where every Ray container carries vLLM: the serve-llm image by digest, or "
        "a listed vLLM image.",
        MANDATORY,
        RAY_TYPES,
        _vllm_image,
        kubernetes=True,
        config={
            "vllmImages": {"type": "array", "items": {"type": "string"}, "default": []},
            "pendingBuildsRefusedAtUp": {"type": "boolean", "default": False},
        },
        profile=GKE,
    ),
)
