"""GKE version floors of the features this stack uses, kept as data beside the catalog.

A stack may only get GKE versions that have every feature it declares. The release
channel alone does not guarantee that: a channel keeps offering a minor version for
months after newer ones arrive (GKE supports a minor version for up to 24 months,
https://cloud.google.com/kubernetes-engine/versioning), so a cluster created or kept on
an older patch would lack the feature. So the cluster's `min_master_version` is always set:
to `tpuray:cluster.minMasterVersion` when the stack gives one (and config refuses one below
the highest floor of the features it uses), else to that highest floor.

`verified` says whether the floor was read in the cited source here (every floor is now; a
new lead without a source is added with verified=False and docs/configuration.md says so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpuray import catalog

if TYPE_CHECKING:
    from tpuray.config import StackConfig


@dataclass(frozen=True)
class Floor:
    version: str
    source: str
    verified: bool


FLOORS: dict[str, Floor] = {
    "Ray operator add-on": Floor(
        "1.30.0-gke.1747000",
        "https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/how-to/enable-ray-on-gke "
        "('VERSION: the GKE version, must be 1.30.0-gke.1747000 or later')",
        True,
    ),
    "ComputeClass": Floor(
        "1.30.3-gke.1451000",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes ('Custom "
        "ComputeClasses are available to use in GKE Autopilot mode and GKE Standard mode in version "
        "1.30.3-gke.1451000 and later')",
        True,
    ),
    "TPU containers without privileged mode (Pod Security restricted)": Floor(
        "1.28.0",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning, TPU workload "
        "sample: 'privileged: true # Required for GKE versions earlier than 1.28 to access TPUs.'",
        True,
    ),
    "ComputeClass nodePoolAutoCreation without cluster-level node auto-provisioning": Floor(
        "1.33.3-gke.1136000",
        "google/skills gke-compute-classes SKILL.md: 'Starting with GKE 1.33.3-gke.1136000, "
        "nodePoolAutoCreation.enabled: true in the ComputeClass achieves automatic node pools'",
        True,
    ),
    "TPU7x (Ironwood)": Floor(
        "1.34.0-gke.2201000",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/tpu-ironwood ('GKE Standard clusters "
        "that run version 1.34.0-gke.2201000 and later')",
        True,
    ),
    "flex-start for TPUs": Floor(
        "1.33.0-gke.1712000",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/dws ('To run TPUs, use GKE version "
        "1.33.0-gke.1712000 or later')",
        True,
    ),
}
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-gke\.(\d+))?$")


def parse(version: str) -> tuple[int, int, int, int] | None:
    """'1.33.3-gke.1136000' -> (1, 33, 3, 1136000); None when it is not a GKE version."""
    match = _VERSION.match(version)
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())  # type: ignore[return-value]


def features_used(cfg: StackConfig) -> list[str]:
    """The features with a floor that this stack declares (the program always uses the first four)."""
    used = [
        "Ray operator add-on",
        "ComputeClass",
        "TPU containers without privileged mode (Pod Security restricted)",
        "ComputeClass nodePoolAutoCreation without cluster-level node auto-provisioning",
    ]
    gens = [catalog.generation(pool.generation) for pool in cfg.slice_pools]
    used += dict.fromkeys(g.gke_feature for g in gens if g.gke_feature)  # the catalog names each one
    tiers = [tier.kind for pool in cfg.slice_pools for tier in pool.capacity]
    used += dict.fromkeys(t.gke_feature for t in tiers if t.gke_feature)  # the capacity table names each one
    return used


def required_version(cfg: StackConfig) -> tuple[str, str]:
    """(the highest floor among the features used, the feature that sets it)."""
    feature = max(features_used(cfg), key=lambda f: parse(FLOORS[f].version) or (0, 0, 0, 0))
    return FLOORS[feature].version, feature


def effective_min_version(cfg: StackConfig) -> str:
    """The cluster's min_master_version: the stack's own, else the floor of the features it uses."""
    return cfg.cluster.min_master_version or required_version(cfg)[0]


def version_lines(cfg: StackConfig) -> list[str]:
    key = "tpuray:cluster.minMasterVersion"
    pinned = cfg.cluster.min_master_version
    if pinned is None:
        return []  # the program pins the floor itself (effective_min_version)
    needed, feature = required_version(cfg)
    parsed = parse(pinned)
    if parsed is None:
        return [f"{key}: {pinned!r} is not a GKE version; e.g. {needed}"]
    if parsed < (parse(needed) or parsed):
        return [
            f"{key}: {pinned!r} is below {needed}, the first GKE version with {feature}; raise it or leave it unset"
        ]
    return []
