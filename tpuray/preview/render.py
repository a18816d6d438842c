"""Kubernetes manifests of a stack, taken from the mocked program run (never a second copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tpuray.preview.mockrun import StackRun

# kubectl apply -f DIR goes in file-name order: namespaces and accounts before what uses them.
KIND_ORDER = {
    "Namespace": 0,
    "ServiceAccount": 1,
    "ComputeClass": 2,
    "NetworkPolicy": 2,  # before the Ray pods exist, so none runs unprotected
    "SecretProviderClass": 2,  # before the serve pods mount it (the Hugging Face token)
    # Kueue's objects before the queued Ray objects that name their LocalQueue (tpuray/desired/queues.py).
    **dict.fromkeys(("ResourceFlavor", "WorkloadPriorityClass", "ProvisioningRequestConfig", "AdmissionCheck"), 2),
    **dict.fromkeys(("ClusterQueue", "LocalQueue"), 2),
    "RayCluster": 3,
    "RayJob": 3,
    "RayService": 3,
}


def manifests(run: StackRun) -> list[dict[str, Any]]:
    objects = [r.manifest() for r in run.kubernetes_objects()]
    return sorted(objects, key=lambda m: (KIND_ORDER.get(m["kind"], 9), m["kind"], _name(m)))


def _name(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata", {})
    return "-".join(p for p in (meta.get("namespace"), meta.get("name")) if p)


def file_name(manifest: dict[str, Any]) -> str:
    return f"{KIND_ORDER.get(manifest['kind'], 9)}0-{manifest['kind'].lower()}-{_name(manifest)}.yaml"


def write_manifests(run: StackRun, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for manifest in manifests(run):
        path = out / file_name(manifest)
        path.write_text(yaml.safe_dump(manifest, sort_keys=True, width=120))
        written.append(path)
    return written
