"""A stack that takes its VPC, ranges, key, repository and TPU reservation from a Terraform state, under mocks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tpuray.config import ConfigError, read_stack_file
from tpuray.config.checks import parse_stack_config
from tpuray.config.terraform import resolve
from tpuray.preview.mockrun import GCS_MIRROR_ENV, StackRun, run_stack

FIXTURES = REPO / "tests" / "fixtures" / "terraform"
LOCAL_STACK = FIXTURES / "Pulumi.tf-local.yaml"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"


def _stack_with(tmp_path: Path, terraform: dict[str, Any], name: str = "tf-test") -> Path:
    doc = yaml.safe_load(LOCAL_STACK.read_text())
    doc["config"]["tpuray:terraform"] = terraform
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def local_run() -> StackRun:
    return run_stack(str(LOCAL_STACK))


def test_cluster_uses_the_network_and_subnetwork_from_the_state(local_run: StackRun) -> None:
    (cluster,) = [r.inputs for r in local_run.of_type(CLUSTER) if "network" in r.inputs]
    assert (cluster["network"], cluster["subnetwork"]) == ("tpuray-prod", "tpuray-prod-us-east5-gke")


def test_reserved_node_pools_consume_the_reservation_named_in_the_state(local_run: StackRun) -> None:
    reserved = [r.inputs["nodeConfig"]["reservationAffinity"] for r in local_run.of_type(NODE_POOL)
                if r.inputs["nodeConfig"].get("reservationAffinity", {}).get("consumeReservationType") == "SPECIFIC_RESERVATION"]  # fmt: skip
    assert len(reserved) == 2  # v6e-train: one pool per slice
    assert all(a["values"] == ["acme-v6e-4x4-east5b-2026q4"] for a in reserved)


def test_compute_class_reservation_priority_names_the_state_reservation(local_run: StackRun) -> None:
    (cc,) = [r.inputs for r in local_run.of_type(COMPUTE_CLASS) if r.inputs["metadata"]["name"] == "v6e-train"]
    assert cc["spec"]["priorities"][0]["reservations"] == {
        "affinity": "Specific",
        "specific": [{"name": "acme-v6e-4x4-east5b-2026q4"}],
    }


def test_missing_output_names_the_output_and_the_state(tmp_path: Path) -> None:
    path = _stack_with(tmp_path, {"backend": "local", "path": str(FIXTURES / "foundation.tfstate"),
                                  "outputs": {"network": "vpc_id"}})  # fmt: skip
    with pytest.raises(ConfigError) as err:
        run_stack(str(path))
    (line,) = err.value.lines
    assert "output 'vpc_id' not found in Terraform state" in line
    assert str(FIXTURES / "foundation.tfstate") in line
    assert "network, pods_range_name" in line  # what is there instead


def test_gcs_backend_reads_the_state_object_of_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "gcs"
    (mirror / "acme-tf-state" / "network" / "prod").mkdir(parents=True)
    shutil.copy(FIXTURES / "foundation.tfstate", mirror / "acme-tf-state" / "network" / "prod" / "default.tfstate")
    monkeypatch.setenv(GCS_MIRROR_ENV, str(mirror))
    path = _stack_with(tmp_path, {"backend": "gcs", "bucket": "acme-tf-state", "prefix": "network/prod",
                                  "outputs": {"subnetwork": "subnetwork"}})  # fmt: skip
    (cluster,) = [r.inputs for r in run_stack(str(path)).of_type(CLUSTER) if "network" in r.inputs]
    assert (cluster["network"], cluster["subnetwork"]) == ("default", "tpuray-prod-us-east5-gke")


def test_unreadable_gcs_state_fails_with_its_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GCS_MIRROR_ENV, raising=False)
    path = _stack_with(tmp_path, {"backend": "gcs", "bucket": "acme-tf-state", "prefix": "network/prod",
                                  "outputs": {"network": "network"}})  # fmt: skip
    with pytest.raises(ConfigError, match=r"gs://acme-tf-state/network/prod/default\.tfstate"):
        run_stack(str(path))


def test_gcs_backend_without_a_bucket_is_a_config_error() -> None:
    raw = read_stack_file(LOCAL_STACK)
    raw["terraform"] = {"backend": "gcs", "outputs": {"network": "network"}}
    with pytest.raises(ConfigError, match=r"tpuray:terraform.bucket: missing"):
        parse_stack_config(raw, "tf-test")


def test_reservation_mapping_must_name_a_reservation_tier() -> None:
    raw = read_stack_file(LOCAL_STACK)
    raw["terraform"]["outputs"]["reservations"] = {"no-such-res": "reservations.acme-v6e-4x4-prod"}
    with pytest.raises(ConfigError, match=r"reservations.no-such-res: no capacity tier uses reservation 'no-such-res'"):
        parse_stack_config(raw, "tf-test")


def test_cluster_uses_the_named_secondary_ranges_from_the_state(local_run: StackRun) -> None:
    (cluster,) = [r.inputs for r in local_run.of_type(CLUSTER) if "network" in r.inputs]
    assert cluster["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "gke-pods",
        "servicesSecondaryRangeName": "gke-services",
    }


def test_cluster_encrypts_secrets_with_the_key_from_the_state(local_run: StackRun) -> None:
    (cluster,) = [r.inputs for r in local_run.of_type(CLUSTER) if "network" in r.inputs]
    assert cluster["databaseEncryption"] == {
        "state": "ENCRYPTED",
        "keyName": "projects/acme-ml-prod/locations/us-east5/keyRings/tpuray-prod/cryptoKeys/gke-secrets",
    }


def test_image_repository_comes_from_the_state() -> None:
    raw = read_stack_file(LOCAL_STACK)
    outputs = json.loads((FIXTURES / "foundation.tfstate").read_text())["outputs"]
    cfg = resolve(parse_stack_config(raw, "tf-test"), {k: v["value"] for k, v in outputs.items()})
    assert cfg.images.repository == "us-east5-docker.pkg.dev/acme-ml-prod/tpuray"


def test_missing_map_entry_names_the_entries_there(tmp_path: Path) -> None:
    path = _stack_with(tmp_path, {"backend": "local", "path": str(FIXTURES / "foundation.tfstate"),
                                  "outputs": {"reservations": {"acme-v6e-4x4-prod": "reservations.acme-v6e-prod"}}})  # fmt: skip
    with pytest.raises(ConfigError) as err:
        run_stack(str(path))
    (line,) = err.value.lines
    assert "output 'reservations' in" in line
    assert "has no entry 'acme-v6e-prod'; entries there: acme-v6e-4x4-prod" in line
