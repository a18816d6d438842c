"""`tpuray check PATH...`: the pack's Kubernetes rules on plain YAML, its exit codes, and the
official samples in shared/conformance (findings recorded in docs/policy-findings.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import STACKS, mocked

from tpuray.cli import main
from tpuray.config import stacks_dir
from tpuray.policies import RULES
from tpuray.policies.evaluate import check_manifests as check
from tpuray.preview.mockrun import run_stack
from tpuray.shared import shared_path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
DOCS = Path(__file__).resolve().parent.parent / "docs"
TOPOLOGY_RULES = {r.name for r in RULES if r.topology}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_clean_manifests_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(FIXTURES / "good"))
    assert code == 0 and "0 mandatory" in out


def test_a_mandatory_violation_exits_1_and_names_the_policy(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(FIXTURES / "bad" / "tpu-num-of-hosts.yaml"))
    assert code == 1 and "tpu-num-of-hosts" in out and "set numOfHosts: 4" in out


def test_json_lists_policy_level_resource_file_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "bad" / "ray-token-auth.yaml")
    code, out, _ = run_cli(capsys, path, "--json")
    (v,) = json.loads(out)["violations"]
    assert code == 1
    assert v == {"policy": "ray-token-auth", "level": "mandatory", "resource": "RayJob/train-job", "file": path,
                 "message": v["message"]}  # fmt: skip


def test_advisories_alone_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(FIXTURES / "bad" / "spot-has-fallback.yaml"), "--env", "dev", "--json")
    assert code == 0 and {v["level"] for v in json.loads(out)["violations"]} == {"advisory"}


def test_ray_version_option_sets_the_pin(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "bad" / "ray-version-pinned.yaml")
    assert run_cli(capsys, path, "--ray-version", "2.59.0")[0] == 0


def test_multi_document_files_are_read_document_by_document(tmp_path: Path) -> None:
    docs = [yaml.safe_load((FIXTURES / "bad" / f"{r}.yaml").read_text()) for r in ("tpu-image", "ray-token-auth")]
    (tmp_path / "both.yaml").write_text(yaml.safe_dump_all(docs))
    assert {v.policy for v in check([str(tmp_path)], "prod", "2.60.0", [])} == {"tpu-image", "ray-token-auth"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: RayCluster\nmetadata: {name: x\n", "not valid YAML at line"),
        ("- just\n- a list\n", "not a Kubernetes object"),
        ("metadata: {name: x}\nspec: {}\n", "no apiVersion/kind"),
        ("apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {}\n", "no metadata.name"),
        ("apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: x}\nspec: {workerGroupSpecs: oops}\n",
         "spec.workerGroupSpecs is str 'oops', expected a list"),
        ("apiVersion: ray.io/v1\nkind: RayService\nmetadata: {name: x}\nspec: {serveConfigV2: {applications: []}}\n",
         "spec.serveConfigV2 is dict"),
    ],
)  # fmt: skip
def test_malformed_manifest_exits_2_with_a_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    code, out, err = run_cli(capsys, str(path))
    assert code == 2 and message in err and str(path) in err and "Traceback" not in out + err


def test_missing_path_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such file or folder" in err


def test_unreadable_bytes_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    code, _, err = run_cli(capsys, str(path))
    assert code == 2 and "binary.yaml" in err


def _rendered_mandatory(run, folder: Path) -> set[tuple[str, str]]:
    objects = [r.manifest() for r in run.kubernetes_objects()]
    (folder / f"{run.stack}.yaml").write_text(yaml.safe_dump_all(objects))
    found = check([str(folder)], "prod", run.config.ray.version, [])
    return {(v.policy, v.resource) for v in found if v.level == "mandatory"}


# staging and prod serve with Ray Serve LLM and have no image digests yet: their rendered
# RayService shows the -tpu base in place of serve-llm. `pulumi up` refuses that stack
# (infra/components/workloads.py), but `kubectl apply` of `tpuray render` would run it, and
# `import ray.serve.llm` fails without vLLM: so plain-manifest check refuses it.
UNBUILT_SERVE_LLM = {
    "dev": set(),
    "staging": {("serve-llm-vllm-image", "RayService/tpuray-staging-serve")},
    "prod": {("serve-llm-vllm-image", "RayService/tpuray-prod-serve")},
}


@pytest.mark.parametrize("stack", STACKS)
def test_stacks_rendered_manifests_pass_check_but_a_base_standing_in_for_serve_llm(stack: str, tmp_path: Path) -> None:
    assert _rendered_mandatory(mocked(stack), tmp_path) == UNBUILT_SERVE_LLM[stack]


def test_prods_rendered_manifests_pass_check_once_its_images_have_digests(tmp_path: Path) -> None:
    doc = yaml.safe_load((stacks_dir() / "Pulumi.prod.yaml").read_text())
    doc["config"]["tpuray:images"]["digests"] = {"ray-tpu": "sha256:" + "1" * 64, "serve-llm": "sha256:" + "2" * 64}
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(doc))
    (tmp_path / "out").mkdir()
    assert _rendered_mandatory(run_stack(str(path)), tmp_path / "out") == set()


# ---------------------------------------------------------------------------- conformance corpus

# Topology-rule results on the official samples: every entry is a real finding, explained in
# docs/policy-findings.md. Every other sample passes every topology rule.
EXPECTED_TOPOLOGY_FINDINGS = {
    "kuberay-historical/ray-cluster-tpu.yaml": {"tpu-num-of-hosts"},
    "kubernetes-engine-samples-unmerged/rayserve/llm/tpu/ray-service.tpu-v5e-multihost.yaml": {"tpu-chips-per-host"},
    "ray-docs/tpu-subslicing.dynamic-slicing-raycluster.yaml": {"tpu-node-selectors"},
}
FRAGMENT = "ray-docs/tpu-subslicing.raycluster-subslice.fragment.yaml"

# Admission rules (what the API server, the KubeRay operator and the TPU webhook refuse) on the
# samples: every entry is explained in docs/policy-findings.md; every other sample passes them all.
ADMISSION_RULES = {
    "crd-schema",
    "crd-validation-rules",
    "kuberay-object-name",
    "kuberay-group-containers",
    "kuberay-worker-replicas",
    "kuberay-group-params",
    "kuberay-token-auth-version",
    "kuberay-autoscaler",
    "rayjob-lifecycle",
    "rayservice-spec",
}
EXPECTED_ADMISSION_FINDINGS = {
    "kubernetes-engine-samples/tpu/dws/rayjob-tpu-v6e-dws.yaml": {"kuberay-object-name", "crd-schema"},
    "kuberay-historical/ray-cluster-tpu.yaml": {"crd-schema"},
}

# What `tpuray check` refuses (exit 1) in the whole corpus, every rule at prod's level and each
# sample under its profile (none carries tpuray's label, so this project's conventions are
# advisory): only what breaks on GKE, each explained with its source in docs/policy-findings.md.
EXPECTED_MANDATORY = {
    ("tpu-num-of-hosts", "kuberay-historical/ray-cluster-tpu.yaml", "RayCluster/raycluster-tpu-kuberay"),
    ("crd-schema", "kuberay-historical/ray-cluster-tpu.yaml", "RayCluster/raycluster-tpu-kuberay"),
    ("tpu-chips-per-host", "kubernetes-engine-samples-unmerged/rayserve/llm/tpu/ray-service.tpu-v5e-multihost.yaml",
     "RayService/vllm-tpu"),
    ("crd-schema", "kubernetes-engine-samples/tpu/dws/rayjob-tpu-v6e-dws.yaml", "RayJob/rayjob-tpu-v6e-dws-${JOB_ID}"),
    ("kuberay-object-name", "kubernetes-engine-samples/tpu/dws/rayjob-tpu-v6e-dws.yaml",
     "RayJob/rayjob-tpu-v6e-dws-${JOB_ID}"),
    ("tpu-node-selectors", "ray-docs/tpu-subslicing.dynamic-slicing-raycluster.yaml", "RayCluster/raycluster-jax-tpu"),
}  # fmt: skip
# The rules that are mandatory somewhere in the corpus with --conventions: the six findings above
# and this project's conventions, which the samples were never written to (PROVENANCE.md, 10).
EXPECTED_MANDATORY_WITH_CONVENTIONS = {
    "tpu-num-of-hosts", "crd-schema", "tpu-chips-per-host", "kuberay-object-name", "tpu-node-selectors",
    "ray-token-auth", "tpu-worker-ray-labels", "tpu-image", "ray-version-pinned", "rayjob-deadlines",
    "serve-tpu-topology-declared", "ray-pods-unprivileged", "compute-class-when-unsatisfiable", "spot-has-fallback",
    # The corpus read as one cluster: GKE's DWS sample declares a LocalQueue in `default`, where the
    # other samples' TPU RayJobs land unlabelled, outside its quota.
    "rayjob-queued",
}  # fmt: skip


def conformance_files() -> list[str]:
    root = shared_path("conformance")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml") if str(p.relative_to(root)) != FRAGMENT)


def conformance_mandatory(conventions: bool = False) -> set[tuple[str, str, str]]:
    root = shared_path("conformance")
    paths = [str(root / sample) for sample in conformance_files()]
    return {
        (v.policy, str(Path(v.file or "").relative_to(root)), v.resource)
        for v in check(paths, "prod", "2.60.0", [], conventions)
        if v.level == "mandatory"
    }


@pytest.mark.parametrize("sample", conformance_files())
def test_conformance_sample_topology_rules_pass_or_match_a_recorded_finding(sample: str) -> None:
    # Only the rules asserted on run (`make mutation` then runs this test for their mutants only).
    violations = check([str(shared_path("conformance", sample))], "prod", "2.60.0", [], rules=TOPOLOGY_RULES)
    assert {v.policy for v in violations} == EXPECTED_TOPOLOGY_FINDINGS.get(sample, set())


@pytest.mark.parametrize("sample", conformance_files())
def test_conformance_sample_admission_rules_pass_or_match_a_recorded_finding(sample: str) -> None:
    violations = check([str(shared_path("conformance", sample))], "prod", "2.60.0", [], rules=ADMISSION_RULES)
    found = {v.policy for v in violations}
    assert found == EXPECTED_ADMISSION_FINDINGS.get(sample, set())


def test_the_corpus_is_refused_only_for_what_breaks_on_gke() -> None:
    assert conformance_mandatory() == EXPECTED_MANDATORY


def test_conventions_hold_the_corpus_to_this_projects_rules_too() -> None:
    found = conformance_mandatory(conventions=True)
    assert {policy for policy, _, _ in found} == EXPECTED_MANDATORY_WITH_CONVENTIONS
    assert EXPECTED_MANDATORY <= found


def test_subslice_fragment_is_rejected_as_is_and_passes_topology_rules_once_wrapped(tmp_path: Path) -> None:
    fragment = shared_path("conformance", FRAGMENT)
    with pytest.raises(Exception, match="no apiVersion/kind"):
        check([str(fragment)], "prod", "2.60.0", [])
    wrapped = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "subslice"},
               "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}},
                        **yaml.safe_load(fragment.read_text())}}  # fmt: skip
    (tmp_path / "wrapped.yaml").write_text(yaml.safe_dump(wrapped))
    assert {v.policy for v in check([str(tmp_path)], "prod", "2.60.0", []) if v.policy in TOPOLOGY_RULES} == set()


def findings_table(section: str) -> set[tuple[str, str, str]]:
    """(rule, sample, resource) of each row of a findings table of docs/policy-findings.md: the
    rows of the section whose heading is `section`, first three cells in backquotes."""
    text = (DOCS / "policy-findings.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in body.splitlines() if line.startswith("| `")]
    return {tuple(cell.strip("| `") for cell in row[:3]) for row in rows}  # type: ignore[misc]


def test_policy_findings_doc_lists_every_remaining_corpus_finding_and_nothing_stale() -> None:
    assert findings_table("Mandatory findings on the conformance corpus") == EXPECTED_MANDATORY


def test_every_recorded_finding_is_explained_in_docs() -> None:
    doc = (DOCS / "policy-findings.md").read_text()
    for sample, rules in [*EXPECTED_TOPOLOGY_FINDINGS.items(), *EXPECTED_ADMISSION_FINDINGS.items()]:
        assert sample in doc, sample
        for rule in rules:
            assert rule in doc
