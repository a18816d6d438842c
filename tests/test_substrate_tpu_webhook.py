"""The TPU webhook stand-in (tpuray/local/substrate/tpu_webhook.py) held to upstream's own tests: one
test per case of ai-on-gke/kuberay-tpu-webhook webhook_main_test.go (commit ef658db45757) for the
functions ported, named after the Go test and case, with upstream's expected values written out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tpuray.local.substrate import tpu_webhook as wh
from tpuray.local.substrate.tpu_webhook import Slice, WebhookError

C, G, NS = "test-cluster", "test-group", "test-namespace"


def cpu_worker(cluster: str = C, group: str = G) -> dict[str, Any]:
    """getTestCPUWorker"""
    return {
        "metadata": {"name": "cpu-pod", "namespace": NS,
                     "labels": {"ray.io/is-ray-node": "yes", "ray.io/cluster": cluster, "ray.io/group": group}},
        "spec": {"containers": [{"name": "ray-worker"}], "nodeSelector": {}},
    }  # fmt: skip


def tpu_worker(cluster: str, accelerator: str, topology: str, tpu: str, group: str = G) -> dict[str, Any]:
    """getTestTPUWorker"""
    pod = cpu_worker(cluster, group)
    pod["metadata"]["name"] = "tpu-pod"
    pod["spec"]["containers"][0].update(
        {"resources": {"limits": {"google.com/tpu": tpu}, "requests": {"google.com/tpu": tpu}}, "env": []}
    )
    pod["spec"]["nodeSelector"] = {
        "cloud.google.com/gke-tpu-accelerator": accelerator,
        "cloud.google.com/gke-tpu-topology": topology,
    }
    return pod


def intercepted(template: dict[str, Any], num_pods: int, num_of_hosts: int) -> list[dict[str, Any]]:
    """getTestInterceptedTPUPods: pods the webhook already admitted, replica by replica."""
    pods = []
    for i in range(num_pods):
        replica, worker = divmod(i, num_of_hosts)
        pod = copy.deepcopy(template)
        name = f"{G}-{replica}"
        pod["spec"]["containers"][0]["env"] = [
            {"name": "TPU_WORKER_ID", "value": str(worker)},
            {"name": "TPU_NAME", "value": name},
        ]
        pod["metadata"]["name"] = f"intercepted-tpu-pod-{i}"
        pod["metadata"]["labels"]["replicaIndex"] = name
        pods.append(pod)
    return pods


def sl(replica: int, hosts: int) -> Slice:
    return Slice(C, G, NS, replica, hosts)


# --- Test_GetReplicaIndex
@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        pytest.param(None, 0, id="nil sliceToTPUHosts"),
        pytest.param({}, 0, id="empty sliceToTPUHosts"),
        pytest.param({sl(0, 1): []}, 0, id="single-host worker group missing worker"),
        pytest.param({sl(0, 1): [0]}, 1, id="single-host worker group with all workers created"),
        pytest.param({sl(0, 4): [0, 1, 2], sl(1, 4): [0, 1, 2, 3]}, 0, id="multi-host worker group missing worker"),
        pytest.param({sl(0, 4): [0, 1, 2, 3]}, 1, id="multi-host worker group with all workers created"),
        pytest.param({sl(r, 4): [0, 1, 2, 3] for r in range(3)}, 3, id="multi-slice worker group"),
    ],
)
def test_get_replica_index(hosts: dict[Slice, list[int]] | None, expected: int) -> None:
    assert wh.replica_index_for(hosts, C, G, NS) == expected


# --- Test_GetNextWorkerID
@pytest.mark.parametrize(
    ("hosts", "pod_slice", "expected"),
    [
        pytest.param(None, sl(0, 1), 0, id="nil sliceToTPUHosts"),
        pytest.param({}, sl(0, 1), 0, id="empty sliceToTPUHosts"),
        pytest.param({sl(0, 1): []}, sl(0, 1), 0, id="single-host worker group with empty worker ID list"),
        pytest.param({sl(0, 4): [3, 0, 1]}, sl(0, 4), 2, id="multi-host worker group with deleted worker"),
        pytest.param(
            {sl(0, 4): [0, 1, 2, 3], sl(1, 4): [0, 1, 2]}, sl(1, 4), 3,
            id="multi-host worker group with # worker IDs < NumOfHosts",
        ),
        pytest.param(
            {sl(r, 4): [0, 1, 2, 3] for r in range(3)}, sl(3, 4), 0,
            id="multi-slice worker group with all workers created",
        ),
    ],
)  # fmt: skip
def test_get_next_worker_id(hosts: dict[Slice, list[int]] | None, pod_slice: Slice, expected: int) -> None:
    assert wh.next_worker_id(hosts, pod_slice) == expected


def test_get_next_worker_id_multi_host_worker_group_with_incorrectly_assigned_worker_ids() -> None:
    with pytest.raises(WebhookError, match="^Identical TPU_WORKER_ID assigned to multiple TPU workers in slice$"):
        wh.next_worker_id({sl(0, 4): [0, 1, 2, 3], sl(1, 4): [0, 1, 1]}, sl(1, 4))


# --- Test_ContainerRequestingTPUs
def test_container_requesting_tpus_check_for_container_requesting_tpus_in_cpu_pods() -> None:
    assert wh.container_requesting_tpus(*cpu_worker()["spec"]["containers"]) is False


def test_container_requesting_tpus_check_for_container_requesting_tpus_in_tpu_pods() -> None:
    pod = tpu_worker(C, "tpu-v4-podslice", "2x2x2", "4")
    assert wh.container_requesting_tpus(*pod["spec"]["containers"]) is True


# --- Test_GetNumTPUHostsFromTopology
@pytest.mark.parametrize(
    ("topology", "chips_per_host", "expected"),
    [
        pytest.param("2x2x1", 4, 1, id="v4 2x2x1 topology"),
        pytest.param("2x2x4", 4, 4, id="v4 2x2x4 topology"),
        pytest.param("2x4", 4, 2, id="v5litepod-4 2x4 topology"),
        pytest.param("2x4", 8, 1, id="v5litepod-8 2x4 topology"),
        pytest.param("4x4", 4, 4, id="v5litepod-16 4x4 topology"),
    ],
)
def test_get_num_tpu_hosts_from_topology(topology: str, chips_per_host: int, expected: int) -> None:
    assert wh.num_tpu_hosts_from_topology(topology, chips_per_host) == expected


def test_get_num_tpu_hosts_from_topology_with_empty_topology() -> None:
    with pytest.raises(WebhookError, match="^TPU topology not specified$"):
        wh.num_tpu_hosts_from_topology("", 4)


# --- Test_GetNumTPUChipsRequested
def _container(request: str, limit: str) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if request:
        res["requests"] = {"google.com/tpu": request}
    if limit:
        res["limits"] = {"google.com/tpu": limit}
    return {"name": "c", "resources": res}


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        pytest.param([_container("0", "0")], 0, id="Single container, no TPUs"),
        pytest.param([_container("4", "4")], 4, id="Single container, explicit Request"),
        pytest.param([_container("", "4")], 4, id="Single container, only TPU limit specified"),
        pytest.param([_container("2", "2"), _container("2", "2")], 4, id="Multiple containers with TPU requests"),
        pytest.param([_container("1", "4"), _container("", "2")], 3, id="Multiple containers with TPU limits"),
        pytest.param(
            [_container("4", "4"), {"name": "sidecar", "resources": {"requests": {"cpu": "1"}}}], 4,
            id="Multiple containers with TPU and non-TPU",
        ),
    ],
)  # fmt: skip
def test_get_num_tpu_chips_requested(containers: list[dict[str, Any]], expected: int) -> None:
    assert wh.num_tpu_chips_requested(*containers) == expected


# --- Test_GenDNSHostnames
def test_gen_dns_hostnames_with_num_of_hosts_0() -> None:
    with pytest.raises(WebhookError, match="^workerGroupSpec NumOfHosts not set$"):
        wh.gen_dns_hostnames(0, G, C, 0)


def test_gen_dns_hostnames_with_num_of_hosts_1() -> None:
    assert wh.gen_dns_hostnames(1, G, C, 0) == "test-group-0-0.test-cluster-headless"


def test_gen_dns_hostnames_with_num_of_hosts_more_than_1() -> None:
    assert wh.gen_dns_hostnames(4, G, C, 1) == ",".join(
        f"test-group-1-{h}.test-cluster-headless" for h in range(4)
    )  # fmt: skip


def test_gen_dns_hostnames_with_long_raycluster_name() -> None:
    assert wh.gen_dns_hostnames(2, G, "extremely-long-raycluster-name-to-be-truncated", 1) == (
        "test-group-1-0.mely-long-raycluster-name-to-be-truncated-headless,"
        "test-group-1-1.mely-long-raycluster-name-to-be-truncated-headless"
    )


# --- Test_GenerateHeadlessServiceName
def test_generate_headless_service_name_under_50_chars_no_truncation() -> None:
    assert wh.headless_service_name("test-raycluster") == "test-raycluster-headless"


def test_generate_headless_service_name_over_50_chars_is_truncated() -> None:
    name = wh.headless_service_name("extremely-really-really-long-test-raycluster-name")
    assert name == "y-really-really-long-test-raycluster-name-headless"


# --- Test_GetEnvironmentVariable
ENV_CONTAINER = {
    "name": "ray-worker",
    "env": [
        {"name": "TPU_WORKER_ID", "value": "0"},
        {"name": "TPU_NAME", "value": "test-group-0"},
        {"name": "TPU_WORKER_HOSTNAMES", "value": "test-group-0-0.test-cluster-headless"},
        {"name": "TPU_DEVICE_PLUGIN_ADDR", "value": "$(TPU_DEVICE_PLUGIN_HOST_IP):2112"},
    ],
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("TPU_WORKER_ID", ("0", True), id="TPU_WORKER_ID"),
        pytest.param("TPU_NAME", ("test-group-0", True), id="TPU_NAME"),
        pytest.param("TPU_WORKER_HOSTNAMES", ("test-group-0-0.test-cluster-headless", True), id="TPU_WORKER_HOSTNAMES"),
        pytest.param("TPU_DEVICE_PLUGIN_HOST_IP", ("", False), id="TPU_DEVICE_PLUGIN_HOST_IP"),
        pytest.param(
            "TPU_DEVICE_PLUGIN_ADDR", ("$(TPU_DEVICE_PLUGIN_HOST_IP):2112", True), id="TPU_DEVICE_PLUGIN_ADDR"
        ),
    ],
)
def test_get_environment_variable(name: str, expected: tuple[str, bool]) -> None:
    assert wh.get_environment_variable(name, ENV_CONTAINER) == expected


# --- Test_getSliceToTPUHosts
def test_get_slice_to_tpu_hosts_with_nil_pod_list() -> None:
    assert wh.slice_to_tpu_hosts([], C, G, NS, 1) == {}


def test_get_slice_to_tpu_hosts_with_cpu_pod_list() -> None:
    assert wh.slice_to_tpu_hosts([cpu_worker() for _ in range(4)], C, G, NS, 1) == {}


def test_get_slice_to_tpu_hosts_with_tpu_pod_list() -> None:
    pods = intercepted(tpu_worker(C, "tpu-v4-podslice", "2x2x2", "4"), 128, 64)
    found = {k: sorted(v) for k, v in wh.slice_to_tpu_hosts(pods, C, G, NS, 64).items()}
    assert found == {sl(0, 64): list(range(64)), sl(1, 64): list(range(64))}


# --- Test_InjectAffinity
def test_inject_affinity_with_legacy_replica_index_and_cluster_labels() -> None:
    pod = tpu_worker(C, "tpu-v4-podslice", "2x2x1", "4", group="test-group-name")
    found = wh.affinity(pod, 0, "test-group-name")
    (together,) = found["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert together["labelSelector"]["matchExpressions"] == [
        {"key": "replicaIndex", "operator": "In", "values": ["test-group-name-0"]},
        {"key": "ray.io/cluster", "operator": "In", "values": ["test-cluster"]},
    ]
    other_replica, other_cluster = found["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert other_replica["labelSelector"]["matchExpressions"][0] == {
        "key": "replicaIndex", "operator": "NotIn", "values": ["test-group-name-0"]
    }  # fmt: skip
    assert other_cluster["labelSelector"]["matchExpressions"] == [
        {"key": "ray.io/cluster", "operator": "NotIn", "values": ["test-cluster"]},
        {"key": "replicaIndex", "operator": "Exists"},
    ]
    assert "namespaceSelector" in other_cluster


def test_inject_affinity_with_kuberay_native_labels() -> None:
    pod = tpu_worker(C, "tpu-v4-podslice", "2x2x1", "4", group="test-group-name")
    pod["metadata"]["labels"].update(
        {"ray.io/worker-group-replica-index": "0", "ray.io/replica-host-index": "0",
         "ray.io/worker-group-replica-name": "test-group-name-xh3hf"}
    )  # fmt: skip
    found = wh.affinity(pod, 0, "test-group-name")
    (together,) = found["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert together["labelSelector"]["matchExpressions"][0] == {
        "key": "ray.io/worker-group-replica-name", "operator": "In", "values": ["test-group-name-xh3hf"]
    }  # fmt: skip


# --- Test_MutatePod
def _mutate(pod: dict[str, Any], existing_pods: int = 0, num_of_hosts: int = 1) -> list[dict[str, Any]]:
    existing = intercepted(pod, existing_pods, num_of_hosts) if existing_pods else []
    return wh.mutate_pod(pod, existing)


def _env(patches: list[dict[str, Any]]) -> dict[str, Any]:
    """name -> value (or valueFrom) of every env var the patch adds."""
    found: dict[str, Any] = {}
    for patch in patches:
        if "/env" in patch["path"]:
            for env in patch["value"] if isinstance(patch["value"], list) else [patch["value"]]:
                found[env["name"]] = env.get("value", env.get("valueFrom"))
    return found


def _at(patches: list[dict[str, Any]], path: str) -> Any:
    return next((p["value"] for p in patches if p["path"] == path), None)


def test_mutate_pod_for_cpu_pod() -> None:
    assert _mutate(cpu_worker()) == []


def test_mutate_pod_missing_cluster_label() -> None:
    with pytest.raises(WebhookError, match="^Ray Pod created by KubeRay missing RayCluster label$"):
        _mutate(tpu_worker("", "tpu-v4-podslice", "2x2x1", "4"))


def test_mutate_pod_missing_container() -> None:
    pod = cpu_worker()
    pod["spec"]["containers"] = None
    with pytest.raises(WebhookError, match="^Container path not specified$"):
        _mutate(pod)


def test_mutate_pod_missing_gke_tpu_topology_node_selector() -> None:
    with pytest.raises(WebhookError, match="^Ray Pod created by KubeRay missing TPU topology nodeSelector$"):
        _mutate(tpu_worker(C, "tpu-v4-podslice", "", "4"))


def test_mutate_pod_in_single_host_tpu_worker_group() -> None:
    patches = _mutate(tpu_worker(C, "tpu-v4-podslice", "2x2x1", "4"), 0, 1)
    assert _at(patches, "/metadata/labels/replicaIndex") == "test-group-0"
    assert _env(patches) == {
        "TPU_WORKER_ID": "0",
        "TPU_NAME": "test-group-0",
        "TPU_DEVICE_PLUGIN_HOST_IP": {"fieldRef": {"fieldPath": "status.hostIP"}},
        "TPU_DEVICE_PLUGIN_ADDR": "$(TPU_DEVICE_PLUGIN_HOST_IP):2112",
    }
    assert _at(patches, "/spec/hostname") is None


@pytest.mark.parametrize(
    ("existing", "worker_id", "replica"),
    [
        pytest.param(0, "0", 0, id="first Pod in multi-host TPU worker group"),
        pytest.param(3, "3", 0, id="subsequent Pod in multi-host TPU worker group"),
        pytest.param(4, "0", 1, id="first multi-host Pod in subsequent multi-slice TPU worker group"),
        pytest.param(5, "1", 1, id="subsequent multi-host Pod in subsequent multi-slice TPU worker group"),
    ],
)
def test_mutate_pod_multi_host(existing: int, worker_id: str, replica: int) -> None:
    patches = _mutate(tpu_worker(C, "tpu-v4-podslice", "2x2x4", "4"), existing, 4)
    assert _at(patches, "/metadata/labels/replicaIndex") == f"test-group-{replica}"
    env = _env(patches)
    assert (env["TPU_WORKER_ID"], env["TPU_NAME"]) == (worker_id, f"test-group-{replica}")
    assert env["TPU_WORKER_HOSTNAMES"] == ",".join(
        f"test-group-{replica}-{h}.test-cluster-headless" for h in range(4)
    )  # fmt: skip
    assert _at(patches, "/spec/hostname") == f"test-group-{replica}-{worker_id}"
    assert _at(patches, "/spec/subdomain") == "test-cluster-headless"
    assert _at(patches, "/spec/affinity") is not None


def test_mutate_pod_multi_slice_tpu_worker_group() -> None:
    """KubeRay's own index labels set: no replicaIndex label patched, MEGASCALE_* injected."""
    pod = tpu_worker(C, "tpu-v4-podslice", "2x2x4", "4")
    pod["spec"]["containers"][0]["env"].append({"name": "MEGASCALE_NUM_SLICES", "value": "2"})
    pod["metadata"]["labels"].update({"ray.io/worker-group-replica-index": "0", "ray.io/replica-host-index": "0"})
    patches = _mutate(pod)
    assert _at(patches, "/metadata/labels/replicaIndex") is None
    env = _env(patches)
    assert (env["MEGASCALE_SLICE_ID"], env["MEGASCALE_COORDINATOR_ADDRESS"], env["MEGASCALE_PORT"]) == (
        "0",
        "test-group-0-0.test-cluster-headless",
        "8081",
    )
    assert env["TPU_WORKER_ID"] == "0"


def test_the_patch_applies_to_the_pod_as_json_patch_add_operations() -> None:
    """Not an upstream case: `apply` (used by the tests on the API server) follows RFC 6902 "add"."""
    pod = tpu_worker(C, "tpu-v4-podslice", "2x2x1", "4")
    done = wh.apply(pod, _mutate(pod))
    assert done["metadata"]["labels"]["replicaIndex"] == "test-group-0"
    assert [e["name"] for e in done["spec"]["containers"][0]["env"]] == [
        "TPU_WORKER_ID",
        "TPU_NAME",
        "TPU_DEVICE_PLUGIN_HOST_IP",
        "TPU_DEVICE_PLUGIN_ADDR",
    ]
