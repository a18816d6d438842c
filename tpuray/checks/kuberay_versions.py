"""The KubeRay version each rendered field needs, kept as data beside the GKE version floors.

Why it matters: the KubeRay CRDs are structural, so an API server whose CRDs predate a field
prunes it on apply without an error (Kubernetes: "Pruning unknown fields",
https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning);
a client that does not ask for strict field validation gets at most a warning. The object is
stored without the field and the operator never sees it. What that costs is each floor's
`dropped` text: for worker group `labels`, a gang that hangs forever; for `authOptions`, a
Ray dashboard and Jobs API open to anyone who reaches the head.

Which KubeRay the GKE Ray operator add-on runs: GKE publishes the add-on's GKE floor
(1.30.0-gke.1747000, tpuray/checks/gke_versions.py) but no table of the KubeRay version it installs
per GKE version; none was found in the add-on pages (enable-ray-on-gke, concepts/overview) or
the GKE release notes searched for this project. So `ADDON_KUBERAY_BY_GKE` is empty on
purpose, and the `kuberay-field-version` policy asks each environment to record the version
its cluster runs (policies/policy-config.<env>.json), read from the cluster itself: the
installed CRD schema has a field or not, e.g. `kubectl explain raycluster.spec.authOptions`
fails on a KubeRay older than 1.5.1 (docs/configuration.md, "KubeRay versions").

How each floor was established (`source`): the Go module sources of ray-operator v1.4.0 and
v1.5.0 (the versions the Go module proxy serves here; apis/ray/v1/*_types.go) and the Ray
docs for what those sources cannot show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldFloor:
    path: str  # where it sits in a RayCluster spec (RayJob rayClusterSpec, RayService rayClusterConfig) or object spec
    kinds: tuple[str, ...]  # the Ray kinds whose spec carries it at `path`
    version: str  # the first KubeRay release whose CRD has it
    source: str
    dropped: str  # what happens when an older KubeRay's API server prunes it


CLUSTER_KINDS = ("RayCluster", "RayJob", "RayService")

FIELD_FLOORS: tuple[FieldFloor, ...] = (
    FieldFloor(
        "authOptions",
        CLUSTER_KINDS,
        "1.5.1",
        "Ray docs, KubeRay auth guide (ray-project/ray PR 58824): 'If you are using KubeRay v1.5.1 or newer, "
        "you can use the authOptions API'; absent from ray-operator@v1.5.0 apis/ray/v1/raycluster_types.go",
        "the cluster starts without token auth: the dashboard and Jobs API run code for anyone who reaches the head",
    ),
    FieldFloor(
        "workerGroupSpecs[].labels",
        CLUSTER_KINDS,
        "1.5.0",
        "ray-operator@v1.5.0 apis/ray/v1/raycluster_types.go WorkerGroupSpec.Labels; absent at v1.4.0",
        "Ray nodes start without the slice-pool and market-type labels, so the workloads' label selectors "
        "match no node and the gang waits forever",
    ),
    FieldFloor(
        "autoscalerOptions.version",
        CLUSTER_KINDS,
        "1.4.0",
        "ray-operator@v1.4.0 apis/ray/v1/raycluster_types.go AutoscalerOptions.Version (v1.4.0 is the oldest "
        "release checked)",
        "the autoscaler runs as v1, which ignores per-group idle timeouts and label-based scale-up",
    ),
    FieldFloor(
        "upgradeStrategy",
        ("RayService",),
        "1.4.0",
        "ray-operator@v1.4.0 apis/ray/v1/rayservice_types.go RayServiceSpec.UpgradeStrategy (oldest release checked)",
        "a spec change falls back to the operator's default upgrade behaviour",
    ),
    FieldFloor(
        "submitterPodTemplate",
        ("RayJob",),
        "1.4.0",
        "ray-operator@v1.4.0 apis/ray/v1/rayjob_types.go RayJobSpec.SubmitterPodTemplate (oldest release checked)",
        "KubeRay's default submitter pod runs instead, which Pod Security `restricted` refuses",
    ),
)

# GKE version -> KubeRay version of the Ray operator add-on: not published (module docstring).
ADDON_KUBERAY_BY_GKE: dict[str, str] = {}

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def parse(version: str) -> tuple[int, int, int] | None:
    """'1.5.1' or 'v1.5.1' -> (1, 5, 1); None when it is not a release version."""
    match = _VERSION.match(version.strip()) if isinstance(version, str) else None
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def _present(node: object, parts: list[str]) -> bool:
    """Whether the dotted path (with `[]` for every list item) is set anywhere under node."""
    if not parts:
        return node is not None
    head, rest = parts[0], parts[1:]
    if not isinstance(node, dict):
        return False
    key, each = (head[:-2], True) if head.endswith("[]") else (head, False)
    if key not in node:
        return False
    value = node[key]
    if each:
        return isinstance(value, list) and any(_present(item, rest) for item in value)
    return _present(value, rest)


def fields_used(kind: str, cluster_spec: dict, object_spec: dict) -> list[FieldFloor]:
    """The floors of the fields this Ray object sets (cluster fields in its RayCluster spec)."""
    used = []
    for floor in FIELD_FLOORS:
        if kind not in floor.kinds:
            continue
        in_object = floor.kinds != CLUSTER_KINDS  # kind-specific fields sit on the object's own spec
        if _present(object_spec if in_object else cluster_spec, floor.path.split(".")):
            used.append(floor)
    return used
