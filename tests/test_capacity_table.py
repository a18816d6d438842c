"""The capacity table's rows, read-back and placement, and the ComputeClass a pool's chain
renders to, with literal values from GKE's docs (Spot label and taint
cloud.google.com/gke-spot=true:NoSchedule; flex-start label cloud.google.com/gke-flex-start;
specific reservations: key compute.googleapis.com/reservation-name, node label
cloud.google.com/reservation-name; ComputeClass priorities: tpu {type, count per VM,
topology}, machineType, spot, reservations, flexStart). test_capacity.py follows an added
tier through a whole stack run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.components.capacity_chain import compute_class_spec
from tests.conftest import REPO
from tpuray import capacity
from tpuray.capacity import FLEX_START, ON_DEMAND, RESERVATION, SPOT
from tpuray.config import SlicePoolConfig, read_stack_file
from tpuray.config.checks import parse_stack_config

V6E_4X4 = {"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"}, "machineType": "ct6e-standard-4t"}


@dataclass
class Ref:
    """A reservation as the stack config gives it (tpuray.config.ReservationRef)."""

    name: str
    project: str | None = None


def pool(stack: str, name: str) -> SlicePoolConfig:
    return parse_stack_config(read_stack_file(Path(REPO / "stacks" / f"Pulumi.{stack}.yaml")), stack).pool(name)


# ---------------------------------------------------------------------------- the rows


def test_the_table_lists_spot_flex_start_reservation_then_on_demand() -> None:
    assert capacity.tiers() == [SPOT, FLEX_START, RESERVATION, ON_DEMAND]
    assert capacity.tiers() is not capacity.TIERS


@pytest.mark.parametrize(
    ("tier", "row"),
    [
        (SPOT, ("spot", "spot", "spot", "spot", "spot", False, True, None, True)),
        (FLEX_START, ("flex-start", "flexStart", "flex_start", "flex-start", "on-demand", True, False,
                      "flex-start for TPUs", False)),
        (RESERVATION, ("reservation", "reservation", "reservation", "reservation", "on-demand", False, True, None,
                       False)),
        (ON_DEMAND, ("on-demand", "onDemand", "on_demand", "on-demand", "on-demand", False, True, None, False)),
    ],
)  # fmt: skip
def test_each_tier_row(tier: capacity.Tier, row: tuple[Any, ...]) -> None:
    got = (tier.price_key, tier.config_key, tier.field, tier.display, tier.market_type, tier.from_zero,
           tier.auto_repair, tier.gke_feature, tier.tainted)  # fmt: skip
    assert got == row


def test_tiers_are_found_by_key() -> None:
    assert capacity.by_key("flex-start") is FLEX_START
    assert capacity.by_key("on-demand") is ON_DEMAND
    with pytest.raises(KeyError):
        capacity.by_key("calendar")


def test_on_demand_is_the_default_tier_and_the_only_one() -> None:
    assert capacity.default_tier() is ON_DEMAND
    assert [t.is_default for t in capacity.tiers()] == [False, False, False, True]


# ---------------------------------------------------------------------------- fragments


def test_node_config_fragments() -> None:
    assert SPOT.node_config(None, "acme") == {"spot": True}
    assert FLEX_START.node_config(None, "acme") == {
        "flex_start": True,
        "reservation_affinity": {"consume_reservation_type": "NO_RESERVATION"},
    }
    assert ON_DEMAND.node_config(None, "acme") == {}


def test_a_reservation_of_the_same_project_is_named_alone() -> None:
    assert RESERVATION.node_config(Ref("prod-v6e", "acme"), "acme") == {
        "reservation_affinity": {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["prod-v6e"],
        }
    }
    assert RESERVATION.node_config(Ref("prod-v6e"), "acme")["reservation_affinity"]["values"] == ["prod-v6e"]


def test_a_shared_reservation_of_another_project_is_named_by_its_path() -> None:
    fragment = RESERVATION.node_config(Ref("prod-v6e", "shared-tpus"), "acme")
    assert fragment["reservation_affinity"]["values"] == ["projects/shared-tpus/reservations/prod-v6e"]


def test_priority_fragments() -> None:
    assert SPOT.priority(None) == {"spot": True}
    assert ON_DEMAND.priority(None) == {"spot": False, "reservations": {"affinity": "None"}}
    assert FLEX_START.priority(None) == {"flexStart": {"enabled": True}, "capacityCheckWaitTimeSeconds": 600}


def test_a_reservation_priority_is_specific_and_names_its_project_when_given() -> None:
    assert RESERVATION.priority(Ref("prod-v6e", "shared-tpus")) == {
        "reservations": {"affinity": "Specific", "specific": [{"name": "prod-v6e", "project": "shared-tpus"}]}
    }
    assert RESERVATION.priority(Ref("prod-v6e")) == {
        "reservations": {"affinity": "Specific", "specific": [{"name": "prod-v6e"}]}
    }


# ---------------------------------------------------------------------------- reading rendered objects back


@pytest.mark.parametrize(
    ("node_config", "tier"),
    [
        ({"spot": True, "machineType": "ct6e-standard-4t"}, SPOT),
        ({"spot": 1}, ON_DEMAND),  # `spot: 1` is not `spot: true`
        ({"spot": False}, ON_DEMAND),
        ({"flexStart": True, "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}, FLEX_START),
        ({"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["r"]}}, RESERVATION),
        ({"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}}, ON_DEMAND),
        ({"reservationAffinity": "SPECIFIC_RESERVATION"}, ON_DEMAND),  # not the nested object
        ({}, ON_DEMAND),
    ],
)
def test_a_rendered_node_config_reads_back_to_its_tier(node_config: dict[str, Any], tier: capacity.Tier) -> None:
    assert capacity.tier_of_node_config(node_config) is tier


@pytest.mark.parametrize(
    ("priority", "tier"),
    [
        ({**V6E_4X4, "spot": True}, SPOT),
        ({**V6E_4X4, "spot": False, "reservations": {"affinity": "None"}}, ON_DEMAND),
        ({**V6E_4X4, "flexStart": {"enabled": True}, "capacityCheckWaitTimeSeconds": 600.0}, FLEX_START),
        ({**V6E_4X4, "reservations": {"affinity": "Specific", "specific": [{"name": "r"}]}}, RESERVATION),
    ],
)
def test_a_compute_class_priority_reads_back_to_its_tier(priority: dict[str, Any], tier: capacity.Tier) -> None:
    assert capacity.tier_of_priority(priority) is tier


def test_a_reservation_is_described_with_its_names() -> None:
    node_config = {"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["a", "b"]}}
    assert RESERVATION.describe_node_config(node_config) == "reservation a,b"
    assert RESERVATION.describe_priority(RESERVATION.priority(Ref("prod-v6e"))) == "reservation prod-v6e"


def test_other_tiers_are_described_by_their_display_name() -> None:
    assert SPOT.describe_node_config({"spot": True}) == "spot"
    assert FLEX_START.describe_priority(FLEX_START.priority(None)) == "flex-start"


# ---------------------------------------------------------------------------- keeping pods on a tier's nodes


def test_only_spot_pods_tolerate_the_spot_taint() -> None:
    assert capacity.toleration(SPOT) == {
        "key": "cloud.google.com/gke-spot",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }
    assert [capacity.toleration(t) for t in (FLEX_START, RESERVATION, ON_DEMAND)] == [None, None, None]


# ---------------------------------------------------------------------------- the ComputeClass of a chain


def test_dev_training_pool_compute_class_is_spot_then_on_demand() -> None:
    assert compute_class_spec(pool("dev", "v6e-dev"), "tpu-nodes@acme-ml-dev.iam.gserviceaccount.com") == {
        "description": "TPU capacity chain for slice pool v6e-dev: tpu-v6e-slice 4x4 spot, "
        "then tpu-v6e-slice 4x4 on-demand",
        "priorities": [
            {**V6E_4X4, "spot": True},
            {**V6E_4X4, "spot": False, "reservations": {"affinity": "None"}},
        ],
        "nodePoolAutoCreation": {"enabled": True},
        "nodePoolConfig": {"serviceAccount": "tpu-nodes@acme-ml-dev.iam.gserviceaccount.com"},
        "whenUnsatisfiable": "DoNotScaleUp",
    }


def test_prod_training_chain_ends_with_its_v5e_fallback() -> None:
    spec = compute_class_spec(pool("prod", "v6e-train"))
    assert spec["description"] == (
        "TPU capacity chain for slice pool v6e-train: tpu-v6e-slice 4x4 reservation acme-v6e-4x4-prod, "
        "then tpu-v6e-slice 4x4 spot, then tpu-v6e-slice 4x4 on-demand, then tpu-v5-lite-podslice 4x4 on-demand"
    )
    assert spec["priorities"][-1] == {
        "tpu": {"type": "tpu-v5-lite-podslice", "count": 4, "topology": "4x4"},
        "machineType": "ct5lp-hightpu-4t",
        "spot": False,
        "reservations": {"affinity": "None"},
    }


def test_a_compute_class_without_a_node_service_account_sets_no_node_pool_config() -> None:
    assert "nodePoolConfig" not in compute_class_spec(pool("dev", "v6e-dev"))


def test_a_single_vm_pool_asks_for_all_chips_of_its_one_vm() -> None:
    # v5e 2x4 on one ct5lp-hightpu-8t VM: count is chips per VM (8), not per slice.
    assert compute_class_spec(pool("prod", "v5e-serve"))["priorities"] == [
        {
            "tpu": {"type": "tpu-v5-lite-podslice", "count": 8, "topology": "2x4"},
            "machineType": "ct5lp-hightpu-8t",
            "spot": False,
            "reservations": {"affinity": "None"},
        }
    ]


# ---------------------------------------------------------------------------- Cloud Billing SKUs


@pytest.mark.parametrize(
    ("usage_type", "description", "tier"),
    [
        ("Preemptible", "TPU v6e core running in Americas", SPOT),
        ("OnDemand", "Spot Preemptible TPU v6e", SPOT),  # a word of the description, spot first
        ("OnDemand", "Flex-start TPU v6e core", FLEX_START),
        ("OnDemand", "DWS Flex Start TPU v6e", FLEX_START),
        ("OnDemand", "TPU v6e core running in Americas", ON_DEMAND),
    ],
)
def test_a_billing_sku_is_priced_as_its_tier(usage_type: str, description: str, tier: capacity.Tier) -> None:
    assert capacity.tier_of_sku(usage_type, description) is tier


def test_a_commitment_sku_is_no_tiers_price() -> None:
    assert capacity.tier_of_sku("Commit1Yr", "Commitment v1: TPU v6e in Americas for 1 Year") is None


def test_an_unknown_tier_key_is_the_key_error_raised() -> None:
    with pytest.raises(KeyError) as raised:
        capacity.by_key("preemptible")
    assert raised.value.args == ("preemptible",)
