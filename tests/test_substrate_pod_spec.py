"""What the pod runner makes of a container the KubeRay operator wrote (tpuray/local/substrate/pod_spec.py,
pod_runner.py): the kubelet's env and argv work, and each rewrite it lists, on literal containers
shaped as ray-operator v1.5.0's BuildPod writes them."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tpuray.local.substrate import pod_runner as pod_runner_module
from tpuray.local.substrate import pod_spec
from tpuray.local.substrate.pod_runner import PodRunner

POD: dict[str, Any] = {
    "metadata": {
        "name": "c1-train-v6e-16-worker-abcde",
        "namespace": "ray",
        "uid": "u-1",
        "labels": {"ray.io/cluster": "c1", "ray.io/group": "train-v6e-16", "ray.io/node-type": "worker"},
    },
    "spec": {"nodeName": "gke-node-0", "serviceAccountName": "ray-worker"},
    "status": {"podIP": "10.80.0.3", "hostIP": "127.0.0.1"},
}


def ports_from(start: int):
    counter = itertools.count(start)
    return lambda: next(counter)


def test_dollar_paren_names_an_earlier_variable_and_double_dollar_is_a_literal_dollar() -> None:
    env = {"A": "x"}
    assert pod_spec.expand("$(A)-$(B)-$$(A)", env) == "x-$(B)-$(A)"


def test_the_node_type_name_comes_from_the_pods_group_label_as_kuberay_writes_it() -> None:
    container = {
        "name": "ray-worker",
        "resources": {"limits": {"cpu": "8", "memory": "32Gi"}},
        "env": [
            {"name": "RAY_NODE_TYPE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/group']"}}},
            {"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Gi"}}},
            {"name": "ADDR", "value": "$(MY_IP):6379"},
        ],
    }
    env = pod_spec.container_env(POD, container, {"HOME": "/home/ray"})
    assert env == {
        "HOME": "/home/ray",
        "RAY_NODE_TYPE_NAME": "train-v6e-16",
        "RAY_CLOUD_INSTANCE_ID": "c1-train-v6e-16-worker-abcde",
        "MY_IP": "10.80.0.3",
        "MEM": "32",
        "ADDR": "10.80.0.3:6379",
    }


def test_a_secret_env_source_is_refused_by_name() -> None:
    container = {"name": "c", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    with pytest.raises(pod_spec.PodSpecError, match=r"^env T: \['secretKeyRef'\] is not provided by the pod runner$"):
        pod_spec.container_env(POD, container, {})


def test_the_head_ray_start_gets_its_own_ports_loopback_and_a_small_object_store() -> None:
    ports = pod_spec.PortMap()
    script = (
        "ulimit -n 65536; ray start --head  --block  --dashboard-agent-listen-port=52365  "
        "--dashboard-host=0.0.0.0  --metrics-export-port=8080  --num-cpus=0 "
    )
    out = pod_spec.rewrite_ray_start(script, ports, ports_from(41000), head=True)
    assert out == (
        "ulimit -n 65536; ray start --node-ip-address=127.0.0.1 --object-store-memory=104857600 "
        "--port=41002 --dashboard-port=41003 --ray-client-server-port=41004 --head  --block  "
        "--dashboard-agent-listen-port=41000  --dashboard-host=127.0.0.1  --metrics-export-port=41001  --num-cpus=0 "
    )
    assert ports.ports == {52365: 41000, 8080: 41001, 6379: 41002, 8265: 41003, 10001: 41004}


def test_a_worker_reaches_the_head_service_at_the_port_of_the_pod_behind_it() -> None:
    seen = []

    def resolve(service: str, namespace: str, port: int) -> int:
        seen.append((service, namespace, port))
        return 41002

    script = "ulimit -n 65536; ray start  --address=c1-head-svc.ray.svc.cluster.local:6379  --block"
    assert (
        pod_spec.rewrite_services(script, resolve) == "ulimit -n 65536; ray start  --address=127.0.0.1:41002  --block"
    )
    assert seen == [("c1-head-svc", "ray", 6379)]


def test_the_heads_own_address_follows_its_port_map() -> None:
    ports = pod_spec.PortMap({6379: 41002})
    assert pod_spec.rewrite_local("127.0.0.1:6379", ports) == "127.0.0.1:41002"
    assert pod_spec.rewrite_local("http://localhost:8265/api", ports) == "http://127.0.0.1:8265/api"


def test_a_worker_pods_serve_proxy_binds_the_pods_own_ports_and_its_probe_follows() -> None:
    ports = pod_spec.PortMap({52365: 41010})
    env = pod_spec.serve_proxy_env(ports, ports_from(41020), head=False)
    assert env == {"RAY_SERVE_WORKER_PROXY_HTTP_PORT": "41020", "RAY_SERVE_WORKER_PROXY_GRPC_PORT": "41021"}
    # KubeRay v1.5.0's RayService worker readiness probe, as the pod runner runs it
    probe = "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success && wget -T 10 -q -O- http://localhost:8000/-/healthz | grep success"  # noqa: E501
    assert pod_spec.rewrite_local(probe, ports) == (
        "wget -T 2 -q -O- http://127.0.0.1:41010/api/local_raylet_healthz | grep success && "
        "wget -T 10 -q -O- http://127.0.0.1:41020/-/healthz | grep success"
    )


def test_the_head_pods_serve_proxy_keeps_serves_own_ports_which_ray_exempts_from_the_override() -> None:
    ports = pod_spec.PortMap()
    assert pod_spec.serve_proxy_env(ports, ports_from(41020), head=True) == {}
    assert ports.get(8000, ports_from(41030)) == 8000


def test_a_container_without_a_command_is_refused_by_name() -> None:
    with pytest.raises(pod_spec.PodSpecError, match=r"^container 'c' has no command"):
        pod_spec.argv({"name": "c"}, {})


def test_volumes_are_staged_then_bound_at_their_mount_paths_in_a_private_mount_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    container = {
        "volumeMounts": [
            {"name": "token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "shm", "mountPath": "/dev/shm"},
        ]
    }
    volumes = {"token": ("bind", "/w/pods/p/volumes/token"), "tmp": ("bind", "/w/pods/p/volumes/tmp"),
               "shm": ("tmpfs", "size=1048576")}  # fmt: skip
    monkeypatch.setattr(pod_runner_module, "IMAGE_PATHS", (Path("/w/checkout"),))
    assert PodRunner._mounts(container, volumes, Path("/w/image-bin")).splitlines() == [
        "set -e",
        "mount -t tmpfs tmpfs /run",
        "mkdir -p /run/tpuray-volumes/image",
        "mount --bind '/w/image-bin' /run/tpuray-volumes/image",
        "mkdir -p /run/tpuray-volumes/code0 && mount --bind '/w/checkout' /run/tpuray-volumes/code0",
        "mkdir -p /run/tpuray-volumes/1 && mount --bind '/w/pods/p/volumes/tmp' /run/tpuray-volumes/1",
        "mkdir -p /run/tpuray-volumes/2 && mount --bind '/w/pods/p/volumes/token' /run/tpuray-volumes/2",
        "mount -t tmpfs tmpfs /home",
        "mkdir -p /home/ray",
        "mkdir -p '/dev/shm' && mount -t tmpfs -o size=1048576 tmpfs '/dev/shm'",
        "mkdir -p '/tmp' && mount --bind /run/tpuray-volumes/1 '/tmp'",
        "mkdir -p '/var/run/secrets/kubernetes.io/serviceaccount' && mount --bind /run/tpuray-volumes/2 "
        "'/var/run/secrets/kubernetes.io/serviceaccount'",
        "mkdir -p '/w/checkout' && mount --bind /run/tpuray-volumes/code0 '/w/checkout'",
        "mount --bind /run/tpuray-volumes/image /usr/local/bin",
        "cd /home/ray",
        'exec "$@"',
    ]


def test_a_tpu_container_gets_the_device_plugins_environment_from_its_node_selectors() -> None:
    pod = {"spec": {"nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                     "cloud.google.com/gke-tpu-topology": "4x4"}}}  # fmt: skip
    container = {"resources": {"limits": {"google.com/tpu": "4"}}}
    assert PodRunner._device_env(pod, container) == {"TPU_ACCELERATOR_TYPE": "v6e-16", "TPU_TOPOLOGY": "4x4"}


def test_the_autoscaler_sidecar_is_pointed_at_the_heads_own_gcs_port() -> None:
    ports = pod_spec.PortMap({6379: 41002})
    script = "ray kuberay-autoscaler --cluster-name c1 --cluster-namespace ray"
    assert pod_spec.rewrite_ray_start(script, ports, ports_from(42000), head=True) == (
        "ray kuberay-autoscaler --gcs-address=127.0.0.1:41002 --cluster-name c1 --cluster-namespace ray"
    )


def _run(name: str, worker: bool = True, ready: bool = False, age_s: float = 0.0) -> pod_runner_module.RunningPod:
    run = pod_runner_module.RunningPod("u-" + name, "ray", name, "10.80.0.9", Path("/w") / name, worker=worker,
                                       ready=ready)  # fmt: skip
    run.started_at -= age_s
    return run


def test_a_third_worker_pod_waits_while_two_are_starting_but_a_head_does_not() -> None:
    starting = [_run("w-0"), _run("w-1")]
    head = {"metadata": {"labels": {"ray.io/node-type": "head"}}}
    assert (pod_runner_module.paced(POD, starting), pod_runner_module.paced(head, starting)) == (True, False)


def test_a_ready_worker_or_one_starting_for_over_a_minute_no_longer_holds_the_next() -> None:
    assert pod_runner_module.paced(POD, [_run("w-0"), _run("w-1", ready=True)]) is False
    assert pod_runner_module.paced(POD, [_run("w-0"), _run("w-1", age_s=61.0)]) is False
    assert pod_runner_module.paced(POD, [_run("w-0"), _run("head", worker=False)]) is False
