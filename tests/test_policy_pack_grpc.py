"""End to end: `python policies/__main__.py` as the Pulumi CLI starts it, called over gRPC on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import empty_pb2

from tpuray.policies import RULES
from tpuray.policies.analyzer import InProcessAnalyzer, PackProcess, analyze, config_file, load_config_file
from tpuray.policies.manifests import load

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"


@pytest.fixture(scope="module")
def pack() -> Iterator[PackProcess]:
    process = PackProcess(python=sys.executable)
    yield process
    process.close()


def test_pack_process_announces_every_rule_with_its_description(pack: PackProcess) -> None:
    info = pack.stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "tpuray"
    assert {p.name: p.description for p in info.policies} == {r.name: r.description for r in RULES}


def test_pack_process_gives_the_same_violations_as_the_in_process_analyzer(pack: PackProcess) -> None:
    targets = load([str(FIXTURES / "bad")])
    config = load_config_file(config_file("dev"))
    over_grpc = analyze(pack.stub, targets, config)
    in_process = analyze(InProcessAnalyzer(), targets, config)
    assert over_grpc == in_process
    assert {v.policy for v in over_grpc} >= {"tpu-num-of-hosts", "ray-token-auth", "compute-class-tpu-shape"}


def test_pack_process_applies_the_environment_enforcement_levels(pack: PackProcess) -> None:
    targets = load([str(FIXTURES / "bad" / "spot-has-fallback.yaml")])
    levels = {
        e: {v.level for v in analyze(pack.stub, targets, load_config_file(config_file(e)))} for e in ("dev", "prod")
    }
    assert levels == {"dev": {"advisory"}, "prod": {"mandatory"}}
