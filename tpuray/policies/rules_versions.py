"""Fields an older KubeRay would drop without a word (floors in tpuray/checks/kuberay_versions.py).

The GKE Ray operator add-on's KubeRay version is not published per GKE version, so each
environment records the version its cluster runs in policies/policy-config.<env>.json
(`"kuberay-field-version": {"kuberayVersion": "1.5.1"}`), read off the cluster. The rule then
names each rendered field that version's API server would prune, and what that costs. It is
advisory in the pack; the `all: mandatory` of the dev, staging and prod configs makes it block.

Without a recorded version it has nothing to compare with. That fails open where it matters
most: an add-on older than KubeRay 1.5.1 prunes `authOptions` and the Jobs API runs code for
whoever reaches the head. So an environment that requires token auth says so
(`tokenAuthRequired: true`, as dev, staging and prod do), and there a Ray object with
`authOptions` and no recorded version is a violation. `tpuray check` has no environment cluster
to record a version for and turns the requirement off (tpuray/policies/evaluate.py).
docs/configuration.md ("KubeRay versions") says how to read the version off a cluster and which
value the committed environments record.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tpuray.checks import kuberay_versions
from tpuray.policies.core import ADVISORY, GKE, Resource, Rule
from tpuray.policies.kube import RAY_TYPES, as_dict, cluster_spec

CONFIG = {
    "kuberayVersion": {
        "type": "string",
        "pattern": r"^v?\d+\.\d+\.\d+$",
        "description": "the KubeRay version the environment's cluster runs (kubectl explain raycluster.spec.authOptions "
        "fails below 1.5.1)",
    },
    "tokenAuthRequired": {
        "type": "boolean",
        "default": False,
        "description": "the environment requires Ray token auth: a Ray object with authOptions and no recorded "
        "kuberayVersion is a violation (tpuray check, which has no environment cluster, turns it off)",
    },
}


def _field_versions(resource: Resource, config: dict[str, Any]) -> Iterator[str]:
    obj = resource.props
    kind = resource.kind
    cluster = cluster_spec(obj)
    used = kuberay_versions.fields_used(kind, cluster.spec if cluster else {}, as_dict(obj.get("spec")))
    if not used:
        return
    configured = config.get("kuberayVersion")
    running = kuberay_versions.parse(configured) if isinstance(configured, str) else None
    if running is None:  # not recorded: nothing to compare with (docs/configuration.md, "KubeRay versions")
        auth = [f for f in used if f.path == "authOptions"]
        if auth and config.get("tokenAuthRequired") is True:
            yield (
                f"{resource.label}: authOptions needs KubeRay >= {auth[0].version} and this environment requires token "
                "auth but records no KubeRay version, so nothing shows that its cluster keeps the field; an older "
                f"add-on drops it without an error: {auth[0].dropped}. Record the version the cluster runs as "
                "kuberay-field-version.kuberayVersion in policies/policy-config.<env>.json (docs/configuration.md, "
                '"KubeRay versions")'
            )
        return
    for floor in used:
        if running < kuberay_versions.parse(floor.version):  # type: ignore[operator]
            yield (
                f"{resource.label}: {floor.path} needs KubeRay >= {floor.version} but the environment runs "
                f"{configured}, whose API server drops it without an error: {floor.dropped}"
            )


RULES = (
    Rule(
        "kuberay-field-version",
        "Every rendered KubeRay field exists in the KubeRay version the environment runs (else it is silently dropped).",
        ADVISORY,
        RAY_TYPES,
        _field_versions,
        kubernetes=True,
        config=CONFIG,
        profile=GKE,
    ),
)
