"""Secrets: no Hugging Face token in plain text in a rendered object, and a token file that exists.

A token in a RayService's serveConfigV2 (runtime_env env_vars), a container env value or a
ConfigMap lands in Pulumi state, `kubectl get -o yaml` and every preview diff. The llm backend
gets its token from Secret Manager instead (tpuray:workloads.serve.hfTokenSecret, mounted as a
file by the GKE Secret Manager add-on: infra/components/hf_secret.py, docs/apps.md); the stack
check refuses one in stack config before any object is rendered (tpuray/desired/llm_stack.py).

`hf-token-mounted`: an LLMConfig whose runtime_env sets HF_TOKEN_PATH makes huggingface_hub
read the token from that file. If no pod of the RayService mounts a Secret Manager CSI volume
(driver secrets-store-gke.csi.k8s.io, a SecretProviderClass) at the file's folder, the file
does not exist: a gated download answers 401 and the application never leaves DEPLOYING,
which only shows on the cloud. Every group's Ray container (the first) must mount it, as the
rendered RayService does: Serve places replicas on any Ray node.

`hf-token-provider-class` (stack): each such volume names a SecretProviderClass of the stack,
in the RayService's namespace, with `provider: gke` (the add-on's; the open-source provider
is `gcp`). A misspelt or missing class leaves the pods in ContainerCreating with a mount error.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from tpuray.checks.hf_token import plaintext_token_paths
from tpuray.desired.llm_stack import SECRET_MANAGER_CSI_DRIVER
from tpuray.policies.core import GKE, MANDATORY, PROJECT, Finding, Resource, Rule
from tpuray.policies.kube import (
    RAY_TYPES,
    Group,
    RayClusterSpec,
    as_dict,
    as_list,
    cluster_spec,
    groups,
    serve_applications,
)

CONFIG_MAP_TYPE = "kubernetes:core/v1:ConfigMap"
RAY_SERVICE_TYPES = tuple(t for t in RAY_TYPES if t.endswith(":RayService"))
SECRET_PROVIDER_CLASS_TYPES = tuple(
    f"kubernetes:secrets-store.csi.x-k8s.io/{v}:SecretProviderClass" for v in ("v1", "v1alpha1")
)
ADD_ON_PROVIDER = "gke"  # the GKE Secret Manager add-on's SecretProviderClass provider


def _no_plaintext_token(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for path in plaintext_token_paths(res.props):
        yield (
            f"{res.label}: {path} holds a Hugging Face token in plain text; keep it in Secret Manager and set "
            "tpuray:workloads.serve.hfTokenSecret (mounted as a file, read through HF_TOKEN_PATH)"
        )


def _token_paths(raw: Any) -> list[tuple[str, str]]:
    """(where, HF_TOKEN_PATH) of each LLMConfig of a serveConfigV2 that sets one."""
    found = []
    for i, app in enumerate(serve_applications(raw)):
        for j, llm in enumerate(as_list(as_dict(app.get("args")).get("llm_configs"))):
            path = as_dict(as_dict(as_dict(llm).get("runtime_env")).get("env_vars")).get("HF_TOKEN_PATH")
            if isinstance(path, str) and path:
                found.append((f"spec.serveConfigV2 applications[{i}] ({app.get('name', i)!r}) llm_configs[{j}]", path))
    return found


def _mount_problem(group: Group, folder: str) -> str | None:
    """Why the group's Ray container has no Secret Manager volume at folder (None: it has)."""
    volumes = {as_dict(v).get("name"): as_dict(v) for v in as_list(group.pod_spec.get("volumes"))}
    for container in group.containers[:1]:
        mounts = [as_dict(m) for m in as_list(container.get("volumeMounts"))]
        at = [m for m in mounts if str(m.get("mountPath", "")).rstrip("/") == folder]
        if not at:
            return f"mounts nothing at {folder}"
        csi = as_dict(as_dict(volumes.get(at[0].get("name"))).get("csi"))
        if csi.get("driver") != SECRET_MANAGER_CSI_DRIVER or not as_dict(csi.get("volumeAttributes")).get(
            "secretProviderClass"
        ):
            return f"mounts volume {at[0].get('name')!r} at {folder}, not a {SECRET_MANAGER_CSI_DRIVER} volume of a SecretProviderClass"
    return None


def _token_mounted(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    # No cluster, no pods to check: the CRD schema names a missing rayClusterConfig.
    cluster = cluster_spec(res.props) or RayClusterSpec({}, "spec.rayClusterConfig")
    for where, path in _token_paths(as_dict(res.props.get("spec")).get("serveConfigV2")):
        folder = posixpath.dirname(path.rstrip("/"))
        for group in groups(cluster):
            problem = _mount_problem(group, folder)
            if problem:
                yield (
                    f"{res.label}: {where} sets HF_TOKEN_PATH {path!r} but {group.where} {problem}; the file never "
                    "exists, a gated download answers 401 and the app stays DEPLOYING: mount a CSI volume of "
                    f"{SECRET_MANAGER_CSI_DRIVER} (volumeAttributes.secretProviderClass) at {folder} in every group "
                    "(tpuray:workloads.serve.hfTokenSecret renders it)"
                )


def _namespace(res: Resource) -> Any:
    return as_dict(res.props.get("metadata")).get("namespace")


def _provider_class_declared(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    classes = {
        (_namespace(r), as_dict(r.props.get("metadata")).get("name")): r
        for r in resources
        if r.type in SECRET_PROVIDER_CLASS_TYPES
    }
    for res in (r for r in resources if r.type in RAY_SERVICE_TYPES):
        cluster = cluster_spec(res.props) or RayClusterSpec({}, "spec.rayClusterConfig")
        for group in groups(cluster):
            for volume in as_list(group.pod_spec.get("volumes")):
                csi = as_dict(as_dict(volume).get("csi"))
                if csi.get("driver") != SECRET_MANAGER_CSI_DRIVER:
                    continue
                name = as_dict(csi.get("volumeAttributes")).get("secretProviderClass")
                found = classes.get((_namespace(res), name))
                where = f"{res.label}: {group.where} volume {as_dict(volume).get('name')!r}"
                if found is None:
                    yield Finding(
                        f"{where} names SecretProviderClass {name!r}, which the stack does not declare in namespace "
                        f"{_namespace(res)!r}; the pods stay ContainerCreating with a mount error: declare it there "
                        "(tpuray:workloads.serve.hfTokenSecret renders both)",
                        res.urn,
                    )
                elif as_dict(found.props.get("spec")).get("provider") != ADD_ON_PROVIDER:
                    provider = as_dict(found.props.get("spec")).get("provider")
                    yield Finding(
                        f"{where} uses the GKE add-on's driver {SECRET_MANAGER_CSI_DRIVER} but {found.label} has "
                        f"provider {provider!r}; the add-on serves provider {ADD_ON_PROVIDER!r} only (the open-source "
                        "driver serves 'gcp'): set spec.provider: gke",
                        found.urn,
                    )


RULES = (
    Rule(
        "hf-token-not-plaintext",
        "No Hugging Face token in plain text in a Ray object or ConfigMap (Secret Manager only).",
        MANDATORY,
        (*RAY_TYPES, CONFIG_MAP_TYPE),
        _no_plaintext_token,
        kubernetes=True,
        profile=PROJECT,
    ),
    Rule(
        "hf-token-mounted",
        "A RayService whose LLMConfig sets HF_TOKEN_PATH mounts a Secret Manager CSI volume at its directory.",
        MANDATORY,
        RAY_SERVICE_TYPES,
        _token_mounted,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "hf-token-provider-class",
        "Each Secret Manager add-on volume of a RayService names a SecretProviderClass of the stack with provider gke.",
        MANDATORY,
        stack_check=_provider_class_declared,
        profile=GKE,
    ),
)
