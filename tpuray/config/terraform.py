"""Take the VPC, subnetwork and TPU reservation names from a Terraform state.

Teams that keep their network and reservations in Terraform point `tpuray:terraform` at
that state; the program reads the named root outputs and puts their values where the
stack config would otherwise name them (tpuray:cluster.network / subnetwork /
podsRangeName / servicesRangeName / secretsKmsKey, tpuray:images.repository, the
`reservation` capacity tiers). Nothing else changes: the stack never creates a VPC, a key
or a reservation on either path. terraform/modules/foundation declares all of them, with
one root output per TerraformOutputs field (docs/foundation.md).

Backends:
- local: pulumi-terraform's state reference (`terraform.state.get_local_reference`).
- gcs: pulumi-terraform 6.x has no GCS reader (only local, remote/HCP, s3, azurerm), so
  the state object `<prefix>/<workspace>.tfstate` (the layout of Terraform's gcs backend)
  is read with the Google provider's `storage.get_bucket_object_content` and its
  `outputs` parsed the same way.
Under the mock engine (tpuray/preview/mockrun.py) a local state is read for real; a GCS object is
read from the folder $TPURAY_GCS_MIRROR/<bucket>/<object> when that is set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpuray.config import NAMESPACE, CapacityTier, ConfigError, StackConfig, TerraformConfig, TerraformOutputs

# TerraformOutputs fields whose value replaces the ClusterConfig field of the same name.
_CLUSTER_FIELDS = ("network", "subnetwork", "pods_range_name", "services_range_name", "secrets_kms_key")


class TerraformStateError(ConfigError):
    """A state that cannot be read, or lacks an output the stack config names."""


def state_path(tf: TerraformConfig) -> Path:
    # Relative to the repository, not to wherever the Pulumi CLI or a test happens to run.
    return Path(tf.location)


def gcs_object(tf: TerraformConfig) -> str:
    prefix = tf.prefix.strip("/")
    return f"{prefix}/{tf.workspace}.tfstate" if prefix else f"{tf.workspace}.tfstate"


def read_outputs(tf: TerraformConfig) -> dict[str, Any]:
    """The state's root outputs, name -> value."""
    if tf.backend == "local":
        import pulumi_terraform

        path = state_path(tf)
        if not path.is_file():
            raise TerraformStateError([f"{NAMESPACE}:terraform.path: no Terraform state at {path}"])
        result = pulumi_terraform.state.get_local_reference(path=str(path))
        return dict(result.outputs or {})
    import pulumi_gcp as gcp

    result = gcp.storage.get_bucket_object_content(bucket=tf.bucket, name=gcs_object(tf))
    if not result.content:
        raise TerraformStateError(
            [f"{NAMESPACE}:terraform: could not read the Terraform state {tf.location} (empty or missing)"]
        )
    try:
        state = json.loads(result.content)
    except json.JSONDecodeError as err:
        raise TerraformStateError([f"{NAMESPACE}:terraform: {tf.location} is not a Terraform state ({err})"]) from None
    return {name: out.get("value") for name, out in (state.get("outputs") or {}).items()}


def _output(outputs: dict[str, Any], name: str, key: str, tf: TerraformConfig) -> str:
    # OUTPUT.KEY names an entry of a map output; Terraform output names cannot contain dots.
    output, _, entry = name.partition(".")
    if output not in outputs:
        there = ", ".join(sorted(outputs)) or "none"
        raise TerraformStateError(
            [
                f"{NAMESPACE}:terraform.outputs.{key}: output {output!r} not found in Terraform state {tf.location}; outputs there: {there}"
            ]
        )
    value = outputs[output]
    if entry:
        if not isinstance(value, dict) or entry not in value:
            there = ", ".join(sorted(value)) if isinstance(value, dict) else f"not a map: {json.dumps(value)}"
            raise TerraformStateError(
                [
                    f"{NAMESPACE}:terraform.outputs.{key}: output {output!r} in {tf.location} has no entry {entry!r}; entries there: {there or 'none'}"
                ]
            )
        value = value[entry]
    if not isinstance(value, str) or not value:
        raise TerraformStateError(
            [
                f"{NAMESPACE}:terraform.outputs.{key}: output {name!r} in {tf.location} is {json.dumps(value)}; expected a name (string)"
            ]
        )
    return value


def _tier(tier: CapacityTier, names: dict[str, str]) -> CapacityTier:
    if tier.reservation is None or tier.reservation.name not in names:
        return tier
    return tier.model_copy(
        update={"reservation": tier.reservation.model_copy(update={"name": names[tier.reservation.name]})}
    )


def resolve(cfg: StackConfig, outputs: dict[str, Any] | None = None) -> StackConfig:
    """cfg with the Terraform-provided names in place (cfg itself when there is no state)."""
    tf = cfg.terraform
    if tf is None:
        return cfg
    if outputs is None:
        outputs = read_outputs(tf)
    cluster_update = {}
    for field in _CLUSTER_FIELDS:
        name = getattr(tf.outputs, field)
        if name:
            cluster_update[field] = _output(outputs, name, TerraformOutputs.model_fields[field].alias or field, tf)
    images = cfg.images
    if tf.outputs.image_repository:
        repository = _output(outputs, tf.outputs.image_repository, "imageRepository", tf)
        images = images.model_copy(update={"repository": repository})
    names = {
        name: _output(outputs, output, f"reservations.{name}", tf) for name, output in tf.outputs.reservations.items()
    }
    pools = [
        pool.model_copy(
            update={
                "capacity": [_tier(t, names) for t in pool.capacity],
                "fallback": [
                    fb.model_copy(update={"capacity": [_tier(t, names) for t in fb.capacity]}) for fb in pool.fallback
                ],
            }
        )
        for pool in cfg.slice_pools
    ]
    return cfg.model_copy(
        update={"cluster": cfg.cluster.model_copy(update=cluster_update), "slice_pools": pools, "images": images}
    )
