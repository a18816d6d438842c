"""Ray Train hook that keeps JaxTrainer's TPU gang on fully free slices, restarts included.

JaxTrainer with use_tpu=True reserves slices with Ray's SlicePlacementGroup, which first
claims some slice's `TPU-<pod type>-head` resource and then waits for that slice's hosts.
After a host of slice A dies (preemption, a crashed VM), A keeps its head resource on
worker 0; a restart can claim it and wait for the dead host, although slice B is free.

SliceGuardCallback runs in the Train controller around every worker-group start (the
first one and each FailureConfig restart): it fences the head resource of every slice that
is not fully free with ray_apps.slices.fence_all_but_free_slices, lets Ray reserve the
gang, and takes the fence down once the workers are placed (or the start failed). The slice
the previous attempt ran on is tried last, because right after a host dies Ray may still
show it alive. With too few free slices until the deadline, the start fails with
SliceUnavailableError (FailureConfig may retry it) instead of waiting silently.

Ray Train v2 exposes worker-group hooks only through WorkerGroupCallback, a DeveloperAPI
under ray.train.v2._internal (pinned: ray 2.60.0; see requirements.lock). RunConfig passes
callbacks that are not UserCallbacks straight to the controller.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from ray.train.v2._internal.execution.callback import WorkerGroupCallback

from ray_apps import chain, slices
from ray_apps.contracts import ShapeStep

logger = logging.getLogger(__name__)


def one_vm_problems(steps: list[ShapeStep]) -> list[str]:
    """The chain's multi-host shapes that Ray's SlicePlacementGroup reserves as one VM, asked
    of Ray itself: JaxTrainer creates it with no `chips_per_vm`
    (ray/train/v2/_internal/execution/worker_group/worker_group.py), so Ray takes the chips
    per host from the topology (`get_chips_per_host`: v5e and v6e 1x1, 2x2 and 2x4 are one
    VM). A 2-host v6e 2x4 slice then gets no slice-name gang label and its two workers may
    land on two slices: a gang that hangs instead of failing. tpuray's config refuses such a
    train pool (catalog.SliceShape.ray_reads_as_one_host); this is the same check where the
    job runs, for a hand-written entrypoint."""
    from ray._private.accelerators.tpu import get_chips_per_host
    from ray.util.tpu import get_tpu_version_from_type

    problems = []
    for step in steps:
        version = get_tpu_version_from_type(step.accelerator_type)
        ray_chips = get_chips_per_host(step.topology, version)
        if step.hosts_per_slice > 1 and ray_chips != step.chips_per_host:
            problems.append(
                f"{step.describe()}: Ray's SlicePlacementGroup reserves {step.topology} as one {ray_chips}-chip VM, "
                f"so the {step.hosts_per_slice} workers of the gang could land on different slices; use the one-VM "
                f"machine type of {step.topology} or a topology of more than {ray_chips} chips"
            )
    return problems


class SliceGuardCallback(WorkerGroupCallback):
    def __init__(
        self,
        *,
        topology: str,
        accelerator_type: str,
        hosts_per_slice: int,
        chips_per_host: int,
        deadline_s: float = 600.0,
    ) -> None:
        self.topology = topology
        self.accelerator_type = accelerator_type
        self.hosts_per_slice = hosts_per_slice
        self.chips_per_host = chips_per_host
        self.deadline_s = deadline_s
        self._fence: slices.SliceFence | None = None
        self.placed_on: list[list[str]] = []  # slices kept open for each start, in order

    @contextlib.contextmanager
    def on_worker_group_start(self) -> Iterator[None]:
        try:
            yield
        finally:
            # Workers placed, or the start failed: either way the fence must go.
            self._release()

    def before_worker_group_start(self, worker_group_context: Any) -> None:
        self._release()
        avoid = self.placed_on[-1] if self.placed_on else []
        num_slices = int(getattr(worker_group_context, "num_slices", 1) or 1)
        self._wait_with_demand(num_slices)
        fence = slices.fence_all_but_free_slices(
            self.topology,
            hosts=self.hosts_per_slice,
            chips_per_host=self.chips_per_host,
            num_slices=num_slices,
            accelerator_type=self.accelerator_type,
            avoid=avoid,
            deadline_s=self.deadline_s,
        )
        self._fence = fence
        self.placed_on.append(fence.kept)
        logger.info(
            "tpuray: gang start %d: slices kept free %s, fenced %s (%.1f s)",
            len(self.placed_on),
            fence.kept,
            fence.fenced,
            fence.waited_s,
        )
        print(f"tpuray slice guard: start {len(self.placed_on)} keeps {fence.kept} fences {fence.fenced}", flush=True)

    def _wait_with_demand(self, num_slices: int) -> None:
        """Until the shape has `num_slices` whole free slices, ask Ray for them (whole slices:
        chain.WholeSliceDemand), so an autoscaler scales a replica when the one a restart needs is gone (autoscaler v2 deletes
        a preempted replica instead of waiting for it to come back: docs/capacity.md). The
        demand is given back before the fence, so the gang's own placement group can take the
        head. Past the deadline: ChainExhaustedError, a SliceUnavailableError."""
        step = ShapeStep(self.accelerator_type, self.topology, self.hosts_per_slice, self.chips_per_host)
        chain.walk(
            [step],
            num_slices=num_slices,
            deadline_s=self.deadline_s,
            inventory=slices.slice_inventory,
            demand=chain.WholeSliceDemand(),
        )

    def _release(self) -> None:
        if self._fence is not None:
            with contextlib.suppress(Exception):
                self._fence.release()
            self._fence = None
