"""Secrets: no Hugging Face token in plain text in a rendered object.

A token in a RayService's serveConfigV2 (runtime_env env_vars), a container env value or a
ConfigMap lands in Pulumi state, `kubectl get -o yaml` and every preview diff. The llm backend
gets its token from Secret Manager instead (tpuray:workloads.serve.hfTokenSecret, mounted as a
file by the GKE Secret Manager add-on: docs/apps.md); the stack check refuses one in stack
config before any object is rendered (tpuray/llm_stack.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.hf_token import plaintext_token_paths
from tpuray.policies.core import MANDATORY, Resource, Rule
from tpuray.policies.kube import RAY_TYPES

CONFIG_MAP_TYPE = "kubernetes:core/v1:ConfigMap"


def _no_plaintext_token(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for path in plaintext_token_paths(res.props):
        yield (
            f"{res.label}: {path} holds a Hugging Face token in plain text; keep it in Secret Manager and set "
            "tpuray:workloads.serve.hfTokenSecret (mounted as a file, read through HF_TOKEN_PATH)"
        )


RULES = (
    Rule(
        "hf-token-not-plaintext",
        "No Hugging Face token in plain text in a Ray object or ConfigMap (Secret Manager only).",
        MANDATORY,
        (*RAY_TYPES, CONFIG_MAP_TYPE),
        _no_plaintext_token,
        kubernetes=True,
    ),
)
