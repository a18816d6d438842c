"""The bucket of the app bundles: the code every Ray pod runs (issue 36, item 3).

Before: the bundle lived in the checkpoint bucket, where the training pods' account held
object user (it could replace any bundle), the deploy account held Legacy Bucket Owner (object
delete, so overwrite), and CI uploaded with `--no-clobber` and deployed whatever the
content-addressed name held. Ray's runtime_env downloads and unpacks a gs:// working_dir with no
integrity check. Now the bundles have their own bucket: the deploy account may only add objects
and read them (Cloud Storage needs storage.objects.delete to overwrite one), the workloads'
accounts only read, a retention policy holds every object, and the deploy step reads the name
back and compares its sha256 with the bundle it built (tests/test_workflows.py).

The choice (docs/apps.md, "Delivery"): a write-once bucket plus the deploy-time check, rather
than baking ray_apps into the image by digest.
"""

from __future__ import annotations

import pytest

from tests.conftest import mocked
from tests.foundation_model import (
    DEPLOY,
    ENVS,
    MODULES,
    PREVIEW,
    _one,
    blocks,
    foundation,
    grants,
    instances,
    resources,
)
from tpuray.checks import iam_roles
from tpuray.config.checks import load_stack

BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"


def _bundle_bucket(env: str) -> str:
    return load_stack(env).workloads.bundle_uri.removeprefix("gs://").split("/")[0]


@pytest.mark.parametrize("env", ENVS)
def test_each_stack_uploads_its_bundles_to_the_foundations_bundle_bucket(env: str) -> None:
    assert _bundle_bucket(env) == f"acme-ml-{env}-bundles"
    assert foundation(env).bundle_bucket == f"acme-ml-{env}-bundles"
    (bucket,) = instances(foundation(env).root.module("buckets"), "google_storage_bucket", "bundles", "name")
    assert bucket == {"name": f"acme-ml-{env}-bundles"}


def test_the_bundle_bucket_holds_every_object_for_thirty_days() -> None:
    body = resources(MODULES / "buckets", "google_storage_bucket")["bundles"]
    assert {k: _one(v) for k, v in _one(body["retention_policy"]).items()} == {
        "retention_period": "${var.bundle_retention_days * 86400}",
        "is_locked": "${var.bundle_retention_locked}",
    }
    variables = blocks(MODULES / "buckets", "variable")
    assert (
        _one(variables["bundle_retention_days"]["default"]),
        _one(variables["bundle_retention_locked"]["default"]),
    ) == (
        30,
        False,
    )


@pytest.mark.parametrize("env", ENVS)
def test_the_deploy_account_may_add_bundles_and_read_them_but_never_overwrite_one(env: str) -> None:
    bucket = _bundle_bucket(env)
    roles = sorted(g.role for g in grants(env, DEPLOY) if g.where == bucket)
    assert roles == ["roles/storage.objectCreator", "roles/storage.objectViewer"]
    held = set().union(*(iam_roles.permissions(r) for r in roles))
    assert {"storage.objects.create", "storage.objects.get"} <= held
    assert sorted(p for p in held if p.endswith((".delete", ".update", ".setIamPolicy"))) == []
    assert [g for g in grants(env, PREVIEW) if g.where == bucket] == []


@pytest.mark.parametrize("env", ENVS)
def test_the_workloads_accounts_only_read_the_bundle_bucket(env: str) -> None:
    ci = foundation(env).root.module("ci_identity")
    readers = instances(ci, "google_storage_bucket_iam_member", "workloads_read_bundles", "bucket", "role", "member")
    assert readers == [
        {
            "bucket": f"acme-ml-{env}-bundles",
            "role": "roles/storage.objectViewer",
            "member": f"serviceAccount:tpuray-{env}-{suffix}@acme-ml-{env}.iam.gserviceaccount.com",
        }
        for suffix in ("ray", "serve")
    ]
    # The stack binds nothing on it, so the deploy account needs no IAM admin there.
    assert [
        r.inputs["role"] for r in mocked(env).of_type(BUCKET_GRANT) if r.inputs["bucket"] == _bundle_bucket(env)
    ] == []
