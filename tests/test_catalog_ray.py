"""The catalog's view of a slice against Ray's own TPU code (the installed ray, pinned in
requirements.lock): where Ray's SlicePlacementGroup, which JaxTrainer reserves TPU gangs with,
reads a multi-host slice as one VM."""

from __future__ import annotations

from ray._private.accelerators.tpu import get_chips_per_host

from tpuray import catalog


def test_the_two_host_v5e_and_v6e_2x4_slices_are_the_ones_ray_reads_as_one_vm() -> None:
    assert sorted(s.key for s in catalog.all_shapes() if s.ray_reads_as_one_host) == [
        "v5e 2x4 (ct5lp-hightpu-4t)",
        "v6e 2x4 (ct6e-standard-4t)",
    ]


def test_the_flag_agrees_with_rays_chips_per_host_for_every_shape_of_the_catalog() -> None:
    disagree = [
        s.key
        for s in catalog.all_shapes()
        if s.ray_reads_as_one_host
        != (
            s.multi_host
            and get_chips_per_host(s.topology, catalog.GENERATIONS[s.generation].ray_generation) != s.chips_per_host
        )
    ]
    assert disagree == []


def test_ray_reads_the_4x4_v6e_slice_as_four_hosts_of_four_chips() -> None:
    assert get_chips_per_host("4x4", "v6e") == 4
    assert catalog.lookup("v6e", "4x4").ray_reads_as_one_host is False


def test_the_one_vm_form_of_each_shape_ray_misreads_is_its_8_chip_machine_type() -> None:
    assert {s.key: s.one_vm_machine_types for s in catalog.all_shapes() if s.ray_reads_as_one_host} == {
        "v5e 2x4 (ct5lp-hightpu-4t)": ("ct5lp-hightpu-8t",),
        "v6e 2x4 (ct6e-standard-4t)": ("ct6e-standard-8t",),
    }


def test_a_multi_host_topology_has_no_one_vm_form() -> None:
    assert catalog.lookup("v6e", "4x4").one_vm_machine_types == ()


def test_a_shape_is_asked_of_ray_with_its_accelerator_type_topology_and_host_layout() -> None:
    from ray_apps.contracts import ShapeStep

    assert catalog.lookup("v5p", "2x2x2").shape_step == ShapeStep("TPU-V5P", "2x2x2", 2, 4)
    assert catalog.lookup("v6e", "4x4").shape_step == ShapeStep("TPU-V6E", "4x4", 4, 4)
    assert catalog.lookup("v5e", "2x4", "ct5lp-hightpu-8t").shape_step == ShapeStep("TPU-V5LITEPOD", "2x4", 1, 8)


def test_a_shapes_host_count_reads_as_one_host_or_n_hosts() -> None:
    assert catalog.lookup("v6e", "2x2").hosts_text == "1 host"
    assert catalog.lookup("v5p", "2x2x2").hosts_text == "2 hosts"
