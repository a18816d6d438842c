"""Each stack under the Pulumi mock engine: cluster, slice pools and capacity chains, checked against literal shapes (tests/facts.py)."""

from __future__ import annotations

from tests import facts
from tpuray import capacity
from tpuray.preview.mockrun import StackRun

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"


def tpu_pools(run: StackRun, pool_name: str) -> list[dict]:
    return [
        r.inputs
        for r in run.of_type(NODE_POOL)
        if r.inputs["nodeConfig"].get("labels", {}).get("tpuray.dev/slice-pool") == pool_name
    ]


def test_cluster_has_the_ray_operator_addon_with_logging_and_monitoring(stack_run):
    (cluster,) = [r.inputs for r in stack_run.of_type(CLUSTER)]
    (ray,) = cluster["addonsConfig"]["rayOperatorConfigs"]
    assert ray == {
        "enabled": True,
        "rayClusterLoggingConfig": {"enabled": True},
        "rayClusterMonitoringConfig": {"enabled": True},
    }


def test_cluster_is_private_shielded_with_workload_identity_and_gcs_fuse(stack_run):
    (cluster,) = [r.inputs for r in stack_run.of_type(CLUSTER)]
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["enableShieldedNodes"] is True
    assert cluster["enableLegacyAbac"] is False
    assert cluster["workloadIdentityConfig"]["workloadPool"] == f"{stack_run.config.gcp.project}.svc.id.goog"
    assert cluster["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert cluster["releaseChannel"]["channel"] == stack_run.config.cluster.release_channel
    assert cluster["removeDefaultNodePool"] is True


def test_every_node_pool_runs_as_the_node_service_account_never_the_workload_one(stack_run):
    # The accounts are the Terraform foundation's (tests/test_foundation_contract.py): none is declared here.
    assert stack_run.of_type("gcp:serviceaccount/account:Account") == []
    node_sa, workload_sa = (
        facts.NODE_SERVICE_ACCOUNTS[stack_run.stack],
        facts.WORKLOAD_SERVICE_ACCOUNTS[stack_run.stack],
    )
    for pool in stack_run.of_type(NODE_POOL):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == node_sa
        assert pool.inputs["nodeConfig"]["serviceAccount"] != workload_sa


def test_cpu_pool_for_ray_heads_exists(stack_run):
    (cpu,) = [r.inputs for r in stack_run.of_type(NODE_POOL) if r.inputs["name"] == "ray-system"]
    assert cpu["nodeConfig"]["machineType"] == stack_run.config.cluster.cpu_pool.machine_type


def test_the_cpu_pool_is_sized_by_the_autoscaler_alone_so_a_new_minimum_updates_it_in_place():
    from tests.conftest import mocked

    (cpu,) = [r.inputs for r in mocked("prod").of_type(NODE_POOL) if r.inputs["name"] == "ray-system"]
    assert cpu["autoscaling"] == {"totalMinNodeCount": 2, "totalMaxNodeCount": 6}
    assert "initialNodeCount" not in cpu and "nodeCount" not in cpu


def test_multi_host_slices_get_one_node_pool_each_with_hosts_nodes_and_compact_tpu_topology(stack_run):
    for pool in stack_run.config.slice_pools:
        shape = facts.shape(stack_run.stack, pool.name)
        pools = tpu_pools(stack_run, pool.name)
        if shape.multi_host:
            assert len(pools) == pool.slices
            for node_pool in pools:
                size = node_pool.get("initialNodeCount") or node_pool["autoscaling"]["totalMaxNodeCount"]
                assert size == shape.hosts
                assert node_pool["placementPolicy"] == {"type": "COMPACT", "tpuTopology": shape.topology}
        else:
            (node_pool,) = pools
            # node_count: the provider resizes it in place (initial_node_count would replace the pool)
            assert node_pool["nodeCount"] == pool.slices
            assert "initialNodeCount" not in node_pool
            assert "placementPolicy" not in node_pool


def test_machine_types_are_the_ones_gke_documents_for_the_shape(stack_run):
    for pool, shapes in facts.POOLS[stack_run.stack].items():
        assert {p["nodeConfig"]["machineType"] for p in tpu_pools(stack_run, pool)} == {shapes[0].machine_type}


def test_dev_node_pools_literally():
    from tests.conftest import mocked

    pools = {p["name"]: p for p in (r.inputs for r in mocked("dev").of_type(NODE_POOL))}
    assert sorted(pools) == ["ray-system", "v6e-dev-0", "v6e-serve-dev"]
    train = pools["v6e-dev-0"]
    assert (train["nodeConfig"]["machineType"], train["initialNodeCount"]) == ("ct6e-standard-4t", 4)
    assert train["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    serve = pools["v6e-serve-dev"]
    assert (serve["nodeConfig"]["machineType"], serve["nodeCount"]) == ("ct6e-standard-4t", 1)


def test_first_capacity_tier_sets_spot_or_specific_reservation_affinity(stack_run):
    for pool in stack_run.config.slice_pools:
        tier = pool.capacity[0]
        for node_pool in tpu_pools(stack_run, pool.name):
            node_config = node_pool["nodeConfig"]
            assert node_config.get("spot", False) is (tier.kind is capacity.SPOT)
            affinity = node_config.get("reservationAffinity")
            if tier.kind is capacity.RESERVATION:
                assert affinity == {
                    "consumeReservationType": "SPECIFIC_RESERVATION",
                    "key": "compute.googleapis.com/reservation-name",
                    "values": [tier.reservation.name],
                }
            else:
                assert not affinity or affinity["consumeReservationType"] != "SPECIFIC_RESERVATION"


def test_tpu_pools_carry_the_compute_class_label_and_matching_taint(stack_run):
    for pool in stack_run.config.slice_pools:
        for node_pool in tpu_pools(stack_run, pool.name):
            node_config = node_pool["nodeConfig"]
            assert node_config["labels"]["cloud.google.com/compute-class"] == pool.name
            assert {
                "key": "cloud.google.com/compute-class",
                "value": pool.name,
                "effect": "NO_SCHEDULE",
            } in node_config["taints"]


def test_compute_class_priorities_follow_the_capacity_chain_in_order(stack_run):
    classes = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in stack_run.of_type(COMPUTE_CLASS)}
    for pool in stack_run.config.slice_pools:
        spec = classes[pool.name]
        expected = [(facts.shape(stack_run.stack, pool.name), t) for t in pool.capacity]
        for fb, shape in zip(pool.fallback, facts.fallbacks(stack_run.stack, pool.name), strict=True):
            expected += [(shape, t) for t in fb.capacity]
        assert len(spec["priorities"]) == len(expected)
        for priority, (shape, tier) in zip(spec["priorities"], expected, strict=True):
            assert priority["tpu"] == {"type": shape.accelerator, "count": shape.chips, "topology": shape.topology}
            assert priority.get("spot", False) is (tier.kind is capacity.SPOT)
            assert ("flexStart" in priority) is (tier.kind is capacity.FLEX_START)
            if tier.kind is capacity.RESERVATION:
                assert priority["reservations"] == {
                    "affinity": "Specific",
                    "specific": [{"name": tier.reservation.name}],
                }
        assert spec["whenUnsatisfiable"] == "DoNotScaleUp"
        assert spec["nodePoolAutoCreation"] == {"enabled": True}


def test_prod_falls_back_from_v6e_to_v5e_of_the_same_topology():
    from tests.conftest import mocked

    spec = next(
        r.inputs["spec"] for r in mocked("prod").of_type(COMPUTE_CLASS) if r.inputs["metadata"]["name"] == "v6e-train"
    )
    assert [(p["tpu"]["type"], p["tpu"]["topology"]) for p in spec["priorities"]][-1] == ("tpu-v5-lite-podslice", "4x4")


def test_prod_has_two_reserved_v6e_4x4_slices_then_spot_then_on_demand():
    from tests.conftest import mocked

    run = mocked("prod")
    pools = tpu_pools(run, "v6e-train")
    assert [p["name"] for p in pools] == ["v6e-train-0", "v6e-train-1"]
    assert [t.kind.key for t in run.config.pool("v6e-train").capacity] == ["reservation", "spot", "on-demand"]


def test_kubernetes_objects_use_the_provider_built_from_the_cluster(stack_run):
    (provider,) = stack_run.of_type("pulumi:providers:kubernetes")
    assert "gke-gcloud-auth-plugin" in provider.inputs["kubeconfig"]
    for obj in stack_run.kubernetes_objects():
        assert "gke-k8s" in obj.provider


def test_tpu7x_multi_host_pool_is_placed_by_a_workload_policy_not_tpu_topology(tmp_path):
    import copy

    import yaml

    from tpuray.config import stacks_dir
    from tpuray.preview.mockrun import run_stack

    doc = yaml.safe_load((stacks_dir() / "Pulumi.dev.yaml").read_text())
    doc = copy.deepcopy(doc)
    # Google's TPU table has TPU7x in us-central1-c only: capacity the dev project holds in us-east5-b.
    doc["config"]["tpuray:slicePools"][0].update(generation="tpu7x", topology="2x2x2", unlistedCapacity=True)
    path = tmp_path / "Pulumi.ironwood.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = run_stack(str(path))
    (policy,) = run.of_type("gcp:compute/resourcePolicy:ResourcePolicy")
    assert policy.inputs["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "2x2x2"}
    (pool,) = tpu_pools(run, "v6e-dev")
    assert pool["placementPolicy"] == {"type": "COMPACT", "policyName": policy.inputs["name"]}
    assert pool["initialNodeCount"] == 2


def test_compute_classes_auto_create_pools_with_the_node_service_account_not_the_default(stack_run):
    classes = stack_run.of_type(COMPUTE_CLASS)
    assert sorted(cc.inputs["metadata"]["name"] for cc in classes) == sorted(facts.POOLS[stack_run.stack])
    for cc in classes:
        assert cc.inputs["spec"]["nodePoolConfig"] == {"serviceAccount": facts.NODE_SERVICE_ACCOUNTS[stack_run.stack]}
