"""docs/benchmarks.md's goodput section, from benchmarks/bench_goodput.py's JSON (report.py calls it)."""

from __future__ import annotations

from typing import Any

GOODPUT_HEADING = (
    "## Goodput under preemptions: elastic with the notice vs restart from checkpoint (`benchmarks/bench_goodput.py`)"
)
ARM_NAMES = {
    "elastic_with_notice": "(a) elastic, notice used",
    "restart_from_checkpoint": "(b) restart from last checkpoint",
}


def goodput_section(d: dict[str, Any] | None, path: str) -> list[str]:
    lines = [GOODPUT_HEADING, ""]
    if d is None:
        return [*lines, f"Not measured (no `{path}`).", ""]
    events = "; ".join(
        f"at step {e['at_step']}: a {e['notice_s']:g} s notice, back {e['back_after_s']:g} s after the kill"
        for e in d["schedule"]
    )
    lines += [
        f"{d['shape']} (emulated), {d['steps']} steps of at least {d['step_s']:g} s, a checkpoint every "
        f"{d['checkpoint_every']}; schedule drawn from seed {d['seed']}, the slice holding rank 0 each time: {events}. "
        f"Both arms ran in one invocation, one after the other, each on a fresh emulated cluster. (a) "
        "`--slices 2 --min-slices 1`, a checkpoint on the notice; (b) a fixed 2-slice run that ignores the notice "
        "and restarts from its last periodic checkpoint once both slices are whole again.",
        "",
    ]
    causes = list(next(iter(d["arms"].values()))["badput_slice_s"])
    header = ["arm", "goodput", "time to recover (s)", "slices over time", "run wall (s)", "slice-s held", "productive"]
    header += [f"{c} (slice-s)" for c in causes]
    rows = []
    for name, r in d["arms"].items():
        rows.append(
            [
                ARM_NAMES.get(name, name),
                f"{r['goodput']:.1%}",
                ", ".join(f"{t:g}" for t in r["time_to_recover_s"]) or "-",
                " → ".join(str(n) for n in r["slices_over_time"]),
                r.get("wall_s", "-"),
                r["allocated_slice_s"],
                r["productive_slice_s"],
                *(r["badput_slice_s"][c] for c in causes),
            ]
        )
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    lines += [
        "",
        f"Elastic with the notice: goodput {d['goodput_gain_points']:+.1f} points, {d['goodput_ratio']:.2f}x that of "
        "restart-from-checkpoint. Goodput is productive slice-seconds over slice-seconds held (ray_apps/goodput.py); "
        "time to recover runs from a loss until the run first completes a step beyond the one it had reached. "
        "Start-up dominates the badput here: a worker group takes tens of seconds to come up on 2 shared cores "
        f"(JAX distributed, the Ray Data pipeline), against {d['step_s']:g} s per step.",
        "",
    ]
    for name, r in d["arms"].items():
        notices = r.get("notice_checkpoints") or []
        if notices:
            saved = ", ".join(
                f"step {n['step']} ({'inside' if n['within_window'] else 'outside'} the window)" for n in notices
            )
            lines.append(
                f"{ARM_NAMES.get(name, name)}: checkpoints on the notice at {saved}; resumed from {r['resumed_from']}."
            )
        else:
            lines.append(f"{ARM_NAMES.get(name, name)}: no checkpoint on the notice; resumed from {r['resumed_from']}.")
    return [*lines, ""]
