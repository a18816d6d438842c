"""The IAM permissions the deploy identity needs to create and update what a stack declares.

tpuray/data/deploy_permissions.yaml has one row per Pulumi type token: the permissions Google's
API reference names for the create and update methods, where they are checked (the project,
a bucket, a billing account) and the API that serves them; plus the deploy workflow's own calls
before `pulumi up` (pushing the images, uploading the app bundle). `needs` turns a stack's
resources into (permission, where) pairs; tests/test_deploy_permissions.py holds the Terraform
foundation's grants to them through Google's role definitions (tpuray/iam_roles.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tpuray.config import StackConfig
from tpuray.errors import TpurayError

TABLE_FILE = Path(__file__).resolve().parent / "data" / "deploy_permissions.yaml"
# Where a row's permissions are checked, and the resource input that names the place.
SCOPE_INPUTS = {"bucket": "bucket", "billing account": "billingAccount"}


@dataclass(frozen=True, order=True)
class Need:
    """One permission the deploy identity needs, where, and for which resource type or step."""

    scope: str  # project, bucket, billing account, repository
    where: str  # the project ID, bucket name, billing account ID or repository path
    permission: str
    because: str  # the type token, or the deploy step

    def line(self) -> str:
        return f"{self.because} needs {self.permission} on {self.scope} {self.where}"


class UnlistedType(TpurayError):
    """A resource type with no row in deploy_permissions.yaml."""


@cache
def table() -> dict[str, Any]:
    return yaml.safe_load(TABLE_FILE.read_text())


def row(type_token: str) -> dict[str, Any]:
    rows = table()["types"]
    if type_token not in rows:
        raise UnlistedType(f"{type_token} has no row in {TABLE_FILE.name}: list its create and update permissions")
    return rows[type_token]


def services(type_tokens: Iterable[str]) -> set[str]:
    """The APIs the resources of these types and the deploy steps call."""
    used = {row(t).get("service") for t in type_tokens} | {s["service"] for s in table()["steps"].values()}
    return {s for s in used if s}


def _where(scope: str, inputs: Mapping[str, Any], cfg: StackConfig) -> str:
    if scope == "project":
        return cfg.gcp.project
    return str(inputs[SCOPE_INPUTS[scope]])


def needs(resources: Iterable[tuple[str, Mapping[str, Any]]], cfg: StackConfig) -> list[Need]:
    """Every permission creating and then updating these (type token, inputs) resources takes,
    and the deploy steps of the stack, sorted and without repeats."""
    found: set[Need] = set()
    for type_token, inputs in resources:
        spec = row(type_token)
        if "none" in spec:
            continue
        where = _where(spec["scope"], inputs, cfg)
        for permission in (*spec["create"], *spec["update"]):
            found.add(Need(spec["scope"], where, permission, type_token))
    steps = table()["steps"]
    if cfg.images.repository:
        for permission in steps["push the images"]["permissions"]:
            found.add(Need("repository", cfg.images.repository, permission, "push the images"))
    bundle_bucket = cfg.workloads.bundle_uri.removeprefix("gs://").split("/")[0]
    for permission in steps["upload the app bundle"]["permissions"]:
        found.add(Need("bucket", bundle_bucket, permission, "upload the app bundle"))
    return sorted(found)
