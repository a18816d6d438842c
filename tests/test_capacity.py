"""tpuray/capacity.py: the capacity tiers as one table, and a tier added there alone reaching
the preview, the ComputeClass, the rendered worker groups and the cost table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tpuray import capacity
from tpuray.commands.preview import key_inputs, preview_document
from tpuray.config import stacks_dir
from tpuray.cost import cost_table, stack_cost
from tpuray.mockrun import StackRun, run_stack

# A made-up tier: capacity bounded to 7 days (as DWS calendar mode gives), with the provider's
# and the CRD's real fields for that bound, its own node label and taint and its own price.
CALENDAR = capacity.Tier(
    key="calendar",
    config_key="calendar",
    field="calendar",
    display="calendar (7 days)",
    market_type="on-demand",
    from_zero=True,
    node_label="example.com/calendar-block",
    tainted=True,
    node_config=lambda _ref, _project: {"max_run_duration": "604800s"},
    priority=lambda _ref: {"maxRunDurationSeconds": 604800},
    node_config_marker={"maxRunDuration": "604800s"},
    priority_marker={"maxRunDurationSeconds": 604800},
)


@pytest.fixture(scope="module")
def calendar_run(tmp_path_factory: pytest.TempPathFactory) -> StackRun:
    """The dev stack with the calendar tier first in its training pool's chain, priced at 1.25."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(capacity, "TIERS", [*capacity.TIERS, CALENDAR])
        doc = yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text())
        pools = doc["config"]["tpuray:slicePools"]
        pools[0]["capacity"] = [{"calendar": True}, {"spot": True}, {"onDemand": True}]
        doc["config"]["tpuray:prices"] = {"v6e": {"calendar": 1.25}}
        path: Path = tmp_path_factory.mktemp("calendar") / "Pulumi.dev.yaml"
        path.write_text(yaml.safe_dump(doc))
        run = run_stack(str(path))
        # Everything read back from the run is read while the tier is in the table.
        run.preview = preview_document(run)  # type: ignore[attr-defined]
        run.keys = {r.name: key_inputs(r) for r in run.resources}  # type: ignore[attr-defined]
        out = io.StringIO()
        Console(file=out, width=200, color_system=None).print(cost_table(stack_cost(run.config)))
        run.cost_text = out.getvalue()  # type: ignore[attr-defined]
        return run


def _ray_job_groups(run: StackRun) -> dict[str, dict]:
    job = next(r for r in run.resources if r.type == "kubernetes:ray.io/v1:RayJob")
    return {g["groupName"]: g for g in job.inputs["spec"]["rayClusterSpec"]["workerGroupSpecs"]}


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


def test_an_added_tier_is_the_node_pools_capacity_in_the_preview(calendar_run: StackRun) -> None:
    pool = next(r for r in calendar_run.resources if r.name == "v6e-dev-0")
    assert pool.inputs["nodeConfig"]["maxRunDuration"] == "604800s"
    assert pool.inputs["nodeConfig"]["labels"]["tpuray.dev/capacity-tier"] == "calendar"
    assert pool.inputs["initialNodeCount"] == 0  # from_zero
    assert calendar_run.keys["v6e-dev-0"] == "ct6e-standard-4t nodes=0 (max 4) calendar (7 days) COMPACT 4x4"


def test_an_added_tier_is_the_first_compute_class_priority(calendar_run: StackRun) -> None:
    cc = next(
        r
        for r in calendar_run.resources
        if r.type.endswith(":ComputeClass") and r.inputs["metadata"]["name"] == "v6e-dev"
    )
    first = cc.inputs["spec"]["priorities"][0]
    assert first["maxRunDurationSeconds"] == 604800
    assert cc.inputs["spec"]["description"].startswith(
        "TPU capacity chain for slice pool v6e-dev: tpu-v6e-slice 4x4 calendar (7 days), then tpu-v6e-slice 4x4 spot"
    )
    assert calendar_run.keys[cc.name].startswith("tpu-v6e-slice 4x4 calendar (7 days) → tpu-v6e-slice 4x4 spot")


def test_an_added_tier_is_walked_inside_the_shapes_worker_group_which_tolerates_its_taint(
    calendar_run: StackRun,
) -> None:
    (group,) = _ray_job_groups(calendar_run).values()
    assert group["groupName"] == "train-v6e-16"
    pod = group["template"]["spec"]
    assert "example.com/calendar-block" not in pod["nodeSelector"]
    assert {"key": "example.com/calendar-block", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in (
        pod["tolerations"]
    )


def test_an_added_tier_is_priced_from_the_stack_config_in_the_cost_table(calendar_run: StackRun) -> None:
    lines = [line for line in calendar_run.preview["cost"]["lines"] if line["tier"] == "calendar"]
    assert [(line["pool"], line["price"]["perChipHour"], line["chips"]) for line in lines] == [
        ("v6e-dev", 1.25, {"min": 0, "max": 16})
    ]
    assert "calendar" in calendar_run.cost_text


def test_every_tier_feature_has_a_gke_version_floor() -> None:
    from tpuray import gke_versions

    features = {t.gke_feature for t in capacity.TIERS if t.gke_feature}
    assert features == {"flex-start for TPUs"} and features <= set(gke_versions.FLOORS)
