"""Drive the policy pack's analyzer the way the Pulumi CLI does, without the CLI.

The CLI talks to a policy pack over gRPC: GetAnalyzerInfo, then Configure with the
reconciled policy config (defaults, then `--policy-pack-config` file), then Analyze for
each resource and AnalyzeStack once. `tpuray preview` and `tpuray check` do exactly that,
either in process (the pack's servicer) or over gRPC against `python policies/__main__.py`.
The servicer class is private to pulumi-policy, so its version is pinned and checked.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2

from tpuray.errors import TpurayError
from tpuray.policies.core import Resource
from tpuray.shared import REPO_ROOT

POLICY_DIR = REPO_ROOT / "policies"
PACK_VERSION = "0.1.0"  # keep equal to policies/PulumiPolicy.yaml
TESTED_PULUMI_POLICY = "1.21.0"
LEVELS = {"advisory": 0, "mandatory": 1, "disabled": 2, "remediate": 3}
LEVEL_NAMES = {v: k for k, v in LEVELS.items()}


class PolicyConfigError(TpurayError, ValueError):
    """A policy config file or override the CLI would reject (exit 2)."""


@dataclass(frozen=True)
class Target:
    """One resource to analyse, and where it came from (a manifest file, for `check`)."""

    resource: Resource
    file: str | None = None


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str  # mandatory | advisory
    resource: str
    message: str
    file: str | None = None

    def as_json(self) -> dict[str, Any]:
        out = {"policy": self.policy, "level": self.level, "resource": self.resource, "message": self.message}
        if self.file is not None:
            out["file"] = self.file
        return out


# ---------------------------------------------------------------------------- clients


class InProcessAnalyzer:
    """The pack's analyzer servicer, called directly: same deserialisation and levels as over gRPC."""

    def __init__(self) -> None:
        import pulumi_policy
        from pulumi_policy.policy import _PolicyAnalyzerServicer

        from tpuray.policies import PACK_DESCRIPTION, PACK_ENFORCEMENT, PACK_NAME, pulumi_policies

        version = getattr(pulumi_policy, "__version__", None) or _installed_version()
        if version != TESTED_PULUMI_POLICY:
            raise RuntimeError(
                f"pulumi-policy {version} is installed; tpuray drives its analyzer servicer, tested with "
                f"{TESTED_PULUMI_POLICY}: install the pinned version (requirements.lock)"
            )
        self._servicer = _PolicyAnalyzerServicer(
            PACK_NAME, PACK_VERSION, pulumi_policies(), PACK_ENFORCEMENT, None, PACK_DESCRIPTION
        )

    def __getattr__(self, method: str) -> Callable[[Any], Any]:
        target = getattr(self._servicer, method)
        return lambda request: target(request, None)


def _installed_version() -> str:
    from importlib.metadata import version

    return version("pulumi-policy")


class PackProcess:
    """`python policies/__main__.py` as the CLI starts it; .client() talks to it over gRPC."""

    def __init__(self, python: str = sys.executable, timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [python, str(POLICY_DIR / "__main__.py")],
            cwd=POLICY_DIR,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode().strip()  # the pack prints its port first
        if not line.isdigit():
            self.close()
            err = self.proc.stderr.read().decode() if self.proc.stderr else ""
            raise RuntimeError(f"policy pack did not start (first line {line!r}): {err[-2000:]}")
        self.port = int(line)
        import grpc
        from pulumi.runtime.proto import analyzer_pb2_grpc

        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        grpc.channel_ready_future(self.channel).result(timeout=timeout)
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)

    def close(self) -> None:
        if getattr(self, "channel", None) is not None:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()  # our own child, by handle
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> PackProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- config


def config_file(environment: str) -> Path:
    return POLICY_DIR / f"policy-config.{environment}.json"


def load_config_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PolicyConfigError(f"policy config {path}: not found") from None
    except json.JSONDecodeError as err:
        raise PolicyConfigError(f"policy config {path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise PolicyConfigError(f"policy config {path}: must be a JSON object keyed by policy name")
    return data


def _apply(levels: dict[str, str], props: dict[str, dict[str, Any]], config: dict[str, Any], source: str) -> None:
    if "all" in config:
        if config["all"] not in LEVELS:
            raise PolicyConfigError(f"{source}: all is {config['all']!r}; valid: {', '.join(LEVELS)}")
        levels.update(dict.fromkeys(levels, config["all"]))
    for name, value in config.items():
        if name == "all":
            continue
        if name not in levels:
            raise PolicyConfigError(
                f"{source}: {name!r} is not a policy of this pack; valid: {', '.join(sorted(levels))}"
            )
        value = {"enforcementLevel": value} if isinstance(value, str) else value
        if not isinstance(value, dict):
            raise PolicyConfigError(f"{source}: {name} must be an enforcement level or an object")
        for key, item in value.items():
            if key == "enforcementLevel":
                if item not in LEVELS:
                    raise PolicyConfigError(
                        f"{source}: {name}.enforcementLevel is {item!r}; valid: {', '.join(LEVELS)}"
                    )
                levels[name] = item
            else:
                props[name][key] = item


@functools.cache
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    """The validator of one policy's config schema, checked and built once per process: the
    schemas are the pack's own, and jsonschema.validate re-checks the schema against its
    metaschema on every call (half the time of a one-file `tpuray check`)."""
    schema = {"type": "object", **json.loads(schema_json)}
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def configure_request(
    info: analyzer_pb2.AnalyzerInfo, file_config: dict[str, Any], overrides: dict[str, Any], source: str
) -> analyzer_pb2.ConfigureAnalyzerRequest:
    """Policy config as the CLI reconciles it: policy defaults, schema defaults, the file, then overrides."""
    levels = {p.name: LEVEL_NAMES[p.enforcementLevel] for p in info.policies}
    schemas = {p.name: json_format.MessageToDict(p.configSchema) for p in info.policies}
    props: dict[str, dict[str, Any]] = {
        name: {k: v["default"] for k, v in schema.get("properties", {}).items() if "default" in v}
        for name, schema in schemas.items()
    }
    _apply(levels, props, file_config, source)
    _apply(levels, props, overrides, "overrides")
    request = analyzer_pb2.ConfigureAnalyzerRequest()
    for name, level in levels.items():
        error = jsonschema.exceptions.best_match(
            _validator(json.dumps(schemas[name], sort_keys=True)).iter_errors(props[name])
        )
        if error is not None:
            raise PolicyConfigError(f"{source}: {name}: {error.message}")
        entry = request.policyConfig[name]
        entry.enforcementLevel = LEVELS[level]
        entry.properties.update(props[name])
    return request


# ---------------------------------------------------------------------------- analysis


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    # YAML can hold dates and other non-JSON scalars; the engine would send strings.
    out.update(json.loads(json.dumps(props, default=str)))
    return out


def _message(diag: analyzer_pb2.AnalyzeDiagnostic) -> str:
    # The servicer prefixes the policy description; violations carry the specific message.
    prefix = diag.description + "\n"
    return diag.message[len(prefix) :] if diag.message.startswith(prefix) else diag.message


def analyze(
    client: Any,
    targets: list[Target],
    file_config: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    source: str = "policy config",
    level_of: Callable[[str, Target | None, str], str] | None = None,
) -> list[Violation]:
    """Run the pack on `targets` through `client` (InProcessAnalyzer or a gRPC AnalyzerStub).

    `level_of(policy, target, level)`, when given, decides each violation's level from the level
    the analyzer reported and the resource it blames (None: a stack-wide finding); `tpuray check`
    uses it for its per-manifest profiles (tpuray.policies.evaluate)."""
    info = client.GetAnalyzerInfo(_empty())
    client.Configure(configure_request(info, file_config or {}, overrides or {}, source))
    by_urn = {t.resource.urn: t for t in targets}
    violations: list[Violation] = []

    def collect(response: analyzer_pb2.AnalyzeResponse, default: Target | None) -> None:
        for diag in response.diagnostics:
            target = by_urn.get(diag.urn, default)
            level = LEVEL_NAMES.get(diag.enforcementLevel, "advisory")
            violations.append(
                Violation(
                    policy=diag.policyName,
                    level=level if level_of is None else level_of(diag.policyName, target, level),
                    resource=target.resource.label if target else "stack",
                    message=_message(diag),
                    file=target.file if target else None,
                )
            )

    for t in targets:
        r = t.resource
        request = analyzer_pb2.AnalyzeRequest(type=r.type, name=r.name, urn=r.urn, properties=_struct(r.props))
        collect(client.Analyze(request), t)
    stack = analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(type=t.resource.type, name=t.resource.name, urn=t.resource.urn,
                                          properties=_struct(t.resource.props))
            for t in targets
        ]
    )  # fmt: skip
    collect(client.AnalyzeStack(stack), None)
    return violations


def _empty() -> Any:
    from google.protobuf import empty_pb2

    return empty_pb2.Empty()


def urn(stack: str, type_token: str, name: str) -> str:
    return f"urn:pulumi:{stack}::tpuray::{type_token}::{name}"
