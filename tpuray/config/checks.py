"""From a raw `tpuray:` mapping to a validated `StackConfig`, or one line per problem.

`parse_stack_config` runs the schema (pydantic, its errors rewritten as `key: value is invalid;
what is allowed`), then the checks across keys: the shapes against the catalog, the capacity
chains, the delivery settings, prices, the Terraform and foundation keys, the GCP rules
(tpuray/checks/gcp_rules.py), the hardening and network keys, the LLM stack (tpuray/desired/llm_stack.py), and
the facts derived from the desired state (tpuray/desired/checks.py: slice demand, the one-VM gang
rule). Nothing is declared from a stack with a problem.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from tpuray import catalog
from tpuray.checks import gcp_rules, gke_versions, tpu_zones
from tpuray.checks.gcp_names import GCS_LOCATION
from tpuray.config.base import CONFIG_KEYS, NAMESPACE
from tpuray.config.files import read_stack_file, resolve_stack_file
from tpuray.config.pools import CapacityTier, price_tiers, tier_keys
from tpuray.config.queues import queue_lines
from tpuray.config.schema import IMAGE_NAMES, StackConfig, TerraformOutputs
from tpuray.config.security import hardening_lines, network_lines
from tpuray.desired import checks as derived
from tpuray.desired import llm_stack
from tpuray.errors import ConfigError

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _path(loc: tuple[Any, ...]) -> str:
    out = NAMESPACE + ":"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("" if i == 0 else ".") + str(part)
    return out


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def _pydantic_lines(err: ValidationError) -> list[str]:
    lines = []
    for e in err.errors():
        # The user's keys (a key written with '[' shown as written) and list indexes: this schema's
        # errors carry no segment of pydantic's own (tests/test_config_checks.py).
        loc = tuple(e["loc"])
        key = _path(loc)
        kind = e["type"]
        msg = e["msg"][0].lower() + e["msg"][1:]
        if kind == "missing" and loc[-2:] == ("reservation", "name"):
            lines.append(
                f"{key}: missing; a reservation tier needs the name of a Compute Engine reservation, "
                "e.g. {reservation: {name: prod-v6e-res}}"
            )
        elif kind == "missing":
            lines.append(f"{key}: missing; this key is required")
        elif kind == "extra_forbidden" and loc == ("workloads", "codeUri"):
            lines.append(
                f"{key}: was replaced by {NAMESPACE}:workloads.bundleUri (gs://BUCKET[/PREFIX]); the zip is named by "
                "its content hash: see docs/apps.md"
            )
        elif kind == "extra_forbidden":
            lines.append(f"{key}: unknown key (value {_show(e['input'])}); check the spelling in docs/configuration.md")
        else:
            lines.append(f"{key}: {_show(e['input'])} is invalid; {msg}")
    return lines


def _tier_lines(key: str, tiers: list[CapacityTier]) -> list[str]:
    if not tiers:
        return [f"{key}: [] is empty; list at least one tier, in priority order, from {tier_keys()}"]
    lines = []
    for i, tier in enumerate(tiers):
        tkey = f"{key}[{i}]"
        kinds = tier.kinds()
        if tier.spot and tier.flex_start:
            lines.append(
                f"{tkey}: {{spot: true, flexStart: true}} is invalid; flex-start cannot be combined with spot in one tier "
                "(GKE rejects it): make them separate tiers"
            )
        elif not kinds:
            lines.append(f"{tkey}: {{}} names no capacity; set exactly one of {tier_keys()}")
        elif len(kinds) > 1:
            lines.append(
                f"{tkey}: combines {' and '.join(k.key for k in kinds)}; set exactly one of {tier_keys()} per tier"
            )
        if tier.reservation is not None and not tier.reservation.name.strip():
            lines.append(
                f"{tkey}.reservation.name: {_show(tier.reservation.name)} is empty; a reservation tier needs the "
                "name of a Compute Engine reservation, e.g. {reservation: {name: prod-v6e-res}}"
            )
    return lines


def _shape_lines(key: str, gen: str, topology: str, machine_type: str | None) -> list[str]:
    if gen not in catalog.GENERATIONS:
        return [f"{key}.generation: {_show(gen)} is not a TPU generation; valid: {', '.join(catalog.GENERATIONS)}"]
    valid_topologies = catalog.topologies(gen)
    if topology not in valid_topologies:
        return [
            f"{key}.topology: {_show(topology)} is not a valid {gen} topology; "
            f"valid: {catalog.generation(gen).describe_topologies()}"
        ]
    if machine_type is not None:
        fits = catalog.machine_types(gen, topology)
        if machine_type not in fits:
            return [f"{key}.machineType: {_show(machine_type)} does not fit {gen} {topology}; valid: {', '.join(fits)}"]
    return []


def _semantic_lines(cfg: StackConfig) -> list[str]:
    lines: list[str] = []
    names: set[str] = set()
    for i, pool in enumerate(cfg.slice_pools):
        key = f"{NAMESPACE}:slicePools[{i}]"
        if not _DNS_LABEL.match(pool.name) or len(pool.name) > 30:
            lines.append(
                f"{key}.name: {_show(pool.name)} is invalid; use a lowercase DNS label of at most 30 characters "
                "(it names node pools and a ComputeClass)"
            )
        if pool.name in names:
            lines.append(f"{key}.name: {_show(pool.name)} is used twice; slice pool names must be unique")
        names.add(pool.name)
        lines += _shape_lines(key, pool.generation, pool.topology, pool.machine_type)
        if pool.slices < 1:
            lines.append(f"{key}.slices: {pool.slices} is invalid; a pool needs at least 1 slice")
        lines += _tier_lines(f"{key}.capacity", pool.capacity)
        for j, fb in enumerate(pool.fallback):
            fkey = f"{key}.fallback[{j}]"
            lines += _shape_lines(fkey, fb.generation, fb.topology, None)
            lines += _tier_lines(f"{fkey}.capacity", fb.capacity)
    if not cfg.slice_pools:
        lines.append(f"{NAMESPACE}:slicePools: [] is empty; declare at least one slice pool")
    for kind in ("train", "serve", "interactive"):
        workload = getattr(cfg.workloads, kind)
        if workload is not None and workload.pool not in names:
            lines.append(
                f"{NAMESPACE}:workloads.{kind}.pool: {_show(workload.pool)} is not a slice pool of this stack; "
                f"valid: {', '.join(sorted(names))}"
            )
    # Facts of the desired state (tpuray/desired/checks.py): one gang on one slice, enough slices.
    lines += derived.gang_lines(cfg) + derived.slice_demand_lines(cfg)
    serve = cfg.workloads.serve
    if serve is not None:
        lines += llm_stack.stack_lines(cfg)
    if serve is not None and serve.backend == "checkpoint" and not serve.checkpoint_uri:
        lines.append(
            f"{NAMESPACE}:workloads.serve.checkpointUri: missing; the checkpoint backend needs the URI of a training run"
        )
    lines += _price_lines(cfg)
    lines += _terraform_lines(cfg)
    lines += _foundation_lines(cfg)
    lines += gcp_rules.stack_lines(cfg)
    # The images built here are deployed by digest (`pulumi up` refuses one without: infra/components/workloads.py).
    own_builds = cfg.ray.image is None and cfg.images.repository is not None
    lines += hardening_lines(f"{NAMESPACE}:cluster", cfg.cluster, None if own_builds else cfg.ray.tpu_image)
    gateway = cfg.workloads.serve.gateway if cfg.workloads.serve else None
    lines += network_lines(f"{NAMESPACE}:workloads", cfg.workloads.admin_cidrs, gateway, f"{NAMESPACE}:workloads.serve")
    lines += _delivery_lines(cfg)
    if not lines:  # floors and zones only matter for an otherwise valid stack (its pools parse)
        lines += gke_versions.version_lines(cfg) + tpu_zones.zone_lines(cfg) + queue_lines(cfg)
    return lines


_REPOSITORY = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev/[a-z][-a-z0-9]{4,28}[a-z0-9]/[a-z]([-a-z0-9]*[a-z0-9])?$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _delivery_lines(cfg: StackConfig) -> list[str]:
    """The bundle location and the image repository and digests."""
    lines = []
    uri = cfg.workloads.bundle_uri
    if not GCS_LOCATION.match(uri) or uri.endswith(".zip"):
        lines.append(
            f"{NAMESPACE}:workloads.bundleUri: {_show(uri)} is invalid; use gs://BUCKET[/PREFIX], the folder the "
            "deploy workflow uploads bundles to (tpuray adds the tpuray-apps-<sha256>.zip name)"
        )
    images = cfg.images
    if images.repository is not None and not _REPOSITORY.match(images.repository):
        lines.append(
            f"{NAMESPACE}:images.repository: {_show(images.repository)} is invalid; use an Artifact Registry docker "
            "repository, REGION-docker.pkg.dev/PROJECT/REPO (the Terraform output imageRepository)"
        )
    for name, digest in images.digests.items():
        key = f"{NAMESPACE}:images.digests.{name}"
        if name not in IMAGE_NAMES:
            lines.append(f"{key}: unknown image; valid: {', '.join(IMAGE_NAMES)}")
        elif not _DIGEST.match(digest):
            lines.append(f"{key}: {_show(digest)} is invalid; use the pushed image's digest, sha256:<64 hex digits>")
    if images.digests and images.repository is None:
        lines.append(f"{NAMESPACE}:images.repository: missing; digests need the repository the images were pushed to")
    return lines


def _price_lines(cfg: StackConfig) -> list[str]:
    lines = []
    for gen, tiers in cfg.prices.items():
        key = f"{NAMESPACE}:prices.{gen}"
        if gen not in catalog.GENERATIONS:
            lines.append(f"{key}: {_show(gen)} is not a TPU generation; valid: {', '.join(catalog.GENERATIONS)}")
            continue
        for tier, price in tiers.items():
            if tier not in price_tiers():
                lines.append(f"{key}.{tier}: unknown capacity tier; valid: {', '.join(price_tiers())}")
            elif price < 0:
                lines.append(f"{key}.{tier}: {price} is invalid; a price per chip-hour is >= 0 (USD)")
    return lines


def _terraform_lines(cfg: StackConfig) -> list[str]:
    tf = cfg.terraform
    if tf is None:
        return []
    key = f"{NAMESPACE}:terraform"
    lines = []
    if tf.backend == "gcs" and not tf.bucket:
        lines.append(f"{key}.bucket: missing; the gcs backend needs the state bucket (and usually a prefix)")
    if tf.backend == "local" and not tf.path:
        lines.append(f"{key}.path: missing; the local backend needs the path of a terraform.tfstate")
    outputs = tf.outputs
    if not any(getattr(outputs, name) for name in TerraformOutputs.model_fields):
        fields = ", ".join(f.alias or name for name, f in TerraformOutputs.model_fields.items())
        lines.append(f"{key}.outputs: names no output; map at least one of {fields}")
    used = {
        tier.reservation.name
        for pool in cfg.slice_pools
        for tier in [*pool.capacity, *(t for fb in pool.fallback for t in fb.capacity)]
        if tier.reservation is not None
    }
    for name in outputs.reservations:
        if name not in used:
            valid = ", ".join(sorted(used)) or "none: no capacity tier names a reservation"
            lines.append(
                f"{key}.outputs.reservations.{name}: no capacity tier uses reservation {name!r}; valid: {valid}"
            )
    return lines


_KMS_KEY = re.compile(r"^projects/[^/]+/locations/([^/]+)/keyRings/[^/]+/cryptoKeys/[^/]+$")


def _foundation_lines(cfg: StackConfig) -> list[str]:
    """The values the Terraform foundation provides: the secrets key and the two ranges."""
    lines = []
    key = cfg.cluster.secrets_kms_key
    if key is not None:
        match = _KMS_KEY.match(key)
        if not match:
            lines.append(
                f"{NAMESPACE}:cluster.secretsKmsKey: {_show(key)} is invalid; use the key's full resource name, "
                "projects/PROJECT/locations/REGION/keyRings/RING/cryptoKeys/KEY"
            )
        elif match.group(1) != cfg.gcp.region:
            # GKE: keep the key in the cluster's location (docs/foundation.md, Secrets key).
            lines.append(
                f"{NAMESPACE}:cluster.secretsKmsKey: key location {match.group(1)!r} is not the cluster's region "
                f"{cfg.gcp.region!r}; use a key ring in {cfg.gcp.region}"
            )
    return lines + _range_lines(cfg)


def _range_lines(cfg: StackConfig) -> list[str]:
    """podsRangeName and servicesRangeName go together (from the cluster or a Terraform output)."""
    outputs = cfg.terraform.outputs if cfg.terraform else TerraformOutputs()
    pods = cfg.cluster.pods_range_name or outputs.pods_range_name
    services = cfg.cluster.services_range_name or outputs.services_range_name
    if bool(pods) == bool(services):
        return []
    missing = "servicesRangeName" if pods else "podsRangeName"
    return [
        f"{NAMESPACE}:cluster.{missing}: missing; name both secondary ranges of the subnetwork (podsRangeName and "
        "servicesRangeName, in tpuray:cluster or tpuray:terraform.outputs) or neither"
    ]


def parse_stack_config(raw: dict[str, Any], stack: str) -> StackConfig:
    """Validate a raw `tpuray:` config mapping (public API).

    Args:
        raw: the `tpuray:` keys without their namespace, values as YAML or the engine gives them.
        stack: the stack's name (dev, staging, prod or another; it picks the default environment).

    Returns:
        The validated `StackConfig`.

    Raises:
        ConfigError: one line per problem (the key, the bad value and what is allowed)."""
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            [
                f"{NAMESPACE}:{k}: unknown key; valid: {', '.join(NAMESPACE + ':' + c for c in CONFIG_KEYS)}"
                for k in unknown
            ]
        )
    data = dict(raw)
    data["stack"] = stack
    data.setdefault("environment", stack if stack in ("dev", "staging", "prod") else "dev")
    try:
        cfg = StackConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_pydantic_lines(err)) from None
    lines = _semantic_lines(cfg)
    if lines:
        raise ConfigError(lines)
    return cfg


def load_stack(stack: str) -> StackConfig:
    """Read and validate a stack (public API).

    Args:
        stack: a stack name of stacks/ ("dev") or the path of a Pulumi.<name>.yaml.

    Returns:
        The validated `StackConfig`.

    Raises:
        ConfigError: no such stack file, a file that is not a stack, or one line per problem."""
    name, path = resolve_stack_file(stack)
    return parse_stack_config(read_stack_file(path), name)
