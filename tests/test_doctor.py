"""`tpuray doctor`: each check's ok line, and the fix it gives when it fails (no Ray cluster)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import metadata
from pathlib import Path

import psutil
import pytest

from tests.conftest import mocked
from tpuray import doctor
from tpuray.cli import main
from tpuray.local import emulator, localrun

GIB = 2**30


@pytest.fixture
def sleeper(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line names tmp_path/root/<param>/ray, as an emulated host's would."""
    marker = str(tmp_path / "root" / request.param / "ray")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker])
    deadline = time.monotonic() + 10
    while marker not in " ".join(psutil.Process(proc.pid).cmdline()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def save_state(root: Path, name: str, pids: list[int]) -> None:
    sdir = root / name
    sdir.mkdir(parents=True)
    records = [emulator.ProcessRecord(p, psutil.Process(p).create_time(), "gcs_server") for p in pids]
    state = emulator.ClusterState(name=name, state_dir=str(sdir), hosts=[emulator.HostRecord("", 0, "n", records)])
    state.save()


def test_python_requirement_is_pyprojects() -> None:
    assert doctor.REQUIRES_PYTHON == metadata("tpuray")["Requires-Python"]


def test_python_3_11_is_ok() -> None:
    assert doctor.check_python((3, 11, 7)).line() == "ok    python: 3.11.7 (>=3.10)"


def test_python_3_9_blocks_with_the_version_to_install() -> None:
    check = doctor.check_python((3, 9, 18))
    assert check.blocks
    assert check.line().startswith("FAIL  python: 3.9.18 is too old; tpuray needs >=3.10; fix: install Python 3.10")


def test_memory_for_the_whole_dev_plan_is_ok() -> None:
    check = doctor.check_memory(mocked("dev"), 16 * GIB)
    assert check.ok
    assert "the dev stack's 10 emulated hosts and head take 3.7 GiB" in check.detail


def test_memory_for_a_reduced_plan_is_advice_not_a_block() -> None:
    check = doctor.check_memory(mocked("dev"), 4 * GIB)
    assert (check.ok, check.blocks) == (False, False)
    # 3 hosts fit, but the 4x4 pool shrinks to the one-VM 2x4, never the 2-host 2x4 Ray reads as one VM.
    assert "emulates 2 of them" in check.detail
    assert check.fix.startswith("free memory to 7.4 GiB available")


def test_memory_below_one_host_per_worker_group_blocks() -> None:
    check = doctor.check_memory(mocked("dev"), 2 * GIB)
    assert check.blocks
    assert "needs one per worker group (2)" in check.detail
    assert check.fix.startswith("free memory to 2.7 GiB available")


def test_free_serve_port_is_ok() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert doctor.check_ports(port).ok


def test_serve_port_in_use_blocks_and_names_the_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check = doctor.check_ports(s.getsockname()[1])
        assert check.blocks
        assert check.fix == f"stop what listens there (`ss -ltnp 'sport = :{s.getsockname()[1]}'` names it)"


def test_empty_state_root_is_ok(tmp_path: Path) -> None:
    assert doctor.check_emulator_state("dev", tmp_path).ok


def test_stale_state_is_advice_to_run_local_down(tmp_path: Path) -> None:
    save_state(tmp_path, "staging", [])
    check = doctor.check_emulator_state("dev", tmp_path)
    assert (check.ok, check.blocks) == (False, False)
    assert check.fix == "tpuray local down staging"


@pytest.mark.parametrize("sleeper", ["dev"], indirect=True)
def test_running_cluster_of_the_demo_stack_blocks(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    save_state(tmp_path / "root", "dev", [sleeper.pid])
    check = doctor.check_emulator_state("dev", tmp_path / "root")
    assert check.blocks
    assert "running: dev (1 processes)" in check.detail
    assert check.fix == "tpuray local down dev"


@pytest.mark.parametrize("sleeper", ["prod"], indirect=True)
def test_running_cluster_of_another_stack_is_advice(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    save_state(tmp_path / "root", "prod", [sleeper.pid])
    check = doctor.check_emulator_state("dev", tmp_path / "root")
    assert (check.ok, check.blocks) == (False, False)
    assert check.fix == "tpuray local down prod"


@pytest.mark.parametrize("sleeper", ["gone"], indirect=True)
def test_stray_process_under_the_state_root_is_named_by_pid(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    (tmp_path / "root").mkdir()
    check = doctor.check_emulator_state("dev", tmp_path / "root")
    assert f"with no cluster: {sleeper.pid}" in check.detail
    assert check.fix == f"kill {sleeper.pid} (they were started from this project)"


def test_missing_shared_folder_says_what_to_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TPURAY_SHARED", str(tmp_path / "nowhere"))
    check = doctor.check_shared()
    assert (check.ok, check.blocks) == (False, False)
    assert check.fix == "set TPURAY_SHARED to the folder holding schemas/ and conformance/"


def test_hadolint_is_found_in_the_virtualenv() -> None:
    hadolint = next(c for c in doctor.check_tools(path="") if c.name == "hadolint")
    assert hadolint.ok and hadolint.detail.endswith("/hadolint")


def test_missing_promtool_gives_its_debian_package(tmp_path: Path) -> None:
    promtool = next(c for c in doctor.check_tools(path=str(tmp_path)) if c.name == "promtool")
    assert promtool.line() == (
        "warn  promtool: not found (optional: alert rule tests (tests/test_observe_rules.py)); "
        "fix: apt-get install prometheus"
    )


def test_doctor_exits_1_with_its_advice_when_a_check_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(emulator.LOCAL_DIR_ENV, str(tmp_path))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        monkeypatch.setattr(localrun, "SERVE_HTTP_PORT", port)
        code = main(["doctor", "dev"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "ok    python:" in out
    assert f"FAIL  ports: 127.0.0.1:{port} (the demo's Serve HTTP port) is in use" in out
    assert err.startswith("error: 1 check(s) block the demo: ports: stop what listens there")
