"""The cases the upstream test suites accept (the KubeRay TPU webhook's, KubeRay's and its
kubectl plugin's; tests/fixtures/upstream-accepted/PROVENANCE.md) through `tpuray check`: none is
refused except where it really breaks on GKE, each such finding explained in
docs/policy-findings.md."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.test_check import findings_table
from tpuray.policies.evaluate import check_manifests as check

CASES = Path(__file__).resolve().parent / "fixtures" / "upstream-accepted"
FILES = sorted(p.name for p in CASES.glob("*.yaml"))

# (rule, resource) of every mandatory finding per file; every other file has none.
EXPECTED = {
    # A fake TPU (Ray custom resource TPU: 4 only) on kind: on GKE no chip is allocated to the pod.
    "kuberay-e2e--v4-single-host-fake-tpu.yaml": {("tpu-chips-per-host", "RayCluster/ray-cluster")},
    "kuberay-e2e--v6e-multi-host-fake-tpu.yaml": {("tpu-chips-per-host", "RayCluster/ray-cluster-multi-host")},
    # The webhook's arithmetic accepts 2 hosts of 4 chips; GKE's tpu-v5-lite-device has single-host VMs only.
    "webhook--v5e-device-multi-host.yaml": {("tpu-node-selectors", "RayCluster/test-cluster")},
}


@pytest.mark.parametrize("name", FILES)
def test_an_upstream_accepted_case_is_refused_only_where_it_breaks_on_gke(name: str) -> None:
    found = {(v.policy, v.resource) for v in check([str(CASES / name)], "prod", "2.60.0", []) if v.level == "mandatory"}
    assert found == EXPECTED.get(name, set())


def test_the_cases_cover_every_generation_single_host_multi_host_and_multi_slice() -> None:
    groups = [
        g
        for name in FILES
        for g in yaml.safe_load((CASES / name).read_text())["spec"]["workerGroupSpecs"]
        if "cloud.google.com/gke-tpu-accelerator" in g["template"]["spec"].get("nodeSelector", {})
    ]
    accelerators = {g["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] for g in groups}
    assert accelerators == {
        "tpu-v4-podslice",
        "tpu-v5-lite-device",
        "tpu-v5-lite-podslice",
        "tpu-v5p-slice",
        "tpu-v6e-slice",
        "tpu7x",
    }
    assert len(FILES) == 19
    assert {g["numOfHosts"] > 1 for g in groups} == {True, False}  # single-host and multi-host
    assert any(g["numOfHosts"] > 1 and g["replicas"] > 1 for g in groups)  # several multi-host slices


def test_every_case_is_in_the_provenance_table_and_every_row_has_its_file() -> None:
    table = (CASES / "PROVENANCE.md").read_text()
    rows = {line.split("|")[1].strip(" `") for line in table.splitlines() if line.startswith("| `")}
    assert rows == set(FILES)


def test_policy_findings_doc_lists_every_upstream_finding_and_nothing_stale() -> None:
    found = {(rule, name, resource) for name, findings in EXPECTED.items() for rule, resource in findings}
    assert findings_table("Mandatory findings on the upstream accepted cases") == found
