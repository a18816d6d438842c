"""kuberay-field-version: fields an older KubeRay's API server would prune without a word."""

from __future__ import annotations

import copy
from typing import Any

from tpuray.checks import kuberay_versions
from tpuray.policies import RULES_BY_NAME
from tpuray.policies.core import Resource

RULE = RULES_BY_NAME["kuberay-field-version"]
RAYJOB: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {"name": "train"},
    "spec": {
        "entrypoint": "python -m ray_apps.train",
        "submitterPodTemplate": {"spec": {"containers": [{"name": "submit", "image": "rayproject/ray:2.60.0"}]}},
        "rayClusterSpec": {
            "authOptions": {"mode": "token"},
            "headGroupSpec": {"rayStartParams": {}},
            "workerGroupSpecs": [
                {"groupName": "cpu", "rayStartParams": {}},
                {"groupName": "tpu", "labels": {"tpuray.dev/slice-pool": "v6e"}, "rayStartParams": {}},
            ],
        },
    },
}


def findings(obj: dict[str, Any], config: dict[str, Any]) -> list[str]:
    resource = Resource("kubernetes:ray.io/v1:" + obj["kind"], "r", obj)
    assert RULE.resource_check is not None
    return [str(f) for f in RULE.resource_check(resource, config)]


def test_without_a_recorded_version_there_is_nothing_to_compare_with() -> None:
    assert findings(RAYJOB, {}) == []


def test_in_prod_a_recorded_kuberay_that_drops_a_field_blocks_the_preview() -> None:
    from tpuray.policies.analyzer import InProcessAnalyzer, Target, analyze, config_file, load_config_file, urn

    target = Target(
        Resource("kubernetes:ray.io/v1:RayJob", "train", RAYJOB, urn("t", "kubernetes:ray.io/v1:RayJob", "t"))
    )
    prod = load_config_file(config_file("prod"))
    found = analyze(InProcessAnalyzer(), [target], prod, {"kuberay-field-version": {"kuberayVersion": "1.5.0"}})
    assert [(v.policy, v.level) for v in found if v.policy == "kuberay-field-version"] == [
        ("kuberay-field-version", "mandatory")
    ]


def test_kuberay_1_5_0_drops_token_auth_and_says_what_that_opens() -> None:
    assert findings(RAYJOB, {"kuberayVersion": "1.5.0"}) == [
        "RayJob/train: authOptions needs KubeRay >= 1.5.1 but the environment runs 1.5.0, whose API server drops it "
        "without an error: the cluster starts without token auth: the dashboard and Jobs API run code for anyone "
        "who reaches the head"
    ]


def test_kuberay_1_4_0_also_drops_worker_group_labels_so_the_gang_would_hang() -> None:
    found = findings(RAYJOB, {"kuberayVersion": "v1.4.0"})
    assert len(found) == 2
    assert found[1] == (
        "RayJob/train: workerGroupSpecs[].labels needs KubeRay >= 1.5.0 but the environment runs v1.4.0, whose API "
        "server drops it without an error: Ray nodes start without the slice-pool and market-type labels, so the "
        "workloads' label selectors match no node and the gang waits forever"
    )


def test_a_kuberay_with_every_field_fires_nothing() -> None:
    assert findings(RAYJOB, {"kuberayVersion": "1.7.0"}) == []


def test_a_rayservice_upgrade_strategy_is_checked_on_the_service_spec() -> None:
    service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "serve"},
        "spec": {"upgradeStrategy": {"type": "NewCluster"}, "rayClusterConfig": {"headGroupSpec": {}}},
    }
    assert [f.path for f in kuberay_versions.fields_used("RayService", {"headGroupSpec": {}}, service["spec"])] == [
        "upgradeStrategy"
    ]
    assert findings(service, {"kuberayVersion": "1.3.1"})[0].startswith(
        "RayService/serve: upgradeStrategy needs KubeRay >= 1.4.0 but the environment runs 1.3.1"
    )


def test_an_object_with_none_of_the_fields_fires_nothing_even_on_an_old_kuberay() -> None:
    bare = copy.deepcopy(RAYJOB)
    del bare["spec"]["submitterPodTemplate"], bare["spec"]["rayClusterSpec"]["authOptions"]
    bare["spec"]["rayClusterSpec"]["workerGroupSpecs"][1].pop("labels")
    assert findings(bare, {"kuberayVersion": "1.0.0"}) == []


def test_a_rayjob_on_an_existing_cluster_is_checked_for_its_own_fields_only() -> None:
    selector_job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "adhoc"},
        "spec": {"clusterSelector": {"ray.io/cluster": "shared"}, "submitterPodTemplate": {"spec": {}}},
    }
    assert findings(selector_job, {"kuberayVersion": "1.3.0"}) == [
        "RayJob/adhoc: submitterPodTemplate needs KubeRay >= 1.4.0 but the environment runs 1.3.0, whose API server "
        "drops it without an error: KubeRay's default submitter pod runs instead, which Pod Security `restricted` "
        "refuses"
    ]


def test_versions_parse_with_or_without_a_leading_v_and_refuse_anything_else() -> None:
    assert kuberay_versions.parse("v1.5.1") == (1, 5, 1)
    assert kuberay_versions.parse("1.10.0") == (1, 10, 0)
    assert kuberay_versions.parse("1.5") is None
    assert kuberay_versions.parse("latest") is None


def test_the_floors_agree_with_the_packaged_v1_7_0_crds() -> None:
    """Every field with a floor exists in the CRDs tpuray validates against (KubeRay v1.7.0)."""
    from tpuray.checks import schemas

    for floor in kuberay_versions.FIELD_FLOORS:
        for kind in floor.kinds:
            schema = schemas.openapi_schema("ray.io/v1", kind)["properties"]["spec"]
            if floor.kinds == kuberay_versions.CLUSTER_KINDS and kind != "RayCluster":
                schema = schema["properties"]["rayClusterSpec" if kind == "RayJob" else "rayClusterConfig"]
            node = schema
            for part in floor.path.split("."):
                node = node["properties"][part.removesuffix("[]")]
                if part.endswith("[]"):
                    node = node["items"]
            assert node, (kind, floor.path)


def test_every_gke_floor_was_read_in_the_source_it_cites() -> None:
    from tpuray.checks import gke_versions

    assert {name: floor.verified for name, floor in gke_versions.FLOORS.items()} == {
        "Ray operator add-on": True,
        "ComputeClass": True,
        "TPU containers without privileged mode (Pod Security restricted)": True,
        "ComputeClass nodePoolAutoCreation without cluster-level node auto-provisioning": True,
        "TPU7x (Ironwood)": True,
        "flex-start for TPUs": True,
    }


# --------------------------------------------------------------------------- fail closed (issue 36, item 6)
REQUIRED = {"tokenAuthRequired": True}


def test_where_token_auth_is_required_a_missing_kuberay_version_is_a_violation() -> None:
    assert findings(RAYJOB, REQUIRED) == [
        "RayJob/train: authOptions needs KubeRay >= 1.5.1 and this environment requires token auth but records no "
        "KubeRay version, so nothing shows that its cluster keeps the field; an older add-on drops it without an "
        "error: the cluster starts without token auth: the dashboard and Jobs API run code for anyone who reaches "
        "the head. Record the version the cluster runs as kuberay-field-version.kuberayVersion in "
        'policies/policy-config.<env>.json (docs/configuration.md, "KubeRay versions")'
    ]


def test_a_required_environment_with_a_recorded_version_compares_with_it_instead() -> None:
    assert findings(RAYJOB, {**REQUIRED, "kuberayVersion": "1.5.1"}) == []


def test_an_object_without_auth_options_is_left_to_ray_token_auth_even_where_it_is_required() -> None:
    no_auth = copy.deepcopy(RAYJOB)
    del no_auth["spec"]["rayClusterSpec"]["authOptions"]
    assert findings(no_auth, REQUIRED) == []


def test_every_committed_environment_requires_token_auth_and_records_the_auth_options_floor() -> None:
    import json

    from tpuray.policies.analyzer import config_file

    recorded = {
        env: json.loads(config_file(env).read_text())["kuberay-field-version"] for env in ("dev", "staging", "prod")
    }
    assert recorded == {env: {"kuberayVersion": "1.5.1", "tokenAuthRequired": True} for env in recorded}


def test_tpuray_check_of_a_manifest_never_requires_a_recorded_version(tmp_path, monkeypatch) -> None:
    """Under a policy config that requires token auth and records no version, the stack's own
    analysis fires and `tpuray check` (no environment cluster) does not."""
    import json

    import yaml

    from tpuray.policies import evaluate
    from tpuray.policies.analyzer import InProcessAnalyzer, Target, analyze, urn

    config = tmp_path / "policy-config.lab.json"
    config.write_text(json.dumps({"all": "mandatory", "kuberay-field-version": REQUIRED}))
    manifest = tmp_path / "rayjob.yaml"
    manifest.write_text(yaml.safe_dump(RAYJOB))
    target = Target(
        Resource("kubernetes:ray.io/v1:RayJob", "train", RAYJOB, urn("t", "kubernetes:ray.io/v1:RayJob", "t"))
    )
    stack_found = analyze(InProcessAnalyzer(), [target], json.loads(config.read_text()), {})
    assert [v.policy for v in stack_found if v.policy == "kuberay-field-version"] == ["kuberay-field-version"]
    monkeypatch.setattr(evaluate, "config_file", lambda environment: config)
    checked = evaluate.check_manifests([str(manifest)], "lab", "2.60.0", [], rules={"kuberay-field-version"})
    assert checked == []
