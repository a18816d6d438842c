"""`tpuray images STACK [--json]`: the images the stack runs, how to build them and where they go.

The deploy workflow reads `--json` to build and push each image (docs/ci.md), then hands
the pushed digests to `pulumi up` as tpuray:images.digests.<name>.
"""

from __future__ import annotations

import argparse
import json

from tpuray import images, terminal
from tpuray.config.checks import load_stack


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("images", help="the images a stack runs: Dockerfile, build args, target, digest")
    p.add_argument("stack", help="a stack name in stacks/ or a path to a Pulumi.<name>.yaml")
    p.add_argument("--json", action="store_true", help="print the build plan as JSON (for the deploy workflow)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    cfg = load_stack(args.stack)
    if args.json:
        print(json.dumps(images.build_plan(cfg), indent=2))
        return 0
    console = terminal.console(soft_wrap=True)
    for workload, ref in images.workload_images(cfg).items():
        console.print(f"{workload}: {ref.describe(cfg.images.repository)}")
    return 0
