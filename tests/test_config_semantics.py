"""Config checks that need more than one edit: a boundary value that passes, errors that add
up rather than replace each other, and each workload checked on its own. One row per single
check is in test_config_checks.py (the same dev-stack edits)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.test_config_checks import DEV, pool, rename
from tpuray.config import ConfigError, parse_stack_config

V6E_TOPOLOGIES = "1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"


def errors(edit: Any) -> list[str]:
    raw = copy.deepcopy(DEV)
    edit(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, "dev")
    return info.value.lines


def test_a_pool_name_of_exactly_30_characters_is_valid() -> None:
    raw = copy.deepcopy(DEV)
    rename(raw, 1, "v6e-serve-dev-" + "x" * 16)
    assert parse_stack_config(raw, "dev").slice_pools[1].name == "v6e-serve-dev-xxxxxxxxxxxxxxxx"


def test_a_fallback_error_adds_to_the_pools_own_errors() -> None:
    def edit(c: dict[str, Any]) -> None:
        pool(c).update(slices=0, fallback=[{"generation": "v6e", "topology": "4x5"}])

    assert errors(edit) == [
        "tpuray:slicePools[0].slices: 0 is invalid; a pool needs at least 1 slice",
        f"tpuray:slicePools[0].fallback[0].topology: '4x5' is not a valid v6e topology; valid: {V6E_TOPOLOGIES}",
    ]


def test_without_a_train_workload_the_serve_pool_is_still_checked() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["workloads"].pop("train")
        c["workloads"]["serve"]["pool"] = "nope"

    assert errors(edit) == [
        "tpuray:workloads.serve.pool: 'nope' is not a slice pool of this stack; valid: v6e-dev, v6e-serve-dev"
    ]


def test_every_workload_on_an_unknown_pool_is_named() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["workloads"]["train"]["pool"] = "nope"
        c["workloads"]["serve"]["pool"] = "gone"

    assert errors(edit) == [
        "tpuray:workloads.train.pool: 'nope' is not a slice pool of this stack; valid: v6e-dev, v6e-serve-dev",
        "tpuray:workloads.serve.pool: 'gone' is not a slice pool of this stack; valid: v6e-dev, v6e-serve-dev",
    ]


def test_a_machine_type_that_fits_neither_form_of_2x4_names_both() -> None:
    def edit(c: dict[str, Any]) -> None:
        pool(c, 1).update(topology="2x4", machineType="ct6e-standard-1t")

    assert errors(edit) == [
        "tpuray:slicePools[1].machineType: 'ct6e-standard-1t' does not fit v6e 2x4; "
        "valid: ct6e-standard-8t, ct6e-standard-4t"
    ]
