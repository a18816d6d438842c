"""hf-token-mounted's readers (tpuray/policies/rules_secrets.py) on hand-built RayServices: which
LLM configs set HF_TOKEN_PATH, and what counts as the Secret Manager volume at its folder."""

from __future__ import annotations

from typing import Any

import yaml

from tpuray.policies.core import Finding, Resource
from tpuray.policies.rules_secrets import _provider_class_declared, _token_mounted, _token_paths

DRIVER = "secrets-store-gke.csi.k8s.io"
SERVE = yaml.safe_dump(
    {
        "applications": [
            {
                "args": {
                    "llm_configs": [
                        {"runtime_env": {"env_vars": {"HF_TOKEN_PATH": ""}}},
                        {"runtime_env": {"env_vars": {"HF_TOKEN_PATH": "/secrets/hf/token"}}},
                    ]
                }
            }
        ]
    }
)
HF_VOLUME = {"name": "hf", "csi": {"driver": DRIVER, "volumeAttributes": {"secretProviderClass": "hf"}}}


def service(containers: list[dict[str, Any]] | None, volumes: list[dict[str, Any]] | None = None) -> Resource:
    spec: dict[str, Any] = {"serveConfigV2": SERVE}
    if containers is not None:
        head = {"template": {"spec": {"containers": containers, "volumes": volumes or []}}}
        spec["rayClusterConfig"] = {"headGroupSpec": head}
    return Resource(
        "kubernetes:ray.io/v1:RayService", "s", {"kind": "RayService", "metadata": {"name": "serve"}, "spec": spec}
    )


def test_an_empty_token_path_is_not_a_token_path_and_an_unnamed_app_is_shown_by_index() -> None:
    assert _token_paths(SERVE) == [("spec.serveConfigV2 applications[0] (0) llm_configs[1]", "/secrets/hf/token")]


def test_only_the_ray_container_needs_the_mount_and_a_trailing_slash_is_the_same_folder() -> None:
    ray = {"name": "ray", "volumeMounts": [{"name": "hf", "mountPath": "/secrets/hf/"}]}
    assert list(_token_mounted(service([ray, {"name": "sidecar"}], [HF_VOLUME]), {})) == []


def test_a_volume_of_the_driver_without_a_secret_provider_class_is_not_the_token() -> None:
    ray = {"name": "ray", "volumeMounts": [{"name": "hf", "mountPath": "/secrets/hf"}]}
    volume = {"name": "hf", "csi": {"driver": DRIVER}}
    assert list(_token_mounted(service([ray], [volume]), {})) == [
        "RayService/serve: spec.serveConfigV2 applications[0] (0) llm_configs[1] sets HF_TOKEN_PATH '/secrets/hf/token' "
        "but spec.rayClusterConfig.headGroupSpec mounts volume 'hf' at /secrets/hf, not a secrets-store-gke.csi.k8s.io "
        "volume of a SecretProviderClass; the file never exists, a gated download answers 401 and the app stays "
        "DEPLOYING: mount a CSI volume of secrets-store-gke.csi.k8s.io (volumeAttributes.secretProviderClass) at "
        "/secrets/hf in every group (tpuray:workloads.serve.hfTokenSecret renders it)"
    ]


def test_a_rayservice_without_a_cluster_config_has_no_group_to_judge() -> None:
    assert list(_token_mounted(service(None), {})) == []


def test_a_driver_volume_after_another_volume_must_name_a_declared_provider_class() -> None:
    volumes = [
        {"name": "cache", "emptyDir": {}},
        {"name": "hf", "csi": {"driver": DRIVER, "volumeAttributes": {"secretProviderClass": "missing"}}},
    ]
    head = {"template": {"spec": {"containers": [], "volumes": volumes}}}
    props = {
        "kind": "RayService",
        "metadata": {"name": "serve", "namespace": "ray"},
        "spec": {"rayClusterConfig": {"headGroupSpec": head}},
    }
    found = list(_provider_class_declared([Resource("kubernetes:ray.io/v1:RayService", "s", props, urn="urn:s")], {}))
    assert found == [
        Finding(
            "RayService/serve: spec.rayClusterConfig.headGroupSpec volume 'hf' names SecretProviderClass 'missing', "
            "which the stack does not declare in namespace 'ray'; the pods stay ContainerCreating with a mount error: "
            "declare it there (tpuray:workloads.serve.hfTokenSecret renders both)",
            "urn:s",
        )
    ]


def test_a_rayservice_without_a_cluster_config_declares_no_volume() -> None:
    bare = Resource(
        "kubernetes:ray.io/v1:RayService", "b", {"kind": "RayService", "metadata": {"name": "b"}, "spec": {}}
    )
    assert list(_provider_class_declared([bare], {})) == []


def token_service(token_path: str, mount_path: str) -> Resource:
    """A RayService whose one LLM config reads HF_TOKEN_PATH token_path and whose head mounts HF_VOLUME at mount_path."""
    llm = {"runtime_env": {"env_vars": {"HF_TOKEN_PATH": token_path}}}
    serve = yaml.safe_dump({"applications": [{"name": "llm", "args": {"llm_configs": [llm]}}]})
    ray = {"name": "ray", "volumeMounts": [{"name": "hf", "mountPath": mount_path}]}
    head = {"template": {"spec": {"containers": [ray], "volumes": [HF_VOLUME]}}}
    spec = {"serveConfigV2": serve, "rayClusterConfig": {"headGroupSpec": head}}
    return Resource(
        "kubernetes:ray.io/v1:RayService", "s", {"kind": "RayService", "metadata": {"name": "serve"}, "spec": spec}
    )


def test_a_token_path_with_a_trailing_slash_is_read_from_the_folder_above_its_last_name() -> None:
    assert list(_token_mounted(token_service("/secrets/hf/token/", "/secrets/hf"), {})) == []


def test_a_token_file_named_x_is_read_from_its_folder() -> None:
    assert list(_token_mounted(token_service("/secrets/X", "/secrets"), {})) == []


def test_a_mount_path_ending_in_x_is_that_folder() -> None:
    assert list(_token_mounted(token_service("/secrets/X/token", "/secrets/X"), {})) == []
