"""Every cloud resource a committed stack names, against what its Terraform foundation creates.

A stack names resources it does not create: the VPC and subnetwork its cluster joins, their
secondary ranges, the proxy-only subnet its internal Gateway needs, the secrets key, the
buckets of its gs:// URIs, the image repository and the reservations its capacity tiers
consume. Each must be something terraform/foundation/<env> creates (read from the HCL by
tests/foundation_model.py), or the stack must read it from the foundation's outputs
(tpuray:terraform), in which case the output, not a literal, is the stack's value. The
check walks the raw stack for every gs:// URI and every `projects/...` resource path, so a
new key holding one is checked without being listed here; a `projects/...` path of a kind
this file does not know fails until it is classified.

Not created by the foundation, and why (docs/foundation.md, The contract with the stacks):
- tpuray:observability.notificationChannels: Cloud Monitoring assigns a channel's ID when it
  is created, so a stack can only name one that exists (the on-call team's);
- tpuray:workloads.serve.gateway.tls.certificateManager: the certificate's key material comes
  from the team's CA or DNS authorisation, not from Terraform state;
- tpuray:workloads.serve.hfTokenSecret: the Hugging Face token is the team's own secret;
- tpuray:observability.budget.billingAccount: the billing account exists outside the project
  (tests/test_deploy_permissions.py checks the deploy account's roles on it).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, mocked
from tests.foundation_model import ENVS, Foundation, foundation
from tpuray.config import NAMESPACE, StackConfig, read_stack_file
from tpuray.config.checks import parse_stack_config
from tpuray.config.security import INTERNAL_GATEWAY

STACKS = REPO / "stacks"
NOTIFICATION_CHANNEL = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")
SERVICE_ACCOUNT = re.compile(
    r"\b[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com\b"
)
KMS_KEY = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")


def _leaves(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    """(tpuray:section.path, value) of every scalar in a raw stack config."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{key}.{k}" if key else f"{NAMESPACE}:{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{key}[{i}]")
    else:
        yield key, value


def _named(cfg: StackConfig, raw: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(kind, key, value) of every cloud resource the stack names and does not create."""
    c = cfg.cluster
    named = [("network", f"{NAMESPACE}:cluster.network", c.network),
             ("subnetwork", f"{NAMESPACE}:cluster.subnetwork", c.subnetwork)]  # fmt: skip
    for field, value in (("podsRangeName", c.pods_range_name), ("servicesRangeName", c.services_range_name)):
        if value:
            named.append(("secondary range", f"{NAMESPACE}:cluster.{field}", value))
    if cfg.images.repository:
        named.append(("docker repository", f"{NAMESPACE}:images.repository", cfg.images.repository))
    for i, pool in enumerate(cfg.slice_pools):
        chains = [("", pool.capacity)] + [(f".fallback[{j}]", fb.capacity) for j, fb in enumerate(pool.fallback)]
        for where, tiers in chains:
            for k, tier in enumerate(tiers):
                if tier.reservation is not None and tier.reservation.project in (None, cfg.gcp.project):
                    key = f"{NAMESPACE}:slicePools[{i}]{where}.capacity[{k}].reservation.name"
                    named.append(("reservation", key, tier.reservation.name))
    serve = cfg.workloads.serve
    gateway = serve.gateway if serve else None
    if gateway and gateway.class_name == INTERNAL_GATEWAY and gateway.proxy_only_subnet_cidr:
        key = f"{NAMESPACE}:workloads.serve.gateway.proxyOnlySubnetCidr"
        named.append(("proxy-only subnet", key, gateway.proxy_only_subnet_cidr))
    for key, value in _leaves(raw, ""):
        if not isinstance(value, str):
            continue
        if value.startswith("gs://"):
            named.append(("bucket", key, value.removeprefix("gs://").split("/")[0]))
        elif KMS_KEY.match(value):
            named.append(("KMS key", key, value))
        elif value.startswith("projects/") and not NOTIFICATION_CHANNEL.match(value):
            named.append(("unclassified", key, value))
    return named


def contract_lines(path: Path, found: Foundation) -> list[str]:
    """One line per resource the stack at `path` names that `found` does not create."""
    raw = read_stack_file(path)
    cfg = parse_stack_config(raw, path.name.split(".")[1])
    region = cfg.gcp.region
    creates: dict[str, set[str]] = {
        "network": {found.network},
        "subnetwork": {found.subnetwork},
        "secondary range": set(found.secondary_ranges),
        "docker repository": set(found.docker_repositories),
        "reservation": set(found.reservations),
        "bucket": set(found.buckets),
        "KMS key": set(found.kms_keys),
        "proxy-only subnet": {cidr for where, cidr in found.proxy_only_subnets if where == region},
    }
    root = f"terraform/foundation/{found.env}"
    lines = []
    named = _named(cfg, raw)
    # The stack's secrets provider, a top-level key of the stack file (not tpuray config).
    provider = (yaml.safe_load(path.read_text()) or {}).get("secretsprovider", "")
    if provider.startswith("gcpkms://"):
        named.append(("KMS key", "secretsprovider", provider.removeprefix("gcpkms://")))
    for kind, key, value in named:
        if kind == "unclassified":
            lines.append(f"{path.name} {key}: {value!r} is a resource path of a kind the contract does not know")
        elif value not in creates[kind]:
            there = ", ".join(sorted(creates[kind])) or "none"
            where = f" in {region} of network {found.network}" if kind == "proxy-only subnet" else ""
            lines.append(f"{path.name} {key}: {kind} {value!r} is not created by {root}{where} (it creates: {there})")
    return lines


@pytest.mark.parametrize("env", ENVS)
def test_every_resource_a_committed_stack_names_is_one_its_foundation_creates(env: str) -> None:
    # Before: the key rings tpuray-<env> (the foundation's was tpuray), every bucket, prod's
    # proxy-only subnet and the default network were named here and created nowhere.
    assert contract_lines(STACKS / f"Pulumi.{env}.yaml", foundation(env)) == []


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _accounts_named(env: str) -> set[str]:
    """Every service account email an input of the stack's resources names (node pools, IAM members)."""
    return {m for r in mocked(env).resources for s in _strings(r.inputs) for m in SERVICE_ACCOUNT.findall(s)}


@pytest.mark.parametrize("env", ENVS)
def test_every_service_account_a_stack_runs_as_is_one_its_foundation_creates(env: str) -> None:
    # Before: the stack created its node and workload accounts itself, so the deploy identity needed
    # service-account admin and user on the whole project (issue 36, item 1).
    named = _accounts_named(env)
    assert f"tpuray-{env}-nodes@acme-ml-{env}.iam.gserviceaccount.com" in named
    assert sorted(named - set(foundation(env).service_accounts)) == []


@pytest.mark.parametrize("env", ENVS)
def test_each_stack_names_its_foundations_vpc_ranges_for_the_admin_network_check(env: str) -> None:
    # tpuray/checks/gcp_ranges.py refuses an adminCidrs or masterAuthorizedNetworks entry that overlaps these.
    cfg = parse_stack_config(read_stack_file(STACKS / f"Pulumi.{env}.yaml"), env)
    assert tuple(cfg.cluster.vpc_ranges) == foundation(env).vpc_ranges


def test_the_foundations_vpc_ranges_are_the_roots_cidrs() -> None:
    assert {env: foundation(env).vpc_ranges for env in ENVS} == {
        "dev": ("10.10.0.0/20", "10.32.0.0/14", "10.36.0.0/20"),
        "staging": ("10.12.0.0/20", "10.40.0.0/14", "10.44.0.0/20"),
        "prod": ("10.20.0.0/20", "10.64.0.0/14", "10.68.0.0/20"),
    }


@pytest.mark.parametrize("env", ENVS)
def test_a_committed_stack_creates_no_service_account(env: str) -> None:
    assert [r.name for r in mocked(env).resources if r.type == "gcp:serviceaccount/account:Account"] == []


def test_the_foundation_of_each_stack_is_the_root_of_the_same_project_and_region() -> None:
    for env in ENVS:
        cfg = parse_stack_config(read_stack_file(STACKS / f"Pulumi.{env}.yaml"), env)
        assert (foundation(env).project, foundation(env).region) == (cfg.gcp.project, cfg.gcp.region)


def _edited(tmp_path: Path, env: str, edit) -> Path:
    doc = yaml.safe_load((STACKS / f"Pulumi.{env}.yaml").read_text())
    edit(doc["config"])
    path = tmp_path / f"Pulumi.{env}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_a_key_ring_the_foundation_does_not_create_is_named_with_what_it_creates() -> None:
    # What the committed prod foundation looked like before: the kms module's default ring.
    ring = "projects/acme-ml-prod/locations/us-east5/keyRings/tpuray/cryptoKeys"
    before = dataclasses.replace(foundation("prod"), kms_keys=(f"{ring}/gke-secrets", f"{ring}/artifacts"))
    creates = (
        "(it creates: projects/acme-ml-prod/locations/us-east5/keyRings/tpuray/cryptoKeys/artifacts, "
        "projects/acme-ml-prod/locations/us-east5/keyRings/tpuray/cryptoKeys/gke-secrets)"
    )
    assert contract_lines(STACKS / "Pulumi.prod.yaml", before) == [
        "Pulumi.prod.yaml tpuray:cluster.secretsKmsKey: KMS key "
        "'projects/acme-ml-prod/locations/us-east5/keyRings/tpuray-prod/cryptoKeys/gke-secrets' is not created by "
        f"terraform/foundation/prod {creates}",
        "Pulumi.prod.yaml secretsprovider: KMS key "
        "'projects/acme-ml-prod/locations/us-east5/keyRings/tpuray-prod/cryptoKeys/pulumi-secrets' is not created by "
        f"terraform/foundation/prod {creates}",
    ]


def test_a_bucket_in_any_gs_uri_is_checked_even_under_a_key_the_contract_does_not_list() -> None:
    before = dataclasses.replace(foundation("staging"), buckets=())
    assert contract_lines(STACKS / "Pulumi.staging.yaml", before) == [
        "Pulumi.staging.yaml tpuray:workloads.bundleUri: bucket 'acme-ml-staging-bundles' is not created by "
        "terraform/foundation/staging (it creates: none)",
        "Pulumi.staging.yaml tpuray:workloads.train.dataUri: bucket 'acme-ml-staging-data' is not created by "
        "terraform/foundation/staging (it creates: none)",
        "Pulumi.staging.yaml tpuray:workloads.train.storageUri: bucket 'acme-ml-staging-ray' is not created by "
        "terraform/foundation/staging (it creates: none)",
        "Pulumi.staging.yaml tpuray:workloads.serve.modelSource: bucket 'acme-ml-staging-models' is not created by "
        "terraform/foundation/staging (it creates: none)",
    ]


def test_an_internal_gateway_needs_the_foundation_to_create_its_proxy_only_subnet() -> None:
    before = dataclasses.replace(foundation("prod"), proxy_only_subnets=())
    assert contract_lines(STACKS / "Pulumi.prod.yaml", before) == [
        "Pulumi.prod.yaml tpuray:workloads.serve.gateway.proxyOnlySubnetCidr: proxy-only subnet '10.129.0.0/23' is "
        "not created by terraform/foundation/prod in us-east5 of network tpuray-prod (it creates: none)"
    ]


def test_a_cluster_on_the_default_network_is_not_on_the_foundation(tmp_path: Path) -> None:
    def default_network(c: dict[str, Any]) -> None:
        for key in ("network", "subnetwork", "podsRangeName", "servicesRangeName"):
            del c["tpuray:cluster"][key]

    assert contract_lines(_edited(tmp_path, "dev", default_network), foundation("dev")) == [
        "Pulumi.dev.yaml tpuray:cluster.network: network 'default' is not created by terraform/foundation/dev "
        "(it creates: tpuray-dev)",
        "Pulumi.dev.yaml tpuray:cluster.subnetwork: subnetwork 'default' is not created by terraform/foundation/dev "
        "(it creates: tpuray-dev-us-east5-gke)",
    ]


def test_a_reservation_in_a_fallback_tier_is_checked(tmp_path: Path) -> None:
    def reserve_fallback(c: dict[str, Any]) -> None:
        c["tpuray:slicePools"][0]["fallback"][0]["capacity"].insert(0, {"reservation": {"name": "acme-v5e-4x4-prod"}})

    assert contract_lines(_edited(tmp_path, "prod", reserve_fallback), foundation("prod")) == [
        "Pulumi.prod.yaml tpuray:slicePools[0].fallback[0].capacity[0].reservation.name: reservation "
        "'acme-v5e-4x4-prod' is not created by terraform/foundation/prod (it creates: acme-v6e-4x4-prod)"
    ]


def test_a_resource_path_of_an_unknown_kind_fails_until_it_is_classified(tmp_path: Path) -> None:
    def secret_in_engine_kwargs(c: dict[str, Any]) -> None:
        c["tpuray:workloads"]["serve"]["engineKwargs"] = {"hf_token_secret": "projects/acme-ml-prod/secrets/hf-token"}

    assert contract_lines(_edited(tmp_path, "prod", secret_in_engine_kwargs), foundation("prod")) == [
        "Pulumi.prod.yaml tpuray:workloads.serve.engineKwargs.hf_token_secret: 'projects/acme-ml-prod/secrets/hf-token' "
        "is a resource path of a kind the contract does not know"
    ]


def test_notification_channels_are_named_not_created() -> None:
    raw = read_stack_file(STACKS / "Pulumi.prod.yaml")
    cfg = parse_stack_config(raw, "prod")
    kinds = {kind for kind, _, value in _named(cfg, raw) if "notificationChannels" in value}
    assert cfg.observability.notification_channels == ["projects/acme-ml-prod/notificationChannels/4471029384756102938"]
    assert kinds == set()
