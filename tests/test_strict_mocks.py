"""Strict mocks: inputs the pinned provider SDKs would refuse fail preview with one line each.

The expected lines are literal: resource, python input path, what the SDK's own types say.
Inputs are given as the mock engine sees them (camelCase wire names, numbers as floats).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.conftest import mocked
from tpuray.checks.strict import check_inputs, doc_enum
from tpuray.cli import main
from tpuray.config import ConfigError
from tpuray.preview.mockrun import run_stack

NODE_POOL = "gcp:container/nodePool:NodePool"
# A v6e 4x4 slice pool as the mock engine receives it from the program.
POOL_INPUTS = {
    "cluster": "tpuray-dev",
    "name": "v6e-dev-0",
    "project": "acme-ml-dev",
    "location": "us-east5",
    "nodeLocations": ["us-east5-b"],
    "initialNodeCount": 4.0,
    "placementPolicy": {"type": "COMPACT", "tpuTopology": "4x4"},
    "management": {"autoRepair": True, "autoUpgrade": True},
    "nodeConfig": {
        "machineType": "ct6e-standard-4t",
        "spot": True,
        "labels": {"tpuray.dev/slice-pool": "v6e-dev"},
        "taints": [{"key": "cloud.google.com/compute-class", "value": "v6e-dev", "effect": "NO_SCHEDULE"}],
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
    },
}


def pool_with(edit) -> dict:
    inputs = copy.deepcopy(POOL_INPUTS)
    edit(inputs)
    return inputs


def test_a_valid_slice_pool_passes():
    assert check_inputs(NODE_POOL, "v6e-dev-0", POOL_INPUTS) == []


def test_misspelled_node_config_key_is_named_with_the_likely_key():
    inputs = pool_with(lambda i: i["nodeConfig"].update(machineTyp=i["nodeConfig"].pop("machineType")))
    assert check_inputs(NODE_POOL, "v6e-dev-0", inputs) == [
        'gcp:container/nodePool:NodePool "v6e-dev-0": node_config: unknown key "machineTyp" '
        '(did you mean "machine_type"?); NodePoolNodeConfigArgsDict has no such key'
    ]


def test_missing_required_key_names_the_sdk_type_and_its_required_keys():
    inputs = pool_with(lambda i: i.update(placementPolicy={"policyName": "tpu7x-train-2-2-2"}))
    assert check_inputs(NODE_POOL, "tpu7x-train-0", inputs) == [
        'gcp:container/nodePool:NodePool "tpu7x-train-0": placement_policy: missing required key(s) "type"; '
        "NodePoolPlacementPolicyArgsDict requires type"
    ]


def test_list_given_as_an_object_is_refused():
    inputs = pool_with(lambda i: i["nodeConfig"].update(taints=i["nodeConfig"]["taints"][0]))
    assert check_inputs(NODE_POOL, "v6e-dev-0", inputs) == [
        'gcp:container/nodePool:NodePool "v6e-dev-0": node_config.taints: not a list; '
        "the SDK expects a list of an object (NodePoolNodeConfigTaintArgsDict)"
    ]


def test_object_given_as_a_list_is_refused():
    inputs = pool_with(lambda i: i.update(placementPolicy=[i["placementPolicy"]]))
    assert check_inputs(NODE_POOL, "v6e-dev-0", inputs) == [
        'gcp:container/nodePool:NodePool "v6e-dev-0": placement_policy: not a dict; '
        "the SDK expects an object (NodePoolPlacementPolicyArgsDict)"
    ]


def test_wrong_scalar_type_is_refused_and_integral_floats_count_as_ints():
    assert check_inputs(NODE_POOL, "p", pool_with(lambda i: i.update(initialNodeCount=4.0))) == []
    assert check_inputs(NODE_POOL, "p", pool_with(lambda i: i.update(initialNodeCount="4"))) == [
        'gcp:container/nodePool:NodePool "p": initial_node_count: not an instance of int; the SDK expects int'
    ]


def test_enum_from_the_sdk_docstring_is_checked():
    inputs = pool_with(lambda i: i["placementPolicy"].update(type="SPREAD"))
    assert check_inputs(NODE_POOL, "p", inputs) == [
        "gcp:container/nodePool:NodePool \"p\": placement_policy.type: not any of ('COMPACT'); "
        "the SDK expects one of COMPACT"
    ]


def test_docstring_enums_are_read_only_when_exhaustive():
    assert doc_enum("The type of the policy. Supports a single value: COMPACT. Specifying ...") == ("COMPACT",)
    assert doc_enum("Possible values are: `VULNERABILITY_DISABLED`, `VULNERABILITY_ENTERPRISE`.") == (
        "VULNERABILITY_DISABLED",
        "VULNERABILITY_ENTERPRISE",
    )
    assert doc_enum("Accepted values are `NO_SCHEDULE`, `PREFER_NO_SCHEDULE`, and `NO_EXECUTE`.") == (
        "NO_SCHEDULE",
        "PREFER_NO_SCHEDULE",
        "NO_EXECUTE",
    )
    assert doc_enum("Valid values are 1 through 65535.") is None
    assert doc_enum("Valid values include DEFAULT and MAX_THROUGHPUT.") is None


def test_kubernetes_objects_are_checked_against_the_kubernetes_sdk():
    inputs = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ray", "lables": {"a": "b"}}}
    assert check_inputs("kubernetes:core/v1:Namespace", "ray-ns", inputs) == [
        'kubernetes:core/v1:Namespace "ray-ns": metadata: unknown key "lables" (did you mean "labels"?); '
        "ObjectMetaArgsDict has no such key"
    ]


def test_custom_resource_metadata_is_checked_too():
    inputs = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"nme": "train"}, "spec": {"any": 1.0}}
    assert check_inputs("kubernetes:ray.io/v1:RayJob", "train", inputs) == [
        'kubernetes:ray.io/v1:RayJob "train": metadata: unknown key "nme" (did you mean "name"?); '
        "ObjectMetaArgsDict has no such key"
    ]


def test_custom_resource_fields_beside_spec_pass_when_its_crd_declares_them():
    # A Kueue WorkloadPriorityClass has `value` and `description` at the top (infra/components/queues.py).
    inputs = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"},
              "value": 1000.0, "description": "d"}  # fmt: skip
    assert check_inputs("kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass", "high", inputs) == []


def test_custom_resource_fields_beside_spec_that_its_crd_does_not_declare_are_refused():
    inputs = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "train"}, "value": 1.0}
    assert check_inputs("kubernetes:ray.io/v1:RayJob", "train", inputs) == [
        'kubernetes:ray.io/v1:RayJob "train": inputs: unknown key "value"; CustomResource has no such key'
    ]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_stack_passes_the_strict_checks(stack):
    assert mocked(stack).input_errors == []


def test_a_program_defect_fails_preview_with_exit_2(monkeypatch, capsys):
    from infra.components import cluster

    hardening = cluster.node_hardening
    monkeypatch.setattr(cluster, "node_hardening", lambda sa: {**hardening(sa), "oauth_scope": ["x"]})
    with pytest.raises(ConfigError) as info:
        run_stack("dev")
    assert info.value.lines[0] == (
        'gcp:container/cluster:Cluster "gke": node_config: unknown key "oauth_scope" '
        '(did you mean "oauth_scopes"?); ClusterNodeConfigArgsDict has no such key'
    )
    assert main(["preview", "dev"]) == 2
    assert 'node_config: unknown key "oauth_scope"' in capsys.readouterr().err


TPU7X_STACK = {
    "config": {
        "tpuray:environment": "dev",
        "tpuray:gcp": {"project": "acme-ml-dev", "region": "us-central1", "zones": ["us-central1-c"]},
        "tpuray:cluster": {"name": "tpuray-ironwood", "releaseChannel": "RAPID"},
        "tpuray:slicePools": [
            {
                "name": "tpu7x-train",
                "generation": "tpu7x",
                "topology": "2x2x2",
                "slices": 2,
                "capacity": [{"onDemand": True}],
            }
        ],
        "tpuray:ray": {"version": "2.60.0", "python": "py312"},
    }
}


def write_tpu7x_stack(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.ironwood.yaml"
    path.write_text(yaml.safe_dump(TPU7X_STACK))
    return path


def test_tpu7x_multi_host_pool_previews_clean_with_a_typed_workload_placement(tmp_path):
    run = run_stack(str(write_tpu7x_stack(tmp_path)))
    pools = [r for r in run.of_type(NODE_POOL) if r.inputs["name"].startswith("tpu7x-train")]
    assert [p.inputs["placementPolicy"] for p in pools] == [
        {"type": "COMPACT", "policyName": "tpu7x-train-2-2-2"},
        {"type": "COMPACT", "policyName": "tpu7x-train-2-2-2"},
    ]
