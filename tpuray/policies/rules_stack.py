"""Stack rules: what the workloads ask for against what the node pools and ComputeClasses provide."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tpuray import capacity, catalog
from tpuray.labels import COMPUTE_CLASS, GKE_TPU_TOPOLOGY
from tpuray.policies.core import GKE, MANDATORY, PROJECT, UNKNOWN, Finding, Resource, Rule
from tpuray.policies.kube import (
    CLUSTER_TYPE,
    COMPUTE_CLASS_TYPE,
    NODE_POOL_TYPE,
    RAY_TYPES,
    RESOURCE_POLICY_TYPE,
    as_dict,
    as_int,
    get,
    shapes_of_machine_type,
    show,
    tpu_groups,
)
from tpuray.policies.rules_computeclass import priorities
from tpuray.policies.rules_security import is_default_service_account


def _of(resources: list[Resource], *types: str) -> list[Resource]:
    return [r for r in resources if r.type in types]


@dataclass(frozen=True)
class PoolShape:
    shape: catalog.SliceShape | None
    problem: str | None = None  # why the pool's placement does not name a catalog shape


def node_pool_shape(pool: Resource, resources: list[Resource]) -> PoolShape | None:
    """The slice shape of a TPU node pool (None: not a TPU pool, or unknowable during preview)."""
    machine = get(pool.props, "nodeConfig", "machineType")
    forms = shapes_of_machine_type(machine) if isinstance(machine, str) else []
    if not forms:
        return None
    placement = as_dict(pool.props.get("placementPolicy"))
    topology = placement.get("tpuTopology")
    policy_name = placement.get("policyName")
    if policy_name is UNKNOWN or topology is UNKNOWN:
        return None
    if isinstance(policy_name, str) and policy_name:
        policy = next((r for r in _of(resources, RESOURCE_POLICY_TYPE) if r.props.get("name") == policy_name), None)
        topology = get(policy.props, "workloadPolicy", "acceleratorTopology") if policy else None
        if not isinstance(topology, str):
            return PoolShape(None, f"placementPolicy.policyName {policy_name!r} names no workload policy of this stack")
    if isinstance(topology, str):
        try:
            return PoolShape(catalog.lookup(forms[0].generation, topology, machine))
        except catalog.CatalogError as err:
            return PoolShape(None, f"placementPolicy tpuTopology {topology!r} on {machine}: {err}")
    single = [s for s in forms if not s.multi_host]
    return PoolShape(single[0] if single else None, None if single else f"{machine} needs a placement policy")


# ---------------------------------------------------------------------------- providers


@dataclass(frozen=True)
class Provider:
    label: str
    compute_class: str | None
    accelerator: str
    topology: str
    chips_per_host: int | None


def providers(resources: list[Resource]) -> list[Provider]:
    out = []
    for pool in _of(resources, NODE_POOL_TYPE):
        ps = node_pool_shape(pool, resources)
        if ps and ps.shape:
            cc = get(pool.props, "nodeConfig", "labels", COMPUTE_CLASS)
            out.append(Provider(pool.label, cc if isinstance(cc, str) else None, ps.shape.gke_accelerator,
                                ps.shape.topology, ps.shape.chips_per_host))  # fmt: skip
    for cc in _of(resources, COMPUTE_CLASS_TYPE):
        name = get(cc.props, "metadata", "name")
        for _, p in priorities(cc):
            tpu = as_dict(p.get("tpu"))
            if isinstance(tpu.get("type"), str) and isinstance(tpu.get("topology"), str):
                out.append(Provider(cc.label, name if isinstance(name, str) else None, tpu["type"], tpu["topology"],
                                    as_int(tpu.get("count"))))  # fmt: skip
    return out


def _topology_provided(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    offered = providers(resources)
    for res in _of(resources, *RAY_TYPES):
        for g in tpu_groups(res.props):
            acc, topo = g.accelerator, g.node_selector.get(GKE_TPU_TOPOLOGY)
            if not isinstance(acc, str) or not isinstance(topo, str):
                continue  # tpu-node-selectors reports it
            chips = g.chips_per_pod()
            cc = g.node_selector.get(COMPUTE_CLASS)
            pool = [p for p in offered if cc is None or p.compute_class == cc]
            where = f"{res.label}: {g.where}.template.spec.nodeSelector"
            if cc is not None and not pool:
                yield Finding(
                    f"{where}[{COMPUTE_CLASS!r}] is {show(cc)}, which no ComputeClass or node pool of this "
                    f"stack provides; the pods would stay Pending: declare that ComputeClass or select one of "
                    f"{', '.join(sorted({p.compute_class for p in offered if p.compute_class})) or 'none'}",
                    res.urn,
                )
                continue
            if any(p.accelerator == acc and p.topology == topo and (chips is None or p.chips_per_host in (None, chips))
                   for p in pool):  # fmt: skip
                continue
            have = ", ".join(sorted({f"{p.accelerator} {p.topology} x{p.chips_per_host}" for p in pool})) or "nothing"
            scope = f"compute class {cc!r}" if cc is not None else "this stack"
            yield Finding(
                f"{where} asks {acc} {topo} with {chips} chips per host, but {scope} provides {have}; "
                "the pods would stay Pending: add a slice pool or ComputeClass priority with that shape, or change the selectors",
                res.urn,
            )


def _node_pool_slice_shape(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    for pool in _of(resources, NODE_POOL_TYPE):
        ps = node_pool_shape(pool, resources)
        if ps is None:
            continue
        if ps.shape is None:
            yield Finding(
                f"{pool.label}: {ps.problem}: use a topology and machine type from `tpuray topology`", pool.urn
            )
            continue
        shape = ps.shape
        if not shape.multi_host:
            continue
        placement = as_dict(pool.props.get("placementPolicy"))
        if shape.placement is catalog.Placement.COMPACT and placement.get("type") != "COMPACT":
            yield Finding(
                f"{pool.label}: placementPolicy.type is {show(placement.get('type'))}; a {shape.generation} "
                f"{shape.topology} slice is placed COMPACT with tpu_topology {shape.topology}: set type: COMPACT",
                pool.urn,
            )
        if shape.placement is catalog.Placement.WORKLOAD_POLICY and not placement.get("policyName"):
            yield Finding(
                f"{pool.label}: placementPolicy has no policyName; {shape.generation} multi-host slices are placed by "
                f"a {catalog.generation(shape.generation).workload_policy} workload policy (a compute ResourcePolicy): "
                "set placement_policy.policy_name",
                pool.urn,
            )
        autoscaling = as_dict(pool.props.get("autoscaling"))
        if autoscaling:
            top = autoscaling.get("totalMaxNodeCount", autoscaling.get("maxNodeCount"))
            low = autoscaling.get("totalMinNodeCount", autoscaling.get("minNodeCount", 0))
            if as_int(top) != shape.hosts:
                yield Finding(
                    f"{pool.label}: autoscaling max node count is {show(top)}; one {shape.generation} "
                    f"{shape.topology} slice is {shape.hosts_text}, created and removed together: set it to {shape.hosts}",
                    pool.urn,
                )
            if as_int(low) not in (0, shape.hosts):
                yield Finding(
                    f"{pool.label}: autoscaling min node count is {show(low)}; a slice is all {shape.hosts_text} or "
                    f"none: set 0 or {shape.hosts}",
                    pool.urn,
                )
            continue
        count = pool.props.get("nodeCount", pool.props.get("initialNodeCount"))
        if as_int(count) != shape.hosts:
            yield Finding(
                f"{pool.label}: node count is {show(count)}; a {shape.generation} {shape.topology} slice on "
                f"{shape.machine_type} is {shape.hosts_text} in one node pool: set the node count to {shape.hosts}",
                pool.urn,
            )


def _is_spot(priority: dict[str, Any]) -> bool:
    return capacity.tier_of_priority(priority) is capacity.SPOT


def _spot_has_fallback(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    classes: dict[str, Resource] = {}
    for cc in _of(resources, COMPUTE_CLASS_TYPE):
        name = get(cc.props, "metadata", "name")
        if isinstance(name, str):
            classes[name] = cc
        items = priorities(cc)
        for i, (where, p) in enumerate(items):
            if _is_spot(p) and all(_is_spot(q) for _, q in items[i + 1 :]):
                yield Finding(
                    f"{cc.label}: {where} is Spot and no non-Spot priority follows it; a preemption wave leaves the "
                    "workload with no capacity: add an on-demand, reservation or flexStart priority after it",
                    cc.urn,
                )
    pools = _of(resources, NODE_POOL_TYPE)
    for pool in pools:
        node_config = as_dict(get(pool.props, "nodeConfig"))
        spot = capacity.tier_of_node_config(node_config) is capacity.SPOT or node_config.get("preemptible") is True
        if not spot:
            continue
        cc = get(pool.props, "nodeConfig", "labels", COMPUTE_CLASS)
        fallback_class = cc in classes and any(not _is_spot(p) for _, p in priorities(classes[cc]))
        fallback_pool = any(
            other is not pool
            and get(other.props, "nodeConfig", "labels", COMPUTE_CLASS) == cc
            and capacity.tier_of_node_config(as_dict(get(other.props, "nodeConfig"))) is not capacity.SPOT
            for other in pools
        )
        if cc is None or not (fallback_class or fallback_pool):
            yield Finding(
                f"{pool.label}: nodeConfig.spot is true and its compute class {show(cc)} offers no non-Spot capacity; "
                "a preemption leaves the slice pool empty: add an on-demand, reservation or flex-start tier after spot",
                pool.urn,
            )


def _compute_class_service_account(resources: list[Resource], config: dict[str, Any]) -> Iterator[Finding]:
    clusters = _of(resources, CLUSTER_TYPE)
    nap_defaults = [get(c.props, "clusterAutoscaling", "autoProvisioningDefaults", "serviceAccount") for c in clusters]
    if not clusters or not any(is_default_service_account(a) for a in nap_defaults):
        return
    for cc in _of(resources, COMPUTE_CLASS_TYPE):
        spec = as_dict(cc.props.get("spec"))
        if get(spec, "nodePoolAutoCreation", "enabled") is not True:
            continue
        account = get(spec, "nodePoolConfig", "serviceAccount")
        if is_default_service_account(account):
            yield Finding(
                f"{cc.label}: spec.nodePoolConfig.serviceAccount is {show(account)} and the cluster sets no "
                "clusterAutoscaling.autoProvisioningDefaults.serviceAccount, so node pools this class auto-creates run "
                "as the Compute Engine default account: set spec.nodePoolConfig.serviceAccount to the node service account",
                cc.urn,
            )


RULES = (
    Rule(
        "tpu-topology-provided",
        "Every TPU shape a Ray workload selects is provided by a node pool or ComputeClass of the stack.",
        MANDATORY,
        stack_check=_topology_provided,
        topology=True,
        profile=GKE,
    ),
    Rule(
        "tpu-node-pool-slice-shape",
        "Multi-host TPU node pools have node count = slice hosts and the catalog's placement.",
        MANDATORY,
        stack_check=_node_pool_slice_shape,
        topology=True,
        profile=GKE,
    ),
    Rule(
        "spot-has-fallback",
        "Every Spot capacity tier has a non-Spot fallback after it.",
        MANDATORY,
        stack_check=_spot_has_fallback,
        kubernetes=True,
        profile=PROJECT,
    ),
    Rule(
        "compute-class-node-service-account",
        "Node pools a ComputeClass auto-creates run as a dedicated service account.",
        MANDATORY,
        stack_check=_compute_class_service_account,
        profile=PROJECT,
    ),
)
