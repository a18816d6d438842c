"""The Hugging Face token of an llm stack: from Secret Manager to a file in the serve pods.

When `tpuray:workloads.serve.hfTokenSecret` names a secret (validated in tpuray/desired/llm_stack.py,
which also sets the LLMConfig's HF_TOKEN_PATH), the program declares, and otherwise nothing:
1. the GKE Secret Manager add-on on the cluster: `secret_manager_config {enabled: true}` on the
   container cluster (infra/components/cluster.py; pulumi-gcp's ClusterSecretManagerConfigArgs);
2. a SecretProviderClass (`secrets-store.csi.x-k8s.io/v1`, `provider: gke`, the add-on's
   provider) in the serve namespace: one entry in `parameters.secrets`, the secret version
   (`resourceName`, `latest` unless the stack pins one) written to the file `path: token`;
3. on every pod of the RayService (the head and each TPU worker group: Ray Serve LLM's
   replicas and their vLLM workers run on the slice hosts), a CSI volume of the add-on's
   driver `secrets-store-gke.csi.k8s.io` (readOnly, `volumeAttributes.secretProviderClass`)
   mounted read-only at llm_stack.HF_TOKEN_DIR, so HF_TOKEN_PATH names a real file;
4. `roles/secretmanager.secretAccessor` on that one secret (never the project) for the
   serving GCP service account alone (`<cluster>-serve`, the GSA of the RayService's pods;
   training pods act as another: infra/components/identities.py). The add-on authenticates as
   the pod's Kubernetes service account through Workload Identity; when that account carries the
   `iam.gke.io/gcp-service-account` annotation (ours do: infra/components/identities.py), the
   provider trades its token for the annotated GSA's, so the GSA is the principal Secret
   Manager sees (GoogleCloudPlatform/secrets-store-csi-driver-provider-gcp auth/auth.go,
   `Token`; the add-on derives from that provider, so it is assumed to do the same: not
   observed on GKE). A binding for the KSA's own `principal://...` would not be used.
   The grant waits for the KSA->GSA bindings, which wait for the cluster's workload pool.

Sources: https://cloud.google.com/secret-manager/docs/secret-manager-managed-csi-component
(the add-on: enable it, authenticate with Workload Identity, a SecretProviderClass, a CSI
volume; pulumi-gcp 10.2.0 cites this page for Cluster.secret_manager_config); the
SecretProviderClass schema: kubernetes-sigs/secrets-store-csi-driver
config/crd/bases/secrets-store.csi.x-k8s.io_secretproviderclasses.yaml (vendored in
tpuray/data/schemas/secrets-store-csi-driver, `parameters` is a map of strings, so
`secrets` is a YAML string); `resourceName`/`path`: the provider's README (usage).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import yaml

from tpuray.desired import llm_stack
from tpuray.desired.llm_stack import VOLUME_NAME, mount_token, provider_class_name  # noqa: F401 (one home: llm_stack)

SPC_API_VERSION = "secrets-store.csi.x-k8s.io/v1"
SPC_PROVIDER = "gke"  # the GKE add-on's provider (the open-source provider is `gcp`)
ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"


def secret_provider_class(version: str | None, object_name: str) -> dict[str, Any] | None:
    """The SecretProviderClass naming the token's secret version; None when the stack has no token."""
    if version is None:
        return None
    secrets = [{"resourceName": version, "path": llm_stack.HF_TOKEN_FILE_NAME}]
    return {
        "apiVersion": SPC_API_VERSION,
        "kind": "SecretProviderClass",
        "metadata": {"name": provider_class_name(object_name)},
        "spec": {"provider": SPC_PROVIDER, "parameters": {"secrets": yaml.safe_dump(secrets, sort_keys=False)}},
    }


def secret_parts(version: str) -> tuple[str, str]:
    """projects/P/secrets/S/versions/V -> (P, S)."""
    parts = version.split("/")
    return parts[1], parts[3]


def grant_access(
    name: str,
    version: str | None,
    gsa_email: pulumi.Input[str],
    after: list[pulumi.Resource],
    opts: pulumi.ResourceOptions,
) -> gcp.secretmanager.SecretIamMember | None:
    """secretAccessor on the token's secret alone for the serving GSA, declared after `after`
    (its Workload Identity bindings, themselves waiting for the cluster); None without a token."""
    if version is None:
        return None
    project, secret = secret_parts(version)
    return gcp.secretmanager.SecretIamMember(
        f"{name}-hf-token",
        project=project,
        secret_id=secret,
        role=ACCESSOR_ROLE,
        member=pulumi.Output.from_input(gsa_email).apply(lambda email: f"serviceAccount:{email}"),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)),
    )
