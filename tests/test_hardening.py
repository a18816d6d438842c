"""Cluster hardening from stack config: Dataplane V2, KMS secrets, Binary Authorization, maintenance."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import mocked

from tpuray.cli import main
from tpuray.commands.preview import key_inputs
from tpuray.config import ConfigError, read_stack_file, resolve_stack_file, stacks_dir
from tpuray.config.checks import parse_stack_config
from tpuray.policies.evaluate import check_stack as policy_violations
from tpuray.preview.mockrun import run_stack

CLUSTER = "gcp:container/cluster:Cluster"
DIGEST_IMAGE = "rayproject/ray:2.60.0-py312-tpu@sha256:" + "ab" * 32


def cluster_inputs(stack: str) -> dict[str, Any]:
    (cluster,) = mocked(stack).of_type(CLUSTER)
    return cluster.inputs


@pytest.mark.parametrize("stack", ("dev", "staging", "prod"))
def test_every_cluster_runs_dataplane_v2_and_the_standard_gateway_api(stack: str) -> None:
    inputs = cluster_inputs(stack)
    assert inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    assert inputs["gatewayApiConfig"] == {"channel": "CHANNEL_STANDARD"}


def test_prod_encrypts_secrets_with_its_kms_key() -> None:
    assert cluster_inputs("prod")["databaseEncryption"] == {
        "state": "ENCRYPTED",
        "keyName": "projects/acme-ml-prod/locations/us-east5/keyRings/tpuray-prod/cryptoKeys/gke-secrets",
    }


def test_prod_has_a_weekend_window_and_an_exclusion_around_the_long_run() -> None:
    assert cluster_inputs("prod")["maintenancePolicy"] == {
        "recurringWindow": {
            "startTime": "2026-01-03T04:00:00Z",
            "endTime": "2026-01-03T12:00:00Z",
            "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU",
        },
        "maintenanceExclusions": [
            {
                "exclusionName": "q1-long-training-run",
                "startTime": "2026-01-05T00:00:00Z",
                "endTime": "2026-03-31T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES"},
            }
        ],
    }


def test_binary_authorization_stays_off_unless_the_stack_opts_in() -> None:
    inputs = cluster_inputs("dev")
    assert "binaryAuthorization" not in inputs
    assert mocked("dev").of_type("gcp:binaryauthorization/policy:Policy") == []


def test_preview_prod_shows_dataplane_v2_kms_and_the_maintenance_policy_and_passes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["preview", "prod"])  # in-process: the same parse, call, print as the command
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "dataplane=V2" in out.out and "podSecurity=restricted" in out.out
    assert "policies: no violations" in out.out
    (cluster,) = mocked("prod").of_type(CLUSTER)
    assert key_inputs(cluster) == (
        "us-east5 channel=STABLE rayOperator=True privateNodes=True workloadIdentity=True dnsEndpoint=off "
        "dataplane=V2 secretsEncryption=KMS gke-secrets binaryAuthorization=PROJECT_SINGLETON_POLICY_ENFORCE "
        "maintenance=FREQ=WEEKLY;BYDAY=SA,SU 04:00-12:00Z exclusions=1"
    )


# ---------------------------------------------------------------------------- Binary Authorization


def _stack_file(tmp_path: Path, name: str, edit: Any) -> Path:
    doc = copy.deepcopy(yaml.safe_load((stacks_dir() / "Pulumi.prod.yaml").read_text()))
    edit(doc["config"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_opting_in_enforces_binary_authorization_and_admits_the_ray_image_by_digest(tmp_path: Path) -> None:
    def edit(config: dict[str, Any]) -> None:
        config["tpuray:ray"]["image"] = DIGEST_IMAGE
        config["tpuray:cluster"]["binaryAuthorization"] = {"enforce": True}

    run = run_stack(str(_stack_file(tmp_path, "binauthz", edit)))
    (cluster,) = run.of_type(CLUSTER)
    assert cluster.inputs["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    (policy,) = run.of_type("gcp:binaryauthorization/policy:Policy")
    assert policy.inputs["defaultAdmissionRule"] == {
        "evaluationMode": "ALWAYS_DENY",
        "enforcementMode": "ENFORCED_BLOCK_AND_AUDIT_LOG",
    }
    assert policy.inputs["admissionWhitelistPatterns"] == [{"namePattern": DIGEST_IMAGE}]
    assert policy.inputs["globalPolicyEvaluationMode"] == "ENABLE"
    # A digest-pinned rayproject image still names its Ray version, but prod serves with Ray Serve
    # LLM, and the override puts every group on an image without vLLM (issue 31, item 8).
    assert {(v.policy, v.resource) for v in policy_violations(run)} == {
        ("serve-llm-vllm-image", "RayService/tpuray-prod-serve")
    }


def test_prod_enforces_binary_authorization_admitting_only_its_own_repository() -> None:
    # Before (issue 36, item 8) no committed stack enforced it.
    (cluster,) = mocked("prod").of_type(CLUSTER)
    assert cluster.inputs["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    (policy,) = mocked("prod").of_type("gcp:binaryauthorization/policy:Policy")
    assert policy.inputs["admissionWhitelistPatterns"] == [
        {"namePattern": "us-east5-docker.pkg.dev/acme-ml-prod/tpuray/*"}
    ]


def test_prod_with_the_digests_the_deploy_pushed_passes_binary_authorization(tmp_path: Path) -> None:
    digest = "sha256:" + "3f" * 32

    def built(config: dict[str, Any]) -> None:
        config["tpuray:images"]["digests"] = {"ray-tpu": digest, "serve-llm": digest}

    run = run_stack(str(_stack_file(tmp_path, "built", built)))
    images = {c["image"] for r in run.kubernetes_objects() for c in _containers(r.manifest())}
    assert images == {
        f"us-east5-docker.pkg.dev/acme-ml-prod/tpuray/ray-tpu@{digest}",
        f"us-east5-docker.pkg.dev/acme-ml-prod/tpuray/serve-llm@{digest}",
    }
    assert [v.as_json() for v in policy_violations(run)] == []


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = manifest.get("spec", {})
    cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or (spec if "headGroupSpec" in spec else None)
    if not cluster:
        return []
    groups = [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]
    return [c for g in groups for c in g["template"]["spec"]["containers"] if c["name"].startswith("ray-")]


# ---------------------------------------------------------------------------- config mistakes


def _prod(edit: Any) -> dict[str, Any]:
    raw = copy.deepcopy(read_stack_file(resolve_stack_file("prod")[1]))
    edit(raw)
    return raw


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (
            lambda r: (
                r["cluster"].update(binaryAuthorization={"enforce": True}),
                r["ray"].update(image="rayproject/ray:2.60.0-py312-tpu"),
            ),
            "tpuray:ray.image: 'rayproject/ray:2.60.0-py312-tpu' is not pinned by digest; Binary Authorization in "
            "enforce mode admits the project's images by digest: use <image>@sha256:<64 hex digits>",
        ),
        (
            lambda r: r["cluster"]["maintenance"]["window"].update(end="2026-01-03T06:00:00Z"),
            "tpuray:cluster.maintenance.window: 2026-01-03T04:00:00Z to 2026-01-03T06:00:00Z is shorter than 4 "
            "hours; GKE needs at least 4 contiguous hours: move end later",
        ),
        (
            lambda r: r["cluster"]["maintenance"]["exclusions"][0].update(end="2026-01-01T00:00:00Z"),
            "tpuray:cluster.maintenance.exclusions[0]: end 2026-01-01T00:00:00Z is not after start 2026-01-05T00:00:00Z",
        ),
        (
            lambda r: r["cluster"]["maintenance"]["exclusions"][0].update(scope="NO_UPGRADES"),
            "tpuray:cluster.maintenance.exclusions[0]: a NO_UPGRADES exclusion of 85 days is longer than GKE's 30; "
            "use scope NO_MINOR_OR_NODE_UPGRADES for longer runs",
        ),
        (
            lambda r: r["workloads"].update(adminCidrs=["0.0.0.0/0"]),
            "tpuray:workloads.adminCidrs[0]: '0.0.0.0/0' opens the Ray dashboard to everyone; list your admin networks",
        ),
    ],
)
def test_hardening_config_mistakes_are_one_clear_line(edit: Any, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_prod(edit), "prod")
    assert err.value.lines == [line]


def test_a_maintenance_time_that_is_not_rfc3339_utc_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        parse_stack_config(_prod(lambda r: r["cluster"]["maintenance"]["window"].update(start="Sat 04:00")), "prod")
    (line,) = err.value.lines
    assert line.startswith("tpuray:cluster.maintenance.window.start: 'Sat 04:00' is invalid;")
    assert "RFC 3339 UTC time such as 2026-01-03T04:00:00Z" in line


def test_a_stack_without_maintenance_config_is_valid_and_renders_no_maintenance_policy() -> None:
    cfg = parse_stack_config(_prod(lambda r: r["cluster"].pop("maintenance")), "prod")
    assert cfg.cluster.maintenance is None
