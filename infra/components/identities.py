"""One Kubernetes service account per role of a Ray pod, and the Google identity of each that needs one.

Roles (`pod_accounts`, `STACK_ACCOUNTS`):
- `ray-head`: the heads of the RayJob and the interactive RayCluster. With in-tree autoscaling
  KubeRay binds its autoscaler Role to the head's service account: `BuildRoleBinding` names
  `GetHeadGroupServiceAccountName(cluster)`, the head template's serviceAccountName (else the
  cluster's name), and the Role allows get/list/watch/patch on pods, patch on pods/resize and
  get/patch on rayclusters, namespace-wide (ray-project/kuberay v1.7.0
  ray-operator/controllers/ray/common/rbac.go BuildRole / BuildRoleBinding,
  ray-operator/controllers/ray/utils/util.go GetHeadGroupServiceAccountName; the reconcile steps
  reconcileAutoscalerServiceAccount / Role / RoleBinding in raycluster_controller.go, run only
  when `enableInTreeAutoscaling`; the same in v1.5.0). So no other pod may share it.
- `ray-worker`: the TPU workers of those objects (Ray nodes: tasks, Train workers, JAX).
- `ray-serve-head`, `ray-serve`: the RayService's head and its workers (Serve replicas, vLLM).
  Their own pair: the serve pods read the model mirror and, with `hfTokenSecret`, the
  Hugging Face token, which no training pod needs; the serve head gets the autoscaler Role when
  the RayService autoscales, its workers never.
- `ray-submitter`: the RayJob's submitter pod. It only calls the head's Jobs API: no token, no
  Google identity.

No pod mounts a Kubernetes API token (`automountServiceAccountToken: false` on every account and
every pod template): no Ray process calls the API server. The one client is KubeRay's autoscaler
sidecar, which reads the in-cluster token from the standard path (ray 2.60
ray/autoscaler/_private/kuberay/node_provider.py IN_CLUSTER_TOKEN_PATH); `autoscaler_token`
gives the head the projected volume the ServiceAccount admission plugin would have added
(https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-token-volume)
and mounts it in that container alone (`autoscalerOptions.volumeMounts`), so a job's driver,
which runs in the head's Ray container, holds no token either. Workload Identity needs no
mounted token (the GKE metadata server identifies the pod itself:
https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity), nor does the Secret
Manager add-on (the kubelet hands CSI drivers the pod's token through the CSIDriver's
`tokenRequests`: https://kubernetes-csi.github.io/docs/token-requests.html).

Google identities (Workload Identity, `iam.gke.io/gcp-service-account`): the `ray` GSA for the
training and interactive pods (data: viewer; checkpoints: user), the `serve` GSA for the serve
pods (checkpoint, model mirror: viewer; the Hugging Face token's accessor); both read the bundle
bucket through the foundation's grant. Each
GSA's workloadIdentityUser binding names exactly its KSAs; the submitter has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.components import foundation_accounts, hf_secret
from infra.components.foundation_accounts import FoundationAccount
from tpuray.config import StackConfig
from tpuray.desired.accounts import HEAD, SERVE, SERVE_HEAD, SUBMITTER, WORKER

WORKLOADS_GSA = "ray"  # service_account_id suffix: <cluster>-ray
SERVE_GSA = "serve"  # <cluster>-serve
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"


@dataclass(frozen=True)
class Account:
    ksa: str
    gsa: str | None  # the GSA suffix it acts as through Workload Identity; None: no Google identity


def stack_accounts(cfg: StackConfig) -> list[Account]:
    """The accounts the stack's Ray objects run as, in declaration order."""
    wl = cfg.workloads
    out = [Account(HEAD, WORKLOADS_GSA), Account(WORKER, WORKLOADS_GSA)] if wl.train or wl.interactive else []
    out += [Account(SUBMITTER, None)] if wl.train else []
    return out + ([Account(SERVE_HEAD, SERVE_GSA), Account(SERVE, SERVE_GSA)] if wl.serve else [])


def _buckets(*uris: str | None) -> list[str]:
    found = []
    for uri in uris:
        match = re.match(r"^gs://([^/]+)", uri or "")
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


def bucket_roles(cfg: StackConfig, gsa: str) -> dict[str, str]:
    """bucket -> the storage role the GSA holds on it, as the stack grants it. The bundle bucket
    (bundleUri) is not among them: the Terraform foundation grants every workload GSA object
    viewer there (modules/ci-identity, workloads_read_bundles), so the deploy identity holds no
    IAM admin on the bucket of the code every pod runs, and a bucket a GSA may write is never the
    bundles' (issue 36, item 3)."""
    wl = cfg.workloads
    bundles = _buckets(wl.bundle_uri)
    if gsa == SERVE_GSA:
        assert wl.serve is not None
        # The model mirror is read by Ray Serve LLM's cloud model loading (docs/apps.md).
        readable = _buckets(wl.serve.checkpoint_uri, wl.serve.model_source)
        return {b: "roles/storage.objectViewer" for b in readable if b not in bundles}
    writable = _buckets(wl.train.storage_uri if wl.train else None)
    readable = _buckets(wl.train.data_uri if wl.train else None)
    roles = {b: "roles/storage.objectUser" for b in writable if b not in bundles}
    return roles | {b: "roles/storage.objectViewer" for b in readable if b not in roles and b not in bundles}


def declare(
    name: str,
    cfg: StackConfig,
    hf_token_version: str | None,
    workload_pool: pulumi.Input[str],
    gcp_opts: pulumi.ResourceOptions,
) -> dict[str, FoundationAccount]:
    """The GSAs' Workload Identity bindings (one per KSA), bucket grants and the Hugging Face
    token's grant; returns suffix -> GSA. The KSAs themselves are `service_accounts`. The GSAs are
    the Terraform foundation's (foundation_accounts.py): the stack creates no service account."""
    accounts = stack_accounts(cfg)
    ns = cfg.workloads.namespace
    gsas = {
        suffix: foundation_accounts.existing(cfg.gcp.project, cfg.cluster.name, suffix)
        for suffix in dict.fromkeys(a.gsa for a in accounts if a.gsa)
    }
    bindings: dict[str, list[pulumi.Resource]] = {}
    for account in (a for a in accounts if a.gsa):
        assert account.gsa is not None
        bindings.setdefault(account.gsa, []).append(
            gcp.serviceaccount.IAMMember(
                f"{name}-wi-{account.ksa}",
                service_account_id=gsas[account.gsa].name,
                role="roles/iam.workloadIdentityUser",
                # From the cluster's own workload pool: the binding waits for the cluster, which
                # creates the pool (IAM refuses the member before it exists on a fresh project).
                member=pulumi.Output.concat("serviceAccount:", workload_pool, f"[{ns}/{account.ksa}]"),
                opts=gcp_opts,
            )
        )
    for suffix, gsa in gsas.items():
        member = gsa.email.apply(lambda email: f"serviceAccount:{email}")
        for bucket, role in bucket_roles(cfg, suffix).items():
            logical = f"{name}-{bucket}" if suffix == WORKLOADS_GSA else f"{name}-{suffix}-{bucket}"
            gcp.storage.BucketIAMMember(logical, bucket=bucket, role=role, member=member, opts=gcp_opts)
    if SERVE_GSA in gsas:
        # The token's secret, readable by the serving GSA once its KSAs may act as it (hf_secret.py).
        hf_secret.grant_access(name, hf_token_version, gsas[SERVE_GSA].email, bindings[SERVE_GSA], gcp_opts)
    return gsas


def service_accounts(
    name: str,
    cfg: StackConfig,
    gsas: dict[str, FoundationAccount],
    labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> None:
    """One KSA per role, none with an automounted API token."""
    for account in stack_accounts(cfg):
        annotations = {GSA_ANNOTATION: gsas[account.gsa].email} if account.gsa else None
        k8s.core.v1.ServiceAccount(
            f"{name}-ksa-{account.ksa}",
            metadata={"name": account.ksa, "namespace": cfg.workloads.namespace, "labels": labels}
            | ({"annotations": annotations} if annotations else {}),
            automount_service_account_token=False,
            opts=opts,
        )
