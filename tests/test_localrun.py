"""How `tpuray local run` adapts the rendered RayJob and RayService to the emulator: visibly, minimally."""

from __future__ import annotations

import shlex

import yaml

from tests.conftest import mocked
from tpuray import catalog
from tpuray.local.localrun import gs_uris, job_for_emulator, rendered, serve_config_for_emulator


def argv_of(entrypoint: str) -> dict[str, str]:
    argv = shlex.split(entrypoint)
    return dict(zip(argv[3::2], argv[4::2], strict=False))


def test_the_buckets_to_create_are_the_gs_uris_of_the_arguments():
    assert gs_uris(["--data-uri", "gs://acme-data/regression/", "--steps", 20, "/data/x"]) == [
        "gs://acme-data/regression/"
    ]


def test_the_job_keeps_the_rendered_entrypoint_except_the_device_data_and_checkpoints_included():
    rayjob = rendered(mocked("dev"), "RayJob")
    job = job_for_emulator(rayjob)
    original, local = argv_of(rayjob["spec"]["entrypoint"]), argv_of(job.entrypoint)
    assert local["--device"] == "emulated" and original["--device"] == "tpu"
    assert local["--data-uri"] == original["--data-uri"] == "gs://acme-ml-dev-data/regression/"
    assert local["--storage-uri"] == original["--storage-uri"] == "gs://acme-ml-dev-ray/checkpoints"
    unchanged = set(original) - {"--device"}
    assert {k: local[k] for k in unchanged} == {k: original[k] for k in unchanged}


def test_every_rewrite_is_listed_with_its_reason():
    job = job_for_emulator(rendered(mocked("dev"), "RayJob"))
    assert job.rewrites[0] == "--device: tpu -> emulated (JAX on CPU, gloo collectives)"
    assert job.rewrites[1].startswith("image: rayproject/ray:2.60.0-py312-tpu -> ")
    assert len(job.rewrites) == 2


def test_the_runtime_env_is_kept_as_rendered_bundle_uri_included():
    rayjob = rendered(mocked("dev"), "RayJob")
    job = job_for_emulator(rayjob)
    assert job.runtime_env == yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])
    assert job.runtime_env["working_dir"].startswith("gs://acme-ml-dev-bundles/ray-apps/tpuray-apps-")
    assert not any("working_dir" in r or "pip" in r for r in job.rewrites)


def test_a_reduced_emulated_slice_rewrites_the_topology_arguments_from_the_catalog():
    rayjob = rendered(mocked("dev"), "RayJob")
    smaller = catalog.lookup("v5p", "2x2x2")
    local = argv_of(job_for_emulator(rayjob, smaller).entrypoint)
    assert (local["--topology"], local["--hosts-per-slice"], local["--chips-per-host"]) == ("2x2x2", "2", "4")


def test_serve_config_stays_on_loopback_and_reads_the_checkpoint_from_its_gs_uri():
    rayservice = rendered(mocked("dev"), "RayService")
    config, rewrites = serve_config_for_emulator(rayservice)
    assert config["http_options"] == {"host": "127.0.0.1", "port": 8000}
    (app,) = config["applications"]
    original = yaml.safe_load(rayservice["spec"]["serveConfigV2"])["applications"][0]
    assert app["import_path"] == original["import_path"]
    assert (
        app["args"]["checkpoint_uri"]
        == original["args"]["checkpoint_uri"]
        == "gs://acme-ml-dev-ray/checkpoints/tpuray-dev-train"
    )
    assert app["args"]["label_selector"] == original["args"]["label_selector"]
    assert app["runtime_env"] == original["runtime_env"]  # the bundle's gs:// URI, fetched by Ray
    assert any("loopback" in r for r in rewrites)
