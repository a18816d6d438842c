"""`tpuray demo` end to end on a small emulated stack: it leaves out/demo/ behind (slow: a Ray cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ray_fixtures import free_port
from tests.test_local_run_e2e import local_env, small_stack, tpuray  # noqa: F401 (fixtures)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a whole demo: preview, emulator up, train, serve, down
def test_short_demo_writes_the_loss_curve_and_the_summary(
    small_stack: Path,  # noqa: F811
    local_env: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo"
    port = str(free_port())  # Serve's default 8000 may be another test's, on the other xdist worker
    result = tpuray(
        local_env, "demo", str(small_stack), "--steps", "6", "--out", str(out), "--serve-port", port, timeout=900
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (out / "loss.png").read_bytes()[:4] == b"\x89PNG"
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# tpuray demo: stack e2e\n")
    assert "6 steps; loss" in summary
    assert f"wrote {out / 'summary.md'}" in result.stdout
    assert "Ray job logs (driver and workers' output): " in result.stdout
