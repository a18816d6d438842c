"""A minimal client of the local kube-apiserver for the substrate's stand-ins (core/v1 only)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import requests


@dataclass
class Kube:
    """`url` is https://127.0.0.1:<port>; `session` carries the token and the CA to verify with."""

    url: str
    session: requests.Session

    def _ns(self, namespace: str | None, plural: str) -> str:
        return f"{self.url}/api/v1/namespaces/{namespace}/{plural}" if namespace else f"{self.url}/api/v1/{plural}"

    def list(self, plural: str, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
        params = {"labelSelector": selector} if selector else {}
        response = self.session.get(self._ns(namespace, plural), params=params, timeout=10)
        response.raise_for_status()
        return response.json()["items"]

    def list_objects(self, api_version: str, plural: str) -> list[dict[str, Any]]:
        """Objects of a group/version collection across namespaces ([] when the kind is not served)."""
        response = self.session.get(f"{self.url}/apis/{api_version}/{plural}", timeout=10)
        if response.status_code == 404:
            return []
        response.raise_for_status()
        return response.json()["items"]

    def create(self, plural: str, obj: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        response = self.session.post(self._ns(namespace, plural), data=json.dumps(obj), timeout=10)
        response.raise_for_status()
        return response.json()

    def patch_status(self, plural: str, name: str, status: dict[str, Any], namespace: str | None = None) -> None:
        response = self.session.patch(
            f"{self._ns(namespace, plural)}/{name}/status",
            data=json.dumps({"status": status}),
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=10,
        )
        response.raise_for_status()

    def bind(self, pod: dict[str, Any], node: str) -> bool:
        """The scheduler's write: a Binding of the pod to `node`; False when the pod is gone."""
        meta = pod["metadata"]
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        response = self.session.post(
            f"{self._ns(meta['namespace'], 'pods')}/{meta['name']}/binding", data=json.dumps(binding), timeout=10
        )
        if response.status_code in (404, 409):
            return False
        response.raise_for_status()
        return True

    def delete(self, plural: str, name: str, namespace: str | None = None, grace_s: int | None = None) -> None:
        params = {} if grace_s is None else {"gracePeriodSeconds": str(grace_s)}
        response = self.session.delete(f"{self._ns(namespace, plural)}/{name}", params=params, timeout=10)
        if response.status_code != 404:
            response.raise_for_status()
