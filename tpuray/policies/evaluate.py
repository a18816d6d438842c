"""The policy pack run the way `pulumi preview --policy-pack` runs it, on two kinds of input.

- `check_stack`: a mocked stack's resources, with its environment's enforcement levels
  (policies/policy-config.<environment>.json), for `tpuray preview` and `tpuray diff`;
- `check_manifests`: plain Kubernetes YAML (`tpuray check`), where the stack-only rules (node
  pools, the GKE cluster) are disabled because plain manifests have no stack.

The CLI commands only parse, call these, and print.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from tpuray.policies import RULES
from tpuray.policies.analyzer import InProcessAnalyzer, Target, Violation, analyze, config_file, load_config_file, urn
from tpuray.policies.core import Resource
from tpuray.policies.manifests import load

if TYPE_CHECKING:
    from tpuray.mockrun import StackRun


def check_stack(run: StackRun) -> list[Violation]:
    """The policy pack on the mocked stack, with the enforcement levels of its environment."""
    targets = [Target(Resource(r.type, r.name, r.inputs, urn(run.stack, r.type, r.name))) for r in run.resources]
    path = config_file(run.config.environment)
    # The pinned Ray version comes from this stack's config, as the CLI's stack config would give it.
    overrides = {"ray-version-pinned": {"rayVersion": run.config.ray.version}}
    return analyze(InProcessAnalyzer(), targets, load_config_file(path), overrides, str(path))


def check_manifests(
    paths: list[str], environment: str, ray_version: str, allow_images: list[str], rules: Collection[str] | None = None
) -> list[Violation]:
    """The pack's Kubernetes rules on YAML files or folders, at `environment`'s enforcement levels;
    only those named in `rules` when given (a test that asserts on some rules runs only them)."""
    targets = load(paths)
    off = {r.name for r in RULES if not r.kubernetes or (rules is not None and r.name not in rules)}
    overrides: dict[str, dict[str, object]] = {name: {"enforcementLevel": "disabled"} for name in off}
    overrides.setdefault("ray-version-pinned", {}).update(rayVersion=ray_version, allowedTpuImages=allow_images)
    overrides.setdefault("tpu-image", {}).update(allowedTpuImages=allow_images)
    path = config_file(environment)
    return analyze(InProcessAnalyzer(), targets, load_config_file(path), overrides, str(path))
