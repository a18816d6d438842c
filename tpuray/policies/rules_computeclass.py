"""GKE ComputeClass rules the CRD itself does not state: explicit whenUnsatisfiable, reservation names, TPU shapes.

The CRD's own x-kubernetes-validations rules (flex-start with spot, machineFamily with
machineType, reservations affinity, priorityScore on all or none, capacityCheckWaitTimeSeconds)
are not copied here: crd-validation-rules evaluates them from the packaged CRD with a CEL library.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.policies.core import GKE, MANDATORY, PROJECT, Profile, Resource, Rule
from tpuray.policies.kube import (
    COMPUTE_CLASS_TYPE,
    as_dict,
    as_int,
    as_list,
    generation_of_accelerator,
    shapes_of_generation_topology,
    show,
)

WHEN_UNSATISFIABLE = ("ScaleUpAnyway", "DoNotScaleUp")


def priorities(res: Resource) -> list[tuple[str, dict[str, Any]]]:
    items = as_list(as_dict(res.props.get("spec")).get("priorities"))
    return [(f"spec.priorities[{i}]", p) for i, p in enumerate(items) if isinstance(p, dict)]


def _reservation_names(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """The CRD requires `name` on a specific reservation but accepts an empty one; GKE cannot find ''."""
    for where, p in priorities(res):
        for j, item in enumerate(as_list(as_dict(p.get("reservations")).get("specific"))):
            if as_dict(item).get("name") == "":
                yield f"{res.label}: {where}.reservations.specific[{j}].name is ''; name the reservation"


def _when_unsatisfiable(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    value = as_dict(res.props.get("spec")).get("whenUnsatisfiable")
    if value not in WHEN_UNSATISFIABLE:
        yield (
            f"{res.label}: spec.whenUnsatisfiable is {show(value)}; its default changed between GKE versions "
            "(ScaleUpAnyway, now DoNotScaleUp): set DoNotScaleUp (or ScaleUpAnyway) explicitly"
        )


def _tpu_shape(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for where, p in priorities(res):
        tpu = p.get("tpu")
        if tpu is None:
            continue
        tpu = as_dict(tpu)
        kind, topo, count = tpu.get("type"), tpu.get("topology"), as_int(tpu.get("count"))
        gen = generation_of_accelerator(kind) if isinstance(kind, str) else None
        if gen is None:
            yield f"{res.label}: {where}.tpu.type is {show(kind)}, not a GKE TPU accelerator: use e.g. tpu-v6e-slice"
            continue
        forms = shapes_of_generation_topology(kind, topo) if isinstance(topo, str) else []
        if not forms:
            yield f"{res.label}: {where}.tpu.topology is {show(topo)}; valid for {kind}: {gen.describe_topologies()}"
            continue
        shape = next((s for s in forms if s.chips_per_host == count), None)
        if shape is None:
            valid = " or ".join(str(s.chips_per_host) for s in forms)
            yield (
                f"{res.label}: {where}.tpu.count is {show(tpu.get('count'))}; count is chips per node and a "
                f"{gen.name} {topo} node has {valid}: set count to that"
            )
            continue
        machine = p.get("machineType")
        if machine is not None and machine != shape.machine_type:
            yield (
                f"{res.label}: {where}.machineType is {show(machine)} but {gen.name} {topo} with {count} chips per "
                f"node runs on {shape.machine_type}: set machineType: {shape.machine_type}"
            )


def _rule(name: str, description: str, check: Any, profile: Profile, topology: bool = False) -> Rule:
    return Rule(
        name, description, MANDATORY, (COMPUTE_CLASS_TYPE,), check, topology=topology, kubernetes=True, profile=profile
    )


RULES = (
    _rule(
        "compute-class-reservation-name",
        "ComputeClass specific reservations have a non-empty name.",
        _reservation_names,
        GKE,  # GKE finds no reservation named '': the nodes are never created
    ),
    _rule(
        "compute-class-when-unsatisfiable",
        "ComputeClasses set whenUnsatisfiable explicitly.",
        _when_unsatisfiable,
        PROJECT,  # either default works on GKE; this project wants the behaviour written down
    ),
    _rule(
        "compute-class-tpu-shape",
        "ComputeClass tpu priorities name a catalog shape: type, topology, chips per node and machine type agree.",
        _tpu_shape,
        GKE,
        topology=True,
    ),
)
