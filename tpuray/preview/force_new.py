"""Which changed inputs make the Google provider replace a resource: the one home of that answer.

The answers are data, read from the provider's own Go source by tools/provider_force_new.py
into tpuray/data/provider_force_new.yaml (repository, commit, and file:line of each schema
field; docs/seams.md says how to refresh it). For every input the program sets it says whether
the schema marks it ForceNew, and what kind of field it is, because the Terraform SDK applies
ForceNew differently by kind (terraform-plugin-sdk helper/schema/schema.go, diffList/diffMap):
- a scalar, a map or a list of primitives: any change replaces the resource;
- a block (a list of nested objects; Pulumi shows a one-item block as an object): adding or
  removing it replaces, a change inside it is judged by the changed field's own answer;
- an Optional+Computed field left out of the config keeps its prior value: removing it from
  the program changes nothing (so moving a pool from initial_node_count to node_count is no
  replacement).
`tpuray diff` (tpuray/preview/diff.py) marks exactly these changes as replacing; tests/test_force_new.py
fails when a config key a user changes routinely maps to one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import yaml

from tpuray.paths import DATA_DIR

DATA = DATA_DIR / "provider_force_new.yaml"
_INDEX = re.compile(r"\[\d+\]")
_YAML_LINE = re.compile(r" \(line \d+\)$")  # tpuray/preview/diff.py's per-line changes of embedded YAML


@dataclass(frozen=True)
class Field:
    path: str  # the Pulumi input path, without list indices
    schema: str  # the provider's schema path
    kind: str  # scalar | map | list | block
    force_new: bool
    at: str  # file:line in the provider's source
    computed: bool = False


@functools.cache
def document() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(DATA.read_text())
    return doc


@functools.cache
def fields(type_: str) -> dict[str, Field]:
    """The recorded inputs of one Pulumi resource type (empty: a type the data does not cover)."""
    raw = document()["resources"].get(type_, {}).get("inputs", {})
    return {
        path: Field(path, e["schema"], e["kind"], e["forceNew"], e["at"], e.get("computed", False))
        for path, e in raw.items()
    }


def covers(type_: str) -> bool:
    return type_ in document()["resources"]


def normalize(path: str) -> str:
    """nodeConfig.taints[0].key -> nodeConfig.taints.key (and no '(line n)' suffix)."""
    return _INDEX.sub("", _YAML_LINE.sub("", path))


def known_prefixes(type_: str, path: str) -> list[tuple[str, Field]]:
    """The recorded fields along `path` (with indices), outermost first, each with the part of
    `path` that reaches it. A map's keys may contain dots: only recorded prefixes count."""
    table = fields(type_)
    out = []
    for m in re.finditer(r"\.|\[|$", path):
        instance = path[: m.start()]
        field = table.get(normalize(instance))
        if field is not None and (not out or out[-1][0] != instance):
            out.append((instance, field))
    return out


def field_of(type_: str, path: str) -> Field | None:
    """The recorded field that answers for a changed path: the deepest one along it."""
    found = known_prefixes(type_, path)
    return found[-1][1] if found else None


_ABSENT = object()


def _value(doc: Any, instance: str) -> Any:
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", instance):
        if part.startswith("["):
            i = int(part[1:-1])
            doc = doc[i] if isinstance(doc, list) and i < len(doc) else _ABSENT
        else:
            doc = doc.get(part, _ABSENT) if isinstance(doc, dict) else _ABSENT
        if doc is _ABSENT:
            return _ABSENT
    return doc


def _count(doc: dict[str, Any], instance: str) -> int:
    value = _value(doc, instance)
    if value is _ABSENT or value is None:
        return 0
    return len(value) if isinstance(value, list) else 1


def replaces(type_: str, old: dict[str, Any], new: dict[str, Any], path: str) -> Field | None:
    """The field whose ForceNew makes the change at `path` (between the inputs `old` and `new`)
    replace the resource, or None when the provider updates it in place (or the data does not
    know the field: tests/test_force_new.py keeps every input the program sets recorded)."""
    along = known_prefixes(type_, path)
    if not along:
        return None
    instance, deepest = along[-1]
    absent = _value(new, instance) in (_ABSENT, None)
    if deepest.kind != "block" and deepest.force_new and not (absent and deepest.computed):
        return deepest
    for instance, field in along:
        if field.kind == "block" and field.force_new and _count(old, instance) != _count(new, instance):
            if not (_count(new, instance) == 0 and field.computed):
                return field
    return None
