"""`tpuray demo [STACK]`: the whole path on this machine, no cloud.

`tpuray doctor` first (it stops the demo with its advice when something blocks), then the
offline preview (with the policy pack), the emulated slices up, a short training run on
one emulated slice (loss must go down), a query to the serve app, and the emulator down,
even when a step fails. It ends by writing out/demo/ (loss.png, summary.md) and the time
of each phase.

Quiet by default: the jobs' driver output (Ray Data progress, packaging messages, the
JSON result) goes to a log file under the emulator's state root, and the terminal shows
one live line per phase. `--verbose` streams the raw logs instead.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.rule import Rule

from tpuray import terminal
from tpuray.errors import UserError
from tpuray.local import emulator

DEMO_STEPS = 40
OUT_DIR = Path("out/demo")
TIMINGS_JSON = "timings.json"  # phase times and job milestones, for benchmarks/bench_demo.py
SAMPLES = re.compile(r"samples/s ([0-9.]+)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="preview, emulator up, train, serve, emulator down (what `make demo` runs)")
    p.add_argument("stack", nargs="?", default="dev")
    p.add_argument("--steps", type=int, default=DEMO_STEPS, help=f"training steps (default {DEMO_STEPS})")
    p.add_argument("--out", type=Path, default=OUT_DIR, help=f"where loss.png and summary.md go (default {OUT_DIR})")
    p.add_argument("--verbose", action="store_true", help="stream Ray's raw job logs to the terminal")
    p.add_argument(
        "--serve-port",
        type=int,
        default=None,
        help="Serve's HTTP port on 127.0.0.1 (default 8000; another one while something else holds 8000)",
    )
    p.set_defaults(handler=run)


class _LineTee:
    """A file for a rich Console: every line goes to the log, and to `on_line`."""

    def __init__(self, log: IO[str], on_line: Callable[[str], None]):
        self._log, self._on_line, self._buf = log, on_line, ""

    def write(self, text: str) -> int:
        self._log.write(text)
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self._on_line(line)
        return len(text)

    def flush(self) -> None:
        self._log.flush()

    def isatty(self) -> bool:
        return False


class Phases:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def time(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = time.monotonic() - t0


def log_path(stack: str) -> Path:
    """Under the emulator's state root, beside (not inside) the cluster's folder, which `down` removes."""
    return emulator.local_root() / "logs" / f"{stack}-demo.log"


@contextmanager
def job_console(console: Console, log: IO[str], verbose: bool, status: Any, steps: int) -> Iterator[Console]:
    """The console a job streams to: the terminal (--verbose) or the log with a live status line."""
    if verbose:
        yield console
        return
    from tpuray.local.localrun import LOSS_LINE

    def on_line(line: str) -> None:
        if match := LOSS_LINE.search(line):
            rate = SAMPLES.search(line)
            status.update(
                terminal.text(
                    f"training: step {match.group(1)} of {steps}, loss {float(match.group(2)):.4f}"
                    + (f", {float(rate.group(1)):.0f} samples/s" if rate else "")
                )
            )
        elif line.startswith("submitted "):
            status.update(terminal.text(f"{line.split(' to ')[0]}; waiting for the slice's workers"))
        elif "RUNNING" in line or "DEPLOYING" in line:
            status.update(terminal.text(f"serving: {line.strip()}"))

    yield terminal.console(file=_LineTee(log, on_line), width=160, color_system=None)  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    from tpuray.commands import doctor, local, preview
    from tpuray.cost.table import hours_per_month, range_text, stack_cost
    from tpuray.local import localrun
    from tpuray.local.demo_summary import DemoResult, train_hosts, write_outputs
    from tpuray.preview.mockrun import run_stack

    console = terminal.console()
    phases = Phases()
    with phases.time("doctor"):
        console.print(Rule("tpuray doctor: what the demo needs"))
        doctor.check(args.stack, args.serve_port)  # stops here, with its advice, when a check blocks
    with phases.time("preview"):
        console.print(Rule(f"1/5 offline preview of stack {args.stack}"))
        code = preview.preview(args.stack)
    if code != 0:
        raise UserError(f"the {args.stack} preview has mandatory policy violations; fix them first", code=code)

    with phases.time("emulator up"):
        console.print(Rule("2/5 emulated TPU slices up"))
        # Only the slices the stack's workloads start with: the demo never falls back to another tier.
        local.up(args.stack, without_fallbacks=True)
    stack = run_stack(args.stack)
    cluster = emulator.EmulatedCluster.attach(emulator.state_dir_for(stack.stack))
    logs = log_path(stack.stack)
    logs.parent.mkdir(parents=True, exist_ok=True)
    if not args.verbose:
        console.print(f"Ray job logs (driver and workers' output): {logs}")
    try:
        with logs.open("w") as log:
            # The demo trains from scratch: `local up` started an empty GCS emulator.
            console.print(Rule(f"3/5 training {args.steps} steps on one emulated slice"))
            with phases.time("train"), console.status(terminal.text("training: submitting the RayJob")) as status:
                with job_console(console, log, args.verbose, status, args.steps) as out:
                    train = localrun.run_train(cluster, stack, out, args.steps, timeout_s=900)
            losses = _step_losses(train) or train.get("loss_by_step", {})
            if len(losses) < 2 or list(losses.values())[-1] >= list(losses.values())[0]:
                raise UserError(f"loss did not go down: {losses}; logs in {logs}", code=1)
            used = train_hosts(train.get("placements", []))
            where = "".join(f" on {name} hosts {', '.join(ws)}" for name, ws in used.items())
            first, last = min(losses), max(losses)
            console.print(
                f"[bold green]loss went down[/]{where}: step {first}: {losses[first]:.4f} -> "
                f"step {last}: {losses[last]:.4f} ({phases.seconds['train']:.0f} s)"
            )

            console.print(Rule("4/5 serving the trained checkpoint and querying it"))
            with phases.time("serve"), console.status(terminal.text("serving: deploying serveConfigV2")) as status:
                with job_console(console, log, args.verbose, status, args.steps) as out:
                    served = localrun.run_serve(
                        cluster, stack, out, None, timeout_s=300, http_port=args.serve_port or localrun.SERVE_HTTP_PORT
                    )
            console.print(f"POST /predict {served['request']['instances']}")
            console.print(
                f"[bold green]served[/]: predictions {served['response']['predictions']} "
                f"from the step {served['response']['model_step']} checkpoint"
            )
    finally:
        with phases.time("emulator down"):
            console.print(Rule("5/5 emulated TPU slices down"))
            with suppress(OSError):  # a log copy never keeps the emulator up
                _keep_ray_logs(cluster, logs.parent / f"{stack.stack}-ray")
            local.down(stack.stack)

    low, high = stack_cost(stack.config).range()
    result = DemoResult(
        stack=stack.stack,
        slices=cluster.slices,
        losses=losses,
        placements=train.get("placements", []),
        served=served,
        cost_per_hour=range_text(low, high),
        cost_per_month=range_text(low, high, hours_per_month(), "mo"),
        logs=f"{logs} (jobs), {logs.parent / f'{stack.stack}-ray'} (Ray's session logs)",
        phases=dict(phases.seconds),
    )
    paths = write_outputs(result, args.out)
    timings = {
        "stack": stack.stack,
        "steps": args.steps,
        "hosts": sum(s.shape.hosts for s in cluster.slices),
        "phases_s": {k: round(v, 2) for k, v in phases.seconds.items()},
        "total_s": round(sum(phases.seconds.values()), 2),
        "train_milestones_s": train.get("milestones", {}),
        "serve_milestones_s": served.get("milestones", {}),
        "cpus": os.cpu_count(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    (args.out / TIMINGS_JSON).write_text(json.dumps(timings, indent=2) + "\n")
    console.print(Rule("done"))
    for line in timing_lines(timings):
        console.print(line, highlight=False)
    for path in [*paths, args.out / TIMINGS_JSON]:
        console.print(f"wrote {path}")
    return 0


def timing_lines(timings: dict[str, Any]) -> list[str]:
    """The phase times, then when each milestone of the training job and the Serve deploy came."""
    lines = ["phase times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings["phases_s"].items())]
    for what, key in (("training job", "train_milestones_s"), ("serving", "serve_milestones_s")):
        marks = timings.get(key) or {}
        if marks:
            lines.append(f"  {what}, seconds after submission: " + "; ".join(f"{k} {v:.0f}" for k, v in marks.items()))
    lines.append(
        f"total {timings['total_s']:.0f} s ({timings['cpus']} CPUs, load average {timings['load_average_at_end'][0]:.1f})"
    )
    return lines


def _step_losses(train: dict[str, Any]) -> dict[int, float]:
    """Every step's loss from the final checkpoint's history (the job prints one per checkpoint)."""
    ckpt = train.get("checkpoint")
    if not ckpt:
        return {}
    from ray_apps import checkpoints, model

    # On the GCS emulator (localrun.use_storage pointed this process at it) or a local folder.
    history = model.load_checkpoint(checkpoints.fetch(ckpt)).history
    return {int(h["step"]): float(h["loss"]) for h in history}  # last attempt wins


def _keep_ray_logs(cluster: emulator.EmulatedCluster, dest: Path) -> None:
    """Copy Ray's session logs out of the cluster's folder before `down` removes it."""
    source = Path(cluster.state.ray_dir, "session_latest", "logs")
    if not source.is_dir():
        return
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(source, dest, symlinks=False, ignore_dangling_symlinks=True, dirs_exist_ok=True)
