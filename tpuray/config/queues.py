"""Stack config for Kueue in front of the Ray workloads: `tpuray:queues` (part of tpuray/config.py's
StackConfig; the objects it becomes are built by tpuray/desired/queues.py, docs/capacity.md "Queues").

    tpuray:queues:
      cohort: acme-ml                  # the teams' ClusterQueues lend each other unused quota
      priorityClasses:                 # Kueue WorkloadPriorityClasses
        - {name: production, value: 1000}
        - {name: research, value: 100}
      teams:
        - name: training               # a ClusterQueue, and a LocalQueue of that name in `namespace`
          namespace: ray               # default: tpuray:workloads.namespace
          priorityClass: production    # the priority of the stack's Ray objects queued here
          quotas:                      # google.com/tpu chips, per slice pool and capacity tier
            - {pool: v6e-train, chips: 16, borrowingLimit: 16}
      queuedProvisioning:              # flex-start through DWS queued provisioning
        pools: [v6e-flex]
        maxRunDurationSeconds: 86400

The checks of what GKE allows for queued provisioning, with their sources, are in `queue_lines`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tpuray import capacity, catalog

NAMESPACE = "tpuray"
KEY = f"{NAMESPACE}:queues"
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# GKE flex-start: "for up to seven days"; maxRunDurationSeconds defaults to seven days
# (https://cloud.google.com/kubernetes-engine/docs/concepts/dws, "flex-start provisioning mode").
MAX_RUN_DURATION_SECONDS = 7 * 24 * 3600


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class QuotaConfig(_Model):
    """Chips a team may hold on one capacity tier of one slice pool (a ResourceFlavor's quota)."""

    pool: str = Field(description="a slice pool of tpuray:slicePools")
    tier: str | None = Field(
        None,
        description="a capacity tier of the pool's chain (spot, reservation, on-demand, flex-start); default its first",
    )
    chips: int = Field(ge=0, description="the ClusterQueue's nominal google.com/tpu quota on that flavor")
    borrowing_limit: int | None = Field(
        None, alias="borrowingLimit", ge=0, description="chips it may borrow from the cohort on top (needs cohort)"
    )


class TeamQueue(_Model):
    """One team: a ClusterQueue with its chip quotas and a LocalQueue in its namespace."""

    name: str = Field(description="the team: names its ClusterQueue and LocalQueue")
    namespace: str | None = Field(None, description="the LocalQueue's namespace; default tpuray:workloads.namespace")
    priority_class: str | None = Field(
        None,
        alias="priorityClass",
        description="a priorityClasses name: the priority of the stack's objects queued here",
    )
    quotas: list[QuotaConfig] = Field(min_length=1, description="chip quotas per slice pool and tier")
    cpu: str = Field("1000", description="the ClusterQueue's cpu quota (Ray heads and TPU hosts ask cpu too)")
    memory: str = Field("4000Gi", description="the ClusterQueue's memory quota")


class PriorityClass(_Model):
    """A Kueue WorkloadPriorityClass."""

    name: str = Field(description="the WorkloadPriorityClass name")
    value: int = Field(description="higher preempts lower within a ClusterQueue")
    description: str = Field("", description="shown by kubectl")


class QueuedProvisioning(_Model):
    """Flex-start through DWS queued provisioning: a ProvisioningRequest per admitted workload."""

    pools: list[str] = Field(min_length=1, description="slice pools whose node pools only queued provisioning fills")
    max_run_duration_seconds: int = Field(
        MAX_RUN_DURATION_SECONDS,
        alias="maxRunDurationSeconds",
        description="the ProvisioningRequest's maxRunDurationSeconds: GKE removes the nodes after it (at most 7 days)",
    )


class QueuesConfig(_Model):
    """Kueue in front of the Ray workloads (docs/capacity.md "Queues")."""

    cohort: str | None = Field(None, description="the cohort every team's ClusterQueue joins (lending and borrowing)")
    priority_classes: list[PriorityClass] = Field(
        default_factory=list, alias="priorityClasses", description="Kueue WorkloadPriorityClasses"
    )
    teams: list[TeamQueue] = Field(min_length=1, description="one ClusterQueue and LocalQueue per team")
    queued_provisioning: QueuedProvisioning | None = Field(
        None, alias="queuedProvisioning", description="flex-start pools filled through DWS queued provisioning"
    )

    def workloads_team(self, workloads_namespace: str) -> TeamQueue | None:
        """The team whose LocalQueue the stack's own Ray objects are queued in."""
        return next((t for t in self.teams if (t.namespace or workloads_namespace) == workloads_namespace), None)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def quota_tier(cfg: Any, quota: QuotaConfig) -> capacity.Tier:
    """The capacity tier a quota names (its pool's first when unset). The pool and tier are checked."""
    pool = cfg.pool(quota.pool)
    return capacity.by_key(quota.tier) if quota.tier else pool.capacity[0].kind


def queue_lines(cfg: Any) -> list[str]:
    """One line per problem of tpuray:queues against the rest of the stack (cfg: a StackConfig)."""
    queues: QueuesConfig | None = cfg.queues
    if queues is None:
        return []
    lines: list[str] = []
    pools = {p.name: p for p in cfg.slice_pools}
    classes = [c.name for c in queues.priority_classes]
    for i, pc in enumerate(queues.priority_classes):
        if not _DNS_LABEL.match(pc.name):
            lines.append(f"{KEY}.priorityClasses[{i}].name: {_show(pc.name)} is invalid; use a lowercase DNS label")
        elif classes.index(pc.name) != i:
            lines.append(f"{KEY}.priorityClasses[{i}].name: {_show(pc.name)} is used twice; names must be unique")
    seen: set[str] = set()
    for i, team in enumerate(queues.teams):
        key = f"{KEY}.teams[{i}]"
        if not _DNS_LABEL.match(team.name) or len(team.name) > 63:
            lines.append(f"{key}.name: {_show(team.name)} is invalid; use a lowercase DNS label (it names the queues)")
        elif team.name in seen:
            lines.append(f"{key}.name: {_show(team.name)} is used twice; team names must be unique")
        seen.add(team.name)
        if team.priority_class is not None and team.priority_class not in classes:
            valid = ", ".join(classes) or f"none: declare it in {KEY}.priorityClasses"
            lines.append(f"{key}.priorityClass: {_show(team.priority_class)} is not a priority class; valid: {valid}")
        flavors: set[tuple[str, str]] = set()
        for j, quota in enumerate(team.quotas):
            qkey = f"{key}.quotas[{j}]"
            if quota.pool not in pools:
                lines.append(f"{qkey}.pool: {_show(quota.pool)} is not a slice pool; valid: {', '.join(pools)}")
                continue
            chain = [t.kind.key for t in pools[quota.pool].capacity]
            if quota.tier is not None and quota.tier not in chain:
                lines.append(
                    f"{qkey}.tier: {_show(quota.tier)} is not a tier of pool {quota.pool!r}; valid: {', '.join(chain)}"
                )
                continue
            tier = quota_tier(cfg, quota).key
            if (quota.pool, tier) in flavors:
                lines.append(f"{qkey}: pool {quota.pool!r} tier {tier!r} has a quota twice; give each tier one entry")
            flavors.add((quota.pool, tier))
            if quota.borrowing_limit and queues.cohort is None:
                lines.append(f"{qkey}.borrowingLimit: {quota.borrowing_limit} needs {KEY}.cohort to borrow from")
            lines += _slice_lines(qkey, pools[quota.pool], quota)
    lines += _workload_lines(cfg, queues)
    if queues.queued_provisioning is not None:
        lines += _queued_provisioning_lines(cfg, queues.queued_provisioning)
    return lines


def _slice_lines(key: str, pool: Any, quota: QuotaConfig) -> list[str]:
    """A quota that cannot hold one slice of its pool admits nothing (Kueue admits all or nothing)."""
    try:
        chips = pool.shape.chips
    except catalog.CatalogError:
        return []  # reported by config's shape checks
    total = quota.chips + (quota.borrowing_limit or 0)
    if 0 < total < chips:
        return [
            f"{key}.chips: {quota.chips} (+{quota.borrowing_limit or 0} borrowed) is below one {pool.shape.generation} "
            f"{pool.shape.topology} slice of pool {pool.name!r} ({chips} chips); Kueue admits a slice whole or not at "
            f"all: use 0 or at least {chips}"
        ]
    return []


def _workload_lines(cfg: Any, queues: QueuesConfig) -> list[str]:
    """The stack's RayJob is queued in the workloads namespace's team, which must be able to admit it."""
    namespace = cfg.workloads.namespace
    team = queues.workloads_team(namespace)
    train = cfg.workloads.train
    if train is None:
        return []
    if team is None:
        return [
            f"{KEY}.teams: no team's namespace is the workloads namespace {namespace!r}; the training RayJob needs a "
            "LocalQueue there: give one team that namespace"
        ]
    pool = next((p for p in cfg.slice_pools if p.name == train.pool), None)
    try:
        needed = pool.shape.chips * train.max_slices if pool else 0
    except catalog.CatalogError:
        return []  # reported by config's shape checks
    if pool is None:
        return []  # reported by config's workload checks
    limit = sum(q.chips + (q.borrowing_limit or 0) for q in team.quotas if q.pool == train.pool)
    if limit < needed:
        return [
            f"{KEY}.teams[{queues.teams.index(team)}].quotas: team {team.name!r} may hold {limit} chips of pool {train.pool!r} but "
            f"tpuray:workloads.train needs {needed} ({train.max_slices} x {pool.shape.chips}); Kueue would never admit "
            "it: raise chips or borrowingLimit"
        ]
    return []


def _queued_provisioning_lines(cfg: Any, qp: QueuedProvisioning) -> list[str]:
    """What GKE allows on a queued-provisioning node pool: the flex-start tier (`--flex-start
    --enable-queued-provisioning`), autoscaling from zero nodes, no auto-repair and
    `--reservation-affinity=none` (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest,
    "Create a node pool"); a ProvisioningRequest runs at most seven days
    (https://cloud.google.com/kubernetes-engine/docs/concepts/dws)."""
    key = f"{KEY}.queuedProvisioning"
    lines = []
    pools = {p.name: p for p in cfg.slice_pools}
    if not 1 <= qp.max_run_duration_seconds <= MAX_RUN_DURATION_SECONDS:
        lines.append(
            f"{key}.maxRunDurationSeconds: {qp.max_run_duration_seconds} is invalid; GKE runs flex-start capacity "
            f"at most 7 days: use 1 to {MAX_RUN_DURATION_SECONDS}"
        )
    for i, name in enumerate(qp.pools):
        pkey = f"{key}.pools[{i}]"
        pool = pools.get(name)
        if pool is None:
            lines.append(f"{pkey}: {_show(name)} is not a slice pool; valid: {', '.join(pools)}")
            continue
        tiers = [t.kind for t in pool.capacity]
        if tiers[0] is not capacity.FLEX_START:
            lines.append(
                f"{pkey}: pool {name!r} starts with the {tiers[0].key} tier; GKE queues provisioning only on flex-start "
                "node pools: make flexStart the pool's first tier"
            )
            continue
        if len(tiers) > 1 or pool.fallback:
            lines.append(
                f"{pkey}: pool {name!r} has more capacity after flex-start; queued provisioning gives a whole slice or "
                "nothing, and GKE would auto-provision the others outside the ProvisioningRequest: keep flexStart alone"
            )
    return lines
