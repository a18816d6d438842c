"""Generic pod security comes from checkov's own checks, run on the pods KubeRay creates from each group."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from tpuray.policies.core import UNKNOWN, Resource
from tpuray.policies.rules_podsecurity import checks, expanded_pods

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "policies"
GOOD_JOB = yaml.safe_load((FIXTURES / "good" / "rayjob.yaml").read_text())


def test_the_enforced_checks_are_checkovs_host_and_privilege_checks() -> None:
    assert [c.id for c in checks()] == [
        "CKV_K8S_16",
        "CKV_K8S_17",
        "CKV_K8S_18",
        "CKV_K8S_19",
        "CKV_K8S_26",
        "CKV_K8S_27",
        "CKV_K8S_39",
    ]


def test_each_group_template_becomes_the_pod_kuberay_creates() -> None:
    job = copy.deepcopy(GOOD_JOB)
    job["spec"]["submitterPodTemplate"] = {"spec": {"containers": [{"name": "submit", "image": "ray"}]}}
    pods = expanded_pods(Resource("kubernetes:ray.io/v1:RayJob", "train-job", job))
    assert [(where, pod["kind"], pod["metadata"]["name"]) for where, pod in pods] == [
        ("spec.rayClusterSpec.headGroupSpec.template", "Pod", "train-job-head"),
        ("spec.rayClusterSpec.workerGroupSpecs[0] (group 'tpu').template", "Pod", "train-job-tpu"),
        ("spec.submitterPodTemplate", "Pod", "train-job-submitter"),
    ]


def test_a_security_context_unknown_during_preview_is_left_out_not_judged() -> None:
    job = copy.deepcopy(GOOD_JOB)
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["containers"][0]["securityContext"] = UNKNOWN
    worker["volumes"] = [UNKNOWN]
    _, pod = expanded_pods(Resource("kubernetes:ray.io/v1:RayJob", "train-job", job))[1]
    assert "securityContext" not in pod["spec"]["containers"][0] and pod["spec"]["volumes"] == []


def test_a_group_without_a_pod_spec_has_no_pod_to_scan() -> None:
    job = copy.deepcopy(GOOD_JOB)
    del job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    pods = expanded_pods(Resource("kubernetes:ray.io/v1:RayJob", "train-job", job))
    assert [where for where, _ in pods] == ["spec.rayClusterSpec.headGroupSpec.template"]
