"""`tpuray render`: one YAML file per in-cluster object, the very objects the program declares."""

from __future__ import annotations

import yaml

from tests.conftest import mocked
from tpuray.cli import main


def test_render_writes_one_file_per_kubernetes_object_of_the_stack(tmp_path, capsys):
    assert main(["render", "prod", "--out", str(tmp_path)]) == 0
    files = sorted(tmp_path.glob("*.yaml"))
    assert len(files) == len(mocked("prod").kubernetes_objects())
    assert sorted(capsys.readouterr().out.split()) == [str(p) for p in files]
    kinds = sorted(yaml.safe_load(p.read_text())["kind"] for p in files)
    # 15 NetworkPolicies: default-deny ingress and egress, then cluster, admin-head, metrics,
    # metrics-head and egress per Ray object, ingress for the RayService behind the Gateway, and
    # the RayJob's egress-api (it autoscales) and egress-submitter. 5 ServiceAccounts: one per role.
    # Kueue (prod's tpuray:queues): a ClusterQueue and LocalQueue per team, the research team's
    # Namespace, 3 ResourceFlavors (cpu/memory, the v6e reservation, the v5e fallback shape) and 2
    # WorkloadPriorityClasses.
    assert kinds == (
        ["ClusterQueue", "ClusterQueue", "ComputeClass", "ComputeClass", "Gateway", "HTTPRoute", "HealthCheckPolicy"]
        + ["LocalQueue", "LocalQueue", "Namespace", "Namespace"]
        + ["NetworkPolicy"] * 15
        + ["RayJob", "RayService"]
        + ["ResourceFlavor"] * 3
        + ["ServiceAccount"] * 5
        + ["WorkloadPriorityClass"] * 2
    )


def test_rendered_objects_equal_the_inputs_the_mocked_program_declared(tmp_path):
    assert main(["render", "dev", "--out", str(tmp_path)]) == 0
    rendered = {
        (d["kind"], d["metadata"]["name"]): d for d in (yaml.safe_load(p.read_text()) for p in tmp_path.iterdir())
    }
    for resource in mocked("dev").kubernetes_objects():
        manifest = resource.manifest()
        assert rendered[(manifest["kind"], manifest["metadata"]["name"])] == manifest


def test_namespace_sorts_before_the_objects_that_live_in_it(tmp_path):
    assert main(["render", "staging", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[0].startswith("00-namespace") and names[1].startswith("10-serviceaccount")


def test_numbers_are_written_as_integers_not_engine_floats(tmp_path):
    assert main(["render", "prod", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "30-rayjob-ray-tpuray-prod-train.yaml").read_text()
    assert "numOfHosts: 4\n" in text and "4.0" not in text
