"""A local, real Ray cluster that looks like the stack's GKE TPU slices.

Each emulated TPU host is one raylet on 127.0.0.1 started with the environment GKE and
the KubeRay TPU webhook give a TPU pod; Ray itself then derives the ray.io/tpu-* labels and
the TPU-<pod type>-head resource exactly as on GKE, so the scheduling code under test is
not told anything a real cluster would not say.

The package, in the order data flows through it:
- `plan`: which slices to emulate for a stack's rendered worker groups (pure);
- `state`: the state file that records every PID, so `down` finds exactly them again;
- `processes`: finding and stopping recorded processes (psutil, by PID);
- `cluster`: `EmulatedCluster`, the running head and hosts (in-process or attached);
- `launcher`: `tpuray local up`'s detached launcher (`python -m tpuray.local.emulator launch`);
- `status`: finding a running cluster again and what its slices hold;
- `preemption`: a slice drained with a notice, preempted, and brought back.

Every slice is started up front, from the plan; the emulator scales nothing. Worker groups that
scale from zero, the capacity chain's shape fall-through and a preempted slice's replacement
run on the joint substrate instead (tests/substrate.py, docs/testing.md "The joint substrate"):
the real KubeRay operator with Ray's own autoscaler v2 and KubeRay provider.

Two ways to run it:
- in-process (`EmulatedCluster.start(plan, detach=False)`, tests): the raylets share the
  fate of this process through Ray's kernel fate-sharing, so a crashed test leaves
  nothing behind;
- detached (`tpuray local up`): the launcher starts the nodes without fate-sharing, records
  every PID in a state file and exits; `tpuray local down` kills exactly those process trees.
  Never `ray stop` or pkill: other Ray clusters may run on the same machine.

Shapes come from tpuray.catalog only (via the stack config's `.shape`).
"""

from tpuray.local.emulator.cluster import BASE_ENV, IMAGE_SITE, EmulatedCluster, ProgressFn
from tpuray.local.emulator.launcher import launch_detached
from tpuray.local.emulator.plan import (
    HEAD_MEMORY_BYTES,
    HOST_CPUS,
    HOST_MEMORY_BYTES,
    RUNTIME_ENV_DIR,
    EmulatorError,
    Plan,
    SliceSpec,
    TpuGroup,
    default_max_hosts,
    emulated_groups,
    max_hosts_for,
    plan_for,
    plan_slices,
    runtime_env_dir_name,
)
from tpuray.local.emulator.processes import kill_processes, marked_processes
from tpuray.local.emulator.state import (
    DEFAULT_ROOT,
    LOCAL_DIR_ENV,
    STATE_FILE,
    ClusterState,
    HostRecord,
    ProcessRecord,
    local_root,
    state_dir_for,
)
from tpuray.local.emulator.status import find, running_state_dirs, status_data

__all__ = [
    "BASE_ENV",
    "DEFAULT_ROOT",
    "HEAD_MEMORY_BYTES",
    "HOST_CPUS",
    "HOST_MEMORY_BYTES",
    "IMAGE_SITE",
    "LOCAL_DIR_ENV",
    "RUNTIME_ENV_DIR",
    "STATE_FILE",
    "ClusterState",
    "EmulatedCluster",
    "EmulatorError",
    "HostRecord",
    "Plan",
    "ProcessRecord",
    "ProgressFn",
    "SliceSpec",
    "TpuGroup",
    "default_max_hosts",
    "find",
    "kill_processes",
    "launch_detached",
    "local_root",
    "marked_processes",
    "max_hosts_for",
    "plan_for",
    "plan_slices",
    "runtime_env_dir_name",
    "running_state_dirs",
    "state_dir_for",
    "status_data",
    "emulated_groups",
]
