"""The Pods pod-security judges (tpuray/policies/rules_podsecurity.py `expanded_pods`): one per
group template and one for a RayJob's submitter, named as KubeRay names them, with the
template's metadata, on hand-built objects."""

from __future__ import annotations

from typing import Any

from tpuray.policies.core import Resource
from tpuray.policies.rules_podsecurity import expanded_pods

RAY = {"labels": {"app": "ray"}}
POD_SPEC = {"containers": [{"name": "c", "image": "x"}]}
SUBMITTER_SPEC = {"containers": [{"name": "s", "image": "y"}]}


def job(metadata: dict[str, Any]) -> Resource:
    template = {"metadata": RAY, "spec": POD_SPEC}
    cluster = {
        "headGroupSpec": {"template": template},
        "workerGroupSpecs": [{"groupName": "tpu", "template": template}],
    }
    submitter = {"metadata": {"labels": {"role": "submit"}}, "spec": SUBMITTER_SPEC}
    spec = {"rayClusterSpec": cluster, "submitterPodTemplate": submitter}
    return Resource(
        "kubernetes:ray.io/v1:RayJob",
        "j",
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata, "spec": spec},
    )


def pod(name: str, labels: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": labels, "name": name}, "spec": spec}


def test_each_template_becomes_a_pod_named_after_the_object_and_its_group() -> None:
    assert expanded_pods(job({"name": "train"})) == [
        ("spec.rayClusterSpec.headGroupSpec.template", pod("train-head", {"app": "ray"}, POD_SPEC)),
        ("spec.rayClusterSpec.workerGroupSpecs[0] (group 'tpu').template", pod("train-tpu", {"app": "ray"}, POD_SPEC)),
        ("spec.submitterPodTemplate", pod("train-submitter", {"role": "submit"}, SUBMITTER_SPEC)),
    ]


def test_an_object_without_a_name_lends_its_logical_name_to_the_pods() -> None:
    assert [p["metadata"]["name"] for _, p in expanded_pods(job({}))] == ["j-head", "j-tpu", "j-submitter"]
