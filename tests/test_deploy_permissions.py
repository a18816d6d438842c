"""The deploy identity may create and update everything the committed stacks declare.

Three sources, none of them typed into this test: what each stack declares (its resources
under the mock engine, as `tpuray preview STACK --json` lists them), what each resource type
needs (tpuray/data/deploy_permissions.yaml: the permissions Google's API reference names, with
the page), and what the Terraform foundation grants tpuray-deploy (terraform/, read by
tests/foundation_model.py), expanded into permissions by Google's published role definitions
(tpuray/data/iam_roles.json, from iann0036/iam-dataset at a named commit).

Before this check the deploy account held container.admin, compute.admin,
iam.serviceAccountAdmin and iam.serviceAccountUser on the project, so `pulumi up` could not
create the dashboard and alert policies, the prod budget (a billing-account permission) or
the workloads' bucket bindings, nor upload the app bundle; and the Budget API was not enabled.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, mocked
from tests.foundation_model import ENVS, MODULES, Grant, blocks, deploy_grants, enabled_services, foundation
from tpuray.checks import deploy_permissions, iam_roles
from tpuray.checks.deploy_permissions import Need, UnlistedType
from tpuray.checks.iam_roles import UnknownRole
from tpuray.config.checks import load_stack

PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"


def _resources(env: str) -> list[tuple[str, dict]]:
    return [(r.type, r.inputs) for r in mocked(env).resources]


def _bucket_projects() -> dict[str, str]:
    """Bucket -> the project it lives in, for every bucket a foundation creates."""
    return {bucket: foundation(env).project for env in ENVS for bucket in foundation(env).buckets}


def _permissions_at(grants: tuple[Grant, ...], need: Need) -> set[str]:
    """What the deploy account may do where `need` is checked: grants there, and on the project
    that holds it (a project role covers the project's buckets, repositories and service accounts)."""
    places = {(need.scope, need.where)}
    if need.scope == "bucket" and need.where in _bucket_projects():
        places.add(("project", _bucket_projects()[need.where]))
    if need.scope == "repository":
        places.add(("project", need.where.split("/")[1]))
    if need.scope == "KMS key":
        places.add(("project", need.where.split("/")[1]))
    if need.scope == "service account":
        places.add(("project", need.where.split("@")[1].removesuffix(".iam.gserviceaccount.com")))
    roles = {
        g.role for g in grants if (g.scope, g.where) in places and (g.condition is None or need.because == PROJECT_IAM)
    }
    return set().union(*(iam_roles.permissions(role) for role in roles))


def _backend(env: str) -> tuple[str, str]:
    """The stack's Pulumi state bucket (its foundation's pulumi_state_bucket) and secrets key
    (the stack file's secretsprovider: gcpkms://KEY)."""
    doc = yaml.safe_load((REPO / "stacks" / f"Pulumi.{env}.yaml").read_text())
    bucket = foundation(env).root.var("pulumi_state_bucket")
    return bucket, doc["secretsprovider"].removeprefix("gcpkms://")


def missing_lines(env: str, grants: tuple[Grant, ...]) -> list[str]:
    cfg = load_stack(env)
    return [
        f"{env}: {need.line()}: no role the foundation grants tpuray-deploy there has it"
        for need in deploy_permissions.needs(_resources(env), cfg, *_backend(env))
        if need.permission not in _permissions_at(grants, need)
    ]


def test_every_resource_type_the_stacks_declare_has_a_row_in_the_permission_table() -> None:
    # A type added to the program fails here until its create and update permissions are listed.
    unlisted = sorted({t for env in ENVS for t, _ in _resources(env)} - set(deploy_permissions.table()["types"]))
    assert unlisted == []


def test_a_type_without_a_row_is_refused_naming_what_to_add() -> None:
    with pytest.raises(UnlistedType) as err:
        deploy_permissions.needs([("gcp:pubsub/topic:Topic", {})], load_stack("dev"))
    assert err.value.args[0] == (
        "gcp:pubsub/topic:Topic has no row in deploy_permissions.yaml: list its create and update permissions"
    )


def test_every_row_that_needs_permissions_cites_a_google_cloud_page() -> None:
    rows = {**deploy_permissions.table()["types"], **deploy_permissions.table()["steps"]}
    uncited = [name for name, row in rows.items() if "none" not in row and
               not re.match(r"https://cloud\.google\.com/", row.get("source", ""))]  # fmt: skip
    assert uncited == []


@pytest.mark.parametrize("env", ENVS)
def test_the_deploy_account_holds_every_permission_its_stack_needs(env: str) -> None:
    assert missing_lines(env, deploy_grants(env)) == []


@pytest.mark.parametrize("env", ENVS)
def test_the_foundation_enables_every_api_its_stack_calls(env: str) -> None:
    types = {t for t, _ in _resources(env)}
    assert sorted(deploy_permissions.services(types) - set(enabled_services(env))) == []


@pytest.mark.parametrize("env", ENVS)
def test_the_condition_on_project_iam_admits_every_role_the_stack_grants(env: str) -> None:
    # The deploy account sets project IAM only under tpuray-node-roles-only (modules/ci-identity).
    grantable = blocks(MODULES / "ci-identity", "variable")["grantable_roles"]["default"][0]
    granted = {inputs["role"] for t, inputs in _resources(env) if t == PROJECT_IAM}
    assert granted and granted <= set(grantable)
    assert [g.condition for g in deploy_grants(env) if g.role == "roles/resourcemanager.projectIamAdmin"] == [
        "tpuray-node-roles-only"
    ]


def test_the_grants_before_this_check_miss_monitoring_billing_and_the_buckets() -> None:
    before = tuple(
        g
        for g in deploy_grants("prod")
        if g.scope in ("project", "repository") and not g.role.startswith("roles/monitoring.")
    ) + tuple(
        g
        for g in deploy_grants("prod")
        if g.scope in ("service account", "KMS key") or g.where == "acme-ml-prod-pulumi-state"
    )
    assert missing_lines("prod", before) == [
        "prod: gcp:billing/budget:Budget needs billing.budgets.create on billing account 01A2B3-C4D5E6-F7A8B9: "
        "no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:billing/budget:Budget needs billing.budgets.get on billing account 01A2B3-C4D5E6-F7A8B9: "
        "no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:billing/budget:Budget needs billing.budgets.update on billing account 01A2B3-C4D5E6-F7A8B9: "
        "no role the foundation grants tpuray-deploy there has it",
        "prod: upload the app bundle needs storage.objects.create on bucket acme-ml-prod-bundles: "
        "no role the foundation grants tpuray-deploy there has it",
        "prod: upload the app bundle needs storage.objects.get on bucket acme-ml-prod-bundles: "
        "no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:storage/bucketIAMMember:BucketIAMMember needs storage.buckets.getIamPolicy on bucket "
        "acme-ml-prod-data: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:storage/bucketIAMMember:BucketIAMMember needs storage.buckets.setIamPolicy on bucket "
        "acme-ml-prod-data: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:storage/bucketIAMMember:BucketIAMMember needs storage.buckets.getIamPolicy on bucket "
        "acme-ml-prod-models: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:storage/bucketIAMMember:BucketIAMMember needs storage.buckets.setIamPolicy on bucket "
        "acme-ml-prod-models: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:storage/bucketIAMMember:BucketIAMMember needs storage.buckets.getIamPolicy on bucket "
        "acme-ml-prod-ray: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:storage/bucketIAMMember:BucketIAMMember needs storage.buckets.setIamPolicy on bucket "
        "acme-ml-prod-ray: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:monitoring/alertPolicy:AlertPolicy needs monitoring.alertPolicies.create on project "
        "acme-ml-prod: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:monitoring/alertPolicy:AlertPolicy needs monitoring.alertPolicies.get on project "
        "acme-ml-prod: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:monitoring/alertPolicy:AlertPolicy needs monitoring.alertPolicies.update on project "
        "acme-ml-prod: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:monitoring/dashboard:Dashboard needs monitoring.dashboards.create on project "
        "acme-ml-prod: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:monitoring/dashboard:Dashboard needs monitoring.dashboards.get on project "
        "acme-ml-prod: no role the foundation grants tpuray-deploy there has it",
        "prod: gcp:monitoring/dashboard:Dashboard needs monitoring.dashboards.update on project "
        "acme-ml-prod: no role the foundation grants tpuray-deploy there has it",
    ]


def test_the_budget_api_missing_from_the_project_is_named() -> None:
    types = {t for t, _ in _resources("prod")}
    before = set(enabled_services("prod")) - {"billingbudgets.googleapis.com", "monitoring.googleapis.com"}
    assert sorted(deploy_permissions.services(types) - before) == [
        "billingbudgets.googleapis.com",
        "monitoring.googleapis.com",
    ]


def test_a_project_role_covers_the_buckets_of_that_project_only() -> None:
    admin = Grant("project", "acme-ml-dev", "roles/storage.admin", None, "test")
    need = Need(
        "bucket", "acme-ml-dev-ray", "storage.buckets.setIamPolicy", "gcp:storage/bucketIAMMember:BucketIAMMember"
    )
    assert "storage.buckets.setIamPolicy" in _permissions_at((admin,), need)
    elsewhere = dataclasses.replace(need, where="acme-ml-prod-ray")
    assert "storage.buckets.setIamPolicy" not in _permissions_at((admin,), elsewhere)


def test_the_role_definitions_name_their_source_commit_and_dates() -> None:
    head = {k: v for k, v in iam_roles.snapshot().items() if k != "roles"}
    assert head == {
        "source": "https://github.com/iann0036/iam-dataset",
        "files": "gcp/roles/<role>.json: `gcloud iam roles describe <role>` for every predefined role",
        "commit": "2073fa52ac008a45477aa0b1b4580cd99135bf60",
        "commit_date": "2026-08-22",
        "retrieved": "2026-12-02",
        "refresh": "python -m tpuray.checks.iam_roles PATH_TO_IAM_DATASET [--add ROLE] (tpuray/checks/iam_roles.py)",
    }


def test_every_role_the_foundation_grants_the_deploy_account_is_in_the_role_data() -> None:
    roles = {g.role for env in ENVS for g in deploy_grants(env)}
    assert sorted(roles - set(iam_roles.snapshot()["roles"])) == []
    assert iam_roles.permissions("roles/monitoring.alertPolicyEditor") >= {"monitoring.alertPolicies.create"}


def test_a_role_outside_the_stored_slice_is_refused_naming_the_refresh() -> None:
    with pytest.raises(UnknownRole) as err:
        iam_roles.permissions("roles/pubsub.editor")
    assert err.value.args[0] == (
        "roles/pubsub.editor is not in iam_roles.json; add it: python -m tpuray.checks.iam_roles DATASET --add roles/pubsub.editor"
    )


DASHBOARD_EDITOR = {
    "name": "roles/monitoring.dashboardEditor",
    "title": "Monitoring Dashboard Configuration Editor",
    "stage": "GA",
    "etag": "AA==",
    "includedPermissions": ["monitoring.dashboards.create"],
}


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, str]:
    """A one-role clone of iam-dataset committed on 2026-08-22, and its commit."""
    roles_dir = tmp_path / "iam-dataset" / "gcp" / "roles"
    roles_dir.mkdir(parents=True)
    (roles_dir / "monitoring.dashboardEditor.json").write_text(json.dumps(DASHBOARD_EDITOR))
    repo = roles_dir.parent.parent
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    env = {
        "GIT_COMMITTER_DATE": "2026-08-22T15:00:00Z",
        "GIT_AUTHOR_DATE": "2026-08-22T15:00:00Z",
        "PATH": "/usr/bin:/bin",
    }
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "roles"]):
        subprocess.run([*git, *args], check=True, env=env)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, commit


def test_refresh_reads_the_roles_and_the_commit_from_a_checkout_of_the_dataset(dataset: tuple[Path, str]) -> None:
    repo, commit = dataset
    content = iam_roles.refresh(repo, ["roles/monitoring.dashboardEditor"], dt.date(2026, 12, 2))
    assert (content["commit"], content["commit_date"], content["retrieved"]) == (commit, "2026-08-22", "2026-12-02")
    assert content["roles"] == {
        "roles/monitoring.dashboardEditor": {
            "title": "Monitoring Dashboard Configuration Editor",
            "stage": "GA",
            "includedPermissions": ["monitoring.dashboards.create"],
        }
    }


def test_the_refresh_command_rewrites_the_file_for_its_roles_and_the_added_ones(
    dataset: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, commit = dataset
    stored = tmp_path / "iam_roles.json"
    stored.write_text(json.dumps({"roles": {}}))
    monkeypatch.setattr(iam_roles, "ROLES_FILE", stored)
    iam_roles.snapshot.cache_clear()
    try:
        assert iam_roles.main([str(repo), "--add", "roles/monitoring.dashboardEditor"]) == 0
    finally:
        iam_roles.snapshot.cache_clear()
    written = json.loads(stored.read_text())
    assert (written["commit"], list(written["roles"])) == (commit, ["roles/monitoring.dashboardEditor"])
    assert (
        capsys.readouterr().out
        == f"{stored}: 1 roles from https://github.com/iann0036/iam-dataset at {commit[:12]} (2026-08-22)\n"
    )
