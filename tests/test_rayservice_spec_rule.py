"""KubeRay admission rules on hand-built objects, with literal messages: rayservice-spec
(tpuray/policies/rules_kuberay.py `_rayservice_spec`, after KubeRay's ValidateRayServiceMetadata
and ValidateRayServiceSpec), rayjob-lifecycle's edges, worker replica counts, versions, and
the Service port names of ray-ports-not-public (rules_security.py `_service_exposure`)."""

from __future__ import annotations

from typing import Any

import pytest

from tpuray.policies.core import Resource
from tpuray.policies.rules_kuberay import (
    _autoscaler,
    _group_resources_and_labels,
    _object_name,
    _rayjob_lifecycle,
    _rayservice_spec,
    _token_auth_version,
    _version,
    _worker_replicas,
)
from tpuray.policies.rules_security import _ports_not_public, _service_exposure

TIMEOUT = "ray.io/initializing-timeout"
INCREMENTAL = "NewClusterWithIncrementalUpgrade"
NEEDS = (
    "RayService/serve: NewClusterWithIncrementalUpgrade needs enableInTreeAutoscaling: true and "
    "upgradeStrategy.clusterUpgradeOptions (with gatewayClassName); KubeRay refuses it without"
)


def service(annotations: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> Resource:
    props = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "serve", "annotations": annotations or {}},
    }
    return Resource("kubernetes:ray.io/v1:RayService", "serve", {**props, "spec": spec or {}})


@pytest.mark.parametrize("timeout", ["1", "30m", "1.5h", "90s", ""])
def test_a_positive_initializing_timeout_or_none_passes(timeout: str) -> None:
    assert list(_rayservice_spec(service({TIMEOUT: timeout}), {})) == []


@pytest.mark.parametrize("timeout", ["0", "0s", "0.0s", "-5", "abc"])
def test_a_zero_negative_or_unparsable_initializing_timeout_is_refused(timeout: str) -> None:
    assert list(_rayservice_spec(service({TIMEOUT: timeout}), {})) == [
        f"RayService/serve: annotation ray.io/initializing-timeout is {timeout!r}; KubeRay needs a positive Go "
        "duration ('30m', '1h') or whole seconds"
    ]


def test_an_initializing_timeout_that_is_not_text_is_left_to_the_schema() -> None:
    assert list(_rayservice_spec(service({TIMEOUT: 5}), {})) == []


def test_a_head_service_with_metadata_but_no_name_passes() -> None:
    spec = {"rayClusterConfig": {"headGroupSpec": {"headService": {"metadata": {"labels": {"a": "b"}}}}}}
    assert list(_rayservice_spec(service(spec=spec), {})) == []


@pytest.mark.parametrize("kind", ["NewCluster", "None"])
def test_the_upgrade_types_kuberay_knows_pass(kind: str) -> None:
    assert list(_rayservice_spec(service(spec={"upgradeStrategy": {"type": kind}}), {})) == []


def test_an_unknown_upgrade_type_is_named() -> None:
    assert list(_rayservice_spec(service(spec={"upgradeStrategy": {"type": "Blue"}}), {})) == [
        "RayService/serve: spec.upgradeStrategy.type is 'Blue'; KubeRay allows NewClusterWithIncrementalUpgrade, "
        "NewCluster or None"
    ]


def test_an_incremental_upgrade_with_autoscaling_and_a_gateway_class_passes() -> None:
    spec = {
        "rayClusterConfig": {"enableInTreeAutoscaling": True},
        "upgradeStrategy": {"type": INCREMENTAL, "clusterUpgradeOptions": {"gatewayClassName": "gke-l7-rilb"}},
    }
    assert list(_rayservice_spec(service(spec=spec), {})) == []


def test_an_incremental_upgrade_without_autoscaling_is_refused_even_with_a_gateway_class() -> None:
    spec = {
        "rayClusterConfig": {"enableInTreeAutoscaling": False},
        "upgradeStrategy": {"type": INCREMENTAL, "clusterUpgradeOptions": {"gatewayClassName": "gke-l7-rilb"}},
    }
    assert list(_rayservice_spec(service(spec=spec), {})) == [NEEDS]


def test_an_incremental_upgrade_without_options_is_refused() -> None:
    assert list(_rayservice_spec(service(spec={"upgradeStrategy": {"type": INCREMENTAL}}), {})) == [NEEDS]


def test_a_public_service_exposing_ray_ports_by_name_lists_each_name_once() -> None:
    ports = [{"port": 80, "name": "dashboard"}, {"port": 81, "targetPort": "client"}, {"port": 82, "name": "client"}]
    found = list(_service_exposure("Service/x", "spec.", {"spec": {"type": "NodePort", "ports": ports}}, True))
    assert found == [
        "Service/x: spec.type is 'NodePort' and exposes 'dashboard', 'client'; Ray's head ports run code for anyone "
        "who reaches them: use ClusterIP (kubectl port-forward / IAP) or an internal LoadBalancer "
        "(networking.gke.io/load-balancer-type: Internal)"
    ]


# ---------------------------------------------------------------------------- rayjob-lifecycle boundaries

SELECTOR_REFUSED = (
    "RayJob/train: spec.clusterSelector needs a non-empty 'ray.io/cluster' and no suspend, backoffLimit > 0 or "
    "SidecarMode; KubeRay refuses the combination"
)
OWN_CLUSTER = {"rayClusterSpec": {}, "shutdownAfterJobFinishes": True}
SELECTOR = {"clusterSelector": {"ray.io/cluster": "shared"}}


def job(spec: dict[str, Any]) -> Resource:
    props = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "train"}, "spec": spec}
    return Resource("kubernetes:ray.io/v1:RayJob", "train", props)


@pytest.mark.parametrize(
    "spec",
    [
        {**OWN_CLUSTER, "ttlSecondsAfterFinished": 0},
        {**OWN_CLUSTER, "activeDeadlineSeconds": 1},
        {**OWN_CLUSTER, "submissionMode": "InteractiveMode"},
        {**OWN_CLUSTER, "submissionMode": "InteractiveMode", "backoffLimit": 0},
        SELECTOR,
        {**SELECTOR, "submissionMode": "K8sJobMode", "backoffLimit": 0},
    ],
    ids=["ttl 0", "deadline 1 s", "interactive", "interactive, backoff 0", "selector", "selector, K8sJobMode"],
)
def test_rayjob_settings_at_the_edge_of_what_kuberay_accepts_pass(spec: dict[str, Any]) -> None:
    assert list(_rayjob_lifecycle(job(spec), {})) == []


@pytest.mark.parametrize(
    "spec",
    [
        {**SELECTOR, "backoffLimit": 1},
        {**SELECTOR, "submissionMode": "SidecarMode"},
        {"clusterSelector": {"team": "ml"}, "submissionMode": "K8sJobMode"},
    ],
    ids=["backoff 1", "SidecarMode", "no ray.io/cluster"],
)
def test_a_cluster_selector_with_retries_a_sidecar_or_no_cluster_name_is_refused(spec: dict[str, Any]) -> None:
    assert list(_rayjob_lifecycle(job(spec), {})) == [SELECTOR_REFUSED]


def test_one_retry_in_interactive_mode_is_refused() -> None:
    spec = {**OWN_CLUSTER, "submissionMode": "InteractiveMode", "backoffLimit": 1}
    assert list(_rayjob_lifecycle(job(spec), {})) == [
        "RayJob/train: spec.backoffLimit is 1 in InteractiveMode; KubeRay refuses it: set 0"
    ]


def test_a_negative_min_replicas_names_the_field() -> None:
    containers = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    spec = {
        "headGroupSpec": containers,
        "workerGroupSpecs": [{"groupName": "w", "minReplicas": -1, "maxReplicas": 2, **containers}],
    }
    cluster = Resource(
        "kubernetes:ray.io/v1:RayCluster", "c", {"kind": "RayCluster", "metadata": {"name": "c"}, "spec": spec}
    )
    assert list(_worker_replicas(cluster, {})) == [
        "RayCluster/c: spec.workerGroupSpecs[0] (group 'w').minReplicas is -1; KubeRay refuses a negative count: use 0 "
        "or more"
    ]


def test_a_version_may_start_with_a_lowercase_v_only() -> None:
    assert [_version(v) for v in ("v2.52.0", " 2.52 ", "V2.52.0")] == [(2, 52, 0), (2, 52), None]


# ---------------------------------------------------------------------------- group params, labels, token auth

WHERE = "RayCluster/c: spec.workerGroupSpecs[0] (group 'w')"


def ray_cluster(spec: dict[str, Any] | None = None, worker: dict[str, Any] | None = None) -> Resource:
    containers = {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}
    body = {"headGroupSpec": containers, "workerGroupSpecs": [{"groupName": "w", **containers, **(worker or {})}]}
    props = {"kind": "RayCluster", "metadata": {"name": "c"}, "spec": {**body, **(spec or {})}}
    return Resource("kubernetes:ray.io/v1:RayCluster", "c", props)


def test_resources_in_both_places_name_each_ray_start_param() -> None:
    worker = {"rayStartParams": {"num-cpus": "1", "memory": "2"}, "resources": {"CPU": "1"}}
    assert list(_group_resources_and_labels(ray_cluster(worker=worker), {})) == [
        f"{WHERE} sets resources in both rayStartParams (num-cpus, memory) and resources; KubeRay refuses the pair: "
        "use only one"
    ]


def test_label_names_and_values_of_63_characters_pass_and_64_are_refused() -> None:
    labels = {"a" * 63: "b" * 63, "x/" + "a" * 64: "v", "k": "v" * 64, "n": 5}
    assert list(_group_resources_and_labels(ray_cluster(worker={"labels": labels}), {})) == [
        f"{WHERE}.labels key {'x/' + 'a' * 64!r} is not a valid Kubernetes label key; KubeRay refuses it",
        f"{WHERE}.labels['k'] is {'v' * 64!r}, not a valid Kubernetes label value (63 characters of letters, digits, "
        "'-', '_', '.'); KubeRay refuses it",
        f"{WHERE}.labels['n'] is 5, not a valid Kubernetes label value (63 characters of letters, digits, '-', '_', "
        "'.'); KubeRay refuses it",
    ]


@pytest.mark.parametrize(("version", "k8s"), [("2.52", False), ("2.52.0", False), ("2.55", True), ("2.55.0", True)])
def test_token_auth_from_its_first_ray_version_passes(version: str, k8s: bool) -> None:
    auth = {"mode": "token", "enableK8sTokenAuth": k8s}
    assert list(_token_auth_version(ray_cluster({"rayVersion": version, "authOptions": auth}), {})) == []


def test_kubernetes_token_auth_just_before_2_55_is_refused() -> None:
    auth = {"mode": "token", "enableK8sTokenAuth": True}
    assert list(_token_auth_version(ray_cluster({"rayVersion": "2.54.9", "authOptions": auth}), {})) == [
        "RayCluster/c: spec.authOptions.enableK8sTokenAuth needs rayVersion 2.55.0 or later, got '2.54.9'"
    ]


def test_min_replicas_above_a_max_of_zero_is_refused() -> None:
    assert list(_worker_replicas(ray_cluster(worker={"minReplicas": 2, "maxReplicas": 0}), {})) == [
        f"{WHERE}.minReplicas 2 is greater than maxReplicas 0; KubeRay refuses the group: make minReplicas <= maxReplicas"
    ]


def test_the_autoscaler_v2_variable_set_to_1_needs_in_tree_autoscaling() -> None:
    env = [{"name": "RAY_enable_autoscaler_v2", "value": "1"}]
    head = {"template": {"spec": {"containers": [{"name": "c", "image": "x", "env": env}]}}}
    cluster = Resource(
        "kubernetes:ray.io/v1:RayCluster",
        "c",
        {"kind": "RayCluster", "metadata": {"name": "c"}, "spec": {"headGroupSpec": head}},
    )
    assert list(_autoscaler(cluster, {})) == [
        "RayCluster/c: the head sets RAY_enable_autoscaler_v2=true but spec.enableInTreeAutoscaling is not true; "
        "KubeRay refuses it: set enableInTreeAutoscaling: true or drop the variable"
    ]


def test_kubernetes_token_auth_on_a_rayservice_is_refused() -> None:
    auth = {"mode": "token", "enableK8sTokenAuth": True}
    config = {"rayVersion": "2.55.0", "authOptions": auth, "headGroupSpec": {"template": {"spec": {"containers": []}}}}
    service = Resource(
        "kubernetes:ray.io/v1:RayService",
        "s",
        {"kind": "RayService", "metadata": {"name": "s"}, "spec": {"rayClusterConfig": config}},
    )
    assert list(_token_auth_version(service, {})) == [
        "RayService/s: spec.rayClusterConfig.authOptions.enableK8sTokenAuth is not supported for a RayService by "
        "KubeRay: remove it"
    ]


def test_an_ingress_marked_internal_by_its_class_annotation_may_route_to_a_ray_port() -> None:
    backend = {"service": {"name": "ray-head", "port": {"number": 8265}}}

    def ingress(annotations: dict[str, str]) -> Resource:
        props = {
            "kind": "Ingress",
            "metadata": {"name": "dash", "annotations": annotations},
            "spec": {"defaultBackend": backend},
        }
        return Resource("kubernetes:networking.k8s.io/v1:Ingress", "i", props)

    assert list(_ports_not_public(ingress({"kubernetes.io/ingress.class": "gce-internal"}), {})) == []
    assert list(_ports_not_public(ingress({"kubernetes.io/ingress.class": "gce"}), {})) == [
        "Ingress/dash: spec.defaultBackend.service.port is 8265 (dashboard), a Ray head port, behind a public Ingress: "
        "route only the Serve application through an authenticating proxy, or use an internal Ingress class"
    ]


V2_ON = {"enableInTreeAutoscaling": True, "autoscalerOptions": {"version": "v2"}}


def worker_restart_policy(policy: str) -> dict[str, Any]:
    return {"template": {"spec": {"restartPolicy": policy, "containers": [{"name": "c", "image": "x"}]}}}


@pytest.mark.parametrize("policy", ["Never", ""])
def test_a_worker_restart_policy_never_or_empty_passes_with_autoscaler_v2(policy: str) -> None:
    assert list(_autoscaler(ray_cluster(V2_ON, worker_restart_policy(policy)), {})) == []


def test_a_worker_restart_policy_always_is_refused_with_autoscaler_v2() -> None:
    assert list(_autoscaler(ray_cluster(V2_ON, worker_restart_policy("Always")), {})) == [
        f"{WHERE}.template.spec.restartPolicy is 'Always'; with autoscaler v2 KubeRay requires Never or unset"
    ]


def test_a_restart_policy_is_left_alone_when_v2_is_asked_for_without_the_in_tree_autoscaler() -> None:
    spec = {"autoscalerOptions": {"version": "v2"}}
    assert list(_autoscaler(ray_cluster(spec, worker_restart_policy("Always")), {})) == []


def test_a_rayservice_name_of_exactly_47_characters_passes() -> None:
    name = "s" * 47
    props = {"kind": "RayService", "metadata": {"name": name}, "spec": {}}
    assert list(_object_name(Resource("kubernetes:ray.io/v1:RayService", name, props), {})) == []


def test_a_public_serve_service_without_ports_is_refused_as_kuberay_fills_in_ray_ports() -> None:
    spec = {"rayClusterConfig": {"headGroupSpec": {}}, "serveService": {"spec": {"type": "LoadBalancer"}}}
    assert list(_ports_not_public(service(spec=spec), {})) == [
        "RayService/serve: spec.serveService.spec.type is 'LoadBalancer' and exposes the Ray head ports (8265, 10001, "
        "6379, 8000); Ray's head ports run code for anyone who reaches them: use ClusterIP (kubectl port-forward / "
        "IAP) or an internal LoadBalancer (networking.gke.io/load-balancer-type: Internal)"
    ]
