"""The CRD schemas ship inside the package, verbatim from upstream, and `tpuray check` needs no ../shared."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tpuray.checks.schemas import SCHEMA_DIR, crds, schema_files, type_tokens
from tpuray.shared import shared_path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "policies"


def test_every_shared_crd_schema_is_packaged_byte_for_byte() -> None:
    shared = shared_path("schemas")
    files = sorted(p.relative_to(shared) for p in shared.glob("*/*") if p.is_file())
    assert [str(f) for f in files] == [
        "gke/PROVENANCE.md",
        "gke/cloud.google.com_computeclasses.yaml",
        "kuberay/PROVENANCE.md",
        "kuberay/ray.io_rayclusters.yaml",
        "kuberay/ray.io_rayjobs.yaml",
        "kuberay/ray.io_rayservices.yaml",
    ]
    for f in files:
        assert (SCHEMA_DIR / f).read_bytes() == (shared / f).read_bytes(), f


def test_every_packaged_schema_file_has_provenance_with_its_sha256() -> None:
    for path in schema_files():
        provenance = (path.parent / "PROVENANCE.md").read_text()
        for field in ("Repository: https://github.com/", "License of source repo: Apache-2.0", "Source path"):
            assert field in provenance, (path.parent.name, field)
        assert f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}" in provenance, path


def test_the_loader_finds_every_kind_the_project_renders_with_its_served_versions() -> None:
    assert {k: c.versions for k, c in crds().items()} == {
        ("cloud.google.com", "ComputeClass"): ("v1",),
        ("gateway.networking.k8s.io", "Gateway"): ("v1", "v1beta1"),
        ("gateway.networking.k8s.io", "HTTPRoute"): ("v1", "v1beta1"),
        ("kueue.x-k8s.io", "AdmissionCheck"): ("v1beta1", "v1beta2"),
        ("kueue.x-k8s.io", "ClusterQueue"): ("v1beta1", "v1beta2"),
        ("kueue.x-k8s.io", "LocalQueue"): ("v1beta1", "v1beta2"),
        ("kueue.x-k8s.io", "ProvisioningRequestConfig"): ("v1beta1", "v1beta2"),
        ("kueue.x-k8s.io", "ResourceFlavor"): ("v1beta1", "v1beta2"),
        ("kueue.x-k8s.io", "WorkloadPriorityClass"): ("v1beta1", "v1beta2"),
        ("networking.gke.io", "GCPBackendPolicy"): ("v1",),
        ("networking.gke.io", "HealthCheckPolicy"): ("v1",),
        ("ray.io", "RayCluster"): ("v1", "v1alpha1"),
        ("ray.io", "RayJob"): ("v1", "v1alpha1"),
        ("ray.io", "RayService"): ("v1", "v1alpha1"),
        ("secrets-store.csi.x-k8s.io", "SecretProviderClass"): ("v1", "v1alpha1"),
    }
    assert "kubernetes:ray.io/v1:RayJob" in type_tokens()


def test_a_built_package_carries_every_crd_schema(tmp_path: Path) -> None:
    """setuptools' build_py is what a wheel holds: a schema left out of package-data fails here."""
    build = tmp_path / "lib"
    subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "--build-lib", str(build)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    for path in [*schema_files(), *SCHEMA_DIR.glob("*/PROVENANCE.md")]:
        assert (build / "tpuray" / path.relative_to(REPO / "tpuray")).is_file(), path
    probe = "import json, tpuray.checks.schemas as s; print(json.dumps([s.__file__, sorted(k for _, k in s.crds())]))"
    env = {**os.environ, "PYTHONPATH": str(build)}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True, text=True
    )
    module, kinds = json.loads(out.stdout)
    assert module.startswith(str(build))
    assert kinds == [
        "AdmissionCheck",
        "ClusterQueue",
        "ComputeClass",
        "GCPBackendPolicy",
        "Gateway",
        "HTTPRoute",
        "HealthCheckPolicy",
        "LocalQueue",
        "ProvisioningRequestConfig",
        "RayCluster",
        "RayJob",
        "RayService",
        "ResourceFlavor",
        "SecretProviderClass",
        "WorkloadPriorityClass",
    ]


def _check_without_shared(tmp_path: Path, fixture: Path) -> tuple[int, list[dict[str, str]]]:
    empty = tmp_path / "empty-shared"
    empty.mkdir()
    env = {**os.environ, "TPURAY_SHARED": str(empty)}
    tpuray = Path(sys.executable).parent / "tpuray"
    proc = subprocess.run([str(tpuray), "check", str(fixture), "--json"], env=env, capture_output=True, text=True)
    return proc.returncode, json.loads(proc.stdout)["violations"]


def test_check_validates_the_schema_with_an_empty_shared_folder(tmp_path: Path) -> None:
    code, violations = _check_without_shared(tmp_path, FIXTURES / "bad" / "crd-schema.yaml")
    assert code == 1
    assert [(v["policy"], v["resource"]) for v in violations] == [("crd-schema", "RayJob/train-job")]
    assert "'ttlSecondAfterFinished' was unexpected" in violations[0]["message"]


def test_check_evaluates_the_crd_cel_rules_with_an_empty_shared_folder(tmp_path: Path) -> None:
    code, violations = _check_without_shared(tmp_path, FIXTURES / "cel" / "compute-class-flex-start-not-spot.yaml")
    assert code == 1
    assert [(v["policy"], v["resource"]) for v in violations] == [("crd-validation-rules", "ComputeClass/v6e")]
    assert "Flex Start provisioning model is incompatible with Spot" in violations[0]["message"]


def test_a_dropped_in_multi_document_file_is_indexed_by_group_and_kind(tmp_path: Path, monkeypatch) -> None:
    from tpuray.checks import schemas

    folder = tmp_path / "schemas" / "example"
    folder.mkdir(parents=True)
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "spec": {"group": "example.dev", "names": {"kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "schema": {"openAPIV3Schema": {"type": "object"}}},
                                 {"name": "v0", "served": False, "schema": {"openAPIV3Schema": {"type": "object"}}}]}}  # fmt: skip
    note = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "not-a-crd"}}
    (folder / "widgets.yaml").write_text(yaml.safe_dump_all([note, crd]))
    monkeypatch.setattr(schemas, "SCHEMA_DIR", tmp_path / "schemas")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    schemas.crds.cache_clear()
    schemas._documents.cache_clear()
    try:
        assert {k: (c.versions, c.index) for k, c in schemas.crds().items()} == {
            ("example.dev", "Widget"): (("v1",), 1)
        }
        assert len(list((tmp_path / "cache" / "tpuray" / "crds").glob("*.json"))) == 1  # parsed once, cached by sha256
    finally:
        schemas.crds.cache_clear()
        schemas._documents.cache_clear()


def test_a_cached_parse_is_read_back_instead_of_parsing_again(tmp_path: Path, monkeypatch) -> None:
    from tpuray.checks import schemas

    path = tmp_path / "one.yaml"
    path.write_text("kind: CustomResourceDefinition\nspec: {}\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    schemas._documents.cache_clear()
    try:
        assert schemas._documents(path) == ({"kind": "CustomResourceDefinition", "spec": {}},)
        (cached,) = (tmp_path / "cache" / "tpuray" / "crds").glob("*.json")
        cached.write_text('[{"kind": "from-cache"}]')
        schemas._documents.cache_clear()
        assert schemas._documents(path) == ({"kind": "from-cache"},)
    finally:
        schemas._documents.cache_clear()


def test_an_re2_pattern_with_its_flag_after_the_anchor_is_matched_as_the_api_server_does() -> None:
    # Kueue's CRDs write `^(?i)[a-z]...` (Go RE2 takes the flag there; Python's re refuses it).
    from tpuray.checks.schemas import schema_errors

    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "dws"},
             "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request",
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "c"}}}  # fmt: skip
    assert schema_errors(check) == []
    check["spec"]["parameters"]["kind"] = "9Config"
    assert schema_errors(check) == [
        "AdmissionCheck/dws: spec.parameters.kind: '9Config' does not match '(?i)^[a-z]([-a-z0-9]*[a-z0-9])?$'"
    ]
