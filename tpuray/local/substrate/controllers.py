"""Stand-ins for the three kube-controller-manager loops the joint substrate needs (no
controller-manager runs here, tests/control_plane.py):
- the Endpoints controller: a selector Service's Endpoints list its matching pods' IPs, ready
  ones as addresses, others as notReadyAddresses. KubeRay v1.5.0 counts a RayService's serve
  endpoints from the serve Service's Endpoints (rayservice_controller.go) and is Ready only
  with one or more; no EndpointSlices are written (nothing here reads them);
- the Job controller, for the RayJob submitter: one pod per Job from its template (with the
  labels and owner reference the Job controller sets), retried up to backoffLimit, and the Job's
  status (succeeded/failed counts, Complete or Failed condition) as its pod ends;
- the garbage collector's background deletion: a pod, Job or RayCluster whose controlling owner
  (a RayCluster, Job or RayJob) is gone is deleted.
Not modelled: parallelism and completions above 1, pod failure policies, TTL after finished,
activeDeadlineSeconds of the Job; publishNotReadyAddresses and named target ports absent from a
pod (the pod is then left out, where Kubernetes lists it without that port).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from tpuray.local.substrate import pod_spec
from tpuray.local.substrate.kube import Kube

OWNER_KINDS = {"RayCluster": "apis/ray.io/v1/namespaces/{ns}/rayclusters/{name}",
               "RayJob": "apis/ray.io/v1/namespaces/{ns}/rayjobs/{name}",
               "Job": "apis/batch/v1/namespaces/{ns}/jobs/{name}"}  # fmt: skip


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def job_pod(job: dict[str, Any], attempt: int) -> dict[str, Any]:
    meta, template = job["metadata"], job["spec"]["template"]
    uid = meta["uid"]
    pod_labels = {**(template["metadata"].get("labels") or {}), "batch.kubernetes.io/job-name": meta["name"],
                  "job-name": meta["name"], "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{attempt}",
            "namespace": meta["namespace"],
            "labels": pod_labels,
            "annotations": template["metadata"].get("annotations") or {},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],  # fmt: skip
        },
        "spec": template["spec"],
    }


def jobs_step(kube: Kube) -> None:
    for job in kube.list_objects("batch/v1", "jobs"):
        meta, status = job["metadata"], job.get("status", {})
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in status.get("conditions", [])):
            continue
        pods = [p for p in kube.list("pods", meta["namespace"], f"batch.kubernetes.io/controller-uid={meta['uid']}")]
        succeeded = sum(p["status"].get("phase") == "Succeeded" for p in pods)
        failed = sum(p["status"].get("phase") == "Failed" for p in pods)
        active = len(pods) - succeeded - failed
        new: dict[str, Any] = {"active": active, "succeeded": succeeded, "failed": failed,
                               "startTime": status.get("startTime") or _now()}  # fmt: skip
        if succeeded:
            new.update(active=0, completionTime=_now(), conditions=[
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": _now()},
                {"type": "Complete", "status": "True", "lastTransitionTime": _now()}])  # fmt: skip
        elif failed > int(job["spec"].get("backoffLimit", 6)):
            new.update(active=0, conditions=[
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": _now()},
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": _now()}])  # fmt: skip
        elif active == 0:
            with contextlib.suppress(Exception):
                kube.create("pods", job_pod(job, len(pods)), meta["namespace"])
                new["active"] = 1
        if {k: status.get(k) for k in new} != new:
            with contextlib.suppress(Exception):
                kube.session.patch(
                    f"{kube.url}/apis/batch/v1/namespaces/{meta['namespace']}/jobs/{meta['name']}/status",
                    json={"status": new}, headers={"Content-Type": "application/merge-patch+json"}, timeout=10,
                )  # fmt: skip


# What the garbage collector stand-in looks after: (API path prefix, plural) of each dependent kind.
DEPENDENTS = (("api/v1", "pods"), ("apis/batch/v1", "jobs"), ("apis/ray.io/v1", "rayclusters"))


def _owner_gone(kube: Kube, namespace: str, ref: dict[str, Any]) -> bool:
    path = OWNER_KINDS[ref["kind"]].format(ns=namespace, name=ref["name"])
    response = kube.session.get(f"{kube.url}/{path}", timeout=10)
    return response.status_code == 404 or (response.ok and response.json()["metadata"]["uid"] != ref["uid"])


def gc_step(kube: Kube) -> None:
    """Delete pods, Jobs and RayClusters whose controlling owner (a RayCluster, Job or RayJob)
    no longer exists or is another object now: the garbage collector's background deletion."""
    for prefix, plural in DEPENDENTS:
        response = kube.session.get(f"{kube.url}/{prefix}/{plural}", timeout=10)
        if response.status_code == 404:
            continue
        response.raise_for_status()
        for obj in response.json()["items"]:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            refs = [r for r in meta.get("ownerReferences") or [] if r.get("controller") and r["kind"] in OWNER_KINDS]
            if any(_owner_gone(kube, meta["namespace"], ref) for ref in refs):
                kube.session.delete(f"{kube.url}/{prefix}/namespaces/{meta['namespace']}/{plural}/{meta['name']}",
                                    params={"propagationPolicy": "Background"}, timeout=10)  # fmt: skip


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", []))


def endpoints(service: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Endpoints subsets of a selector Service: one per distinct set of resolved ports."""
    subsets: dict[str, dict[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        ip, meta = pod.get("status", {}).get("podIP"), pod["metadata"]
        if not ip or meta.get("deletionTimestamp"):
            continue
        resolved = [(p, pod_spec.target_port(pod, p)) for p in service["spec"].get("ports", [])]
        if any(target is None for _, target in resolved):
            continue
        ports = [{"name": p.get("name", ""), "port": t, "protocol": p.get("protocol", "TCP")} for p, t in resolved]
        subset = subsets.setdefault(json.dumps(ports, sort_keys=True), {"ports": ports})
        address = {"ip": ip, "nodeName": pod["spec"].get("nodeName", ""),
                   "targetRef": {"kind": "Pod", "namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}}  # fmt: skip
        subset.setdefault("addresses" if _ready(pod) else "notReadyAddresses", []).append(address)
    return list(subsets.values())


def endpoints_step(kube: Kube) -> None:
    pods = kube.list("pods")
    for service in kube.list("services"):
        meta, selector = service["metadata"], service["spec"].get("selector")
        if not selector:
            continue
        selected = [
            p for p in pods if p["metadata"]["namespace"] == meta["namespace"] and pod_spec.selects(selector, p)
        ]
        subsets = endpoints(service, selected)
        path = f"{kube.url}/api/v1/namespaces/{meta['namespace']}/endpoints/{meta['name']}"
        response = kube.session.get(path, timeout=10)
        current = response.json() if response.ok else None
        if current is not None and (current.get("subsets") or []) == subsets:
            continue
        body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                "labels": meta.get("labels") or {}}, "subsets": subsets}  # fmt: skip
        with contextlib.suppress(Exception):
            if current is not None:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                kube.session.put(path, data=json.dumps(body), timeout=10).raise_for_status()
            else:
                kube.create("endpoints", body, meta["namespace"])
