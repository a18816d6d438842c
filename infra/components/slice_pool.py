"""SlicePool: the GKE node pools of one TPU slice pool, sized and placed by the catalog.

A multi-host slice is one node pool whose node count equals the slice's hosts, placed
COMPACT with tpu_topology (or, where the catalog says so, by a workload policy: TPU7x's
HIGH_THROUGHPUT), so that
GKE creates and deletes all its VMs together. A single-host shape is one pool with one
node per slice. The pools serve the chain's first capacity tier; the later tiers are
ComputeClass priorities that GKE auto-provisions (see CapacityChain).

How a pool's size is declared decides whether scaling it replaces it (`pool_size`): the
provider marks initial_node_count ForceNew and node_count not (tpuray/data/provider_force_new.yaml),
and the pools have fixed names, so a replacement deletes every node of the pool first.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.components.cluster import node_hardening
from infra.components.observability import cost_labels
from tpuray import catalog, labels
from tpuray.catalog import Placement
from tpuray.config import CapacityTier, SlicePoolConfig


def capacity_node_config(tier: CapacityTier, project: str) -> dict:
    """The node_config fields that express one capacity tier (its row in tpuray/capacity.py)."""
    return tier.kind.node_config(tier.reservation, project)


def pool_size(multi_host: bool, from_zero: bool, nodes: int) -> dict:
    """The NodePool arguments that size one pool of `nodes` nodes:
    - capacity that arrives from zero (flex-start): the autoscaler, 0..nodes, which updates in
      place; initial_node_count 0 never changes;
    - a multi-host slice: initial_node_count = its hosts, ForceNew on purpose. The pool is one
      slice; GKE adds no node to a multi-host TPU slice node pool once created ("you can't add
      nodes to it ... you must create a new node pool",
      https://cloud.google.com/kubernetes-engine/docs/concepts/tpus), so another host count
      (another topology) has to be a new pool. More slices are more pools, never a bigger one;
    - single-host slices, one node each: node_count, which the provider resizes in place
      (`slices` is routine scaling: tests/test_force_new.py)."""
    if from_zero:
        return {
            "initial_node_count": 0,
            "autoscaling": {"total_min_node_count": 0, "total_max_node_count": nodes, "location_policy": "ANY"},
        }
    if multi_host:
        return {"initial_node_count": nodes}
    return {"node_count": nodes}


@dataclass(frozen=True)
class SlicePoolArgs:
    pool: SlicePoolConfig
    project: str
    region: str
    zone: str
    cluster_name: pulumi.Input[str]
    node_service_account: pulumi.Input[str]
    stack: str = ""  # names the cost-allocation labels (infra/components/observability.py)
    # Only DWS queued provisioning fills the pool (tpuray/config/queues.py checks it is flex-start).
    queued_provisioning: bool = False


class SlicePool(pulumi.ComponentResource):
    node_pool_names: list[pulumi.Output[str]]

    def __init__(self, name: str, args: SlicePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuray:index:SlicePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        pool, shape = args.pool, args.pool.shape
        tier = pool.capacity[0]

        placement: dict | None = None
        if shape.placement is Placement.COMPACT:
            placement = {"type": "COMPACT", "tpu_topology": shape.topology}
        elif shape.placement is Placement.WORKLOAD_POLICY:
            policy = gcp.compute.ResourcePolicy(
                f"{name}-workload-policy",
                name=f"{pool.name}-{shape.topology.replace('x', '-')}",
                project=args.project,
                region=args.region,
                workload_policy={
                    "type": catalog.generation(shape.generation).workload_policy,
                    "accelerator_topology": shape.topology,
                },
                opts=child,
            )
            # `type` is required by the provider (NodePoolPlacementPolicyArgsDict) and COMPACT is
            # its only value; the workload policy named beside it decides the placement, as in
            # GKE's Ironwood guide (`--placement-policy`, which replaces `--tpu-topology`):
            # https://cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood
            placement = {"type": "COMPACT", "policy_name": policy.name}

        from_zero = tier.kind.from_zero
        # Multi-host: one pool per slice, all hosts of a slice or none. Single-host: one pool.
        pools = pool.slices if shape.multi_host else 1
        nodes_per_pool = shape.hosts if shape.multi_host else pool.slices
        self.node_pool_names = []
        for index in range(pools):
            pool_name = f"{pool.name}-{index}" if shape.multi_host else pool.name
            node_pool = gcp.container.NodePool(
                f"{name}-{index}",
                name=pool_name,
                project=args.project,
                cluster=args.cluster_name,
                location=args.region,
                node_locations=[args.zone],
                **pool_size(shape.multi_host, from_zero, nodes_per_pool),
                placement_policy=placement,
                **({"queued_provisioning": {"enabled": True}} if args.queued_provisioning else {}),
                management={"auto_repair": tier.kind.auto_repair, "auto_upgrade": True},
                node_config={
                    "machine_type": shape.machine_type,
                    "labels": {
                        labels.COMPUTE_CLASS: pool.compute_class,
                        labels.SLICE_POOL: pool.name,
                        labels.CAPACITY_TIER: tier.kind.key,
                    },
                    # Manual pools join a ComputeClass through its label plus a matching taint.
                    "resource_labels": cost_labels(args.stack, pool.name, tier.kind.key),
                    "taints": [{"key": labels.COMPUTE_CLASS, "value": pool.compute_class, "effect": "NO_SCHEDULE"}],
                    **capacity_node_config(tier, args.project),
                    **node_hardening(args.node_service_account),
                },
                # GKE may read a workload-policy pool's placement type back as unspecified: the
                # type is create-only, so a difference there must never plan a replacement.
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(ignore_changes=["placementPolicy.type"])
                )
                if shape.placement is Placement.WORKLOAD_POLICY
                else child,
            )
            self.node_pool_names.append(node_pool.name)
        self.register_outputs({"nodePools": self.node_pool_names})
