"""One service account per role, no automounted API token, Google identities only where GCS is read
(issue 36, item 4), on the rendered objects. tests/test_control_plane.py asks the real API
server what each account may do once the KubeRay operator has bound its autoscaler Role."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import STACKS, mocked
from tpuray import labels
from tpuray.preview.mockrun import StackRun
from tpuray.preview.render import manifests

WI_BINDING = "gcp:serviceaccount/iAMMember:IAMMember"
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def templates(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """'head', '<group>' and (RayJob) 'submitter' -> pod template spec."""
    spec = labels.ray_cluster_spec(obj)
    out = {"head": spec["headGroupSpec"]["template"]["spec"]}
    out |= {g["groupName"]: g["template"]["spec"] for g in spec["workerGroupSpecs"]}
    if obj["kind"] == "RayJob":
        out["submitter"] = obj["spec"]["submitterPodTemplate"]["spec"]
    return out


def ray_objects(stack: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in manifests(mocked(stack)) if m["kind"] in labels.RAY_KINDS}


def test_each_role_of_prod_runs_as_its_own_service_account() -> None:
    accounts = {
        f"{name}/{pod}": t["serviceAccountName"]
        for name, obj in ray_objects("prod").items()
        for pod, t in templates(obj).items()
    }
    assert accounts == {
        "tpuray-prod-train/head": "ray-head",
        "tpuray-prod-train/train-v6e-16": "ray-worker",
        "tpuray-prod-train/train-v5litepod-16": "ray-worker",
        "tpuray-prod-train/submitter": "ray-submitter",
        "tpuray-prod-serve/head": "ray-serve-head",
        "tpuray-prod-serve/serve-v5litepod-8": "ray-serve",
    }


def test_the_interactive_cluster_of_staging_runs_as_the_training_roles() -> None:
    cluster = ray_objects("staging")["tpuray-staging-interactive"]
    assert {pod: t["serviceAccountName"] for pod, t in templates(cluster).items()} == {
        "head": "ray-head",
        "interactive-v6e-4": "ray-worker",
    }


@pytest.mark.parametrize("stack", STACKS)
def test_no_pod_template_and_no_service_account_automounts_an_api_token(stack: str) -> None:
    objs = manifests(mocked(stack))
    mounting = [
        f"{name}/{pod}"
        for name, obj in ray_objects(stack).items()
        for pod, t in templates(obj).items()
        if t.get("automountServiceAccountToken") is not False
    ]
    accounts = {
        m["metadata"]["name"]: m.get("automountServiceAccountToken") for m in objs if m["kind"] == "ServiceAccount"
    }
    assert mounting == []
    assert set(accounts.values()) == {False}


def test_only_the_autoscaler_sidecar_of_the_autoscaling_head_mounts_the_api_token() -> None:
    job = ray_objects("prod")["tpuray-prod-train"]
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is True
    head = cluster["headGroupSpec"]["template"]["spec"]
    (volume,) = [v for v in head["volumes"] if "projected" in v]
    assert volume == {
        "name": "autoscaler-api-token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ]
        },
    }
    assert {"name": "autoscaler-api-token", "mountPath": TOKEN_DIR, "readOnly": True} in cluster["autoscalerOptions"][
        "volumeMounts"
    ]
    ray_head = head["containers"][0]
    assert [m["mountPath"] for m in ray_head["volumeMounts"] if m["name"] == "autoscaler-api-token"] == []


def test_a_head_without_autoscaling_carries_no_api_token_volume() -> None:
    service = ray_objects("prod")["tpuray-prod-serve"]
    cluster = service["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is False
    assert [v["name"] for v in cluster["headGroupSpec"]["template"]["spec"]["volumes"] if "projected" in v] == []


def wi_members(run: StackRun) -> list[str]:
    return sorted(r.inputs["member"] for r in run.of_type(WI_BINDING))


def test_workload_identity_binds_each_gsa_to_exactly_the_kubernetes_accounts_of_its_roles() -> None:
    run = mocked("prod")
    # The GSAs are the Terraform foundation's (the stack creates none): the bindings name them.
    assert run.of_type("gcp:serviceaccount/account:Account") == []
    assert sorted({r.inputs["serviceAccountId"] for r in run.of_type(WI_BINDING)}) == [
        "projects/acme-ml-prod/serviceAccounts/tpuray-prod-ray@acme-ml-prod.iam.gserviceaccount.com",
        "projects/acme-ml-prod/serviceAccounts/tpuray-prod-serve@acme-ml-prod.iam.gserviceaccount.com",
    ]
    assert wi_members(run) == [
        "serviceAccount:acme-ml-prod.svc.id.goog[ray/ray-head]",
        "serviceAccount:acme-ml-prod.svc.id.goog[ray/ray-serve-head]",
        "serviceAccount:acme-ml-prod.svc.id.goog[ray/ray-serve]",
        "serviceAccount:acme-ml-prod.svc.id.goog[ray/ray-worker]",
    ]
    annotations = {
        r.inputs["metadata"]["name"]: r.inputs["metadata"].get("annotations", {}).get("iam.gke.io/gcp-service-account")
        for r in run.kubernetes_objects()
        if r.inputs["kind"] == "ServiceAccount"
    }
    assert annotations == {
        "ray-head": "tpuray-prod-ray@acme-ml-prod.iam.gserviceaccount.com",
        "ray-worker": "tpuray-prod-ray@acme-ml-prod.iam.gserviceaccount.com",
        "ray-submitter": None,
        "ray-serve-head": "tpuray-prod-serve@acme-ml-prod.iam.gserviceaccount.com",
        "ray-serve": "tpuray-prod-serve@acme-ml-prod.iam.gserviceaccount.com",
    }


def test_each_gsa_holds_only_the_bucket_roles_its_pods_use() -> None:
    grants = sorted(
        (r.inputs["member"].split(":")[1].split("@")[0], r.inputs["bucket"], r.inputs["role"])
        for r in mocked("prod").of_type(BUCKET_GRANT)
    )
    assert grants == [
        ("tpuray-prod-ray", "acme-ml-prod-data", "roles/storage.objectViewer"),
        ("tpuray-prod-ray", "acme-ml-prod-ray", "roles/storage.objectUser"),
        ("tpuray-prod-serve", "acme-ml-prod-models", "roles/storage.objectViewer"),
    ]
    # The bundle bucket's read grant is the foundation's (tests/test_bundle_bucket.py).


def test_a_serve_only_stack_declares_no_training_identity(tmp_path) -> None:
    import yaml

    from tpuray.config import stacks_dir
    from tpuray.preview.mockrun import run_stack

    doc = yaml.safe_load((stacks_dir() / "Pulumi.prod.yaml").read_text())
    doc["config"]["tpuray:workloads"].pop("train")
    path = tmp_path / "Pulumi.prod-serve-only.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = run_stack(str(path))
    assert wi_members(run) == [
        "serviceAccount:acme-ml-prod.svc.id.goog[ray/ray-serve-head]",
        "serviceAccount:acme-ml-prod.svc.id.goog[ray/ray-serve]",
    ]
    assert sorted(
        r.inputs["metadata"]["name"] for r in run.kubernetes_objects() if r.inputs["kind"] == "ServiceAccount"
    ) == [
        "ray-serve",
        "ray-serve-head",
    ]
