"""tools/verify_ray_auth.py against real Ray 2.60 heads on 127.0.0.1, one started with token auth
(RAY_AUTH_MODE=token and RAY_AUTH_TOKEN, as KubeRay starts a head for authOptions {mode: token})
and one without (what an add-on older than KubeRay 1.5.1 runs, having pruned authOptions).

Each head is private to its test (its own RAY_TMPDIR and ports, loopback only), runs in a
process of its own, and is ended by PID when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ray_fixtures import free_port

pytestmark = pytest.mark.slow

TOOL = Path(__file__).resolve().parent.parent / "tools" / "verify_ray_auth.py"


@contextlib.contextmanager
def ray_head(auth_mode: str, token: str | None = None) -> Iterator[str]:
    """`ray start --head --block` with its dashboard (the Jobs API) on a free loopback port, in a
    process of its own (Ray reads RAY_AUTH_MODE once per process); yields the dashboard's URL.
    Ends the head it started, by PID, and then any process still carrying its marker."""
    import psutil

    marker = secrets.token_hex(8)
    temp_dir = tempfile.mkdtemp(prefix="tpr-auth-", dir="/tmp")  # short: Ray's sockets live below it
    dashboard = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": auth_mode, "RAY_TMPDIR": temp_dir, "TPURAY_AUTH_PROBE": marker}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every address stays 127.0.0.1 (ray_apps.runtime)
    env.pop("RAY_AUTH_TOKEN", None)
    if token is not None:
        env["RAY_AUTH_TOKEN"] = token
    argv = [
        str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--port", str(free_port()),
        "--node-ip-address", "127.0.0.1", "--num-cpus", "0", "--include-dashboard", "true",
        "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard), "--disable-usage-stats",
        "--temp-dir", os.path.join(temp_dir, "ray"),
    ]  # fmt: skip
    head = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ours() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["pid"]):
            try:
                if proc.environ().get("TPURAY_AUTH_PROBE") == marker and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    try:
        yield f"http://127.0.0.1:{dashboard}"
    finally:
        head.terminate()
        head.wait(timeout=60)
        _, alive = psutil.wait_procs(ours(), timeout=30)
        for proc in alive:
            proc.kill()
        psutil.wait_procs(alive, timeout=30)
        shutil.rmtree(temp_dir, ignore_errors=True)


def verify(url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), url, "--wait-seconds", "90", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )


def test_a_head_with_token_auth_refuses_the_jobs_api_without_the_token_and_answers_with_it() -> None:
    token = secrets.token_hex(16)
    with ray_head("token", token) as url:
        done = verify(url, "--token-env", "CLUSTER_TOKEN", env={"CLUSTER_TOKEN": token})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"ray auth: GET {url}/api/jobs/ without a token refused with 401 ('Unauthorized: Missing authentication token')",
        f"ray auth: GET {url}/api/jobs/ with the token answered 200",
    ]


def test_a_head_without_token_auth_fails_the_deploy() -> None:
    with ray_head("disabled") as url:
        done = verify(url)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"ray auth: OPEN: GET {url}/api/jobs/ without a token answered 200; token auth is off, and the Jobs API runs "
        "code for anyone who reaches the head (an add-on older than KubeRay 1.5.1 drops authOptions): failing the deploy"
    ]


def test_nothing_listening_is_no_pass() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, str(TOOL), url, "--wait-seconds", "2"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"ray auth: {url}/api/jobs/: no answer within 2 s (")
