"""Kueue in front of the Ray workloads: the one home of the queue concept (docs/capacity.md "Queues").

From `tpuray:queues` (tpuray/config/queues.py) this module builds, as plain manifests:
- a ResourceFlavor per slice pool and capacity tier that a team has quota on (`<pool>-<tier>`).
  Its nodeLabels are what the pool's TPU hosts carry: the pool's ComputeClass label, the shape's
  GKE accelerator and topology (tpuray/catalog.py), and the tier's own node label where GKE sets
  one (Spot: cloud.google.com/gke-spot, flex-start: cloud.google.com/gke-flex-start; the
  capacity table, tpuray/capacity.py), with the tier's toleration. Kueue adds a flavor's
  nodeLabels to the nodeSelector of the pods it admits under it, so a queued workload lands on
  the tier whose quota it was admitted against; Kueue walks a ClusterQueue's flavors in order;
- one cpu/memory flavor without labels (`default-flavor`): Ray heads and TPU hosts ask cpu and
  memory, and Kueue admits a workload only when its ClusterQueue covers every resource it asks;
- a ClusterQueue per team with its google.com/tpu quotas (nominal, and borrowing in the cohort),
  preempting lower priorities within the queue and reclaiming lent quota in the cohort;
- a LocalQueue per team in its namespace, and the WorkloadPriorityClasses;
- for queued provisioning: a ProvisioningRequestConfig with class `queued-provisioning.gke.io`
  and an AdmissionCheck on the flex-start flavors (Kueue's ProvisioningRequest admission check).

Kueue (v0.17.0, the version tools/cluster builds) is a prerequisite of the cluster, not installed by
the program: docs/capacity.md says how to install and check it. Sources: Kueue's API
(sigs.k8s.io/kueue apis/kueue/v1beta2), its Ray integrations (pkg/controller/jobs/rayjob,
raycluster, rayservice), GKE's "Run a large-scale workload with flex-start with queued
provisioning" (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpuray import capacity, catalog, labels
from tpuray.config.queues import QueuesConfig, TeamQueue, quota_tier

API_VERSION = "kueue.x-k8s.io/v1beta2"  # storage version of Kueue v0.17.0's CRDs
DEFAULT_FLAVOR = "default-flavor"
QUEUED_PROVISIONING = "dws-queued-provisioning"  # the AdmissionCheck and ProvisioningRequestConfig
PROVISIONING_CLASS = "queued-provisioning.gke.io"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
KINDS = (
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "ProvisioningRequestConfig",
    "AdmissionCheck",
    "ClusterQueue",
    "LocalQueue",
)
# Where each KubeRay kind says "suspended" (what Kueue flips when it admits): rayjob, raycluster and
# rayservice integrations of Kueue v0.17.0 (IsSuspended of each).
_SUSPEND_AT = {"RayJob": (), "RayCluster": (), "RayService": ("rayClusterConfig",)}


def flavor_name(pool: str, tier: capacity.Tier) -> str:
    return f"{pool}-{tier.key}"


@dataclass(frozen=True)
class Flavor:
    pool: str
    tier: capacity.Tier
    shape: catalog.SliceShape
    fallback: bool = False  # a cross-generation shape of the pool's chain: admitted with zero quota

    @property
    def name(self) -> str:
        if self.fallback:
            return f"{self.pool}-{self.shape.generation}-{self.shape.topology}-{self.tier.key}"
        return flavor_name(self.pool, self.tier)

    @property
    def chips(self) -> int:
        return self.shape.chips


def _queues(cfg: Any) -> QueuesConfig | None:
    return getattr(cfg, "queues", None)


def fallback_flavors(cfg: Any, pool_name: str) -> list[Flavor]:
    """A zero-quota flavor per fallback shape of a queued pool. Kueue assigns a flavor to every
    pod set, the empty fallback worker groups too (a resource the ClusterQueue covers is checked
    even at quantity 0: kueue pkg/scheduler/flavorassigner), and their pods select the other
    shape: without a flavor of that shape the whole job would be inadmissible. Replicas the
    driver asks for later are scaled by Ray's autoscaler, outside Kueue's admission."""
    pool = cfg.pool(pool_name)
    return [
        Flavor(pool.name, fb.capacity[0].kind, catalog.lookup(fb.generation, fb.topology), fallback=True)
        for fb in pool.fallback
    ]


def flavors(cfg: Any) -> list[Flavor]:
    """The flavors the teams' queues name, in the order the config first names them: each quota's
    (pool, tier), then the zero-quota flavors of the pool's fallback shapes."""
    queues = _queues(cfg)
    found: dict[str, Flavor] = {}
    for team in queues.teams if queues else []:
        for quota in team.quotas:
            flavor = Flavor(quota.pool, quota_tier(cfg, quota), cfg.pool(quota.pool).shape)
            found.setdefault(flavor.name, flavor)
        for pool in dict.fromkeys(q.pool for q in team.quotas):
            for flavor in fallback_flavors(cfg, pool):
                found.setdefault(flavor.name, flavor)
    return list(found.values())


def resource_flavor(cfg: Any, flavor: Flavor) -> dict[str, Any]:
    shape = flavor.shape
    node_labels = {
        labels.COMPUTE_CLASS: cfg.pool(flavor.pool).compute_class,
        labels.GKE_TPU_ACCELERATOR: shape.gke_accelerator,
        labels.GKE_TPU_TOPOLOGY: shape.topology,
    }
    if flavor.tier.node_label is not None:
        node_labels[flavor.tier.node_label] = "true"
    spec: dict[str, Any] = {"nodeLabels": node_labels}
    tolerations = [t] if (t := capacity.toleration(flavor.tier)) is not None else []
    if flavor.pool in queued_provisioning_pools(cfg) and not flavor.fallback:
        # Nodes of a ProvisioningRequest carry this taint; Kueue adds a flavor's tolerations to the pods.
        tolerations.append({"key": labels.GKE_QUEUED, "operator": "Exists", "effect": "NoSchedule"})
    if tolerations:
        spec["tolerations"] = tolerations
    return _object("ResourceFlavor", flavor.name, spec)


def _object(kind: str, name: str, spec: dict[str, Any] | None = None, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels.RENDERED_BY_TPURAY)}
    if namespace is not None:
        meta["namespace"] = namespace
    obj: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind, "metadata": meta}
    if spec is not None:
        obj["spec"] = spec
    return obj


def queued_provisioning_pools(cfg: Any) -> list[str]:
    queues = _queues(cfg)
    return list(queues.queued_provisioning.pools) if queues and queues.queued_provisioning else []


def team_namespace(cfg: Any, team: TeamQueue) -> str:
    return team.namespace or cfg.workloads.namespace


def cluster_queue(cfg: Any, team: TeamQueue) -> dict[str, Any]:
    queues = _queues(cfg)
    assert queues is not None
    tpu_flavors = []
    checked = []
    for quota in team.quotas:
        name = flavor_name(quota.pool, quota_tier(cfg, quota))
        resource: dict[str, Any] = {"name": labels.TPU_RESOURCE, "nominalQuota": quota.chips}
        if quota.borrowing_limit is not None:
            resource["borrowingLimit"] = quota.borrowing_limit
        tpu_flavors.append({"name": name, "resources": [resource]})
        if quota.pool in queued_provisioning_pools(cfg):
            checked.append(name)
    for pool in dict.fromkeys(q.pool for q in team.quotas):
        for flavor in fallback_flavors(cfg, pool):
            tpu_flavors.append({"name": flavor.name, "resources": [{"name": labels.TPU_RESOURCE, "nominalQuota": 0}]})
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team_namespace(cfg, team)}},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": DEFAULT_FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": team.cpu},
                            {"name": "memory", "nominalQuota": team.memory},
                        ],
                    }
                ],
            },
            {"coveredResources": [labels.TPU_RESOURCE], "flavors": tpu_flavors},
        ],
        # A higher WorkloadPriorityClass evicts a lower one of the same queue; quota lent to the
        # cohort is taken back from whoever borrowed it.
        "preemption": {"withinClusterQueue": "LowerPriority"},
    }
    if queues.cohort:
        spec["cohortName"] = queues.cohort
        spec["preemption"]["reclaimWithinCohort"] = "Any"
        # A job larger than its queue's nominal quota borrows; Kueue preempts for a borrowing job
        # only with borrowWithinCohort (pkg/scheduler/flavorassigner fitsResourceQuota,
        # canPreemptWhileBorrowing): then a lower priority yields to it, in its queue or the cohort.
        spec["preemption"]["borrowWithinCohort"] = {"policy": "LowerPriority"}
    if checked:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": QUEUED_PROVISIONING, "onFlavors": checked}]}
    return _object("ClusterQueue", team.name, spec)


def objects(cfg: Any) -> list[dict[str, Any]]:
    """Every Kueue object of the stack, as manifests (none without tpuray:queues)."""
    queues = _queues(cfg)
    if queues is None:
        return []
    out = [_object("ResourceFlavor", DEFAULT_FLAVOR, {})]
    out += [resource_flavor(cfg, f) for f in flavors(cfg)]
    for pc in queues.priority_classes:
        obj = _object("WorkloadPriorityClass", pc.name)
        obj["value"] = pc.value
        if pc.description:
            obj["description"] = pc.description
        out.append(obj)
    if queues.queued_provisioning is not None:
        seconds = str(queues.queued_provisioning.max_run_duration_seconds)
        out.append(
            _object(
                "ProvisioningRequestConfig",
                QUEUED_PROVISIONING,
                {
                    "provisioningClassName": PROVISIONING_CLASS,
                    "managedResources": [labels.TPU_RESOURCE],  # heads and submitters stay off DWS
                    "parameters": {"maxRunDurationSeconds": seconds},
                },
            )
        )
        out.append(
            _object(
                "AdmissionCheck",
                QUEUED_PROVISIONING,
                {
                    "controllerName": PROVISIONING_CONTROLLER,
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "ProvisioningRequestConfig",
                        "name": QUEUED_PROVISIONING,
                    },
                },
            )
        )
    for team in queues.teams:
        out.append(cluster_queue(cfg, team))
        out.append(_object("LocalQueue", team.name, {"clusterQueue": team.name}, team_namespace(cfg, team)))
    return out


def extra_namespaces(cfg: Any) -> list[str]:
    """Team namespaces other than the workloads namespace (the stack declares them for their LocalQueues)."""
    queues = _queues(cfg)
    names = {team_namespace(cfg, t) for t in queues.teams} if queues else set()
    return sorted(names - {cfg.workloads.namespace})


# ---------------------------------------------------------------------------- the Ray objects


def queue_of(cfg: Any, kind: str, pool: str, spec: dict[str, Any]) -> TeamQueue | None:
    """The team a stack's Ray object is queued in, or None when it is not queued: no queues, no quota
    for its pool in the workloads namespace's team, or a RayCluster/RayService with in-tree
    autoscaling, which Kueue's webhook refuses unless elastic jobs are on
    (kueue pkg/controller/jobs/raycluster/raycluster_webhook.go)."""
    queues = _queues(cfg)
    team = queues.workloads_team(cfg.workloads.namespace) if queues else None
    if team is None or not any(q.pool == pool for q in team.quotas):
        return None
    if kind != "RayJob" and labels.ray_cluster_spec({"kind": kind, "spec": spec}).get("enableInTreeAutoscaling"):
        return None
    return team


def queue_labels(cfg: Any, kind: str, pool: str, spec: dict[str, Any]) -> dict[str, str]:
    """The labels that put a Ray object in its team's LocalQueue, with its priority class."""
    team = queue_of(cfg, kind, pool, spec)
    if team is None:
        return {}
    found = {labels.KUEUE_QUEUE_NAME: team.name}
    if team.priority_class:
        found[labels.KUEUE_PRIORITY_CLASS] = team.priority_class
    return found


def suspended(cfg: Any, kind: str, pool: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec, created suspended when queued: Kueue unsuspends it on admission."""
    if queue_of(cfg, kind, pool, spec) is None:
        return spec
    out = dict(spec)
    inner = out
    for key in _SUSPEND_AT[kind]:
        inner[key] = dict(inner[key])
        inner = inner[key]
    inner["suspend"] = True
    return out
