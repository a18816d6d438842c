"""`tpuray demo [STACK]`: the whole path on this machine, no cloud.

`tpuray doctor` first (it stops the demo with its advice when something blocks), then the
offline preview (with the policy pack), the emulated slices up, a short training run on
one emulated slice (loss must go down), a query to the serve app, and the emulator down,
even when a step fails.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from tpuray import emulator
from tpuray.cli import UserError

DEMO_STEPS = 40


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="preview, emulator up, train, serve, emulator down (what `make demo` runs)")
    p.add_argument("stack", nargs="?", default="dev")
    p.add_argument("--steps", type=int, default=DEMO_STEPS, help=f"training steps (default {DEMO_STEPS})")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tpuray import localrun
    from tpuray.commands import doctor, local, preview
    from tpuray.mockrun import run_stack

    console = Console(highlight=False)
    console.print(Rule("tpuray doctor: what the demo needs"))
    doctor.run(argparse.Namespace(stack=args.stack))  # stops here, with its advice, when a check blocks
    console.print(Rule(f"1/5 offline preview of stack {args.stack}"))
    code = preview.run(argparse.Namespace(stack=args.stack, json=False))
    if code != 0:
        raise UserError(f"the {args.stack} preview has mandatory policy violations; fix them first", code=code)

    console.print(Rule("2/5 emulated TPU slices up"))
    local.run_up(argparse.Namespace(stack=args.stack, max_hosts=None, dashboard=True, dry_run=False))
    stack = run_stack(args.stack)
    cluster = emulator.EmulatedCluster.attach(emulator.state_dir_for(stack.stack))
    try:
        # The demo trains from scratch: drop an earlier demo's checkpoints of this run.
        job = localrun.job_for_emulator(localrun.rendered(stack, "RayJob"), localrun.gcs_root())
        storage, run_name = job.argument("--storage-uri"), job.argument("--run-name")
        if storage and run_name and Path(storage, run_name).is_dir():
            shutil.rmtree(Path(storage, run_name))
            console.print(f"removed the previous demo run at {Path(storage, run_name)}")
        console.print(Rule(f"3/5 training {args.steps} steps on one emulated slice"))
        train = localrun.run_train(cluster, stack, console, args.steps, timeout_s=900)
        losses = train.get("loss_by_step", {})
        if len(losses) < 2 or list(losses.values())[-1] >= list(losses.values())[0]:
            raise UserError(f"loss did not go down: {losses}", code=1)
        console.print(f"[bold green]loss went down[/]: {', '.join(f'step {k}: {v:.4f}' for k, v in losses.items())}")

        console.print(Rule("4/5 serving the trained checkpoint and querying it"))
        served = localrun.run_serve(cluster, stack, console, None, timeout_s=300)
        console.print(
            f"[bold green]served[/]: predictions {served['response']['predictions']} "
            f"from the step {served['response']['model_step']} checkpoint"
        )
    finally:
        console.print(Rule("5/5 emulated TPU slices down"))
        local.run_down(argparse.Namespace(stack=stack.stack))
    return 0
