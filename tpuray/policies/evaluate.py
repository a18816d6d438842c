"""The policy pack run the way `pulumi preview --policy-pack` runs it, on two kinds of input.

- `check_stack`: a mocked stack's resources, with its environment's enforcement levels
  (policies/policy-config.<environment>.json), for `tpuray preview` and `tpuray diff`;
- `check_manifests`: plain Kubernetes YAML (`tpuray check`), where the stack-only rules (node
  pools, the GKE cluster) are disabled because plain manifests have no stack.

Every rule has a profile (tpuray.policies.core: GKE or PROJECT). A stack is tpuray's own, so
`check_stack` enforces every rule at its configured level. `check_manifests` does so for the
objects tpuray rendered (labelled app.kubernetes.io/managed-by: tpuray, tpuray/labels.py); on any
other manifest a PROJECT rule's mandatory finding is reported as advisory, because breaking this
project's conventions does not break the manifest on GKE, unless `conventions` holds every
manifest to them (`tpuray check --conventions`).

The CLI commands only parse, call these, and print.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from tpuray.labels import RENDERED_BY_TPURAY
from tpuray.policies import RULES, RULES_BY_NAME
from tpuray.policies.analyzer import InProcessAnalyzer, Target, Violation, analyze, config_file, load_config_file, urn
from tpuray.policies.core import PROJECT, Resource
from tpuray.policies.kube import as_dict, get
from tpuray.policies.manifests import load

if TYPE_CHECKING:
    from tpuray.preview.mockrun import StackRun


def check_stack(run: StackRun) -> list[Violation]:
    """The policy pack on the mocked stack, with the enforcement levels of its environment."""
    targets = [Target(Resource(r.type, r.name, r.inputs, urn(run.stack, r.type, r.name))) for r in run.resources]
    path = config_file(run.config.environment)
    # The pinned Ray version comes from this stack's config, as the CLI's stack config would give it.
    overrides = {"ray-version-pinned": {"rayVersion": run.config.ray.version}}
    return analyze(InProcessAnalyzer(), targets, load_config_file(path), overrides, str(path))


def rendered_by_tpuray(target: Target | None) -> bool:
    """Whether a manifest is one tpuray rendered (its metadata.labels name tpuray as the manager).
    A stack-wide finding blames no manifest (None): it is judged as foreign."""
    found = as_dict(get(target.resource.props, "metadata", "labels")) if target else {}
    return RENDERED_BY_TPURAY.items() <= found.items()


def manifest_level(policy: str, target: Target | None, level: str, conventions: bool) -> str:
    """The level `tpuray check` reports: a mandatory finding of a PROJECT rule on a foreign manifest
    is advisory unless `conventions`; every other finding keeps its configured level."""
    if level == "mandatory" and RULES_BY_NAME[policy].profile == PROJECT and not conventions:
        return level if rendered_by_tpuray(target) else "advisory"
    return level


def check_manifests(
    paths: list[str],
    environment: str,
    ray_version: str,
    allow_images: list[str],
    conventions: bool = False,
    rules: Collection[str] | None = None,
) -> list[Violation]:
    """The check entry point (public API; `tpuray check` calls it): the pack's Kubernetes rules on
    YAML files or folders.

    Args:
        paths: files or folders of YAML manifests (multi-document files too).
        environment: dev, staging or prod: whose policies/policy-config.<environment>.json levels apply.
        ray_version: the Ray version images must carry (`ray-version-pinned`).
        allow_images: image patterns accepted on TPU workers besides the -tpu images.
        conventions: this project's rules at their level on every manifest; by default they are
            mandatory only on manifests tpuray rendered (`manifest_level`).
        rules: only these rules when given (a test that asserts on some rules runs only them).

    Returns:
        Every violation found, with its enforcement level (an empty list: none).

    Raises:
        ManifestError: a path that cannot be read or a manifest that is not YAML."""
    targets = load(paths)
    off = {r.name for r in RULES if not r.kubernetes or (rules is not None and r.name not in rules)}
    overrides: dict[str, dict[str, object]] = {name: {"enforcementLevel": "disabled"} for name in off}
    overrides.setdefault("ray-version-pinned", {}).update(rayVersion=ray_version, allowedTpuImages=allow_images)
    overrides.setdefault("tpu-image", {}).update(allowedTpuImages=allow_images)
    # A plain manifest runs as it is: no `pulumi up` will refuse a base standing in for serve-llm.
    overrides.setdefault("serve-llm-vllm-image", {}).update(pendingBuildsRefusedAtUp=False)
    # No environment cluster whose KubeRay version could be recorded: a recorded one is still
    # compared with, a missing one is no finding (rules_versions.py).
    overrides.setdefault("kuberay-field-version", {}).update(tokenAuthRequired=False)
    path = config_file(environment)
    return analyze(
        InProcessAnalyzer(),
        targets,
        load_config_file(path),
        overrides,
        str(path),
        lambda policy, target, level: manifest_level(policy, target, level, conventions),
    )
