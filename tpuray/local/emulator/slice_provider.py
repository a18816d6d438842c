"""The node provider Ray's autoscaler loads in its monitor process (tpuray/local/emulator/autoscale.py
says what it models and after which sources). Imports Ray at import time, so it lives apart
from the config code the CLI imports."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider
from ray.autoscaler.tags import TAG_RAY_USER_NODE_TYPE

from tpuray import capacity
from tpuray.local.emulator.autoscale import (
    PROVIDER_FILE,
    SCALE_TO_ZERO_FILE,
    ProviderRecord,
    first_tier_with_capacity,
    unavailable,
)
from tpuray.local.emulator.plan import SliceSpec
from tpuray.local.emulator.state import HostRecord

logger = logging.getLogger(__name__)
OPERATOR_INTERVAL_S = 1.0


# Runs inside Ray's monitor process: covered by tests/test_autoscale_emulated.py.
class SliceProvider(FakeMultiNodeProvider):
    """Ray's fake multi-node provider, one whole slice per scale-up of a TPU worker group."""

    def __init__(self, provider_config: dict[str, Any], cluster_name: str) -> None:
        super().__init__(provider_config, cluster_name)
        own = provider_config["tpuray"]
        self._state_dir = own["state_dir"]
        self._ray_dir = own["ray_dir"]
        self._host_cpus = int(own["host_cpus"])
        self._fate_share = bool(own["fate_share"])
        self._groups = {
            name: (SliceSpec.from_json(g["template"]), [capacity.by_key(k) for k in g["tiers"]])
            for name, g in own["groups"].items()
        }
        self._record = ProviderRecord([], [], [])
        self._counter: dict[str, int] = {}  # next replica index per group: names are never reused
        self._to_replace: list[str] = []  # groups whose preempted replica waits for capacity
        threading.Thread(target=self._operator, name="tpuray-operator", daemon=True).start()

    def _operator(self) -> None:
        """KubeRay's operator keeps each group's replicas: it recreates a replica that lost a
        pod, and GKE places it on the first tier with capacity (or it waits, Pending)."""
        while True:
            time.sleep(OPERATOR_INTERVAL_S)
            with self.lock, contextlib.suppress(Exception):
                self._reconcile()

    def _reconcile(self) -> None:
        request = Path(self._state_dir) / SCALE_TO_ZERO_FILE
        if request.is_file():  # a test's clean slate: every replica deleted, none recreated
            for name in sorted({n["slice"] for n in self._nodes.values() if "slice" in n}):
                self._remove_slice(name)
            self._to_replace.clear()
            request.unlink()
            return
        for name in sorted({n["slice"] for n in self._nodes.values() if "slice" in n and self._dead(n)}):
            group = next(n["tags"][TAG_RAY_USER_NODE_TYPE] for n in self._nodes.values() if n.get("slice") == name)
            logger.info("tpuray: slice %s lost a host (preempted): the whole replica is recreated", name)
            self._remove_slice(name)
            self._to_replace.append(group)
        for group in list(self._to_replace):
            template, tiers = self._groups[group]
            tier = first_tier_with_capacity(tiers, template.shape.pod_type, unavailable(self._state_dir))
            if tier is not None:
                self._to_replace.remove(group)
                self._start_slice(group, template, tier)

    @staticmethod
    def _dead(entry: dict[str, Any]) -> bool:
        raylets = entry["node"].all_processes.get("raylet", [])
        return any(info.process.poll() is not None for info in raylets)

    def create_node_with_resources_and_labels(
        self, node_config: dict[str, Any], tags: dict[str, str], count: int, resources: dict, labels: dict
    ) -> None:
        from ray.autoscaler.node_launch_exception import NodeLaunchException

        group = tags[TAG_RAY_USER_NODE_TYPE]
        template, tiers = self._groups[group]
        # `count` is in hosts (the autoscaler's nodes); a replica is a whole slice, so whole
        # replicas, rounded up. Ray's own KubeRay provider does NOT: it patches
        # `num_workers // numOfHosts` replicas (ray/autoscaler/v2/instance_manager/cloud_providers/
        # kuberay/cloud_provider.py, `_submit_scale_request`), so a demand for fewer hosts than a
        # slice patches nothing on KubeRay; tests/test_joint_autoscaler.py shows it with Ray's
        # provider against the real operator. This provider is what the issue-33 joint substrate
        # (tpuray/local/substrate/) is to replace.
        replicas = max(1, -(-count // template.shape.hosts))
        with self.lock:
            for _ in range(replicas):
                out = unavailable(self._state_dir)
                tier = first_tier_with_capacity(tiers, template.shape.pod_type, out)
                if tier is None:
                    self._record.refused.append({"group": group, "at": time.time(), "tiers": [t.key for t in tiers]})
                    self._save()
                    raise NodeLaunchException(
                        "no capacity",
                        f"no tier of {group} ({', '.join(t.key for t in tiers)}) has a {template.shape.pod_type} slice",
                        None,
                    )
                self._start_slice(group, template, tier)

    def _start_slice(self, group: str, template: SliceSpec, tier: capacity.Tier) -> None:
        import ray
        from ray.autoscaler.tags import (
            NODE_KIND_WORKER,
            STATUS_UP_TO_DATE,
            TAG_RAY_NODE_KIND,
            TAG_RAY_NODE_NAME,
            TAG_RAY_NODE_STATUS,
        )

        from tpuray.local.emulator.cluster import host_node_args, node_common_args
        from tpuray.local.emulator.processes import _environ, _records

        index = self._counter.get(group, 0)
        self._counter[group] = index + 1
        spec = replace(template, name=f"{group}-{index}", market_type=tier.market_type, tier=tier.key)
        logger.info("tpuray: starting slice %s on tier %s", spec.name, tier.key)
        for worker in range(spec.shape.hosts):
            node_id = self._next_hex_node_id()
            # The node id and cloud instance id tie the raylet to this provider node (as the fake
            # provider does).
            env = {
                **spec.host_env(worker),
                "RAY_OVERRIDE_NODE_ID_FOR_TESTING": node_id,
                "RAY_CLOUD_INSTANCE_ID": node_id,
            }
            args = host_node_args(spec, worker, self._host_cpus, node_common_args(self._ray_dir))
            params = ray._private.parameter.RayParams(
                **args, gcs_address=self._gcs_address, redis_address=self._gcs_address, env_vars=env
            )
            with _environ(env):
                node = ray._private.node.Node(params, head=False, shutdown_at_exit=False, spawn_reaper=self._fate_share)
            self._nodes[node_id] = {
                "tags": {
                    TAG_RAY_NODE_KIND: NODE_KIND_WORKER,
                    TAG_RAY_USER_NODE_TYPE: group,
                    TAG_RAY_NODE_NAME: node_id,
                    TAG_RAY_NODE_STATUS: STATUS_UP_TO_DATE,
                },
                "node": node,
                "slice": spec.name,
            }
            self._record.hosts.append(HostRecord(spec.name, worker, node_id, _records(node)))
        self._record.slices.append(spec)
        self._save()

    def terminate_node(self, node_id: str) -> None:
        """KubeRay deletes a multi-host replica as a whole (batching_node_provider.py)."""
        with self.lock:
            entry = self._nodes.get(node_id)
            if entry is not None:
                self._remove_slice(entry["slice"])

    def _remove_slice(self, name: str) -> None:
        """Delete a replica's hosts as KubeRay deletes its pods: the kubelet sends SIGTERM first
        and SIGKILL only after terminationGracePeriodSeconds (Kubernetes docs, "Termination of
        Pods"), and a raylet shuts down gracefully on SIGTERM (ShutdownRayletGracefully in
        Ray's src/ray/raylet), telling the GCS it is gone.
        A SIGKILL would leave the GCS to find the hosts dead by failed health checks, 15 s
        later (Ray's 3 s period x 5 failures): measured, a test's scale-to-zero took 21.5 s
        that way and 6.5 s this way. Ray falls back to SIGKILL after 1 s per process."""
        for node_id in [i for i, n in self._nodes.items() if n.get("slice") == name]:
            entry = self._nodes.pop(node_id)
            with contextlib.suppress(Exception):
                entry["node"].kill_all_processes(check_alive=False, allow_graceful=True)
        self._record.slices[:] = [s for s in self._record.slices if s.name != name]
        self._record.hosts[:] = [h for h in self._record.hosts if h.slice != name]
        self._save()

    def _save(self) -> None:
        path = Path(self._state_dir) / PROVIDER_FILE
        tmp = path.with_suffix(".tmp")
        rec = self._record
        tmp.write_text(
            json.dumps(
                {
                    "slices": [s.as_json() for s in rec.slices],
                    "hosts": [asdict(h) for h in rec.hosts],
                    "refused": rec.refused[-50:],
                    "pid": os.getpid(),
                    "python": sys.executable,
                }
            )
        )
        tmp.replace(path)
