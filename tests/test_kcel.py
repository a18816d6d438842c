"""The CRDs' x-kubernetes-validations rules, evaluated by cel-python the way the API server does."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpuray.checks.kcel import BUILTIN_MACROS, EXTENSIONS, all_rules, escape, function_names, program, rule_failures
from tpuray.checks.schemas import schema_errors
from tpuray.policies.core import UNKNOWN
from tpuray.policies.evaluate import check_manifests as check

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
GOOD_CC: dict[str, Any] = yaml.safe_load((FIXTURES / "good" / "computeclass.yaml").read_text())

# Each rule once copied by hand into rules_computeclass.py, and the CRD message that now reports it.
FORMER_HANDWRITTEN = {
    "compute-class-flex-start-not-spot": "spec.priorities[2]: Flex Start provisioning model is incompatible with Spot",
    "compute-class-capacity-check-wait": "spec.priorities[4]: capacityCheckWaitTimeSeconds is only supported for "
    "Flex Start and for multi-host TPUs",
    "compute-class-machine-family-xor-type": "spec.priorities[0]: MachineFamily and MachineType cannot be set together",
    "compute-class-machine-type-min-cores": "spec.priorities[0]: MachineType cannot be set together with MinCores/MinMemoryGb",
    "compute-class-reservations": "spec.priorities[0].reservations: Unable to set specific reservations for non "
    "specific affinity",
    "compute-class-reservations-specific-empty": "spec.priorities[0].reservations: At least 1 specific reservation "
    "required for specific affinity",
    "compute-class-priority-score": "spec: PriorityScore must be set for all priorities or for none of them",
}


def test_there_is_one_cel_fixture_per_former_hand_written_rule_branch() -> None:
    assert sorted(p.stem for p in (FIXTURES / "cel").glob("*.yaml")) == sorted(FORMER_HANDWRITTEN)


@pytest.mark.parametrize("former", sorted(FORMER_HANDWRITTEN))
def test_former_hand_written_rule_is_caught_by_the_crd_cel(former: str) -> None:
    violations = check([str(FIXTURES / "cel" / f"{former}.yaml")], "prod", "2.60.0", [])
    assert [v.policy for v in violations] == ["crd-validation-rules"]
    assert f"ComputeClass/v6e: {FORMER_HANDWRITTEN[former]} (CEL rule: " in violations[0].message


def test_every_function_a_packaged_rule_calls_is_provided() -> None:
    called = {name for _, rule in all_rules() for name in function_names(rule)}
    from celpy.evaluation import base_functions

    assert called - set(base_functions) - BUILTIN_MACROS - set(EXTENSIONS) == set()
    assert "split" in called  # the Kubernetes strings library, used by the ComputeClass SEV rules


def test_every_packaged_rule_compiles() -> None:
    rules = [rule for _, rule in all_rules()]
    assert len(rules) >= 60
    for rule in rules:
        program(rule)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("'n2d-standard-4'.split('-')[0]", "n2d"),
        ("'a-b-c'.split('-', 2)", ["a", "b-c"]),
        ("'a-b'.replace('-', '_')", "a_b"),
        ("'tpu-v6e'.substring(4)", "v6e"),
        ("'tpu-v6e'.substring(0, 3)", "tpu"),
        ("['a', 'b'].join('/')", "a/b"),
        ("'TPU'.lowerAscii()", "tpu"),
        ("'tpu'.upperAscii()", "TPU"),
        ("'  x '.trim()", "x"),
        ("'abc'.charAt(1)", "b"),
        ("'abcb'.indexOf('b')", 1),
        ("'abcb'.lastIndexOf('b')", 3),
        ("[1, 2, 2].isSorted()", True),
        ("[2, 1].isSorted()", False),
        ("[1, 2, 3].sum()", 6),
        ("[3, 1, 2].min()", 1),
        ("[3, 1, 2].max()", 3),
    ],
)
def test_kubernetes_cel_library_function(expression: str, expected: Any) -> None:
    assert program(expression).evaluate({}) == expected


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("net.ipv4.tcp_congestion_control", "net__dot__ipv4__dot__tcp_congestion_control"),
        ("x-y", "x__dash__y"),
        ("a/b", "a__slash__b"),
        ("a__b", "a__underscores__b"),
        ("namespace", "__namespace__"),
        ("priorities", "priorities"),
    ],
)
def test_property_names_are_escaped_like_kubernetes(name: str, escaped: str) -> None:
    assert escape(name) == escaped


def _cc(**spec: Any) -> dict[str, Any]:
    cc = copy.deepcopy(GOOD_CC)
    cc["spec"].update(spec)
    return cc


def test_the_good_compute_class_passes_every_rule() -> None:
    assert rule_failures(GOOD_CC) == []


def test_an_escaped_property_name_is_read_by_its_rule() -> None:
    sysctls = {"net.ipv4.tcp_congestion_control": "bbr"}
    cc = _cc(
        autopilot={"enabled": True}, priorityDefaults={"nodeSystemConfig": {"linuxNodeConfig": {"sysctls": sysctls}}}
    )
    assert schema_errors(cc) == []
    (failure,) = rule_failures(cc)
    assert failure.startswith("ComputeClass/v6e: spec: Sysctl config net.ipv4.tcp_congestion_control cannot be set")


def test_a_duration_rule_rejects_a_grace_period_over_24_hours() -> None:
    cc = _cc(nodePoolConfig={"serviceAccount": "n@p.iam.gserviceaccount.com",
                             "nodeDrainConfig": {"graceTerminationDuration": "90000s"}})  # fmt: skip
    assert schema_errors(cc) == []
    (failure,) = rule_failures(cc)
    assert failure.startswith("ComputeClass/v6e: spec.nodePoolConfig.nodeDrainConfig.graceTerminationDuration: ")


def test_a_rule_calling_split_rejects_a_sev_class_on_a_non_sev_machine() -> None:
    cc = _cc(nodePoolConfig={"serviceAccount": "n@p.iam.gserviceaccount.com", "confidentialNodeType": "SEV"},
             priorities=[{"machineType": "n2-standard-8"}])  # fmt: skip
    assert len(rule_failures(cc)) == 1
    cc["spec"]["priorities"] = [{"machineType": "n2d-standard-8"}]
    assert rule_failures(cc) == []


def test_an_object_changed_in_place_after_its_check_is_judged_again_not_from_the_first_verdict() -> None:
    cc = _cc(nodePoolConfig={"serviceAccount": "n@p.iam.gserviceaccount.com",
                             "nodeDrainConfig": {"graceTerminationDuration": "600s"}})  # fmt: skip
    assert rule_failures(cc) == []
    cc["spec"]["nodePoolConfig"]["nodeDrainConfig"]["graceTerminationDuration"] = "90000s"
    assert len(rule_failures(cc)) == 1
    cc["spec"]["nodePoolConfig"]["nodeDrainConfig"]["graceTerminationDuration"] = "600s"
    assert rule_failures(cc) == []


def test_a_verdict_given_twice_is_the_same_list_and_a_caller_cannot_change_the_kept_one() -> None:
    cc = _cc(nodePoolConfig={"serviceAccount": "n@p.iam.gserviceaccount.com",
                             "nodeDrainConfig": {"graceTerminationDuration": "90000s"}})  # fmt: skip
    first = rule_failures(cc)
    first.append("a caller's own line")
    (again,) = rule_failures(cc)
    assert again.startswith("ComputeClass/v6e: spec.nodePoolConfig.nodeDrainConfig.graceTerminationDuration: ")


def test_transition_rules_are_skipped_on_create_and_the_others_still_run() -> None:
    cluster = yaml.safe_load((FIXTURES / "good" / "raycluster.yaml").read_text())
    cluster["spec"]["managedBy"] = "ray.io/kuberay-operator"  # also `self == oldSelf`: update-only
    assert rule_failures(cluster) == []
    cluster["spec"]["managedBy"] = "someone-else"
    (failure,) = rule_failures(cluster)
    assert failure.startswith("RayCluster/train: spec.managedBy: the managedBy field value must be either")


def test_a_required_field_with_a_default_is_defaulted_before_validation() -> None:
    cc = copy.deepcopy(GOOD_CC)
    del cc["spec"]["whenUnsatisfiable"]  # required, default DoNotScaleUp
    assert schema_errors(cc) == []


def test_a_null_field_with_no_default_fails_its_type_as_the_api_server_does() -> None:
    # kube-apiserver v1.34 refused `ports:` (null) with "must be of type array"
    # (tests/test_control_plane.py, on kuberay-historical/ray-cluster-tpu.yaml).
    cluster = yaml.safe_load((FIXTURES / "good" / "raycluster.yaml").read_text())
    cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["ports"] = None
    assert schema_errors(cluster) == [
        "RayCluster/train: spec.workerGroupSpecs.0.template.spec.containers.0.ports: None is not of type 'array'"
    ]


def test_a_value_unknown_during_preview_is_not_judged() -> None:
    cc = _cc(priorities=[{"machineFamily": UNKNOWN, "machineType": "ct6e-standard-4t"}])
    assert rule_failures(cc) == []
    assert schema_errors(cc) == []


def test_a_rule_that_cannot_be_evaluated_fails_like_the_api_server() -> None:
    cc = _cc(priorities=[{"reservations": {"affinity": "Specific", "specific": [{"name": "r"}]}}])
    cc["spec"]["priorities"][0]["reservations"]["specific"] = 5
    failures = rule_failures(cc)
    assert len(failures) == 2  # both reservations rules call self.specific.size() on an integer
    assert all("spec.priorities[0].reservations: rule could not be evaluated" in f for f in failures)


def test_a_rule_on_a_map_sees_its_keys_unescaped() -> None:
    cc = _cc(
        nodePoolConfig={"serviceAccount": "n@p.iam.gserviceaccount.com", "instanceMetadata": {"startup-script": "x"}}
    )
    assert schema_errors(cc) == []
    (failure,) = rule_failures(cc)
    assert failure.startswith("ComputeClass/v6e: spec.nodePoolConfig.instanceMetadata: ")


def test_a_null_value_is_not_judged_by_its_rules() -> None:
    from tpuray.checks.kcel import _check

    schema = {"type": "string", "nullable": True, "x-kubernetes-validations": [{"rule": "self == 'x'"}]}
    assert list(_check(None, schema, "spec.field")) == []
    assert [m for _, m, _ in _check("y", schema, "spec.field")] == ["failed rule"]
