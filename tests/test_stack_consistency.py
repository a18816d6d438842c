"""Values that parse one by one but not together: the same item twice in a list whose order or set
matters, a key the stack's other choices never read, a value the run can never reach."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.stack_edits import STACKS, errors
from tpuray.checks import stack_consistency
from tpuray.config.checks import parse_stack_config

ORDER = "a ComputeClass tries its priorities in order, so the second copy never gets a turn"
DIGEST = "sha256:" + "4f" * 32


def pool(c: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return c["slicePools"][i]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_committed_stacks_are_consistent(stack: str) -> None:
    assert stack_consistency.stack_lines(parse_stack_config(copy.deepcopy(STACKS[stack]), stack)) == []


# ---------------------------------------------------------------------------- the same item twice


def test_a_zone_listed_twice_is_refused() -> None:
    assert errors("dev", lambda c: c["gcp"].update(zones=["us-east5-b", "us-east5-b"])) == [
        "tpuray:gcp.zones[1]: 'us-east5-b' repeats tpuray:gcp.zones[0]; list it once"
    ]


def test_a_capacity_tier_repeated_later_in_the_chain_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        pool(c)["capacity"].append({"spot": True})

    assert errors("prod", edit) == [
        f"tpuray:slicePools[0].capacity[3]: {{'spot': True}} repeats tpuray:slicePools[0].capacity[1]; list it once; {ORDER}"
    ]


def test_the_same_reservation_twice_in_a_chain_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        pool(c)["capacity"].insert(2, {"reservation": {"name": "acme-v6e-4x4-prod"}})

    assert errors("prod", edit) == [
        "tpuray:slicePools[0].capacity[2]: {'reservation': {'name': 'acme-v6e-4x4-prod'}} repeats "
        f"tpuray:slicePools[0].capacity[0]; list it once; {ORDER}"
    ]


def test_a_fallback_shape_listed_twice_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        pool(c)["fallback"].append({"generation": "v5e", "topology": "4x4"})

    assert errors("prod", edit) == [
        f"tpuray:slicePools[0].fallback[1]: v5e 4x4 repeats tpuray:slicePools[0].fallback[0]; list another shape, or "
        f"none; {ORDER}"
    ]


def test_a_fallback_to_the_pools_own_shape_is_refused() -> None:
    assert errors("prod", lambda c: pool(c).update(fallback=[{"generation": "v6e", "topology": "4x4"}])) == [
        "tpuray:slicePools[0].fallback[0]: v6e 4x4 repeats the pool's own shape (tpuray:slicePools[0]); list another "
        f"shape, or none; {ORDER}"
    ]


def test_a_notification_channel_listed_twice_is_refused() -> None:
    channel = "projects/acme-ml-prod/notificationChannels/4471029384756102938"
    assert errors("prod", lambda c: c["observability"].update(notificationChannels=[channel, channel])) == [
        f"tpuray:observability.notificationChannels[1]: {channel!r} repeats "
        "tpuray:observability.notificationChannels[0]; list it once"
    ]


def test_a_budget_threshold_listed_twice_is_refused() -> None:
    assert errors("prod", lambda c: c["observability"]["budget"].update(thresholds=[0.5, 0.9, 0.9, 1.0])) == [
        "tpuray:observability.budget.thresholds[2]: 0.9 repeats tpuray:observability.budget.thresholds[1]; list it once"
    ]


def test_a_certificate_listed_twice_is_refused() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["workloads"]["serve"]["gateway"]["tls"]["certificateManager"] = ["tpuray-prod-serve", "tpuray-prod-serve"]

    assert errors("prod", edit) == [
        "tpuray:workloads.serve.gateway.tls.certificateManager[1]: 'tpuray-prod-serve' repeats "
        "tpuray:workloads.serve.gateway.tls.certificateManager[0]; list it once"
    ]


def test_an_admin_cidr_listed_twice_is_refused() -> None:
    assert errors("prod", lambda c: c["workloads"].update(adminCidrs=["10.128.0.0/16", "10.128.0.0/16"])) == [
        "tpuray:workloads.adminCidrs[1]: '10.128.0.0/16' repeats tpuray:workloads.adminCidrs[0]; list it once"
    ]


def test_an_allowed_image_listed_twice_is_refused() -> None:
    image = f"us-east5-docker.pkg.dev/acme-ml-prod/tpuray/serve-llm@{DIGEST}"

    def edit(c: dict[str, Any]) -> None:
        c["ray"]["image"] = f"us-east5-docker.pkg.dev/acme-ml-prod/tpuray/ray-tpu@{DIGEST}"
        c["cluster"]["binaryAuthorization"] = {"enforce": True, "allowedImages": [image, image]}

    assert errors("prod", edit) == [
        f"tpuray:cluster.binaryAuthorization.allowedImages[1]: {image!r} repeats "
        "tpuray:cluster.binaryAuthorization.allowedImages[0]; list it once"
    ]


def test_two_maintenance_exclusions_of_one_name_are_refused() -> None:
    again = {"name": "q1-long-training-run", "start": "2026-04-06T00:00:00Z", "end": "2026-06-30T00:00:00Z"}
    assert errors("prod", lambda c: c["cluster"]["maintenance"]["exclusions"].append(again)) == [
        "tpuray:cluster.maintenance.exclusions[1]: 'q1-long-training-run' repeats "
        "tpuray:cluster.maintenance.exclusions[0]; list it once; GKE keys exclusions by their name"
    ]


# ---------------------------------------------------------------------------- keys never read


def test_replicas_beside_autoscaling_are_refused_as_never_used() -> None:
    def edit(c: dict[str, Any]) -> None:
        c["workloads"]["serve"]["autoscaling"] = {"minReplicas": 1, "maxReplicas": 2}

    assert errors("prod", edit) == [
        "tpuray:workloads.serve.replicas: 2 is never used beside autoscaling, whose minReplicas and maxReplicas bound "
        "the replicas: remove it"
    ]


def test_allowed_images_without_enforce_are_refused_as_never_enforced() -> None:
    image = f"us-east5-docker.pkg.dev/acme-ml-prod/tpuray/serve-llm@{DIGEST}"
    assert errors("prod", lambda c: c["cluster"].update(binaryAuthorization={"allowedImages": [image]})) == [
        "tpuray:cluster.binaryAuthorization.allowedImages: never enforced without enforce: true; set enforce: true or "
        "remove the list"
    ]


def test_a_state_bucket_for_a_local_terraform_backend_is_refused_as_never_read() -> None:
    tf = {
        "backend": "local",
        "path": "tests/fixtures/terraform/foundation.tfstate",
        "bucket": "acme-ml-prod-tfstate",
        "outputs": {"network": "network"},
    }
    assert errors("prod", lambda c: c.update(terraform=tf)) == [
        "tpuray:terraform.bucket: the local backend never reads it; remove it or use backend gcs"
    ]


def test_a_state_path_for_a_gcs_terraform_backend_is_refused_as_never_read() -> None:
    tf = {
        "backend": "gcs",
        "bucket": "acme-ml-prod-tfstate",
        "path": "terraform.tfstate",
        "outputs": {"network": "network"},
    }
    assert errors("prod", lambda c: c.update(terraform=tf)) == [
        "tpuray:terraform.path: the gcs backend never reads it; remove it or use backend local"
    ]


# ---------------------------------------------------------------------------- values never reached


def test_a_checkpoint_interval_longer_than_the_run_is_refused() -> None:
    assert errors("prod", lambda c: c["workloads"]["train"].update(checkpointEvery=6000)) == [
        "tpuray:workloads.train.checkpointEvery: 6000 is more than steps (5000): the run writes no checkpoint before "
        "its last step, so a restart (maxFailures) starts over; use at most 5000"
    ]


def test_a_hung_gang_floor_at_the_jobs_deadline_is_refused() -> None:
    assert errors("dev", lambda c: c.update(observability={"hungGang": {"floorSeconds": 7200}})) == [
        "tpuray:observability.hungGang.floorSeconds: 7200 is not below the train job's activeDeadlineSeconds (7200): "
        "the job is stopped before a hung gang can be reported; use a smaller floor"
    ]


def test_an_admin_cidr_that_is_not_a_network_is_refused_once_not_as_a_repeat() -> None:
    assert errors("prod", lambda c: c["workloads"].update(adminCidrs=["10.128.0.1/16", "10.128.0.0/16"])) == [
        "tpuray:workloads.adminCidrs[0]: '10.128.0.1/16' is not a CIDR block (10.128.0.1/16 has host bits set); "
        "e.g. 10.128.0.0/16"
    ]


def test_a_stack_without_a_maintenance_policy_has_no_exclusion_to_repeat() -> None:
    raw = copy.deepcopy(STACKS["dev"])
    del raw["cluster"]["maintenance"]
    assert parse_stack_config(raw, "dev").cluster.maintenance is None
