"""ray_apps/contracts.py: the train flags, their defaults, the Serve import path and the result
prefix are written once, and the rendered job, the emulator and the app all use that one copy."""

from __future__ import annotations

import ast
import shlex
import sys
from pathlib import Path

from ray_apps import contracts
from ray_apps.train import parse_args
from tests.conftest import mocked
from tpuray.config import HungGangConfig, TrainWorkload
from tpuray.local import localrun

CONTRACTS = Path(contracts.__file__)


def test_contracts_imports_only_the_standard_library() -> None:
    modules = set()
    for node in ast.walk(ast.parse(CONTRACTS.read_text())):
        if isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module.split(".")[0])
    assert modules - {"__future__"} <= sys.stdlib_module_names


def test_to_argv_and_parse_are_inverse() -> None:
    args = contracts.TrainArgs(
        data_uri="gs://d/", storage_uri="gs://s", run_name="r", topology="4x4", steps=40, watchdog_factor=2.5
    )
    assert contracts.parse_train_args(args.to_argv()) == args


def test_the_rendered_dev_entrypoint_is_the_contracts_flags_in_order() -> None:
    job = next(r for r in mocked("dev").resources if r.type == "kubernetes:ray.io/v1:RayJob")
    argv = shlex.split(job.inputs["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "ray_apps.train"]
    assert argv[3::2] == [
        "--accelerator-type", "--topology", "--hosts-per-slice", "--chips-per-host", "--slices", "--steps",
        "--checkpoint-every", "--data-uri", "--storage-uri", "--run-name", "--max-failures", "--watchdog-factor",
        "--watchdog-floor-s", "--device",
    ]  # fmt: skip
    parsed = parse_args(argv[3:])
    assert (parsed.accelerator_type, parsed.topology, parsed.hosts_per_slice, parsed.chips_per_host) == (
        "TPU-V6E",
        "4x4",
        4,
        4,
    )
    assert (parsed.steps, parsed.watchdog_factor, parsed.watchdog_floor_s, parsed.device) == (200, 10.0, 900.0, "tpu")


def test_the_stack_configs_train_defaults_are_the_jobs() -> None:
    train = TrainWorkload(pool="p", dataUri="gs://d/", storageUri="gs://s")
    assert (train.slices, train.steps, train.checkpoint_every, train.max_failures) == (1, 200, 20, 3)
    hung = HungGangConfig()
    assert (hung.step_factor, hung.floor_seconds) == (10.0, 900)
    assert contracts.parse_train_args(["--data-uri=d", "--storage-uri=s", "--run-name=r"]).steps == 200


def test_the_emulator_rewrites_the_contracts_shape_flags() -> None:
    assert localrun.SHAPE_FLAGS == ("--accelerator-type", "--topology", "--hosts-per-slice", "--chips-per-host")
    assert localrun.RESULT_PREFIX == contracts.RESULT_PREFIX == "TPURAY_RESULT "


def test_the_rayservice_runs_the_contracts_serve_app() -> None:
    service = next(r for r in mocked("dev").resources if r.type == "kubernetes:ray.io/v1:RayService")
    assert "import_path: ray_apps.serve:build_app" in service.inputs["spec"]["serveConfigV2"]
    assert contracts.SERVE_IMPORT_PATH == "ray_apps.serve:build_app"


def test_the_last_summary_is_read_even_behind_another_processs_log_text() -> None:
    output = 'TPURAY_RESULT {"final_step": 2}\n(raylet) W node_manager.cc: exit TPURAY_RESULT {"final_step": 4}\ndone\n'
    assert contracts.last_result(output) == {"final_step": 4}


def test_output_without_a_summary_has_no_result() -> None:
    assert contracts.last_result("Traceback (most recent call last):\nValueError: bad\n") is None


def test_a_run_on_a_shape_takes_its_four_shape_flags_and_keeps_the_other_fields() -> None:
    args = contracts.TrainArgs.on_shape(
        contracts.ShapeStep("TPU-V4", "2x2x2", 2, 4), data_uri="d", storage_uri="s", run_name="r", steps=8
    )
    assert (args.accelerator_type, args.topology, args.hosts_per_slice, args.chips_per_host) == (
        "TPU-V4",
        "2x2x2",
        2,
        4,
    )
    assert (args.data_uri, args.storage_uri, args.run_name, args.steps) == ("d", "s", "r", 8)
    assert args.primary_shape() == contracts.ShapeStep("TPU-V4", "2x2x2", 2, 4)
