"""Stand-in for GKE's KubeRay TPU webhook (its pod mutation), ported from its source.

Upstream: github.com/ai-on-gke/kuberay-tpu-webhook, main.go at commit ef658db45757 (2026-05-20),
which GKE's Ray operator add-on serves; its module is not on the Go proxy, so it is not built here.
Each function below is the Go function of the same name, and tests/test_substrate_tpu_webhook.py
holds one test per case of upstream's webhook_main_test.go for what is ported.

Ported: the pod mutation of a TPU worker that KubeRay creates (`mutate_pod`): the replica index and
TPU_WORKER_ID, taken from KubeRay's ray.io/worker-group-replica-index and ray.io/replica-host-index
labels when the operator sets them (RayMultiHostIndexing), else assigned from the group's existing
pods (the legacy path, what KubeRay v1.5.0 with its default feature gates needs); the `replicaIndex`
label (what Ray's KubeRay autoscaler provider groups a multi-host replica by), TPU_NAME,
TPU_WORKER_HOSTNAMES, hostname and subdomain (the headless service), the pod affinity on the GKE node
pool, MEGASCALE_* when MEGASCALE_NUM_SLICES is set, TPU_DEVICE_PLUGIN_*.
Not ported: the RayCluster validation (/validate; `tpuray check` has its own rules), Ironwood's
per-container ids and TPU_PROCESS_ADDRESSES (no tpu7x stack runs here), the informer-cache wait
(the server here lists pods from the API server at each request, under a lock).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from tpuray import labels

TPU_RESOURCE = labels.TPU_RESOURCE
LEGACY_REPLICA_INDEX = labels.TPU_WEBHOOK_REPLICA
RAY_CLUSTER = labels.RAY_CLUSTER
RAY_GROUP = labels.RAY_GROUP
REPLICA_INDEX = labels.RAY_REPLICA_INDEX
HOST_INDEX = labels.RAY_HOST_INDEX
REPLICA_NAME = labels.RAY_REPLICA_NAME
HEADLESS_SUFFIX = "headless"  # KubeRay utils.HeadlessServiceSuffix
MEGASCALE_PORT_BASE = 8081
GKE_NODEPOOL = labels.GKE_NODEPOOL

Patch = dict[str, Any]


class WebhookError(Exception):
    """A pod the webhook refuses: the message is upstream's error text."""


@dataclass(frozen=True)
class Slice:
    """One replica of a worker group (upstream's `slice`)."""

    cluster: str
    group: str
    namespace: str
    replica_index: int
    num_of_hosts: int


def check_name(name: str) -> str:
    """KubeRay's utils.CheckName: longer than 50 characters loses its head; no leading digit or punctuation."""
    if len(name) > 50:
        name = name[len(name) - 50 :]
    if name[0].isdigit() or not name[0].isalnum():
        name = "r" + name[1:]
    return name


def headless_service_name(cluster: str) -> str:
    return check_name(f"{cluster}-{HEADLESS_SUFFIX}")


def _quantity(value: Any) -> int:
    return int(str(value or "0"))


def container_requesting_tpus(*containers: dict[str, Any]) -> bool:
    for container in containers:
        res = container.get("resources") or {}
        if _quantity((res.get("limits") or {}).get(TPU_RESOURCE)) or _quantity(
            (res.get("requests") or {}).get(TPU_RESOURCE)
        ):
            return True
    return False


def num_tpu_chips_requested(*containers: dict[str, Any]) -> int:
    """Per container its request, else its limit; summed."""
    total = 0
    for container in containers:
        res = container.get("resources") or {}
        request = _quantity((res.get("requests") or {}).get(TPU_RESOURCE))
        total += request or _quantity((res.get("limits") or {}).get(TPU_RESOURCE))
    return total


def num_tpu_hosts_from_topology(topology: str, chips_per_host: int) -> int:
    if not topology:
        raise WebhookError("TPU topology not specified")
    chips = 1
    for dim in topology.split("x"):
        chips *= int(dim)
    return max(chips // chips_per_host, 1)


def gen_dns_hostnames(num_of_hosts: int, group: str, cluster: str, replica_index: int) -> str:
    if num_of_hosts == 0:
        raise WebhookError("workerGroupSpec NumOfHosts not set")
    service = headless_service_name(cluster)
    return ",".join(f"{group}-{replica_index}-{j}.{service}" for j in range(num_of_hosts))


def get_environment_variable(name: str, container: dict[str, Any]) -> tuple[str, bool]:
    for env in container.get("env") or []:
        if env["name"] == name:
            if env.get("value"):
                return env["value"], True
            if env.get("valueFrom") is not None:
                return "", True
    return "", False


def replica_index_for(slice_to_hosts: dict[Slice, list[int]] | None, cluster: str, group: str, namespace: str) -> int:
    """getReplicaIndex: the lowest replica with fewer pods than hosts, else the next new one."""
    if not slice_to_hosts:
        return 0
    lowest = None
    replicas = 0
    for sl, workers in slice_to_hosts.items():
        if (sl.cluster, sl.group, sl.namespace) == (cluster, group, namespace):
            replicas += 1
            if len(workers) < sl.num_of_hosts and (lowest is None or sl.replica_index < lowest):
                lowest = sl.replica_index
    return replicas if lowest is None else lowest


def next_worker_id(slice_to_hosts: dict[Slice, list[int]] | None, pod_slice: Slice) -> int:
    """getNextWorkerID: the lowest TPU_WORKER_ID not taken in the slice."""
    if not slice_to_hosts or not slice_to_hosts.get(pod_slice):
        return 0
    ids = sorted(slice_to_hosts[pod_slice])
    worker_id = 0
    last = 0
    for index, found in enumerate(ids):
        if index == 0:
            last = found
        elif found == last:
            raise WebhookError("Identical TPU_WORKER_ID assigned to multiple TPU workers in slice")
        if found != worker_id:
            break
        last = found
        worker_id += 1
    return worker_id


def slice_to_tpu_hosts(
    pods: list[dict[str, Any]], cluster: str, group: str, namespace: str, num_of_hosts: int
) -> dict[Slice, list[int]]:
    """getSliceToTPUHosts over the pods of the cluster's group (what upstream's lister returns)."""
    found: dict[Slice, list[int]] = defaultdict(list)
    for pod in pods:
        meta = pod["metadata"]
        pod_labels = meta.get("labels") or {}
        if (pod_labels.get(RAY_CLUSTER), pod_labels.get(RAY_GROUP)) != (cluster, group):
            continue
        if meta.get("deletionTimestamp") or meta.get("namespace") != namespace:
            continue
        containers = pod["spec"].get("containers") or []
        if not container_requesting_tpus(*containers):
            return dict(found)
        replica_label = pod_labels.get(LEGACY_REPLICA_INDEX, "")
        if not replica_label:
            continue
        existing = int(replica_label.split("-")[-1])
        tpu_containers = sum(1 for c in containers if container_requesting_tpus(c))
        for container in containers:
            if not container_requesting_tpus(container):
                continue
            value, _ = get_environment_variable("TPU_WORKER_ID", container)
            if not value:
                raise WebhookError("existing TPU worker missing TPU_WORKER_ID")
            found[Slice(cluster, group, namespace, existing, num_of_hosts)].append(int(value) // tpu_containers)
            break
    return dict(found)


def _add_env(patches: list[Patch], path: str, env: dict[str, Any], exists: bool) -> bool:
    if exists:
        patches.append({"op": "add", "path": f"{path}/-", "value": env})
    else:
        patches.append({"op": "add", "path": path, "value": [env]})
    return True


def affinity(pod: dict[str, Any], replica_index: int, group: str) -> dict[str, Any]:
    """injectAffinity: the replica's pods on one GKE node pool, no other replica's there."""
    pod_labels = pod["metadata"].get("labels") or {}
    cluster = pod_labels.get(RAY_CLUSTER, "")
    if REPLICA_NAME in pod_labels and HOST_INDEX in pod_labels:
        key, value = REPLICA_NAME, pod_labels[REPLICA_NAME]
    else:
        key, value = LEGACY_REPLICA_INDEX, f"{group}-{replica_index}"

    def req(k: str, op: str, *values: str) -> dict[str, Any]:
        return {"key": k, "operator": op, "values": list(values)} if values else {"key": k, "operator": op}

    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [req(key, "In", value), req(RAY_CLUSTER, "In", cluster)]},
                 "topologyKey": GKE_NODEPOOL}
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [req(key, "NotIn", value), req(RAY_CLUSTER, "In", cluster)]},
                 "topologyKey": GKE_NODEPOOL},
                {"labelSelector": {"matchExpressions": [req(RAY_CLUSTER, "NotIn", cluster), req(key, "Exists")]},
                 "topologyKey": GKE_NODEPOOL,
                 "namespaceSelector": {"matchExpressions": [
                     req("kubernetes.io/metadata.name", "NotIn", "kube-system")]}},
            ]
        },
    }  # fmt: skip


def mutate_pod(pod: dict[str, Any], existing: list[dict[str, Any]]) -> list[Patch]:
    """mutatePod: the JSON patch for a pod being created; `existing` are the pods already stored."""
    containers = pod["spec"].get("containers")
    if containers is None:
        raise WebhookError("Container path not specified")
    if not container_requesting_tpus(*containers):
        return []
    pod_labels = pod["metadata"].get("labels") or {}
    cluster = pod_labels.get(RAY_CLUSTER, "")
    if not cluster:
        raise WebhookError("Ray Pod created by KubeRay missing RayCluster label")
    group = pod_labels.get(RAY_GROUP, "")
    if not group:
        raise WebhookError("Ray Pod created by KubeRay missing Group label")
    namespace = pod["metadata"].get("namespace", "")
    topology = (pod["spec"].get("nodeSelector") or {}).get(labels.GKE_TPU_TOPOLOGY, "")
    if not topology:
        raise WebhookError("Ray Pod created by KubeRay missing TPU topology nodeSelector")
    num_of_hosts = num_tpu_hosts_from_topology(topology, num_tpu_chips_requested(*containers))
    patches: list[Patch] = []
    if REPLICA_INDEX in pod_labels and HOST_INDEX in pod_labels:
        replica_index, worker_id = int(pod_labels[REPLICA_INDEX]), int(pod_labels[HOST_INDEX])
    else:
        hosts = slice_to_tpu_hosts(existing, cluster, group, namespace, num_of_hosts)
        replica_index = replica_index_for(hosts, cluster, group, namespace)
        worker_id = next_worker_id(hosts, Slice(cluster, group, namespace, replica_index, num_of_hosts))
        patches.append(
            {"op": "add", "path": f"/metadata/labels/{LEGACY_REPLICA_INDEX}", "value": f"{group}-{replica_index}"}
        )
    service = headless_service_name(cluster)
    if num_of_hosts > 1:
        patches.append({"op": "add", "path": "/spec/hostname", "value": f"{group}-{replica_index}-{worker_id}"})
        patches.append({"op": "add", "path": "/spec/subdomain", "value": service})
        patches.append({"op": "add", "path": "/spec/affinity", "value": affinity(pod, replica_index, group)})
    tpu_index = 0  # upstream's tpuContainerIndex: TPU containers seen so far
    for i, container in enumerate(containers):
        if not container_requesting_tpus(container):
            continue
        path = f"/spec/containers/{i}/env"
        exists = bool(container.get("env"))

        def add(name: str, value: str, p: str = path) -> None:
            nonlocal exists
            exists = _add_env(patches, p, {"name": name, "value": value}, exists)

        if get_environment_variable("MEGASCALE_NUM_SLICES", container)[1]:
            if not get_environment_variable("MEGASCALE_SLICE_ID", container)[0]:
                add("MEGASCALE_SLICE_ID", str(replica_index))
            if not get_environment_variable("MEGASCALE_COORDINATOR_ADDRESS", container)[0]:
                add("MEGASCALE_COORDINATOR_ADDRESS", f"{group}-0-0.{service}")
            if not get_environment_variable("MEGASCALE_PORT", container)[0]:
                add("MEGASCALE_PORT", str(MEGASCALE_PORT_BASE))
        if num_of_hosts > 1:
            value, _ = get_environment_variable("TPU_WORKER_HOSTNAMES", container)
            if value in ("", "localhost"):
                add("TPU_WORKER_HOSTNAMES", gen_dns_hostnames(num_of_hosts, group, cluster, replica_index))
        value, _ = get_environment_variable("TPU_WORKER_ID", container)
        if value == "" or (value == str(tpu_index) and value != str(worker_id)):
            add("TPU_WORKER_ID", str(worker_id))
        if not get_environment_variable("TPU_NAME", container)[0]:
            add("TPU_NAME", f"{group}-{replica_index}")
        if not get_environment_variable("TPU_DEVICE_PLUGIN_HOST_IP", container)[1]:
            exists = _add_env(
                patches,
                path,
                {"name": "TPU_DEVICE_PLUGIN_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                exists,
            )
        if not get_environment_variable("TPU_DEVICE_PLUGIN_ADDR", container)[0]:
            add("TPU_DEVICE_PLUGIN_ADDR", "$(TPU_DEVICE_PLUGIN_HOST_IP):2112")
        tpu_index += 1
    return patches


def apply(pod: dict[str, Any], patches: list[Patch]) -> dict[str, Any]:
    """The pod with the webhook's JSON patch applied (the "add" operations it emits)."""
    out = copy.deepcopy(pod)
    for patch in patches:
        parts = patch["path"].strip("/").split("/")
        target = out
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
        last = parts[-1]
        if last == "-":
            target.append(patch["value"])
        else:
            target[last] = patch["value"]
    return out
