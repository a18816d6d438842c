"""Kueue queue rules: queued RayJobs, quotas that hold a whole slice, flavors that match a pool.

What Kueue itself does not refuse but what leaves TPU work outside the quotas or waiting forever
(tpuray/desired/queues.py builds the objects; docs/capacity.md "Queues"):
- a RayJob on TPU slices without `kueue.x-k8s.io/queue-name` in a stack that declares queues runs
  outside every quota (Kueue manages only labelled jobs unless manageJobsWithoutQueueName);
- Kueue admits a workload whole (all of its pods' requests against the quota at once), so a
  flavor's google.com/tpu quota below one slice of its shape never admits anything;
- a ResourceFlavor's nodeLabels go into the nodeSelector of every pod admitted under it, so a
  flavor that matches no node pool or ComputeClass of the stack leaves its pods Pending.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.labels import COMPUTE_CLASS, GKE_TPU_ACCELERATOR, GKE_TPU_TOPOLOGY, KUEUE_QUEUE_NAME, TPU_RESOURCE
from tpuray.policies.core import GKE, MANDATORY, PROJECT, Finding, Resource, Rule
from tpuray.policies.kube import (
    RAY_TYPES,
    as_dict,
    as_int,
    as_list,
    get,
    shapes_of_generation_topology,
    show,
    tpu_groups,
)
from tpuray.policies.rules_stack import providers

KUEUE_TYPES = {
    kind: tuple(f"kubernetes:kueue.x-k8s.io/{v}:{kind}" for v in ("v1beta1", "v1beta2"))
    for kind in ("ClusterQueue", "LocalQueue", "ResourceFlavor")
}


def _of(resources: list[Resource], kind: str) -> list[Resource]:
    return [r for r in resources if r.type in KUEUE_TYPES[kind]]


def _name(res: Resource) -> Any:
    return get(res.props, "metadata", "name")


def _namespace(res: Resource) -> Any:
    """An object's namespace: one a manifest leaves out is the one kubectl applies it to, default."""
    return get(res.props, "metadata", "namespace") or "default"


def _queued_rayjobs(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    local_queues = _of(resources, "LocalQueue")
    if not local_queues:
        return
    by_namespace: dict[Any, list[Any]] = {}
    for lq in local_queues:
        by_namespace.setdefault(_namespace(lq), []).append(_name(lq))
    for res in resources:
        if res.type not in RAY_TYPES or res.kind != "RayJob" or not tpu_groups(res.props):
            continue
        namespace = _namespace(res)
        names = sorted(str(n) for n in by_namespace.get(namespace, []))
        fix = f"one of {', '.join(names)}" if names else f"a LocalQueue declared in namespace {show(namespace)}"
        queue = get(res.props, "metadata", "labels", KUEUE_QUEUE_NAME)
        if queue is None:
            yield Finding(
                f"{res.label}: metadata.labels has no {KUEUE_QUEUE_NAME!r} but this stack declares Kueue queues; the job "
                f"would take its TPU slices outside every quota: label it with {fix}",
                res.urn,
            )
        elif queue not in names:
            yield Finding(
                f"{res.label}: metadata.labels[{KUEUE_QUEUE_NAME!r}] is {show(queue)}, which is no LocalQueue of namespace "
                f"{show(namespace)}; Kueue never admits it: use {fix}",
                res.urn,
            )


def _tpu_quotas(cq: Resource) -> Iterator[tuple[str, str, int]]:
    """(where, flavor name, nominal + borrowing chips) of each google.com/tpu quota of a ClusterQueue."""
    for i, group in enumerate(as_list(get(cq.props, "spec", "resourceGroups"))):
        for j, flavor in enumerate(as_list(as_dict(group).get("flavors"))):
            for resource in as_list(as_dict(flavor).get("resources")):
                resource = as_dict(resource)
                nominal = as_int(resource.get("nominalQuota"))
                if resource.get("name") != TPU_RESOURCE or nominal is None:
                    continue
                total = nominal + (as_int(resource.get("borrowingLimit")) or 0)
                yield f"spec.resourceGroups[{i}].flavors[{j}]", str(as_dict(flavor).get("name")), total


def _quota_fits_a_slice(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    flavors = {_name(f): as_dict(get(f.props, "spec", "nodeLabels")) for f in _of(resources, "ResourceFlavor")}
    for cq in _of(resources, "ClusterQueue"):
        for where, flavor, total in _tpu_quotas(cq):
            node_labels = flavors.get(flavor, {})
            accelerator, topology = node_labels.get(GKE_TPU_ACCELERATOR), node_labels.get(GKE_TPU_TOPOLOGY)
            if not isinstance(accelerator, str) or not isinstance(topology, str):
                continue  # not a TPU flavor of this stack
            shapes = shapes_of_generation_topology(accelerator, topology)
            chips = shapes[0].chips if shapes else 0
            if 0 < total < chips:
                yield Finding(
                    f"{cq.label}: {where} {flavor!r} lets {total} {TPU_RESOURCE} in (nominalQuota plus borrowingLimit) "
                    f"but one {accelerator} {topology} slice is {chips} chips; Kueue admits a slice's pods all at once, "
                    f"so nothing is ever admitted: set nominalQuota to {chips} or more (or 0 for none)",
                    cq.urn,
                )


def _flavor_matches_a_pool(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    offered = providers(resources)
    for rf in _of(resources, "ResourceFlavor"):
        node_labels = as_dict(get(rf.props, "spec", "nodeLabels"))
        accelerator = node_labels.get(GKE_TPU_ACCELERATOR)
        if not isinstance(accelerator, str):
            continue  # not a TPU flavor (the cpu/memory flavor has no labels)
        topology, compute_class = node_labels.get(GKE_TPU_TOPOLOGY), node_labels.get(COMPUTE_CLASS)
        if any(
            p.accelerator == accelerator and topology in (None, p.topology) and compute_class in (None, p.compute_class)
            for p in offered
        ):
            continue
        where = f"compute class {compute_class!r}" if compute_class is not None else "this stack"
        yield Finding(
            f"{rf.label}: spec.nodeLabels select {accelerator} {topology or '(any topology)'} in {where}, which no node "
            "pool or ComputeClass of this stack provides; pods admitted under this flavor would stay Pending: use the "
            "labels of a slice pool (tpuray:queues quotas name pools)",
            rf.urn,
        )


RULES = (
    Rule(
        "rayjob-queued",
        "Where the stack declares Kueue queues, every RayJob on TPU slices names one of its namespace's LocalQueues.",
        MANDATORY,
        stack_check=_queued_rayjobs,
        kubernetes=True,
        profile=PROJECT,  # Kueue runs an unlabelled job; this project keeps slices inside the quotas
    ),
    Rule(
        "queue-quota-fits-a-slice",
        "A ClusterQueue's google.com/tpu quota on a TPU flavor is 0 or at least one slice of the flavor's shape.",
        MANDATORY,
        stack_check=_quota_fits_a_slice,
        kubernetes=True,
        profile=GKE,  # nothing is ever admitted: the job waits forever
    ),
    Rule(
        "queue-flavor-matches-a-pool",
        "Every TPU ResourceFlavor selects a shape (and compute class) that a node pool or ComputeClass provides.",
        MANDATORY,
        stack_check=_flavor_matches_a_pool,
        profile=GKE,  # admitted pods stay Pending
    ),
)
