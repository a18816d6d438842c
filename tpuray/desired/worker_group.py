"""The one model of a KubeRay worker group: the program builds it, and every reader of a rendered
(or foreign) Ray object reads a group back through it.

A TPU worker group is one slice shape: one replica is one slice, `numOfHosts` pods that KubeRay
creates and deletes together, each asking for `google.com/tpu` chips and selecting the slice's
GKE TPU accelerator and topology (tpu-facts.md section 1; KubeRay's TPU samples in
shared/conformance/kuberay). `WorkerGroup.tpu` builds such a group from the catalog's shape;
`WorkerGroup.from_manifest` reads any `workerGroupSpecs[]` entry, and `to_manifest` writes it back
unchanged (tests/test_worker_group.py round-trips every rendered group of every stack and every
conformance sample). Keys the model does not interpret (`suspend`, `idleTimeoutSeconds`, a pod
template's other fields) travel in `other` and `template` untouched, so a reader never loses what
it did not look at.

The readers: the emulator's plan (tpuray/local/emulator/plan.py), `local run` (tpuray/local/localrun.py), the
preview's resource lines and `--explain`, and the policies' `Group` (tpuray/policies/kube.py),
which asks `pod_shape` which catalog shape a pod template selects.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tpuray import catalog, labels
from tpuray.catalog import SliceShape

# workerGroupSpecs[] keys the model reads as typed fields (KubeRay v1.7.0 ray.io_rayclusters.yaml).
_TYPED_KEYS = (
    "groupName",
    "replicas",
    "minReplicas",
    "maxReplicas",
    "numOfHosts",
    "labels",
    "rayStartParams",
    "template",
)
# KubeRay's CRD default for an unset maxReplicas (ray.io_rayclusters.yaml, v1.7.0).
MAX_REPLICAS_DEFAULT = 2147483647


def as_int(value: Any) -> int | None:
    """4, 4.0 (the Pulumi engine's numbers) and "4" (Kubernetes quantities) are all 4."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def asks_for_tpu(container: Mapping[str, Any]) -> bool:
    resources = _mapping(container.get("resources"))
    return any(labels.TPU_RESOURCE in _mapping(resources.get(key)) for key in ("requests", "limits"))


def pod_chips(pod_spec: Mapping[str, Any]) -> int | None:
    """google.com/tpu summed over the pod's containers (TPU7x may split a VM over two), limits
    before requests; None when no container asks for TPU chips or one asks for an unreadable count."""
    containers = pod_spec.get("containers") if isinstance(pod_spec.get("containers"), list) else []
    total, seen = 0, False
    for container in (c for c in containers if isinstance(c, dict) and asks_for_tpu(c)):
        resources = _mapping(container.get("resources"))
        limits, requests = _mapping(resources.get("limits")), _mapping(resources.get("requests"))
        value = as_int(limits.get(labels.TPU_RESOURCE, requests.get(labels.TPU_RESOURCE)))
        if value is None:
            return None
        total, seen = total + value, True
    return total if seen else None


def pod_shape(template: Mapping[str, Any]) -> SliceShape | None:
    """The catalog shape a pod template selects: its TPU accelerator and topology nodeSelectors (the
    subslice annotation wins over the topology selector) and its chips per pod; None when they do
    not name a catalog shape."""
    spec = _mapping(template.get("spec"))
    annotations = _mapping(_mapping(template.get("metadata")).get("annotations"))
    selector = _mapping(spec.get("nodeSelector"))
    accelerator = selector.get(labels.GKE_TPU_ACCELERATOR)
    topology = annotations.get(labels.GKE_TPU_SLICE_TOPOLOGY, selector.get(labels.GKE_TPU_TOPOLOGY))
    if not isinstance(accelerator, str) or not isinstance(topology, str):
        return None
    try:
        return catalog.by_gke_labels(accelerator, topology, pod_chips(spec))
    except catalog.CatalogError:
        return None


@dataclass(frozen=True)
class WorkerGroup:
    """One `workerGroupSpecs[]` entry. Unset integer fields stay None (KubeRay's defaults apply)."""

    name: str
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    num_of_hosts: int | None = None
    ray_labels: Mapping[str, str] | None = None  # Ray node labels (KubeRay >= 1.5); None: unset
    ray_start_params: Mapping[str, str] | None = None  # None: unset
    template: Mapping[str, Any] = field(default_factory=dict)  # the pod template, as written
    other: Mapping[str, Any] = field(default_factory=dict)  # keys this model does not interpret

    # -- building -------------------------------------------------------------------------------

    @classmethod
    def tpu(
        cls,
        *,
        name: str,
        pool: str,
        shape: SliceShape,
        compute_class: str,
        tolerations: list[dict[str, str]],
        replicas: int,
        max_replicas: int,
        image: str,
        service_account: str,
        annotations: Mapping[str, str] | None = None,
        env: list[dict[str, Any]] | None = None,
        ports: list[dict[str, Any]] | None = None,
    ) -> WorkerGroup:
        """A group of one catalog shape: numOfHosts = hosts, google.com/tpu = chips per host, the
        shape's accelerator and topology and the pool's ComputeClass as nodeSelectors, and the
        pool and generation as Ray node labels (no tier label: GKE picks a tier per replica)."""
        chips = str(shape.chips_per_host)
        container: dict[str, Any] = {
            "name": "ray-worker",
            "image": image,
            "resources": {
                "requests": {labels.TPU_RESOURCE: chips, "cpu": "8", "memory": "32Gi"},
                "limits": {labels.TPU_RESOURCE: chips, "memory": "32Gi"},
            },
        }
        if env:
            container["env"] = list(env)
        if ports:
            container["ports"] = list(ports)
        pod_spec = {
            "serviceAccountName": service_account,
            "nodeSelector": {
                labels.GKE_TPU_ACCELERATOR: shape.gke_accelerator,
                labels.GKE_TPU_TOPOLOGY: shape.topology,
                labels.COMPUTE_CLASS: compute_class,
            },
            "tolerations": list(tolerations),
            "containers": [container],
        }
        template: dict[str, Any] = {"spec": pod_spec}
        if annotations:
            template = {"metadata": {"annotations": dict(annotations)}, "spec": pod_spec}
        return cls(
            name=name,
            replicas=replicas,
            min_replicas=0,
            max_replicas=max_replicas,
            num_of_hosts=shape.hosts,
            ray_labels={
                labels.SLICE_POOL: pool,
                labels.GENERATION: shape.generation,
                labels.TPU_POD_TYPE: shape.pod_type,
            },
            ray_start_params={},
            template=template,
        )

    def with_template(self, template: Mapping[str, Any]) -> WorkerGroup:
        return replace(self, template=template)

    def with_start_params(self, params: Mapping[str, str]) -> WorkerGroup:
        return replace(self, ray_start_params={**(self.ray_start_params or {}), **params})

    # -- reading and writing ---------------------------------------------------------------------

    @classmethod
    def from_manifest(cls, spec: Mapping[str, Any]) -> WorkerGroup:
        """Read one `workerGroupSpecs[]` entry (rendered or foreign)."""
        name = spec.get("groupName")

        def mapping(key: str) -> dict[str, Any] | None:
            value = spec.get(key)
            return copy.deepcopy(value) if isinstance(value, dict) else None

        return cls(
            name=name if isinstance(name, str) else "",
            replicas=as_int(spec.get("replicas")),
            min_replicas=as_int(spec.get("minReplicas")),
            max_replicas=as_int(spec.get("maxReplicas")),
            num_of_hosts=as_int(spec.get("numOfHosts")),
            ray_labels=mapping("labels"),
            ray_start_params=mapping("rayStartParams"),
            template=mapping("template") or {},
            other={k: copy.deepcopy(v) for k, v in spec.items() if k not in _TYPED_KEYS},
        )

    def to_manifest(self) -> dict[str, Any]:
        """The `workerGroupSpecs[]` entry, keys in the order KubeRay's samples write them."""
        out: dict[str, Any] = {"groupName": self.name} if self.name else {}
        for key, value in (
            ("replicas", self.replicas),
            ("minReplicas", self.min_replicas),
            ("maxReplicas", self.max_replicas),
            ("numOfHosts", self.num_of_hosts),
        ):
            if value is not None:
                out[key] = value
        if self.ray_labels is not None:
            out["labels"] = dict(self.ray_labels)
        if self.ray_start_params is not None:
            out["rayStartParams"] = dict(self.ray_start_params)
        out.update(copy.deepcopy(dict(self.other)))
        if self.template:
            out["template"] = copy.deepcopy(dict(self.template))
        return out

    # -- what the readers ask -----------------------------------------------------------------

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        spec = self.template.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def node_selector(self) -> Mapping[str, Any]:
        selector = self.pod_spec.get("nodeSelector")
        return selector if isinstance(selector, dict) else {}

    @property
    def shape(self) -> SliceShape | None:
        """The catalog shape of one replica (a slice), or None for a group that asks for no TPU shape."""
        return pod_shape(self.template)

    @property
    def chips_per_host(self) -> int | None:
        return pod_chips(self.pod_spec)

    @property
    def is_tpu(self) -> bool:
        return self.chips_per_host is not None

    @property
    def pool(self) -> str:
        """The slice pool (Ray node label tpuray.dev/slice-pool); a foreign group's own name."""
        return str((self.ray_labels or {}).get(labels.SLICE_POOL, self.name))

    @property
    def compute_class(self) -> str | None:
        value = self.node_selector.get(labels.COMPUTE_CLASS)
        return value if isinstance(value, str) else None

    @property
    def hosts(self) -> int:
        """Pods per replica: numOfHosts, KubeRay's default 1 when unset."""
        return 1 if self.num_of_hosts is None else self.num_of_hosts

    @property
    def start_slices(self) -> int:
        """Replicas KubeRay creates when the object is applied (unset: 1, as the emulator reads it)."""
        return 1 if self.replicas is None else self.replicas

    @property
    def most_slices(self) -> int:
        """maxReplicas, else replicas: how many slices the group may ever hold (emulator planning)."""
        if self.max_replicas is not None:
            return self.max_replicas
        return self.start_slices

    def slice_name(self, replica: int) -> str:
        """TPU_NAME of a replica's hosts on the emulator: <groupName>-<replica index>."""
        return f"{self.name}-{replica}"

    def owns_slice(self, slice_name: str) -> bool:
        """Whether an emulated slice (named by `slice_name`) is a replica of this group."""
        head, _, index = slice_name.rpartition("-")
        return head == self.name and index.isdigit()

    def desired_slices(self, autoscaling: bool) -> int:
        """How many replicas (slices, for a TPU group) KubeRay may run at once: replicas clamped to
        [minReplicas, maxReplicas] (utils.GetWorkerGroupDesiredReplicas, KubeRay v1.7.0; the CRD
        defaults them to 0, 0 and 2147483647), up to maxReplicas when the autoscaler scales the
        group; none while it is suspended."""
        if self.other.get("suspend") is True:
            return 0
        high = MAX_REPLICAS_DEFAULT if self.max_replicas is None else self.max_replicas
        if autoscaling:
            return high
        return min(max(self.replicas or 0, self.min_replicas or 0), high)


def worker_groups(cluster_spec: Mapping[str, Any]) -> list[WorkerGroup]:
    """Every well-formed worker group of a RayCluster spec, in order."""
    groups = cluster_spec.get("workerGroupSpecs")
    return [WorkerGroup.from_manifest(g) for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []


def pod_groups(manifest: Mapping[str, Any]) -> list[WorkerGroup]:
    """The head group (read through the same model: no groupName, no replicas) and every worker
    group of a KubeRay object: every pod template its cluster runs."""
    spec = labels.ray_cluster_spec(dict(manifest))
    head = spec.get("headGroupSpec")
    return ([WorkerGroup.from_manifest(head)] if isinstance(head, dict) else []) + worker_groups(spec)


def of_object(manifest: Mapping[str, Any]) -> list[WorkerGroup]:
    """The worker groups of a RayCluster, RayJob or RayService manifest."""
    return worker_groups(labels.ray_cluster_spec(dict(manifest)))
