"""Plain Kubernetes YAML for `tpuray check`: files or folders, multi-document, checked for shape.

Anything the rules could not read safely is a ManifestError (exit 2) naming the file,
the document and the field, so that a rule never meets a list where it expects a mapping.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tpuray.errors import TpurayError, yaml_problem
from tpuray.policies.analyzer import Target, urn
from tpuray.policies.core import Resource
from tpuray.policies.kube import RAY_KINDS, cluster_spec

SUFFIXES = (".yaml", ".yml")
# libyaml's safe loader when PyYAML was built with it (the wheels are): the same documents as
# yaml.safe_load, a tenth of the time (the pure-Python parser was most of a one-file check).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestError(TpurayError, ValueError):
    """A manifest the rules could not read safely (exit 2)."""


def _files(paths: list[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not found:
                raise ManifestError(f"{raw}: folder holds no .yaml or .yml file")
            yield from found
        elif path.is_file():
            yield path
        else:
            raise ManifestError(f"{raw}: no such file or folder")


def type_token(api_version: str, kind: str) -> str:
    group, _, version = api_version.rpartition("/")
    return f"kubernetes:{group or 'core'}/{version}:{kind}"


_EXPECT = {dict: "a mapping", list: "a list", str: "a string"}


def _expect(obj: Any, path: str, kind: type) -> list[str]:
    if obj is None or isinstance(obj, kind):
        return []
    return [f"{path} is {type(obj).__name__} {str(obj)[:40]!r}, expected {_EXPECT[kind]}"]


def _pod_template_problems(template: Any, path: str) -> list[str]:
    problems = _expect(template, path, dict)
    if problems or template is None:
        return problems
    problems += _expect(template.get("metadata"), f"{path}.metadata", dict)
    problems += _expect((template.get("metadata") or {}).get("annotations"), f"{path}.metadata.annotations", dict)
    spec = template.get("spec")
    problems += _expect(spec, f"{path}.spec", dict)
    if not isinstance(spec, dict):
        return problems
    problems += _expect(spec.get("nodeSelector"), f"{path}.spec.nodeSelector", dict)
    for key in ("containers", "initContainers"):
        problems += _expect(spec.get(key), f"{path}.spec.{key}", list)
        for i, c in enumerate(spec.get(key) or [] if isinstance(spec.get(key), list) else []):
            where = f"{path}.spec.{key}[{i}]"
            problems += _expect(c, where, dict)
            if isinstance(c, dict):
                problems += _expect(c.get("resources"), f"{where}.resources", dict)
                res = c.get("resources") if isinstance(c.get("resources"), dict) else {}
                problems += _expect(res.get("requests"), f"{where}.resources.requests", dict)
                problems += _expect(res.get("limits"), f"{where}.resources.limits", dict)
                problems += _expect(c.get("securityContext"), f"{where}.securityContext", dict)
    return problems


def structure_problems(obj: dict[str, Any]) -> list[str]:
    """Fields the rules read, of the wrong kind. Unknown extra fields are fine."""
    kind = obj["kind"]
    problems = _expect(obj.get("metadata"), "metadata", dict)
    problems += _expect(obj.get("spec"), "spec", dict)
    if problems:
        return problems
    spec = obj.get("spec") or {}
    if kind in RAY_KINDS:
        for key in ("rayClusterSpec", "rayClusterConfig"):
            problems += _expect(spec.get(key), f"spec.{key}", dict)
        if kind == "RayService":
            problems += _expect(spec.get("serveConfigV2"), "spec.serveConfigV2", str)
        if problems:
            return problems
        cluster = cluster_spec(obj)
        if cluster is None:
            return problems
        head = cluster.spec.get("headGroupSpec")
        problems += _expect(head, f"{cluster.path}.headGroupSpec", dict)
        if isinstance(head, dict):
            problems += _pod_template_problems(head.get("template"), f"{cluster.path}.headGroupSpec.template")
        groups = cluster.spec.get("workerGroupSpecs")
        problems += _expect(groups, f"{cluster.path}.workerGroupSpecs", list)
        for i, g in enumerate(groups if isinstance(groups, list) else []):
            where = f"{cluster.path}.workerGroupSpecs[{i}]"
            problems += _expect(g, where, dict)
            if isinstance(g, dict):
                problems += _expect(g.get("labels"), f"{where}.labels", dict)
                problems += _pod_template_problems(g.get("template"), f"{where}.template")
    elif kind == "ComputeClass":
        problems += _expect(spec.get("priorities"), "spec.priorities", list)
        for i, p in enumerate(spec.get("priorities") or [] if isinstance(spec.get("priorities"), list) else []):
            problems += _expect(p, f"spec.priorities[{i}]", dict)
    elif kind == "Service":
        problems += _expect(spec.get("ports"), "spec.ports", list)
    return problems


def _objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"{path}: cannot read ({err})") from None
    try:
        docs = list(yaml.load_all(text, Loader=_LOADER))
    except yaml.YAMLError as err:
        raise ManifestError(f"{path}: not valid YAML{yaml_problem(err)}") from None
    for index, doc in enumerate(docs, 1):
        if doc is None:
            continue
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for item in doc["items"]:
                yield index, item
        else:
            yield index, doc


def load(paths: list[str]) -> list[Target]:
    targets: list[Target] = []
    for path in _files(paths):
        for index, obj in _objects(path):
            where = f"{path}: document {index}"
            if not isinstance(obj, dict):
                raise ManifestError(
                    f"{where} is a {type(obj).__name__}, not a Kubernetes object (apiVersion, kind, metadata)"
                )
            api, kind = obj.get("apiVersion"), obj.get("kind")
            name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
            if not isinstance(api, str) or not api or not isinstance(kind, str) or not kind:
                keys = ", ".join(list(map(str, obj))[:5])
                raise ManifestError(f"{where} has no apiVersion/kind (keys: {keys}); not a Kubernetes object")
            if not isinstance(name, str) or not name:
                raise ManifestError(f"{where} ({kind}) has no metadata.name")
            problems = structure_problems(obj)
            if problems:
                raise ManifestError(f"{where} ({kind}/{name}): " + "; ".join(problems))
            token = type_token(api, kind)
            resource = Resource(token, f"{kind}/{name}", obj, urn("check", token, f"{path}#{index}"))
            targets.append(Target(resource, str(path)))
    return targets
