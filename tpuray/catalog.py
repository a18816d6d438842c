"""The TPU catalog: the single source of truth for every TPU generation and slice shape.

Every other module (node pools, ComputeClasses, KubeRay objects, policies, the local
emulator, cost) asks this module; none of them does TPU arithmetic of its own.

Facts and their public sources are collected in shared/reference/tpu-facts.md:
- chips per VM: v5e/v6e 1x1, 2x2 and 2x4 (on the -8t machine) are one VM; everything
  else is 4 chips per VM (Ray's get_chips_per_host, GKE machine types);
- Ray pod type = <gen>-<chips x TensorCores per chip>: v4, v5p and v7x have two
  TensorCores per chip, v5e and v6e one (Ray's infer_tpu_pod_type_from_topology);
- v5e/v6e 2x4 exists both as one 8-chip VM (-8t) and as two 4-chip VMs (-4t);
- TPU7x multi-host pools are placed with a workload policy, not a COMPACT placement
  policy with tpu_topology (GKE Ironwood docs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import cache


class Placement(str, Enum):
    """How GKE places the VMs of one slice."""

    SINGLE_HOST = "single-host"  # one VM: no placement policy needed
    COMPACT = "compact"  # placement_policy {type: COMPACT, tpu_topology}
    WORKLOAD_POLICY = "workload-policy"  # placement_policy {policy_name} -> HIGH_THROUGHPUT policy


@dataclass(frozen=True)
class Generation:
    name: str  # the name used in stack config: v4, v5e, v5p, v6e, tpu7x
    gke_accelerator: str  # cloud.google.com/gke-tpu-accelerator
    ray_generation: str  # Ray's generation string (v5litepod, v7x...)
    tensorcores_per_chip: int
    dimensions: int  # 2 for v5e/v6e topologies (AxB), 3 for the others (AxBxC)
    machine_prefix: str  # machine type without the -<chips>t suffix
    topologies: tuple[str, ...]
    single_host_machine_chips: dict[str, int]  # topology -> chips of its one VM

    @property
    def ray_accelerator_type(self) -> str:
        return "TPU-" + self.ray_generation.upper()


@dataclass(frozen=True)
class SliceShape:
    """One valid (generation, topology, machine type) combination."""

    generation: str
    topology: str
    chips: int
    hosts: int
    chips_per_host: int
    machine_type: str
    gke_accelerator: str
    ray_accelerator_type: str
    pod_type: str
    placement: Placement

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def head_resource(self) -> str:
        """The resource Ray puts on worker 0 of a slice (TPU-v6e-16-head)."""
        return f"TPU-{self.pod_type}-head"

    @property
    def key(self) -> str:
        return f"{self.generation} {self.topology} ({self.machine_type})"

    def as_json(self) -> dict[str, object]:
        return {
            "generation": self.generation,
            "topology": self.topology,
            "chips": self.chips,
            "hosts": self.hosts,
            "chips_per_host": self.chips_per_host,
            "machine_type": self.machine_type,
            "gke_accelerator": self.gke_accelerator,
            "ray_accelerator_type": self.ray_accelerator_type,
            "pod_type": self.pod_type,
            "multi_host": self.multi_host,
        }


_CUBE_TOPOLOGIES_V4 = (
    "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8",
    "8x8x8", "8x8x12", "8x8x16",
)  # fmt: skip
_CUBE_TOPOLOGIES_V5P = (
    "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
    "8x8x16", "8x16x16", "16x16x16", "16x16x24",
)  # fmt: skip
_CUBE_TOPOLOGIES_TPU7X = (
    "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8",
    "8x8x16", "8x16x16",
)  # fmt: skip
_LITE_TOPOLOGIES = ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")

GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation("v4", "tpu-v4-podslice", "v4", 2, 3, "ct4p-hightpu", _CUBE_TOPOLOGIES_V4,
                   {"2x2x1": 4}),
        Generation("v5e", "tpu-v5-lite-podslice", "v5litepod", 1, 2, "ct5lp-hightpu",
                   _LITE_TOPOLOGIES, {"1x1": 1, "2x2": 4, "2x4": 8}),
        Generation("v5p", "tpu-v5p-slice", "v5p", 2, 3, "ct5p-hightpu", _CUBE_TOPOLOGIES_V5P,
                   {"2x2x1": 4}),
        Generation("v6e", "tpu-v6e-slice", "v6e", 1, 2, "ct6e-standard", _LITE_TOPOLOGIES,
                   {"1x1": 1, "2x2": 4, "2x4": 8}),
        Generation("tpu7x", "tpu7x", "v7x", 2, 3, "tpu7x-standard", _CUBE_TOPOLOGIES_TPU7X,
                   {"2x2x1": 4}),
    )
}  # fmt: skip

CHIPS_PER_MULTI_HOST_VM = 4


class CatalogError(ValueError):
    """A generation, topology or machine type the catalog does not know."""


def topology_chips(topology: str) -> int:
    return math.prod(int(d) for d in topology.split("x"))


def _shape(gen: Generation, topology: str, chips_per_host: int) -> SliceShape:
    chips = topology_chips(topology)
    hosts = max(chips // chips_per_host, 1)
    if hosts == 1:
        placement = Placement.SINGLE_HOST
    elif gen.name == "tpu7x":
        placement = Placement.WORKLOAD_POLICY
    else:
        placement = Placement.COMPACT
    return SliceShape(
        generation=gen.name,
        topology=topology,
        chips=chips,
        hosts=hosts,
        chips_per_host=chips_per_host,
        machine_type=f"{gen.machine_prefix}-{chips_per_host}t",
        gke_accelerator=gen.gke_accelerator,
        ray_accelerator_type=gen.ray_accelerator_type,
        pod_type=f"{gen.ray_generation}-{chips * gen.tensorcores_per_chip}",
        placement=placement,
    )


@cache
def all_shapes() -> tuple[SliceShape, ...]:
    """Every shape, in generation then size order. The default form of a topology comes first."""
    shapes: list[SliceShape] = []
    for gen in GENERATIONS.values():
        for topology in gen.topologies:
            single = gen.single_host_machine_chips.get(topology)
            if single is not None:
                shapes.append(_shape(gen, topology, single))
            if single is None or single == 8:
                # 2x4 on v5e/v6e also comes as two 4-chip VMs (-4t); everything bigger
                # than one VM is 4 chips per VM.
                shapes.append(_shape(gen, topology, CHIPS_PER_MULTI_HOST_VM))
    return tuple(shapes)


def generation(name: str) -> Generation:
    try:
        return GENERATIONS[name]
    except KeyError:
        raise CatalogError(f"unknown TPU generation {name!r}; valid: {', '.join(GENERATIONS)}") from None


def topologies(gen_name: str) -> tuple[str, ...]:
    return generation(gen_name).topologies


def machine_types(gen_name: str, topology: str) -> tuple[str, ...]:
    return tuple(s.machine_type for s in all_shapes() if (s.generation, s.topology) == (gen_name, topology))


def lookup(gen_name: str, topology: str, machine_type: str | None = None) -> SliceShape:
    """The shape for a generation and topology; machine_type picks between two forms of 2x4."""
    gen = generation(gen_name)
    if topology not in gen.topologies:
        raise CatalogError(f"topology {topology!r} is not valid for {gen_name}; valid: {', '.join(gen.topologies)}")
    candidates = [s for s in all_shapes() if (s.generation, s.topology) == (gen_name, topology)]
    if machine_type is None:
        return candidates[0]
    for shape in candidates:
        if shape.machine_type == machine_type:
            return shape
    raise CatalogError(
        f"machine type {machine_type!r} does not fit {gen_name} {topology}; "
        f"valid: {', '.join(s.machine_type for s in candidates)}"
    )


def find(gen_name: str, topology: str, chips_per_host: int) -> SliceShape:
    """The shape of a generation and topology whose VMs have `chips_per_host` chips."""
    for shape in all_shapes():
        if (shape.generation, shape.topology, shape.chips_per_host) == (gen_name, topology, chips_per_host):
            return shape
    valid = ", ".join(str(s.chips_per_host) for s in all_shapes() if (s.generation, s.topology) == (gen_name, topology))
    raise CatalogError(
        f"{gen_name} {topology} has no {chips_per_host}-chip VMs; valid chips per host: {valid or 'none'}"
    )


def by_gke_labels(gke_accelerator: str, topology: str, chips_per_host: int | None = None) -> SliceShape:
    """The shape a Kubernetes object asks for through its TPU nodeSelectors."""
    gens = [g for g in GENERATIONS.values() if g.gke_accelerator == gke_accelerator]
    if gke_accelerator == "tpu-v5-lite-device":  # legacy single-host-only v5e label
        gens = [GENERATIONS["v5e"]]
    if not gens:
        valid = sorted({g.gke_accelerator for g in GENERATIONS.values()})
        raise CatalogError(f"unknown gke-tpu-accelerator {gke_accelerator!r}; valid: {', '.join(valid)}")
    gen = gens[0]
    shape = lookup(gen.name, topology)
    if chips_per_host is not None and chips_per_host != shape.chips_per_host:
        for candidate in all_shapes():
            if (candidate.generation, candidate.topology, candidate.chips_per_host) == (
                gen.name,
                topology,
                chips_per_host,
            ):
                return candidate
    return shape


def by_ray_accelerator_type(ray_accelerator_type: str) -> Generation:
    for gen in GENERATIONS.values():
        if gen.ray_accelerator_type == ray_accelerator_type:
            return gen
    valid = ", ".join(g.ray_accelerator_type for g in GENERATIONS.values())
    raise CatalogError(f"unknown Ray accelerator type {ray_accelerator_type!r}; valid: {valid}")
