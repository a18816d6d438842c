"""Prod's training RayJob on the joint substrate (tests/substrate.py): what
tests/test_joint_train.py asserts on and benchmarks/bench_joint_substrate.py times, in one place.

Prod's chain: v6e 4x4 (its ComputeClass `v6e-train` walks reservation, spot, on-demand), then
v5e 4x4 on demand; two slices of four hosts. The job is prod's as rendered, with the departures
`rayjob_for_substrate` names (JAX on CPU, fewer steps, a shorter chain deadline, no Kueue).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray_apps import contracts
from tests.substrate import JointSubstrate, apply_stack, container_log, custom, rayjob_for_substrate
from tpuray import capacity, catalog, labels
from tpuray.local.substrate import nodes, scheduler
from tpuray.preview.mockrun import StackRun
from tpuray.preview.render import manifests

NS = "ray"
JOB = "tpuray-prod-train"
CLASS = "v6e-train"  # prod's training pool's ComputeClass (both shapes)
SUBMITTER = "ray-job-submitter"
V6E = catalog.lookup("v6e", "4x4")
V5E = catalog.lookup("v5e", "4x4")
# Each chain step's wait (--slice-deadline-s), extended once when hosts of the shape join
# (ray_apps/chain.py): eight hosts take 60-120 s to join on two shared cores, and a host whose
# raylet misses Ray's 30 s registration wait under that load is replaced by the operator.
DEADLINE_S = 120.0


def start(crd_files: list[Path], workdir: Path, prod: StackRun) -> JointSubstrate:
    """The substrate with the system pool's node and prod's non-Ray objects applied, running."""
    joint = JointSubstrate.start(crd_files, workdir, storage=True)
    try:
        joint.add_nodes([], system=True)
        apply_stack(joint, manifests(prod), NS)
        joint.start_loop()
    except BaseException:
        joint.stop()
        raise
    return joint


def rayjob(prod: StackRun) -> dict[str, Any]:
    return next(o for o in manifests(prod) if o["kind"] == "RayJob")


@dataclass(frozen=True)
class Submitted:
    created_at: float  # time.time() when the RayJob was created


def submit(joint: JointSubstrate, prod: StackRun, run_name: str, **train_changes: Any) -> Submitted:
    """Apply prod's RayJob as run `run_name` (its own checkpoint folder: a run of the same name
    resumes from the last one's checkpoints, as on GKE)."""
    changes = {"checkpoint_every": 2, "slice_deadline_s": DEADLINE_S, "batch_size": 8, "run_name": run_name,
               **train_changes}  # fmt: skip
    job = rayjob_for_substrate(joint, rayjob(prod), **changes)
    created_at = time.time()
    joint.plane.apply(job)
    return Submitted(created_at)


def driver_log(joint: JointSubstrate, job: Submitted) -> str:
    """The driver's output, as the submitter's `ray job submit` follows it."""
    return container_log(joint, NS, JOB, SUBMITTER, since=job.created_at)


def wait_for_line(joint: JointSubstrate, job: Submitted, text: str, timeout_s: float) -> float:
    """time.time() when `text` first showed in the driver's output (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in driver_log(joint, job):
            return time.time()
        time.sleep(0.2)
    raise AssertionError(
        f"{text!r} not in the driver's output within {timeout_s:g} s: {driver_log(joint, job)[-3000:]}"
    )


def wait_for_result(joint: JointSubstrate, job: Submitted, timeout_s: float = 1200) -> dict[str, Any]:
    """The driver's result once the RayJob succeeded (and the submitter printed the result line)."""
    status = joint.wait(
        "the RayJob's end",
        lambda: (
            (s := custom(joint, "rayjobs", NS, JOB).get("status", {})).get("jobStatus")
            in ("SUCCEEDED", "FAILED", "STOPPED")
            and s
        ),
        timeout_s,
    )
    assert status["jobStatus"] == "SUCCEEDED", driver_log(joint, job)[-4000:]
    wait_for_line(joint, job, contracts.RESULT_PREFIX, 120)
    result = contracts.last_result(driver_log(joint, job))
    assert result is not None
    return result


def delete(joint: JointSubstrate) -> None:
    """Delete the RayJob and wait until its cluster's and submitter's pods are gone."""
    joint.kube.session.delete(f"{joint.plane.url}/apis/ray.io/v1/namespaces/{NS}/rayjobs/{JOB}", timeout=10)
    joint.wait("the job's pods gone", lambda: not joint.pods(NS) and not joint.runner.pods, 300)


def preempt_replica(joint: JointSubstrate, replica: str) -> list[str]:
    """GKE reclaims the slice replica `replica` (its TPU_NAME, e.g. train-v6e-16-1) runs on: that
    slice's nodes and their pods are deleted.

    Why a test preempts the highest replica: the TPU webhook's getReplicaIndex (ported in
    tpuray/local/substrate/tpu_webhook.py) gives a new replica the number of replicas it still
    sees; after replica 0 of two is lost that is 1, the index of the survivor, so two slices would
    share TPU_NAME (a finding of this substrate, docs/testing.md)."""
    pods = joint.pods(NS, f"{labels.TPU_WEBHOOK_REPLICA}={replica}")
    node = joint.kube.session.get(f"{joint.plane.url}/api/v1/nodes/{pods[0]['spec']['nodeName']}", timeout=10).json()
    return scheduler.preempt(joint.kube, node["metadata"]["labels"][labels.GKE_NODEPOOL], grace_s=5)


def take_out_of_stock(joint: JointSubstrate, pool: nodes.SlicePool) -> None:
    """Every slice of `pool` gone (nothing runs there): the shape is out of stock on that tier."""
    for index in range(pool.slices):
        scheduler.preempt(joint.kube, pool.pool_name(index), grace_s=5)


def node_tier(node: str) -> str:
    """The tier of an emulated node by its name (`nodes.SlicePool.pool_name` puts the tier's key
    in it); the nodes of a preempted slice are gone from the API server, their names are not."""
    return next(t.key for t in capacity.tiers() if f"-{t.key}-" in node)


def started_on(joint: JointSubstrate, since: float) -> dict[str, list[str]]:
    """The nodes each worker group's pods ran on, of the pods started since `since`."""
    out: dict[str, list[str]] = {}
    for pod in joint.runner.started:
        if pod["at"] >= since and pod["group"] not in ("", "headgroup"):
            out.setdefault(pod["group"], []).append(pod["node"])
    return {k: sorted(v) for k, v in out.items()}
