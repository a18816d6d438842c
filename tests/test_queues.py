"""tpuray:queues: its one-line config errors, and the Kueue objects and queued Ray objects the stacks render."""

from __future__ import annotations

from typing import Any

from conftest import mocked

from tests.fuzz_stack import write_stack
from tests.stack_edits import errors
from tpuray.config import read_stack_file, stacks_dir
from tpuray.config.checks import parse_stack_config
from tpuray.preview.mockrun import run_stack
from tpuray.preview.render import manifests


def _objects(stack: str, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in manifests(mocked(stack)) if o["kind"] == kind}


# ---------------------------------------------------------------------------- config


def test_a_quota_below_one_slice_of_its_pool_is_refused() -> None:
    assert errors("prod", lambda r: r["queues"]["teams"][1]["quotas"][0].update(chips=8, borrowingLimit=0)) == [
        "tpuray:queues.teams[1].quotas[0].chips: 8 (+0 borrowed) is below one v6e 4x4 slice of pool 'v6e-train' "
        "(16 chips); Kueue admits a slice whole or not at all: use 0 or at least 16"
    ]


def test_a_quota_on_a_tier_outside_the_pools_chain_is_refused() -> None:
    assert errors("dev", lambda r: r["queues"]["teams"][0]["quotas"][0].update(tier="reservation")) == [
        "tpuray:queues.teams[0].quotas[0].tier: 'reservation' is not a tier of pool 'v6e-dev'; valid: spot, on-demand"
    ]


def test_borrowing_without_a_cohort_is_refused() -> None:
    assert errors("dev", lambda r: r["queues"]["teams"][0]["quotas"][0].update(borrowingLimit=16)) == [
        "tpuray:queues.teams[0].quotas[0].borrowingLimit: 16 needs tpuray:queues.cohort to borrow from"
    ]


def test_a_priority_class_the_queues_do_not_declare_is_refused() -> None:
    assert errors("dev", lambda r: r["queues"]["teams"][0].update(priorityClass="high")) == [
        "tpuray:queues.teams[0].priorityClass: 'high' is not a priority class; valid: none: declare it in "
        "tpuray:queues.priorityClasses"
    ]


def test_a_training_job_the_workloads_team_can_never_admit_is_refused() -> None:
    assert errors("prod", lambda r: r["queues"]["teams"][0]["quotas"][0].update(borrowingLimit=0)) == [
        "tpuray:queues.teams[0].quotas: team 'training' may hold 16 chips of pool 'v6e-train' but "
        "tpuray:workloads.train needs 32 (2 x 16); Kueue would never admit it: raise chips or borrowingLimit"
    ]


def test_queues_without_a_team_in_the_workloads_namespace_are_refused() -> None:
    assert errors("dev", lambda r: r["queues"]["teams"][0].update(namespace="other")) == [
        "tpuray:queues.teams: no team's namespace is the workloads namespace 'ray'; the training RayJob needs a "
        "LocalQueue there: give one team that namespace"
    ]


def test_queued_provisioning_on_a_pool_that_does_not_start_with_flex_start_is_refused() -> None:
    assert errors("staging", lambda r: r["queues"].update(queuedProvisioning={"pools": ["v6e-train"]})) == [
        "tpuray:queues.queuedProvisioning.pools[0]: pool 'v6e-train' starts with the spot tier; GKE queues "
        "provisioning only on flex-start node pools: make flexStart the pool's first tier"
    ]


def _flex_pool(raw: dict[str, Any], chain: list[dict[str, Any]], seconds: int = 86400) -> None:
    raw["slicePools"].append(
        {"name": "v6e-flex", "generation": "v6e", "topology": "4x4", "slices": 1, "capacity": chain}
    )
    raw["queues"]["queuedProvisioning"] = {"pools": ["v6e-flex"], "maxRunDurationSeconds": seconds}


def test_queued_provisioning_on_a_pool_with_more_tiers_after_flex_start_is_refused() -> None:
    assert errors("dev", lambda r: _flex_pool(r, [{"flexStart": True}, {"onDemand": True}])) == [
        "tpuray:queues.queuedProvisioning.pools[0]: pool 'v6e-flex' has more capacity after flex-start; queued "
        "provisioning gives a whole slice or nothing, and GKE would auto-provision the others outside the "
        "ProvisioningRequest: keep flexStart alone"
    ]


def test_a_run_duration_over_seven_days_is_refused() -> None:
    assert errors("dev", lambda r: _flex_pool(r, [{"flexStart": True}], seconds=700000)) == [
        "tpuray:queues.queuedProvisioning.maxRunDurationSeconds: 700000 is invalid; GKE runs flex-start capacity at "
        "most 7 days: use 1 to 604800"
    ]


def test_a_team_named_twice_is_refused() -> None:
    team = {"name": "dev", "quotas": [{"pool": "v6e-dev", "chips": 16}]}
    assert errors("dev", lambda r: r["queues"].update(teams=[team, {**team, "namespace": "x"}])) == [
        "tpuray:queues.teams[1].name: 'dev' is used twice; team names must be unique"
    ]


# ---------------------------------------------------------------------------- rendered objects


def test_prod_has_a_cluster_queue_per_team_in_one_cohort_each_owning_one_v6e_slice_and_borrowing_the_other() -> None:
    queues = _objects("prod", "ClusterQueue")
    assert sorted(queues) == ["research", "training"]
    for cq in queues.values():
        assert cq["spec"]["cohortName"] == "acme-ml-prod"
        assert cq["spec"]["preemption"] == {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        }
        assert cq["spec"]["resourceGroups"][1] == {
            "coveredResources": ["google.com/tpu"],
            "flavors": [
                {
                    "name": "v6e-train-reservation",
                    "resources": [{"name": "google.com/tpu", "nominalQuota": 16, "borrowingLimit": 16}],
                },
                # The empty v5e fallback group is admitted at zero chips (tpuray/desired/queues.py fallback_flavors).
                {"name": "v6e-train-v5e-4x4-on-demand", "resources": [{"name": "google.com/tpu", "nominalQuota": 0}]},
            ],
        }
    assert queues["research"]["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "research"}
    }


def test_a_flavor_carries_the_pools_node_labels_and_no_tier_label_for_a_reservation() -> None:
    assert _objects("prod", "ResourceFlavor")["v6e-train-reservation"]["spec"] == {
        "nodeLabels": {
            "cloud.google.com/compute-class": "v6e-train",
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        }
    }


def test_a_spot_flavor_selects_spot_nodes_and_tolerates_their_taint() -> None:
    raw = read_stack_file(stacks_dir() / "Pulumi.dev.yaml")
    raw["queues"]["teams"][0]["quotas"][0]["tier"] = "spot"
    from tpuray.desired import queues

    (flavor,) = [o for o in queues.objects(parse_stack_config(raw, "dev")) if o["metadata"]["name"] == "v6e-dev-spot"]
    assert flavor["spec"]["nodeLabels"]["cloud.google.com/gke-spot"] == "true"
    assert flavor["spec"]["tolerations"] == [
        {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]


def test_the_training_rayjob_waits_suspended_in_its_teams_local_queue_with_its_priority() -> None:
    job = _objects("prod", "RayJob")["tpuray-prod-train"]
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "training"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "production"
    assert _objects("prod", "LocalQueue")["training"]["metadata"]["namespace"] == "ray"


def test_a_fallback_shape_flavor_selects_that_shape_in_the_pools_compute_class() -> None:
    assert _objects("prod", "ResourceFlavor")["v6e-train-v5e-4x4-on-demand"]["spec"] == {
        "nodeLabels": {
            "cloud.google.com/compute-class": "v6e-train",
            "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice",
            "cloud.google.com/gke-tpu-topology": "4x4",
        }
    }


def test_a_ray_object_on_a_pool_without_quota_is_not_queued() -> None:
    service = _objects("prod", "RayService")["tpuray-prod-serve"]
    assert "kueue.x-k8s.io/queue-name" not in service["metadata"]["labels"]
    assert "suspend" not in service["spec"]["rayClusterConfig"]


def test_a_stack_without_queues_renders_no_kueue_object_and_no_suspended_job(tmp_path) -> None:
    raw = read_stack_file(stacks_dir() / "Pulumi.dev.yaml")
    del raw["queues"]
    path = write_stack(tmp_path, "noqueues", raw)
    objects = manifests(run_stack(str(path)))
    assert [o["kind"] for o in objects if o["apiVersion"].startswith("kueue.x-k8s.io")] == []
    (job,) = [o for o in objects if o["kind"] == "RayJob"]
    assert "suspend" not in job["spec"]


def test_a_queued_provisioning_pool_is_a_queued_flex_start_node_pool_with_its_admission_check(tmp_path) -> None:
    raw = read_stack_file(stacks_dir() / "Pulumi.dev.yaml")
    _flex_pool(raw, [{"flexStart": True}])
    raw["queues"]["teams"][0]["quotas"].append({"pool": "v6e-flex", "chips": 16})
    path = write_stack(tmp_path, "flex", raw)
    run = run_stack(str(path))
    (pool,) = [r.inputs for r in run.of_type("gcp:container/nodePool:NodePool") if r.inputs["name"] == "v6e-flex-0"]
    assert pool["queuedProvisioning"] == {"enabled": True}
    assert pool["nodeConfig"]["flexStart"] is True
    assert pool["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert pool["management"]["autoRepair"] is False
    assert pool["autoscaling"]["totalMinNodeCount"] == 0
    objects = {(o["kind"], o["metadata"]["name"]): o for o in manifests(run)}
    assert objects[("ProvisioningRequestConfig", "dws-queued-provisioning")]["spec"] == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "managedResources": ["google.com/tpu"],
        "parameters": {"maxRunDurationSeconds": "86400"},
    }
    assert objects[("ClusterQueue", "dev")]["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "dws-queued-provisioning", "onFlavors": ["v6e-flex-flex-start"]}]
    }
    flavor = objects[("ResourceFlavor", "v6e-flex-flex-start")]["spec"]
    assert flavor["nodeLabels"]["cloud.google.com/gke-flex-start"] == "true"
    assert flavor["tolerations"] == [
        {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}
    ]


# ---------------------------------------------------------------------------- preview and cost


def test_the_quotas_cap_prods_queued_spend_at_the_reserved_rate_of_both_teams_nominal_chips() -> None:
    from tpuray.cost.queues import preview_lines, quota_cap

    cap = quota_cap(mocked("prod").config)
    assert cap is not None and round(cap.hourly or 0, 2) == 60.48  # 32 chips x $1.89 (prod's tpuray:prices)
    assert preview_lines(mocked("prod").config) == [
        "queue: ClusterQueue training (LocalQueue ray/training, cohort acme-ml-prod, priority production): "
        "v6e-train-reservation 16 chips (+16 borrowed)",
        "queue: ClusterQueue research (LocalQueue research/research, cohort acme-ml-prod, priority research): "
        "v6e-train-reservation 16 chips (+16 borrowed)",
        "queues: the quotas cap queued TPU spend at $60.48/h ($44,150/mo): v6e-train-reservation 32 chips x $1.89",
        "queues: the RayService of workloads.serve is not queued: no team has quota on pool 'v5e-serve' in "
        "namespace 'ray', so its slices are outside the cap",
    ]
