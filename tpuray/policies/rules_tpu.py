"""TPU worker groups of RayCluster, RayJob.spec.rayClusterSpec and RayService.spec.rayClusterConfig.

All TPU facts come from tpuray.catalog; these rules only compare.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray import capacity, catalog
from tpuray.labels import (
    COMPUTE_CLASS,
    GKE_SPOT,
    GKE_TPU_ACCELERATOR,
    GKE_TPU_SLICE_TOPOLOGY,
    GKE_TPU_TOPOLOGY,
    KUEUE_QUEUE_NAME,
    MARKET_TYPE,
    RAY_TPU_POD_TYPE,
    RAY_TPU_SLICE_NAME,
    RAY_TPU_TOPOLOGY,
    RAY_TPU_WORKER_ID,
    SLICE_POOL,
    TPU_RESOURCE,
)
from tpuray.policies.core import GKE, MANDATORY, PROJECT, Resource, Rule
from tpuray.policies.kube import (
    RAY_TYPES,
    Group,
    accelerator_labels,
    as_dict,
    as_int,
    cluster_spec,
    generation_of_accelerator,
    multi_host_slices,
    shapes_of_generation_topology,
    show,
    tpu_groups,
)


def _node_selectors(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    tier_labels = [t.node_label for t in capacity.TIERS if t.node_label is not None]
    for g in tpu_groups(res.props):
        sel = f"{g.where}.template.spec.nodeSelector"
        compute_class = g.node_selector.get(COMPUTE_CLASS)
        for key in tier_labels:
            if compute_class is not None and key in g.node_selector:
                yield (
                    f"{res.label}: {sel}[{key!r}] pins one capacity tier of ComputeClass {show(compute_class)}; "
                    "GKE then never falls back to the class's other priorities and the pods stay Pending while "
                    "that tier has no capacity (docs/capacity.md): remove it and tolerate the tier's taint instead"
                )
        acc, topo = g.accelerator, g.node_selector.get(GKE_TPU_TOPOLOGY)
        if acc is None:
            yield (
                f"{res.label}: {sel} has no {GKE_TPU_ACCELERATOR!r}; a TPU group must name its TPU generation "
                f"so GKE schedules it on TPU nodes: add one of {', '.join(accelerator_labels())}"
            )
        elif acc not in accelerator_labels() and acc != "tpu-v5-lite-device":
            yield (
                f"{res.label}: {sel}[{GKE_TPU_ACCELERATOR!r}] is {show(acc)}, not a GKE TPU accelerator; "
                f"use one of {', '.join(accelerator_labels())}"
            )
            continue
        if topo is None:
            why = (
                f" (the pod annotation {GKE_TPU_SLICE_TOPOLOGY} alone is GKE dynamic slicing, which the "
                "TPU webhook of the Ray operator add-on does not accept)"
                if GKE_TPU_SLICE_TOPOLOGY in g.annotations
                else ""
            )
            yield (
                f"{res.label}: {sel} has no {GKE_TPU_TOPOLOGY!r}; the KubeRay TPU webhook rejects a TPU worker group "
                f"without it{why}: add the slice topology, e.g. {GKE_TPU_TOPOLOGY}: 4x4"
            )
            continue
        if acc is None:
            continue
        if not isinstance(topo, str) or not shapes_of_generation_topology(acc, topo):
            gen = generation_of_accelerator(acc)
            valid = gen.describe_topologies() if gen else ""
            yield (
                f"{res.label}: {sel}[{GKE_TPU_TOPOLOGY!r}] is {show(topo)}, which is not a topology of {acc}; "
                f"use one of {valid}"
            )
            continue
        sub = g.annotations.get(GKE_TPU_SLICE_TOPOLOGY)
        if isinstance(sub, str) and not shapes_of_generation_topology(acc, sub):
            yield (
                f"{res.label}: {g.where}.template.metadata.annotations[{GKE_TPU_SLICE_TOPOLOGY!r}] is {show(sub)}, "
                f"which is not a topology of {acc}: use a valid subslice topology"
            )
            continue
        shape = g.shape()
        if acc in catalog.SINGLE_HOST_ONLY_ACCELERATORS and shape is not None and shape.multi_host:
            yield (
                f"{res.label}: {sel}[{GKE_TPU_ACCELERATOR!r}] is {show(acc)}, a label of single-host slices only, "
                f"but {shape.chips_per_host} chips per pod make {shape.topology} {shape.hosts_text}; no node pool of "
                f"that label runs it: use {catalog.GENERATIONS[shape.generation].gke_accelerator}"
            )


def _tpu_quantities(g: Group) -> Iterator[tuple[str, Any, Any]]:
    for i, c in g.tpu_containers():
        res = as_dict(c.get("resources"))
        yield (
            f"{g.where}.template.spec.containers[{i}].resources",
            as_dict(res.get("requests")).get(TPU_RESOURCE),
            as_dict(res.get("limits")).get(TPU_RESOURCE),
        )


def _chips_per_host(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for g in tpu_groups(res.props):
        quantities = list(_tpu_quantities(g))
        if not quantities:
            yield (
                f"{res.label}: {g.where} selects TPU nodes but no container requests {TPU_RESOURCE!r}; "
                "set resources.requests and resources.limits of the Ray container to the chips per host"
            )
            continue
        broken = False
        for where, request, limit in quantities:
            # Kubernetes copies a lone limit into the request (the TPU webhook and Ray's tests
            # accept limit-only); an extended resource cannot be overcommitted, so a request
            # needs a limit and the two must be equal.
            if limit is None or as_int(limit) is None or (request is not None and as_int(request) != as_int(limit)):
                broken = True
                yield (
                    f"{res.label}: {where} has {TPU_RESOURCE} requests {show(request)} and limits {show(limit)}; "
                    "set limits (and requests, if any, equal to it) to the whole number of chips per host"
                )
        if broken or g.accelerator is None or g.topology is None:
            continue
        forms = shapes_of_generation_topology(g.accelerator, g.topology)
        chips = g.chips_per_pod()
        if forms and chips not in {s.chips_per_host for s in forms}:
            valid = " or ".join(f"{s.chips_per_host} ({s.machine_type})" for s in forms)
            yield (
                f"{res.label}: {g.where} asks {TPU_RESOURCE}: {chips} per pod, but a {forms[0].generation} "
                f"{g.topology} slice has {valid} chips per host: set requests and limits to that"
            )


def _num_of_hosts(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    for g in tpu_groups(res.props):
        forms = shapes_of_generation_topology(g.accelerator or "", g.topology or "")
        chips = g.chips_per_pod()
        shape = next((s for s in forms if s.chips_per_host == chips), None)
        if shape is None:
            continue  # tpu-node-selectors or tpu-chips-per-host says why
        raw = g.spec.get("numOfHosts", 1)  # KubeRay's default
        hosts = as_int(raw)
        if hosts != shape.hosts:
            yield (
                f"{res.label}: {g.where}.numOfHosts is {show(raw) if 'numOfHosts' in g.spec else 'unset (1)'}; "
                f"a {shape.generation} {shape.topology} slice with {shape.chips_per_host} chips per pod is "
                f"{shape.hosts_text} ({shape.machine_type}): set numOfHosts: {shape.hosts}"
            )


def _one_vm_slices(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    # The gang hangs only when its hosts can be placed on two slices (docs/apps.md, "Two shapes
    # JaxTrainer cannot hold to one slice"): a cluster of one multi-host slice cannot split it.
    if multi_host_slices(res.props) < 2:
        return
    for g in tpu_groups(res.props):
        if GKE_TPU_SLICE_TOPOLOGY in g.annotations:
            # A subslice: Ray sizes its VMs from the parent pool's topology (ray/util/tpu.py,
            # _resolve_chips_per_vm), which tpu-node-selectors checks.
            continue
        shape = g.shape()
        problem = shape.one_vm_gang_problem() if shape is not None else None
        if shape is None or problem is None:
            continue
        yield (
            f"{res.label}: {g.where} runs {shape.generation} {shape.topology} as {shape.hosts} hosts of "
            f"{shape.chips_per_host} chips ({shape.machine_type}): {problem}"
        )


# Ray derives these per host from the TPU webhook's environment; a static group label would
# give every host of every slice the same value and defeat slice-aware placement.
RAY_OWNED_TPU_LABELS = (RAY_TPU_SLICE_NAME, RAY_TPU_WORKER_ID, RAY_TPU_POD_TYPE)


def _ray_labels(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """This project's labels (tpuray's apps select hosts by them) and a truthful market type."""
    required = [str(k) for k in config.get("requiredLabels", [SLICE_POOL])]
    for g in tpu_groups(res.props):
        labels = g.labels
        where = f"{g.where}.labels"
        for key in required:
            if key not in labels:
                hint = " (the slice pool the group runs on)" if key == SLICE_POOL else ""
                yield (
                    f"{res.label}: {where} has no {key!r}; slice-aware scheduling selects TPU hosts by Ray node "
                    f"labels: add {key}{hint}"
                )
        market = labels.get(MARKET_TYPE)
        if MARKET_TYPE in labels and market not in ("on-demand", "spot"):
            yield f"{res.label}: {where}[{MARKET_TYPE!r}] is {show(market)}; Ray knows on-demand and spot: use one of them"
        spot = str(g.node_selector.get(GKE_SPOT, "")).lower() == "true"
        if spot and market == "on-demand":
            yield (
                f"{res.label}: {where}[{MARKET_TYPE!r}] is 'on-demand' but the nodeSelector asks "
                f"{GKE_SPOT}: 'true': set {MARKET_TYPE}: spot"
            )


def _ray_owned_labels(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """Group labels that override what Ray derives per host. A user label wins over Ray's default
    label of the same key (ray/_private/resource_and_label_spec.py, _resolve_labels, Ray 2.60.0),
    so a group-wide slice name makes every slice one to SlicePlacementGroup and a gang may span two."""
    for g in tpu_groups(res.props):
        labels = g.labels
        where = f"{g.where}.labels"
        for key in RAY_OWNED_TPU_LABELS:
            if key in labels:
                yield (
                    f"{res.label}: {where}[{key!r}] is {show(labels[key])}; Ray sets {key} per host from the TPU "
                    f"environment and a group-wide value makes all slices look like one: remove it"
                )
        topo = labels.get(RAY_TPU_TOPOLOGY)
        if topo is not None and g.topology is not None and topo != g.topology:
            yield (
                f"{res.label}: {where}['ray.io/tpu-topology'] is {show(topo)} but the group runs {g.topology} "
                f"slices: remove the label (Ray sets it) or set it to {g.topology}"
            )


def _job_groups_start_empty(res: Resource, config: dict[str, Any]) -> Iterator[str]:
    """KubeRay submits a RayJob only once its cluster is Ready: every desired worker pod Running
    and Ready (ray-operator v1.5.0 rayjob_controller.go waits for `rayv1.Ready`, which
    raycluster_controller.go sets when all DesiredWorkerReplicas are ready). A TPU group that
    starts with replicas (replicas, or minReplicas, which KubeRay raises replicas to) holds the
    submission while its shape is out of stock on every tier: the driver, and with it the capacity
    chain's fall-through, never starts. With the autoscaler on, the driver's demand adds the
    slices (ray_apps/chain.py), so the groups can start empty."""
    cluster = cluster_spec(res.props)
    if cluster is None or cluster.spec.get("enableInTreeAutoscaling") is not True:
        return
    if KUEUE_QUEUE_NAME in as_dict(as_dict(res.props.get("metadata")).get("labels")):
        return  # Kueue admits it once its quota (and, queued, its capacity) is there: GKE's DWS sample
    for g in tpu_groups(res.props):
        start = max(as_int(g.spec.get("replicas")) or 0, as_int(g.spec.get("minReplicas")) or 0)
        if start > 0:
            yield (
                f"{res.label}: {g.where} starts with {start} slice(s) in an autoscaled RayJob; KubeRay submits the job "
                "only once every desired worker pod is Ready, so while that shape is out of stock on every tier the "
                "driver never starts and the capacity chain never falls through: set replicas: 0 and minReplicas: 0 "
                "(the driver's whole-slice demand makes Ray's autoscaler add the slices)"
            )


RULES = (
    Rule(
        "tpu-node-selectors",
        "TPU worker groups select a known gke-tpu-accelerator (a single-host-only one for single-host slices) and a "
        "topology valid for it, and pin no capacity tier beside a ComputeClass.",
        MANDATORY,
        RAY_TYPES,
        _node_selectors,
        topology=True,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "tpu-chips-per-host",
        "TPU worker pods limit google.com/tpu (a request, if set, equal) to the slice's chips per host.",
        MANDATORY,
        RAY_TYPES,
        _chips_per_host,
        topology=True,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "tpu-num-of-hosts",
        "TPU worker groups set numOfHosts to the hosts of one slice of their topology.",
        MANDATORY,
        RAY_TYPES,
        _num_of_hosts,
        topology=True,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "tpu-slice-ray-reads-as-one-vm",
        "No TPU worker group is a multi-host slice that Ray's SlicePlacementGroup reads as one VM (v5e and v6e 2x4 "
        "on 4-chip machines) in a cluster that may run two multi-host slices: its gang could span them.",
        MANDATORY,
        RAY_TYPES,
        _one_vm_slices,
        topology=True,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "rayjob-tpu-groups-start-empty",
        "An autoscaled RayJob starts its TPU worker groups at zero replicas: KubeRay submits the job only once "
        "every desired pod is Ready, so a slice out of stock would stall the driver and its capacity chain.",
        MANDATORY,
        tuple(t for t in RAY_TYPES if t.endswith(":RayJob")),
        _job_groups_start_empty,
        kubernetes=True,
        profile=GKE,
    ),
    Rule(
        "tpu-worker-ray-labels",
        "TPU worker groups carry this project's Ray node labels (tpuray.dev/slice-pool) and a market type that "
        "matches their capacity.",
        MANDATORY,
        RAY_TYPES,
        _ray_labels,
        kubernetes=True,
        config={"requiredLabels": {"type": "array", "items": {"type": "string"}, "default": [SLICE_POOL]}},
        profile=PROJECT,
    ),
    Rule(
        "tpu-worker-ray-owned-labels",
        "TPU worker groups set no label Ray derives per host (slice name, worker id, pod type) and no "
        "ray.io/tpu-topology other than their own.",
        MANDATORY,
        RAY_TYPES,
        _ray_owned_labels,
        kubernetes=True,
        profile=GKE,
    ),
)
