"""Validate Kubernetes custom resources against the CRDs shipped in the package (tpuray/data/schemas).

Every `*.yaml` file under tpuray/data/schemas/<source>/ is read as one or more
CustomResourceDefinitions (multi-document files are fine), so a new CRD is supported by
dropping its file and a PROVENANCE.md beside it: nothing here names a group or a kind.
The files are the upstream CRDs copied verbatim (each folder's PROVENANCE.md gives repo,
tag, path, licence and sha256); tests prove they are byte-identical to `../shared/schemas`.

Validation is strict, like `kubectl apply --validate=strict`: a field the schema does not
declare is an error, because the API server would prune it silently. The CRDs' own
`x-kubernetes-validations` CEL rules are evaluated by tpuray.checks.kcel on the same object.

Parsing 3.5 MB of CRD YAML takes about 1.3 s, so each file's parsed form is cached as JSON
under the user cache folder, keyed by the file's sha256 (a stale cache can never be used).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from tpuray.checks.unknown import UNKNOWN
from tpuray.paths import DATA_DIR

SCHEMA_DIR = DATA_DIR / "schemas"


@dataclass(frozen=True)
class Crd:
    group: str
    kind: str
    versions: tuple[str, ...]  # served versions
    path: Path  # the file it came from
    index: int  # which document of that file


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tpuray" / "crds"


@cache
def _documents(path: Path) -> tuple[dict[str, Any], ...]:
    raw = path.read_bytes()
    cached = _cache_dir() / f"{hashlib.sha256(raw).hexdigest()}.json"
    try:
        return tuple(json.loads(cached.read_text()))
    except (OSError, ValueError):
        pass
    try:
        parsed = list(yaml.load_all(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.constructor.ConstructorError:
        # Seen only under pytest-cov with celpy loaded: libyaml's loader then leaves every node
        # untagged. The pure-Python loader reads the same file correctly, only slower.
        parsed = list(yaml.load_all(raw, Loader=yaml.SafeLoader))
    docs = [d for d in parsed if isinstance(d, dict)]
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(docs))
        tmp.replace(cached)
    except OSError:
        pass  # a read-only home only costs the parse next time
    return tuple(docs)


def schema_files() -> list[Path]:
    return sorted(SCHEMA_DIR.glob("*/*.yaml"))


@cache
def crds() -> dict[tuple[str, str], Crd]:
    """(group, kind) -> the packaged CRD that defines it."""
    found: dict[tuple[str, str], Crd] = {}
    for path in schema_files():
        for i, doc in enumerate(_documents(path)):
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            served = tuple(v["name"] for v in spec["versions"] if v.get("served", True))
            found[(spec["group"], spec["names"]["kind"])] = Crd(spec["group"], spec["names"]["kind"], served, path, i)
    return found


def type_tokens() -> tuple[str, ...]:
    """The Pulumi type token of every served version of every packaged CRD."""
    return tuple(f"kubernetes:{c.group}/{v}:{c.kind}" for c in crds().values() for v in c.versions)


def _group_version(manifest: dict[str, Any]) -> tuple[str, str]:
    group, _, version = str(manifest.get("apiVersion", "")).rpartition("/")
    return group, version


def has_schema(manifest: dict[str, Any]) -> bool:
    group, version = _group_version(manifest)
    crd = crds().get((group, str(manifest.get("kind"))))
    return crd is not None and version in crd.versions


@cache
def openapi_schema(api_version: str, kind: str) -> dict[str, Any]:
    """The served version's openAPIV3Schema, as the CRD declares it (shared: do not mutate)."""
    group, _, version = api_version.rpartition("/")
    crd = crds()[(group, kind)]
    doc = _documents(crd.path)[crd.index]
    (served,) = [v for v in doc["spec"]["versions"] if v["name"] == version]
    schema = copy.deepcopy(served["schema"]["openAPIV3Schema"])
    # ObjectMeta is validated by the API server itself, not by the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return schema


# The API server matches `pattern` with Go's RE2, which takes inline flags anywhere (Kueue's
# `^(?i)[a-z]...`); Python's re wants global flags first.
_LATE_FLAGS = re.compile(r"^\^\((\?[a-z]+)\)")


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items() if k != "x-kubernetes-validations"}
        if isinstance(out.get("pattern"), str):
            out["pattern"] = _LATE_FLAGS.sub(lambda m: f"({m.group(1)})^", out["pattern"])
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
    return Draft202012Validator(_strict(openapi_schema(api_version, kind)))


def _defaulted_null(value: Any, schema: dict[str, Any] | None) -> bool:
    """A null the API server replaces with the field's default."""
    return value is None and isinstance(schema, dict) and "default" in schema and not schema.get("nullable")


def with_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """The value as the API server validates it: schema defaults applied.

    A default fills an absent field of a present object, and replaces a null for a field
    that is not `nullable: true` (Kubernetes CRD docs, "Defaulting and Nullable":
    https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#defaulting-and-nullable).
    A null with no default stays and fails its type: the real API server rejected
    `ports: null` in a container with "must be of type array" (tests/test_control_plane.py).
    """
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if isinstance(props, dict):
            out = {k: v for k, v in value.items() if not _defaulted_null(v, props.get(k))}
            for key, sub in props.items():
                if key not in out and "default" in sub:
                    out[key] = copy.deepcopy(sub["default"])
                if key in out:
                    out[key] = with_defaults(out[key], sub)
            return out
        if isinstance(extra, dict):
            return {
                k: with_defaults(copy.deepcopy(extra["default"]) if _defaulted_null(v, extra) else v, extra)
                for k, v in value.items()
            }
        return dict(value)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [with_defaults(v, schema["items"]) for v in value]
    return value


def name_of(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata")
    return f"{manifest.get('kind')}/{meta.get('name') if isinstance(meta, dict) else None}"


# The API server's check of a custom resource's metadata.name: a DNS-1123 subdomain
# (k8s.io/apimachinery validation.IsDNS1123Subdomain; its message, as kube-apiserver
# v1.34 returned it in tests/test_control_plane.py, is quoted below).
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _name_errors(manifest: dict[str, Any]) -> list[str]:
    meta = manifest.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or (len(name) <= 253 and _DNS1123_SUBDOMAIN.match(name)):
        return []
    return [
        f"{name_of(manifest)}: metadata.name: {name!r} is not a lowercase RFC 1123 subdomain (at most 253 "
        "characters of lower case alphanumerics, '-' or '.', starting and ending with an alphanumeric)"
    ]


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    """One line per violation: the field path and what is wrong with it.

    Schema defaults are applied first, as the API server does (a required field with a
    default is never missing). A value unknown during preview (an output of another
    resource) is not judged.
    """
    check = validator(manifest["apiVersion"], manifest["kind"])
    obj = with_defaults(manifest, openapi_schema(manifest["apiVersion"], manifest["kind"]))
    lines = _name_errors(manifest)
    for error in sorted(check.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]):
        if error.instance is UNKNOWN:
            continue
        field = ".".join(str(p) for p in error.absolute_path) or "(root)"
        lines.append(f"{name_of(manifest)}: {field}: {error.message}")
    return lines
