"""The preemption notice, as the train worker pods render it (docs/capacity.md, "The notice").

GKE: "Spot VMs terminate 30 seconds after receiving a termination notice"; with graceful node
shutdown (on by default) the kubelet then terminates the node's Pods, non-system Pods first
(https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms, "Termination and graceful
shutdown of Spot VMs"). Maintenance of TPU hosts is not live-migrated: the slice is interrupted
and its Pods are terminated the same way
(https://cloud.google.com/kubernetes-engine/docs/concepts/handle-disruption-gpu-tpu).

Termination runs the container's preStop hook first and sends SIGTERM when it returns, all
within `terminationGracePeriodSeconds`. The hook rendered here turns that window into Ray's own
signal: `ray drain-node` (ray 2.60.0 python/ray/scripts/scripts.py; the node defaults to the
one the command runs on) marks this Ray node as draining with reason PREEMPTION and a deadline;
Ray Train's PreemptionWatcher sees the drain and `ray.train.get_preemption_info()` tells the
training loop, which saves a checkpoint at once (ray_apps/elastic.py). The hook then holds the
container until the deadline, so the workers keep running while they save; SIGTERM follows.
"""

from __future__ import annotations

from typing import Any

# The window a spot preemption gives the VM (GKE Spot VMs page above).
SPOT_NOTICE_S = 30
# Seconds of the grace period kept after the drain deadline for Ray's graceful exit on SIGTERM.
EXIT_MARGIN_S = 5
DRAIN_REASON = "DRAIN_NODE_REASON_PREEMPTION"


def drain_command(grace_s: int) -> list[str]:
    """The preStop command: drain this Ray node with the deadline, then wait it out."""
    deadline = max(grace_s - EXIT_MARGIN_S, 1)
    script = (
        f"ray drain-node --reason {DRAIN_REASON} "
        f"--reason-message 'pod terminating (GKE preemption or maintenance notice)' "
        f"--deadline-remaining-seconds {deadline} || true; sleep {deadline}"
    )
    return ["/bin/sh", "-c", script]


def apply(pod_spec: dict[str, Any], grace_s: int = SPOT_NOTICE_S) -> None:
    """Give a train worker pod the grace period and the drain-on-notice preStop hook."""
    pod_spec["terminationGracePeriodSeconds"] = grace_s
    for container in pod_spec["containers"]:
        container["lifecycle"] = {"preStop": {"exec": {"command": drain_command(grace_s)}}}
