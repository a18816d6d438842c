"""Validate Kubernetes objects against the openAPIV3Schema of their CRDs (shared/schemas).

Validation is strict, like `kubectl apply --validate=strict`: a field the schema does not
declare is an error rather than being silently pruned by the API server.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from tpuray.shared import shared_path

CRD_FILES = {
    ("ray.io", "RayCluster"): ("kuberay", "ray.io_rayclusters.yaml"),
    ("ray.io", "RayJob"): ("kuberay", "ray.io_rayjobs.yaml"),
    ("ray.io", "RayService"): ("kuberay", "ray.io_rayservices.yaml"),
    ("cloud.google.com", "ComputeClass"): ("gke", "cloud.google.com_computeclasses.yaml"),
}


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def validator(api_version: str, kind: str) -> Draft202012Validator:
    group, _, version = api_version.rpartition("/")
    folder, file_name = CRD_FILES[(group, kind)]
    crd_path: Path = shared_path("schemas", folder, file_name)
    crd = yaml.load(crd_path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    # ObjectMeta is validated by the API server itself, not by the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return Draft202012Validator(_strict(schema))


def has_schema(manifest: dict[str, Any]) -> bool:
    group = str(manifest.get("apiVersion", "")).rpartition("/")[0]
    return (group, manifest.get("kind")) in CRD_FILES


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    """One line per violation: the field path and what is wrong with it."""
    check = validator(manifest["apiVersion"], manifest["kind"])
    lines = []
    for error in sorted(check.iter_errors(manifest), key=lambda e: list(e.absolute_path)):
        field = ".".join(str(p) for p in error.absolute_path) or "(root)"
        lines.append(f"{manifest['kind']}/{manifest.get('metadata', {}).get('name')}: {field}: {error.message}")
    return lines
