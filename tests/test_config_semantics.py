"""Config checks that need more than one edit: a boundary value that passes, errors that add
up rather than replace each other, and each workload checked on its own. One row per single
check is in test_config_checks.py (the same dev-stack edits)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.test_config_checks import DEV, pool, rename
from tpuray.config import (
    ConfigError,
    pulumi_config_map,
    read_stack_file,
    resolve_stack_file,
    stack_files,
    stack_name,
    stack_names,
)
from tpuray.config.checks import parse_stack_config

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


# ---------------------------------------------------------------------------- stack names, files and defaults


def test_a_stack_without_an_environment_takes_its_stacks_name() -> None:
    raw = copy.deepcopy(DEV)
    raw.pop("environment")
    assert parse_stack_config(copy.deepcopy(raw), "staging").environment == "staging"
    assert parse_stack_config(copy.deepcopy(raw), "prod").environment == "prod"
    assert parse_stack_config(copy.deepcopy(raw), "dev").environment == "dev"


def test_a_stack_of_another_name_without_an_environment_is_dev() -> None:
    raw = copy.deepcopy(DEV)
    raw.pop("environment")
    assert parse_stack_config(raw, "team-a").environment == "dev"


def test_a_stack_is_named_by_its_name_or_its_files_name() -> None:
    assert stack_name("dev") == "dev"
    assert stack_name("stacks/Pulumi.prod.yaml") == "prod"
    assert stack_name("stacks/Pulumi.qa.yml") == "qa"


def test_a_stack_file_not_named_pulumi_stack_yaml_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        stack_name("stacks/prod.yaml")
    assert info.value.lines == ["stack file 'stacks/prod.yaml': name must be Pulumi.<stack>.yaml"]


def test_a_missing_yml_stack_file_is_looked_for_as_a_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_stack_file(str(tmp_path / "Pulumi.qa.yml"))
    assert info.value.lines == [f"stack file '{tmp_path / 'Pulumi.qa.yml'}': not found"]


def test_the_stacks_of_a_folder_are_its_pulumi_files_in_name_order(tmp_path: Path) -> None:
    for name in ("Pulumi.prod.yaml", "Pulumi.dev.yaml", "README.md"):
        (tmp_path / name).write_text("config: {}\n")
    assert stack_files(tmp_path) == [tmp_path / "Pulumi.dev.yaml", tmp_path / "Pulumi.prod.yaml"]
    assert stack_names(tmp_path) == ["dev", "prod"]


def test_the_config_map_is_namespaced_with_json_for_anything_but_strings() -> None:
    assert pulumi_config_map({"environment": "dev", "gcp": {"zones": ["us-east5-b"]}, "n": 4}) == {
        "tpuray:environment": "dev",
        "tpuray:gcp": '{"zones": ["us-east5-b"]}',
        "tpuray:n": "4",
    }


def test_a_price_below_one_dollar_is_accepted() -> None:
    raw = copy.deepcopy(DEV)
    raw["prices"] = {"v6e": {"spot": 0.5}}
    assert parse_stack_config(raw, "dev").prices == {"v6e": {"spot": 0.5}}


def test_a_price_of_zero_is_accepted() -> None:
    raw = copy.deepcopy(DEV)
    raw["prices"] = {"v6e": {"spot": 0}}
    assert parse_stack_config(raw, "dev").prices == {"v6e": {"spot": 0}}


def test_prices_after_an_unknown_generation_are_still_checked() -> None:
    assert errors(lambda c: c.update(prices={"v6": {"spot": 1.0}, "v6e": {"spot": -0.5}})) == [
        "tpuray:prices.v6: 'v6' is not a TPU generation; valid: v4, v5e, v5p, v6e, tpu7x",
        "tpuray:prices.v6e.spot: -0.5 is invalid; a price per chip-hour is >= 0 (USD)",
    ]


def test_an_unknown_key_shows_a_non_string_value_as_json() -> None:
    assert errors(lambda c: pool(c).update(spto=True)) == [
        "tpuray:slicePools[0].spto: unknown key (value true); check the spelling in docs/configuration.md"
    ]


def test_an_unused_terraform_reservation_lists_every_reservation_the_tiers_use() -> None:
    tf = {"backend": "local", "path": "tests/fixtures/terraform/foundation.tfstate"}
    lines = errors(
        lambda c: (
            c.update(terraform={**tf, "outputs": {"reservations": {"dev-res": "res_name"}}}),
            pool(c).update(capacity=[{"reservation": "b-res"}, {"reservation": "a-res"}]),
        )
    )
    assert lines == [
        "tpuray:terraform.outputs.reservations.dev-res: no capacity tier uses reservation 'dev-res'; valid: a-res, b-res"
    ]


def test_a_stack_file_key_with_two_colons_keeps_the_second_in_its_name(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  tpuray:gcp:zones: [us-east5-b]\n  aws:region: us-east-1\n")
    assert read_stack_file(path) == {"gcp:zones": ["us-east5-b"]}
