"""Resource names the services define, checked on the names a stack carries: Cloud Storage buckets
(every gs:// key), Certificate Manager certificates, Secret Manager and Cloud KMS resource names,
Kubernetes object names and the rest. One line per bad name: the key, the value and the rule.

Each rule cites the service's documentation (or the pinned provider that repeats it) beside its
constant. Called by tpuray.checks.gcp_rules.stack_lines; a key whose overall form another check already
refuses (bundleUri and modelSource in tpuray/config/checks.py and tpuray/desired/llm_stack.py, hfTokenSecret,
secretsKmsKey) gets no second line here.
"""

from __future__ import annotations

import ipaddress
import re

from tpuray.checks.hf_token import HF_TOKEN
from tpuray.config.schema import StackConfig

NS = "tpuray"

# Cloud Storage bucket names (https://cloud.google.com/storage/docs/buckets#naming): "only
# lowercase letters, numeric characters, dashes (-), underscores (_), and dots (.)"; "start and
# end with a number or letter"; "3-63 characters. Names containing dots can contain up to 222
# characters, but each dot-separated component can be no longer than 63 characters"; "cannot be
# represented as an IP address in dotted-decimal notation"; "cannot begin with the "goog" prefix";
# "cannot contain "google" or close misspellings, such as "g00gle"".
BUCKET_CHARS = re.compile(r"^[-_.a-z0-9]+$")
BUCKET_MIN, BUCKET_MAX, BUCKET_DOTTED_MAX, BUCKET_PART_MAX = 3, 63, 222, 63
# "google" and its look-alikes with zeros for the o's and a one for the l (g00gle, go0gle, goog1e).
GOOGLE_LOOKALIKE = re.compile(r"g[o0][o0]g[l1]e")
# Certificate Manager certificate names: "1-64 characters long, and match the regular expression
# [a-zA-Z][a-zA-Z0-9_-]*" (pulumi-gcp 10.2.0 certificatemanager.Certificate `name`, from the
# Certificate Manager API).
CERTIFICATE_ID = re.compile(r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$")
# Cloud KMS key ring and key IDs: "match the regular expression [a-zA-Z0-9_-]{1,63}"
# (google.cloud.kms.v1 CreateKeyRingRequest.key_ring_id and CreateCryptoKeyRequest.crypto_key_id).
KMS_ID = re.compile(r"^[a-zA-Z0-9_-]{1,63}$")
KMS_KEY = re.compile(r"^projects/([^/]+)/locations/[^/]+/keyRings/([^/]+)/cryptoKeys/([^/]+)$")
# A project in a resource name is its ID or its number.
PROJECT_NUMBER = re.compile(r"^[1-9][0-9]{5,}$")
# Project IDs: 6-30 characters, lowercase letters, digits, hyphens; start with a letter, no
# trailing hyphen. https://cloud.google.com/resource-manager/docs/creating-managing-projects
PROJECT_ID = re.compile(r"^[a-z][-a-z0-9]{4,28}[a-z0-9]$")
# gs://BUCKET[/PREFIX] (a bundle location) and gs://BUCKET/PATH (a folder of objects).
GCS_LOCATION = re.compile(r"^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9](/[^\s]*)?$")
# A Secret Manager secret, optionally one version: projects/P/secrets/S[/versions/V|latest].
SECRET_REF = re.compile(r"^projects/[^/\s]+/secrets/[A-Za-z0-9_-]{1,255}(/versions/(latest|[1-9][0-9]*))?$")
GCS_FOLDER = re.compile(r"^gs://[a-z0-9][-_.a-z0-9]{1,220}[a-z0-9]/\S+$")
# Kubernetes: namespace names are RFC 1123 labels (at most 63 characters); Secret names are DNS
# subdomains (at most 253). https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_SUBDOMAIN_MAX = 253
# Gateway API listener hostnames (the Hostname type of gateway.networking.k8s.io/v1 Gateway,
# tpuray/data/schemas/gateway-api/gateway.networking.k8s.io_gateways.yaml): this pattern, 1-253;
# and "IPs are not allowed" (kubernetes-sigs/gateway-api apis/v1/shared_types.go, type Hostname).
GATEWAY_HOSTNAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Compute Engine subnetwork secondary range names: RFC 1035, 1-63 characters
# (https://cloud.google.com/compute/docs/naming-resources).
RANGE_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


def bucket_problem(name: str) -> str | None:
    """Why Cloud Storage refuses a bucket name, or None: the first rule it breaks."""
    dotted = "." in name
    longest = BUCKET_DOTTED_MAX if dotted else BUCKET_MAX
    if not BUCKET_CHARS.match(name):
        bad = sorted({c for c in name if not re.match(r"[-_.a-z0-9]", c)})
        return f"has {''.join(bad)!r}; bucket names use lowercase letters, digits, -, _ and . only"
    if not BUCKET_MIN <= len(name) <= longest:
        return (
            f"is {len(name)} characters; bucket names are {BUCKET_MIN}-{BUCKET_MAX} characters "
            f"({BUCKET_DOTTED_MAX} with dots, {BUCKET_PART_MAX} per dot-separated part)"
        )
    if not (name[0].isalnum() and name[-1].isalnum()):
        return "must start and end with a letter or digit"
    if dotted and max(len(part) for part in name.split(".")) > BUCKET_PART_MAX:
        return f"has a dot-separated part longer than {BUCKET_PART_MAX} characters"
    if _is_ip(name):
        return "is an IP address in dotted-decimal notation, which bucket names cannot be"
    if name.startswith("goog"):
        return 'begins with "goog", which bucket names cannot'
    if GOOGLE_LOOKALIKE.search(name):
        return 'contains "google" or a close misspelling of it, which bucket names cannot'
    return None


def _uri_lines(key: str, uri: str | None, form: str, checked_form: re.Pattern[str] | None = None) -> list[str]:
    """A gs:// key: a gs:// URI (unless another check owns its form) whose bucket Cloud Storage takes."""
    if uri is None:
        return []
    if checked_form is not None and not checked_form.match(uri):
        return []  # the key's own check refuses its form
    if not uri.startswith("gs://"):
        kind = uri.split("://", 1)[0] + "://" if "://" in uri else "a local path"
        return [f"{key}: {uri!r} is {kind}, not a Cloud Storage URI; use {form}"]
    bucket = uri[len("gs://") :].split("/", 1)[0]
    if not bucket:
        return [f"{key}: {uri!r} names no bucket; use {form}"]
    problem = bucket_problem(bucket)
    return [f"{key}: {uri!r} is invalid; bucket {bucket!r} {problem}"] if problem else []


def bucket_lines(cfg: StackConfig) -> list[str]:
    """Every gs:// key of the config, and the Terraform state bucket."""
    wl, key = cfg.workloads, f"{NS}:workloads"
    lines = _uri_lines(f"{key}.bundleUri", wl.bundle_uri, "gs://BUCKET[/PREFIX]", GCS_LOCATION)
    if wl.train is not None:
        lines += _uri_lines(f"{key}.train.dataUri", wl.train.data_uri, "gs://BUCKET/PATH of the Parquet or JSONL files")
        lines += _uri_lines(f"{key}.train.storageUri", wl.train.storage_uri, "gs://BUCKET/PATH for the checkpoints")
    if wl.serve is not None:
        if wl.serve.backend == "llm":
            lines += _uri_lines(f"{key}.serve.modelSource", wl.serve.model_source, "gs://BUCKET/PATH", GCS_FOLDER)
        lines += _uri_lines(
            f"{key}.serve.checkpointUri", wl.serve.checkpoint_uri, "gs://BUCKET/PATH of a training run's checkpoints"
        )
    tf = cfg.terraform
    if tf is not None and tf.backend == "gcs" and tf.bucket:
        if tf.bucket.startswith("gs://"):
            lines.append(f"{NS}:terraform.bucket: {tf.bucket!r} is a URI; use the bucket's name alone, without gs://")
        elif problem := bucket_problem(tf.bucket):
            lines.append(f"{NS}:terraform.bucket: {tf.bucket!r} is invalid; the bucket name {problem}")
    return lines


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _project_ok(project: str) -> bool:
    return bool(PROJECT_ID.match(project) or PROJECT_NUMBER.match(project))


def resource_name_lines(cfg: StackConfig) -> list[str]:
    """Certificate Manager, Secret Manager, Cloud KMS and Cloud Monitoring names."""
    lines = []
    serve, skey = cfg.workloads.serve, f"{NS}:workloads.serve"
    gateway = serve.gateway if serve is not None else None
    if gateway is not None:
        for i, cert in enumerate(gateway.tls.certificate_manager):
            if not CERTIFICATE_ID.match(cert):
                lines.append(
                    f"{skey}.gateway.tls.certificateManager[{i}]: {cert!r} is invalid; Certificate Manager "
                    "certificate names are 1-64 characters: a letter, then letters, digits, - or _"
                )
    token = serve.hf_token_secret if serve is not None and serve.backend == "llm" else None
    if token and SECRET_REF.match(token):  # else llm_stack refuses its form
        project = token.split("/")[1]
        if not _project_ok(project):
            shown = "a plaintext token" if HF_TOKEN.search(project) else repr(project)  # never echo a token
            lines.append(
                f"{skey}.hfTokenSecret: project {shown} is invalid; name the secret's project by its ID "
                "(6-30 lowercase letters, digits or hyphens) or its number"
            )
    kms = cfg.cluster.secrets_kms_key
    match = KMS_KEY.match(kms or "")
    if match:
        project, ring, key = match.groups()
        if not _project_ok(project):
            lines.append(
                f"{NS}:cluster.secretsKmsKey: project {project!r} is invalid; use the project's ID or its number"
            )
        for what, value in (("key ring", ring), ("key", key)):
            if not KMS_ID.match(value):
                lines.append(
                    f"{NS}:cluster.secretsKmsKey: {what} {value!r} is invalid; Cloud KMS key ring and key names "
                    "are 1-63 letters, digits, - or _"
                )
    for i, channel in enumerate(cfg.observability.notification_channels):
        project = channel.split("/")[1]
        if not _project_ok(project):
            lines.append(
                f"{NS}:observability.notificationChannels[{i}]: project {project!r} of {channel!r} is invalid; "
                "use the project's ID or its number"
            )
    return lines


def kubernetes_name_lines(cfg: StackConfig) -> list[str]:
    """The namespace, the Gateway's hostname and the Secrets it names; the secondary range names."""
    wl = cfg.workloads
    lines = []
    if not DNS_LABEL.match(wl.namespace):
        lines.append(
            f"{NS}:workloads.namespace: {wl.namespace!r} is invalid; Kubernetes namespace names are 1-63 "
            "lowercase letters, digits or -, starting and ending with a letter or digit (RFC 1123)"
        )
    gateway = wl.serve.gateway if wl.serve is not None else None
    if gateway is not None:
        gkey = f"{NS}:workloads.serve.gateway"
        if (
            len(gateway.hostname) > DNS_SUBDOMAIN_MAX
            or not GATEWAY_HOSTNAME.match(gateway.hostname)
            or _is_ip(gateway.hostname)
        ):
            lines.append(
                f"{gkey}.hostname: {gateway.hostname!r} is invalid; a Gateway hostname is a lowercase DNS name of "
                "at most 253 characters, optionally *. first (serve.ml.example.com), never an IP address"
            )
        secrets = [("tls.secretName", gateway.tls.secret_name)]
        if gateway.iap is not None:
            secrets.append(("iap.oauthSecretName", gateway.iap.oauth_secret_name))
        for field, name in secrets:
            if name is not None and (len(name) > DNS_SUBDOMAIN_MAX or not DNS_SUBDOMAIN.match(name)):
                lines.append(
                    f"{gkey}.{field}: {name!r} is invalid; Kubernetes Secret names are lowercase DNS subdomains "
                    "of at most 253 characters (letters, digits, - and .)"
                )
    for field, value in (
        ("podsRangeName", cfg.cluster.pods_range_name),
        ("servicesRangeName", cfg.cluster.services_range_name),
    ):
        if value is not None and not RANGE_NAME.match(value):
            lines.append(
                f"{NS}:cluster.{field}: {value!r} is invalid; secondary range names are Compute Engine names "
                "(RFC 1035: 1-63 lowercase letters, digits or hyphens, starting with a letter)"
            )
    return lines


def stack_lines(cfg: StackConfig) -> list[str]:
    return bucket_lines(cfg) + resource_name_lines(cfg) + kubernetes_name_lines(cfg)
