"""The TPU webhook stand-in served to the local kube-apiserver as a mutating admission webhook.

Registered as upstream's deployments/mutating-webhook-cfg.yaml registers the real one (pods, CREATE,
objectSelector app.kubernetes.io/name=kuberay, every namespace but kube-system and kube-node-lease),
with the URL of this server on 127.0.0.1 in place of the in-cluster Service, and the CA of its
throwaway certificate. Requests are served one at a time, as upstream serialises them (cacheMutex).
A pod the webhook refuses gets `allowed: false` with upstream's error text (upstream answers HTTP 403,
which the API server reports as a failed webhook call: the pod is refused either way).
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from tpuray import labels
from tpuray.local.substrate import tpu_webhook
from tpuray.local.substrate.kube import Kube

CONFIG_NAME = "kuberay-tpu-mutating-webhook-cfg"


def _self_signed(workdir: Path) -> tuple[Path, Path]:
    cert, key = workdir / "tpu-webhook.crt", workdir / "tpu-webhook.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def review_response(kube: Kube, review: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionReview answer for one pod admission request."""
    request = review["request"]
    pod = request["object"]
    pod.setdefault("metadata", {}).setdefault("namespace", request.get("namespace", ""))
    pod_labels = pod["metadata"].get("labels") or {}
    answer: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    try:
        existing = []
        if tpu_webhook.container_requesting_tpus(*(pod["spec"].get("containers") or [])):
            cluster, group = pod_labels.get(labels.RAY_CLUSTER, ""), pod_labels.get(labels.RAY_GROUP, "")
            selector = f"{labels.RAY_CLUSTER}={cluster},{labels.RAY_GROUP}={group}"
            existing = kube.list("pods", pod["metadata"]["namespace"], selector)
        patches = tpu_webhook.mutate_pod(pod, existing)
    except tpu_webhook.WebhookError as err:
        answer.update(allowed=False, status={"status": "Failure", "message": f"kuberay-tpu-webhook: {err}"})
        patches = []
    if patches:
        answer.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patches).encode()).decode())
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}


class WebhookServer:
    """Serves /mutate on 127.0.0.1 over TLS; `register` points the API server at it."""

    def __init__(self, kube: Kube, workdir: Path):
        self.kube = kube
        self.cert, key = _self_signed(workdir)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps(review_response(outer.kube, body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="tpu-webhook", daemon=True)

    def start(self) -> WebhookServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def configuration(self) -> dict[str, Any]:
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIG_NAME},
            "webhooks": [
                {
                    "name": "kuberay-tpu-webhook.ray-system.svc",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "NoneOnDryRun",
                    "namespaceSelector": {"matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                         "values": ["kube-system", "kube-node-lease"]}]},
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{self.port}/mutate",
                        "caBundle": base64.b64encode(self.cert.read_bytes()).decode(),
                    },
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                               "resources": ["pods"], "scope": "Namespaced"}],
                    "objectSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay"}},
                }
            ],
        }  # fmt: skip

    def register(self) -> None:
        url = f"{self.kube.url}/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
        response = self.kube.session.post(url, data=json.dumps(self.configuration()), timeout=10)
        response.raise_for_status()
