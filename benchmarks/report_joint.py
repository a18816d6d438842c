"""docs/benchmarks.md's joint-substrate section, from benchmarks/bench_joint_substrate.py's JSON
(report.py calls it)."""

from __future__ import annotations

from typing import Any

JOINT_HEADING = "## Prod's RayJob on the joint substrate (`benchmarks/bench_joint_substrate.py`)"


def _tried(run: dict[str, Any]) -> str:
    return ", then ".join(
        f"{shape} {'granted' if granted else 'not granted'} after {waited:g} s" for shape, granted, waited in run["tried"]
    )


def joint_section(d: dict[str, Any] | None, path: str) -> list[str]:
    lines = [JOINT_HEADING, ""]
    if d is None:
        return [*lines, f"Not measured (no `{path}`).", ""]
    available, fallen, preempted = d["first_shape_available"], d["first_shape_out_of_stock"], d["slice_preemption"]
    lines += [
        "The rendered prod RayJob (two slices of four hosts; v6e 4x4, then v5e 4x4) applied to the real API server "
        "and KubeRay operator; Ray's own autoscaler v2 and KubeRay provider add the slices the capacity chain's "
        "driver demands; the pods run on the emulated GKE nodes (docs/testing.md). Three runs on one substrate, "
        f"in this order, a chain step's deadline {d['slice_deadline_s']:g} s (`--slice-deadline-s`); the substrate "
        f"took {d['substrate_start_s']:g} s to start; 1-minute load average {d['machine']['load_1m']:.1f} at the end.",
        "",
        "| run | measured | seconds | shape trained on | chain |",
        "|---|---|---|---|---|",
        f"| first shape available (two spot v6e slices in stock) | RayJob created → first training step | "
        f"{available['created_to_first_step_s']:g} | {available['shape']} | {_tried(available)} |",
        f"| first shape out of stock on every tier (two on-demand v5e slices) | RayJob created → first training step | "
        f"{fallen['created_to_first_step_s']:g} | {fallen['shape']} | {_tried(fallen)} |",
        f"| one of two v6e slices preempted after step {preempted['preempted_after_step']} (nodes and pods deleted) | "
        f"preemption → next step (observed) | {preempted['preemption_to_next_step_observed_s']} | TPU-V6E:4x4:4:4 | "
        f"resumed at step {preempted['resumed_at_step']}, {preempted['pods_deleted']} pods deleted |",
        "",
        f"The run's own goodput record puts the recovery (loss to the first step beyond the one reached) at "
        f"{preempted['preemption_to_next_step_goodput_s']} s. Of the fall-through's "
        f"{fallen['created_to_first_step_s']:g} s, {fallen['tried'][0][2]:g} s are the first shape's wait: nothing of "
        "that shape comes up, so the chain waits out its deadline before asking for the next.",
        "",
    ]
    return lines
