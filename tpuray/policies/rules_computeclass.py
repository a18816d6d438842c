"""GKE ComputeClass: the CRD's own CEL rules (shared/schemas/gke), checked before apply, plus TPU shapes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.policies.core import MANDATORY, Resource, Rule
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


def _flex_enabled(p: dict[str, Any]) -> bool:
    return as_dict(p.get("flexStart")).get("enabled") is True


def _flex_not_spot(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for where, p in priorities(res):
        if _flex_enabled(p) and p.get("spot") is True:
            yield (
                f"{res.label}: {where} sets flexStart.enabled: true and spot: true; GKE rejects the pair: "
                "make flex-start and spot two priorities"
            )


def _capacity_check_wait(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for where, p in priorities(res):
        if "capacityCheckWaitTimeSeconds" in p and "tpu" not in p and not _flex_enabled(p):
            yield (
                f"{res.label}: {where}.capacityCheckWaitTimeSeconds is {show(p['capacityCheckWaitTimeSeconds'])} on a "
                "priority with neither flexStart nor tpu; GKE only honours it there: remove it or add flexStart/tpu"
            )


def _machine_family_xor_type(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for where, p in priorities(res):
        if "machineFamily" in p and "machineType" in p:
            yield (
                f"{res.label}: {where} sets machineFamily {show(p['machineFamily'])} and machineType "
                f"{show(p['machineType'])}; they are mutually exclusive: keep one"
            )
        if "machineType" in p and ("minCores" in p or "minMemoryGb" in p):
            yield (
                f"{res.label}: {where} sets machineType {show(p['machineType'])} with minCores/minMemoryGb; "
                "a machine type fixes both: remove minCores/minMemoryGb or use machineFamily"
            )


def _reservations(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for where, p in priorities(res):
        if "reservations" not in p:
            continue
        r = as_dict(p.get("reservations"))
        affinity, specific = r.get("affinity"), as_list(r.get("specific"))
        if specific and affinity != "Specific":
            yield (
                f"{res.label}: {where}.reservations.affinity is {show(affinity)} with {len(specific)} specific "
                "reservation(s); specific reservations need affinity: Specific"
            )
        if affinity == "Specific" and not specific:
            yield (
                f"{res.label}: {where}.reservations.affinity is 'Specific' with no reservation; "
                "list at least one under reservations.specific[].name"
            )
        for j, item in enumerate(specific):
            if not isinstance(as_dict(item).get("name"), str) or not as_dict(item).get("name"):
                yield f"{res.label}: {where}.reservations.specific[{j}].name is {show(as_dict(item).get('name'))}; name the reservation"


def _priority_score(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    items = priorities(res)
    scored = [w for w, p in items if "priorityScore" in p]
    if scored and len(scored) != len(items):
        missing = [w for w, p in items if "priorityScore" not in p]
        yield (
            f"{res.label}: priorityScore is set on {', '.join(scored)} but not on {', '.join(missing)}; "
            "GKE requires it on all priorities or none: set it everywhere or remove it"
        )


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
            yield f"{res.label}: {where}.tpu.topology is {show(topo)}; valid for {kind}: {', '.join(gen.topologies)}"
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


def _rule(name: str, description: str, check: Any, topology: bool = False) -> Rule:
    return Rule(name, description, MANDATORY, (COMPUTE_CLASS_TYPE,), check, topology=topology, kubernetes=True)


RULES = (
    _rule(
        "compute-class-flex-start-not-spot",
        "ComputeClass priorities never combine flexStart with spot.",
        _flex_not_spot,
    ),
    _rule(
        "compute-class-capacity-check-wait",
        "ComputeClass capacityCheckWaitTimeSeconds appears only on flexStart or tpu priorities.",
        _capacity_check_wait,
    ),
    _rule(
        "compute-class-machine-family-xor-type",
        "ComputeClass priorities set machineFamily or machineType, not both (nor machineType with minCores).",
        _machine_family_xor_type,
    ),
    _rule(
        "compute-class-reservations",
        "ComputeClass specific reservations go with affinity Specific, and Specific names at least one.",
        _reservations,
    ),
    _rule(
        "compute-class-priority-score",
        "ComputeClass priorityScore is set on every priority or on none.",
        _priority_score,
    ),
    _rule(
        "compute-class-when-unsatisfiable",
        "ComputeClasses set whenUnsatisfiable explicitly.",
        _when_unsatisfiable,
    ),
    _rule(
        "compute-class-tpu-shape",
        "ComputeClass tpu priorities name a catalog shape: type, topology, chips per node and machine type agree.",
        _tpu_shape,
        topology=True,
    ),
)
