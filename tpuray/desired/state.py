"""`desire(cfg)`: the stack's desired Ray objects, computed once from the typed config, Pulumi-free.

Data flows one way (docs/architecture.md): stack config -> `StackConfig` -> the catalog and the
capacity table -> `desire` -> the Pulumi components, which only serialise what they are handed.
Everything a Ray object needs is derived here, once: its name, its pool and shape, the image it
runs (`images.workload_images`, read once per stack), the Hugging Face token version, the train
entrypoint as the contract's `TrainArgs` (ray_apps/contracts.py), and its Ray cluster spec, whose
TPU worker groups are `WorkerGroup`s (worker_group.py). `tpuray preview`, `render`, `check`, the
emulator and the policy pack all see the objects built from this one value.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ray_apps import contracts
from tpuray import bundle, images
from tpuray.config import SlicePoolConfig, StackConfig
from tpuray.desired import llm_stack, ray_cluster
from tpuray.desired.worker_group import WorkerGroup, worker_groups


@dataclass(frozen=True)
class RayObject:
    """One KubeRay object of the stack: a RayJob (train), RayService (serve) or RayCluster (interactive)."""

    kind: str
    name: str
    role: str  # train | serve | interactive: its service accounts and its worker groups' names
    pool: SlicePoolConfig
    image: images.ImageRef
    cluster: Mapping[str, Any]  # the RayCluster spec, worker groups as rendered by WorkerGroup
    train_args: contracts.TrainArgs | None = None  # the RayJob's entrypoint arguments

    @property
    def worker_groups(self) -> list[WorkerGroup]:
        return worker_groups(self.cluster)

    @property
    def autoscaling(self) -> bool:
        return self.cluster["enableInTreeAutoscaling"] is True

    @property
    def entrypoint(self) -> str:
        """`python -m ray_apps.train FLAGS`: the train contract's own flags, in the rendered order."""
        assert self.train_args is not None
        argv = self.train_args.to_argv(contracts.RENDERED_TRAIN_FLAGS)
        return shlex.join(["python", "-m", contracts.TRAIN_MODULE, *argv])


@dataclass(frozen=True)
class StackDesire:
    config: StackConfig
    images: Mapping[str, images.ImageRef]  # workload (train | serve | interactive) -> its image
    hf_token_version: str | None  # the Secret Manager version of the LLM's Hugging Face token
    bundle_uri: str  # gs://.../tpuray-apps-<sha256[:16]>.zip: ray_apps/ as it is now
    objects: tuple[RayObject, ...]

    def of_kind(self, kind: str) -> RayObject | None:
        return next((o for o in self.objects if o.kind == kind), None)

    @property
    def runtime_env(self) -> dict[str, Any]:
        # No pip: the image carries the apps' dependencies (images/ray-tpu), so pods install
        # nothing at start and private nodes need no egress to PyPI.
        return {"working_dir": self.bundle_uri}

    @property
    def unbuilt_images(self) -> list[str]:
        return sorted({i.name for i in self.images.values() if not i.built})


def object_name(cfg: StackConfig, role: str) -> str:
    """tpuray-prod-train: the cluster's name and the object's role."""
    return f"{cfg.cluster.name}-{role}"


def train_args(cfg: StackConfig) -> contracts.TrainArgs:
    """The training RayJob's arguments: the pool's shape from the catalog, the stack's run settings."""
    train = cfg.workloads.train
    assert train is not None
    pool = cfg.pool(train.pool)
    shape = pool.shape
    return contracts.TrainArgs(
        accelerator_type=shape.ray_accelerator_type,
        topology=shape.topology,
        hosts_per_slice=shape.hosts,
        chips_per_host=shape.chips_per_host,
        slices=train.max_slices,
        min_slices=train.min_slices if train.elastic else None,
        batch_policy=train.batch_policy if train.elastic else None,
        steps=train.steps,
        checkpoint_every=train.checkpoint_every,
        data_uri=train.data_uri,
        storage_uri=train.storage_uri,
        run_name=object_name(cfg, "train"),
        max_failures=train.max_failures,
        # The step watchdog fails a hung attempt at the TpurayHungGangStepStalled threshold.
        watchdog_factor=cfg.observability.hung_gang.step_factor,
        watchdog_floor_s=cfg.observability.hung_gang.floor_seconds,
        device="tpu",
        # The chain's other shapes: the driver asks for them in order when the first gets no
        # whole slice in time; GKE walks the capacity tiers of each shape (docs/capacity.md).
        fallback_shapes=contracts.format_shapes([s.shape_step for s in pool.fallback_shapes]),
    )


def desire(cfg: StackConfig) -> StackDesire:
    """The stack's desired Ray objects, each built once (public API; the module docstring says why).

    Args:
        cfg: a validated stack config (`tpuray.config.load_stack`).

    Returns:
        The `StackDesire`: the config, the workload images, the Hugging Face token version, the
        bundle URI and the RayJob / RayService / RayCluster the stack declares, in that order."""
    workload_images = images.workload_images(cfg)
    token_version = llm_stack.hf_token_version(cfg)
    wl = cfg.workloads
    objects = []

    def ray_object(kind: str, role: str, pool: str, slices: int, args: contracts.TrainArgs | None = None) -> RayObject:
        name = object_name(cfg, role)
        image = workload_images[role]
        elastic_min = args.min_slices if args is not None else None  # an elastic train run's fewest slices
        cluster = ray_cluster.ray_cluster_spec(cfg.pool(pool), slices, cfg.ray, role, name, image, elastic_min)
        if role == "serve" and token_version:
            # HF_TOKEN_PATH of the LLMConfig is a file of the Secret Manager add-on (hf_secret.py).
            llm_stack.mount_token(cluster, name)
        return RayObject(kind, name, role, cfg.pool(pool), image, cluster, args)

    if wl.train:
        objects.append(ray_object("RayJob", "train", wl.train.pool, wl.train.max_slices, train_args(cfg)))
    if wl.serve:
        replicas = llm_stack.max_replicas(cfg) if wl.serve.backend == "llm" else wl.serve.replicas
        objects.append(ray_object("RayService", "serve", wl.serve.pool, replicas))
    if wl.interactive:
        objects.append(ray_object("RayCluster", "interactive", wl.interactive.pool, wl.interactive.slices))
    return StackDesire(
        config=cfg,
        images=workload_images,
        hf_token_version=token_version,
        bundle_uri=bundle.current().uri(wl.bundle_uri),
        objects=tuple(objects),
    )
