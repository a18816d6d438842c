"""The IAM permissions the deploy identity needs to create and update what a stack declares.

tpuray/data/deploy_permissions.yaml has one row per Pulumi type token: the permissions Google's
API reference names for the create and update methods, where they are checked (the project,
a bucket, a billing account, a service account) and the API that serves them; plus the deploy workflow's own calls
before `pulumi up` (pushing the images, uploading the app bundle). `needs` turns a stack's
resources into (permission, where) pairs; tests/test_deploy_permissions.py holds the Terraform
foundation's grants to them through Google's role definitions (tpuray/checks/iam_roles.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from tpuray.config import StackConfig
from tpuray.errors import TpurayError
from tpuray.paths import DATA_DIR

TABLE_FILE = DATA_DIR / "deploy_permissions.yaml"
# Where a row's permissions are checked, and the resource input that names the place.
SCOPE_INPUTS = {"bucket": "bucket", "billing account": "billingAccount", "service account": "serviceAccountId"}


@dataclass(frozen=True, order=True)
class Need:
    """One permission the deploy identity needs, where, and for which resource type or step."""

    scope: str  # project, bucket, billing account, repository, service account, KMS key
    where: str  # the project ID, bucket name, billing account ID, repository path, account email or key name
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


def _input(inputs: Mapping[str, Any], path: str) -> str:
    """A resource input by its dotted path (nodeConfig.serviceAccount)."""
    value: Any = inputs
    for part in path.split("."):
        value = value[part]
    return str(value)


def _where(scope: str, inputs: Mapping[str, Any], cfg: StackConfig) -> str:
    if scope == "project":
        return cfg.gcp.project
    where = _input(inputs, SCOPE_INPUTS[scope])
    # A service account is named projects/P/serviceAccounts/EMAIL by IAM members, EMAIL by node pools.
    return where.rsplit("/", 1)[-1] if scope == "service account" else where


def needs(
    resources: Iterable[tuple[str, Mapping[str, Any]]],
    cfg: StackConfig,
    state_bucket: str | None = None,
    secrets_key: str | None = None,
) -> list[Need]:
    """Every permission creating and then updating these (type token, inputs) resources takes,
    and the deploy steps of the stack, sorted and without repeats. `state_bucket` is the bucket of
    the stack's Pulumi backend (gs://BUCKET), `secrets_key` the Cloud KMS key of its secrets
    provider (gcpkms://KEY): neither is in the stack's tpuray config."""
    found: set[Need] = set()
    for type_token, inputs in resources:
        spec = row(type_token)
        if "none" in spec:
            continue
        where = _where(spec["scope"], inputs, cfg)
        for permission in (*spec["create"], *spec["update"]):
            found.add(Need(spec["scope"], where, permission, type_token))
        # Permissions checked on the service account the resource runs as (actAs), not on the project.
        runs_as = spec.get("runs_as")
        if runs_as:
            account = _input(inputs, runs_as["input"]).rsplit("/", 1)[-1]
            for permission in runs_as["permissions"]:
                found.add(Need("service account", account, permission, type_token))
    steps = table()["steps"]
    if cfg.images.repository:
        for permission in steps["push the images"]["permissions"]:
            found.add(Need("repository", cfg.images.repository, permission, "push the images"))
    bundle_bucket = cfg.workloads.bundle_uri.removeprefix("gs://").split("/")[0]
    for permission in steps["upload the app bundle"]["permissions"]:
        found.add(Need("bucket", bundle_bucket, permission, "upload the app bundle"))
    if state_bucket:
        for permission in steps["keep the stack's state"]["permissions"]:
            found.add(Need("bucket", state_bucket, permission, "keep the stack's state"))
    if secrets_key:
        for permission in steps["use the stack's secrets provider"]["permissions"]:
            found.add(Need("KMS key", secrets_key, permission, "use the stack's secrets provider"))
    return sorted(found)
