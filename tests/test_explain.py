"""`tpuray local run ... --explain` lists what the emulator ignores, and needs no running cluster."""

from __future__ import annotations

from conftest import mocked

from tpuray.cli import main
from tpuray.preview.explain import ignored


def test_prod_explain_names_pod_security_network_policies_gateway_and_cluster_settings() -> None:
    lines = ignored(mocked("prod"))
    assert lines[0] == (
        "Pod Security: namespace ray enforces 'restricted'; no API server admits pods here, and the raylets "
        "run as this machine's user"
    )
    assert any(line.startswith("NetworkPolicy: 15 rendered, none enforced;") for line in lines)
    assert any(
        line.startswith("Serve ingress: 1 Gateway, 1 HTTPRoute, 1 HealthCheckPolicy not created;") for line in lines
    )
    assert lines[-1] == (
        "GKE cluster settings: Dataplane V2, KMS secrets encryption, Binary Authorization, maintenance policy, "
        "private nodes and endpoint, Workload Identity, shielded nodes: cloud-side, not emulated"
    )


def test_a_stack_without_a_gateway_lists_no_serve_ingress() -> None:
    assert not any(line.startswith("Serve ingress") for line in ignored(mocked("dev")))


def test_explain_exits_0_without_an_emulated_cluster(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TPURAY_LOCAL_DIR", str(tmp_path / "nothing-running"))
    assert main(["local", "run", "train", "dev", "--explain"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "tpuray local run train dev: what the emulator ignores" in out
    assert "authOptions token: the emulator runs with RAY_AUTH_MODE=disabled" in out
