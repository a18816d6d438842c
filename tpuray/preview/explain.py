"""`tpuray local run WORKLOAD STACK --explain`: what the emulator ignores of the rendered stack.

The emulator runs the rendered RayJob / RayService on raylets on 127.0.0.1; it models TPU
slices, Ray labels and capacity-tier labels, and nothing of what Kubernetes, GKE or Google
Cloud enforce. Each line names what the stack renders and why the emulator cannot model it,
so a green local run is never read as proof of those. The rewrites `local run` applies are
listed by tpuray.local.localrun; this lists what is silently not there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tpuray import labels
from tpuray.desired import worker_group
from tpuray.preview.mockrun import StackRun
from tpuray.preview.render import manifests

CLUSTER = "gcp:container/cluster:Cluster"


def _count(found: Counter[str], kinds: tuple[str, ...]) -> str:
    return ", ".join(f"{found[k]} {k}" for k in kinds if found[k])


def ignored(run: StackRun) -> list[str]:
    """One line per thing the stack renders that the emulator does not enforce or model."""
    objects = manifests(run)
    kinds = Counter(m["kind"] for m in objects)
    lines: list[str] = []
    for ns in (m for m in objects if m["kind"] == "Namespace"):
        level = ns["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce")
        if level:
            lines.append(
                f"Pod Security: namespace {ns['metadata']['name']} enforces {level!r}; no API server admits "
                "pods here, and the raylets run as this machine's user"
            )
    ray_objects = [m for m in objects if m["kind"] in labels.RAY_KINDS]
    if any(_pod_fields(m, "securityContext") for m in ray_objects):
        lines.append(
            "securityContext (runAsUser 1000, seccomp RuntimeDefault, drop ALL, read-only root): not applied to "
            "local processes"
        )
    if kinds["NetworkPolicy"]:
        lines.append(
            f"NetworkPolicy: {kinds['NetworkPolicy']} rendered, none enforced; every port is open on 127.0.0.1 "
            "(tests/test_network_policies.py checks their port coverage from the rendered objects instead)"
        )
    gateway = _count(kinds, ("Gateway", "HTTPRoute", "HealthCheckPolicy", "GCPBackendPolicy"))
    if gateway:
        lines.append(f"Serve ingress: {gateway} not created; Serve is reached on 127.0.0.1 without TLS")
    if any(_start_params(m) for m in ray_objects):
        lines.append("rayStartParams (pinned ports, num-cpus 0 on the head): Ray picks its own ports on loopback")
    if ray_objects:
        lines += [
            "authOptions token: the emulator runs with RAY_AUTH_MODE=disabled (no KubeRay to create the Secret)",
            "nodeSelector, tolerations, affinity and CPU/memory requests: the emulator places one raylet per TPU "
            "host by the catalog, not by the Kubernetes scheduler",
            "serviceAccountName / Workload Identity: gs:// goes to the GCS emulator with anonymous credentials "
            "(STORAGE_EMULATOR_HOST); no GCP credentials are used",
        ]
    if any(m["kind"] == "RayJob" for m in ray_objects):
        lines.append(
            "RayJob submitterPodTemplate, activeDeadlineSeconds, backoffLimit: the job is submitted through the "
            "Jobs API by `local run`, with its own --timeout"
        )
    if kinds["ComputeClass"]:
        lines.append(
            f"ComputeClass: {kinds['ComputeClass']} rendered; capacity tiers are emulated as Ray labels only, "
            "with no real reservation, Spot preemption or flex-start queue"
        )
    for cluster in run.of_type(CLUSTER):
        lines.append(f"GKE cluster settings: {_cluster_settings(cluster.inputs)}: cloud-side, not emulated")
    return lines


def _pod_fields(manifest: dict[str, Any], key: str) -> bool:
    return any(key in g.pod_spec for g in worker_group.pod_groups(manifest))


def _start_params(manifest: dict[str, Any]) -> bool:
    return any(g.ray_start_params for g in worker_group.pod_groups(manifest))


def _cluster_settings(inputs: dict[str, Any]) -> str:
    found = []
    if inputs.get("datapathProvider") == "ADVANCED_DATAPATH":
        found.append("Dataplane V2")
    if (inputs.get("databaseEncryption") or {}).get("state") == "ENCRYPTED":
        found.append("KMS secrets encryption")
    if inputs.get("binaryAuthorization"):
        found.append("Binary Authorization")
    if inputs.get("maintenancePolicy"):
        found.append("maintenance policy")
    found.append("private nodes and endpoint, Workload Identity, shielded nodes")
    return ", ".join(found)
