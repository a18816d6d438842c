"""The llm backend's Hugging Face token, from Secret Manager to a file in the serve pods, under the mock engine.

prod needs no token (its weights come from GCS: docs/apps.md), so these tests run prod with
`hfTokenSecret` added, written to a stack file in the test (infra/components/hf_secret.py).
"""

from __future__ import annotations

import copy
import posixpath
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import mocked
from tpuray.checks.pss import restricted_violations
from tpuray.checks.schemas import schema_errors
from tpuray.checks.strict import check_inputs
from tpuray.commands.preview import key_inputs
from tpuray.config import stacks_dir
from tpuray.policies.evaluate import check_stack as policy_violations
from tpuray.preview.mockrun import MockedResource, StackRun, run_stack
from tpuray.preview.render import file_name

CLUSTER = "gcp:container/cluster:Cluster"
SECRET_IAM = "gcp:secretmanager/secretIamMember:SecretIamMember"
SPC = "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"
WI_BINDING = "gcp:serviceaccount/iAMMember:IAMMember"
VOLUME = {
    "name": "hf-token",
    "csi": {
        "driver": "secrets-store-gke.csi.k8s.io",
        "readOnly": True,
        "volumeAttributes": {"secretProviderClass": "tpuray-prod-serve-hf-token"},
    },
}
MOUNT = {"name": "hf-token", "mountPath": "/var/run/secrets/huggingface", "readOnly": True}


def prod_with_token(tmp_path: Path, secret: str = "projects/acme-ml-prod/secrets/hf-token") -> StackRun:
    doc = copy.deepcopy(yaml.safe_load((stacks_dir() / "Pulumi.prod.yaml").read_text()))
    doc["config"]["tpuray:workloads"]["serve"]["hfTokenSecret"] = secret
    path = tmp_path / "Pulumi.prod-hf.yaml"
    path.write_text(yaml.safe_dump(doc))
    return run_stack(str(path))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    return prod_with_token(tmp_path_factory.mktemp("hf"))


def one(run: StackRun, type_token: str, name: str | None = None) -> MockedResource:
    (found,) = [r for r in run.of_type(type_token) if name is None or r.name == name]
    return found


def ray_service(run: StackRun) -> dict[str, Any]:
    (service,) = [r.manifest() for r in run.kubernetes_objects() if r.inputs["kind"] == "RayService"]
    return service


def pod_groups(service: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    cluster = service["spec"]["rayClusterConfig"]
    return [("head", cluster["headGroupSpec"])] + [(g["groupName"], g) for g in cluster["workerGroupSpecs"]]


def test_a_stack_without_a_token_declares_no_add_on_secret_class_grant_or_volume() -> None:
    run = mocked("prod")
    assert "secretManagerConfig" not in one(run, CLUSTER).inputs
    assert run.of_type(SECRET_IAM) == [] and run.of_type(SPC) == []
    for _, group in pod_groups(ray_service(run)):
        assert [v for v in group["template"]["spec"]["volumes"] if "csi" in v] == []


def test_a_token_secret_turns_on_the_gke_secret_manager_add_on(run: StackRun) -> None:
    assert one(run, CLUSTER).inputs["secretManagerConfig"] == {"enabled": True}


def test_the_sdk_types_refuse_a_misspelled_secret_manager_config(run: StackRun) -> None:
    inputs = {**one(run, CLUSTER).inputs, "secretManagerConfig": {"enable": True}}
    assert check_inputs(CLUSTER, "gke", inputs) == [
        'gcp:container/cluster:Cluster "gke": secret_manager_config: unknown key "enable" (did you mean "enabled"?); '
        "ClusterSecretManagerConfigArgsDict has no such key"
    ]


def test_the_secret_provider_class_asks_the_gke_provider_for_the_latest_version_as_file_token(run: StackRun) -> None:
    spc = one(run, SPC).manifest()
    assert spc == {
        "apiVersion": "secrets-store.csi.x-k8s.io/v1",
        "kind": "SecretProviderClass",
        "metadata": {
            "name": "tpuray-prod-serve-hf-token",
            "namespace": "ray",
            "labels": {"app.kubernetes.io/managed-by": "tpuray", "app.kubernetes.io/part-of": "tpuray-prod"},
        },
        "spec": {
            "provider": "gke",
            "parameters": {
                "secrets": "- resourceName: projects/acme-ml-prod/secrets/hf-token/versions/latest\n  path: token\n"
            },
        },
    }
    assert schema_errors(spc) == []


def test_the_secret_provider_class_exists_before_the_ray_service_that_mounts_it(run: StackRun) -> None:
    spc = one(run, SPC)
    (service,) = [r for r in run.kubernetes_objects() if r.inputs["kind"] == "RayService"]
    assert spc.order < service.order  # the RayService depends on it
    # kubectl apply -f on `tpuray render` output goes in file-name order.
    assert file_name(spc.manifest()) == "20-secretproviderclass-ray-tpuray-prod-serve-hf-token.yaml"
    assert file_name(service.manifest()) == "30-rayservice-ray-tpuray-prod-serve.yaml"


def test_a_pinned_secret_version_is_the_one_mounted(tmp_path: Path) -> None:
    run = prod_with_token(tmp_path, "projects/acme-ml-prod/secrets/hf-token/versions/3")
    assert one(run, SPC).inputs["spec"]["parameters"]["secrets"] == (
        "- resourceName: projects/acme-ml-prod/secrets/hf-token/versions/3\n  path: token\n"
    )


def test_every_serve_group_mounts_the_token_read_only_where_hf_token_path_points(run: StackRun) -> None:
    service = ray_service(run)
    (llm_app, _healthz) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    token_path = llm_app["args"]["llm_configs"][0]["runtime_env"]["env_vars"]["HF_TOKEN_PATH"]
    assert posixpath.dirname(token_path) == MOUNT["mountPath"]
    groups = pod_groups(service)
    assert [name for name, _ in groups] == ["head", "serve-v5litepod-8"]
    for _, group in groups:
        pod = group["template"]["spec"]
        assert [v for v in pod["volumes"] if "csi" in v] == [VOLUME]
        assert [[m for m in c["volumeMounts"] if m["name"] == "hf-token"] for c in pod["containers"]] == [[MOUNT]]
        assert restricted_violations(pod) == []  # a csi volume is allowed by Pod Security `restricted`


def test_the_serving_gsa_alone_reads_that_one_secret_only_after_its_workload_identity_bindings(run: StackRun) -> None:
    grant = one(run, SECRET_IAM)
    assert grant.name == "ray-hf-token"
    assert grant.inputs == {
        "project": "acme-ml-prod",
        "secretId": "hf-token",
        "role": "roles/secretmanager.secretAccessor",
        "member": "serviceAccount:tpuray-prod-serve@acme-ml-prod.iam.gserviceaccount.com",
    }
    # Never project-wide: no project IAM member holds the accessor role.
    project_roles = [r.inputs["role"] for r in run.of_type("gcp:projects/iAMMember:IAMMember")]
    assert "roles/secretmanager.secretAccessor" not in project_roles
    # The KSA -> GSA bindings wait for the cluster's workload pool; the grant waits for the bindings.
    cluster = one(run, CLUSTER)
    for ksa in ("ray-serve-head", "ray-serve"):
        assert cluster.order < one(run, WI_BINDING, f"ray-wi-{ksa}").order < grant.order


def test_prod_with_a_token_passes_every_policy(run: StackRun) -> None:
    assert policy_violations(run) == []


def test_the_rendered_service_without_its_volume_fires_hf_token_mounted(run: StackRun) -> None:
    broken = copy.deepcopy(run)
    for r in broken.resources:
        if r.inputs.get("kind") == "RayService":
            r.inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"].pop("volumes")
    messages = [(v.policy, v.message) for v in policy_violations(broken)]
    assert messages == [
        (
            "hf-token-mounted",
            "RayService/tpuray-prod-serve: spec.serveConfigV2 applications[0] ('tpuray-serve') llm_configs[0] sets "
            "HF_TOKEN_PATH '/var/run/secrets/huggingface/token' but spec.rayClusterConfig.workerGroupSpecs[0] (group "
            "'serve-v5litepod-8') mounts volume 'hf-token' at /var/run/secrets/huggingface, not a "
            "secrets-store-gke.csi.k8s.io volume of a SecretProviderClass; the file never exists, a gated download "
            "answers 401 and the app stays DEPLOYING: mount a CSI volume of secrets-store-gke.csi.k8s.io "
            "(volumeAttributes.secretProviderClass) at /var/run/secrets/huggingface in every group "
            "(tpuray:workloads.serve.hfTokenSecret renders it)",
        )
    ]


def test_preview_shows_the_add_on_and_the_one_secret_grant(run: StackRun) -> None:
    assert key_inputs(one(run, CLUSTER)) == (
        "us-east5 channel=STABLE rayOperator=True privateNodes=True workloadIdentity=True secretManager=True "
        "dnsEndpoint=off dataplane=V2 secretsEncryption=KMS gke-secrets binaryAuthorization=PROJECT_SINGLETON_POLICY_ENFORCE "
        "maintenance=FREQ=WEEKLY;BYDAY=SA,SU 04:00-12:00Z exclusions=1"
    )
    assert key_inputs(one(run, SECRET_IAM)) == (
        "projects/acme-ml-prod/secrets/hf-token roles/secretmanager.secretAccessor → "
        "serviceAccount:tpuray-prod-serve@acme-ml-prod.iam.gserviceaccount.com"
    )


def test_a_volume_naming_no_declared_secret_provider_class_fires_hf_token_provider_class(run: StackRun) -> None:
    broken = copy.deepcopy(run)
    one(broken, SPC).inputs["metadata"]["name"] = "hf-token-renamed"
    messages = [(v.policy, v.message) for v in policy_violations(broken)]
    assert [policy for policy, _ in messages] == ["hf-token-provider-class", "hf-token-provider-class"]
    assert messages[0][1] == (
        "RayService/tpuray-prod-serve: spec.rayClusterConfig.headGroupSpec volume 'hf-token' names "
        "SecretProviderClass 'tpuray-prod-serve-hf-token', which the stack does not declare in namespace 'ray'; the "
        "pods stay ContainerCreating with a mount error: declare it there (tpuray:workloads.serve.hfTokenSecret "
        "renders both)"
    )
