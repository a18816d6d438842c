"""Each emulated TPU host unpacks runtime_env working_dirs in a folder of its own (slow: a Ray cluster).

On GKE every host is a pod with its own disk. The emulator's hosts share one machine and one
Ray session folder; with Ray's single default runtime_env folder, a host that unpacked the
job's working_dir again (Ray re-creates it, rmtree then unzip, the first time each node needs
it) deleted it under another host's starting worker: `cd .../working_dir_files/gs_...: No such
file or directory` in multi-host demo runs.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import psutil
import pytest

from tpuray import catalog
from tpuray.local.emulator import EmulatedCluster, SliceSpec, plan_for


@pytest.mark.slow
def test_two_hosts_of_one_slice_run_the_same_working_dir_from_their_own_folders(tmp_path: Path) -> None:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "marker.txt").write_text("bundle\n")
    two_hosts = SliceSpec("train-spot-0", "v6e-dev", catalog.lookup("v6e", "2x4", "ct6e-standard-4t"), "spot")
    state_dir = tempfile.mkdtemp(prefix="tpre-", dir="/tmp")  # short: Ray puts sockets under it
    emu = EmulatedCluster.start(plan_for([two_hosts]), state_dir=state_dir, name="test-runtime-env")
    pids = emu.pids()
    try:
        emu.connect(runtime_env={"working_dir": str(tmp_path / "app")})
        # The labels Ray derived from each host's TPU environment name the two hosts.
        hosts = {
            int(n["Labels"]["ray.io/tpu-worker-id"]): n["NodeID"]
            for n in ray.nodes()
            if n["Alive"] and n["Labels"].get("ray.io/tpu-slice-name") == "train-spot-0"
        }

        @ray.remote(num_cpus=1)
        def where() -> tuple[str, str]:
            return os.getcwd(), Path("marker.txt").read_text()

        found = ray.get(
            [
                where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(hosts[w], soft=False)).remote()
                for w in (0, 1)
            ]
        )
    finally:
        ray.shutdown()
        assert emu.stop() == []
        assert [p for p in pids if psutil.pid_exists(p)] == []
    (cwd0, text0), (cwd1, text1) = found
    assert text0 == text1 == "bundle\n"
    assert "/runtime_resources/train-spot-0-0/working_dir_files/" in cwd0
    assert "/runtime_resources/train-spot-0-1/working_dir_files/" in cwd1
