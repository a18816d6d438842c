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
tests/test_pod_security.py checks every rendered pod against the profile (tpuray/checks/pss.py).

Beyond `restricted`: every container's root filesystem is read-only, with an emptyDir where
Ray and the libraries it runs write (WRITABLE_DIRS, each with its source), and no pod mounts a
Kubernetes API token (`automountServiceAccountToken: false`; the autoscaler's own mount is
infra/components/identities.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
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
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
# The rayproject image's user's home (docker/base-deps/Dockerfile: `useradd ... -d /home/ray ray`).
RAY_HOME = "/home/ray"


@dataclass(frozen=True)
class WritableDir:
    volume: str
    path: str
    why: str


# Where a read-only Ray container still writes, each an emptyDir (node disk, like the writable
# layer it replaces). Checked by running a head, a worker and a job under a read-only root on
# this machine (tests/test_read_only_root.py).
WRITABLE_DIRS: tuple[WritableDir, ...] = (
    WritableDir(
        # KubeRay's own name for this volume (ray-operator/controllers/ray/common/pod.go
        # RayLogVolumeName): with in-tree autoscaling KubeRay mounts the volume of that name in the
        # autoscaler sidecar too, so both keep sharing Ray's logs as KubeRay intends.
        "ray-logs",
        "/tmp/ray",
        "Ray's temp dir (ray/_common/utils.py get_default_ray_temp_dir: $RAY_TMPDIR or /tmp, + /ray): "
        "session dirs, logs, sockets, the runtime_env working_dir unpacked under runtime_resources",
    ),
    WritableDir(
        "tmp",
        "/tmp",
        "Python's tempfile (checkpoints staged by ray_apps.train before upload), libtpu's /tmp/tpu_logs and lock file",
    ),
    WritableDir(
        "cache",
        f"{RAY_HOME}/.cache",
        "huggingface_hub's cache, where Ray Serve LLM copies the model mirror before vLLM loads it "
        "(ray/llm/_internal/common/utils/download_utils.py: HF_HUB_CACHE), and vLLM's own cache",
    ),
)


def namespace_labels() -> dict[str, str]:
    """enforce refuses, audit logs, warn tells kubectl users: all at `restricted`."""
    out = {}
    for mode in ("enforce", "audit", "warn"):
        out[f"pod-security.kubernetes.io/{mode}"] = PSS_LEVEL
        out[f"pod-security.kubernetes.io/{mode}-version"] = PSS_VERSION
    return out


def container_security_context() -> dict[str, Any]:
    return copy.deepcopy(CONTAINER_SECURITY_CONTEXT)


def writable_mounts(dirs: tuple[WritableDir, ...] = WRITABLE_DIRS) -> list[dict[str, Any]]:
    return [{"name": d.volume, "mountPath": d.path} for d in dirs]


def harden_template(
    template: dict[str, Any], object_name: str, node: str, dirs: tuple[WritableDir, ...] = WRITABLE_DIRS
) -> None:
    """Labels NetworkPolicies select on, the restricted pod and container security contexts, a
    read-only root with `dirs` writable, and no API token."""
    pod_labels = template.setdefault("metadata", {}).setdefault("labels", {})
    pod_labels[labels.RAY_NODE] = node
    if node == "submitter":  # no Ray node: the intra-cluster policies leave it out
        pod_labels[labels.SUBMITTER_OF] = object_name
    else:
        pod_labels[labels.RAY_OBJECT] = object_name
    spec = template["spec"]
    spec["automountServiceAccountToken"] = False
    spec["securityContext"] = copy.deepcopy(POD_SECURITY_CONTEXT)
    spec.setdefault("volumes", []).extend({"name": d.volume, "emptyDir": {}} for d in dirs)
    for key in ("initContainers", "containers"):
        for container in spec.get(key, []):
            container["securityContext"] = container_security_context()
            container.setdefault("volumeMounts", []).extend(writable_mounts(dirs))


# `ray job submit` writes only below /tmp (tests/test_read_only_root.py).
SUBMITTER_DIRS = tuple(d for d in WRITABLE_DIRS if d.volume == "tmp")
# KubeRay's autoscaler sidecar (`ray kuberay-autoscaler`): Ray's logs, shared with the head, and /tmp.
AUTOSCALER_DIRS = tuple(d for d in WRITABLE_DIRS if d.volume in ("ray-logs", "tmp"))


def submitter_template(image: str, service_account: str, object_name: str) -> dict[str, Any]:
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
    harden_template(template, object_name, "submitter", SUBMITTER_DIRS)
    return template
