"""Cluster hardening: Dataplane V2, KMS secrets encryption, Binary Authorization, maintenance.

- `datapath_provider = ADVANCED_DATAPATH` (GKE Dataplane V2) enforces NetworkPolicy
  (https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2). It is set at
  creation: changing it on an existing cluster replaces the cluster.
- Application-layer secrets encryption with a Cloud KMS key is set in cluster.py from
  `tpuray:cluster.secretsKmsKey` (https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets).
- Binary Authorization, opt-in: the cluster enforces the project's singleton policy, which
  denies by default and admits the stack's images by digest
  (https://cloud.google.com/binary-authorization/docs/setting-up). Google-maintained system
  images stay admitted through globalPolicyEvaluationMode ENABLE.
- A recurring maintenance window and exclusions: TPU slice node pools are recreated on
  upgrade, which kills a training run
  (https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions).
- The Gateway API (standard channel) for the Serve ingress (network.py).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from tpuray.config import ClusterConfig, StackConfig

DATAPLANE_V2 = "ADVANCED_DATAPATH"
ENFORCE = "PROJECT_SINGLETON_POLICY_ENFORCE"


def hardening_settings(cfg: ClusterConfig) -> dict[str, Any]:
    """Extra google_container_cluster arguments (pulumi_gcp names)."""
    out: dict[str, Any] = {
        "datapath_provider": DATAPLANE_V2,
        "gateway_api_config": {"channel": "CHANNEL_STANDARD"},
    }
    if cfg.binary_authorization is not None and cfg.binary_authorization.enforce:
        out["binary_authorization"] = {"evaluation_mode": ENFORCE}
    if cfg.maintenance is not None:
        window = cfg.maintenance.window
        out["maintenance_policy"] = {
            "recurring_window": {"start_time": window.start, "end_time": window.end, "recurrence": window.recurrence},
            "maintenance_exclusions": [
                {
                    "exclusion_name": ex.name,
                    "start_time": ex.start,
                    "end_time": ex.end,
                    "exclusion_options": {"scope": ex.scope},
                }
                for ex in cfg.maintenance.exclusions
            ],
        }
    return out


def binary_authorization_policy(
    cfg: StackConfig, opts: pulumi.ResourceOptions
) -> gcp.binaryauthorization.Policy | None:
    """The project's singleton policy: deny by default; admit the stack's Ray image override by digest,
    or else the images of the project's own repository (REPO/*: only the deploy identity pushes there,
    its tags are immutable, and `pulumi up` names them by digest), and the listed images. A trailing *
    matches the rest of one path segment ("registry/path/to/image ... supports a trailing * as a
    wildcard": https://cloud.google.com/binary-authorization/docs/reference/rest/v1/projects/getPolicy,
    AdmissionWhitelistPattern.namePattern)."""
    binauthz = cfg.cluster.binary_authorization
    if binauthz is None or not binauthz.enforce:
        return None
    own = f"{cfg.images.repository}/*" if cfg.ray.image is None and cfg.images.repository else cfg.ray.tpu_image
    images = list(dict.fromkeys([own, *binauthz.allowed_images]))
    return gcp.binaryauthorization.Policy(
        "binauthz",
        project=cfg.gcp.project,
        global_policy_evaluation_mode="ENABLE",
        default_admission_rule={"evaluation_mode": "ALWAYS_DENY", "enforcement_mode": "ENFORCED_BLOCK_AND_AUDIT_LOG"},
        admission_whitelist_patterns=[{"name_pattern": image} for image in images],
        opts=opts,
    )
