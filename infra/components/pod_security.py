"""Pod Security Standards `restricted` for every Ray pod, enforced by the namespace's labels.

The API server's Pod Security admission refuses a non-compliant pod in a namespace labelled
`pod-security.kubernetes.io/enforce: restricted`
(https://kubernetes.io/docs/concepts/security/pod-security-admission/). The pod templates
comply with the profile (https://kubernetes.io/docs/concepts/security/pod-security-standards/):
- runAsNonRoot with the rayproject image's own user: uid 1000, gid 100 (ray-project/ray
  docker/base-deps/Dockerfile: `ARG RAY_UID=1000`, `ARG RAY_GID=100`, `USER $RAY_UID`);
  a numeric runAsUser lets the kubelet verify non-root without reading the image;
- seccompProfile RuntimeDefault, capabilities drop [ALL], allowPrivilegeEscalation false
  (which also disables the image's passwordless sudo: no_new_privs).
KubeRay injects the autoscaler sidecar and creates the RayJob submitter pod itself; both get
the same container securityContext (autoscalerOptions.securityContext, submitterPodTemplate).
tests/test_pod_security.py checks every rendered pod against the profile (tpuray/pss.py).
"""

from __future__ import annotations

import copy
from typing import Any

from tpuray import labels

PSS_LEVEL = "restricted"
PSS_VERSION = "latest"
RAY_UID = 1000
RAY_GID = 100

POD_SECURITY_CONTEXT: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": RAY_UID,
    "runAsGroup": RAY_GID,
    "fsGroup": RAY_GID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def namespace_labels() -> dict[str, str]:
    """enforce refuses, audit logs, warn tells kubectl users: all at `restricted`."""
    out = {}
    for mode in ("enforce", "audit", "warn"):
        out[f"pod-security.kubernetes.io/{mode}"] = PSS_LEVEL
        out[f"pod-security.kubernetes.io/{mode}-version"] = PSS_VERSION
    return out


def container_security_context() -> dict[str, Any]:
    return copy.deepcopy(CONTAINER_SECURITY_CONTEXT)


def harden_template(template: dict[str, Any], object_name: str | None, node: str) -> None:
    """Labels NetworkPolicies select on, plus the restricted pod and container security contexts."""
    pod_labels = template.setdefault("metadata", {}).setdefault("labels", {})
    pod_labels[labels.RAY_NODE] = node
    if object_name is not None:  # the submitter is no Ray node: intra-cluster policies leave it out
        pod_labels[labels.RAY_OBJECT] = object_name
    spec = template["spec"]
    spec["securityContext"] = copy.deepcopy(POD_SECURITY_CONTEXT)
    for key in ("initContainers", "containers"):
        for container in spec.get(key, []):
            container["securityContext"] = container_security_context()


def submitter_template(image: str, service_account: str) -> dict[str, Any]:
    """The RayJob submitter pod (K8sJobMode): KubeRay fills in the `ray job submit` command."""
    template = {
        "spec": {
            "serviceAccountName": service_account,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": image,
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
                }
            ],
        }
    }
    harden_template(template, None, "submitter")
    return template
