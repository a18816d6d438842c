"""What rules_stack reads as a stack's TPU providers (node pools and ComputeClass priorities)
and a node pool's slice shape, on hand-built resources: tpu-topology-provided judges every
Ray TPU group against this list. Then each stack rule and the rules_tpu group rules path by
path on hand-built resources (the tests that kill their mutants; docs/testing.md, "Reading
survivors"). Over 400 lines because it is the one file of hand-built rule inputs that
benchmarks/mutation_run.py runs for every policies group (POLICY_TESTS); a new file would
have to join that list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpuray.policies.core import UNKNOWN, Finding, Resource
from tpuray.policies.rules_stack import (
    Provider,
    _compute_class_service_account,
    _node_pool_slice_shape,
    _spot_has_fallback,
    _topology_provided,
    node_pool_shape,
    providers,
)
from tpuray.policies.rules_tpu import _chips_per_host, _node_selectors, _num_of_hosts, _ray_labels

POOL = "gcp:container/nodePool:NodePool"
CC_LABEL = "cloud.google.com/compute-class"


def pool(
    name: str, machine: Any, placement: dict[str, Any] | None = None, labels: dict[str, Any] | None = None
) -> Resource:
    node_config = {"machineType": machine, "labels": labels or {}}
    return Resource(POOL, name, {"name": name, "nodeConfig": node_config, "placementPolicy": placement or {}})


def compute_class(name: Any, priorities: list[dict[str, Any]]) -> Resource:
    props = {"kind": "ComputeClass", "metadata": {"name": name}, "spec": {"priorities": priorities}}
    return Resource("kubernetes:cloud.google.com/v1:ComputeClass", "cc", props)


def test_providers_are_the_tpu_pools_then_each_complete_tpu_priority() -> None:
    resources = [
        pool("slice", "ct6e-standard-4t", {"type": "COMPACT", "tpuTopology": "4x4"}, {CC_LABEL: "v6e"}),
        pool("host", "ct6e-standard-4t", labels={CC_LABEL: 5}),
        pool("cpu", "n2-standard-8"),
        compute_class(
            "big",
            [
                {"tpu": {"type": "tpu-v6e-slice", "topology": "2x4", "count": 8}},
                {"tpu": {"type": "tpu-v6e-slice"}},
                {"tpu": {"topology": "4x4"}},
                {"machineFamily": "n2"},
            ],
        ),
        compute_class(None, [{"tpu": {"type": "tpu-v5p-slice", "topology": "2x2x1"}}]),
    ]
    assert providers(resources) == [
        Provider("NodePool slice", "v6e", "tpu-v6e-slice", "4x4", 4),
        Provider("NodePool host", None, "tpu-v6e-slice", "2x2", 4),
        Provider("ComputeClass/big", "big", "tpu-v6e-slice", "2x4", 8),
        Provider("ComputeClass/cc", None, "tpu-v5p-slice", "2x2x1", None),
    ]


def test_a_pool_without_placement_is_its_machines_single_host_slice() -> None:
    ps = node_pool_shape(pool("host", "ct5p-hightpu-4t"), [])
    assert ps is not None and ps.problem is None and ps.shape is not None
    assert (ps.shape.generation, ps.shape.topology, ps.shape.hosts) == ("v5p", "2x2x1", 1)


def test_a_pool_whose_topology_is_unknown_during_preview_has_no_shape_yet() -> None:
    assert node_pool_shape(pool("p", "ct6e-standard-4t", {"tpuTopology": UNKNOWN}), []) is None


def test_an_empty_policy_name_leaves_the_placement_topology_in_charge() -> None:
    ps = node_pool_shape(pool("p", "ct6e-standard-4t", {"policyName": "", "tpuTopology": "4x4"}), [])
    assert ps is not None and ps.shape is not None and (ps.shape.topology, ps.shape.hosts) == ("4x4", 4)


def test_a_pool_without_a_machine_type_is_not_a_tpu_pool() -> None:
    assert node_pool_shape(pool("p", None), []) is None


def test_a_group_without_a_topology_selector_is_left_to_tpu_node_selectors_and_the_next_group_is_judged() -> None:
    def group(name: str, selector: dict[str, str]) -> dict[str, Any]:
        tpu = {"google.com/tpu": 4}
        container = {"name": "w", "image": "x", "resources": {"limits": tpu, "requests": tpu}}
        return {
            "groupName": name,
            "replicas": 1,
            "numOfHosts": 4,
            "template": {"spec": {"nodeSelector": selector, "containers": [container]}},
        }

    accelerator = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice"}
    spec = {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}},
        "workerGroupSpecs": [
            group("a", accelerator),
            group("b", {**accelerator, "cloud.google.com/gke-tpu-topology": "2x4"}),
        ],
    }
    cluster = Resource(
        "kubernetes:ray.io/v1:RayCluster",
        "rc",
        {"kind": "RayCluster", "metadata": {"name": "train"}, "spec": spec},
        urn="urn:rc",
    )
    found = list(
        _topology_provided([pool("v6e", "ct6e-standard-4t", {"type": "COMPACT", "tpuTopology": "4x4"}), cluster], {})
    )
    assert found == [
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[1] (group 'b').template.spec.nodeSelector asks tpu-v6e-slice 2x4 "
            "with 4 chips per host, but this stack provides tpu-v6e-slice 4x4 x4; the pods would stay Pending: add a "
            "slice pool or ComputeClass priority with that shape, or change the selectors",
            "urn:rc",
        )
    ]


# ---------------------------------------------------------------------------- compute-class-service-account

CLUSTER = "gcp:container/cluster:Cluster"
AUTO_CREATING = {"nodePoolAutoCreation": {"enabled": True}, "priorities": []}


def auto_creating_class() -> Resource:
    props = {"kind": "ComputeClass", "metadata": {"name": "tpu"}, "spec": AUTO_CREATING}
    return Resource("kubernetes:cloud.google.com/v1:ComputeClass", "cc", props, urn="urn:cc")


def test_a_cluster_default_service_account_for_auto_created_pools_covers_a_class_without_one() -> None:
    nap = {"autoProvisioningDefaults": {"serviceAccount": "nodes@acme.iam.gserviceaccount.com"}}
    cluster = Resource(CLUSTER, "gke", {"name": "gke", "clusterAutoscaling": nap})
    assert list(_compute_class_service_account([cluster, auto_creating_class()], {})) == []


def test_a_class_auto_creating_pools_on_a_cluster_without_a_default_account_is_found() -> None:
    cluster = Resource(CLUSTER, "gke", {"name": "gke", "clusterAutoscaling": {"autoProvisioningDefaults": {}}})
    assert list(_compute_class_service_account([cluster, auto_creating_class()], {})) == [
        Finding(
            "ComputeClass/tpu: spec.nodePoolConfig.serviceAccount is unset and the cluster sets no "
            "clusterAutoscaling.autoProvisioningDefaults.serviceAccount, so node pools this class auto-creates run as "
            "the Compute Engine default account: set spec.nodePoolConfig.serviceAccount to the node service account",
            "urn:cc",
        )
    ]


def test_without_a_cluster_there_is_no_default_to_judge() -> None:
    assert list(_compute_class_service_account([auto_creating_class()], {})) == []


def test_node_pool_slice_shape_reads_every_pool_past_the_ones_it_skips() -> None:
    def tpu_pool(name: str, placement: dict[str, Any], **extra: Any) -> Resource:
        props = {"name": name, "nodeConfig": {"machineType": "ct6e-standard-4t"}, "placementPolicy": placement, **extra}
        return Resource(POOL, name, props, urn=f"urn:{name}")

    compact = {"type": "COMPACT", "tpuTopology": "4x4"}
    resources = [
        Resource(POOL, "n2", {"name": "n2", "nodeConfig": {"machineType": "n2-standard-8"}}),  # not a TPU pool
        tpu_pool("host", {}),  # single host: nothing to place
        tpu_pool("spread", {"type": "SPREAD", "tpuTopology": "4x4"}, nodeCount=4, initialNodeCount=1),
        tpu_pool("auto", compact, autoscaling={"totalMaxNodeCount": 4, "totalMinNodeCount": 4, "minNodeCount": 2}),
        tpu_pool("auto-from-zero", compact, autoscaling={"maxNodeCount": 4}),
        tpu_pool("auto-min-1", compact, autoscaling={"totalMaxNodeCount": 4, "minNodeCount": 1}),
        tpu_pool("two-nodes", compact, nodeCount=2),
    ]
    assert list(_node_pool_slice_shape(resources, {})) == [
        Finding(
            "NodePool spread: placementPolicy.type is 'SPREAD'; a v6e 4x4 slice is placed COMPACT with tpu_topology 4x4: "
            "set type: COMPACT",
            "urn:spread",
        ),
        Finding(
            "NodePool auto-min-1: autoscaling min node count is 1; a slice is all 4 hosts or none: set 0 or 4",
            "urn:auto-min-1",
        ),
        Finding(
            "NodePool two-nodes: node count is 2; a v6e 4x4 slice on ct6e-standard-4t is 4 hosts in one node pool: set "
            "the node count to 4",
            "urn:two-nodes",
        ),
    ]


def test_the_required_ray_labels_come_from_the_policy_config_and_only_the_slice_pool_gets_a_hint() -> None:
    tpu = {"google.com/tpu": 4}
    selector = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": "2x2"}
    container = {"name": "w", "image": "x", "resources": {"limits": tpu, "requests": tpu}}
    group = {
        "groupName": "w",
        "replicas": 1,
        "numOfHosts": 1,
        "labels": {},
        "template": {"spec": {"nodeSelector": selector, "containers": [container]}},
    }
    head = {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}}
    cluster = Resource(
        "kubernetes:ray.io/v1:RayCluster",
        "rc",
        {
            "kind": "RayCluster",
            "metadata": {"name": "train"},
            "spec": {"headGroupSpec": head, "workerGroupSpecs": [group]},
        },
    )
    assert list(_ray_labels(cluster, {"requiredLabels": ["team"]})) == [
        "RayCluster/train: spec.workerGroupSpecs[0] (group 'w').labels has no 'team'; slice-aware scheduling selects TPU "
        "hosts by Ray node labels: add team"
    ]


# ---------------------------------------------------------------------------- spot-has-fallback

SPOT_CLASS_MESSAGE = (
    "Spot and no non-Spot priority follows it; a preemption wave leaves the workload with no capacity: add an "
    "on-demand, reservation or flexStart priority after it"
)
SPOT_POOL_MESSAGE = (
    "offers no non-Spot capacity; a preemption leaves the slice pool empty: add an on-demand, reservation or "
    "flex-start tier after spot"
)


def tpu_node_pool(name: str, compute_class_name: str | None = None, **node_config: Any) -> Resource:
    labels = {CC_LABEL: compute_class_name} if compute_class_name else {}
    props = {"name": name, "nodeConfig": {"machineType": "ct6e-standard-4t", "labels": labels, **node_config}}
    return Resource(POOL, name, props, urn=f"urn:{name}")


def named_class(name: str, priorities: list[dict[str, Any]]) -> Resource:
    props = {"kind": "ComputeClass", "metadata": {"name": name}, "spec": {"priorities": priorities}}
    return Resource("kubernetes:cloud.google.com/v1:ComputeClass", name, props, urn=f"urn:cc-{name}")


def test_a_spot_pool_whose_compute_class_has_an_on_demand_priority_has_a_fallback() -> None:
    resources = [named_class("x", [{"machineFamily": "ct6e"}]), tpu_node_pool("s", "x", spot=True)]
    assert list(_spot_has_fallback(resources, {})) == []


def test_a_spot_pool_whose_compute_class_is_all_spot_has_no_fallback() -> None:
    resources = [named_class("x", [{"spot": True}]), tpu_node_pool("s", "x", spot=True)]
    assert list(_spot_has_fallback(resources, {})) == [
        Finding(f"ComputeClass/x: spec.priorities[0] is {SPOT_CLASS_MESSAGE}", "urn:cc-x"),
        Finding(f"NodePool s: nodeConfig.spot is true and its compute class 'x' {SPOT_POOL_MESSAGE}", "urn:s"),
    ]


def test_every_spot_priority_of_an_all_spot_class_is_reported() -> None:
    assert list(_spot_has_fallback([named_class("x", [{"spot": True}, {"spot": True}])], {})) == [
        Finding(f"ComputeClass/x: spec.priorities[0] is {SPOT_CLASS_MESSAGE}", "urn:cc-x"),
        Finding(f"ComputeClass/x: spec.priorities[1] is {SPOT_CLASS_MESSAGE}", "urn:cc-x"),
    ]


def test_an_on_demand_priority_before_the_last_spot_priority_is_no_fallback_for_it() -> None:
    assert list(_spot_has_fallback([named_class("x", [{"machineFamily": "ct6e"}, {"spot": True}])], {})) == [
        Finding(f"ComputeClass/x: spec.priorities[1] is {SPOT_CLASS_MESSAGE}", "urn:cc-x"),
    ]


def test_a_preemptible_pool_is_spot_capacity() -> None:
    assert list(_spot_has_fallback([tpu_node_pool("p", preemptible=True)], {})) == [
        Finding(f"NodePool p: nodeConfig.spot is true and its compute class unset {SPOT_POOL_MESSAGE}", "urn:p"),
    ]


def test_a_pool_with_preemptible_false_is_not_spot_capacity() -> None:
    assert list(_spot_has_fallback([tpu_node_pool("p", preemptible=False)], {})) == []


def test_a_spot_pool_after_an_on_demand_pool_is_judged() -> None:
    assert list(_spot_has_fallback([tpu_node_pool("od"), tpu_node_pool("s", spot=True)], {})) == [
        Finding(f"NodePool s: nodeConfig.spot is true and its compute class unset {SPOT_POOL_MESSAGE}", "urn:s"),
    ]


def test_an_on_demand_pool_of_another_compute_class_is_no_fallback() -> None:
    resources = [tpu_node_pool("s", "x", spot=True), tpu_node_pool("od", "y")]
    assert list(_spot_has_fallback(resources, {})) == [
        Finding(f"NodePool s: nodeConfig.spot is true and its compute class 'x' {SPOT_POOL_MESSAGE}", "urn:s"),
    ]


def test_two_spot_pools_of_one_compute_class_are_not_each_others_fallback() -> None:
    resources = [tpu_node_pool("s1", "x", spot=True), tpu_node_pool("s2", "x", spot=True)]
    assert list(_spot_has_fallback(resources, {})) == [
        Finding(f"NodePool s1: nodeConfig.spot is true and its compute class 'x' {SPOT_POOL_MESSAGE}", "urn:s1"),
        Finding(f"NodePool s2: nodeConfig.spot is true and its compute class 'x' {SPOT_POOL_MESSAGE}", "urn:s2"),
    ]


# ---------------------------------------------------------------------------- tpu-topology-provided

ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY = "cloud.google.com/gke-tpu-topology"
V6E = {ACCELERATOR: "tpu-v6e-slice"}
PENDING = (
    "the pods would stay Pending: add a slice pool or ComputeClass priority with that shape, or change the selectors"
)


def tpu_worker(name: str, selector: dict[str, Any], resources: dict[str, Any] | None = None) -> dict[str, Any]:
    if resources is None:
        resources = {"limits": {"google.com/tpu": 4}, "requests": {"google.com/tpu": 4}}
    container = {"name": "w", "image": "x", "resources": resources}
    return {
        "groupName": name,
        "replicas": 1,
        "numOfHosts": 1,
        "template": {"spec": {"nodeSelector": selector, "containers": [container]}},
    }


def ray_cluster(*groups: dict[str, Any]) -> Resource:
    head = {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}}
    spec = {"headGroupSpec": head, "workerGroupSpecs": list(groups)}
    props = {"kind": "RayCluster", "metadata": {"name": "train"}, "spec": spec}
    return Resource("kubernetes:ray.io/v1:RayCluster", "rc", props, urn="urn:rc")


def v6e_4x4_pool() -> Resource:
    return pool("v6e", "ct6e-standard-4t", {"type": "COMPACT", "tpuTopology": "4x4"}, {CC_LABEL: "v6e"})


def test_a_group_past_one_with_an_unknown_compute_class_is_judged_and_every_offer_is_listed() -> None:
    big = named_class("big", [{"tpu": {"type": "tpu-v6e-slice", "topology": "2x2", "count": 4}}])
    cluster = ray_cluster(
        tpu_worker("a", {**V6E, TOPOLOGY: "4x4", CC_LABEL: "nope"}), tpu_worker("b", {**V6E, TOPOLOGY: "2x4"})
    )
    assert list(_topology_provided([v6e_4x4_pool(), big, cluster], {})) == [
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[0] (group 'a').template.spec.nodeSelector"
            "['cloud.google.com/compute-class'] is 'nope', which no ComputeClass or node pool of this stack provides; "
            "the pods would stay Pending: declare that ComputeClass or select one of big, v6e",
            "urn:rc",
        ),
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[1] (group 'b').template.spec.nodeSelector asks tpu-v6e-slice 2x4 "
            f"with 4 chips per host, but this stack provides tpu-v6e-slice 2x2 x4, tpu-v6e-slice 4x4 x4; {PENDING}",
            "urn:rc",
        ),
    ]


def test_a_stack_without_tpu_providers_offers_no_compute_class_and_nothing() -> None:
    cluster = ray_cluster(
        tpu_worker("a", {**V6E, TOPOLOGY: "4x4", CC_LABEL: "nope"}), tpu_worker("b", {**V6E, TOPOLOGY: "2x4"})
    )
    assert list(_topology_provided([cluster], {})) == [
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[0] (group 'a').template.spec.nodeSelector"
            "['cloud.google.com/compute-class'] is 'nope', which no ComputeClass or node pool of this stack provides; "
            "the pods would stay Pending: declare that ComputeClass or select one of none",
            "urn:rc",
        ),
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[1] (group 'b').template.spec.nodeSelector asks tpu-v6e-slice 2x4 "
            f"with 4 chips per host, but this stack provides nothing; {PENDING}",
            "urn:rc",
        ),
    ]


def test_a_group_past_a_provided_one_is_judged() -> None:
    cluster = ray_cluster(tpu_worker("a", {**V6E, TOPOLOGY: "4x4"}), tpu_worker("b", {**V6E, TOPOLOGY: "2x4"}))
    assert list(_topology_provided([v6e_4x4_pool(), cluster], {})) == [
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[1] (group 'b').template.spec.nodeSelector asks tpu-v6e-slice 2x4 "
            f"with 4 chips per host, but this stack provides tpu-v6e-slice 4x4 x4; {PENDING}",
            "urn:rc",
        )
    ]


def test_a_pool_of_the_topology_with_other_chips_per_host_does_not_provide_the_group() -> None:
    eight = {"limits": {"google.com/tpu": 8}, "requests": {"google.com/tpu": 8}}
    two_hosts = pool("p", "ct6e-standard-4t", {"type": "COMPACT", "tpuTopology": "2x4"})
    cluster = ray_cluster(tpu_worker("a", {**V6E, TOPOLOGY: "2x4"}, eight))
    assert list(_topology_provided([two_hosts, cluster], {})) == [
        Finding(
            "RayCluster/train: spec.workerGroupSpecs[0] (group 'a').template.spec.nodeSelector asks tpu-v6e-slice 2x4 "
            f"with 8 chips per host, but this stack provides tpu-v6e-slice 2x4 x4; {PENDING}",
            "urn:rc",
        )
    ]


def test_a_compute_class_whose_name_is_unknown_during_preview_provides_without_a_class_name() -> None:
    cc = compute_class(UNKNOWN, [{"tpu": {"type": "tpu-v6e-slice", "topology": "2x2", "count": 4}}])
    assert providers([cc]) == [Provider("ComputeClass/cc", None, "tpu-v6e-slice", "2x2", 4)]


# ---------------------------------------------------------------------------- more pools and classes


def test_a_pool_past_one_without_a_catalog_shape_is_judged() -> None:
    def tpu_pool(name: str, topology: str, **extra: Any) -> Resource:
        placement = {"type": "COMPACT", "tpuTopology": topology}
        props = {"name": name, "nodeConfig": {"machineType": "ct6e-standard-4t"}, "placementPolicy": placement, **extra}
        return Resource(POOL, name, props, urn=f"urn:{name}")

    assert list(_node_pool_slice_shape([tpu_pool("bad", "3x3"), tpu_pool("two", "4x4", nodeCount=2)], {})) == [
        Finding(
            "NodePool bad: placementPolicy tpuTopology '3x3' on ct6e-standard-4t: topology '3x3' is not valid for v6e; "
            "valid: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16: use a topology and machine type from `tpuray topology`",
            "urn:bad",
        ),
        Finding(
            "NodePool two: node count is 2; a v6e 4x4 slice on ct6e-standard-4t is 4 hosts in one node pool: set the "
            "node count to 4",
            "urn:two",
        ),
    ]


DEFAULT_ACCOUNT = (
    "and the cluster sets no clusterAutoscaling.autoProvisioningDefaults.serviceAccount, so node pools this class "
    "auto-creates run as the Compute Engine default account: set spec.nodePoolConfig.serviceAccount to the node "
    "service account"
)
SCOPES_ONLY = {"autoProvisioningDefaults": {"oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"]}}


def class_with_spec(name: str, spec: dict[str, Any]) -> Resource:
    props = {"kind": "ComputeClass", "metadata": {"name": name}, "spec": spec}
    return Resource("kubernetes:cloud.google.com/v1:ComputeClass", name, props, urn=f"urn:{name}")


def test_cluster_defaults_for_auto_created_pools_without_a_service_account_leave_the_default_one() -> None:
    cluster = Resource(CLUSTER, "gke", {"name": "gke", "clusterAutoscaling": SCOPES_ONLY})
    assert list(_compute_class_service_account([cluster, auto_creating_class()], {})) == [
        Finding(f"ComputeClass/tpu: spec.nodePoolConfig.serviceAccount is unset {DEFAULT_ACCOUNT}", "urn:cc")
    ]


def test_a_class_auto_creating_pools_past_one_that_does_not_is_judged() -> None:
    cluster = Resource(CLUSTER, "gke", {"name": "gke", "clusterAutoscaling": SCOPES_ONLY})
    manual = class_with_spec("manual", {"priorities": []})
    auto = class_with_spec("auto", {"nodePoolAutoCreation": {"enabled": True}, "priorities": []})
    assert list(_compute_class_service_account([cluster, manual, auto], {})) == [
        Finding(f"ComputeClass/auto: spec.nodePoolConfig.serviceAccount is unset {DEFAULT_ACCOUNT}", "urn:auto")
    ]


def test_a_class_naming_the_default_account_in_its_node_pool_config_is_found() -> None:
    cluster = Resource(CLUSTER, "gke", {"name": "gke", "clusterAutoscaling": SCOPES_ONLY})
    spec = {
        "nodePoolAutoCreation": {"enabled": True},
        "nodePoolConfig": {"serviceAccount": "default"},
        "priorities": [],
    }
    assert list(_compute_class_service_account([cluster, class_with_spec("auto", spec)], {})) == [
        Finding(f"ComputeClass/auto: spec.nodePoolConfig.serviceAccount is 'default' {DEFAULT_ACCOUNT}", "urn:auto")
    ]


# ---------------------------------------------------------------------------- rules_tpu, group by group

ACCELERATORS = "tpu-v4-podslice, tpu-v5-lite-podslice, tpu-v5p-slice, tpu-v6e-slice, tpu7x"


def test_tpu_node_selectors_judges_every_group_past_one_it_reports() -> None:
    subslice = tpu_worker("e", {**V6E, TOPOLOGY: "4x4"})
    subslice["template"]["metadata"] = {"annotations": {"cloud.google.com/gke-tpu-slice-topology": "9x9"}}
    cluster = ray_cluster(
        tpu_worker("a", {ACCELERATOR: "tpu-v9", TOPOLOGY: "2x2"}),
        tpu_worker("b", V6E),
        tpu_worker("c", {TOPOLOGY: "2x2"}),
        tpu_worker("d", {**V6E, TOPOLOGY: "3x3"}),
        subslice,
    )
    selector = "RayCluster/train: spec.workerGroupSpecs[{}] (group '{}').template.spec.nodeSelector"
    assert list(_node_selectors(cluster, {})) == [
        f"{selector.format(0, 'a')}['cloud.google.com/gke-tpu-accelerator'] is 'tpu-v9', not a GKE TPU accelerator; "
        f"use one of {ACCELERATORS}",
        f"{selector.format(1, 'b')} has no 'cloud.google.com/gke-tpu-topology'; the KubeRay TPU webhook rejects a TPU "
        "worker group without it: add the slice topology, e.g. cloud.google.com/gke-tpu-topology: 4x4",
        f"{selector.format(2, 'c')} has no 'cloud.google.com/gke-tpu-accelerator'; a TPU group must name its TPU "
        f"generation so GKE schedules it on TPU nodes: add one of {ACCELERATORS}",
        f"{selector.format(3, 'd')}['cloud.google.com/gke-tpu-topology'] is '3x3', which is not a topology of "
        "tpu-v6e-slice; use one of 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16",
        "RayCluster/train: spec.workerGroupSpecs[4] (group 'e').template.metadata.annotations"
        "['cloud.google.com/gke-tpu-slice-topology'] is '9x9', which is not a topology of tpu-v6e-slice: use a valid "
        "subslice topology",
    ]


def test_tpu_chips_per_host_judges_every_group_past_one_it_reports() -> None:
    cluster = ray_cluster(
        tpu_worker("a", {**V6E, TOPOLOGY: "2x2"}, {}),
        tpu_worker("b", {**V6E, TOPOLOGY: "2x2"}, {"limits": {"google.com/tpu": 0.5}}),
        tpu_worker("c", {**V6E, TOPOLOGY: "2x4"}, {"limits": {"google.com/tpu": 2}}),
    )
    assert list(_chips_per_host(cluster, {})) == [
        "RayCluster/train: spec.workerGroupSpecs[0] (group 'a') selects TPU nodes but no container requests "
        "'google.com/tpu'; set resources.requests and resources.limits of the Ray container to the chips per host",
        "RayCluster/train: spec.workerGroupSpecs[1] (group 'b').template.spec.containers[0].resources has "
        "google.com/tpu requests unset and limits 0.5; set limits (and requests, if any, equal to it) to the whole "
        "number of chips per host",
        "RayCluster/train: spec.workerGroupSpecs[2] (group 'c') asks google.com/tpu: 2 per pod, but a v6e 2x4 slice "
        "has 8 (ct6e-standard-8t) or 4 (ct6e-standard-4t) chips per host: set requests and limits to that",
    ]


def test_tpu_num_of_hosts_judges_a_group_past_one_without_a_catalog_shape() -> None:
    cluster = ray_cluster(tpu_worker("a", {**V6E, TOPOLOGY: "3x3"}), tpu_worker("b", {**V6E, TOPOLOGY: "4x4"}))
    assert list(_num_of_hosts(cluster, {})) == [
        "RayCluster/train: spec.workerGroupSpecs[1] (group 'b').numOfHosts is 1; a v6e 4x4 slice with 4 chips per pod "
        "is 4 hosts (ct6e-standard-4t): set numOfHosts: 4"
    ]


def test_a_2x4_group_on_4_chip_vms_after_a_subslice_and_a_4x4_group_is_still_refused(tmp_path: Path) -> None:
    """tpu-slice-ray-reads-as-one-vm judges every group: a subslice (skipped) and a 4x4 group
    (fine) before the bad one do not end the check."""
    import copy

    import yaml

    from tpuray.config import RayConfig
    from tpuray.policies.evaluate import check_manifests

    obj = yaml.safe_load(
        (Path(__file__).parent / "fixtures" / "policies" / "bad" / "tpu-slice-ray-reads-as-one-vm.yaml").read_text()
    )
    bad = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    whole = copy.deepcopy(bad)
    whole.update(groupName="whole", numOfHosts=4)
    whole["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "4x4"
    sub = copy.deepcopy(whole)
    sub.update(groupName="sub", numOfHosts=2)
    sub["template"].setdefault("metadata", {}).setdefault("annotations", {})[
        "cloud.google.com/gke-tpu-slice-topology"
    ] = "2x4"
    obj["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [sub, whole, bad]
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(obj))
    found = check_manifests([str(path)], "prod", RayConfig().version, [], rules={"tpu-slice-ray-reads-as-one-vm"})
    assert [v.message.split(" runs ")[0] for v in found] == [
        "RayJob/train-job: spec.rayClusterSpec.workerGroupSpecs[2] (group 'tpu')"
    ]
