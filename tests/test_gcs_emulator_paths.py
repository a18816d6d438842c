"""Data and checkpoints at gs:// URIs on the GCS emulator, through the apps' one filesystem
function (ray_apps.runtime.filesystem), as the emulated hosts reach them.

These run the real gcp-storage-emulator process (about a second to start) and pyarrow's
GcsFileSystem against it: what a pod's Ray Data and Ray Train do against GCS.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ray_apps import checkpoints, data
from ray_apps.contracts import STORAGE_EMULATOR_ENV
from ray_apps.model import META_FILE, PARAMS_FILE
from tpuray.local import storage_emulator
from tpuray.local.emulator import kill_processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import psutil

    proc, host = storage_emulator.start(tmp_path_factory.mktemp("gcs"), _free_port())
    try:
        storage_emulator.create_buckets(host, ["gs://acme-ml-dev-ray/", "gs://acme-ml-dev-data/"])
        yield host
    finally:
        assert kill_processes([psutil.Process(proc.pid)]) == []


@pytest.fixture
def on_emulator(gcs: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(STORAGE_EMULATOR_ENV, gcs)
    return gcs


def _upload(host: str, uri: str, body: bytes) -> None:
    storage_emulator.upload(host, uri, body)


def test_the_latest_checkpoint_is_found_though_its_folder_has_no_object_of_its_own(on_emulator: str) -> None:
    # What Ray Train's upload leaves on GCS: the checkpoint's files, no "checkpoint_step_N/" object.
    run = "gs://acme-ml-dev-ray/checkpoints/tpuray-dev-train"
    for step in (3, 6):
        folder = f"{run}/checkpoint_step_{step:08d}"
        _upload(on_emulator, f"{folder}/{META_FILE}", json.dumps({"step": step}).encode())
        _upload(on_emulator, f"{folder}/{PARAMS_FILE}", b"npz")
    _upload(on_emulator, f"{run}/checkpoint_step_00000009/{META_FILE}", b'{"step": 9}')  # params not there yet
    assert checkpoints.find_latest(run) == (
        "gs://acme-ml-dev-ray/checkpoints/tpuray-dev-train/checkpoint_step_00000006",
        6,
    )


def test_no_checkpoint_yet_is_none(on_emulator: str) -> None:
    assert checkpoints.find_latest("gs://acme-ml-dev-ray/checkpoints/never-trained") is None


def test_synthetic_data_written_to_gs_is_listed_and_sized_from_the_bucket(on_emulator: str) -> None:
    written = data.write_synthetic("gs://acme-ml-dev-data/regression/", rows=64, files=2)
    assert written == [
        "acme-ml-dev-data/regression/part-00000.parquet",
        "acme-ml-dev-data/regression/part-00001.parquet",
    ]
    assert data.list_files("gs://acme-ml-dev-data/regression/") == written
    assert data.detect_format("gs://acme-ml-dev-data/regression/") == "parquet"
    assert data.input_bytes("gs://acme-ml-dev-data/regression/") > 0


def test_without_the_emulator_variable_gs_is_left_to_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray_apps.runtime import custom_filesystem

    monkeypatch.delenv(STORAGE_EMULATOR_ENV, raising=False)
    assert custom_filesystem("gs://acme-ml-dev-ray/checkpoints") == (None, "gs://acme-ml-dev-ray/checkpoints")


def test_with_the_emulator_variable_ray_gets_an_anonymous_filesystem_on_it(on_emulator: str) -> None:
    import pyarrow.fs as pafs

    from ray_apps.runtime import custom_filesystem

    fs, path = custom_filesystem("gs://acme-ml-dev-ray/checkpoints/")
    assert isinstance(fs, pafs.GcsFileSystem)
    assert path == "acme-ml-dev-ray/checkpoints"


def test_local_paths_are_never_sent_to_the_emulator(on_emulator: str, tmp_path: Path) -> None:
    from ray_apps.runtime import custom_filesystem

    assert custom_filesystem(str(tmp_path)) == (None, str(tmp_path))
