"""GKE version floors of the features this stack uses, kept as data beside the catalog, and
the check that the cluster's release channel creates it at a version with all of them.

A stack may only get GKE versions that have every feature it declares. The cluster's version
is the release channel's to choose: the program does not send a version unless the stack pins
one (`tpuray:cluster.minMasterVersion`). The provider sends `min_master_version` as the API's
`initialClusterVersion` on create (`InitialClusterVersion: d.Get("min_master_version")` in
terraform-provider-google's `resource_container_cluster.go`, which pulumi-gcp wraps), and one
old patch soon stops being creatable in a channel: a floor sent as the version would fail
`pulumi up` on a new cluster months later. So the floors are checks. `channel_lines` compares
the channel's default version for cluster creation (`gcp.container.get_engine_versions`, i.e.
getServerConfig's `channels[].defaultVersion`, under `pulumi up`; the dated snapshot in
tpuray/data/gke_channel_defaults.yaml offline) with the highest floor, and the program refuses
the stack before declaring anything when the channel would create it below. Upgrades only go
up from there, so a cluster the check lets through never runs below a floor.

`verified` says whether the floor was read in the cited source here (every floor is now; a
new lead without a source is added with verified=False and docs/configuration.md says so).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

import yaml

from tpuray import catalog
from tpuray.config.schema import StackConfig
from tpuray.paths import DATA_DIR


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


CHANNEL_DEFAULTS = DATA_DIR / "gke_channel_defaults.yaml"


@dataclass(frozen=True)
class ChannelDefaults:
    """Each release channel's default version for cluster creation, as of `retrieved`."""

    versions: dict[str, str]
    retrieved: date
    source: str


@functools.cache
def channel_defaults_snapshot() -> ChannelDefaults:
    """The dated snapshot offline previews answer getEngineVersions with (tpuray/preview/mockrun.py)."""
    doc = yaml.safe_load(CHANNEL_DEFAULTS.read_text())
    versions = {channel: entry["version"] for channel, entry in doc["channels"].items()}
    return ChannelDefaults(versions, doc["retrieved"], doc["source"])


def channel_lines(cfg: StackConfig, defaults: Mapping[str, str]) -> list[str]:
    """The release channel must create the cluster at a version with every feature the stack
    uses; `defaults` maps each channel to its default version for cluster creation. A stack that
    pins `minMasterVersion` chose its version itself (`version_lines` checks it)."""
    if cfg.cluster.min_master_version is not None:
        return []
    key, channel = "tpuray:cluster.releaseChannel", cfg.cluster.release_channel
    needed, feature = required_version(cfg)
    floor = parse(needed) or (0, 0, 0, 0)
    default = defaults.get(channel)
    if default is None:
        return [f"{key}: GKE names no default version for the {channel} channel in {cfg.gcp.region}"]
    if (parse(default) or (0, 0, 0, 0)) >= floor:
        return []
    fit = sorted(c for c, v in defaults.items() if c in ("RAPID", "REGULAR", "STABLE") and (parse(v) or (0,)) >= floor)
    instead = f"use {' or '.join(fit)}" if fit else "no channel does yet"
    return [
        f"{key}: {channel!r} creates clusters at GKE {default} in {cfg.gcp.region}, below {needed}, the first "
        f"version with {feature}; {instead}, or pin tpuray:cluster.minMasterVersion (sent as the initial version)"
    ]


def version_lines(cfg: StackConfig) -> list[str]:
    key = "tpuray:cluster.minMasterVersion"
    pinned = cfg.cluster.min_master_version
    if pinned is None:
        return []  # the channel picks the version; channel_lines checks it
    needed, feature = required_version(cfg)
    parsed = parse(pinned)
    if parsed is None:
        return [f"{key}: {pinned!r} is not a GKE version; e.g. {needed}"]
    if parsed < (parse(needed) or parsed):
        return [
            f"{key}: {pinned!r} is below {needed}, the first GKE version with {feature}; raise it or leave it unset"
        ]
    return []
