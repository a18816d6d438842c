"""`tpuray local up|status|down`: a local Ray cluster that emulates the stack's TPU slices.

See the tpuray.local.emulator package for how hosts are emulated. The cluster runs detached from `up`
and is found again through its state file under $TPURAY_LOCAL_DIR/<stack>
(default /tmp/tpuray-local/<stack>).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TimeElapsedColumn
from rich.table import Table

from tpuray import terminal
from tpuray.config import resolve_stack_file
from tpuray.errors import UserError
from tpuray.local import emulator, localmetrics
from tpuray.preview.mockrun import run_stack


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("local", help="run a local Ray cluster that emulates the stack's TPU slices")
    local = p.add_subparsers(dest="local_command", required=True, metavar="ACTION")

    up = local.add_parser("up", help="start the emulated cluster (detached)")
    up.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml) or path")
    up.add_argument(
        "--max-hosts",
        type=int,
        default=None,
        help="emulate at most N TPU hosts (default: what half the free memory holds, ~300 MB each)",
    )
    up.add_argument(
        "--no-dashboard",
        dest="dashboard",
        action="store_false",
        help="skip the Ray dashboard on 127.0.0.1 (it serves the Jobs and Serve REST APIs that `local run` uses)",
    )
    up.add_argument(
        "--metrics",
        action="store_true",
        help="also start Prometheus on 127.0.0.1, scraping Ray's metrics with the stack's alert rules (docs/observability.md)",
    )
    up.add_argument(
        "--without-fallbacks",
        action="store_true",
        help="emulate only the slices each worker group starts with (its replicas), not the fallback tiers "
        "(what `tpuray demo` starts)",
    )
    up.add_argument("--dry-run", action="store_true", help="print the plan, start nothing")
    up.set_defaults(handler=run_up)

    run = local.add_parser("run", help="run the stack's rendered RayJob (train, data) or RayService (serve) here")
    run.add_argument("workload", choices=("train", "data", "serve"))
    run.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml) or path; its cluster must be up")
    run.add_argument("--steps", type=int, default=None, help="train: override the RayJob's --steps for a short run")
    run.add_argument(
        "--slices",
        type=int,
        default=None,
        help="train: one gang over this many whole slices of the shape (multi-slice; dev's full plan emulates 2)",
    )
    run.add_argument("--rows", type=int, default=4096, help="data: rows to generate when the data location is empty")
    run.add_argument(
        "--request",
        default=None,
        help="serve: JSON body for POST /predict, or /v1/chat/completions for an llm stack (default: a sample)",
    )
    run.add_argument(
        "--serve-port",
        type=int,
        default=None,
        help="serve: Serve's HTTP port on 127.0.0.1 (default 8000; another one while something else holds 8000)",
    )
    run.add_argument("--timeout", type=float, default=900, help="seconds before the run is stopped (default 900)")
    run.add_argument(
        "--bundle",
        type=Path,
        default=None,
        help="run this bundle zip instead of the one built from ray_apps/ (uploaded under its own content hash)",
    )
    run.add_argument(
        "--explain",
        action="store_true",
        help="list every rewrite of the rendered object, with its reason, and run nothing",
    )
    run.set_defaults(handler=run_workload)

    for name, handler, text in (
        ("status", run_status, "show slices, hosts and what each holds"),
        ("down", run_down, "stop the emulated cluster (only its own processes)"),
    ):
        q = local.add_parser(name, help=text)
        q.add_argument("stack", nargs="?", default=None, help="stack name (default: the only running emulated cluster)")
        if name == "status":
            q.add_argument("--json", action="store_true", help="print JSON")
            q.add_argument("--wide", action="store_true", help="all columns, no 100-column limit")
        q.set_defaults(handler=handler)


def run_workload(args: argparse.Namespace) -> int:
    from tpuray.local import localrun

    console = terminal.console()
    name, _ = resolve_stack_file(args.stack)
    sdir = emulator.state_dir_for(name)
    if not args.explain and not (sdir / emulator.STATE_FILE).exists():  # before the seconds of rendering
        raise UserError(f"no emulated cluster for stack {name!r}; start one with `tpuray local up {name}`")
    stack = run_stack(args.stack)
    if args.explain:
        from tpuray.preview.explain import ignored

        cluster = emulator.EmulatedCluster.attach(sdir) if (sdir / emulator.STATE_FILE).exists() else None
        for line in localrun.explain(stack, args.workload, cluster):
            console.print(line, soft_wrap=True)
        console.print(f"tpuray local run {args.workload} {stack.stack}: what the emulator ignores")
        for line in ignored(stack):
            console.print(f"  - {line}", soft_wrap=True)
        return 0
    cluster = emulator.EmulatedCluster.attach(sdir)
    if not cluster.state.dashboard_url:
        raise UserError("the emulated cluster runs without its dashboard; restart it without --no-dashboard")
    if args.workload == "train":
        result = localrun.run_train(cluster, stack, console, args.steps, args.timeout, args.bundle, slices=args.slices)
    elif args.workload == "data":
        result = localrun.run_data(cluster, stack, console, args.rows, args.timeout, args.bundle)
    else:
        try:
            request = json.loads(args.request) if args.request else None
        except json.JSONDecodeError as exc:
            raise UserError(f"--request: not valid JSON ({exc})") from None
        port = args.serve_port or localrun.SERVE_HTTP_PORT
        result = localrun.run_serve(cluster, stack, console, request, args.timeout, port, bundle_zip=args.bundle)
    console.print_json(json.dumps(result, default=str))
    return 0


def run_up(args: argparse.Namespace) -> int:
    return up(
        args.stack,
        args.max_hosts,
        dashboard=args.dashboard,
        dry_run=args.dry_run,
        metrics=args.metrics,
        without_fallbacks=args.without_fallbacks,
    )


def up(
    stack_name: str,
    max_hosts: int | None = None,
    dashboard: bool = True,
    dry_run: bool = False,
    metrics: bool = False,
    without_fallbacks: bool = False,
) -> int:
    """Start the emulated cluster of a stack on 127.0.0.1 (`tpuray local up`); `without_fallbacks`:
    only the slices each worker group starts with (emulator.plan_slices' start_only)."""
    console = terminal.console()
    stack = run_stack(stack_name)  # the rendered objects: what GKE would run
    if max_hosts is not None and max_hosts < 1:
        raise UserError(f"--max-hosts {max_hosts} is invalid; it must be at least 1")
    plan = emulator.plan_slices(stack, max_hosts, start_only=without_fallbacks)
    for note in plan.notes:
        console.print(terminal.styled(("reduced:", "yellow"), f" {note}"))
    console.print(
        f"emulating {len(plan.slices)} slice(s), {plan.hosts} TPU host(s) "
        f"(~{(plan.hosts * emulator.HOST_MEMORY_BYTES + emulator.HEAD_MEMORY_BYTES) / 2**30:.1f} GiB)"
    )
    for s in plan.slices:
        console.print(
            f"  {s.name}: {s.shape.generation} {s.shape.topology} ({s.shape.pod_type}), {s.shape.hosts} host(s) x "
            f"{s.shape.chips_per_host} chips, market {s.market_type}"
        )
    if without_fallbacks:
        console.print("  (--without-fallbacks: no slice for the fallback tiers, which start with 0 replicas)")
    if metrics and not dashboard:
        raise UserError("--metrics needs the Ray dashboard (it writes Prometheus' target list); drop --no-dashboard")
    if dry_run:
        return 0
    sdir = emulator.state_dir_for(stack.stack)
    if (sdir / emulator.STATE_FILE).exists():
        old = emulator.EmulatedCluster.attach(sdir)
        if old.pids():
            raise UserError(
                f"an emulated cluster for {stack.stack!r} is already running ({old.address}); "
                f"`tpuray local down {stack.stack}` first"
            )
        old.stop()  # leftovers of a dead cluster: clear them
    with Progress(
        SpinnerColumn(),
        terminal.progress_text_column("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("starting head", total=plan.hosts + 1)

        def report(what: str, done: int, total: int) -> None:
            progress.update(task, completed=done, total=total, description=f"started {what}")

        try:
            cluster = emulator.launch_detached(
                plan, sdir, stack.stack, dashboard=dashboard, progress=report, delivery=True
            )
        except emulator.EmulatorError as exc:
            raise UserError(f"local cluster failed to start: {exc}") from None
        progress.update(task, description="ready")
    console.print(
        terminal.styled(
            ("ready", "green"),
            f": Ray at {cluster.address} (RAY_ADDRESS={cluster.address}, set RAY_AUTH_MODE=disabled); state in {sdir}",
        )
    )
    if metrics:
        try:
            prom = localmetrics.start(stack.config, sdir, cluster.state.ray_dir)
        except localmetrics.MetricsError as exc:
            raise UserError(f"Prometheus failed to start: {exc}") from None
        console.print(f"Prometheus at {prom.url} (PID {prom.pid}): Ray metrics and the stack's alert rules")
    console.print(f"stop it with: tpuray local down {stack.stack}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    cluster = emulator.find(args.stack)
    if not cluster.is_alive():
        raise UserError(
            f"the emulated cluster in {cluster.state_dir} is not running (head is gone); "
            f"`tpuray local down` clears what is left"
        )
    data = emulator.status_data(cluster)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    console = terminal.console()
    console.width = console.width if args.wide else min(console.width, 100)
    console.print(
        f"stack {data['stack']}: Ray at {data['address']}, {data['pids']} processes, state {data['state_dir']}"
    )
    for note in cluster.notes:
        console.print(terminal.styled(("reduced:", "yellow"), f" {note}"))
    for s in data["slices"]:  # type: ignore[union-attr]
        console.print(slice_table(s, wide=args.wide))
    for run, g in (data.get("goodput") or {}).items():  # type: ignore[union-attr]
        console.print(goodput_line(run, g))
    return 0


def goodput_line(run: str, g: dict) -> str:
    """A running training run's goodput so far and its badput causes (ray_apps/goodput.py)."""
    bad = ", ".join(f"{cause} {v:.0f}" for cause, v in g["badput_slice_s"].items() if v >= 0.5) or "none"
    return (
        f"run {run}: goodput {g['goodput']:.0%} of {g['allocated_slice_s']:.0f} slice-s held; badput (slice-s): {bad}"
    )


def slice_table(s: dict, wide: bool = False) -> Table:
    """One small table per slice: its hosts, free or busy, and what holds them (--wide adds node IDs)."""
    title = f"{s['slice']}: {s['generation']} {s['topology']}, {s['market_type']}"
    if "occupancy" in s:
        title += f", {s['occupancy']['chips_used']:g}/{s['occupancy']['chips']:g} chips used"
    last = s.get("last_step")
    if last:  # from the Prometheus of `tpuray local up --metrics`
        title += f", last step {last.get('step', 0):g} {time.time() - last.get('at', time.time()):.0f}s ago"
    table = Table(title=title, title_justify="left", expand=False)
    for col in ("host", "state", "TPU used", "held by") + (("node", "pool") if wide else ()):
        table.add_column(col, overflow="fold")
    for h in s["hosts"]:
        used = h["tpu_total"] - h["tpu_free"]
        state = "[red]down[/]" if not h["alive"] else ("busy" if used else "free")
        row = [
            str(h["worker_id"]),
            state,
            f"{used:g}/{h['tpu_total']:g}",
            ", ".join(h["holders"]) or ("-" if not used else "a task or actor"),
        ]
        if wide:
            row += [h["node_id"] or "-", s["pool"]]
        table.add_row(*row)
    return table


def run_down(args: argparse.Namespace) -> int:
    return down(args.stack)


def down(stack: str | None) -> int:
    """Stop the emulated cluster's processes by PID (`tpuray local down`)."""
    cluster = emulator.find(stack)
    before = cluster.pids()
    prom = localmetrics.load(cluster.state_dir)
    leftover = localmetrics.stop(cluster.state_dir) + cluster.stop()
    if prom is not None:
        before.append(prom.pid)
    if leftover:
        raise UserError(f"processes still running after SIGKILL: {', '.join(map(str, leftover))}")
    terminal.console().print(f"stopped {len(before)} processes of {cluster.state.name!r}; removed {cluster.state_dir}")
    return 0
