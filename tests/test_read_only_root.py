"""Every Ray container runs with a read-only root filesystem and an emptyDir where Ray writes
(issue 36, item 9): on the rendered objects, and on a real Ray 2.60 head, worker and job
submitter run here under a read-only root with only those directories writable.

The emulation: a private mount, PID and network namespace (`unshare`, as root, touching nothing
outside it; loopback is its only interface) remounts / read-only and mounts a tmpfs at each path of pod_security.WRITABLE_DIRS, as the
kubelet mounts the emptyDirs over a read-only image. Ray runs with token auth as KubeRay starts
it (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN from the environment), a worker node joins, and a job
submitted with a working_dir (unpacked on the nodes under /tmp/ray, as a gs:// bundle would be)
imports JAX, computes, writes a temp file and runs tasks on both nodes. The submitter runs in a
namespace of its own with /tmp alone writable (pod_security.SUBMITTER_DIRS). When the script
ends, the PID namespace ends every process it started.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STACKS, mocked
from tests.ray_fixtures import free_port
from tpuray import labels
from tpuray.desired import pod_security
from tpuray.preview.render import manifests

VENV_BIN = Path(sys.executable).parent


def containers(obj: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """'<pod>/<container>' -> (container, its pod spec) for every container tpuray renders."""
    spec = labels.ray_cluster_spec(obj)
    pods = {"head": spec["headGroupSpec"]["template"]["spec"]}
    pods |= {g["groupName"]: g["template"]["spec"] for g in spec["workerGroupSpecs"]}
    if obj["kind"] == "RayJob":
        pods["submitter"] = obj["spec"]["submitterPodTemplate"]["spec"]
    return {f"{name}/{c['name']}": (c, pod) for name, pod in pods.items() for c in pod["containers"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_container_has_a_read_only_root_and_emptydirs_where_ray_writes(stack: str) -> None:
    for obj in (m for m in manifests(mocked(stack)) if m["kind"] in labels.RAY_KINDS):
        for where, (container, pod) in containers(obj).items():
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, where
            empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
            mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"] if m["name"] in empty}
            expected = ["/tmp"] if where.startswith("submitter/") else ["/tmp/ray", "/tmp", "/home/ray/.cache"]
            assert list(mounted) == expected, where


def test_the_autoscaler_sidecar_is_read_only_and_shares_the_heads_ray_logs() -> None:
    job = next(m for m in manifests(mocked("prod")) if m["kind"] == "RayJob")
    autoscaler = job["spec"]["rayClusterSpec"]["autoscalerOptions"]
    assert autoscaler["securityContext"]["readOnlyRootFilesystem"] is True
    assert autoscaler["volumeMounts"][:2] == [
        {"name": "ray-logs", "mountPath": "/tmp/ray"},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


JOB = """
import os, tempfile
import ray
import jax.numpy as jnp

ray.init()

@ray.remote(num_cpus=1, scheduling_strategy="SPREAD")
def step(i):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "ckpt"), "w") as f:
            f.write(str(i))
    return float(jnp.sum(jnp.arange(4.0)) + i), ray.get_runtime_context().get_node_id()

results = ray.get([step.remote(i) for i in range(4)])
print("RESULTS", sorted(r[0] for r in results), "NODES", len({r[1] for r in results}))
"""

SCRIPT = r"""
set -eu
ip link set lo up
mount --make-rprivate /
mount -o remount,bind,ro /
if touch "$PROBE" 2>/dev/null; then echo "ROOT-WRITABLE"; exit 3; fi
# The runtime creates each mount point (inside the parent's tmpfs for /tmp/ray).
for dir in $WRITABLE; do mkdir -p "$dir" && mount -t tmpfs tmpfs "$dir"; done
common="--node-ip-address=127.0.0.1 --num-cpus=1 --disable-usage-stats"
"$BIN/ray" start --head --port="$GCS_PORT" --dashboard-host=127.0.0.1 --dashboard-port="$DASH_PORT" \
  --include-dashboard=true $common >/dev/null
"$BIN/ray" start --address="127.0.0.1:$GCS_PORT" $common >/dev/null
# The submitter: its own mounts, /tmp alone writable (a fresh tmpfs hides the nodes' /tmp).
unshare --mount --propagation private sh -c '
  for dir in $SUBMITTER_WRITABLE; do mount -t tmpfs tmpfs "$dir"; done
  "$BIN/ray" job submit --address "http://127.0.0.1:$DASH_PORT" --working-dir "$JOB_DIR" -- python job.py
'
echo "SESSIONS $(ls /tmp/ray | grep -c '^session_2')"
"""


def run_read_only(writable_in_home: list[str], extra: tuple[str, ...] = ()) -> str:
    """SCRIPT's output with / read-only and `writable_in_home` (RAY_HOME paths rewritten to a
    scratch home) plus `extra` writable; fails the test when the script fails."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    home = Path(tempfile.mkdtemp(prefix="tpuray-ro-", dir="/var/tmp"))  # outside /tmp: it gets a tmpfs
    try:
        (home / ".cache").mkdir()
        job_dir = home / "job"
        job_dir.mkdir()
        (job_dir / "job.py").write_text(JOB)
        writable = [p.replace(pod_security.RAY_HOME, str(home)) for p in writable_in_home] + list(extra)
        # /tmp before /tmp/ray, as the runtime mounts a parent before what lies below it.
        writable.sort(key=lambda p: p.count("/"))
        env = {
            "PATH": f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(home),
            "BIN": str(VENV_BIN),
            "PROBE": str(home / "probe"),
            "WRITABLE": " ".join(writable),
            "SUBMITTER_WRITABLE": " ".join(d.path for d in pod_security.SUBMITTER_DIRS),
            "JOB_DIR": str(job_dir),
            "GCS_PORT": str(free_port()),
            "DASH_PORT": str(free_port()),
            "RAY_AUTH_MODE": "token",  # as KubeRay starts Ray for authOptions {mode: token}
            "RAY_AUTH_TOKEN": secrets.token_hex(16),
            "JAX_PLATFORMS": "cpu",
            "PYTHONDONTWRITEBYTECODE": "1",
            # The suite's leftover check (tests/leftovers.py) sees these processes as its own.
            **{k: v for k, v in os.environ.items() if k in ("TPURAY_TEST_SESSION", "RAY_USAGE_STATS_ENABLED")},
        }
        done = subprocess.run(
            # A network namespace of its own with loopback alone: Ray, which rewrites 127.0.0.1 to the
            # machine's address for a multi-node cluster, finds no other address to use.
            ["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--mount-proc", "sh", "-c", SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            timeout=420,
        )
        return f"rc={done.returncode}\n{done.stdout}{done.stderr}"
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
def test_a_head_a_worker_and_a_job_run_with_only_the_rendered_dirs_writable() -> None:
    out = run_read_only([d.path for d in pod_security.WRITABLE_DIRS])
    assert out.startswith("rc=0\n"), out[-4000:]
    assert "RESULTS [6.0, 7.0, 8.0, 9.0] NODES 2" in out, out[-4000:]
    assert "SESSIONS 1" in out, out[-4000:]
    assert "Read-only file system" not in out, out[-4000:]


@pytest.mark.slow
def test_without_its_emptydirs_the_head_cannot_start_on_a_read_only_root() -> None:
    out = run_read_only([f"{pod_security.RAY_HOME}/.cache"])
    assert not out.startswith("rc=0\n")
    assert "OSError: [Errno 30] Read-only file system: '/tmp/ray'" in out, out[-4000:]
