"""Ray's own autoscaler over emulated TPU slices: worker groups that scale from zero.

`EmulatedCluster.start(plan, autoscale=Autoscale(groups))` starts the head with an
autoscaling config built here (`autoscaling_config`). Ray's monitor process on the head then
runs Ray's autoscaler (v1 by default, `ray/autoscaler/_private/autoscaler.py`
StandardAutoscaler; `Autoscale(version=2)` turns on v2, `ray/autoscaler/v2/`) against
`slice_provider.SliceProvider`, a subclass of Ray's `FakeMultiNodeProvider`
(`ray/autoscaler/_private/fake_multi_node/node_provider.py`, pinned Ray 2.60.0), loaded as an
`external` provider.

What is modelled, and after which source:
- node types are the rendered TPU worker groups, as KubeRay's autoscaling config makes them
  (`ray/autoscaler/_private/kuberay/autoscaling_config.py`): resources per host
  `{CPU, TPU: chips per host, TPU-<pod type>-head: 1}`, `min_workers = minReplicas x
  numOfHosts`, `max_workers = maxReplicas x numOfHosts`;
- one scale-up of a group is one replica, a whole slice of `numOfHosts` hosts, created
  together (KubeRay creates a replica's pods together; `BatchingNodeProvider.terminate_node`
  removes the whole replica of a host it deletes, and so does `SliceProvider.terminate_node`);
- each host is started by `cluster.host_node_args` with `SliceSpec.host_env`: exactly what a
  pre-started emulated host gets, so Ray derives the same ray.io/tpu-* labels and gives
  `TPU-<pod type>-head` to worker 0 only;
- GKE's walk of the ComputeClass: a replica lands on the group's first tier (ComputeClass
  priority of its shape) that has capacity; the capacity file (`set_unavailable`) takes a
  (pod type, tier) away. A replica no tier can take raises `NodeLaunchException`, which Ray's
  autoscaler records as a failed launch and retries on its next update, as a Pending pod
  waits for GKE;
- preemption: a slice one of whose hosts died (`EmulatedCluster.kill_host`) is removed whole,
  and recreated as KubeRay's operator recreates the pods of a group's replicas
  (ray-project/kuberay docs/best-practice/worker-head-reconnection.md: a crashed worker "will
  be relaunched immediately"), on the first tier that has capacity then, or as soon as one has.

Not modelled: GKE's provisioning time (a slice starts in seconds), `capacityCheckWaitTimeSeconds`
(an unavailable tier is skipped at once), KubeRay's operator and its RayCluster `replicas` (the
provider plays them); docs/capacity.md, section 4, has the whole list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpuray import capacity
from tpuray.local.emulator.plan import SliceSpec, TpuGroup, emulated_groups
from tpuray.local.emulator.state import HostRecord
from tpuray.preview.mockrun import StackRun

CONFIG_FILE = "autoscaling.json"
CAPACITY_FILE = "capacity.json"  # (pod type, tier) pairs out of capacity; written by tests
PROVIDER_FILE = "provider.json"  # the slices the provider started, and its refusals
SCALE_TO_ZERO_FILE = "scale-to-zero"  # a request: delete every replica, recreate none
HEAD_NODE_TYPE = "ray.head.default"
PROVIDER_MODULE = "tpuray.local.emulator.slice_provider.SliceProvider"
UPDATE_INTERVAL_S = 1  # AUTOSCALER_UPDATE_INTERVAL_S (Ray's default is 5)
# Environment of the head, read by its monitor (ray/scripts/scripts.py sets the same two
# for `RAY_FAKE_CLUSTER=1 ray start --head`).
FAKE_HEAD_NODE_ID = "f" * 51 + "00000"


@dataclass(frozen=True)
class Autoscale:
    """Which worker groups Ray's autoscaler scales, and how fast it lets idle slices go."""

    groups: tuple[TpuGroup, ...]
    idle_timeout_s: float = 60.0  # KubeRay's default idleTimeoutSeconds
    version: int = 1  # Ray's autoscaler: 1 (StandardAutoscaler, the default) or 2 (opt-in)


def autoscale_for(run: StackRun, idle_timeout_s: float = 60.0, version: int = 1) -> Autoscale:
    """Every TPU worker group the stack renders, as Ray's autoscaler would scale it on GKE."""
    return Autoscale(tuple(emulated_groups(run)), idle_timeout_s, version)


def head_env(version: int = 1) -> dict[str, str]:
    v2 = {"RAY_enable_autoscaler_v2": "1"} if version == 2 else {}  # ray/cluster_utils.py AutoscalingCluster
    return {
        **v2,
        "RAY_FAKE_CLUSTER": "1",  # FakeMultiNodeProvider refuses to start without it
        "AUTOSCALER_UPDATE_INTERVAL_S": str(UPDATE_INTERVAL_S),
        "RAY_OVERRIDE_NODE_ID_FOR_TESTING": FAKE_HEAD_NODE_ID,
        "RAY_CLOUD_INSTANCE_ID": FAKE_HEAD_NODE_ID,
    }


def node_type(group: TpuGroup, host_cpus: int) -> dict[str, Any]:
    """A worker group as KubeRay's autoscaling config describes it (per host)."""
    shape = group.shape
    return {
        "resources": {"CPU": host_cpus, "TPU": shape.chips_per_host, f"TPU-{shape.pod_type}-head": 1},
        # The group's `labels` field, which KubeRay's autoscaling config gives the node type
        # (autoscaling_config.py `_get_labels_from_group_spec`): what a label selector matches.
        "labels": SliceSpec(group.name, group.pool, shape, "").host_labels(),
        "node_config": {},
        "min_workers": group.min_slices * shape.hosts,
        "max_workers": group.max_slices * shape.hosts,
    }


def autoscaling_config(
    spec: Autoscale, *, name: str, state_dir: str, ray_dir: str, gcs_address: str, host_cpus: int, fate_share: bool
) -> dict[str, Any]:
    """The cluster config Ray's monitor reads (`--autoscaling-config`)."""
    groups = {
        g.name: {"template": SliceSpec(g.name, g.pool, g.shape, "").as_json(), "tiers": [t.key for t in g.tiers]}
        for g in spec.groups
    }
    types = {g.name: node_type(g, host_cpus) for g in spec.groups}
    types[HEAD_NODE_TYPE] = {"resources": {"CPU": host_cpus}, "node_config": {}, "max_workers": 0}
    empty: dict[str, Any] = {}
    return {
        "cluster_name": name,
        "max_workers": sum(t["max_workers"] for t in types.values()),
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": spec.idle_timeout_s / 60,
        "provider": {
            "type": "external",
            "module": PROVIDER_MODULE,
            # Ray matches a provider node to its raylet by node id (the provider sets it).
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
            "gcs_address": gcs_address,
            "head_node_id": FAKE_HEAD_NODE_ID,
            # v2 launches a request's nodes in one call (as AutoscalingCluster configures it).
            "launch_multiple": spec.version == 2,
            "tpuray": {
                "state_dir": state_dir,
                "ray_dir": ray_dir,
                "host_cpus": host_cpus,
                "fate_share": fate_share,
                "groups": groups,
            },
        },
        "auth": {"ssh_user": "ray"},
        "available_node_types": types,
        "head_node_type": HEAD_NODE_TYPE,
        "file_mounts": empty,
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def write_config(config: dict[str, Any], state_dir: str | Path) -> Path:
    path = Path(state_dir) / CONFIG_FILE
    path.write_text(json.dumps(config, indent=2))
    return path


# -- capacity faults (written by a test or `tpuray local`, read by the provider per launch)
def set_unavailable(state_dir: str | Path, pairs: Iterable[tuple[str, str]]) -> None:
    """Take (pod type, tier) capacity away, e.g. ("v6e-16", "spot"); tier "*" is every tier.
    Replaces the previous set; an empty set gives every tier its capacity back."""
    path = Path(state_dir) / CAPACITY_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"unavailable": sorted([list(p) for p in pairs])}))
    tmp.replace(path)


def request_scale_to_zero(state_dir: str | Path) -> None:
    """Ask the provider to delete every replica it runs (and recreate none); it removes the
    request file once done."""
    (Path(state_dir) / SCALE_TO_ZERO_FILE).write_text("")


def unavailable(state_dir: str | Path) -> set[tuple[str, str]]:
    path = Path(state_dir) / CAPACITY_FILE
    if not path.is_file():
        return set()
    return {(a, b) for a, b in json.loads(path.read_text())["unavailable"]}


def has_capacity(pod_type: str, tier: str, out: set[tuple[str, str]]) -> bool:
    return (pod_type, tier) not in out and (pod_type, "*") not in out


def first_tier_with_capacity(
    tiers: Sequence[capacity.Tier], pod_type: str, out: set[tuple[str, str]]
) -> capacity.Tier | None:
    """Where GKE puts a replica: the first priority of the shape's ComputeClass with capacity."""
    return next((t for t in tiers if has_capacity(pod_type, t.key, out)), None)


@dataclass(frozen=True)
class ProviderRecord:
    """What the provider did, for tests and `tpuray local status` (provider.json)."""

    slices: list[SliceSpec]
    hosts: list[HostRecord]
    refused: list[dict[str, Any]]

    @classmethod
    def load(cls, state_dir: str | Path) -> ProviderRecord:
        from tpuray.local.emulator.state import ProcessRecord

        path = Path(state_dir) / PROVIDER_FILE
        if not path.is_file():
            return cls([], [], [])
        raw = json.loads(path.read_text())
        hosts = [HostRecord(**{**h, "processes": [ProcessRecord(**p) for p in h["processes"]]}) for h in raw["hosts"]]
        return cls([SliceSpec.from_json(s) for s in raw["slices"]], hosts, raw["refused"])
