"""`tpuray bundle`: a reproducible working_dir zip that Ray's own unpacking turns into an importable ray_apps."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import yaml
from ray._private.runtime_env.packaging import unzip_package

from tests.conftest import REPO, mocked
from tpuray import bundle
from tpuray.cli import main


def ray_unpacks(zip_path: Path, target: Path) -> Path:
    """What Ray does with a remote working_dir zip (packaging.download_and_unpack_package)."""
    unzip_package(str(zip_path), str(target), remove_top_level_directory=True, unlink_zip=False)
    return target


def test_ray_unpacks_the_bundle_into_a_directory_that_holds_ray_apps(tmp_path: Path) -> None:
    path = bundle.build().write(tmp_path / "dist")
    unpacked = ray_unpacks(path, tmp_path / "working_dir")
    assert (unpacked / "ray_apps" / "__init__.py").is_file() and (unpacked / "ray_apps" / "train.py").is_file()


def test_ray_unpacks_a_zip_of_ray_apps_itself_without_ray_apps(tmp_path: Path) -> None:
    path = bundle.build(wrapper=bundle.WRONG_LAYOUT_ROOT).write(tmp_path / "dist")
    unpacked = ray_unpacks(path, tmp_path / "working_dir")
    assert not (unpacked / "ray_apps").exists() and (unpacked / "train.py").is_file()


def test_two_builds_of_the_same_sources_are_the_same_bytes(tmp_path: Path) -> None:
    first, second = bundle.build(), bundle.build()
    assert first.data == second.data and first.name == second.name


def test_the_zip_has_fixed_timestamps_sorted_entries_and_no_bytecode(tmp_path: Path) -> None:
    path = bundle.build().write(tmp_path)
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names) and names[0] == "tpuray-apps/ray_apps/__init__.py"
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]


def test_the_name_is_the_content_hash() -> None:
    built = bundle.build()
    assert re.fullmatch(r"tpuray-apps-[0-9a-f]{16}\.zip", built.name) and built.name[12:28] == built.sha256[:16]


def test_a_source_change_changes_the_bundle_name(tmp_path: Path) -> None:
    copy = tmp_path / "ray_apps"
    shutil.copytree(REPO / "ray_apps", copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = bundle.build(copy)
    (copy / "model.py").write_text((copy / "model.py").read_text() + "\n# a change\n")
    after = bundle.build(copy)
    assert after.name != before.name and after.sources_sha256 != before.sources_sha256


def test_the_manifest_in_the_bundle_names_its_sources_digest(tmp_path: Path) -> None:
    built = bundle.build()
    with zipfile.ZipFile(built.write(tmp_path)) as archive:
        manifest = json.loads(archive.read("tpuray-apps/ray_apps/bundle.json"))
    assert manifest == {"sources_sha256": built.sources_sha256}


def test_rendered_job_and_service_reference_the_bundle_tpuray_bundle_writes(tmp_path, capsys) -> None:
    assert main(["bundle", "--out", str(tmp_path), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert Path(written["path"]).read_bytes() == bundle.build().data
    uri = f"gs://acme-ml-dev-bundles/ray-apps/{written['name']}"
    run = mocked("dev")
    job = next(r.manifest() for r in run.kubernetes_objects() if r.inputs.get("kind") == "RayJob")
    service = next(r.manifest() for r in run.kubernetes_objects() if r.inputs.get("kind") == "RayService")
    assert yaml.safe_load(job["spec"]["runtimeEnvYAML"]) == {"working_dir": uri}
    (app,) = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"]
    assert app["runtime_env"] == {"working_dir": uri}
