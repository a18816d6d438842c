"""The policy machinery around the rules: analyzer config and process handling, the plain-data
model, the KubeRay readers and the manifest shape checks, each path on its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi_policy.proxy import UNKNOWN_OBJECT_VALUE, unknown_checking_proxy

from tpuray.policies import RULES_BY_NAME, rules_crd
from tpuray.policies.analyzer import (
    InProcessAnalyzer,
    PackProcess,
    PolicyConfigError,
    Violation,
    analyze,
    load_config_file,
)
from tpuray.policies.core import ADVISORY, MANDATORY, UNKNOWN, Resource, Unknown, plain
from tpuray.policies.evaluate import check_manifests as check
from tpuray.policies.kube import CLUSTER_TYPE, NODE_POOL_TYPE, RayClusterSpec, as_int, generation_of_accelerator, get
from tpuray.policies.kube import groups as kube_groups
from tpuray.policies.manifests import ManifestError, load
from tpuray.policies.rules_computeclass import _tpu_shape, _when_unsatisfiable
from tpuray.policies.rules_podsecurity import expanded_pods
from tpuray.policies.rules_security import _private_nodes
from tpuray.policies.rules_stack import _spot_has_fallback
from tpuray.policies.rules_workload import _ray_version, pinned_ray_version

# ---------------------------------------------------------------------------- analyzer: config


def test_a_violation_without_a_file_has_no_file_key() -> None:
    assert Violation("tpu-image", "mandatory", "RayJob/x", "m").as_json() == {
        "policy": "tpu-image",
        "level": "mandatory",
        "resource": "RayJob/x",
        "message": "m",
    }


def test_missing_policy_config_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyConfigError, match=r"policy-config.qa.json: not found$"):
        load_config_file(tmp_path / "policy-config.qa.json")


def test_policy_config_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{all: mandatory}")
    with pytest.raises(PolicyConfigError, match=r"c.json: not valid JSON \("):
        load_config_file(path)


def test_policy_config_that_is_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('["mandatory"]')
    with pytest.raises(PolicyConfigError, match="c.json: must be a JSON object keyed by policy name"):
        load_config_file(path)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"all": "loud"}, "all is 'loud'; valid: advisory, mandatory, disabled"),
        ({"tpu-image": 3}, "tpu-image must be an enforcement level or an object"),
        ({"tpu-image": {"enforcementLevel": "loud"}}, "tpu-image.enforcementLevel is 'loud'; valid: advisory"),
    ],
    ids=["all", "not-a-level-or-object", "bad-level"],
)
def test_policy_config_values_are_checked(config: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyConfigError, match=message):
        analyze(InProcessAnalyzer(), [], config)


def test_an_enforcement_level_object_sets_the_level() -> None:
    path = str(Path(__file__).parent / "fixtures" / "policies" / "bad" / "tpu-image.yaml")
    violations = analyze(InProcessAnalyzer(), load([path]), {"tpu-image": {"enforcementLevel": "advisory"}})
    assert {(v.policy, v.level) for v in violations if v.policy == "tpu-image"} == {("tpu-image", "advisory")}


def test_analyzer_refuses_an_untested_pulumi_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi_policy

    monkeypatch.setattr(pulumi_policy, "__version__", "0.1.0", raising=False)
    with pytest.raises(RuntimeError, match="pulumi-policy 0.1.0 is installed; tpuray drives its analyzer servicer"):
        InProcessAnalyzer()


# ---------------------------------------------------------------------------- analyzer: the pack process


def test_a_pack_that_does_not_print_its_port_is_reported(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'Traceback: no module named pulumi_policy'\necho boom >&2\n")
    fake.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"did not start \(first line 'Traceback: no module named pulumi_policy'\)"):
        PackProcess(python=str(fake))


def test_a_pack_that_ignores_sigterm_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    pack = PackProcess.__new__(PackProcess)
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    pack.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert pack.proc.stdout is not None and pack.proc.stdout.readline() == b"up\n"
    real_wait = pack.proc.wait

    def wait(timeout: float | None = None) -> int:
        if timeout is not None:  # the 10 s grace period, without waiting 10 s
            raise subprocess.TimeoutExpired("pack", timeout)
        return real_wait()

    monkeypatch.setattr(pack.proc, "wait", wait)
    with pack as entered:
        assert entered is pack
    assert pack.proc.returncode == -9
    pack.close()  # again, on a child that is gone: nothing left to stop
    assert pack.proc.returncode == -9


# ---------------------------------------------------------------------------- core


def test_unknown_is_one_value_that_says_what_it_is() -> None:
    assert Unknown() is UNKNOWN
    assert repr(UNKNOWN) == "<unknown during preview>"


def test_plain_turns_unknown_list_items_into_unknown() -> None:
    # pulumi_policy's own proxy, as the analyzer hands it to a rule during preview
    props = unknown_checking_proxy({"cidrBlocks": [{"cidrBlock": "10.0.0.0/8"}, UNKNOWN_OBJECT_VALUE]})
    assert plain(props) == {"cidrBlocks": [{"cidrBlock": "10.0.0.0/8"}, UNKNOWN]}


def test_stack_rules_and_resource_rules_are_told_apart() -> None:
    assert RULES_BY_NAME["spot-has-fallback"].is_stack is True
    assert RULES_BY_NAME["tpu-image"].is_stack is False


def test_the_topology_rules_are_the_eight_that_judge_slice_shapes() -> None:
    assert sorted(name for name, rule in RULES_BY_NAME.items() if rule.topology) == [
        "compute-class-tpu-shape",
        "serve-tpu-topology",
        "tpu-chips-per-host",
        "tpu-node-pool-slice-shape",
        "tpu-node-selectors",
        "tpu-num-of-hosts",
        "tpu-slice-ray-reads-as-one-vm",
        "tpu-topology-provided",
    ]


def test_only_the_gke_and_node_pool_rules_stay_off_plain_manifests() -> None:
    assert sorted(name for name, rule in RULES_BY_NAME.items() if not rule.kubernetes) == [
        "compute-class-node-service-account",
        "gke-binary-authorization",
        "gke-control-plane-access",
        "gke-dataplane-v2",
        "gke-maintenance-window",
        "gke-no-default-network",
        "gke-no-legacy-abac",
        "gke-node-service-account",
        "gke-private-nodes",
        "gke-secrets-encryption",
        "gke-shielded-nodes",
        "gke-workload-identity",
        "hf-token-provider-class",
        "queue-flavor-matches-a-pool",
        "ray-namespace-pod-security",
        "ray-network-policies",
        "tpu-node-pool-slice-shape",
        "tpu-topology-provided",
    ]


def test_every_rule_is_mandatory_by_default_except_the_field_version_advice() -> None:
    levels = {name: rule.level for name, rule in RULES_BY_NAME.items()}
    assert len(levels) == 55
    assert {name for name, level in levels.items() if level is not MANDATORY} == {"kuberay-field-version"}
    assert levels["kuberay-field-version"] is ADVISORY


# ---------------------------------------------------------------------------- kube readers


def test_get_walks_list_indexes_and_stops_at_missing_ones() -> None:
    doc = {"spec": {"priorities": [{"spot": True}]}}
    assert get(doc, "spec", "priorities", 0, "spot") is True
    assert get(doc, "spec", "priorities", 1, "spot") is None
    assert get(doc, "spec", 0) is None


@pytest.mark.parametrize(("value", "number"), [(4, 4), (4.0, 4), ("4", 4), (" 4 ", 4), (True, None), (4.5, None),
                                               ("four", None), (None, None)])  # fmt: skip
def test_as_int_reads_engine_numbers_and_quantities_but_not_booleans(value: Any, number: int | None) -> None:
    assert as_int(value) == number


def test_groups_skip_a_head_or_worker_that_is_not_a_mapping() -> None:
    spec = {"headGroupSpec": "oops", "workerGroupSpecs": ["oops", {"template": {}}]}
    assert [(g.name, g.path) for g in kube_groups(RayClusterSpec(spec, "spec"))] == [("1", "spec.workerGroupSpecs[1]")]


def test_legacy_v5e_device_label_is_v5e() -> None:
    generation = generation_of_accelerator("tpu-v5-lite-device")
    assert generation is not None and generation.name == "v5e"
    assert generation_of_accelerator("tpu-v9-slice") is None


# ---------------------------------------------------------------------------- rule functions on odd inputs


def test_gke_cluster_rules_ignore_other_resource_types() -> None:
    assert list(_private_nodes(Resource(NODE_POOL_TYPE, "v6e-0", {}), {})) == []
    assert len(list(_private_nodes(Resource(CLUSTER_TYPE, "gke", {}), {}))) == 1


def test_crd_rules_pass_over_a_kind_without_a_packaged_crd() -> None:
    service = Resource(
        "kubernetes:core/v1:Service", "svc", {"metadata": {"name": "svc"}, "spec": {"type": "ClusterIP"}}
    )
    assert list(rules_crd._schema(service, {})) == []
    assert list(rules_crd._cel(service, {})) == []


def test_pod_security_expands_only_groups_with_a_pod_template() -> None:
    spec = {"headGroupSpec": {}, "workerGroupSpecs": [{"groupName": "tpu", "template": {"spec": {"containers": []}}}]}
    cluster = Resource(
        "kubernetes:ray.io/v1:RayCluster", "c", {"kind": "RayCluster", "metadata": {"name": "c"}, "spec": spec}
    )
    assert [where for where, _ in expanded_pods(cluster)] == ["spec.workerGroupSpecs[0] (group 'tpu').template"]


def test_spot_rule_reads_a_compute_class_without_a_name() -> None:
    cc = Resource("kubernetes:cloud.google.com/v1:ComputeClass", "cc", {"metadata": {}, "spec": {"priorities": [
        {"spot": True}, {"spot": False}]}})  # fmt: skip
    assert list(_spot_has_fallback([cc], {})) == []


@pytest.mark.parametrize(
    ("raw", "version"),
    [('{"version": "2.59.0"}', "2.59.0"), ('{"python": "py312"}', "2.60.0"), ("not json", "2.60.0"), (None, "2.60.0")],
    ids=["stack-pin", "no-version", "unreadable", "no-ray-section"],
)
def test_pinned_ray_version_comes_from_stack_config_under_the_cli(raw: str | None, version: str) -> None:
    # Set every case's config explicitly: what an earlier test in this worker left behind must not decide it.
    pulumi.runtime.set_all_config({} if raw is None else {"tpuray:ray": raw})
    try:
        assert pinned_ray_version({}) == version
        assert pinned_ray_version({"rayVersion": "2.58.0"}) == "2.58.0"  # policy config wins
    finally:
        pulumi.runtime.set_all_config({})


def test_an_allowed_image_without_a_ray_version_passes(tmp_path: Path) -> None:
    fixture = Path(__file__).parent / "fixtures" / "policies" / "good" / "raycluster.yaml"
    text = fixture.read_text().replace("rayproject/ray:2.60.0-py312-tpu", "vllm/vllm-tpu:v0.21.0")
    (tmp_path / "c.yaml").write_text(text)
    assert check([str(tmp_path / "c.yaml")], "prod", "2.60.0", ["vllm/vllm-tpu:*"]) == []
    assert {v.policy for v in check([str(tmp_path / "c.yaml")], "prod", "2.60.0", [])} == {
        "tpu-image",
        "ray-version-pinned",
    }


def test_groups_without_containers_leave_ray_version_nothing_to_compare() -> None:
    # kuberay-group-containers reports the missing container; the version rule has no image to read.
    spec = {"authOptions": {"mode": "token"}, "headGroupSpec": {"template": {"spec": {"containers": []}}}}
    cluster = Resource("kubernetes:ray.io/v1:RayCluster", "c", {"kind": "RayCluster", "spec": spec})
    assert list(_ray_version(cluster, {"rayVersion": "2.60.0"})) == []


# ---------------------------------------------------------------------------- manifests


def _load(tmp_path: Path, text: str) -> list[Any]:
    (tmp_path / "m.yaml").write_text(text)
    return load([str(tmp_path / "m.yaml")])


def test_an_empty_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="folder holds no .yaml or .yml file"):
        load([str(tmp_path)])


def test_empty_documents_are_skipped_and_lists_are_unpacked(tmp_path: Path) -> None:
    targets = _load(
        tmp_path,
        "---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: a}}\n"
        "- {apiVersion: v1, kind: Service, metadata: {name: b}}\n",
    )
    assert [t.resource.name for t in targets] == ["Service/a", "Service/b"]


def test_a_head_without_a_template_is_readable(tmp_path: Path) -> None:
    targets = _load(
        tmp_path, "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c}\nspec: {headGroupSpec: {}}\n"
    )
    assert [t.resource.name for t in targets] == ["RayCluster/c"]


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("{headGroupSpec: {template: {spec: []}}}", "spec.headGroupSpec.template.spec is list '[]', expected a mapping"),
        ("{headGroupSpec: {template: {spec: {containers: [ray]}}}}",
         "spec.headGroupSpec.template.spec.containers[0] is str 'ray', expected a mapping"),
        ("{workerGroupSpecs: [tpu]}", "spec.workerGroupSpecs[0] is str 'tpu', expected a mapping"),
    ],
    ids=["template-spec", "container", "worker-group"],
)  # fmt: skip
def test_misshapen_ray_clusters_name_the_field(tmp_path: Path, spec: str, problem: str) -> None:
    with pytest.raises(ManifestError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        _load(tmp_path, f"apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {{name: c}}\nspec: {spec}\n")


def test_a_spec_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"\(Service/a\): spec is list \"\['a'\]\", expected a mapping"):
        _load(tmp_path, "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: [a]\n")


# ---------------------------------------------------------------------------- ComputeClass rules

COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"


def _compute_class(priorities: list[dict[str, Any]], **spec: Any) -> Resource:
    props = {"kind": "ComputeClass", "metadata": {"name": "v6e"}, "spec": {"priorities": priorities, **spec}}
    return Resource(COMPUTE_CLASS, "cc", props)


def test_every_tpu_priority_of_a_compute_class_is_judged_after_a_bad_one() -> None:
    priorities = [
        {"tpu": {"type": 5, "topology": "2x4", "count": 4}},
        {"tpu": {"type": "tpu-v6e-slice", "topology": 7, "count": 4}},
        {"tpu": {"type": "tpu-v6e-slice", "topology": "2x4", "count": 2}},
        {"tpu": {"type": "tpu-v6e-slice", "topology": "4x4", "count": 4}, "machineType": "ct6e-standard-8t"},
        {"tpu": {"type": "tpu-v6", "topology": "4x4", "count": 4}},
    ]
    assert list(_tpu_shape(_compute_class(priorities), {})) == [
        "ComputeClass/v6e: spec.priorities[0].tpu.type is 5, not a GKE TPU accelerator: use e.g. tpu-v6e-slice",
        "ComputeClass/v6e: spec.priorities[1].tpu.topology is 7; valid for tpu-v6e-slice: 1x1, 2x2, 2x4, 4x4, 4x8, "
        "8x8, 8x16, 16x16",
        "ComputeClass/v6e: spec.priorities[2].tpu.count is 2; count is chips per node and a v6e 2x4 node has 8 or 4: "
        "set count to that",
        "ComputeClass/v6e: spec.priorities[3].machineType is 'ct6e-standard-8t' but v6e 4x4 with 4 chips per node "
        "runs on ct6e-standard-4t: set machineType: ct6e-standard-4t",
        "ComputeClass/v6e: spec.priorities[4].tpu.type is 'tpu-v6', not a GKE TPU accelerator: use e.g. tpu-v6e-slice",
    ]


def test_an_unknown_when_unsatisfiable_is_named_in_the_message() -> None:
    assert list(_when_unsatisfiable(_compute_class([], whenUnsatisfiable="Sometimes"), {})) == [
        "ComputeClass/v6e: spec.whenUnsatisfiable is 'Sometimes'; its default changed between GKE versions "
        "(ScaleUpAnyway, now DoNotScaleUp): set DoNotScaleUp (or ScaleUpAnyway) explicitly"
    ]


def test_a_tpu_priority_after_one_without_tpu_is_still_judged() -> None:
    priorities = [{"spot": True}, {"tpu": {"type": "tpu-v6", "topology": "4x4", "count": 4}}]
    assert list(_tpu_shape(_compute_class(priorities), {})) == [
        "ComputeClass/v6e: spec.priorities[1].tpu.type is 'tpu-v6', not a GKE TPU accelerator: use e.g. tpu-v6e-slice"
    ]
