"""Run the real Pulumi program under the Pulumi mock engine: no CLI, no credentials.

Every resource the program registers is recorded with its inputs exactly as the engine
sees them (camelCase wire names, resolved). Preview, render, the policy pack and the
emulator all read these records: there is no second copy of any manifest.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import settings as pulumi_settings

from tpuray.checks import gke_versions
from tpuray.checks.strict import check_inputs
from tpuray.config import ConfigError, StackConfig, pulumi_config_map, read_stack_file, resolve_stack_file
from tpuray.config.checks import load_stack

PROJECT = "tpuray"


@dataclass
class MockedResource:
    type: str  # Pulumi type token, e.g. gcp:container/nodePool:NodePool
    name: str  # logical (Pulumi) name
    inputs: dict[str, Any]
    urn: str = ""
    provider: str = ""
    # Registration sequence: a resource that waits on another's outputs registers after it.
    order: int = 0

    @property
    def is_kubernetes_object(self) -> bool:
        return self.type.startswith("kubernetes:") and "apiVersion" in self.inputs

    def manifest(self) -> dict[str, Any]:
        """A Kubernetes object as kubectl would take it (integral floats back to ints)."""
        return _ints(self.inputs)

    def as_json(self) -> dict[str, Any]:
        return {"type": self.type, "name": self.name, "inputs": self.inputs}


@dataclass
class StackRun:
    stack: str
    config: StackConfig
    resources: list[MockedResource] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)
    # Inputs the pinned provider SDKs would refuse (tpuray.checks.strict), one line each.
    input_errors: list[str] = field(default_factory=list)

    def of_type(self, type_token: str) -> list[MockedResource]:
        return [r for r in self.resources if r.type == type_token]

    def kubernetes_objects(self) -> list[MockedResource]:
        return [r for r in self.resources if r.is_kubernetes_object]


def _ints(value: Any) -> Any:
    # The engine hands numbers over as floats (numOfHosts 4.0); manifests want ints.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


# Offline, a GCS object gs://B/O is read from $TPURAY_GCS_MIRROR/B/O (tests, air-gapped CI).
GCS_MIRROR_ENV = "TPURAY_GCS_MIRROR"


def _tfstate_outputs(text: str) -> dict[str, Any]:
    """Root outputs of a Terraform state document, name -> value (what the provider returns)."""
    return {name: out.get("value") for name, out in (json.loads(text).get("outputs") or {}).items()}


class _RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, project: str, run: StackRun):
        self.project = project
        self.run = run

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        # Strict mocks: the inputs as the provider would receive them, against the SDK's types.
        self.run.input_errors.extend(check_inputs(args.typ, args.name, dict(args.inputs)))
        self.run.resources.append(
            MockedResource(
                type=args.typ,
                name=args.name,
                inputs=dict(args.inputs),
                provider=args.provider or "",
                order=len(self.run.resources),
            )
        )
        outputs = dict(args.inputs)
        # Computed outputs the program reads back: stand-ins that look like the real thing.
        if args.typ == "gcp:serviceaccount/account:Account":
            outputs["email"] = (
                f"{args.inputs.get('accountId')}@{args.inputs.get('project', self.project)}.iam.gserviceaccount.com"
            )
        elif args.typ == "gcp:container/cluster:Cluster":
            outputs["endpoint"] = "172.16.0.2"
            outputs["masterAuth"] = {"clusterCaCertificate": "bW9jay1jYQ=="}
            # The private IP endpoint, which a stack with dnsEndpoint: off deploys through.
            private = dict(args.inputs.get("privateClusterConfig") or {})
            outputs["privateClusterConfig"] = {**private, "privateEndpoint": "172.16.0.2"}
            # GKE fills in the DNS-based endpoint's name (gke-<id>.<region>.gke.goog).
            endpoints = dict(args.inputs.get("controlPlaneEndpointsConfig") or {})
            if "dnsEndpointConfig" in endpoints:
                dns = dict(endpoints["dnsEndpointConfig"])
                dns["endpoint"] = f"gke-{args.inputs.get('name')}-mock.{args.inputs.get('location')}.gke.goog"
                outputs["controlPlaneEndpointsConfig"] = {**endpoints, "dnsEndpointConfig": dns}
        elif args.typ == "gcp:compute/resourcePolicy:ResourcePolicy":
            outputs.setdefault("name", args.name)
        outputs.setdefault("name", args.inputs.get("name", args.name))
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        # Terraform state references are answered from real files, so a stack that reads its
        # VPC and reservations from Terraform previews with the real values.
        if args.token == "terraform:state:getLocalReference":
            return {"outputs": _tfstate_outputs(Path(args.args["path"]).read_text())}
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            # Stand-in: the dated snapshot of each channel's default version for cluster creation
            # (tpuray/data/gke_channel_defaults.yaml); `pulumi up` asks getServerConfig itself.
            return {"releaseChannelDefaultVersion": gke_versions.channel_defaults_snapshot().versions}
        if args.token == "gcp:storage/getBucketObjectContent:getBucketObjectContent":
            mirror = os.environ.get(GCS_MIRROR_ENV)
            path = Path(mirror, args.args["bucket"], args.args["name"]) if mirror else None
            return {"content": path.read_text() if path and path.is_file() else None}
        return {}


class _LogCollector(logging.Handler):
    def __init__(self, run: StackRun):
        super().__init__()
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.log.append((record.levelname.lower(), record.getMessage()))


def _close_pulumis_event_loop() -> None:
    """Close, at exit, the event loop the SDK made and left set on this thread
    (pulumi/runtime/sync_await.py `_ensure_event_loop`; the SDK's Outputs need it while the
    process runs more programs). Left open, interpreter shutdown collects it after its self-pipe
    socket, and `BaseEventLoop.__del__` prints "Exception ignored ... Invalid file descriptor: -1"
    with a traceback on stderr after a command that itself failed cleanly (seen once under load,
    in `tpuray local run` without a cluster). atexit runs before that teardown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running() and not loop.is_closed():
        loop.close()


atexit.register(_close_pulumis_event_loop)  # once per process that may run a program


def run_stack(stack: str) -> StackRun:
    """Validate the stack's config, then run the program under mocks. Raises ConfigError."""
    name, path = resolve_stack_file(stack)
    raw = read_stack_file(path)
    config = load_stack(str(path))  # validated before anything is declared
    run = StackRun(stack=name, config=config)

    from infra.program import main  # imported late: it pulls in the provider SDKs

    pulumi.runtime.set_all_config(pulumi_config_map(raw))
    pulumi_settings.ROOT.set(None)  # a fresh root Stack per run, also within one process
    logger = logging.getLogger(f"tpuray.preview.mockrun.{name}")
    logger.propagate = False
    logger.handlers[:] = [_LogCollector(run)]
    pulumi.runtime.set_mocks(
        _RecordingMocks(config.gcp.project, run), project=PROJECT, stack=name, preview=True, logger=logger
    )
    try:
        pulumi.runtime.test(main)()
    except pulumi.RunError as err:
        # The program's own clean errors (e.g. a missing Terraform output): one line each, no traceback.
        raise ConfigError([ln for ln in str(err).splitlines()[1:] if ln.strip()] or [str(err)]) from None
    if run.input_errors:
        raise ConfigError(sorted(run.input_errors))
    # Registration order is async; sort so that output and diffs are stable.
    run.resources.sort(key=lambda r: (r.type, r.name))
    return run
