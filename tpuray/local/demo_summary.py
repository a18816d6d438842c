"""What the demo leaves behind in out/demo/: a loss curve (PNG) and a one-page summary.md.

`summary_markdown` is a pure function of the demo's results (DemoResult), so its content
is tested without a cluster; `write_outputs` adds the files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpuray.local.emulator import SliceSpec

LOSS_PNG = "loss.png"
SUMMARY_MD = "summary.md"


@dataclass(frozen=True)
class DemoResult:
    stack: str
    slices: list[SliceSpec]  # every emulated slice
    losses: dict[int, float]  # step -> loss, as the training job printed them
    placements: list[dict[str, Any]]  # ray_apps.train's per-rank records (slice, tpu_worker_id)
    served: dict[str, Any]  # localrun.run_serve's request and response
    cost_per_hour: str  # the preview's stack range, e.g. "$79.68/h to $105.60/h"
    cost_per_month: str
    logs: str  # where Ray's driver and worker logs went
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds


def train_hosts(placements: list[dict[str, Any]]) -> dict[str, list[str]]:
    """slice -> its hosts (TPU_WORKER_ID) that ran a Train worker, from the last attempt."""
    if not placements:
        return {}
    last = max(p["attempt"] for p in placements)
    out: dict[str, set[str]] = {}
    for p in placements:
        if p["attempt"] == last:
            out.setdefault(str(p["slice"]), set()).add(str(p["tpu_worker_id"]))
    return {s: sorted(ws, key=lambda w: int(w) if w.isdigit() else 0) for s, ws in sorted(out.items())}


def summary_markdown(result: DemoResult) -> str:
    train = train_hosts(result.placements)
    lines = [
        f"# tpuray demo: stack {result.stack}",
        "",
        f"The {result.stack} stack's rendered RayJob and RayService, run on a local Ray cluster that emulates its "
        "TPU slices (one raylet per TPU host, on 127.0.0.1).",
        "",
        "## Slices and hosts",
        "",
        "| slice | shape | hosts | market | used by |",
        "|---|---|---|---|---|",
    ]
    for s in result.slices:
        shape = f"{s.shape.generation} {s.shape.topology}" + (
            f" (reduced from {s.reduced_from})" if s.reduced_from else ""
        )
        used = f"training, hosts {', '.join(train[s.name])}" if s.name in train else "-"
        lines.append(
            f"| {s.name} | {shape} | {s.shape.hosts} x {s.shape.chips_per_host} chips | {s.market_type} | {used} |"
        )
    steps = sorted(result.losses)
    lines += ["", "## Training", ""]
    if steps:
        first, last = result.losses[steps[0]], result.losses[steps[-1]]
        lines += [
            f"{steps[-1]} steps; loss {first:.4f} at step {steps[0]} to {last:.4f} at step {steps[-1]} "
            f"({'down' if last < first else 'not down'}). Curve: [{LOSS_PNG}]({LOSS_PNG}).",
            "",
            f"![loss curve]({LOSS_PNG})",
        ]
    else:
        lines.append("no loss reported")
    response = result.served.get("response", {})
    lines += [
        "",
        "## Serving",
        "",
        f"POST /predict `{json.dumps(result.served.get('request'))}`",
        "",
        f"answered `{json.dumps(response.get('predictions'))}` from the step {response.get('model_step')} checkpoint.",
        "",
        "## Cost on GKE (from the preview)",
        "",
        f"{result.cost_per_hour} ({result.cost_per_month}): TPU chips only, from each pool's first capacity tier at "
        "minimum scale to its worst tier at maximum scale.",
        "",
        "## Logs",
        "",
        f"Ray's driver and worker logs: `{result.logs}`",
    ]
    if result.phases:
        lines += ["", "## Phase times", "", "| phase | seconds |", "|---|---|"]
        lines += [f"| {name} | {secs:.1f} |" for name, secs in result.phases.items()]
        lines.append(f"| total | {sum(result.phases.values()):.1f} |")
    return "\n".join(lines) + "\n"


def plot_loss(losses: dict[int, float], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    steps = sorted(losses)
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=100)
    ax.plot(steps, [losses[s] for s in steps], marker="o", markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (MSE)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_outputs(result: DemoResult, out_dir: Path) -> list[Path]:
    """out_dir/loss.png and out_dir/summary.md; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png, md = out_dir / LOSS_PNG, out_dir / SUMMARY_MD
    plot_loss(result.losses, png, f"tpuray demo ({result.stack}): training loss")
    md.write_text(summary_markdown(result))
    return [png, md]
