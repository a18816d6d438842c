"""Read KubeRay objects the way the rules need them: clusters, worker groups, TPU asks.

Everything here tolerates missing or odd fields (the engine analyses inputs before the
provider fills defaults, and `tpuray check` reads hand-written YAML); `check` rejects
structurally broken objects before any rule runs (see manifests.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from tpuray import catalog
from tpuray.desired import worker_group
from tpuray.desired.worker_group import as_int  # noqa: F401 (the rules read it here)
from tpuray.labels import (
    GKE_TPU_ACCELERATOR,
    GKE_TPU_SLICE_TOPOLOGY,
    GKE_TPU_TOPOLOGY,
    RAY_KINDS,
    ray_cluster_spec_at,
)

RAY_TYPES = tuple(f"kubernetes:ray.io/{v}:{k}" for v in ("v1", "v1alpha1") for k in RAY_KINDS)
COMPUTE_CLASS_TYPE = "kubernetes:cloud.google.com/v1:ComputeClass"
SERVICE_TYPE = "kubernetes:core/v1:Service"
INGRESS_TYPES = ("kubernetes:networking.k8s.io/v1:Ingress", "kubernetes:networking.k8s.io/v1beta1:Ingress")
CLUSTER_TYPE = "gcp:container/cluster:Cluster"
NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
RESOURCE_POLICY_TYPE = "gcp:compute/resourcePolicy:ResourcePolicy"


def get(value: Any, *path: str | int) -> Any:
    for key in path:
        if isinstance(key, int):
            if not isinstance(value, list) or key >= len(value):
                return None
        elif not isinstance(value, dict):
            return None
        value = value[key] if isinstance(key, int) else value.get(key)
    return value


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def show(value: Any) -> str:
    """A value as it would appear in YAML, for messages."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "unset"
    return str(value).replace("True", "true").replace("False", "false")


@dataclass(frozen=True)
class RayClusterSpec:
    spec: dict[str, Any]
    path: str  # where it sits in the object: spec, spec.rayClusterSpec, spec.rayClusterConfig


def serve_applications(raw: Any) -> list[dict[str, Any]]:
    """The applications of a RayService's serveConfigV2 text, each a mapping; none when the text is
    missing or not YAML (serve-tpu-topology names a Serve config that is not YAML)."""
    try:
        doc = yaml.safe_load(raw) if isinstance(raw, str) else None
    except yaml.YAMLError:
        return []
    return [as_dict(app) for app in as_list(as_dict(doc).get("applications"))]


def cluster_spec(obj: dict[str, Any]) -> RayClusterSpec | None:
    """The RayCluster spec inside a RayCluster, RayJob or RayService (None: RayJob with clusterSelector)."""
    found = ray_cluster_spec_at(obj)
    if found is None or not isinstance(found[1], dict):
        return None
    return RayClusterSpec(found[1], found[0])


@dataclass(frozen=True)
class Group:
    """The head group or one worker group of a Ray cluster spec."""

    spec: dict[str, Any]
    path: str  # spec.workerGroupSpecs[0]
    name: str  # groupName, or "head"
    is_head: bool

    @property
    def where(self) -> str:
        return self.path if self.is_head else f"{self.path} (group {self.name!r})"

    @property
    def pod_spec(self) -> dict[str, Any]:
        return as_dict(get(self.spec, "template", "spec"))

    @property
    def annotations(self) -> dict[str, Any]:
        return as_dict(get(self.spec, "template", "metadata", "annotations"))

    @property
    def node_selector(self) -> dict[str, Any]:
        return as_dict(self.pod_spec.get("nodeSelector"))

    @property
    def containers(self) -> list[dict[str, Any]]:
        return [c for c in as_list(self.pod_spec.get("containers")) if isinstance(c, dict)]

    @property
    def labels(self) -> dict[str, Any]:
        """Ray node labels of the group (workerGroupSpecs[].labels)."""
        return as_dict(self.spec.get("labels"))

    def tpu_containers(self) -> list[tuple[int, dict[str, Any]]]:
        return [(i, c) for i, c in enumerate(self.containers) if worker_group.asks_for_tpu(c)]

    @property
    def is_tpu(self) -> bool:
        return bool(self.tpu_containers()) or GKE_TPU_ACCELERATOR in self.node_selector

    def chips_per_pod(self) -> int | None:
        """google.com/tpu summed over the pod's containers (TPU7x may split a VM over two)."""
        return worker_group.pod_chips(self.pod_spec)

    @property
    def accelerator(self) -> str | None:
        value = self.node_selector.get(GKE_TPU_ACCELERATOR)
        return value if isinstance(value, str) else None

    @property
    def topology(self) -> str | None:
        """The slice topology the pods get: the subslice annotation wins over the pool's selector."""
        value = self.annotations.get(GKE_TPU_SLICE_TOPOLOGY, self.node_selector.get(GKE_TPU_TOPOLOGY))
        return value if isinstance(value, str) else None

    def shape(self) -> catalog.SliceShape | None:
        """The catalog shape this group asks for, or None when its selectors do not name one."""
        return worker_group.pod_shape(as_dict(self.spec.get("template")))


def groups(cluster: RayClusterSpec) -> list[Group]:
    out = []
    head = cluster.spec.get("headGroupSpec")
    if isinstance(head, dict):
        out.append(Group(head, f"{cluster.path}.headGroupSpec", "head", True))
    for i, spec in enumerate(as_list(cluster.spec.get("workerGroupSpecs"))):
        if isinstance(spec, dict):
            name = spec.get("groupName") if isinstance(spec.get("groupName"), str) else str(i)
            out.append(Group(spec, f"{cluster.path}.workerGroupSpecs[{i}]", name, False))
    return out


def tpu_groups(obj: dict[str, Any]) -> list[Group]:
    cluster = cluster_spec(obj)
    return [g for g in groups(cluster) if not g.is_head and g.is_tpu] if cluster else []


def slices(g: Group, autoscaling: bool) -> int:
    """How many replicas (slices, for a TPU group) KubeRay may run of a worker group at once
    (WorkerGroup.desired_slices: KubeRay's clamp, the autoscaler's maxReplicas, none suspended)."""
    return worker_group.WorkerGroup.from_manifest(g.spec).desired_slices(autoscaling)


def multi_host_slices(obj: dict[str, Any]) -> int:
    """How many multi-host TPU slices an object's Ray cluster may run at once. A gang of hosts can
    be split over two slices only where there are two; with one, every host is of that slice."""
    cluster = cluster_spec(obj)
    if cluster is None:
        return 0
    autoscaling = cluster.spec.get("enableInTreeAutoscaling") is True
    return sum(slices(g, autoscaling) for g in tpu_groups(obj) if (s := g.shape()) is not None and s.multi_host)


def shapes_of_generation_topology(accelerator: str, topology: str) -> list[catalog.SliceShape]:
    """Every catalog form of one accelerator label and topology (2x4 has two)."""
    try:
        default = catalog.by_gke_labels(accelerator, topology)
    except catalog.CatalogError:
        return []
    return [s for s in catalog.all_shapes() if (s.generation, s.topology) == (default.generation, topology)]


def shapes_of_machine_type(machine_type: str) -> list[catalog.SliceShape]:
    return [s for s in catalog.all_shapes() if s.machine_type == machine_type]


def accelerator_labels() -> list[str]:
    return sorted({g.gke_accelerator for g in catalog.GENERATIONS.values()})


def generation_of_accelerator(accelerator: str) -> catalog.Generation | None:
    gens = catalog.GENERATIONS.values()
    return next((g for g in gens if accelerator in (g.gke_accelerator, *g.legacy_accelerators)), None)
