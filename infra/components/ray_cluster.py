"""The Ray cluster inside every KubeRay object: the TPU worker groups, one per shape of the
capacity chain (docs/capacity.md), and the CPU head group, each hardened for Pod Security `restricted`.

Every TPU worker group comes from the catalog: numOfHosts = hosts, replicas = slices,
google.com/tpu = chips per host, and the nodeSelectors that the KubeRay TPU webhook and
GKE need. The RayJob, RayService and RayCluster of infra/components/workloads.py all wrap
ray_cluster_spec.
"""

from __future__ import annotations

from typing import Any

from infra.components import identities, pod_security
from tpuray import capacity, catalog, images, labels
from tpuray.catalog import SliceShape
from tpuray.config import CapacityTier, RayConfig, SlicePoolConfig
from tpuray.ray_ports import MEGASCALE_PORT, PINNED_START_PARAMS


def tpu_worker_group(
    pool: SlicePoolConfig,
    shape: SliceShape,
    tiers: list[CapacityTier],
    replicas: int,
    max_replicas: int,
    ray: RayConfig,
    group_name: str,
    image: images.ImageRef | None = None,
    service_account: str = identities.WORKER,
) -> dict[str, Any]:
    """One shape's group. Its pods select the shape and the pool's ComputeClass and no capacity
    tier, so GKE walks the class's priorities of that shape (reservation, spot, on-demand...)
    for every replica; they tolerate the taints of every tier they may land on (Spot's).
    docs/capacity.md says why a tier nodeSelector would leave a pod Pending instead."""
    chips = str(shape.chips_per_host)
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account,
        "nodeSelector": {
            labels.GKE_TPU_ACCELERATOR: shape.gke_accelerator,
            labels.GKE_TPU_TOPOLOGY: shape.topology,
            labels.COMPUTE_CLASS: pool.compute_class,
        },
        "tolerations": [
            {"key": labels.COMPUTE_CLASS, "operator": "Equal", "value": pool.compute_class, "effect": "NoSchedule"},
            {"key": labels.TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        ],
        "containers": [
            {
                "name": "ray-worker",
                "image": image.image if image else ray.tpu_image,
                "resources": {
                    "requests": {labels.TPU_RESOURCE: chips, "cpu": "8", "memory": "32Gi"},
                    "limits": {labels.TPU_RESOURCE: chips, "memory": "32Gi"},
                },
                "env": [{"name": "JAX_PLATFORMS", "value": "tpu,cpu"}],
                # MXLA (multi-slice DCN) traffic stays on the pod network.
                "ports": [{"containerPort": MEGASCALE_PORT, "name": "mxla"}],
            }
        ],
    }
    for tier in tiers:
        if (toleration := capacity.toleration(tier.kind)) and toleration not in pod_spec["tolerations"]:
            pod_spec["tolerations"].append(toleration)
    return {
        "groupName": group_name,
        # One replica is one slice: KubeRay creates and deletes its numOfHosts pods together.
        "replicas": replicas,
        "minReplicas": 0,
        "maxReplicas": max_replicas,
        "numOfHosts": shape.hosts,
        # Ray node labels: the pool and generation are the group's; the tier is GKE's choice per
        # replica, so no static ray.io/market-type (it would lie for every tier but one).
        "labels": {labels.SLICE_POOL: pool.name, labels.GENERATION: shape.generation},
        "rayStartParams": {},
        "template": _template(pod_spec, image),
    }


def _template(pod_spec: dict[str, Any], image: images.ImageRef | None) -> dict[str, Any]:
    if image is not None and not image.built and image.image == image.base:
        # The -tpu base stands in for this project's image until its digest is known.
        return {"metadata": {"annotations": {labels.IMAGE_PENDING: image.name}}, "spec": pod_spec}
    if image is None or not image.built:
        return {"spec": pod_spec}
    # A built image names no Ray version; its pinned -tpu base does (policies read it here).
    return {"metadata": {"annotations": {labels.BASE_IMAGE: image.base}}, "spec": pod_spec}


def group_name(role: str, shape: SliceShape) -> str:
    """train-v6e-16: the role and the shape's Ray pod type (one group per shape)."""
    return f"{role}-{shape.pod_type}"


def tpu_worker_groups(
    pool: SlicePoolConfig,
    slices: int,
    ray: RayConfig,
    role: str,
    image: images.ImageRef | None = None,
    service_account: str = identities.WORKER,
) -> list[dict[str, Any]]:
    """One group per shape of the chain: the pool's shape, starting with `slices` replicas,
    then each fallback shape, starting empty. The driver scales a fallback group by asking for
    its TPU-<pod type>-head resource (ray_apps/chain.py); GKE picks each replica's tier."""
    groups = [
        tpu_worker_group(
            pool, pool.shape, pool.capacity, slices, slices, ray, group_name(role, pool.shape), image, service_account
        )
    ]
    for fallback in pool.fallback:
        shape = catalog.lookup(fallback.generation, fallback.topology)
        groups.append(
            tpu_worker_group(
                pool, shape, fallback.capacity, 0, slices, ray, group_name(role, shape), image, service_account
            )
        )
    return groups


def head_group(
    ray: RayConfig, image: images.ImageRef | None = None, service_account: str = identities.HEAD
) -> dict[str, Any]:
    group: dict[str, Any] = {
        # num-cpus 0: no task or actor is ever scheduled on the head.
        "rayStartParams": {"num-cpus": "0"},
        "serviceType": "ClusterIP",
        "template": {
            "spec": {
                "serviceAccountName": service_account,
                "nodeSelector": {labels.SYSTEM_POOL: "ray-system"},
                "containers": [
                    {
                        "name": "ray-head",
                        "image": image.image if image else ray.tpu_image,
                        "resources": {
                            "requests": {"cpu": "2", "memory": "8Gi"},
                            "limits": {"memory": "8Gi"},
                        },
                        "ports": [
                            {"containerPort": 6379, "name": "gcs"},
                            {"containerPort": 8265, "name": "dashboard"},
                            {"containerPort": 10001, "name": "client"},
                            {"containerPort": 8000, "name": "serve"},
                        ],
                    }
                ],
            }
        },
    }
    group["template"] = _template(group["template"]["spec"], image)
    return group


def ray_cluster_spec(
    pool: SlicePoolConfig,
    slices: int,
    ray: RayConfig,
    role: str,
    object_name: str,
    image: images.ImageRef | None = None,
) -> dict[str, Any]:
    # One service account per role: KubeRay binds its autoscaler Role to the head's (identities.py).
    head_account, worker_account = identities.pod_accounts(role)
    groups = tpu_worker_groups(pool, slices, ray, role, image, worker_account)
    head = head_group(ray, image, head_account)
    # Pod Security `restricted`, a read-only root, no API token, and the labels NetworkPolicies
    # select on (pod_security.py, network.py);
    # Ray's otherwise random ports are pinned so that a NetworkPolicy can name them (tpuray/ray_ports.py).
    pod_security.harden_template(head["template"], object_name, "head")
    head["rayStartParams"].update(PINNED_START_PARAMS)
    for group in groups:
        pod_security.harden_template(group["template"], object_name, "worker")
        group["rayStartParams"].update(PINNED_START_PARAMS)
    spec: dict[str, Any] = {
        "rayVersion": ray.version,
        "authOptions": {"mode": "token"},
        "enableInTreeAutoscaling": len(groups) > 1,
        "headGroupSpec": head,
        "workerGroupSpecs": groups,
    }
    if len(groups) > 1:
        # Autoscaler v2 scales worker groups by the label selectors of pending demand. KubeRay
        # injects its sidecar into the head pod with this securityContext, the head's writable
        # dirs it uses (Ray's logs it shares with the head, /tmp) and the only API token of the pod.
        autoscaler: dict[str, Any] = {
            "version": "v2",
            "idleTimeoutSeconds": 600,
            "upscalingMode": "Default",
            "securityContext": pod_security.container_security_context(),
            "volumeMounts": pod_security.writable_mounts(pod_security.AUTOSCALER_DIRS),
        }
        identities.autoscaler_token(head["template"]["spec"], autoscaler)
        spec["autoscalerOptions"] = autoscaler
    return spec
