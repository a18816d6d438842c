"""Every rendered RayCluster, RayJob, RayService and ComputeClass validates against its CRD schema."""

from __future__ import annotations

import copy

import pytest

from tests.conftest import STACKS, mocked
from tpuray.checks.schemas import has_schema, schema_errors
from tpuray.preview.render import manifests
from tpuray.shared import SharedDataMissing, shared_dir


def crd_objects(stack: str) -> list[dict]:
    return [m for m in manifests(mocked(stack)) if has_schema(m)]


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_custom_resources_conform_to_their_crd_schemas(stack):
    objects = crd_objects(stack)
    assert {m["kind"] for m in objects} >= {"ComputeClass", "RayJob", "RayService"}
    errors = [line for m in objects for line in schema_errors(m)]
    assert errors == []


def test_interactive_ray_cluster_conforms_to_its_crd_schema():
    (cluster,) = [m for m in crd_objects("staging") if m["kind"] == "RayCluster"]
    assert schema_errors(cluster) == []


def test_a_misspelled_field_is_a_schema_failure_naming_the_field():
    job = copy.deepcopy(next(m for m in crd_objects("prod") if m["kind"] == "RayJob"))
    group = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["numOfHost"] = group.pop("numOfHosts")
    (error,) = schema_errors(job)
    assert "spec.rayClusterSpec.workerGroupSpecs.0" in error and "'numOfHost' was unexpected" in error


def test_a_wrongly_typed_field_is_a_schema_failure_naming_the_field():
    cc = copy.deepcopy(next(m for m in crd_objects("prod") if m["kind"] == "ComputeClass"))
    cc["spec"]["whenUnsatisfiable"] = "Maybe"
    (error,) = schema_errors(cc)
    assert "spec.whenUnsatisfiable" in error and "'Maybe' is not one of" in error


def test_missing_shared_folder_says_where_to_get_the_crds(monkeypatch, tmp_path):
    monkeypatch.setenv("TPURAY_SHARED", str(tmp_path / "nowhere"))
    with pytest.raises(SharedDataMissing, match="ray-project/kuberay ray-operator/config/crd/bases"):
        shared_dir()


def test_a_name_that_is_not_a_dns_subdomain_is_refused_as_on_the_api_server():
    job = copy.deepcopy(next(m for m in manifests(mocked("dev")) if m["kind"] == "RayJob"))
    job["metadata"]["name"] = "train-${JOB_ID}"
    assert schema_errors(job) == [
        "RayJob/train-${JOB_ID}: metadata.name: 'train-${JOB_ID}' is not a lowercase RFC 1123 subdomain (at most "
        "253 characters of lower case alphanumerics, '-' or '.', starting and ending with an alphanumeric)"
    ]
