"""The names a stack carries follow the rules of the service that owns them: Cloud Storage buckets in
every gs:// key, Certificate Manager certificates, Secret Manager, Cloud KMS and Cloud Monitoring
resource names, Kubernetes names. One line per bad name, the key and value in it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.stack_edits import STACKS, errors
from tpuray.checks import gcp_names
from tpuray.config.checks import parse_stack_config


def train(c: dict[str, Any]) -> dict[str, Any]:
    return c["workloads"]["train"]


def serve(c: dict[str, Any]) -> dict[str, Any]:
    return c["workloads"]["serve"]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_committed_stacks_carry_only_valid_names(stack: str) -> None:
    assert gcp_names.stack_lines(parse_stack_config(copy.deepcopy(STACKS[stack]), stack)) == []


# ---------------------------------------------------------------------------- Cloud Storage buckets


def test_a_bucket_beginning_with_goog_is_refused() -> None:
    assert errors("prod", lambda c: train(c).update(dataUri="gs://goog-ml-data/regression/")) == [
        "tpuray:workloads.train.dataUri: 'gs://goog-ml-data/regression/' is invalid; bucket 'goog-ml-data' "
        'begins with "goog", which bucket names cannot'
    ]


def test_a_bucket_containing_google_is_refused() -> None:
    assert errors("prod", lambda c: train(c).update(storageUri="gs://acme-google-ml/checkpoints")) == [
        "tpuray:workloads.train.storageUri: 'gs://acme-google-ml/checkpoints' is invalid; bucket 'acme-google-ml' "
        'contains "google" or a close misspelling of it, which bucket names cannot'
    ]


def test_a_bucket_with_a_close_misspelling_of_google_is_refused() -> None:
    assert errors("prod", lambda c: serve(c).update(modelSource="gs://acme-g00gle-models/gemma-3-4b-it")) == [
        "tpuray:workloads.serve.modelSource: 'gs://acme-g00gle-models/gemma-3-4b-it' is invalid; bucket "
        "'acme-g00gle-models' contains \"google\" or a close misspelling of it, which bucket names cannot"
    ]


def test_a_bucket_that_is_an_ip_address_is_refused() -> None:
    assert errors("dev", lambda c: c["workloads"].update(bundleUri="gs://10.128.0.12/bundles")) == [
        "tpuray:workloads.bundleUri: 'gs://10.128.0.12/bundles' is invalid; bucket '10.128.0.12' is an IP address "
        "in dotted-decimal notation, which bucket names cannot be"
    ]


def test_a_bucket_of_64_characters_without_dots_is_refused() -> None:
    bucket = "acme-ml-prod-regression-training-data-us-east5-columbus-ohio-v02"  # 64 characters
    assert errors("prod", lambda c: train(c).update(dataUri=f"gs://{bucket}/")) == [
        f"tpuray:workloads.train.dataUri: 'gs://{bucket}/' is invalid; bucket '{bucket}' is 64 characters; "
        "bucket names are 3-63 characters (222 with dots, 63 per dot-separated part)"
    ]


def test_a_dotted_bucket_with_a_part_over_63_characters_is_refused() -> None:
    part = "regression-training-data-for-the-acme-ml-prod-v6e-slices-in-ohio"  # 64 characters
    uri = f"gs://{part}.data.acme.com/"
    assert errors("prod", lambda c: train(c).update(dataUri=uri)) == [
        f"tpuray:workloads.train.dataUri: {uri!r} is invalid; bucket '{part}.data.acme.com' has a dot-separated "
        "part longer than 63 characters"
    ]


def test_a_bucket_with_capitals_is_refused_naming_them() -> None:
    assert errors("prod", lambda c: train(c).update(storageUri="gs://Acme-ML-Prod-Ray/checkpoints")) == [
        "tpuray:workloads.train.storageUri: 'gs://Acme-ML-Prod-Ray/checkpoints' is invalid; bucket "
        "'Acme-ML-Prod-Ray' has 'ALMPR'; bucket names use lowercase letters, digits, -, _ and . only"
    ]


def test_a_bucket_ending_with_a_hyphen_is_refused() -> None:
    assert errors("dev", lambda c: c["workloads"]["serve"].update(checkpointUri="gs://acme-ml-dev-/ckpt")) == [
        "tpuray:workloads.serve.checkpointUri: 'gs://acme-ml-dev-/ckpt' is invalid; bucket 'acme-ml-dev-' must "
        "start and end with a letter or digit"
    ]


def test_an_https_uri_where_a_gs_uri_is_needed_is_refused() -> None:
    uri = "https://storage.googleapis.com/acme-ml-prod-data/regression/"
    assert errors("prod", lambda c: train(c).update(dataUri=uri)) == [
        f"tpuray:workloads.train.dataUri: {uri!r} is https://, not a Cloud Storage URI; use gs://BUCKET/PATH of "
        "the Parquet or JSONL files"
    ]


def test_a_local_path_where_a_bucket_is_needed_is_refused() -> None:
    assert errors("prod", lambda c: train(c).update(storageUri="/mnt/checkpoints")) == [
        "tpuray:workloads.train.storageUri: '/mnt/checkpoints' is a local path, not a Cloud Storage URI; use "
        "gs://BUCKET/PATH for the checkpoints"
    ]


def test_an_s3_checkpoint_uri_is_refused() -> None:
    assert errors("dev", lambda c: serve(c).update(checkpointUri="s3://acme-ml-dev-ray/checkpoints")) == [
        "tpuray:workloads.serve.checkpointUri: 's3://acme-ml-dev-ray/checkpoints' is s3://, not a Cloud Storage "
        "URI; use gs://BUCKET/PATH of a training run's checkpoints"
    ]


def test_a_gs_uri_without_a_bucket_is_refused() -> None:
    assert errors("prod", lambda c: train(c).update(dataUri="gs:///regression/")) == [
        "tpuray:workloads.train.dataUri: 'gs:///regression/' names no bucket; use gs://BUCKET/PATH of the "
        "Parquet or JSONL files"
    ]


def test_a_bundle_uri_of_the_wrong_form_gets_only_its_own_line() -> None:
    assert errors("prod", lambda c: c["workloads"].update(bundleUri="acme-ml-prod-ray/bundles")) == [
        "tpuray:workloads.bundleUri: 'acme-ml-prod-ray/bundles' is invalid; use gs://BUCKET[/PREFIX], the folder "
        "the deploy workflow uploads bundles to (tpuray adds the tpuray-apps-<sha256>.zip name)"
    ]


def test_a_terraform_state_bucket_given_as_a_uri_is_refused() -> None:
    tf = {"backend": "gcs", "bucket": "gs://acme-ml-prod-tfstate", "outputs": {"network": "network"}}
    assert errors("prod", lambda c: c.update(terraform=tf)) == [
        "tpuray:terraform.bucket: 'gs://acme-ml-prod-tfstate' is a URI; use the bucket's name alone, without gs://"
    ]


def test_a_terraform_state_bucket_cloud_storage_refuses_is_refused() -> None:
    tf = {"backend": "gcs", "bucket": "goog-acme-tfstate", "outputs": {"network": "network"}}
    assert errors("prod", lambda c: c.update(terraform=tf)) == [
        "tpuray:terraform.bucket: 'goog-acme-tfstate' is invalid; the bucket name begins with \"goog\", which "
        "bucket names cannot"
    ]


# ---------------------------------------------------------------------------- other GCP resource names


def test_a_certificate_manager_name_with_dots_is_refused() -> None:
    assert errors(
        "prod", lambda c: serve(c)["gateway"]["tls"].update(certificateManager=["serve.ml.acme.internal"])
    ) == [
        "tpuray:workloads.serve.gateway.tls.certificateManager[0]: 'serve.ml.acme.internal' is invalid; "
        "Certificate Manager certificate names are 1-64 characters: a letter, then letters, digits, - or _"
    ]


def test_a_certificate_manager_name_of_65_characters_is_refused() -> None:
    name = "tpuray-prod-serve-" + "x" * 47
    assert errors("prod", lambda c: serve(c)["gateway"]["tls"].update(certificateManager=[name])) == [
        f"tpuray:workloads.serve.gateway.tls.certificateManager[0]: {name!r} is invalid; Certificate Manager "
        "certificate names are 1-64 characters: a letter, then letters, digits, - or _"
    ]


def test_a_hugging_face_secret_in_a_project_that_cannot_exist_is_refused() -> None:
    assert errors("prod", lambda c: serve(c).update(hfTokenSecret="projects/Acme_ML_Prod/secrets/hf-token")) == [
        "tpuray:workloads.serve.hfTokenSecret: project 'Acme_ML_Prod' is invalid; name the secret's project by its "
        "ID (6-30 lowercase letters, digits or hyphens) or its number"
    ]


def test_a_hugging_face_secret_named_by_project_number_is_accepted() -> None:
    raw = copy.deepcopy(STACKS["prod"])
    serve(raw)["hfTokenSecret"] = "projects/123456789012/secrets/hf-token/versions/3"
    assert parse_stack_config(raw, "prod").workloads.serve.hf_token_secret.startswith("projects/123456789012/")


def test_a_kms_key_ring_with_a_dot_is_refused() -> None:
    key = "projects/acme-ml-prod/locations/us-east5/keyRings/tpuray.prod/cryptoKeys/gke-secrets"
    assert errors("prod", lambda c: c["cluster"].update(secretsKmsKey=key)) == [
        "tpuray:cluster.secretsKmsKey: key ring 'tpuray.prod' is invalid; Cloud KMS key ring and key names are "
        "1-63 letters, digits, - or _"
    ]


def test_a_kms_key_in_a_project_that_cannot_exist_is_refused() -> None:
    key = "projects/ACME/locations/us-east5/keyRings/tpuray-prod/cryptoKeys/gke-secrets"
    assert errors("prod", lambda c: c["cluster"].update(secretsKmsKey=key)) == [
        "tpuray:cluster.secretsKmsKey: project 'ACME' is invalid; use the project's ID or its number"
    ]


def test_a_notification_channel_of_a_project_that_cannot_exist_is_refused() -> None:
    channel = "projects/acme_ml_prod/notificationChannels/4471029384756102938"
    assert errors("prod", lambda c: c["observability"].update(notificationChannels=[channel])) == [
        f"tpuray:observability.notificationChannels[0]: project 'acme_ml_prod' of {channel!r} is invalid; use the "
        "project's ID or its number"
    ]


# ---------------------------------------------------------------------------- Kubernetes and Compute names


def test_a_namespace_kubernetes_refuses_is_refused() -> None:
    assert errors("dev", lambda c: c["workloads"].update(namespace="Ray_Apps")) == [
        "tpuray:workloads.namespace: 'Ray_Apps' is invalid; Kubernetes namespace names are 1-63 lowercase letters, "
        "digits or -, starting and ending with a letter or digit (RFC 1123)"
    ]


def test_a_gateway_hostname_given_as_a_url_is_refused() -> None:
    assert errors("prod", lambda c: serve(c)["gateway"].update(hostname="https://serve.ml.acme.internal")) == [
        "tpuray:workloads.serve.gateway.hostname: 'https://serve.ml.acme.internal' is invalid; a Gateway hostname "
        "is a lowercase DNS name of at most 253 characters, optionally *. first (serve.ml.example.com), never an "
        "IP address"
    ]


def test_a_gateway_hostname_that_is_an_ip_address_is_refused() -> None:
    assert errors("prod", lambda c: serve(c)["gateway"].update(hostname="10.128.4.20")) == [
        "tpuray:workloads.serve.gateway.hostname: '10.128.4.20' is invalid; a Gateway hostname is a lowercase DNS "
        "name of at most 253 characters, optionally *. first (serve.ml.example.com), never an IP address"
    ]


def test_a_tls_secret_name_kubernetes_refuses_is_refused() -> None:
    assert errors("prod", lambda c: serve(c)["gateway"].update(tls={"secretName": "serve_tls"})) == [
        "tpuray:workloads.serve.gateway.tls.secretName: 'serve_tls' is invalid; Kubernetes Secret names are "
        "lowercase DNS subdomains of at most 253 characters (letters, digits, - and .)"
    ]


def test_a_secondary_range_name_compute_engine_refuses_is_refused() -> None:
    assert errors("prod", lambda c: c["cluster"].update(podsRangeName="Pods_Range", servicesRangeName="services")) == [
        "tpuray:cluster.podsRangeName: 'Pods_Range' is invalid; secondary range names are Compute Engine names "
        "(RFC 1035: 1-63 lowercase letters, digits or hyphens, starting with a letter)"
    ]


def test_an_iap_oauth_secret_name_kubernetes_refuses_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        gateway = serve(c)["gateway"]
        gateway.pop("proxyOnlySubnetCidr")
        gateway.update(
            className="gke-l7-global-external-managed",
            iap={"clientId": "1234-abc.apps.googleusercontent.com", "oauthSecretName": "IAP_OAuth"},
        )

    assert errors("prod", edit) == [
        "tpuray:workloads.serve.gateway.iap.oauthSecretName: 'IAP_OAuth' is invalid; Kubernetes Secret names are "
        "lowercase DNS subdomains of at most 253 characters (letters, digits, - and .)"
    ]
