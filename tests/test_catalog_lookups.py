"""The catalog's rule for 3-D topologies and its lookups by GKE labels, Ray accelerator type
and chips per host, with literal values from shared/reference/tpu-facts.md and Cloud TPU's
"TPU types and topologies" rule (AxBxC, A <= B <= C, all multiples of 4, plus 2x2x1, 2x2x2,
2x2x4 and 2x4x4)."""

from __future__ import annotations

import json

import pytest

from tpuray import catalog
from tpuray.catalog import CatalogError, Placement


def test_cube_rule_up_to_one_cube_is_the_sub_cube_shapes_and_4x4x4() -> None:
    assert catalog.cube_topologies(4, 4, 4) == ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4")


def test_cube_rule_orders_by_chips_then_by_edges() -> None:
    # 4x4x16 and 4x8x8 both have 256 chips, 4x8x16 and 8x8x8 both 512.
    assert catalog.cube_topologies(8, 8, 16) == (
        "2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x4x12", "4x4x16",
        "4x8x8", "4x8x12", "4x8x16", "8x8x8", "8x8x12", "8x8x16",
    )  # fmt: skip


def test_cube_rule_bounds_each_edge_separately() -> None:
    assert catalog.cube_topologies(4, 8, 8) == ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8")
    assert catalog.cube_topologies(4, 4, 8) == ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8")


def test_cube_rule_puts_fewer_chips_first_even_with_a_longer_first_edge() -> None:
    # 8x8x8 (512 chips) before 4x12x12 (576 chips), though 4 < 8.
    assert catalog.cube_topologies(8, 12, 12)[-4:] == ("8x8x8", "4x12x12", "8x8x12", "8x12x12")


def test_cube_rule_rounds_bounds_down_to_multiples_of_4() -> None:
    assert catalog.cube_topologies(7, 8, 8)[4:] == ("4x4x4", "4x4x8", "4x8x8")
    assert catalog.cube_topologies(8, 7, 8)[4:] == ("4x4x4", "4x4x8")
    assert catalog.cube_topologies(4, 4, 7)[4:] == ("4x4x4",)


def test_v4_rule_up_to_12x12x16_gives_20_topologies() -> None:
    shapes = catalog.cube_topologies(12, 12, 16)
    assert len(shapes) == 20
    assert shapes[-3:] == ("8x12x16", "12x12x12", "12x12x16")


def test_2d_generations_describe_their_topologies_as_a_list() -> None:
    assert catalog.generation("v6e").describe_topologies() == "1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"


def test_tpu7x_describes_its_closed_list_of_topologies() -> None:
    assert catalog.generation("tpu7x").describe_topologies() == (
        "2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4, 4x4x8, 4x8x8, 8x8x8, 8x8x16, 8x16x16"
    )


def test_a_machine_type_that_does_not_fit_names_both_forms() -> None:
    with pytest.raises(CatalogError) as info:
        catalog.lookup("v6e", "2x4", "ct6e-standard-1t")
    assert str(info.value) == (
        "machine type 'ct6e-standard-1t' does not fit v6e 2x4; valid: ct6e-standard-8t, ct6e-standard-4t"
    )


@pytest.mark.parametrize(
    ("gen", "topology", "machine", "placement"),
    [
        ("v6e", "2x2", None, Placement.SINGLE_HOST),
        ("v6e", "2x4", "ct6e-standard-8t", Placement.SINGLE_HOST),
        ("v6e", "2x4", "ct6e-standard-4t", Placement.COMPACT),  # two 4-chip VMs
        ("v6e", "4x4", None, Placement.COMPACT),
        ("v5p", "2x2x1", None, Placement.SINGLE_HOST),
        ("v5p", "2x2x2", None, Placement.COMPACT),
        ("tpu7x", "2x2x1", None, Placement.SINGLE_HOST),
        ("tpu7x", "4x4x4", None, Placement.WORKLOAD_POLICY),
    ],
)
def test_each_shape_has_its_placement(gen: str, topology: str, machine: str | None, placement: Placement) -> None:
    assert catalog.lookup(gen, topology, machine).placement is placement


def test_a_shape_serializes_with_whole_host_and_chip_counts() -> None:
    assert json.dumps(catalog.lookup("v6e", "4x4").as_json()) == (
        '{"generation": "v6e", "topology": "4x4", "chips": 16, "hosts": 4, "chips_per_host": 4, '
        '"machine_type": "ct6e-standard-4t", "gke_accelerator": "tpu-v6e-slice", "ray_accelerator_type": "TPU-V6E", '
        '"pod_type": "v6e-16", "multi_host": true}'
    )


def test_find_picks_the_form_of_2x4_by_chips_per_host() -> None:
    assert (catalog.find("v6e", "2x4", 4).machine_type, catalog.find("v6e", "2x4", 4).hosts) == ("ct6e-standard-4t", 2)
    assert (catalog.find("v6e", "2x4", 8).machine_type, catalog.find("v6e", "2x4", 8).hosts) == ("ct6e-standard-8t", 1)


def test_find_names_the_chips_per_host_a_topology_has() -> None:
    with pytest.raises(CatalogError) as info:
        catalog.find("v6e", "4x4", 8)
    assert str(info.value) == "v6e 4x4 has no 8-chip VMs; valid chips per host: 4"


def test_find_names_both_chips_per_host_of_2x4() -> None:
    with pytest.raises(CatalogError) as info:
        catalog.find("v6e", "2x4", 2)
    assert str(info.value) == "v6e 2x4 has no 2-chip VMs; valid chips per host: 8, 4"


def test_find_says_none_for_a_topology_the_generation_lacks() -> None:
    with pytest.raises(CatalogError) as info:
        catalog.find("v6e", "3x3", 4)
    assert str(info.value) == "v6e 3x3 has no 4-chip VMs; valid chips per host: none"


def test_the_legacy_v5e_device_label_is_v5e() -> None:
    shape = catalog.by_gke_labels("tpu-v5-lite-device", "2x2")
    assert (shape.generation, shape.machine_type) == ("v5e", "ct5lp-hightpu-4t")


def test_an_unknown_gke_accelerator_names_the_valid_ones() -> None:
    with pytest.raises(CatalogError) as info:
        catalog.by_gke_labels("tpu-v9-slice", "2x2")
    assert str(info.value) == (
        "unknown gke-tpu-accelerator 'tpu-v9-slice'; valid: "
        "tpu-v4-podslice, tpu-v5-lite-podslice, tpu-v5p-slice, tpu-v6e-slice, tpu7x"
    )


@pytest.mark.parametrize(
    ("ray_type", "gen"),
    [("TPU-V4", "v4"), ("TPU-V5LITEPOD", "v5e"), ("TPU-V5P", "v5p"), ("TPU-V6E", "v6e"), ("TPU-V7X", "tpu7x")],
)
def test_ray_accelerator_type_names_its_generation(ray_type: str, gen: str) -> None:
    assert catalog.by_ray_accelerator_type(ray_type).name == gen


def test_an_unknown_ray_accelerator_type_names_the_valid_ones() -> None:
    with pytest.raises(CatalogError) as info:
        catalog.by_ray_accelerator_type("TPU-V9")
    assert str(info.value) == (
        "unknown Ray accelerator type 'TPU-V9'; valid: TPU-V4, TPU-V5LITEPOD, TPU-V5P, TPU-V6E, TPU-V7X"
    )


@pytest.mark.parametrize(("devices", "problem"), [
    (2, None), (4, None), (8, None), (16, None),  # one host's share, or whole hosts
    (6, "more than one host's chips must be a multiple of the 4 chips per host"),
    (17, "the 4x4 slice has 16 chips"),
])  # fmt: skip
def test_an_llm_engine_fits_a_v6e_4x4_slice_by_whole_hosts(devices: int, problem: str | None) -> None:
    assert catalog.engine_devices_problem(catalog.lookup("v6e", "4x4"), devices) == problem
