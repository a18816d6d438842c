"""Bad stack config: one clear line per problem (key, bad value, valid choices), exit 2, nothing declared."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpuray.cli import main
from tpuray.config import ConfigError, read_stack_file, stacks_dir
from tpuray.config.checks import load_stack, parse_stack_config

DEV = yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text())


def write_stack(tmp_path: Path, edit) -> Path:
    doc: dict[str, Any] = copy.deepcopy(DEV)
    edit(doc["config"])
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def pool(config: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return config["tpuray:slicePools"][i]


def errors_of(tmp_path: Path, edit) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_stack(str(write_stack(tmp_path, edit)))
    return info.value.lines


def test_every_stack_in_stacks_is_valid():
    for path in sorted(stacks_dir().glob("Pulumi.*.yaml")):
        assert load_stack(str(path)).slice_pools


def test_unknown_generation_names_key_value_and_valid_generations(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(generation="v6"))
    assert lines == ["tpuray:slicePools[0].generation: 'v6' is not a TPU generation; valid: v4, v5e, v5p, v6e, tpu7x"]


def test_topology_not_valid_for_the_generation_lists_its_topologies(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(topology="4x4x4"))
    assert lines == [
        "tpuray:slicePools[0].topology: '4x4x4' is not a valid v6e topology; "
        "valid: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"
    ]


def test_machine_type_that_does_not_fit_the_topology_lists_the_ones_that_do(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(machineType="ct6e-standard-8t"))
    assert lines == [
        "tpuray:slicePools[0].machineType: 'ct6e-standard-8t' does not fit v6e 4x4; valid: ct6e-standard-4t"
    ]


def test_both_machine_types_fit_v6e_2x4_for_the_checkpoint_server(tmp_path):
    # Pool 1 serves checkpoints; the train pool (0) may not be the 2-host 2x4 (test_config_checks).
    for machine in ("ct6e-standard-8t", "ct6e-standard-4t"):
        path = write_stack(tmp_path, lambda c, m=machine: pool(c, 1).update(topology="2x4", machineType=m))
        assert load_stack(str(path)).slice_pools[1].shape.machine_type == machine


def test_slices_below_one_is_rejected(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(slices=0))
    assert lines == ["tpuray:slicePools[0].slices: 0 is invalid; a pool needs at least 1 slice"]


def test_empty_capacity_chain_lists_the_tier_kinds(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(capacity=[]))
    assert lines == [
        "tpuray:slicePools[0].capacity: [] is empty; list at least one tier, in priority order, "
        "from spot, reservation, onDemand, flexStart"
    ]


def test_reservation_without_a_name_says_a_name_is_needed(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(capacity=[{"reservation": {}}]))
    assert len(lines) == 1
    assert lines[0].startswith("tpuray:slicePools[0].capacity[0].reservation.name: missing;")
    assert "needs the name of a Compute Engine reservation" in lines[0]


def test_reservation_with_an_empty_name_says_a_name_is_needed(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(capacity=[{"reservation": ""}]))
    assert lines == [
        "tpuray:slicePools[0].capacity[0].reservation.name: '' is empty; a reservation tier needs the name of a "
        "Compute Engine reservation, e.g. {reservation: {name: prod-v6e-res}}"
    ]


def test_flex_start_with_spot_in_one_tier_is_rejected(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(capacity=[{"spot": True, "flexStart": True}]))
    assert lines == [
        "tpuray:slicePools[0].capacity[0]: {spot: true, flexStart: true} is invalid; flex-start cannot be combined "
        "with spot in one tier (GKE rejects it): make them separate tiers"
    ]


def test_unknown_key_is_named(tmp_path):
    lines = errors_of(tmp_path, lambda c: pool(c).update(topolgy="4x4"))
    assert any(line.startswith("tpuray:slicePools[0].topolgy: unknown key") for line in lines)


def test_more_workload_slices_than_the_pool_has_is_an_early_error(tmp_path):
    lines = errors_of(tmp_path, lambda c: c["tpuray:workloads"].update(interactive={"pool": "v6e-dev"}))
    assert lines == [
        "tpuray:workloads.interactive.slices: workloads on pool 'v6e-dev' need 2 slices "
        "(tpuray:workloads.interactive.slices, tpuray:workloads.train.slices) but the pool has 1; "
        "raise slicePools 'v6e-dev'.slices or move a workload to another pool"
    ]


def test_several_problems_give_one_line_each(tmp_path):
    def edit(c):
        pool(c).update(generation="v9", slices=0, capacity=[])

    assert len(errors_of(tmp_path, edit)) == 3


def test_cli_prints_one_line_exits_2_and_declares_nothing(tmp_path):
    path = write_stack(tmp_path, lambda c: pool(c).update(topology="4x5"))
    result = subprocess.run(
        [sys.executable, "-m", "tpuray.cli", "preview", str(path), "--json"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert result.stdout == ""  # no resources: validation runs before the program
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: tpuray:slicePools[0].topology: '4x5' is not a valid v6e topology; "
        "valid: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"
    ]


def test_unknown_stack_name_lists_the_stacks(capsys):
    assert main(["preview", "nope"]) == 2
    assert "stack 'nope': no stacks/Pulumi.nope.yaml; valid: dev, prod, staging" in capsys.readouterr().err


def test_pulumi_program_turns_bad_config_into_a_run_error_before_declaring_anything(tmp_path):
    import pulumi

    raw = read_stack_file(write_stack(tmp_path, lambda c: pool(c).update(generation="v6")))
    with pytest.raises(ConfigError):
        parse_stack_config(raw, "bad")
    from tpuray.preview import mockrun

    run = mockrun.StackRun(stack="bad", config=load_stack("dev"))
    mocks = mockrun._RecordingMocks("acme", run)
    pulumi.runtime.set_all_config(
        {f"tpuray:{k}": v if isinstance(v, str) else __import__("json").dumps(v) for k, v in raw.items()}
    )
    mockrun.pulumi_settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project="tpuray", stack="bad", preview=True)
    from infra.program import main as program_main

    with pytest.raises(pulumi.RunError, match="tpuray:slicePools\\[0\\].generation: 'v6'"):
        pulumi.runtime.test(program_main)()
    assert run.resources == []
