"""Values that parse one by one but cannot all be meant together: a key the stack's choices never
read, a value the run can never reach, the same item twice in a list whose order or set matters.
One line each, naming the key that is at fault. Called by tpuray.checks.gcp_rules.stack_lines.

- Keys never read: `replicas` beside `autoscaling` (the slice demand and the RayService use
  autoscaling's bounds: tpuray/config/checks.py, tpuray/desired/llm_stack.py), Binary Authorization images
  without `enforce` (infra/components/hardening.py writes no policy then), a state bucket for a
  local Terraform backend or a path for a gcs one (tpuray/config/terraform.py reads one of them).
- Never reached: `checkpointEvery` above `steps` (ray_apps/train.py checkpoints when
  step % checkpoint_every == 0 or at the last step, so a restart after a failure starts over), a
  hung-gang floor at or past the RayJob's deadline (the job is stopped before the watchdog and the
  alert may fire, ray_apps/train.py and tpuray/observe/rules.py).
- Twice: zones, capacity tiers and fallback shapes (a ComputeClass walks its priorities in order:
  the second copy never gets a turn), notification channels, Certificate Manager certificates,
  admin CIDRs, budget thresholds, Binary Authorization images, maintenance exclusion names (GKE
  keys the exclusions by name: Cluster.maintenancePolicy.window.maintenanceExclusions is a map).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Hashable, Sequence
from typing import Any

from tpuray.config.pools import CapacityTier
from tpuray.config.schema import StackConfig

NS = "tpuray"


def _twice(key: str, items: Sequence[Hashable], shown: Sequence[Any] | None = None, why: str = "") -> list[str]:
    """A line for each item equal to an earlier one of the list."""
    first: dict[Hashable, int] = {}
    lines = []
    for i, item in enumerate(items):
        if item in first:
            value = (shown or items)[i]
            lines.append(f"{key}[{i}]: {value!r} repeats {key}[{first[item]}]; list it once{'; ' + why if why else ''}")
        else:
            first[item] = i
    return lines


def _tier_identity(tier: CapacityTier) -> Hashable:
    if tier.reservation is not None:
        return ("reservation", tier.reservation.name, tier.reservation.project)
    kinds = tuple(t.key for t in tier.kinds())
    return kinds or object()  # a tier that names no capacity is refused on its own, never as a repeat


def _network(value: str) -> Hashable:
    try:
        return ipaddress.ip_network(value)
    except ValueError:
        return value  # refused by its own check


def duplicate_lines(cfg: StackConfig) -> list[str]:
    order = "a ComputeClass tries its priorities in order, so the second copy never gets a turn"
    lines = _twice(f"{NS}:gcp.zones", cfg.gcp.zones)
    for i, pool in enumerate(cfg.slice_pools):
        key = f"{NS}:slicePools[{i}]"
        shown = [t.model_dump(by_alias=True, exclude_defaults=True) for t in pool.capacity]
        lines += _twice(f"{key}.capacity", [_tier_identity(t) for t in pool.capacity], shown, order)
        shapes = [(pool.generation, pool.topology)] + [(f.generation, f.topology) for f in pool.fallback]
        for j, shape in enumerate(shapes[1:]):
            if shape in shapes[: j + 1]:
                before = shapes.index(shape)
                what = f"{key}.fallback[{before - 1}]" if before else f"the pool's own shape ({key})"
                lines.append(
                    f"{key}.fallback[{j}]: {' '.join(shape)} repeats {what}; list another shape, or none; {order}"
                )
    obs = cfg.observability
    lines += _twice(f"{NS}:observability.notificationChannels", obs.notification_channels)
    if obs.budget is not None:
        lines += _twice(f"{NS}:observability.budget.thresholds", obs.budget.thresholds)
    serve = cfg.workloads.serve
    if serve is not None and serve.gateway is not None:
        lines += _twice(f"{NS}:workloads.serve.gateway.tls.certificateManager", serve.gateway.tls.certificate_manager)
    admin = cfg.workloads.admin_cidrs
    lines += _twice(f"{NS}:workloads.adminCidrs", [_network(c) for c in admin], admin)
    binauthz = cfg.cluster.binary_authorization
    if binauthz is not None:
        lines += _twice(f"{NS}:cluster.binaryAuthorization.allowedImages", binauthz.allowed_images)
    maintenance = cfg.cluster.maintenance
    if maintenance is not None:
        names = [ex.name for ex in maintenance.exclusions]
        lines += _twice(f"{NS}:cluster.maintenance.exclusions", names, why="GKE keys exclusions by their name")
    return lines


def unread_lines(cfg: StackConfig) -> list[str]:
    """Keys the stack's other choices never read."""
    lines = []
    serve = cfg.workloads.serve
    if serve is not None and serve.autoscaling is not None and "replicas" in serve.model_fields_set:
        lines.append(
            f"{NS}:workloads.serve.replicas: {serve.replicas} is never used beside autoscaling, whose minReplicas "
            "and maxReplicas bound the replicas: remove it"
        )
    binauthz = cfg.cluster.binary_authorization
    if binauthz is not None and not binauthz.enforce and binauthz.allowed_images:
        lines.append(
            f"{NS}:cluster.binaryAuthorization.allowedImages: never enforced without enforce: true; set "
            "enforce: true or remove the list"
        )
    tf = cfg.terraform
    if tf is not None:
        if tf.backend == "local" and (tf.bucket or tf.prefix):
            field = "bucket" if tf.bucket else "prefix"
            lines.append(f"{NS}:terraform.{field}: the local backend never reads it; remove it or use backend gcs")
        if tf.backend == "gcs" and tf.path:
            lines.append(f"{NS}:terraform.path: the gcs backend never reads it; remove it or use backend local")
    return lines


def unreachable_lines(cfg: StackConfig) -> list[str]:
    """Values the run can never reach."""
    train, key = cfg.workloads.train, f"{NS}:workloads.train"
    if train is None:
        return []
    lines = []
    if train.checkpoint_every > train.steps:
        lines.append(
            f"{key}.checkpointEvery: {train.checkpoint_every} is more than steps ({train.steps}): the run "
            f"writes no checkpoint before its last step, so a restart (maxFailures) starts over; use at most "
            f"{train.steps}"
        )
    floor = cfg.observability.hung_gang.floor_seconds
    if floor >= train.active_deadline_seconds:
        lines.append(
            f"{NS}:observability.hungGang.floorSeconds: {floor} is not below the train job's "
            f"activeDeadlineSeconds ({train.active_deadline_seconds}): the job is stopped before a hung gang "
            "can be reported; use a smaller floor"
        )
    return lines


def stack_lines(cfg: StackConfig) -> list[str]:
    return duplicate_lines(cfg) + unread_lines(cfg) + unreachable_lines(cfg)
