"""The TPU catalog against the facts table (shared/reference/tpu-facts.md) and Ray's own rules."""

from __future__ import annotations

import json

import pytest
from ray._private.accelerators import tpu as ray_tpu

from tpuray import catalog
from tpuray.catalog import CatalogError, Placement
from tpuray.cli import main

# (generation, topology, machine type) -> chips, hosts, chips/host, GKE label, Ray type, pod type
FACTS = [
    ("v4", "2x2x1", "ct4p-hightpu-4t", 4, 1, 4, "tpu-v4-podslice", "TPU-V4", "v4-8"),
    ("v4", "2x2x2", "ct4p-hightpu-4t", 8, 2, 4, "tpu-v4-podslice", "TPU-V4", "v4-16"),
    ("v4", "2x2x4", "ct4p-hightpu-4t", 16, 4, 4, "tpu-v4-podslice", "TPU-V4", "v4-32"),
    ("v5e", "1x1", "ct5lp-hightpu-1t", 1, 1, 1, "tpu-v5-lite-podslice", "TPU-V5LITEPOD", "v5litepod-1"),
    ("v5e", "2x2", "ct5lp-hightpu-4t", 4, 1, 4, "tpu-v5-lite-podslice", "TPU-V5LITEPOD", "v5litepod-4"),
    ("v5e", "2x4", "ct5lp-hightpu-8t", 8, 1, 8, "tpu-v5-lite-podslice", "TPU-V5LITEPOD", "v5litepod-8"),
    ("v5e", "2x4", "ct5lp-hightpu-4t", 8, 2, 4, "tpu-v5-lite-podslice", "TPU-V5LITEPOD", "v5litepod-8"),
    ("v5e", "4x4", "ct5lp-hightpu-4t", 16, 4, 4, "tpu-v5-lite-podslice", "TPU-V5LITEPOD", "v5litepod-16"),
    ("v5e", "16x16", "ct5lp-hightpu-4t", 256, 64, 4, "tpu-v5-lite-podslice", "TPU-V5LITEPOD", "v5litepod-256"),
    ("v5p", "2x2x1", "ct5p-hightpu-4t", 4, 1, 4, "tpu-v5p-slice", "TPU-V5P", "v5p-8"),
    ("v5p", "2x2x2", "ct5p-hightpu-4t", 8, 2, 4, "tpu-v5p-slice", "TPU-V5P", "v5p-16"),
    ("v5p", "16x16x24", "ct5p-hightpu-4t", 6144, 1536, 4, "tpu-v5p-slice", "TPU-V5P", "v5p-12288"),
    ("v6e", "1x1", "ct6e-standard-1t", 1, 1, 1, "tpu-v6e-slice", "TPU-V6E", "v6e-1"),
    ("v6e", "2x2", "ct6e-standard-4t", 4, 1, 4, "tpu-v6e-slice", "TPU-V6E", "v6e-4"),
    ("v6e", "2x4", "ct6e-standard-8t", 8, 1, 8, "tpu-v6e-slice", "TPU-V6E", "v6e-8"),
    ("v6e", "2x4", "ct6e-standard-4t", 8, 2, 4, "tpu-v6e-slice", "TPU-V6E", "v6e-8"),
    ("v6e", "4x4", "ct6e-standard-4t", 16, 4, 4, "tpu-v6e-slice", "TPU-V6E", "v6e-16"),
    ("v6e", "4x8", "ct6e-standard-4t", 32, 8, 4, "tpu-v6e-slice", "TPU-V6E", "v6e-32"),
    ("v6e", "16x16", "ct6e-standard-4t", 256, 64, 4, "tpu-v6e-slice", "TPU-V6E", "v6e-256"),
    ("tpu7x", "2x2x1", "tpu7x-standard-4t", 4, 1, 4, "tpu7x", "TPU-V7X", "v7x-8"),
    ("tpu7x", "2x2x2", "tpu7x-standard-4t", 8, 2, 4, "tpu7x", "TPU-V7X", "v7x-16"),
    ("tpu7x", "8x16x16", "tpu7x-standard-4t", 2048, 512, 4, "tpu7x", "TPU-V7X", "v7x-4096"),
]


@pytest.mark.parametrize("gen,topology,machine,chips,hosts,per_host,label,ray_type,pod_type", FACTS)
def test_catalog_matches_the_facts_table(gen, topology, machine, chips, hosts, per_host, label, ray_type, pod_type):
    shape = catalog.lookup(gen, topology, machine)
    assert (shape.chips, shape.hosts, shape.chips_per_host) == (chips, hosts, per_host)
    assert (shape.gke_accelerator, shape.ray_accelerator_type, shape.pod_type) == (label, ray_type, pod_type)
    assert shape.multi_host == (hosts > 1)


def test_default_form_of_v6e_2x4_is_one_8_chip_vm():
    assert catalog.lookup("v6e", "2x4").machine_type == "ct6e-standard-8t"


def test_multi_host_shapes_use_compact_placement_except_tpu7x_which_uses_a_workload_policy():
    for shape in catalog.all_shapes():
        if not shape.multi_host:
            assert shape.placement is Placement.SINGLE_HOST
        elif shape.generation == "tpu7x":
            assert shape.placement is Placement.WORKLOAD_POLICY
        else:
            assert shape.placement is Placement.COMPACT


def test_every_topology_is_one_ray_accepts_for_its_generation():
    for shape in catalog.all_shapes():
        ray_gen = catalog.GENERATIONS[shape.generation].ray_generation
        assert shape.topology in ray_tpu.VALID_TPU_TOPOLOGY[ray_gen], shape.key


def test_pod_types_equal_what_ray_infers_from_topology():
    for shape in catalog.all_shapes():
        assert ray_tpu.infer_tpu_pod_type_from_topology(shape.topology, shape.ray_accelerator_type) == shape.pod_type


def test_default_chips_per_host_equal_rays_default():
    for gen in catalog.GENERATIONS.values():
        for topology in gen.topologies:
            shape = catalog.lookup(gen.name, topology)
            assert ray_tpu.get_chips_per_host(topology, gen.ray_generation) == shape.chips_per_host, shape.key


def test_hosts_times_chips_per_host_covers_the_slice():
    for shape in catalog.all_shapes():
        assert shape.hosts * shape.chips_per_host == shape.chips


def test_head_resource_is_named_after_the_pod_type():
    assert catalog.lookup("v6e", "4x4").head_resource == "TPU-v6e-16-head"


def test_lookup_by_gke_labels_tells_the_two_2x4_forms_apart_by_chips_per_host():
    assert catalog.by_gke_labels("tpu-v6e-slice", "2x4", 8).hosts == 1
    assert catalog.by_gke_labels("tpu-v6e-slice", "2x4", 4).hosts == 2


def test_unknown_generation_names_the_valid_ones():
    with pytest.raises(CatalogError, match="unknown TPU generation 'v9'; valid: v4, v5e, v5p, v6e, tpu7x"):
        catalog.lookup("v9", "2x2")


def test_topology_json_lists_every_shape_with_exactly_the_documented_keys(capsys):
    assert main(["topology", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(catalog.all_shapes())
    keys = {
        "generation",
        "topology",
        "chips",
        "hosts",
        "chips_per_host",
        "machine_type",
        "gke_accelerator",
        "ray_accelerator_type",
        "pod_type",
        "multi_host",
    }
    assert all(set(row) == keys for row in rows)
    assert {
        "generation": "v6e",
        "topology": "4x4",
        "chips": 16,
        "hosts": 4,
        "chips_per_host": 4,
        "machine_type": "ct6e-standard-4t",
        "gke_accelerator": "tpu-v6e-slice",
        "ray_accelerator_type": "TPU-V6E",
        "pod_type": "v6e-16",
        "multi_host": True,
    } in rows


def test_topology_table_is_readable(capsys):
    assert main(["topology", "--generation", "v5e"]) == 0
    out = capsys.readouterr().out
    assert "ct5lp-hightpu-8t" in out and "v5litepod-16" in out


# ---------------------------------------------------------------------------- 3-D topologies by rule

GKE_DOC_SHAPES = [  # (generation, topology, chips, hosts, pod type): Cloud TPU v5p/v4 tables and the 4x4x12
    ("v5p", "4x4x8", 128, 32, "v5p-256"),
    ("v5p", "8x16x16", 2048, 512, "v5p-4096"),
    ("v5p", "16x16x24", 6144, 1536, "v5p-12288"),
    ("v5p", "4x4x12", 192, 48, "v5p-384"),
    ("v4", "4x4x12", 192, 48, "v4-384"),
    ("v4", "12x12x16", 2304, 576, "v4-4608"),
]


@pytest.mark.parametrize("gen,topology,chips,hosts,pod_type", GKE_DOC_SHAPES)
def test_documented_3d_shape_is_in_the_catalog(gen, topology, chips, hosts, pod_type):
    shape = catalog.lookup(gen, topology)
    assert (shape.chips, shape.hosts, shape.chips_per_host, shape.pod_type) == (chips, hosts, 4, pod_type)


def _ordered(topology: str) -> bool:
    a, b, c = (int(d) for d in topology.split("x"))
    return a <= b <= c


@pytest.mark.parametrize("gen", ["v4", "v5p", "tpu7x"])
def test_every_ordered_topology_ray_accepts_is_in_the_catalog(gen):
    ray_gen = catalog.GENERATIONS[gen].ray_generation
    ray_ordered = {t for t in ray_tpu.VALID_TPU_TOPOLOGY[ray_gen] if _ordered(t) or t == "2x2x1"}
    assert ray_ordered <= set(catalog.topologies(gen))


@pytest.mark.parametrize("gen", ["v4", "v5p", "tpu7x"])
def test_every_3d_topology_follows_the_documented_rule(gen):
    for topology in catalog.topologies(gen):
        dims = [int(d) for d in topology.split("x")]
        sub_cube = topology in ("2x2x1", "2x2x2", "2x2x4", "2x4x4")
        assert sub_cube or (_ordered(topology) and all(d % 4 == 0 for d in dims)), topology


@pytest.mark.parametrize(
    "gen,topology",
    [
        ("v5p", "8x4x4"),
        ("v5p", "4x4x6"),
        ("v5p", "16x16x28"),
        ("v4", "16x16x16"),
        ("tpu7x", "4x4x12"),
        ("v5p", "1x1x4"),
    ],
)
def test_topology_outside_the_rule_or_the_largest_slice_is_refused(gen, topology):
    with pytest.raises(CatalogError, match=f"topology '{topology}' is not valid for {gen}"):
        catalog.lookup(gen, topology)


def test_v5p_has_44_topologies_by_rule_and_12_headline_ones():
    gen = catalog.GENERATIONS["v5p"]
    assert (len(gen.topologies), len(gen.headline)) == (44, 12)
    assert set(gen.headline) <= set(gen.topologies)


def test_an_unknown_3d_topology_names_the_rule_not_a_list():
    with pytest.raises(CatalogError) as err:
        catalog.lookup("v5p", "4x4x6")
    assert str(err.value) == (
        "topology '4x4x6' is not valid for v5p; valid: 2x2x1, 2x2x2, 2x2x4, 2x4x4 or AxBxC with A <= B <= C all "
        "multiples of 4, up to 16x16x24 (e.g. 4x4x4, 4x4x8, 4x8x8, 8x8x8)"
    )


def test_topology_table_shows_headline_shapes_unless_all(capsys):
    assert main(["topology", "--generation", "v5p"]) == 0
    headline = capsys.readouterr().out
    assert "16x16x24" in headline and "4x4x12" not in headline
    assert "12 of 44 shapes (headline topologies); --all lists every one" in headline
    assert main(["topology", "--generation", "v5p", "--all"]) == 0
    assert "4x4x12" in capsys.readouterr().out
