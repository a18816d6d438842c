"""The autoscaled emulator's configuration (fast, no Ray): node types, tiers, capacity faults.

The autoscaled cluster itself runs in tests/test_autoscale_emulated.py."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import mocked
from tpuray import capacity
from tpuray.local.emulator.autoscale import (
    HEAD_NODE_TYPE,
    PROVIDER_MODULE,
    autoscale_for,
    autoscaling_config,
    first_tier_with_capacity,
    set_unavailable,
    unavailable,
)


def config_for(stack: str) -> dict:
    return autoscaling_config(
        autoscale_for(mocked(stack)),
        name="t",
        state_dir="/tmp/s",
        ray_dir="/tmp/s/ray",
        gcs_address="127.0.0.1:1",
        host_cpus=2,
        fate_share=True,
    )


def test_node_types_are_the_worker_groups_per_host_as_kuberays_autoscaling_config_makes_them() -> None:
    # prod: train-v6e-16 (minReplicas 0, maxReplicas 2, numOfHosts 4), its v5e fallback group,
    # and the single-host serve group.
    types = config_for("prod")["available_node_types"]
    assert {name: (t["resources"], t.get("min_workers", 0), t["max_workers"]) for name, t in types.items()} == {
        "train-v6e-16": ({"CPU": 2, "TPU": 4, "TPU-v6e-16-head": 1}, 0, 8),
        "train-v5litepod-16": ({"CPU": 2, "TPU": 4, "TPU-v5litepod-16-head": 1}, 0, 8),
        "serve-v5litepod-8": ({"CPU": 2, "TPU": 8, "TPU-v5litepod-8-head": 1}, 0, 2),
        HEAD_NODE_TYPE: ({"CPU": 2}, 0, 0),
    }


def test_the_provider_gets_each_groups_tiers_in_compute_class_order() -> None:
    provider = config_for("prod")["provider"]
    assert (provider["type"], provider["module"]) == ("external", PROVIDER_MODULE)
    groups = provider["tpuray"]["groups"]
    assert groups["train-v6e-16"]["tiers"] == ["reservation", "spot", "on-demand"]
    assert groups["train-v5litepod-16"]["tiers"] == ["on-demand"]
    assert groups["train-v6e-16"]["template"]["shape"] == {
        "generation": "v6e",
        "topology": "4x4",
        "machine_type": "ct6e-standard-4t",
    }


def test_a_replica_lands_on_the_first_tier_of_its_shape_with_capacity() -> None:
    tiers = [capacity.RESERVATION, capacity.SPOT, capacity.ON_DEMAND]
    assert first_tier_with_capacity(tiers, "v6e-16", set()) is capacity.RESERVATION
    out = {("v6e-16", "reservation"), ("v6e-16", "spot"), ("v5litepod-16", "on-demand")}
    assert first_tier_with_capacity(tiers, "v6e-16", out) is capacity.ON_DEMAND
    assert first_tier_with_capacity(tiers, "v6e-16", {("v6e-16", "*")}) is None


def test_capacity_faults_round_trip_through_the_state_dir(tmp_path: Path) -> None:
    assert unavailable(tmp_path) == set()
    set_unavailable(tmp_path, [("v6e-8", "spot"), ("v5litepod-8", "*")])
    assert unavailable(tmp_path) == {("v6e-8", "spot"), ("v5litepod-8", "*")}
    set_unavailable(tmp_path, [])
    assert unavailable(tmp_path) == set()
