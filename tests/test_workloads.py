"""The KubeRay objects of each stack: hosts, chips, selectors, images, labels, auth and deadlines."""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

from tests import facts
from tpuray.preview.mockrun import StackRun

RAY_KINDS = ("RayJob", "RayService", "RayCluster")


def ray_objects(run: StackRun) -> list[dict[str, Any]]:
    return [r.manifest() for r in run.kubernetes_objects() if r.inputs["kind"] in RAY_KINDS]


def cluster_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    return {
        "RayJob": lambda: spec["rayClusterSpec"],
        "RayService": lambda: spec["rayClusterConfig"],
        "RayCluster": lambda: spec,
    }[obj["kind"]]()


def workload_of(run: StackRun, obj: dict[str, Any]):
    wl = run.config.workloads
    return {"RayJob": wl.train, "RayService": wl.serve, "RayCluster": wl.interactive}[obj["kind"]]


def slices_of(workload) -> int:
    return getattr(workload, "slices", None) or workload.replicas


def test_every_stack_declares_its_configured_workloads(stack_run):
    wl = stack_run.config.workloads
    kinds = sorted(o["kind"] for o in ray_objects(stack_run))
    expected = sorted(k for k, w in zip(RAY_KINDS, (wl.train, wl.serve, wl.interactive), strict=True) if w)
    assert kinds == expected


def expected_groups(run: StackRun, pool, role: str, slices: int) -> list[tuple[str, facts.Shape, list, int]]:
    """(group name, shape, the shape's tiers, replicas): one group per shape of the chain, the
    pool's own first, holding the slices when it is the only shape; a chain starts every group
    empty (its driver's demand scales them). Shapes are literal (tests/facts.py), not the catalog's."""
    shape = facts.shape(run.stack, pool.name)
    groups = [(f"{role}-{shape.pod_type}", shape, pool.capacity, 0 if pool.fallback else slices)]
    for fb, shape in zip(pool.fallback, facts.fallbacks(run.stack, pool.name), strict=True):
        groups.append((f"{role}-{shape.pod_type}", shape, fb.capacity, 0))
    return groups


ROLES = {"RayJob": "train", "RayService": "serve", "RayCluster": "interactive"}


def test_one_worker_group_per_shape_of_the_chain_the_first_holding_the_slices_when_alone(stack_run):
    for obj in ray_objects(stack_run):
        workload = workload_of(stack_run, obj)
        pool = stack_run.config.pool(workload.pool)
        groups = cluster_spec(obj)["workerGroupSpecs"]
        expected = expected_groups(stack_run, pool, ROLES[obj["kind"]], slices_of(workload))
        assert [(g["groupName"], g["replicas"]) for g in groups] == [(n, r) for n, _, _, r in expected]
        assert all(g["minReplicas"] == 0 and g["maxReplicas"] == slices_of(workload) for g in groups)
        assert cluster_spec(obj)["enableInTreeAutoscaling"] is (len(groups) > 1)


def test_prod_train_job_starts_its_v6e_and_v5e_groups_empty_so_its_cluster_is_ready_with_the_head_alone():
    from tests.conftest import mocked

    (job,) = [o for o in ray_objects(mocked("prod")) if o["kind"] == "RayJob"]
    assert [(g["groupName"], g["replicas"], g["maxReplicas"]) for g in cluster_spec(job)["workerGroupSpecs"]] == [
        ("train-v6e-16", 0, 2),
        ("train-v5litepod-16", 0, 2),
    ]


def test_tpu_worker_groups_have_the_slices_hosts_and_chips(stack_run):
    for obj in ray_objects(stack_run):
        pool = stack_run.config.pool(workload_of(stack_run, obj).pool)
        groups = cluster_spec(obj)["workerGroupSpecs"]
        for group, (_, shape, _, _) in zip(
            groups, expected_groups(stack_run, pool, ROLES[obj["kind"]], 1), strict=True
        ):
            assert group["numOfHosts"] == shape.hosts
            (container,) = group["template"]["spec"]["containers"]
            resources = container["resources"]
            assert resources["requests"]["google.com/tpu"] == str(shape.chips)
            assert resources["limits"]["google.com/tpu"] == str(shape.chips)


def test_dev_train_job_worker_group_literally():
    from tests.conftest import mocked

    (job,) = [o for o in ray_objects(mocked("dev")) if o["kind"] == "RayJob"]
    (group,) = cluster_spec(job)["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"], group["numOfHosts"]) == ("train-v6e-16", 1, 4)
    pod = group["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["google.com/tpu"] == "4"
    assert container["resources"]["requests"]["google.com/tpu"] == "4"
    # The shape and the class, no tier: GKE walks spot, then on-demand, for every replica.
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "4x4",
        "cloud.google.com/compute-class": "v6e-dev",
    }
    assert "affinity" not in pod
    assert {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert group["labels"] == {
        "tpuray.dev/slice-pool": "v6e-dev",
        "tpuray.dev/generation": "v6e",
        "tpuray.dev/tpu-pod-type": "v6e-16",
    }


def test_tpu_worker_groups_select_accelerator_topology_and_compute_class_and_no_tier(stack_run):
    for obj in ray_objects(stack_run):
        pool = stack_run.config.pool(workload_of(stack_run, obj).pool)
        groups = cluster_spec(obj)["workerGroupSpecs"]
        for group, (_, shape, tiers, _) in zip(
            groups, expected_groups(stack_run, pool, ROLES[obj["kind"]], 1), strict=True
        ):
            pod = group["template"]["spec"]
            assert pod["nodeSelector"] == {
                "cloud.google.com/gke-tpu-accelerator": shape.accelerator,
                "cloud.google.com/gke-tpu-topology": shape.topology,
                "cloud.google.com/compute-class": pool.name,
            }
            assert {
                "key": "cloud.google.com/compute-class",
                "operator": "Equal",
                "value": pool.name,
                "effect": "NoSchedule",
            } in pod["tolerations"]
            assert {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
            spot_toleration = {
                "key": "cloud.google.com/gke-spot",
                "operator": "Equal",
                "value": "true",
                "effect": "NoSchedule",
            }
            assert (spot_toleration in pod["tolerations"]) is any(t.kind.key == "spot" for t in tiers)


def test_worker_group_ray_labels_carry_pool_generation_and_pod_type_and_no_market_type(stack_run):
    for obj in ray_objects(stack_run):
        pool = stack_run.config.pool(workload_of(stack_run, obj).pool)
        groups = cluster_spec(obj)["workerGroupSpecs"]
        for group, (_, shape, _, _) in zip(
            groups, expected_groups(stack_run, pool, ROLES[obj["kind"]], 1), strict=True
        ):
            assert group["labels"] == {
                "tpuray.dev/slice-pool": pool.name,
                "tpuray.dev/generation": shape.generation,
                "tpuray.dev/tpu-pod-type": shape.pod_type,
            }


def test_head_runs_on_the_cpu_pool_with_no_ray_work_and_a_cluster_ip_service(stack_run):
    for obj in ray_objects(stack_run):
        head = cluster_spec(obj)["headGroupSpec"]
        assert head["template"]["spec"]["nodeSelector"] == {"tpuray.dev/pool": "ray-system"}
        assert head["rayStartParams"]["num-cpus"] == "0"
        assert head["serviceType"] == "ClusterIP"
        container = head["template"]["spec"]["containers"][0]
        assert "google.com/tpu" not in container["resources"]["requests"]


def test_head_and_workers_use_the_same_pinned_tpu_image(stack_run):
    image = f"rayproject/ray:{stack_run.config.ray.version}-{stack_run.config.ray.python}-tpu"
    for obj in ray_objects(stack_run):
        spec = cluster_spec(obj)
        images = {
            c["image"]
            for g in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
            for c in g["template"]["spec"]["containers"]
        }
        assert images == {image}
        assert spec["rayVersion"] == stack_run.config.ray.version


def test_ray_token_authentication_is_on(stack_run):
    for obj in ray_objects(stack_run):
        assert cluster_spec(obj)["authOptions"] == {"mode": "token"}


def test_train_job_has_deadlines_and_cleans_up(stack_run):
    train = stack_run.config.workloads.train
    (job,) = [o for o in ray_objects(stack_run) if o["kind"] == "RayJob"]
    spec = job["spec"]
    assert spec["activeDeadlineSeconds"] == train.active_deadline_seconds
    assert spec["backoffLimit"] == train.backoff_limit
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["ttlSecondsAfterFinished"] == train.ttl_seconds_after_finished


def test_train_entrypoint_passes_the_slice_shape_to_the_app(stack_run):
    train = stack_run.config.workloads.train
    shape = facts.shape(stack_run.stack, train.pool)
    (job,) = [o for o in ray_objects(stack_run) if o["kind"] == "RayJob"]
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "ray_apps.train"]
    args = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert args["--accelerator-type"] == shape.ray_accelerator_type
    assert args["--topology"] == shape.topology
    assert args["--hosts-per-slice"] == str(shape.hosts)
    assert args["--chips-per-host"] == str(shape.chips)
    assert args["--slices"] == str(train.slices)
    assert args["--storage-uri"] == train.storage_uri
    runtime_env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    # The bundle by content hash under the stack's bundleUri; no pip: the image carries the deps.
    assert re.fullmatch(
        re.escape(stack_run.config.workloads.bundle_uri) + r"/tpuray-apps-[0-9a-f]{16}\.zip", runtime_env["working_dir"]
    )
    assert set(runtime_env) == {"working_dir"}


def test_serve_service_upgrades_on_a_new_cluster_without_no_op_thresholds_and_has_a_topology(stack_run):
    serve = stack_run.config.workloads.serve
    (service,) = [o for o in ray_objects(stack_run) if o["kind"] == "RayService"]
    spec = service["spec"]
    # KubeRay ignores the unhealthy thresholds since late 2023 (kuberay PRs 1664, 1665).
    assert "serviceUnhealthySecondThreshold" not in spec and "deploymentUnhealthySecondThreshold" not in spec
    assert spec["upgradeStrategy"] == {"type": "NewCluster"}
    app, *others = yaml.safe_load(spec["serveConfigV2"])["applications"]
    shape = facts.shape(stack_run.stack, serve.pool)
    if serve.backend == "llm":  # Ray's own OpenAI app carrying the LLMConfig
        assert app["import_path"] == "ray.serve.llm:build_openai_app"
        (llm_config,) = app["args"]["llm_configs"]
        topology = (llm_config["accelerator_type"], llm_config["accelerator_config"]["topology"])
    else:
        assert app["import_path"] == "ray_apps.serve:build_app"
        assert app["args"]["backend"] == serve.backend
        topology = (app["args"]["accelerator_type"], app["args"]["topology"])
    assert topology == (shape.ray_accelerator_type, shape.topology)
    # Only an llm app gets the /healthz app beside it (the checkpoint app serves its own).
    assert [(o["route_prefix"], o["import_path"], o["args"]["application"]) for o in others] == (
        [("/healthz", "ray_apps.health_app:build_app", "tpuray-serve")] if serve.backend == "llm" else []
    )


def test_nothing_is_exposed_outside_the_cluster(stack_run):
    for r in stack_run.kubernetes_objects():
        kind = r.inputs["kind"]
        assert kind not in ("Service", "Ingress")
        if kind in RAY_KINDS:
            head = cluster_spec(r.manifest())["headGroupSpec"]
            assert head.get("serviceType", "ClusterIP") == "ClusterIP"
            assert not head.get("enableIngress", False)


def test_workload_identity_binds_the_training_kubernetes_service_accounts_to_the_workloads_gsa(stack_run):
    accounts = {
        r.inputs["metadata"]["name"]: r.inputs
        for r in stack_run.kubernetes_objects()
        if r.inputs["kind"] == "ServiceAccount"
    }
    for name in ("ray-head", "ray-worker"):
        gsa = accounts[name]["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
        assert gsa == facts.WORKLOAD_SERVICE_ACCOUNTS[stack_run.stack]
        assert gsa != facts.NODE_SERVICE_ACCOUNTS[stack_run.stack]
    bindings = {
        b.inputs["member"]: b.inputs["role"] for b in stack_run.of_type("gcp:serviceaccount/iAMMember:IAMMember")
    }
    ns, pool = stack_run.config.workloads.namespace, f"{stack_run.config.gcp.project}.svc.id.goog"
    assert bindings[f"serviceAccount:{pool}[{ns}/ray-head]"] == "roles/iam.workloadIdentityUser"
    assert bindings[f"serviceAccount:{pool}[{ns}/ray-worker]"] == "roles/iam.workloadIdentityUser"
