"""The rule model shared by the policy pack, `tpuray preview` and `tpuray check`.

A rule is a plain function over plain data (dicts, lists, strings, numbers) that returns
findings. `as_pulumi_policy` wraps it as a pulumi-policy Resource/StackValidationPolicy;
the Pulumi analyzer then owns enforcement levels and config, for the CLI and for us.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from tpuray.checks.unknown import UNKNOWN, Unknown  # noqa: F401 (the rules read them here)


def plain(value: Any) -> Any:
    """Copy the analyzer's unknown-checking proxies into dicts and lists.

    Unknown values become UNKNOWN instead of raising, so that one computed field (a
    service account e-mail) does not stop every other check on the resource.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[str(key)] = plain(value[key])
            except UnknownValueError:
                out[str(key)] = UNKNOWN
        return out
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items: list[Any] = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    return value


@dataclass(frozen=True)
class Resource:
    """One resource as a rule sees it: Pulumi type token, logical name, plain inputs."""

    type: str
    name: str
    props: dict[str, Any]
    urn: str = ""

    @property
    def is_kubernetes(self) -> bool:
        return self.type.startswith("kubernetes:")

    @property
    def kind(self) -> str:
        if self.is_kubernetes and isinstance(self.props.get("kind"), str):
            return self.props["kind"]
        return self.type.rsplit(":", 1)[-1]

    @property
    def label(self) -> str:
        """How messages name the resource: Kind/name (Kubernetes) or Type name (cloud)."""
        if self.is_kubernetes:
            meta = self.props.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            return f"{self.kind}/{name if isinstance(name, str) else self.name}"
        shown = self.props.get("name")
        return f"{self.kind} {shown if isinstance(shown, str) else self.name}"


@dataclass(frozen=True)
class Finding:
    message: str
    urn: str | None = None  # stack rules point at the resource they blame


ResourceCheck = Callable[[Resource, dict[str, Any]], Iterable[Finding | str]]
StackCheck = Callable[[list[Resource], dict[str, Any]], Iterable[Finding]]

# Why a rule exists, which decides how `tpuray check` enforces it on a manifest tpuray did not
# render (tpuray.policies.evaluate, docs/policies.md "Two profiles"):
# - GKE: violating it breaks on GKE: the API server's schema or CEL rules refuse the object, the
#   KubeRay operator or the TPU webhook refuses it, Ray refuses it, or the TPU job never starts
#   or hangs (pods Pending forever, a gang split over two slices, an app that stays DEPLOYING).
#   Enforced at its configured level on every manifest.
# - PROJECT: one of this project's conventions (its labels, images, Ray pin, token auth,
#   deadlines, security baseline, capacity policy). Enforced at its configured level on what
#   tpuray renders; advisory on foreign manifests unless `tpuray check --conventions`.
Profile = Literal["gke", "project"]
GKE: Profile = "gke"
PROJECT: Profile = "project"
PROFILES: tuple[Profile, ...] = (GKE, PROJECT)


@dataclass(frozen=True)
class Rule:
    name: str  # stable: users pin enforcement levels to it in policy-config files
    description: str  # one line
    level: EnforcementLevel  # the pack default; policies/policy-config.<env>.json may override
    types: tuple[str, ...] = ()  # Pulumi type tokens a resource rule applies to; () = stack rule
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    topology: bool = False  # a TPU topology rule (reported against the conformance corpus)
    kubernetes: bool = False  # also runs on plain manifests in `tpuray check`
    config: dict[str, dict[str, Any]] = field(default_factory=dict)  # JSON schema of properties
    profile: Profile = field(kw_only=True)  # GKE or PROJECT: every rule names one

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"rule {self.name}: profile is {self.profile!r}; valid: {', '.join(PROFILES)}")

    @property
    def is_stack(self) -> bool:
        return self.stack_check is not None

    def as_pulumi_policy(self) -> ResourceValidationPolicy | StackValidationPolicy:
        schema = PolicyConfigSchema(properties=dict(self.config)) if self.config else None
        if self.stack_check is not None:
            stack_check = self.stack_check

            def validate_stack(args: StackValidationArgs, report: ReportViolation) -> None:
                resources = [Resource(r.resource_type, r.name, plain(r.props), r.urn) for r in args.resources]
                for finding in stack_check(resources, dict(args.get_config() or {})):
                    report(finding.message, finding.urn)

            return StackValidationPolicy(self.name, self.description, validate_stack, self.level, config_schema=schema)

        assert self.resource_check is not None, self.name
        resource_check, types = self.resource_check, self.types

        def validate_resource(args: ResourceValidationArgs, report: ReportViolation) -> None:
            if args.resource_type not in types:
                return
            resource = Resource(args.resource_type, args.name, plain(args.props), args.urn)
            for finding in resource_check(resource, dict(args.get_config() or {})):
                report(finding.message if isinstance(finding, Finding) else finding, None)

        return ResourceValidationPolicy(
            self.name, self.description, validate_resource, self.level, config_schema=schema
        )


MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
