"""Custom resources against their packaged CRDs: the strict schema, then the CRD's own CEL rules.

These are the API server's admission checks for a custom resource, run before apply:
the openAPIV3Schema (with unknown fields as errors, since the server would prune them
silently) and every `x-kubernetes-validations` rule, evaluated by a CEL library
(tpuray.checks.kcel). The CRDs come from the package (tpuray/data/schemas), so the rules need
no `../shared` folder on a user's machine; a CRD dropped there is covered with no code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.checks import kcel, schemas
from tpuray.policies.core import GKE, MANDATORY, Resource, Rule


def _manifest(res: Resource) -> dict[str, Any] | None:
    """The resource as a manifest, when a packaged CRD covers its apiVersion and kind."""
    _, group_version, kind = res.type.split(":", 2)
    group, _, version = group_version.rpartition("/")
    manifest = {**res.props, "apiVersion": f"{group}/{version}", "kind": kind}
    return manifest if schemas.has_schema(manifest) else None


def _schema(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    manifest = _manifest(res)
    if manifest is None:
        return
    for line in schemas.schema_errors(manifest):
        yield f"{line}; the API server rejects the object, or drops an unknown field silently: fix the field"


def _cel(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    manifest = _manifest(res)
    if manifest is None or schemas.schema_errors(manifest):
        return  # crd-schema reports those; the CEL rules assume a schema-valid object
    for line in kcel.rule_failures(manifest):
        yield f"{line}; the API server rejects the object: change the fields the rule names"


RULES = (
    Rule(
        "crd-schema",
        "Custom resources validate strictly against their CRD schema: declared fields only, right types and values.",
        MANDATORY,
        schemas.type_tokens(),
        _schema,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "crd-validation-rules",
        "Custom resources pass every x-kubernetes-validations CEL rule of their CRD, as the API server evaluates them.",
        MANDATORY,
        schemas.type_tokens(),
        _cel,
        kubernetes=True,
        profile=GKE,
    ),
)
