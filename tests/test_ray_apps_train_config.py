"""How ray_apps.train maps its CLI to Ray Train configs (no cluster started)."""

from __future__ import annotations

import pytest

from ray_apps import checkpoints, model, train
from ray_apps.features import FeatureStats

TPU_ARGV = [
    "--accelerator-type", "TPU-V6E", "--topology", "4x4", "--hosts-per-slice", "4", "--chips-per-host", "4",
    "--slices", "1", "--steps", "200", "--checkpoint-every", "20", "--data-uri", "gs://b/data",
    "--storage-uri", "gs://b/runs", "--run-name", "r", "--max-failures", "3",
]  # fmt: skip


def _args(*extra: str) -> train.TrainArgs:
    return train.parse_args([*TPU_ARGV, *extra])


def test_tpu_device_requests_one_worker_per_host_with_its_chips() -> None:
    sc = train.build_scaling_config(_args("--device", "tpu"))
    assert (sc.use_tpu, sc.num_workers, sc.topology, sc.accelerator_type) == (True, 4, "4x4", "TPU-V6E")
    assert sc.resources_per_worker == {"TPU": 4}


def test_two_slices_double_the_workers() -> None:
    assert train.build_scaling_config(_args("--slices", "2")).num_workers == 8


def test_emulated_device_keeps_the_tpu_request_but_runs_jax_on_cpu_with_gloo() -> None:
    args = _args("--device", "emulated")
    assert train.build_scaling_config(args).use_tpu is True
    env = train.build_run_config(args).worker_runtime_env["env_vars"]
    assert env == {"JAX_PLATFORMS": "cpu", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo"}


def test_tpu_device_leaves_jax_platforms_to_the_jax_backend() -> None:
    assert train.worker_env("tpu") == {}


def test_cpu_device_asks_for_no_tpu() -> None:
    sc = train.build_scaling_config(_args("--device", "cpu"))
    assert sc.use_tpu is False and sc.num_workers == 4 and sc.resources_per_worker == {"CPU": 1}


def test_run_config_names_the_run_and_allows_restarts() -> None:
    rc = train.build_run_config(_args())
    assert (rc.name, rc.storage_path, rc.failure_config.max_failures) == ("r", "gs://b/runs", 3)


def test_a_local_storage_path_is_made_absolute() -> None:
    assert train.storage_path("runs").startswith("/")


def test_tpu_device_without_topology_is_rejected() -> None:
    args = train.TrainArgs(
        data_uri="d", storage_uri="s", run_name="r", device="tpu", accelerator_type="TPU-V6E", chips_per_host=4
    )
    with pytest.raises(ValueError, match="--topology"):
        args.validate()


def test_tpu_batch_must_split_over_the_chips_of_a_host() -> None:
    with pytest.raises(ValueError, match="multiple of --chips-per-host"):
        _args("--batch-size", "30").validate()


def test_cli_returns_2_with_a_message_on_invalid_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert train.main(["--device", "tpu", "--data-uri", "d", "--storage-uri", "s", "--run-name", "r"]) == 2
    assert "needs --accelerator-type" in capsys.readouterr().err


def test_loop_config_carries_the_fault_injection_marker_under_the_run_dir() -> None:
    cfg = train.loop_config(_args("--fail-once-at-step", "13"), {"x": 1})
    assert cfg["fail_once_at_step"] == 13 and cfg["fail_once_marker"] == "gs://b/runs/r/.fail_once_at_step_13"


def test_latest_checkpoint_is_the_highest_complete_step(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = model.ModelConfig()
    stats = FeatureStats((0.0,) * 5, (1.0,) * 5, 0.0, 1.0)
    for step in (5, 10):
        state = model.TrainingState(step, model.init_params(cfg), None, cfg, stats)
        model.save_checkpoint(tmp_path / checkpoints.checkpoint_dir_name(step), state)
    (tmp_path / checkpoints.checkpoint_dir_name(15)).mkdir()  # interrupted upload: no files
    found = checkpoints.find_latest(str(tmp_path))
    assert found is not None and found[1] == 10 and found[0].endswith("checkpoint_step_00000010")
    assert checkpoints.find_latest(found[0]) == (found[0], 10)


def test_no_checkpoint_yet_means_a_fresh_start(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert checkpoints.find_latest(str(tmp_path / "missing")) is None


def test_a_two_host_v6e_2x4_slice_is_refused_before_ray_is_asked_for_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ray's SlicePlacementGroup reads v6e 2x4 as one 8-chip VM: a gang of the 2-host slice
    (ct6e-standard-4t) would get no slice-name label and could span two slices."""
    argv = [a for a in TPU_ARGV]
    argv[argv.index("4x4")] = "2x4"
    argv[argv.index("--hosts-per-slice") + 1] = "2"
    assert train.main([*argv, "--device", "emulated", "--address", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        "error: ValueError: TPU-V6E 2x4 (2 hosts x 4 chips): Ray's SlicePlacementGroup reserves 2x4 as one 8-chip "
        "VM, so the 2 workers of the gang could land on different slices; use the one-VM machine type of 2x4 or a "
        "topology of more than 8 chips"
    )


def test_a_fallback_shape_ray_reads_as_one_vm_is_refused_too() -> None:
    args = _args("--device", "tpu", "--fallback-shapes", "TPU-V5LITEPOD:2x4:2:4")
    with pytest.raises(ValueError, match=r"^TPU-V5LITEPOD 2x4 \(2 hosts x 4 chips\): Ray's SlicePlacementGroup"):
        train.run(args)


def test_the_one_vm_2x4_and_a_4x4_slice_pass_the_check() -> None:
    from ray_apps.contracts import ShapeStep
    from ray_apps.train_slices import one_vm_problems

    assert one_vm_problems([ShapeStep("TPU-V6E", "2x4", 1, 8), ShapeStep("TPU-V6E", "4x4", 4, 4)]) == []
