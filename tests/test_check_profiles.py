"""`tpuray check` under the two rule profiles (docs/policies.md, "Two profiles"): a rule that
breaks on GKE (`gke`) is enforced on every manifest at its configured level; this project's
conventions (`project`) are enforced on the objects tpuray renders (labelled
app.kubernetes.io/managed-by: tpuray) and advisory on any other manifest, unless --conventions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tpuray.cli import main
from tpuray.policies import RULES, RULES_BY_NAME
from tpuray.policies.core import MANDATORY, Rule
from tpuray.policies.evaluate import check_manifests as check
from tpuray.policies.evaluate import manifest_level

BAD = Path(__file__).resolve().parent / "fixtures" / "policies" / "bad"


def foreign(tmp_path: Path, fixture: str, labels: dict[str, str] | None = None) -> str:
    """A bad fixture as a manifest tpuray did not render: the same object, another (or no) label."""
    obj = yaml.safe_load((BAD / fixture).read_text())
    obj["metadata"].pop("labels")
    if labels is not None:
        obj["metadata"]["labels"] = labels
    path = tmp_path / fixture
    path.write_text(yaml.safe_dump(obj))
    return str(path)


def levels(capsys: pytest.CaptureFixture[str], path: str, *argv: str) -> tuple[int, list[tuple[str, str]]]:
    """`tpuray check PATH --json ...` through the CLI: its exit code and (policy, level) of each violation."""
    code = main(["check", path, "--json", *argv])
    return code, [(v["policy"], v["level"]) for v in json.loads(capsys.readouterr().out)["violations"]]


def test_a_foreign_manifests_project_finding_is_advisory_and_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert levels(capsys, foreign(tmp_path, "ray-token-auth.yaml")) == (0, [("ray-token-auth", "advisory")])


def test_conventions_make_a_foreign_manifests_project_finding_mandatory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = foreign(tmp_path, "ray-token-auth.yaml")
    assert levels(capsys, path, "--conventions") == (1, [("ray-token-auth", "mandatory")])


def test_a_manifest_labelled_as_rendered_by_tpuray_gets_the_project_finding_mandatory(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (BAD / "ray-token-auth.yaml").read_text()
    assert "    app.kubernetes.io/managed-by: tpuray\n" in text
    assert levels(capsys, str(BAD / "ray-token-auth.yaml")) == (1, [("ray-token-auth", "mandatory")])


def test_a_manifest_another_tool_manages_is_foreign(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = foreign(tmp_path, "ray-token-auth.yaml", {"app.kubernetes.io/managed-by": "Helm"})
    assert levels(capsys, path) == (0, [("ray-token-auth", "advisory")])


def test_a_foreign_manifests_gke_finding_stays_mandatory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert levels(capsys, foreign(tmp_path, "tpu-num-of-hosts.yaml")) == (1, [("tpu-num-of-hosts", "mandatory")])


def test_a_foreign_manifest_with_both_kinds_is_refused_for_the_gke_one_only(capsys: pytest.CaptureFixture[str]) -> None:
    # ray-version-consistent's fixture is foreign: its worker image breaks both the pin and the head's version.
    code, found = levels(capsys, str(BAD / "ray-version-consistent.yaml"))
    assert (code, found) == (1, [("ray-version-pinned", "advisory"), ("ray-version-consistent", "mandatory")])


def test_a_stack_rules_finding_on_a_foreign_compute_class_is_advisory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert levels(capsys, foreign(tmp_path, "spot-has-fallback.yaml")) == (0, [("spot-has-fallback", "advisory")])


def test_a_project_rule_advisory_by_config_stays_advisory_on_a_tpuray_manifest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # policies/policy-config.dev.json makes rayjob-deadlines advisory; the label does not raise it.
    assert levels(capsys, str(BAD / "rayjob-deadlines.yaml"), "--env", "dev") == (0, [("rayjob-deadlines", "advisory")])


def test_a_finding_that_blames_no_manifest_is_judged_as_foreign() -> None:
    assert manifest_level("spot-has-fallback", None, "mandatory", False) == "advisory"
    assert manifest_level("spot-has-fallback", None, "mandatory", True) == "mandatory"
    assert manifest_level("crd-schema", None, "mandatory", False) == "mandatory"


def test_check_manifests_takes_the_conventions_switch(tmp_path: Path) -> None:
    path = foreign(tmp_path, "tpu-image.yaml")
    assert [v.level for v in check([path], "prod", "2.60.0", [])] == ["advisory"]
    assert [v.level for v in check([path], "prod", "2.60.0", [], conventions=True)] == ["mandatory"]


# ---------------------------------------------------------------------------- the registry


def test_every_rule_names_one_of_the_two_profiles() -> None:
    assert {rule.profile for rule in RULES} == {"gke", "project"}


def test_rules_that_break_on_gke_and_conventions_have_the_profile_of_what_they_catch() -> None:
    assert {name: RULES_BY_NAME[name].profile for name in (
        "tpu-num-of-hosts", "tpu-node-selectors", "tpu-chips-per-host", "tpu-slice-ray-reads-as-one-vm",
        "tpu-worker-ray-owned-labels", "ray-version-consistent", "serve-tpu-topology", "crd-schema",
        "kuberay-object-name", "hf-token-mounted", "tpu-worker-ray-labels", "ray-version-pinned", "tpu-image",
        "ray-token-auth", "rayjob-deadlines", "serve-tpu-topology-declared", "ray-pods-unprivileged",
        "spot-has-fallback", "compute-class-when-unsatisfiable",
    )} == {
        "tpu-num-of-hosts": "gke",
        "tpu-node-selectors": "gke",
        "tpu-chips-per-host": "gke",
        "tpu-slice-ray-reads-as-one-vm": "gke",
        "tpu-worker-ray-owned-labels": "gke",
        "ray-version-consistent": "gke",
        "serve-tpu-topology": "gke",
        "crd-schema": "gke",
        "kuberay-object-name": "gke",
        "hf-token-mounted": "gke",
        "tpu-worker-ray-labels": "project",
        "ray-version-pinned": "project",
        "tpu-image": "project",
        "ray-token-auth": "project",
        "rayjob-deadlines": "project",
        "serve-tpu-topology-declared": "project",
        "ray-pods-unprivileged": "project",
        "spot-has-fallback": "project",
        "compute-class-when-unsatisfiable": "project",
    }  # fmt: skip


def test_a_rule_with_an_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        Rule("x-rule", "A rule.", MANDATORY, profile="cluster")  # type: ignore[arg-type]
    assert str(info.value) == "rule x-rule: profile is 'cluster'; valid: gke, project"
