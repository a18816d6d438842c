"""CapacityChain: a GKE ComputeClass whose priorities follow a slice pool's capacity chain.

Declared as a pulumi-kubernetes CustomResource (never inside Helm or a ConfigGroup) so that
policy packs see it. Pods select it with nodeSelector cloud.google.com/compute-class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from tpuray import capacity, catalog, labels
from tpuray.config import CapacityTier, SlicePoolConfig


def tier_priority(shape: catalog.SliceShape, tier: CapacityTier) -> dict[str, Any]:
    """One ComputeClass priority: a TPU shape under one capacity tier."""
    priority: dict[str, Any] = {
        # count is chips per node (VM), not per slice.
        "tpu": {"type": shape.gke_accelerator, "count": shape.chips_per_host, "topology": shape.topology},
        "machineType": shape.machine_type,
    }
    return priority | tier.kind.priority(tier.reservation)


def compute_class_spec(pool: SlicePoolConfig, node_service_account: Any = None) -> dict[str, Any]:
    priorities = [tier_priority(pool.shape, tier) for tier in pool.capacity]
    for fallback in pool.fallback:
        shape = catalog.lookup(fallback.generation, fallback.topology)
        priorities += [tier_priority(shape, tier) for tier in fallback.capacity]
    return {
        "description": f"TPU capacity chain for slice pool {pool.name}: "
        + ", then ".join(_describe(p) for p in priorities),
        "priorities": priorities,
        "nodePoolAutoCreation": {"enabled": True},
        # Auto-created pools would otherwise run as the default compute service account.
        **({"nodePoolConfig": {"serviceAccount": node_service_account}} if node_service_account else {}),
        # Never fall back to a node type the chain does not name.
        "whenUnsatisfiable": "DoNotScaleUp",
    }


def _describe(priority: dict[str, Any]) -> str:
    tpu = priority["tpu"]
    return f"{tpu['type']} {tpu['topology']} {capacity.tier_of_priority(priority).describe_priority(priority)}"


@dataclass(frozen=True)
class CapacityChainArgs:
    pool: SlicePoolConfig
    provider: k8s.Provider
    node_service_account: pulumi.Input[str]


# pragma: no mutate start (the Pulumi resource itself: declared in every stack run; test_infra_stacks and the golden files check it)
class CapacityChain(pulumi.ComponentResource):
    compute_class: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: CapacityChainArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:CapacityChain", name, None, opts)
        self.compute_class = k8s.apiextensions.CustomResource(
            f"{name}-computeclass",
            api_version="cloud.google.com/v1",
            kind="ComputeClass",
            metadata={"name": args.pool.compute_class, "labels": dict(labels.RENDERED_BY_TPURAY)},
            spec=compute_class_spec(args.pool, args.node_service_account),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
        )
        self.register_outputs({})


# pragma: no mutate end
