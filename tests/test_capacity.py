"""tpuray/capacity.py: the capacity tiers as one table, read back from rendered objects. A tier
added there alone, reaching config, docs, preview, ComputeClass, worker groups, cost and the
emulator: tests/test_one_home.py."""

from __future__ import annotations

from tpuray import capacity


def test_the_table_reads_a_rendered_priority_back_to_its_tier() -> None:
    assert capacity.tier_of_priority({"spot": True}) is capacity.SPOT
    assert capacity.tier_of_priority({"flexStart": {"enabled": True}}) is capacity.FLEX_START
    assert capacity.tier_of_priority({"reservations": {"affinity": "Specific", "specific": [{"name": "r"}]}}) is (
        capacity.RESERVATION
    )
    assert capacity.tier_of_priority({"spot": False, "reservations": {"affinity": "None"}}) is capacity.ON_DEMAND


def test_the_table_reads_a_rendered_node_config_back_to_its_tier() -> None:
    assert capacity.tier_of_node_config({"spot": True}) is capacity.SPOT
    assert capacity.tier_of_node_config({"flexStart": True}) is capacity.FLEX_START
    affinity = {"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["prod-v6e"]}
    assert capacity.tier_of_node_config({"reservationAffinity": affinity}) is capacity.RESERVATION
    assert capacity.tier_of_node_config({"machineType": "ct6e-standard-4t"}) is capacity.ON_DEMAND


def test_every_tier_feature_has_a_gke_version_floor() -> None:
    from tpuray.checks import gke_versions

    features = {t.gke_feature for t in capacity.TIERS if t.gke_feature}
    assert features == {"flex-start for TPUs"} and features <= set(gke_versions.FLOORS)
