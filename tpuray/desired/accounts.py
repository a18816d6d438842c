"""The Kubernetes service account of each Ray pod role, and the one API token a Ray pod mounts.

Why one account per role, and why only KubeRay's autoscaler sidecar holds an API token: the
docstring of infra/components/identities.py, which declares these accounts and their Google
identities. This module is the Pulumi-free part the desired state (ray_cluster.py) needs.
"""

from __future__ import annotations

from typing import Any

HEAD = "ray-head"
WORKER = "ray-worker"
SERVE_HEAD = "ray-serve-head"
SERVE = "ray-serve"
SUBMITTER = "ray-submitter"
# The in-cluster credentials path every Kubernetes client reads (token, ca.crt, namespace).
API_TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_TOKEN_VOLUME = "autoscaler-api-token"
TOKEN_SECONDS = 3607  # what the ServiceAccount admission plugin requests for its own volume


def pod_accounts(role: str) -> tuple[str, str]:
    """(head, worker) service accounts of a Ray object's cluster by role (train | serve | interactive)."""
    return (SERVE_HEAD, SERVE) if role == "serve" else (HEAD, WORKER)


def autoscaler_token(head_spec: dict[str, Any], autoscaler: dict[str, Any]) -> None:
    """The head pod's API credentials, mounted in KubeRay's autoscaler sidecar only."""
    head_spec.setdefault("volumes", []).append(
        {
            "name": API_TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ]
            },
        }
    )
    autoscaler.setdefault("volumeMounts", []).append(
        {"name": API_TOKEN_VOLUME, "mountPath": API_TOKEN_DIR, "readOnly": True}
    )
