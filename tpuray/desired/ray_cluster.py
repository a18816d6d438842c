"""The Ray cluster inside every KubeRay object: the TPU worker groups, one per shape of the
capacity chain (docs/capacity.md), and the CPU head group, each hardened for Pod Security `restricted`.

Every TPU worker group comes from the catalog through the one worker-group model
(tpuray/desired/worker_group.py): numOfHosts = hosts, replicas = slices, google.com/tpu = chips
per host, and the nodeSelectors that the KubeRay TPU webhook and GKE need. The RayJob, RayService
and RayCluster of infra/components/workloads.py all wrap `ray_cluster_spec`.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ray_apps import contracts
from tpuray import capacity, catalog, images, labels, notice
from tpuray.catalog import SliceShape
from tpuray.config import CapacityTier, RayConfig, SlicePoolConfig
from tpuray.desired import accounts, pod_security
from tpuray.desired.worker_group import WorkerGroup
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
    service_account: str = accounts.WORKER,
) -> WorkerGroup:
    """One shape's group. Its pods select the shape and the pool's ComputeClass and no capacity
    tier, so GKE walks the class's priorities of that shape (reservation, spot, on-demand...)
    for every replica; they tolerate the taints of every tier they may land on (Spot's).
    docs/capacity.md says why a tier nodeSelector would leave a pod Pending instead."""
    tolerations = [
        {"key": labels.COMPUTE_CLASS, "operator": "Equal", "value": pool.compute_class, "effect": "NoSchedule"},
        {"key": labels.TPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
    ]
    for tier in tiers:
        if (toleration := capacity.toleration(tier.kind)) and toleration not in tolerations:
            tolerations.append(toleration)
    return WorkerGroup.tpu(
        name=group_name,
        pool=pool.name,
        shape=shape,
        compute_class=pool.compute_class,
        tolerations=tolerations,
        # One replica is one slice: KubeRay creates and deletes its numOfHosts pods together.
        replicas=replicas,
        max_replicas=max_replicas,
        image=image.image if image else ray.tpu_image,
        service_account=service_account,
        annotations=_annotations(image),
        env=[
            {"name": "JAX_PLATFORMS", "value": "tpu,cpu"},
            # The host's node, for the run's placement records (ray_apps/contracts.py NODE_NAME_ENV).
            {"name": contracts.NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        # MXLA (multi-slice DCN) traffic stays on the pod network.
        ports=[{"containerPort": MEGASCALE_PORT, "name": "mxla"}],
    )


def _annotations(image: images.ImageRef | None) -> dict[str, str]:
    if image is not None and not image.built and image.image == image.base:
        # The -tpu base stands in for this project's image until its digest is known.
        return {labels.IMAGE_PENDING: image.name}
    if image is None or not image.built:
        return {}
    # A built image names no Ray version; its pinned -tpu base does (policies read it here).
    return {labels.BASE_IMAGE: image.base}


def _template(pod_spec: dict[str, Any], image: images.ImageRef | None) -> dict[str, Any]:
    annotations = _annotations(image)
    return {"metadata": {"annotations": annotations}, "spec": pod_spec} if annotations else {"spec": pod_spec}


def group_name(role: str, shape: SliceShape) -> str:
    """train-v6e-16: the role and the shape's Ray pod type (one group per shape)."""
    return f"{role}-{shape.pod_type}"


def tpu_worker_groups(
    pool: SlicePoolConfig,
    slices: int,
    ray: RayConfig,
    role: str,
    image: images.ImageRef | None = None,
    service_account: str = accounts.WORKER,
) -> list[WorkerGroup]:
    """One group per shape of the chain: the pool's shape, then each fallback shape, each up to
    `slices` replicas; GKE picks each replica's tier.

    With no fallback the one group starts with its `slices` replicas (no autoscaler runs). With a
    chain every group starts empty and the driver's demand (ray_apps/chain.py: whole slices of
    a shape) makes Ray's autoscaler add replicas. Why not start the first shape's slices: KubeRay
    submits a RayJob only once its cluster is Ready, every desired worker pod Running and Ready
    (ray-operator v1.5.0 rayjob_controller.go waits for `rayv1.Ready`; raycluster_controller.go
    sets it when all `DesiredWorkerReplicas` pods are ready), so a first shape out of stock on
    every tier would hold the submission, and with it the chain that falls through, until the
    job's activeDeadlineSeconds."""
    start = 0 if pool.fallback else slices
    groups = [
        tpu_worker_group(
            pool, pool.shape, pool.capacity, start, slices, ray, group_name(role, pool.shape), image, service_account
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
    ray: RayConfig, image: images.ImageRef | None = None, service_account: str = accounts.HEAD
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
    min_slices: int | None = None,
) -> dict[str, Any]:
    # One service account per role: KubeRay binds its autoscaler Role to the head's (identities.py).
    head_account, worker_account = accounts.pod_accounts(role)
    groups = tpu_worker_groups(pool, slices, ray, role, image, worker_account)
    if min_slices is not None and not pool.fallback:
        # Elastic training: the run keeps going on min_slices (ray_apps/elastic.py). Not with a
        # chain: KubeRay raises replicas to minReplicas, and the cluster would wait for them to
        # be Ready (tpu_worker_groups says why a chain's groups start empty).
        groups[0] = dataclasses.replace(groups[0], min_replicas=min_slices)
    if role == "train":  # a preemption or maintenance notice drains the Ray node (tpuray/notice.py)
        groups = [_with_notice(g) for g in groups]
    head = head_group(ray, image, head_account)
    # Pod Security `restricted`, a read-only root, no API token, and the labels NetworkPolicies
    # select on (pod_security.py, network.py);
    # Ray's otherwise random ports are pinned so that a NetworkPolicy can name them (tpuray/ray_ports.py).
    pod_security.harden_template(head["template"], object_name, "head")
    head["rayStartParams"].update(PINNED_START_PARAMS)
    groups = [_hardened(g, object_name) for g in groups]
    spec: dict[str, Any] = {
        "rayVersion": ray.version,
        "authOptions": {"mode": "token"},
        "enableInTreeAutoscaling": len(groups) > 1,
        "headGroupSpec": head,
        "workerGroupSpecs": [g.to_manifest() for g in groups],
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
        accounts.autoscaler_token(head["template"]["spec"], autoscaler)
        spec["autoscalerOptions"] = autoscaler
    return spec


def _with_notice(group: WorkerGroup) -> WorkerGroup:
    template = copy.deepcopy(dict(group.template))
    notice.apply(template["spec"])
    return group.with_template(template)


def _hardened(group: WorkerGroup, object_name: str) -> WorkerGroup:
    template = copy.deepcopy(dict(group.template))
    pod_security.harden_template(template, object_name, "worker")
    return group.with_template(template).with_start_params(PINNED_START_PARAMS)
